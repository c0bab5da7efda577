//! What an interpreter runs, read from its arguments: the script of `python3 server.py`,
//! `node index.js` or `sh run.sh`, the module of `python3 -m NAME`, or code given inline
//! (`-c`, `-e`). Each interpreter's options that take a value are skipped with their value, so
//! that `python3 -W ignore server.py` runs `server.py`, not `ignore`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// The interpreters whose arguments are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Python,
    Node,
    Deno,
    Bun,
    Shell,
    Ruby,
    Perl,
}

/// What an interpreter's arguments say it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    /// A file, as the argument names it (relative to the working directory).
    Script(OsString),
    /// `python3 -m NAME`.
    Module(String),
    /// Code given on the command line.
    Inline(OsString),
    /// Nothing that can be told: standard input, or no argument.
    Nothing,
}

/// The interpreter a program's file name says it is: `python3.13`, `node`, `bash`...
pub(super) fn family(name: &str) -> Option<Family> {
    let python = name == "python"
        || name == "python3"
        || name
            .strip_prefix("python3.")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    Some(match name {
        _ if python => Family::Python,
        "node" | "nodejs" => Family::Node,
        "deno" => Family::Deno,
        "bun" => Family::Bun,
        "sh" | "bash" | "dash" | "zsh" => Family::Shell,
        "ruby" => Family::Ruby,
        "perl" => Family::Perl,
        _ => return None,
    })
}

/// How one interpreter reads its options.
struct Options {
    /// Options of one letter, which may be run together (`-Bu`).
    clusters: bool,
    /// Letters (or whole short options, without `clusters`) that take a value.
    valued: &'static [&'static str],
    /// Long options that take a value when not given one with `=`.
    valued_long: &'static [&'static str],
    /// Options whose value is code.
    inline: &'static [&'static str],
    /// A letter whose value is a module (`-m`).
    module: Option<&'static str>,
}

fn options(f: Family) -> Options {
    let o = |clusters, valued, valued_long, inline, module| Options {
        clusters,
        valued,
        valued_long,
        inline,
        module,
    };
    match f {
        Family::Python => o(
            true,
            &["W", "X"],
            &["--check-hash-based-pycs"],
            &["c"],
            Some("m"),
        ),
        Family::Node => o(
            false,
            &["-r", "-C"],
            &[
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
                "--conditions",
                "--title",
            ],
            &["-e", "-p", "-pe", "--eval", "--print"],
            None,
        ),
        Family::Deno => o(
            false,
            &["-c", "-L"],
            &["--config", "--import-map", "--log-level", "--lock"],
            &[],
            None,
        ),
        Family::Bun => o(
            false,
            &["-r"],
            &["--preload", "--cwd"],
            &["-e", "--eval", "-p", "--print"],
            None,
        ),
        // `-c` takes no value of its own: the code is the first operand (`sh -ec 'code'`).
        Family::Shell => o(true, &["o"], &["--rcfile", "--init-file"], &[], None),
        Family::Ruby => o(true, &["r", "I", "C", "E"], &[], &["e"], None),
        Family::Perl => o(true, &["I", "M", "m"], &[], &["e", "E"], None),
    }
}

/// What interpreter `f` runs, given its arguments (the program's name left out).
pub(super) fn target(f: Family, args: &[OsString]) -> Target {
    let opts = options(f);
    let mut shell_code = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let bytes = arg.as_bytes();
        let next = || args.get(i + 1).cloned();
        if bytes == b"--" {
            return positional(f, &args[i + 1..], shell_code);
        }
        if bytes == b"-" {
            return Target::Nothing;
        }
        if let Some(long) = bytes.strip_prefix(b"--") {
            let (name, value) = match long.iter().position(|b| *b == b'=') {
                Some(at) => (&bytes[..at + 2], Some(&long[at + 1..])),
                None => (bytes, None),
            };
            let name = String::from_utf8_lossy(name);
            if opts.inline.contains(&name.as_ref()) {
                return inline(value.map(|v| OsStr::from_bytes(v).to_owned()).or_else(next));
            }
            if value.is_none() && opts.valued_long.contains(&name.as_ref()) {
                i += 1;
            }
            i += 1;
            continue;
        }
        let is_option =
            bytes.len() > 1 && (bytes[0] == b'-' || (f == Family::Shell && bytes[0] == b'+'));
        if !is_option {
            return positional(f, &args[i..], shell_code);
        }
        let text = String::from_utf8_lossy(bytes).into_owned();
        if !opts.clusters {
            if opts.inline.contains(&text.as_str()) {
                return inline(next());
            }
            if opts.valued.contains(&text.as_str()) {
                i += 1;
            }
            i += 1;
            continue;
        }
        // A cluster of letters: the first that takes a value takes the rest of the cluster,
        // or the next argument when the cluster ends with it.
        let letters = &text[1..];
        for (at, c) in letters.char_indices() {
            let c = &letters[at..at + c.len_utf8()];
            let rest = &letters[at + c.len()..];
            let value = || {
                if rest.is_empty() {
                    next()
                } else {
                    Some(rest.into())
                }
            };
            if f == Family::Shell && c == "c" {
                shell_code = true;
            } else if f == Family::Shell && c == "s" {
                return Target::Nothing;
            } else if opts.inline.contains(&c) {
                return inline(value());
            } else if opts.module == Some(c) {
                return match value() {
                    Some(m) => Target::Module(m.to_string_lossy().into_owned()),
                    None => Target::Nothing,
                };
            } else if opts.valued.contains(&c) {
                if rest.is_empty() {
                    i += 1;
                }
                break;
            }
        }
        i += 1;
    }
    Target::Nothing
}

