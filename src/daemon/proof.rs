//! Proving the other end of the control socket before anything is sent to it. Every client of
//! the daemon (the command line's verbs, `daemon --ensure`, an attaching `serve` or `proxy`, a
//! library host's session) connects through [`connect`], and the daemon judges its own place
//! by the same [`socket::trusted_dir`]: the socket is found through an environment variable (`XDG_RUNTIME_DIR`,
//! which `su` without `-` keeps), so its path proves nothing by itself.
//!
//! What is proven, in order: the socket's directory, by its real path, and every directory
//! above it belong to the user or to root and nobody else may change them (as OpenSSH's
//! `StrictModes` judges a path: a directory others may write could have the user's renamed
//! away and replaced); the process that answers is the user's own (`SO_PEERCRED`, read by the
//! client); and only then is the key beside the socket read, from a file of the user's alone,
//! and sent.

use super::secret::Secret;
use super::socket;
use std::io::ErrorKind as IoKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The socket's path with its directory's real path: `Ok(None)` when that directory does not
/// exist (so no daemon answers there).
pub(crate) fn real_socket(socket: &Path) -> Result<Option<PathBuf>, String> {
    socket::check_length(socket)?;
    let dir = socket::dir_of(socket)?;
    let name = socket.file_name().ok_or_else(|| {
        format!(
            "{} names no socket file: give the socket as a path to one",
            socket.display()
        )
    })?;
    let real = match std::fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == IoKind::NotFound => return Ok(None),
        Err(e) if e.kind() == IoKind::PermissionDenied => {
            return Err(format!(
                "refusing the socket {}: its directory cannot be entered as you (uid {}), so \
                 it is not yours; nothing was sent. After `su`, use `su -` (which sets \
                 XDG_RUNTIME_DIR to yours), or name your own socket with --daemon",
                socket.display(),
                rustix::process::getuid().as_raw()
            ));
        }
        Err(e) => return Err(format!("cannot inspect {}: {e}", dir.display())),
    };
    let path = real.join(name);
    socket::check_length(&path)?;
    Ok(Some(path))
}

/// Why a peer that runs as `peer` (from `SO_PEERCRED`; `None` when unknown) is not the daemon
/// of this user `uid`; `None` when it is.
fn refuse_answerer(socket: &Path, peer: Option<u32>, uid: u32) -> Option<String> {
    match peer {
        Some(p) if p == uid => None,
        Some(p) => Some(format!(
            "refusing what answers on {}: it runs as uid {p}, not as you (uid {uid}), so it \
             is not your daemon; nothing was sent to it. Another user's program listens at \
             that path (after `su`, use `su -`, or name your socket with --daemon)",
            socket.display()
        )),
        None => Some(format!(
            "refusing what answers on {}: the kernel did not say which user runs it, so it \
             cannot be proven to be your daemon; nothing was sent to it",
            socket.display()
        )),
    }
}

/// Connects to the daemon on `socket` once its place is proven, proves that the process that
/// answers is this user's, and only then reads the key beside the socket. The key is sent by
/// the caller, over this stream only. Blocking; an `Err` says what was wrong, and "no daemon
/// answers on" when nothing listens.
pub(crate) fn connect(socket: &Path) -> Result<(UnixStream, Secret), String> {
    let uid = rustix::process::getuid().as_raw();
    let none = || format!("no daemon answers on {}", socket.display());
    let real = real_socket(socket)?.ok_or_else(none)?;
    match std::fs::symlink_metadata(&real) {
        Err(e) if e.kind() == IoKind::NotFound => return Err(none()),
        _ => {}
    }
    let dir = socket::dir_of(&real)?;
    socket::trusted_dir(dir, uid)?;
    let stream = match UnixStream::connect(&real) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::ConnectionRefused) => {
            return Err(none());
        }
        Err(e) => return Err(format!("cannot connect to {}: {e}", socket.display())),
    };
    let peer = rustix::net::sockopt::socket_peercred(&stream)
        .ok()
        .map(|c| c.uid.as_raw());
    if let Some(why) = refuse_answerer(socket, peer, uid) {
        return Err(why);
    }
    let secret = Secret::read(&socket::sibling(&real, "key"), uid)?;
    Ok((stream, secret))
}

/// The daemon's socket as the door to its sessions: each connection proven as
/// [`connect_async`] proves it, and its key sent in the first line.
pub(crate) struct SocketDoor(pub(crate) PathBuf);

impl crate::attaching::Door for SocketDoor {
    fn open(&self) -> crate::consent::BoxFuture<'_, Result<crate::attaching::Opened, String>> {
        Box::pin(async move {
            let (stream, secret) = connect_async(&self.0).await?;
            let (reader, writer) = stream.into_split();
            Ok(crate::attaching::Opened {
                reader: Box::new(reader),
                writer: Box::new(writer),
                hello: Some(secret.hex().to_owned()),
            })
        })
    }

    fn name(&self) -> String {
        format!("the daemon on {}", self.0.display())
    }

    fn socket(&self) -> Option<&Path> {
        Some(&self.0)
    }
}

/// [`connect`], for a caller on a tokio runtime: the blocking proof runs on the runtime's
/// blocking pool.
pub(crate) async fn connect_async(
    socket: &Path,
) -> Result<(tokio::net::UnixStream, Secret), String> {
    let path = socket.to_owned();
    let (stream, secret) = tokio::task::spawn_blocking(move || connect(&path))
        .await
        .map_err(|e| format!("the connection to {} failed: {e}", socket.display()))??;
    let io = |e: std::io::Error| format!("the connection to {} failed: {e}", socket.display());
    stream.set_nonblocking(true).map_err(io)?;
    let stream = tokio::net::UnixStream::from_std(stream).map_err(io)?;
    Ok((stream, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answerer_of_another_uid_is_refused() {
        let s = Path::new("/run/user/1000/fsbroker/broker.sock");
        assert_eq!(refuse_answerer(s, Some(1000), 1000), None);
        let m = refuse_answerer(s, Some(1001), 1000).unwrap_or_default();
        assert!(
            m.contains("uid 1001") && m.contains("nothing was sent"),
            "{m}"
        );
        assert!(refuse_answerer(s, None, 1000).is_some());
    }
}
