//! `fsbroker daemon --init`: writes the user's policy file, the one a daemon started for them
//! (`fsbroker daemon --ensure`) runs on: commented, with the `--root` directories given, or a
//! commented example of one; never over an existing file.

use super::CommonArgs;
use super::flags::split_root_arg;
use super::terminal::{err, out};
use crate::daemon::autostart;
use crate::policy::{Policy, RootEntry};
use std::io::{ErrorKind as IoKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::process::ExitCode;

/// 0 with where the file went and how to go on; 1 when it exists or cannot be written; 2 for
/// a usage error or a root that does not load.
pub(super) fn run(common: &CommonArgs) -> ExitCode {
    let extra: Vec<&str> = common
        .given()
        .into_iter()
        .filter(|f| !matches!(*f, "--root" | "--writable"))
        .collect();
    if !extra.is_empty() {
        err!(
            "fsbroker: --init writes a policy with the --root and --writable given, and takes \
             no other options (not {}): edit the file it writes for the rest",
            extra.join(", ")
        );
        return ExitCode::from(2);
    }
    let path = match autostart::user_policy() {
        Ok(p) => p,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    let text = match starter(common) {
        Ok(t) => t,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::from(2);
        }
    };
    // Checked as the daemon will load it, before anything is written.
    if let Err(e) = Policy::parse(&text, &path.display().to_string()) {
        err!("fsbroker: the policy would not load, so it was not written: {e}");
        return ExitCode::from(2);
    }
    if let Err(message) = write_new(&path, &text) {
        err!("fsbroker: {message}");
        return ExitCode::FAILURE;
    }
    let p = path.display();
    out!("wrote a starter policy to {p}");
    if common.roots.is_empty() {
        out!("it offers no directory yet: add a [[roots]] entry (an example is in it)");
    }
    out!("check it with:   fsbroker check-policy {p}");
    out!("start it with:   fsbroker daemon --policy {p}");
    out!("or let commands start it when they need it (fsbroker daemon --ensure)");
    ExitCode::SUCCESS
}

/// The file's text: the roots of the flags, with absolute paths (the file's own relative
/// paths would be taken against its directory, not the one `--init` ran in) and their mount
/// names spelled out.
fn starter(common: &CommonArgs) -> Result<String, String> {
    let mut roots = String::new();
    for arg in &common.roots {
        let (mount, path) = split_root_arg(arg);
        let path = std::path::absolute(&path)
            .map_err(|e| format!("--root {arg}: cannot make the path absolute: {e}"))?;
        let entry = match &mount {
            Some(m) => RootEntry::new(m, &path),
            None => RootEntry::unnamed(&path),
        };
        let mount = Policy::mount_of(&entry)
            .map_err(|e| format!("--root {arg}: {e}; name the mount: --root NAME={arg}"))?;
        let path = path
            .to_str()
            .ok_or_else(|| format!("--root {arg}: the path is not UTF-8, which TOML needs"))?;
        roots.push_str(&format!(
            "[[roots]]\npath = {}\nmount = {}\n{}\n",
            quoted(path),
            quoted(mount.as_str()),
            if common.writable {
                "access = \"write\"\n"
            } else {
                "# access = \"write\"   # read-only without it\n"
            }
        ));
    }
    if roots.is_empty() {
        roots.push_str(EXAMPLE_ROOT);
    }
    Ok(format!("{HEAD}{roots}{TAIL}"))
}

/// `s` as a TOML basic string.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Creates `path` with `text`, its missing directories 0700; never over an existing file.
fn write_new(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == IoKind::AlreadyExists => {
            return Err(format!(
                "{} exists, and --init never overwrites it: edit it (then `fsbroker reload` a \
                 running daemon), or move it away first",
                path.display()
            ));
        }
        Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
    };
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

const HEAD: &str = "\
# The policy of your fsbroker daemon: the directories MCP servers may reach through it, and
# who answers when a server asks for access. Written by `fsbroker daemon --init`.
#
# Check it with `fsbroker check-policy FILE`; a running daemon takes changes when the file
# is saved (or with `fsbroker reload`). Every key is described in policy/README.md of
# fsbroker's sources. Relative paths in this file are taken against its directory.

# The directories servers may reach, one [[roots]] entry each. Servers name a root's files
# MOUNT/REL/PATH; nothing outside the roots is ever opened.
";

const EXAMPLE_ROOT: &str = "\
# [[roots]]
# path = \"/home/me/projects/app\"
# mount = \"app\"          # servers name its files app/...
# access = \"write\"       # read-only without it

";

const TAIL: &str = "\
[consent]
# Who answers a server's files/consent request that no rule decides:
#   \"tty\"              asks on the daemon's terminal; a daemon in the background has none,
#                      so it denies there (the default: tty with a terminal, else deny)
#   \"command:PROGRAM\"  asks a program of yours (see policy/README.md, the command protocol)
#   \"auto\"             approves every path inside the roots
#   \"deny\"             refuses
# mode = \"deny\"
timeout_secs = 120

# Grants in force for every session without asking, such as reading a whole root:
# [[grants]]
# path = \"app\"
# access = \"read\"
";
