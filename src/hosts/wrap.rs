//! The rewrite of server entries to run through `fsbroker proxy --daemon`, and back.
//!
//! Wrapping replaces the `command` value with the broker's path and puts
//! `"proxy", "--daemon", ["--sandbox",] "--", ORIGINAL` in front of the first element of
//! `args`, ORIGINAL being the command's literal as it was written; an entry without `args`
//! gets one just after its command. Unwrapping reads the server's command from the wrapped
//! arguments and takes back exactly the text in front of it, so that a wrapped entry comes
//! back byte for byte. Each result is parsed again and the rewritten entries checked before
//! anything is written.

use super::argv::{Proxied, proxied};
use super::{ArgList, Format, Lit, Scope, Transport, sections};
use std::ops::Range;

/// What to do, and to which servers.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Unwrap instead of wrap.
    pub unwrap: bool,
    /// Wrap with `--sandbox`.
    pub sandbox: bool,
    /// The broker's binary, as the entry will run it (an absolute path).
    pub exe: String,
    /// Only these servers (all when empty).
    pub servers: Vec<String>,
}

/// What became of one server entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Rewritten to run through the proxy.
    Wrapped,
    /// Given back its own command.
    Unwrapped,
    /// Nothing to do: wrapped already (for `wrap`), or not wrapped (for `unwrap`).
    Unchanged(&'static str),
    /// Not rewritten, and why.
    LeftAlone(String),
}

/// The rewrite of one file: its new text and what became of each chosen entry.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The new text (the same text when nothing changed).
    pub after: String,
    /// Each chosen entry: its scope, its name and what became of it.
    pub changes: Vec<(Scope, String, Change)>,
}

/// The rewrite of `text` (in `format`, its servers at `keys`) that `options` asks for. An
/// error when the file does not parse, or when the result would not say what was meant.
pub(crate) fn plan(
    format: Format,
    text: &str,
    keys: &[(Scope, Vec<&str>)],
    options: &Options,
) -> Result<Plan, String> {
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut changes = Vec::new();
    // The argument lists the rewritten entries must have: (scope, name, command, args).
    let mut expected = Vec::new();
    for section in sections(format, text, keys)? {
        for entry in section.entries {
            if !options.servers.is_empty() && !options.servers.contains(&entry.name) {
                continue;
            }
            let change = match &entry.transport {
                Transport::Stdio {
                    command,
                    args,
                    add_args,
                } => {
                    let one = Stdio {
                        text,
                        command,
                        args: args.as_ref(),
                        add_args: *add_args,
                    };
                    let done = if options.unwrap {
                        one.unwrap(&mut edits)
                    } else {
                        one.wrap(options, &mut edits)
                    };
                    if let Ok(Some(argv)) = &done {
                        expected.push((section.scope.clone(), entry.name.clone(), argv.clone()));
                    }
                    match done {
                        Ok(Some(_)) if options.unwrap => Change::Unwrapped,
                        Ok(Some(_)) => Change::Wrapped,
                        Ok(None) if options.unwrap => Change::Unchanged("not wrapped"),
                        Ok(None) => Change::Unchanged("wrapped already"),
                        Err(why) => Change::LeftAlone(why),
                    }
                }
                Transport::Remote { .. } if options.unwrap => Change::Unchanged("not wrapped"),
                Transport::Remote { .. } => Change::LeftAlone(
                    "a remote server: not rewritten (run it as `fsbroker proxy --url URL` by hand)"
                        .into(),
                ),
                Transport::Unknown(why) => Change::LeftAlone(why.clone()),
            };
            changes.push((section.scope.clone(), entry.name, change));
        }
    }
    let after = apply(text, edits)?;
    check(format, &after, keys, &expected)?;
    Ok(Plan { after, changes })
}

/// One stdio entry of the text.
struct Stdio<'a> {
    text: &'a str,
    command: &'a Lit,
    args: Option<&'a ArgList>,
    add_args: (&'static str, &'static str),
}

