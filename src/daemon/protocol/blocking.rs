//! The client for a caller that is not on a tokio runtime (the command line's verbs, a start
//! in the background, `daemon --ensure`): each call runs [`Client`] on a runtime of its own,
//! on the calling thread.

use super::{Client, Op, Request};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::ErrorKind as IoKind;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Runs `work` to its end on a runtime of its own.
fn run<T>(work: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime to reach the daemon: {e}"))?
        .block_on(work)
}

/// Sends `request` to the daemon on `socket` and reads a successful answer as `A` (a
/// `Value` for the answer as it came); an `Err` says why no answer came, or what the daemon
/// refused.
pub(crate) fn ask<A: DeserializeOwned>(socket: &Path, request: &Request) -> Result<A, String> {
    run(async { Client::connect(socket).await?.ask(request).await })
}

/// [`Client::request`] on a connection of its own to the daemon on `socket`: `op`'s
/// successful answer; an `Err` says why no answer came, or what the daemon refused.
pub(crate) fn request<O: Op>(socket: &Path, op: O) -> Result<O::Answer, String> {
    run(async { Client::connect(socket).await?.request(op).await })
}

/// Whether a daemon answers on `socket`: it takes the hello and welcomes it. An `Err` says
/// why not.
pub(crate) fn probe(socket: &Path) -> Result<(), String> {
    run(async { Client::connect(socket).await.map(drop) })
}

/// Whether anything listens on `socket` at all: false when nothing does (no socket, or a
/// stale one), so that a daemon may be started there; true when something does, welcoming
/// or not (a busy daemon is not to be replaced). Nothing is sent.
pub(crate) fn listened_on(socket: &Path) -> bool {
    match UnixStream::connect(socket) {
        Ok(_) => true,
        Err(e) => !matches!(e.kind(), IoKind::NotFound | IoKind::ConnectionRefused),
    }
}

/// Sends `request` (a `log` with `follow`) and calls `each` with its answer, then with every
/// line the daemon streams after it, with no time limit, until `each` returns false (`Ok`)
/// or the stream ends (`Err`, saying so).
pub(crate) fn follow(
    socket: &Path,
    request: &Request,
    mut each: impl FnMut(Value) -> bool,
) -> Result<(), String> {
    run(async {
        let mut client = Client::connect(socket).await?;
        let first = client.call(request).await?;
        let following = first["following"] == true;
        if !each(first) || !following {
            return Ok(());
        }
        loop {
            if !each(client.streamed().await?) {
                return Ok(());
            }
        }
    })
}
