//! The directories a local server's own command line names, said at start when no root holds
//! them.
//!
//! A server that reads the disk itself (the official filesystem server among them) serves what
//! its arguments name, whatever roots it is offered, and more will as roots leave the protocol
//! (revision 2026-07-28 deprecates them): `--root` neither confines nor audits what it opens
//! there, and under `--sandbox` it cannot open it at all and fails in ways that do not name
//! the cause. So each existing directory among the arguments that no root holds is named once,
//! with the `--root` that would hold it.

use std::path::{Path, PathBuf};

/// A directory the server's command line names: the argument as written and its real path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnDir {
    /// As written (the value, for `--option=VALUE`).
    pub(crate) given: String,
    /// Its real path.
    pub(crate) real: PathBuf,
}

impl std::fmt::Display for OwnDir {
    /// The directory as written, and its real path when that reads differently.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.given)?;
        if Path::new(&self.given) != self.real {
            write!(f, " ({})", self.real.display())?;
        }
        Ok(())
    }
}

/// The existing directories among `command`'s arguments (its program left out): an argument
/// that names one, or the value of an `--option=VALUE` that does, taken against `cwd` as the
/// server will take it. Each directory once.
pub(crate) fn own_dirs(command: &[String], cwd: &Path) -> Vec<OwnDir> {
    let mut out: Vec<OwnDir> = Vec::new();
    for arg in command.iter().skip(1) {
        let value = match arg.split_once('=') {
            Some((option, value)) if option.starts_with('-') => value,
            _ => arg.as_str(),
        };
        // An option, or nothing: what a server reads as a directory is neither.
        if value.is_empty() || value.starts_with('-') {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(cwd.join(value)) else {
            continue;
        };
        if real.is_dir() && !out.iter().any(|d| d.real == real) {
            out.push(OwnDir {
                given: value.to_owned(),
                real,
            });
        }
    }
    out
}

/// Of `dirs`, those outside every one of `places` (real paths, compared component by
/// component).
pub(crate) fn outside<'a>(dirs: &'a [OwnDir], places: &[PathBuf]) -> Vec<&'a OwnDir> {
    dirs.iter()
        .filter(|d| !places.iter().any(|p| d.real.starts_with(p)))
        .collect()
}

/// Says, at warn, which directories `command` names lie outside every one of `roots` (their
/// real paths), for a server started without `--sandbox`.
pub(crate) fn warn_outside_roots(command: &[String], roots: &[PathBuf]) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let dirs = own_dirs(command, &cwd);
    for d in outside(&dirs, roots) {
        tracing::warn!(
            "the server's command line names the directory {d}, which is not inside any root: \
             a server that serves files from it opens them itself, and --root neither confines \
             nor audits that; only --sandbox confines a server to its roots (it would then \
             need --root {})",
            d.real.display()
        );
    }
}

/// Says, at warn, which directories `command` names the sandbox does not let the server reach
/// (`reaches` says what it does), naming the `--root` that would.
pub(crate) fn warn_unreachable(command: &[String], reaches: impl Fn(&Path) -> bool) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    for d in own_dirs(command, &cwd) {
        if !reaches(&d.real) {
            tracing::warn!(
                "sandbox: the server's command line names the directory {d}, which is outside \
                 every root and everything the sandbox lets it reach: it cannot open it; to let \
                 it, add --root {} (with --writable for writing)",
                d.real.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_among_the_arguments_and_option_values_are_found_once() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        for d in ["a", "b"] {
            std::fs::create_dir(base.join(d)).unwrap();
        }
        std::fs::write(base.join("f"), "").unwrap();
        let command: Vec<String> = ["a", "-y", "f", "a", "--dir=b", "./a", "missing", "-x"]
            .map(str::to_owned)
            .to_vec();
        let found = own_dirs(&command, &base);
        // The program itself (`a`, first) is not an argument.
        let given: Vec<&str> = found.iter().map(|d| d.given.as_str()).collect();
        assert_eq!(given, ["a", "b"]);
        assert_eq!(outside(&found, &[base.join("a")]), vec![&found[1]]);
        assert!(outside(&found, std::slice::from_ref(&base)).is_empty());
    }
}
