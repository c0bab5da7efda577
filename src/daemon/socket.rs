//! Where the daemon's socket lives and what guards it: the default path, the `sun_path`
//! limit, the private directory, the lock that makes one daemon per socket, a stale socket
//! cleaned up, and the peer check.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::ErrorKind as IoKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The longest socket path this platform's `sockaddr_un` holds, without its terminating NUL
/// (`sun_path` is 108 bytes on Linux, 104 on the BSDs and macOS).
#[cfg(target_os = "linux")]
pub(crate) const MAX_SOCKET_PATH: usize = 107;
/// The longest socket path this platform's `sockaddr_un` holds, without its terminating NUL.
#[cfg(not(target_os = "linux"))]
pub(crate) const MAX_SOCKET_PATH: usize = 103;

/// Checks that `socket` fits in `sun_path`.
pub(crate) fn check_length(socket: &Path) -> Result<(), String> {
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(format!(
            "the socket path {} is {len} bytes, and a Unix socket path holds at most \
             {MAX_SOCKET_PATH} here: name a shorter one with --socket",
            socket.display()
        ));
    }
    Ok(())
}

/// The directory of `socket`.
pub(crate) fn dir_of(socket: &Path) -> Result<&Path, String> {
    socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| {
            format!(
                "{} names no directory: give the socket as a path with one",
                socket.display()
            )
        })
}

/// Makes the socket's directory (mode 0700, its missing parents with the usual mode) if it
/// is missing, then checks it as every client does ([`trusted_dir`]): a real
/// directory (not a link), owned by `uid`, closed to group and others, below directories that
/// nobody but the user or root can change. Returns its real path, the one to use from then on
/// (a link above it, in a place that passed, cannot be changed by another user).
pub(crate) fn private_dir(dir: &Path, uid: u32) -> Result<PathBuf, String> {
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == IoKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    if !meta.file_type().is_dir() {
        return Err(format!(
            "the socket directory {} is not a directory (a link or a file); expected a \
             directory owned by uid {uid} (this user) with mode 0700",
            dir.display()
        ));
    }
    let real =
        std::fs::canonicalize(dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    trusted_dir(&real, uid)?;
    Ok(real)
}

/// The restricted-deletion ("sticky") bit: in a directory with it, only an entry's owner, the
/// directory's owner and root may rename or remove the entry.
const STICKY: u32 = 0o1000;

/// Checks that `dir` (a real path: no component a link) is the user's private directory and
/// that nobody but the user or root can replace it: `dir` itself is owned by `uid` and closed
/// to group and others; each directory above it is owned by `uid` or root and writable by
/// nobody else, unless it is sticky (`/tmp`), where others may write but not move what is not
/// theirs. An `Err` names the directory and what is wrong with it.
pub(crate) fn trusted_dir(dir: &Path, uid: u32) -> Result<(), String> {
    let own = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    let mode = own.mode() & 0o7777;
    if !own.file_type().is_dir() {
        return Err(format!(
            "the socket directory {} is not a directory (a link or a file); expected a \
             directory owned by uid {uid} (this user) with mode 0700",
            dir.display()
        ));
    }
    if own.uid() != uid || mode & 0o077 != 0 {
        return Err(format!(
            "refusing the socket directory {}: it is owned by uid {} with mode {mode:04o}; \
             expected a directory owned by uid {uid} (this user) with mode 0700",
            dir.display(),
            own.uid()
        ));
    }
    // Bounded by the path's own components; nothing here recurses.
    for above in dir.ancestors().skip(1) {
        let meta = std::fs::symlink_metadata(above)
            .map_err(|e| format!("cannot inspect {}: {e}", above.display()))?;
        let mode = meta.mode() & 0o7777;
        let why = if !meta.file_type().is_dir() {
            Some("it is not a directory (a link, say)".to_owned())
        } else if meta.uid() != uid && meta.uid() != 0 {
            Some(format!("it is owned by uid {}", meta.uid()))
        } else if mode & 0o022 != 0 && mode & STICKY == 0 {
            Some(format!(
                "its mode {mode:04o} lets others than its owner write it"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!(
                "refusing the socket directory {}: {} above it {why}, and whoever may change \
                 {} can replace what lies below it; every directory above the socket must be \
                 owned by you (uid {uid}) or root and writable by nobody else (or sticky, as \
                 /tmp is). Name a socket in a directory of your own (--daemon for the verbs \
                 and attaching commands, --socket for the daemon), or set XDG_RUNTIME_DIR to \
                 yours (after `su`, use `su -`)",
                dir.display(),
                above.display(),
                above.display()
            ));
        }
    }
    Ok(())
}

/// Opens (creating it 0600, never through a link) the lock file at `path`.
pub(crate) fn lock_file(path: &Path) -> std::io::Result<File> {
    crate::atomic::open_private(path)
}

/// Creates the file at `path` new, 0600, never through a link (what was there is not
/// opened: the caller removes a stale one first), for what only the user may read: the key,
/// the console's state, the page that carries a sign-in link.
pub(crate) fn private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// Takes the daemon's lock on `<socket>.lock`, held for the daemon's life: two daemons
/// started at once cannot both clean up and bind the same socket.
pub(crate) fn lock(socket: &Path) -> Result<File, String> {
    let path = sibling(socket, "lock");
    let file =
        lock_file(&path).map_err(|e| format!("cannot open the lock {}: {e}", path.display()))?;
    // Named through fs4: std's inherent `File::try_lock` would otherwise shadow it.
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(file),
        Err(fs4::TryLockError::WouldBlock) => Err(format!(
            "another daemon holds {}: one is starting or running on {}",
            path.display(),
            socket.display()
        )),
        Err(fs4::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// Refuses when a daemon answers on `socket`.
pub(crate) fn refuse_live(socket: &Path) -> Result<(), String> {
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(_) => Err(live(socket)),
        Err(_) => Ok(()),
    }
}

fn live(socket: &Path) -> String {
    format!(
        "a daemon already answers on {}: stop it first, or name another socket with --socket",
        socket.display()
    )
}

/// Refuses when a daemon answers on `socket`; removes a socket nobody listens on. A file there
/// that is not a socket is left alone and refused.
pub(crate) fn clear_stale(socket: &Path) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) if e.kind() == IoKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot inspect {}: {e}", socket.display())),
    };
    if !meta.file_type().is_socket() {
        return Err(format!(
            "{} exists and is not a socket: remove it or name another with --socket",
            socket.display()
        ));
    }
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(_) => Err(live(socket)),
        Err(e) if e.kind() == IoKind::ConnectionRefused => {
            tracing::info!(socket = %socket.display(), "removing a stale socket");
            std::fs::remove_file(socket)
                .map_err(|e| format!("cannot remove the stale socket {}: {e}", socket.display()))
        }
        Err(e) => Err(format!(
            "cannot tell whether a daemon answers on {}: {e}",
            socket.display()
        )),
    }
}

