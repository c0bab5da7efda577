//! Standard input and output for the protocol. A pipe (what a host gives a sidecar) is read
//! and written from the runtime directly, with the pipe non-blocking: tokio's own stdin and
//! stdout hand every read and write to a blocking thread and back, a wake-up each way per
//! burst of lines, which was a large part of a small request's cost. Anything else (a file, a
//! terminal) goes through tokio's. [`restore_blocking`] gives both back their mode at the end.

use std::os::fd::AsFd;
use tokio::io::{AsyncRead, AsyncWrite};

/// Standard input for the protocol (see the module documentation).
pub(super) fn stdin_reader() -> Box<dyn AsyncRead + Unpin + Send> {
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
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// Gives standard input and output back their blocking mode: the pipe reader and writer made
/// them non-blocking, and the host may hand the same pipes to whatever it runs after us.
pub(super) fn restore_blocking() {
    for fd in [std::io::stdin().as_fd(), std::io::stdout().as_fd()] {
        if let Ok(flags) = rustix::fs::fcntl_getfl(fd) {
            let _ = rustix::fs::fcntl_setfl(fd, flags - rustix::fs::OFlags::NONBLOCK);
        }
    }
}