impl Stdio<'_> {
    /// The entry's arguments, as strings.
    fn arg_values(&self) -> Vec<&str> {
        self.args
            .map(|a| a.items.iter().map(|l| l.value.as_str()).collect())
            .unwrap_or_default()
    }

    fn raw(&self, span: &Range<usize>) -> &str {
        self.text.get(span.clone()).unwrap_or("")
    }

    /// Adds the edits that wrap the entry; the command line it will have, or `None` when it
    /// runs through the proxy already.
    fn wrap(
        &self,
        options: &Options,
        edits: &mut Vec<(Range<usize>, String)>,
    ) -> Result<Option<Vec<String>>, String> {
        if proxied(&self.command.value, &self.arg_values()).is_some() {
            return Ok(None);
        }
        let mut prefix = vec![quote("proxy"), quote("--daemon")];
        if options.sandbox {
            prefix.push(quote("--sandbox"));
        }
        prefix.push(quote("--"));
        prefix.push(self.raw(&self.command.span).to_owned());
        edits.push((self.command.span.clone(), quote(&options.exe)));
        match self.args {
            Some(a) if !a.items.is_empty() => {
                let first = a.items[0].span.start;
                let sep = separator(self.raw(&(a.open..first)));
                let mut text = String::new();
                for p in &prefix {
                    text.push_str(p);
                    text.push(',');
                    text.push_str(&sep);
                }
                edits.push((first..first, text));
            }
            Some(a) => edits.push((a.open..a.open, prefix.join(", "))),
            None if self.add_args.0.is_empty() => {
                edits.pop();
                return Err("no `args` to put the proxy's arguments in".into());
            }
            None => {
                let at = self.command.span.end;
                let (before, after) = self.add_args;
                edits.push((at..at, format!("{before}[{}]{after}", prefix.join(", "))));
            }
        }
        let mut argv = vec![options.exe.clone(), "proxy".into(), "--daemon".into()];
        if options.sandbox {
            argv.push("--sandbox".into());
        }
        argv.push("--".into());
        argv.push(self.command.value.clone());
        argv.extend(self.arg_values().into_iter().map(str::to_owned));
        Ok(Some(argv))
    }

    /// Adds the edits that unwrap the entry; the command line it will have, or `None` when it
    /// does not run through the proxy.
    fn unwrap(
        &self,
        edits: &mut Vec<(Range<usize>, String)>,
    ) -> Result<Option<Vec<String>>, String> {
        let values = self.arg_values();
        let Some(Proxied { server, url, .. }) = proxied(&self.command.value, &values) else {
            return Ok(None);
        };
        let (Some(server), None, Some(a)) = (server, url, self.args) else {
            return Err("runs the proxy without a server command of its own".into());
        };
        let original = &a.items[server];
        edits.push((
            self.command.span.clone(),
            self.raw(&original.span).to_owned(),
        ));
        let first = a.items[0].span.start;
        if let Some(next) = a.items.get(server + 1) {
            edits.push((first..next.span.start, String::new()));
        } else {
            // No arguments of the server's own: take back the whole `args` when it is
            // exactly what a wrap adds, else leave it empty as it was.
            let (before, after) = self.add_args;
            let raws: Vec<&str> = a.items.iter().map(|l| self.raw(&l.span)).collect();
            let added = format!("{before}[{}]{after}", raws.join(", "));
            let at = self.command.span.end;
            if !before.is_empty() && self.raw(&(at..a.end)) == added {
                edits.push((at..a.end, String::new()));
            } else {
                edits.push((first..original.span.end, String::new()));
            }
        }
        let mut argv = vec![original.value.clone()];
        argv.extend(values[server + 1..].iter().map(|v| (*v).to_owned()));
        Ok(Some(argv))
    }
}

/// What goes after each inserted element's comma: a line break (CRLF where the file has
/// them) and the first element's indentation when the list has one element a line, else a
/// space.
fn separator(leading: &str) -> String {
    match leading.rfind('\n') {
        Some(i) => {
            let tail = &leading[i + 1..];
            let indent: String = tail
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect();
            let newline = if leading[..i].ends_with('\r') {
                "\r\n"
            } else {
                "\n"
            };
            format!("{newline}{indent}")
        }
        None => " ".into(),
    }
}

