//! Where an enabled log's lines go, each on its hash chain.

use super::chain::Head;
use super::file::AuditFile;
use crate::locks::lock;
use std::io::Write;
use std::sync::Mutex;

/// A callback that takes each audit line (one JSON object, without its newline).
type LineFn = Box<dyn Fn(&str) + Send + Sync>;

/// Where an enabled log's lines go. Each keeps its place on the hash chain under the lock it
/// writes under, so that two threads never chain from the same line, and lines reach the sink
/// in the order they are chained.
pub(super) enum Sink {
    /// Appended to a file that other processes may append to as well (see `file.rs`).
    File(Mutex<AuditFile>),
    /// Written, a line at a time, to stderr or a host's writer.
    Writer(Mutex<(Box<dyn Write + Send>, Head)>),
    /// Handed to a host's callback.
    Callback(Mutex<Head>, LineFn),
    /// Sent as `tracing` events.
    Tracing(Mutex<Head>),
}

impl Sink {
    pub(super) fn writer(w: Box<dyn Write + Send>) -> Sink {
        Sink::Writer(Mutex::new((w, Head::new_chain())))
    }

    pub(super) fn tracing() -> Sink {
        Sink::Tracing(Mutex::new(Head::new_chain()))
    }

    /// Chains the encoded line `buf` and writes it. A `violation` sent as a tracing event
    /// stays at `warn`, as with the log off.
    pub(super) fn write(&self, mut buf: Vec<u8>, violation: bool) {
        match self {
            Sink::File(f) => {
                if let Err(e) = lock(f).append(&buf) {
                    tracing::warn!(error = %e, "cannot write audit log");
                }
            }
            Sink::Writer(w) => {
                let mut guard = lock(w);
                let (writer, head) = &mut *guard;
                let next = head.seal(&mut buf);
                buf.push(b'\n');
                match writer.write_all(&buf).and_then(|()| writer.flush()) {
                    // The chain moves on only with a line written, so that a failed write
                    // leaves no hole in it.
                    Ok(()) => *head = next,
                    Err(e) => tracing::warn!(error = %e, "cannot write audit log"),
                }
            }
            Sink::Callback(head, f) => {
                let mut head = lock(head);
                *head = head.seal(&mut buf);
                f(&String::from_utf8_lossy(&buf));
            }
            Sink::Tracing(head) => {
                let mut head = lock(head);
                *head = head.seal(&mut buf);
                let text = String::from_utf8_lossy(&buf);
                if violation {
                    tracing::warn!(target: "mcp_fsbroker::audit", "{text}");
                } else {
                    tracing::info!(target: "mcp_fsbroker::audit", "{text}");
                }
            }
        }
    }
}
