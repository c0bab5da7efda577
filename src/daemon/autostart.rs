//! A daemon for the commands that attach to one, started unless one answers: on the user's
//! own policy file (written by `fsbroker daemon --init`), with an idle exit, so that it goes
//! when they are done. Callers that come at once start one daemon between them: they take
//! turns under a lock beside the socket (not the daemon's own lock, which a daemon holds for
//! its life), and each looks again once it holds it.

use super::protocol::blocking;
use super::socket;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `--idle-exit` of a daemon started for attaching commands, in seconds.
pub(crate) const IDLE_EXIT: u64 = 600;

/// How long a caller waits for its turn: longer than one start may take.
const TURN_WAIT: Duration = Duration::from_secs(60);

/// The user's policy file, the daemon's when it is started for them:
/// `$XDG_CONFIG_HOME/fsbroker/policy.toml`, else `~/.config/fsbroker/policy.toml`.
pub(crate) fn user_policy() -> Result<PathBuf, String> {
    let base = crate::policy::xdg_dir("XDG_CONFIG_HOME", ".config").ok_or_else(|| {
        "no place for the user's policy: XDG_CONFIG_HOME and HOME are both unset".to_owned()
    })?;
    Ok(base.join("fsbroker").join("policy.toml"))
}

/// Makes sure a daemon answers on `socket`: returns at once when one does; else starts
/// `fsbroker daemon --socket SOCKET --idle-exit 600 --policy <user's policy>` in the
/// background and returns once it answers. Blocking, with every wait bounded. An `Err` says
/// why no daemon answers, such as the user's policy file missing (and how to write one).
pub(crate) fn ensure(socket: &Path) -> Result<(), String> {
    match blocking::probe(socket) {
        Ok(()) => return Ok(()),
        // Something listens now: a daemon that is there but refuses (too busy, say) is
        // reported, never replaced; one that began to listen after the probe looked (another
        // caller's start) is asked again, and answers.
        Err(_) if blocking::listened_on(socket) => return blocking::probe(socket),
        Err(_) => {}
    }
    let policy = user_policy()?;
    if !policy.exists() {
        return Err(format!(
            "no daemon answers on {}, and none is started without your policy file {}: \
             write one with `fsbroker daemon --init` (add --root [MOUNT=]PATH for each \
             directory to offer), or start a daemon yourself",
            socket.display(),
            policy.display()
        ));
    }
    socket::check_length(socket)?;
    let uid = rustix::process::getuid().as_raw();
    let dir = socket::private_dir(socket::dir_of(socket)?, uid)?;
    let name = socket.file_name().unwrap_or_default();
    let _turn = turn(&socket::sibling(&dir.join(name), "start.lock"))?;
    // Another caller may have started it while this one waited.
    if blocking::probe(socket).is_ok() {
        return Ok(());
    }
    let args: Vec<OsString> = vec![
        "daemon".into(),
        "--socket".into(),
        socket.into(),
        "--idle-exit".into(),
        IDLE_EXIT.to_string().into(),
        "--policy".into(),
        policy.into(),
    ];
    // A daemon started by hand at the same moment (its key written, its socket not yet
    // bound when this one looked) makes this start fail: it answers, which is what was asked.
    start(&args).or_else(|why| blocking::probe(socket).map_err(|_| why))
}

/// Runs `<this executable> ARGS` (a start in the background) to its end, which comes within
/// [`super::background::START_WAIT`] and a little more. It is a process of its own so that the
/// daemon is not this one's child: nothing here has to wait for it when it exits.
fn start(args: &[OsString]) -> Result<(), String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot tell which program to start as the daemon: {e}"))?;
    let out = Command::new(&exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.trim();
    let said = said.strip_prefix("fsbroker: ").unwrap_or(said);
    Err(if said.is_empty() {
        format!("the daemon did not start ({})", out.status)
    } else {
        said.to_owned()
    })
}

/// Takes the turn to start a daemon: an exclusive lock on `path`, released when the file is
/// dropped. Waits at most [`TURN_WAIT`] for a caller that holds it.
fn turn(path: &Path) -> Result<File, String> {
    let file = socket::lock_file(path)
        .map_err(|e| format!("cannot open the start lock {}: {e}", path.display()))?;
    let deadline = Instant::now() + TURN_WAIT;
    loop {
        // Named through fs4: std's inherent `File::try_lock` would otherwise shadow it.
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => return Ok(file),
            Err(fs4::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(25));
            }
            Err(fs4::TryLockError::WouldBlock) => {
                return Err(format!(
                    "another process has held {} for {} s while starting a daemon",
                    path.display(),
                    TURN_WAIT.as_secs()
                ));
            }
            Err(fs4::TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
    }
}
