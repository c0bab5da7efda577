//! The host's lines: the proxy notes and extends `initialize`, keeps the host's answers to
//! its own requests, drops the host's roots notifications, and relays the rest to the server.
//! Batches are looked into, so an answer meant for the proxy never reaches the server.

use super::host::{HostChannel, add_capabilities};
use super::peek::{self, Kind};
use super::strict::BatchItems;
use super::{State, lock};
use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use crate::lines::LineSender;
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncRead, BufReader};

/// The host's notification that the proxy drops: the server's roots are the broker's.
const ROOTS_CHANGED: &str = "notifications/roots/list_changed";

/// Reads the host's lines until its input ends.
pub(super) async fn read_host<R: AsyncRead + Unpin>(
    host_in: R,
    max_line: usize,
    host: Arc<HostChannel>,
    state: Arc<State>,
    capabilities: Value,
    to_server: LineSender,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, host_in);
    loop {
        let line = match next_frame(&mut reader, max_line).await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(
                    bytes = n,
                    limit = max_line,
                    "dropped an over-long message from the host"
                );
                if let (Ok(v), Some(to_host)) = (
                    serde_json::to_vec(&jsonrpc::too_long(max_line).to_json()),
                    host.sender(),
                ) {
                    let _ = to_host.send(v).await;
                }
                continue;
            }
            Ok(Frame::Eof) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the host's input");
                return;
            }
        };
        let line = match peek::peek(&line) {
            Kind::Request { method, id } if method == "initialize" => {
                match serde_json::from_slice::<Value>(&line) {
                    Ok(message) => {
                        host.note_capabilities(message.pointer("/params/capabilities"));
                        *lock(&state.init_id) = Some(id);
                        let extended = add_capabilities(message, &capabilities);
                        serde_json::to_vec(&extended).unwrap_or(line)
                    }
                    Err(_) => line,
                }
            }
            Kind::Response { id } if host.is_reserved(&id) => {
                host.complete(&id, serde_json::from_slice(&line).unwrap_or(Value::Null));
                continue;
            }
            Kind::Notification { method } if method == ROOTS_CHANGED => {
                tracing::debug!("dropped the host's roots/list_changed: the broker owns the roots");
                continue;
            }
            Kind::Batch => match keep_for_server(line, &host) {
                Some(rest) => rest,
                None => continue,
            },
            _ => line,
        };
        if to_server.send(line).await.is_err() {
            return;
        }
    }
}

/// Takes out of a host batch the answers to the proxy's requests (which complete them) and
/// roots notifications; returns what remains for the server, unchanged when nothing was
/// taken out, `None` when nothing remains. Each item is judged by the strict reader exactly
/// as a single line of the host is, and what remains is the items as the host wrote them.
fn keep_for_server(line: Vec<u8>, host: &HostChannel) -> Option<Vec<u8>> {
    let mut rest = Vec::new();
    let mut taken = false;
    for item in BatchItems::new(&line) {
        let Ok(item) = item else {
            // Not a batch we can read: the server judges it, as it would without the proxy.
            return Some(line);
        };
        match peek::peek(item) {
            Kind::Response { id } if host.is_reserved(&id) => {
                host.complete(&id, serde_json::from_slice(item).unwrap_or(Value::Null));
                taken = true;
            }
            Kind::Notification { method } if method == ROOTS_CHANGED => taken = true,
            _ => {
                rest.push(if rest.is_empty() { b'[' } else { b',' });
                rest.extend_from_slice(item);
            }
        }
    }
    if !taken {
        Some(line)
    } else if rest.is_empty() {
        None
    } else {
        rest.push(b']');
        Some(rest)
    }
}