/// `<socket's directory>/<stem>.<ext>`: the files kept beside the socket (`broker.key`,
/// `broker.lock` for `broker.sock`).
pub(crate) fn sibling(socket: &Path, ext: &str) -> PathBuf {
    socket.with_extension(ext)
}

/// Why a peer of `peer_uid` is refused by a daemon of `own_uid`; `None` when it is the same
/// user. Root is refused like anyone else.
pub(crate) fn refuse_peer(peer_uid: Option<u32>, own_uid: u32) -> Option<String> {
    match peer_uid {
        Some(uid) if uid == own_uid => None,
        Some(uid) => Some(format!(
            "refused: peer uid {uid} is not the daemon's uid {own_uid}; only the user who runs \
             the daemon may connect (not even root)"
        )),
        None => Some(format!(
            "refused: the peer's uid is unknown; only uid {own_uid}, who runs the daemon, may \
             connect"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_directory_above_that_others_may_write_is_refused_unless_sticky() {
        let uid = rustix::process::getuid().as_raw();
        let top = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let top = std::fs::canonicalize(top.path()).unwrap_or_else(|e| panic!("{e}"));
        let above = top.join("above");
        let dir = above.join("fsbroker");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        chmod(&dir, 0o700);
        chmod(&above, 0o755);
        assert_eq!(trusted_dir(&dir, uid), Ok(()));
        chmod(&above, 0o777);
        let m = trusted_dir(&dir, uid).err().unwrap_or_default();
        assert!(
            m.contains("0777") && m.contains(&above.display().to_string()),
            "{m}"
        );
        chmod(&above, 0o1777);
        assert_eq!(trusted_dir(&dir, uid), Ok(()));
        chmod(&dir, 0o750);
        assert!(trusted_dir(&dir, uid).is_err());
    }

    #[test]
    fn peers_of_another_uid_are_refused_root_included() {
        assert_eq!(refuse_peer(Some(1000), 1000), None);
        let m = refuse_peer(Some(0), 1000).unwrap_or_default();
        assert!(m.contains("uid 0") && m.contains("uid 1000"), "{m}");
        assert!(refuse_peer(None, 1000).is_some());
    }

    #[test]
    fn long_paths_are_refused() {
        let long = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH)));
        assert!(check_length(&long).is_err());
        let fits = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH - 1)));
        assert!(check_length(&fits).is_ok());
    }
}