/// `s` as a string literal that is both JSON and a TOML basic string: quotes, backslashes
/// and control characters escaped.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` with `edits` made; an error when two overlap (one entry listed twice).
fn apply(text: &str, mut edits: Vec<(Range<usize>, String)>) -> Result<String, String> {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + edits.len() * 64);
    let mut at = 0;
    for (range, new) in edits {
        let kept = text
            .get(at..range.start)
            .ok_or("two rewrites of the same text: nothing written")?;
        out.push_str(kept);
        out.push_str(&new);
        at = range.end;
    }
    out.push_str(text.get(at..).ok_or("a rewrite past the end of the file")?);
    Ok(out)
}

/// Checks that `after` parses and that each rewritten entry runs what it was meant to.
fn check(
    format: Format,
    after: &str,
    keys: &[(Scope, Vec<&str>)],
    expected: &[(Scope, String, Vec<String>)],
) -> Result<(), String> {
    if expected.is_empty() {
        return Ok(());
    }
    let found = sections(format, after, keys)
        .map_err(|e| format!("the rewritten file would not parse ({e}): nothing written"))?;
    for (scope, name, argv) in expected {
        let entry = found
            .iter()
            .filter(|s| &s.scope == scope)
            .flat_map(|s| &s.entries)
            .find(|e| &e.name == name);
        let now = match entry.map(|e| &e.transport) {
            Some(Transport::Stdio { command, args, .. }) => {
                let mut v = vec![command.value.clone()];
                v.extend(
                    args.iter()
                        .flat_map(|a| a.items.iter().map(|l| l.value.clone())),
                );
                v
            }
            _ => Vec::new(),
        };
        if &now != argv {
            return Err(format!(
                "the rewrite of {name} would not run what it should: nothing written"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<(Scope, Vec<&'static str>)> {
        vec![(Scope::User, vec!["mcpServers"])]
    }

    fn options(unwrap: bool) -> Options {
        Options {
            unwrap,
            sandbox: false,
            exe: "/b/fsbroker".into(),
            servers: Vec::new(),
        }
    }

    #[test]
    fn a_list_of_crlf_lines_gets_crlf_lines_and_comes_back_the_same() {
        let text = "{\r\n \"mcpServers\": {\"s\": {\"command\": \"npx\", \"args\": [\r\n    \"-y\"\r\n  ]}}}\r\n";
        let wrapped = plan(Format::Json, text, &keys(), &options(false))
            .unwrap_or_else(|e| panic!("{e}"))
            .after;
        assert!(
            wrapped.contains("[\r\n    \"proxy\",\r\n    \"--daemon\",\r\n    \"--\",\r\n    \"npx\",\r\n    \"-y\"\r\n"),
            "{wrapped:?}"
        );
        let back = plan(Format::Json, &wrapped, &keys(), &options(true))
            .unwrap_or_else(|e| panic!("{e}"))
            .after;
        assert_eq!(back, text);
    }

    #[test]
    fn an_absent_or_empty_args_comes_back_as_it_was() {
        for text in [
            r#"{"mcpServers": {"s": {"command": "srv"}}}"#,
            r#"{"mcpServers": {"s": {"command": "srv", "args": [ ]}}}"#,
            "{\"mcpServers\": {\"s\": {\"args\": [],\n \"command\": \"srv\"}}}",
        ] {
            let wrapped = plan(Format::Json, text, &keys(), &options(false))
                .unwrap_or_else(|e| panic!("{e}"))
                .after;
            assert!(
                wrapped.contains(r#""proxy", "--daemon", "--", "srv""#),
                "{wrapped}"
            );
            let back = plan(Format::Json, &wrapped, &keys(), &options(true))
                .unwrap_or_else(|e| panic!("{e}"))
                .after;
            assert_eq!(back, text);
        }
    }
}