/// What the first operand `args[0]` names.
fn positional(f: Family, args: &[OsString], shell_code: bool) -> Target {
    let Some(first) = args.first() else {
        return Target::Nothing;
    };
    if shell_code {
        return Target::Inline(first.clone());
    }
    match (f, first.as_bytes()) {
        // `deno run [options] main.ts`, `bun run index.ts`: the script follows the subcommand.
        (Family::Deno | Family::Bun, b"run") => target(f, &args[1..]),
        (Family::Deno, b"eval") => inline(args.get(1).cloned()),
        _ => Target::Script(first.clone()),
    }
}

fn inline(code: Option<OsString>) -> Target {
    code.map_or(Target::Nothing, Target::Inline)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, args: &[&str]) -> Target {
        let f = family(name).unwrap_or_else(|| panic!("{name} is no interpreter"));
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        target(f, &args)
    }

    fn script(s: &str) -> Target {
        Target::Script(s.into())
    }

    #[test]
    fn the_script_is_the_first_operand_past_options_and_their_values() {
        assert_eq!(run("python3", &["server.py", "-x"]), script("server.py"));
        assert_eq!(
            run("python3.13", &["-W", "ignore", "-u", "s.py"]),
            script("s.py")
        );
        assert_eq!(run("python", &["-Xdev", "-Bu", "s.py"]), script("s.py"));
        assert_eq!(
            run("python3", &["--check-hash-based-pycs", "never", "s.py"]),
            script("s.py")
        );
        assert_eq!(run("python3", &["--", "-s.py"]), script("-s.py"));
        assert_eq!(
            run("node", &["-r", "dotenv/config", "--inspect", "index.js"]),
            script("index.js")
        );
        assert_eq!(
            run("node", &["--require=x", "index.js"]),
            script("index.js")
        );
        assert_eq!(
            run("sh", &["-e", "-o", "pipefail", "run.sh", "a"]),
            script("run.sh")
        );
        assert_eq!(run("bash", &["+o", "posix", "run.sh"]), script("run.sh"));
        assert_eq!(
            run(
                "deno",
                &["run", "--allow-read", "-c", "deno.json", "main.ts"]
            ),
            script("main.ts")
        );
        assert_eq!(run("bun", &["run", "index.ts"]), script("index.ts"));
        assert_eq!(
            run("ruby", &["-I", "lib", "server.rb"]),
            script("server.rb")
        );
        assert_eq!(run("perl", &["-Ilib", "-w", "s.pl"]), script("s.pl"));
    }

    #[test]
    fn modules_inline_code_and_standard_input_are_told_apart() {
        assert_eq!(
            run("python3", &["-m", "http.server", "8000"]),
            Target::Module("http.server".into())
        );
        assert_eq!(
            run("python3", &["-um", "pkg"]),
            Target::Module("pkg".into())
        );
        assert_eq!(
            run("python3", &["-c", "print(1)", "x.py"]),
            Target::Inline("print(1)".into())
        );
        assert_eq!(
            run("python3", &["-Ic", "print(1)"]),
            Target::Inline("print(1)".into())
        );
        assert_eq!(run("node", &["-e", "1"]), Target::Inline("1".into()));
        assert_eq!(run("node", &["--eval=2"]), Target::Inline("2".into()));
        assert_eq!(
            run("sh", &["-ec", "echo hi", "name"]),
            Target::Inline("echo hi".into())
        );
        assert_eq!(run("deno", &["eval", "3"]), Target::Inline("3".into()));
        assert_eq!(run("ruby", &["-e", "p 1"]), Target::Inline("p 1".into()));
        assert_eq!(run("python3", &["-"]), Target::Nothing);
        assert_eq!(run("sh", &["-s", "a"]), Target::Nothing);
        assert_eq!(run("python3", &["-u"]), Target::Nothing);
        assert_eq!(run("python3", &["-m"]), Target::Nothing);
    }

    #[test]
    fn interpreters_are_known_by_their_file_names() {
        for n in [
            "python",
            "python3",
            "python3.13",
            "node",
            "nodejs",
            "sh",
            "dash",
            "zsh",
            "bun",
        ] {
            assert!(family(n).is_some(), "{n}");
        }
        for n in ["python3.", "python3.x", "python2", "npx", "shx", ""] {
            assert!(family(n).is_none(), "{n}");
        }
    }
}
