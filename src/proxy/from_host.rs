//! The host's lines: the proxy notes and extends `initialize`, keeps the host's answers to
//! its own requests, drops the host's roots notifications, and relays the rest to the server.
//! Batches are looked into, so an answer meant for the proxy never reaches the server.

use super::cancel;
use super::era::{self, HostAction};
use super::host::{HostChannel, add_capabilities};
use super::peek::{self, Kind};
use super::strict::{self, BatchItems};
use super::{State, lock};
use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use crate::lines::LineSender;
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncRead, BufReader};

/// The host's notification that the proxy drops: the server's roots are the broker's.
const ROOTS_CHANGED: &str = "notifications/roots/list_changed";

/// The host's cancellation, which also cancels the proxy's retry of that request.
const CANCELLED: &str = "notifications/cancelled";

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
            Kind::Request { method, id } => {
                match state.era.judge_request(&method, &id, line, &capabilities) {
                    HostAction::Answer(answer) => {
                        if let (Ok(v), Some(to_host)) = (serde_json::to_vec(&answer), host.sender())
                        {
                            let _ = to_host.send(v).await;
                        }
                        continue;
                    }
                    HostAction::Relay(line) if method == "initialize" => {
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
                    HostAction::Relay(line) => {
                        // A forwarded probe's answer names the server, as `initialize`'s does.
                        if method == "server/discover" {
                            *lock(&state.init_id) = Some(id);
                        }
                        line
                    }
                }
            }
            Kind::Response { id } if host.is_reserved(&id) => {
                host.complete(&id, serde_json::from_slice(&line).unwrap_or(Value::Null));
                continue;
            }
            Kind::Response { id } if state.brokered.knows(&id) => {
                tracing::warn!(
                    "dropped the host's answer to a request the broker answers (roots/list or files/*)"
                );
                continue;
            }
            Kind::Notification { method } if method == CANCELLED => {
                if let Some(extra) = state.era.cancel(&line)
                    && to_server.send(extra).await.is_err()
                {
                    return;
                }
                line
            }
            Kind::Notification { method } if method == ROOTS_CHANGED => {
                tracing::debug!("dropped the host's roots/list_changed: the broker owns the roots");
                continue;
            }
            Kind::Other if maybe_ours(&line, &host) => {
                tracing::warn!("dropped an ambiguous answer to the proxy's request from the host");
                continue;
            }
            // What the proxy cannot read exactly must not carry a probe or a 2026-07-28
            // request past the era rules, answers of its own for the server, nor an answer to
            // a request the broker answers.
            Kind::Other
                if era::mentions(&line, b"server/discover")
                    || era::mentions(&line, era::VERSION_KEY.as_bytes())
                    || era::mentions(&line, b"inputResponses")
                    || names_brokered(&line, &state.brokered) =>
            {
                tracing::warn!(
                    "refused a host message the proxy cannot read that names the 2026-07-28 era"
                );
                let id = peek::refusal_id(&line).unwrap_or(Value::Null);
                let refusal = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600,
                    "message": "a message fsbroker proxy cannot read exactly may not carry server/discover or a 2026-07-28 request"}});
                if let (Ok(v), Some(to_host)) = (serde_json::to_vec(&refusal), host.sender()) {
                    let _ = to_host.send(v).await;
                }
                continue;
            }
            Kind::Batch if let Some(refused) = state.era.refuse_batch(&line) => {
                if let (Ok(v), Some(to_host)) = (serde_json::to_vec(&refused), host.sender()) {
                    let _ = to_host.send(v).await;
                }
                continue;
            }
            Kind::Batch => {
                if let Some(version) = state.without_batches() {
                    if refuse(&line, &version, &host, &to_server).await.is_err() {
                        return;
                    }
                    continue;
                }
                match keep_for_server(line, &host, &state.brokered) {
                    Some(rest) => rest,
                    None => continue,
                }
            }
            _ => line,
        };
        if to_server.send(line).await.is_err() {
            return;
        }
    }
}

