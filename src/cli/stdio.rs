//! Standard input and output for the protocol. A pipe (what a host gives a sidecar) is read
//! and written from the runtime directly, with the pipe non-blocking: tokio's own stdin and
//! stdout hand every read and write to a blocking thread and back, a wake-up each way per
//! burst of lines, which was a large part of a small request's cost. Anything else (a file, a
//! terminal) goes through tokio's. [`restore_blocking`] gives both back their mode at the end.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::OnceLock;
use tokio::io::{AsyncRead, AsyncWrite};

/// Whether standard input and output were already non-blocking when they were taken: the
/// mode lives on the pipe the host shares with us, and is put back as the host had it.
static WAS_NONBLOCKING: [OnceLock<bool>; 2] = [OnceLock::new(), OnceLock::new()];

/// Notes the mode of `fd` (0 or 1) before it is first made non-blocking.
fn note_mode(which: usize, fd: BorrowedFd<'_>) {
    if let (Some(slot), Ok(flags)) = (WAS_NONBLOCKING.get(which), rustix::fs::fcntl_getfl(fd)) {
        let _ = slot.set(flags.contains(rustix::fs::OFlags::NONBLOCK));
    }
}

/// Standard input for the protocol (see the module documentation).
pub(super) fn stdin_reader() -> Box<dyn AsyncRead + Unpin + Send> {
    note_mode(0, std::io::stdin().as_fd());
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    }
}

/// Standard output for the protocol (see the module documentation).
pub(super) fn stdout_writer() -> Box<dyn AsyncWrite + Unpin + Send> {
    note_mode(1, std::io::stdout().as_fd());
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// Gives standard input and output back the blocking mode they had when they were taken:
/// the pipe reader and writer made them non-blocking, and the host may hand the same pipes to
/// whatever it runs after us. (A fatal signal without a handler, such as `SIGKILL` or
/// `SIGQUIT`, ends the process before this runs.)
pub(super) fn restore_blocking() {
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    for (fd, was) in [stdin.as_fd(), stdout.as_fd()]
        .into_iter()
        .zip(&WAS_NONBLOCKING)
    {
        let (Some(false), Ok(flags)) = (was.get(), rustix::fs::fcntl_getfl(fd)) else {
            continue;
        };
        let _ = rustix::fs::fcntl_setfl(fd, flags - rustix::fs::OFlags::NONBLOCK);
    }
}
