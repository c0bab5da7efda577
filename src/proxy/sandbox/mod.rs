//! `fsbroker proxy --sandbox`: a local server, and everything it starts, runs under a
//! Landlock ruleset that lets it reach on disk only its roots, the system's runtime
//! directories, its own installation, a private temporary directory and what the user added.
//!
//! Most servers open files themselves and treat roots as a hint; for them the broker's
//! confinement is advisory. Landlock makes it the kernel's: a process restricts itself, and
//! the restriction holds for it and its descendants, across `execve`, and cannot be lifted.
//! The landlock crate forbids unsafe code, and a `pre_exec` hook would need it, so the
//! restriction is applied by a small helper: the proxy starts its own binary as
//! `fsbroker sandbox-exec`, which reads the profile from its environment, restricts itself,
//! and replaces itself with the server (`exec_helper`).
//!
//! Split by concern: `profile` computes what the server may reach (from the roots, the
//! options and the command), `launcher` finds a server's installation and the caches its
//! launcher needs, and `enforce` turns a profile into Landlock rules and says what the kernel
//! cannot enforce. This file starts the helper and ends the server when the roots it was
//! started with are narrowed.

mod caps;
mod enforce;
mod helper;
mod home;
mod launcher;
mod private;
mod privileges;
mod profile;
mod program;
mod reaper;
mod right;
mod roots;
mod trace;

pub(crate) use caps::Caps;

// What `fsbroker sandbox-exec` runs.
#[cfg(feature = "cli")]
pub(crate) use helper::exec_helper;

use crate::proxy::link::{Link, SpawnError, spawn_command};
use profile::Profile;
pub(crate) use roots::RootSource;
use roots::SandboxRoot;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;

/// The environment variable that carries the profile from the proxy to the helper. The
/// helper removes it before starting the server.
const PROFILE_VAR: &str = "FSBROKER_SANDBOX_PROFILE";

/// The environment variable that makes the sandbox act as if the kernel's Landlock ABI were
/// at most this version: to rehearse `--sandbox`'s refusal and `--sandbox=best-effort`'s
/// report on a newer kernel. It can only take protections away from what the kernel offers,
/// and only for a process whose environment the user controls anyway.
pub(crate) const ABI_CAP_VAR: &str = "FSBROKER_LANDLOCK_ABI";

/// How strictly `--sandbox` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum SandboxMode {
    /// Every protection of the profile is enforced, or the server is not started.
    Strict,
    /// The server starts with what the kernel can enforce; the rest is logged at warn.
    BestEffort,
}

/// Whether a sandboxed server may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum SandboxNet {
    /// The network is untouched (the default).
    Any,
    /// No TCP connections and no TCP binds (Landlock ABI 4 and later).
    None,
}

/// A directory (or file) the user adds to the profile with `--sandbox-allow PATH[:rw]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxAllow {
    /// The path.
    pub(crate) path: PathBuf,
    /// Read and write (`:rw`); otherwise read and execute.
    pub(crate) write: bool,
}

impl std::str::FromStr for SandboxAllow {
    type Err = String;

    /// `PATH`, `PATH:ro` or `PATH:rw`; a path that itself ends in `:rw` is written `PATH:rw:ro`.
    fn from_str(s: &str) -> Result<SandboxAllow, String> {
        let (path, write) = match s.rsplit_once(':') {
            Some((p, "rw")) => (p, true),
            Some((p, "ro")) => (p, false),
            _ => (s, false),
        };
        if path.is_empty() {
            return Err(format!("{s:?}: no path (write PATH, PATH:ro or PATH:rw)"));
        }
        Ok(SandboxAllow {
            path: PathBuf::from(path),
            write,
        })
    }
}

/// The options of `--sandbox`.
#[derive(Debug, Clone)]
pub(crate) struct SandboxOptions {
    /// Strict or best effort.
    pub(crate) mode: SandboxMode,
    /// What `--sandbox-allow` adds.
    pub(crate) allow: Vec<SandboxAllow>,
    /// `--sandbox-net`.
    pub(crate) net: SandboxNet,
    /// What `--sandbox-limit` caps.
    pub(crate) caps: Caps,
}

/// Why a sandboxed server was not started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SandboxError {
    /// The kernel cannot enforce what the profile needs (strict mode).
    #[error("--sandbox cannot be enforced: {0}")]
    Unsupported(String),
    /// The profile could not be built or applied.
    #[error("--sandbox: {0}")]
    Profile(String),
    /// The helper could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
}

impl SandboxError {
    /// The exit code for this error: the spawn error's own, 1 otherwise.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            SandboxError::Spawn(e) => e.exit_code(),
            _ => 1,
        }
    }
}

