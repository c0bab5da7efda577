//! `fsbroker daemon` without `--foreground`: the same command again, in the foreground of a
//! session of its own (`--detached`: no terminal to stop it or to ask consent on), its output
//! appended to a log file, and a wait until it answers on its socket.

use super::protocol::blocking;
use super::socket;
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon started in the background may take to answer.
pub(crate) const START_WAIT: Duration = Duration::from_secs(10);

/// How often the socket is tried meanwhile.
const POLL: Duration = Duration::from_millis(25);

/// A log bigger than this at a start is moved aside (`daemon.log.old`), so that it does not
/// grow without end over the starts of a long-lived account.
const LOG_ROTATE: u64 = 1024 * 1024;

/// Lines of the log shown when a daemon does not come up.
const TAIL_LINES: usize = 20;

/// The log of daemons started in the background (see [`crate::attaching::places`]).
pub(crate) use crate::attaching::places::daemon_log as log_path;

/// Starts `<this executable> ARGS --foreground --detached` (ARGS beginning with `daemon`) with
/// its output appended to [`log_path`], and waits until it answers on `socket`. An `Err` says
/// why it did not come up, with the end of what it logged; a daemon that did not answer in
/// time is stopped.
pub(crate) fn start(args: &[OsString], socket: &Path) -> Result<(), String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot tell which program to start as the daemon: {e}"))?;
    let log = log_path()?;
    let mut file = open_log(&log)?;
    let from = file.seek(SeekFrom::End(0)).unwrap_or(0);
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let _ = writeln!(
        file,
        "fsbroker: starting a daemon in the background at {now}"
    );
    let err = file
        .try_clone()
        .map_err(|e| format!("cannot use the log {}: {e}", log.display()))?;
    let mut child = Command::new(&exe)
        .args(args)
        .args(["--foreground", "--detached"])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let failed = |why: String| {
        format!(
            "{why}; the end of its log ({}):\n{}",
            log.display(),
            tail(&log, from)
        )
    };
    let deadline = Instant::now() + START_WAIT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(failed(format!("the daemon did not start ({status})")));
        }
        if blocking::probe(socket).is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            stop(&mut child);
            return Err(failed(format!(
                "the daemon did not answer on {} within {} s, and was stopped",
                socket.display(),
                START_WAIT.as_secs()
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// Opens the log for appending (0600, not through a link), its directory made private as the
/// socket's is, and a big one moved aside first.
fn open_log(log: &Path) -> Result<File, String> {
    let uid = rustix::process::getuid().as_raw();
    socket::private_dir(socket::dir_of(log)?, uid)?;
    if std::fs::symlink_metadata(log).is_ok_and(|m| m.len() > LOG_ROTATE) {
        let _ = std::fs::rename(log, log.with_extension("log.old"));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(log)
        .map_err(|e| format!("cannot open the daemon's log {}: {e}", log.display()))
}

/// The last lines of what `log` holds from byte `from` on.
fn tail(log: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(log)
        && f.seek(SeekFrom::Start(from)).is_ok()
    {
        let _ = f.take(1024 * 1024).read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..].join("\n")
}

/// Stops a daemon that did not come up in time: SIGTERM, so that it removes what it made,
/// and SIGKILL if it is still there a few seconds later.
fn stop(child: &mut Child) {
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}
