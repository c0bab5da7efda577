//! The identity of a server the proxy starts, from its command: the program `execve` runs
//! (found as it finds it), its digest, and what it runs where it is an interpreter, a `#!`
//! script or a launcher. [`identify`] is shared with the identities of running processes
//! (`process.rs`), so that a server is known alike however it was reached.

use super::digests::{Digests, FileDigest};
use super::interpreters::{self, Target};
use super::{Identity, Program, Runs, launchers, procfs};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// A command the proxy starts.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// The argument vector, the program's name first.
    pub(crate) argv: Vec<OsString>,
    /// The directory it starts in.
    pub(crate) cwd: PathBuf,
    /// The `PATH` the program is looked up on.
    pub(crate) path_var: Option<OsString>,
    /// The device and inode of the program file the sandbox holds, when it holds one.
    pub(crate) pin: Option<(u64, u64)>,
}

/// What is known of a command, however it was found: by the proxy before it starts it, or
/// in `/proc` for a process that runs.
pub(super) struct View<'a> {
    pub(super) argv: &'a [OsString],
    pub(super) cwd: &'a Path,
    pub(super) path_var: Option<&'a OsStr>,
    /// The process that runs it (a launcher's package is found below it).
    pub(super) pid: Option<u32>,
}

/// The program's path, as `execve` (and `Command`) would find it: `program` itself against
/// `cwd` when it has a `/`, else the first executable regular file of that name on
/// `path_var`. Links are not followed: a virtual environment's `bin/python` stays its own.
pub(crate) fn resolve(program: &OsStr, cwd: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() {
        return None;
    }
    if program.as_bytes().contains(&b'/') {
        return Some(tidy(&cwd.join(program)));
    }
    std::env::split_paths(path_var?)
        .map(|d| tidy(&cwd.join(d).join(program)))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `path` without its `.` components (which name nothing): `..` is kept, since what it
/// climbs out of depends on links.
fn tidy(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}

/// The identity of the command `launch`, sealed. `pid` is the process the proxy started
/// for it, when it runs (a launcher's package is found below it, and the proxy's own
/// parents say where the server was launched from). Nothing fails: what cannot be read
/// stays empty, and a program that cannot be found keeps its name as given.
pub(crate) fn of_launch(launch: &Launch, pid: Option<u32>, digests: &mut Digests) -> Identity {
    let Some(arg0) = launch.argv.first() else {
        return Identity::blank().sealed();
    };
    let found = resolve(arg0, &launch.cwd, launch.path_var.as_deref());
    let path = found.clone().unwrap_or_else(|| PathBuf::from(arg0));
    let mut file = found.and_then(|p| digests.of(&p));
    if let (Some(pin), Some(f)) = (launch.pin, file.as_mut())
        && f.id != pin
    {
        // The sandbox holds another file than the name leads to now: something swapped it,
        // and the sandbox will not start it. Nothing of the new file is vouched for.
        tracing::warn!(program = %path.display(), "the program changed since the sandbox held it");
        f.digest.clear();
        f.head.clear();
    }
    let view = View {
        argv: &launch.argv,
        cwd: &launch.cwd,
        path_var: launch.path_var.as_deref(),
        pid,
    };
    let mut id = identify(&view, path, file, digests);
    if pid.is_some() {
        // The server's parent is this proxy: where it was launched from is the proxy's own
        // parents.
        id.launched_by = procfs::launched_by(std::process::id());
    }
    id.sealed()
}

impl Identity {
    /// The identity of the command `argv` started in `cwd`, its program looked up on this
    /// process's `PATH`, as `fsbroker proxy` computes it for a server it starts: for a
    /// library host that starts its server as a process of its own. `pid` is that process
    /// once it runs: a launcher's package (`npx`, `uvx`) is found only below it, and without
    /// it the identity holds the launcher's arguments alone. File digests are cached for the
    /// user, in `$XDG_STATE_HOME/fsbroker/digests.json` (else `~/.local/state/fsbroker/`).
    pub fn of_command<A: AsRef<OsStr>>(argv: &[A], cwd: &Path, pid: Option<u32>) -> Identity {
        let launch = Launch {
            argv: argv.iter().map(|a| a.as_ref().to_owned()).collect(),
            cwd: cwd.to_path_buf(),
            path_var: std::env::var_os("PATH"),
            pin: None,
        };
        let mut digests = Digests::open_default();
        let id = of_launch(&launch, pid, &mut digests);
        digests.save();
        id
    }
}

/// The identity (not yet sealed) of the command `view`, whose program was found at `path`
/// and is the file `file`.
pub(super) fn identify(
    view: &View<'_>,
    path: PathBuf,
    file: Option<FileDigest>,
    digests: &mut Digests,
) -> Identity {
    let mut id = Identity::blank();
    id.argv = view
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let program = Program {
        real: file
            .as_ref()
            .map_or_else(|| path.clone(), |f| f.real.clone()),
        digest: file.as_ref().map(|f| f.digest.clone()).unwrap_or_default(),
        path,
    };
    let names: Vec<String> = [&program.path, &program.real]
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    let args = view.argv.get(1..).unwrap_or_default();
    // Every file the arguments name, whatever the program and however its options read.
    id.arg_files = super::arguments::arg_files(args, view.cwd, digests);
    // A name is read before a `#!` line: `npx` is itself a node script, and a version
    // manager's `python3` a shell script, yet what they run is in their arguments.
    if let Some((launcher, requested)) = names.iter().find_map(|n| launchers::launcher(n, args)) {
        id.runs = Some(requested);
        id.installed = view
            .pid
            .and_then(|p| launchers::package(&launcher, p, digests));
    } else if let Some(f) = names.iter().find_map(|n| interpreters::family(n)) {
        id.runs = runs_of(interpreters::target(f, args), view.cwd, digests);
    } else if let Some(script) = file.as_ref().filter(|f| f.head.starts_with(b"#!")) {
        // The kernel hands a `#!` script to the interpreter its first line names: that is
        // the program, and the script is what it runs.
        if let Some(interpreter) = shebang(&script.head, view.cwd, view.path_var) {
            let held = digests.of(&interpreter);
            id.runs = Some(Runs {
                kind: "script".into(),
                path: Some(script.real.clone()),
                name: None,
                version: None,
                digest: script.digest.clone(),
            });
            id.program = Some(Program {
                real: held
                    .as_ref()
                    .map_or_else(|| interpreter.clone(), |f| f.real.clone()),
                digest: held.map(|f| f.digest).unwrap_or_default(),
                path: interpreter,
            });
            return id;
        }
    }
    id.program = Some(program);
    id
}

/// What an interpreter's [`Target`] is, its file read and digested.
fn runs_of(target: Target, cwd: &Path, digests: &mut Digests) -> Option<Runs> {
    let runs = |kind: &str| Runs {
        kind: kind.into(),
        path: None,
        name: None,
        version: None,
        digest: String::new(),
    };
    match target {
        Target::Script(s) => {
            let given = tidy(&cwd.join(&s));
            let (path, digest) = match digests.of(&given) {
                Some(f) => (f.real, f.digest),
                // A directory or an archive Python runs, or nothing yet: its place only.
                None => (
                    std::fs::canonicalize(&given).unwrap_or(given),
                    String::new(),
                ),
            };
            Some(Runs {
                path: Some(path),
                digest,
                ..runs("script")
            })
        }
        Target::Module(m) => Some(Runs {
            name: Some(m),
            ..runs("module")
        }),
        Target::Inline(code) => Some(Runs {
            digest: blake3::hash(code.as_bytes()).to_hex().to_string(),
            ..runs("inline")
        }),
        Target::Nothing => None,
    }
}

/// The interpreter a `#!` line (in `head`, a file's first bytes) names, found as the kernel
/// finds it; with `env`, the program `env` looks up on `path_var`, past its options
/// (`-S`, `-u NAME`) and assignments.
fn shebang(head: &[u8], cwd: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let mut words = line
        .split(u8::is_ascii_whitespace)
        .filter(|w| !w.is_empty());
    let interpreter = OsStr::from_bytes(words.next()?);
    if Path::new(interpreter).file_name() != Some(OsStr::new("env")) {
        return Some(tidy(&cwd.join(interpreter)));
    }
    while let Some(w) = words.next() {
        match w {
            b"-S" | b"-i" | b"-" | b"--ignore-environment" | b"--split-string" => {}
            b"-u" | b"--unset" | b"-C" | b"--chdir" => {
                words.next();
            }
            _ if w.starts_with(b"-S") => return resolve(OsStr::from_bytes(&w[2..]), cwd, path_var),
            _ if w.starts_with(b"-") || w.contains(&b'=') => {}
            _ => return resolve(OsStr::from_bytes(w), cwd, path_var),
        }
    }
    None
}

#[cfg(test)]
mod tests;