/// Starts `command` as a sandboxed server of the broker `source` describes (the proxy's own,
/// or the daemon's), whose session is `server_id` when it
/// is configured. The roots it may reach are those the session sees; without a configured
/// id, only roots offered to every server (`servers = ["*"]`), since the session's name is
/// known only once the server has answered `initialize`. The server is ended (its input
/// closed, then SIGTERM, then SIGKILL) when a reload removes or narrows one of those roots.
/// Returns the link, and the device and inode of the program file the profile holds (what
/// the server's identity must be of: the file that runs).
pub(crate) fn spawn_sandboxed(
    command: &[String],
    options: &SandboxOptions,
    source: &RootSource,
    server_id: Option<&str>,
    max_line: usize,
    grace: Duration,
) -> Result<(Link, Option<(u64, u64)>), SandboxError> {
    let roots = source.sandbox_roots(server_id);
    let tmp = private_tmp().map_err(|e| {
        SandboxError::Profile(format!(
            "cannot create the private temporary directory: {e}"
        ))
    })?;
    let policy_roots = source.all_roots();
    let built = Profile::build(command, &roots, &policy_roots, options, &tmp, source);
    let profile = match built {
        Ok(p) => p,
        Err(e) => {
            remove_tmp(&tmp);
            return Err(e);
        }
    };
    // Said before anything can stop the start: a directory the server is told to serve but
    // will not reach is the likeliest reason it fails once started.
    crate::proxy::own_dirs::warn_unreachable(command, |p| profile.reaches(p));
    // The same rules the helper will apply, built here first: a kernel that cannot enforce
    // them, or a root that is gone, stops the proxy before anything is started.
    let missing = match enforce::check(&profile) {
        Ok(m) => m,
        Err(e) => {
            remove_tmp(&tmp);
            return Err(e);
        }
    };
    for line in profile.describe() {
        tracing::info!("sandbox: {line}");
    }
    if rustix::process::geteuid().is_root() {
        tracing::warn!(
            "sandbox: the server runs as root: without capabilities, but root's own files beneath the system directories (/etc/shadow) stay readable to it"
        );
        if options.caps.caps_processes() {
            tracing::warn!(
                "sandbox: --sandbox-limit processes= does not hold for root: the kernel does not count root's processes"
            );
        }
    }
    if !missing.is_empty() {
        tracing::warn!(
            "sandbox: not enforced on this kernel: {}",
            missing.join("; ")
        );
    }
    let json = match serde_json::to_string(&profile) {
        Ok(j) => j,
        Err(e) => {
            remove_tmp(&tmp);
            return Err(SandboxError::Profile(e.to_string()));
        }
    };
    let exe = std::env::current_exe().map_err(|e| {
        SandboxError::Profile(format!("cannot find fsbroker's own executable: {e}"))
    })?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("sandbox-exec")
        .arg("--")
        .args(command)
        .env(PROFILE_VAR, json);
    let (stop_tx, stop_rx) = oneshot::channel();
    let program = command.first().cloned().unwrap_or_default();
    if let Err(e) = reaper::adopt_orphans() {
        remove_tmp(&tmp);
        return Err(SandboxError::Profile(format!(
            "cannot become the subreaper of the server's processes: {e}"
        )));
    }
    // The server's stderr is a pipe the proxy copies, never the proxy's own stderr: that may
    // be the user's terminal, into which a process holding it could push keystrokes.
    let link = match spawn_command(cmd, program, max_line, grace, Some(stop_rx), true) {
        Ok(l) => l,
        Err(e) => {
            remove_tmp(&tmp);
            return Err(e.into());
        }
    };
    let ended = Arc::new(AtomicBool::new(false));
    tokio::spawn(roots::police(
        source.clone(),
        server_id.map(str::to_owned),
        roots,
        stop_tx,
        ended.clone(),
    ));
    let caps = options.caps;
    let pin = profile.program().map(|p| p.pin);
    let link = link.after_exit(move |code| {
        reaper::end_descendants();
        remove_tmp(&tmp);
        if let Some(told) = caps.ending(code) {
            tracing::warn!("sandbox: {told}");
        }
        // A server ended because its roots were taken away did not end well, whatever it
        // said: the host should see a failure and may start it again.
        if ended.load(Ordering::SeqCst) && code == 0 {
            1
        } else {
            code
        }
    });
    Ok((link, pin))
}

/// Creates the server's private temporary directory beneath the system's, readable only by
/// the user.
fn private_tmp() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("fsbroker-sandbox-{name}"));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    std::fs::canonicalize(&dir)
}

/// Removes the private temporary directory, first giving the user back every directory in
/// it (a server may have made one unreadable to keep its files from being removed).
fn remove_tmp(tmp: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut todo = vec![tmp.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(e.path());
                }
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(tmp) {
        tracing::warn!(dir = %tmp.display(), error = %e, "sandbox: cannot remove the private temporary directory");
    }
}
