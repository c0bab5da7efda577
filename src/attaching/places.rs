//! Where the user's daemon is by default: its socket, and the log of a daemon started in the
//! background. The daemon is there, its clients look there, and a sandbox keeps both closed
//! to a server, so they are named once, below all three.

use std::path::PathBuf;

/// The socket's file name in its directory.
const SOCKET_NAME: &str = "broker.sock";

/// The default socket: `$XDG_RUNTIME_DIR/fsbroker/broker.sock`, else
/// `$XDG_STATE_HOME/fsbroker/broker.sock` (`~/.local/state` when that is unset). Empty or
/// relative values count as unset, as the XDG base directory specification says.
pub fn default_socket() -> Result<PathBuf, String> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = runtime
        .or_else(|| crate::policy::xdg_dir("XDG_STATE_HOME", ".local/state"))
        .ok_or_else(|| {
            "no place for the socket: XDG_RUNTIME_DIR, XDG_STATE_HOME and HOME are all unset; \
             name one with --socket"
                .to_owned()
        })?;
    Ok(base.join("fsbroker").join(SOCKET_NAME))
}

/// The log of daemons started in the background: `$XDG_STATE_HOME/fsbroker/daemon.log`, else
/// `~/.local/state/fsbroker/daemon.log`.
pub(crate) fn daemon_log() -> Result<PathBuf, String> {
    let base = crate::policy::xdg_dir("XDG_STATE_HOME", ".local/state").ok_or_else(|| {
        "no place for the daemon's log: XDG_STATE_HOME and HOME are both unset".to_owned()
    })?;
    Ok(base.join("fsbroker").join("daemon.log"))
}