/// Refuses a host batch in `version`, a revision without batches: the host gets an error
/// for each of its requests, the server one for each request of its that the batch
/// answered, and the proxy's own questions answered in it count as refused. Fails when the
/// server's queue is gone.
async fn refuse(
    line: &[u8],
    version: &str,
    host: &HostChannel,
    to_server: &LineSender,
) -> Result<(), ()> {
    let refused = super::from_server::refuse_batch(line, version, &|id| host.is_reserved(id));
    for id in &refused.ours {
        host.complete(
            id,
            serde_json::json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32600, "message": "answered in a batch"}}),
        );
    }
    if let Some(to_host) = host.sender() {
        for v in &refused.for_sender {
            if let Ok(l) = serde_json::to_vec(v)
                && to_host.send(l).await.is_err()
            {
                break;
            }
        }
    }
    for l in refused.for_other_side {
        to_server.send(l).await.map_err(|_| ())?;
    }
    Ok(())
}

/// Takes out of a host batch the answers to the proxy's requests (which complete them) and
/// roots notifications; returns what remains for the server, unchanged when nothing was
/// taken out, `None` when nothing remains. Each item is judged by the strict reader exactly
/// as a single line of the host is, and what remains is the items as the host wrote them.
fn keep_for_server(
    line: Vec<u8>,
    host: &HostChannel,
    brokered: &cancel::Brokered,
) -> Option<Vec<u8>> {
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
            Kind::Response { id } if brokered.knows(&id) => {
                tracing::warn!(
                    "dropped the host's answer to a request the broker answers (roots/list or files/*)"
                );
                taken = true;
            }
            Kind::Request { .. } if era::mentions(item, b"inputResponses") => {
                let stripped = era::strip_host_roots(item.to_vec());
                taken |= stripped.as_slice() != item;
                rest.push(if rest.is_empty() { b'[' } else { b',' });
                rest.extend_from_slice(&stripped);
            }
            Kind::Notification { method } if method == ROOTS_CHANGED => taken = true,
            Kind::Other if maybe_ours(item, host) => {
                tracing::warn!("dropped an ambiguous answer to the proxy's request from the host");
                taken = true;
            }
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

/// Whether a host message the strict reader finds ambiguous (a key named twice) names, under
/// some reading, an id for which `named` holds.
fn ambiguous_and_names(message: &[u8], named: impl Fn(&Value) -> bool) -> bool {
    strict::read(message).is_ok_and(|e| e.duplicated && e.id.iter().chain(&e.ids).any(named))
}

/// Whether an ambiguous host message names a request the broker answers.
fn names_brokered(message: &[u8], brokered: &cancel::Brokered) -> bool {
    ambiguous_and_names(message, |id| brokered.knows(id))
}

/// Whether an ambiguous host message names one of the proxy's request ids. Such a message is
/// dropped: taken as the answer it might be read differently, and relayed it might hand the
/// server an answer meant for the proxy. The proxy's question then goes unanswered, which is
/// a refusal.
fn maybe_ours(message: &[u8], host: &HostChannel) -> bool {
    ambiguous_and_names(message, |id| host.is_reserved(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::line_channel;

    #[test]
    fn host_batch_items_are_judged_like_host_lines() {
        let (tx, _rx) = line_channel(8, 1 << 20);
        let host = HostChannel::new(tx);
        // A reserved id: the proxy's own, whatever its number.
        let ours = host.reserved_example();
        let other = r#"{"jsonrpc":"2.0","id":5,"result":{}}"#;
        let cases = [
            // An answer to the proxy: taken out.
            (
                format!(r#"[{other},{{"jsonrpc":"2.0","id":"{ours}","result":{{}}}}]"#),
                Some(format!("[{other}]")),
            ),
            // The same with its id doubled, either order, or a key doubled inside: dropped.
            (
                format!(r#"[{other},{{"jsonrpc":"2.0","id":"{ours}","result":{{}},"id":7}}]"#),
                Some(format!("[{other}]")),
            ),
            (
                format!(r#"[{{"jsonrpc":"2.0","id":7,"result":{{}},"id":"{ours}"}},{other}]"#),
                Some(format!("[{other}]")),
            ),
            (
                format!(r#"[{{"jsonrpc":"2.0","id":"{ours}","result":{{"a":1,"a":2}}}}]"#),
                None,
            ),
            // Nothing of the proxy's: relayed as written, even when ambiguous.
            (
                format!(r#"[{other}, {{"id":1,"id":2}}]"#),
                Some(format!(r#"[{other}, {{"id":1,"id":2}}]"#)),
            ),
            ("[1,".to_owned(), Some("[1,".to_owned())),
        ];
        for (batch, want) in cases {
            let got = keep_for_server(batch.clone().into_bytes(), &host, &Default::default());
            assert_eq!(got.map(|g| String::from_utf8(g).unwrap()), want, "{batch}");
        }
    }
}
