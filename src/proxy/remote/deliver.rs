//! What a remote session passes on to the proxy: the server's messages, made single lines,
//! with the responses that settle requests noted and the messages no host could read
//! dropped or left for the proxy to refuse.

use super::session::RemoteSession;
use crate::lines::SendError;
use crate::proxy::peek::{Kind, batch_kinds, peek, refusal_id};
use serde_json::Value;

impl RemoteSession {
    /// Passes a line to the proxy as it is (an error the proxy made up for the host).
    pub(super) async fn pass(&self, line: Vec<u8>) {
        let _ = self.incoming.send(line).await;
    }

    /// Passes a line to the proxy if there is room now; gives it back if there is none.
    pub(super) fn try_pass(&self, line: Vec<u8>) -> Option<Vec<u8>> {
        match self.incoming.try_send(line) {
            Ok(()) | Err(SendError::Closed(_)) => None,
            Err(SendError::Full(line)) => Some(line),
        }
    }

    /// Passes one message from the server to the proxy: responses settle their requests,
    /// the response to a replayed `initialize` is kept from the host, a message that is not
    /// a JSON-RPC message the proxy can read but whose id can be recovered goes on to be
    /// answered with an error, and anything else (an SDK's empty `{}` priming event) is
    /// dropped. Line breaks
    /// between tokens become spaces, since the host reads lines; a message with one inside
    /// a string is not JSON and is dropped, since no line could carry it unchanged.
    pub(super) async fn deliver(&self, mut line: Vec<u8>) {
        if !flatten(&mut line) {
            tracing::warn!(
                "dropped a message from the remote server with a raw line break in a string"
            );
            return;
        }
        match peek(&line) {
            Kind::Response { id } => {
                if self.is_modern() {
                    // A `tools/list` result teaches the tools' `Mcp-Param-*` headers, and
                    // loses the tools whose declarations are invalid.
                    line = self.params.read_response(&id, line);
                }
                if !self.settle(&id, &line) {
                    return;
                }
            }
            Kind::Batch => {
                let ids: Vec<Value> = batch_kinds(&line)
                    .into_iter()
                    .filter_map(|item| match item {
                        Kind::Response { id } => Some(id),
                        _ => None,
                    })
                    .collect();
                self.pending.take(&ids);
            }
            Kind::Other => {
                // A message whose id can be read goes on to the proxy's reader of the
                // server, which answers it with an error (never relays it); one without (an
                // SDK's empty `{}` priming event among them) cannot be answered.
                if std::str::from_utf8(&line).is_ok() && refusal_id(&line).is_some() {
                    tracing::warn!(
                        "the remote server sent a request the proxy cannot read; answered with an error"
                    );
                } else {
                    if is_priming(&line) {
                        tracing::debug!("dropped an empty event");
                    } else {
                        tracing::warn!(
                            "dropped an event from the remote server that is not a JSON-RPC message"
                        );
                    }
                    return;
                }
            }
            Kind::Request { .. } | Kind::Notification { .. } => {}
        }
        let _ = self.incoming.send(line).await;
    }
}

/// Whether an event's data is an empty object or nothing, as SDKs send to prime a stream.
fn is_priming(line: &[u8]) -> bool {
    let text: Vec<u8> = line
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    text.is_empty() || text == b"{}"
}

/// Turns line breaks between JSON tokens into spaces. Returns false when one stands inside a
/// string, where JSON allows none: that text is not JSON, and changing it would make it so.
fn flatten(line: &mut [u8]) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    for b in line.iter_mut() {
        if in_string {
            match *b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                b'\n' | b'\r' => return false,
                _ => {}
            }
        } else {
            match *b {
                b'"' => in_string = true,
                b'\n' | b'\r' => *b = b' ',
                _ => {}
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_become_spaces_only_between_tokens() {
        let mut ok = b"{\"a\":\r\n\"x\\\"\\n\",\n\"b\":1}".to_vec();
        assert!(flatten(&mut ok));
        assert_eq!(ok, b"{\"a\":  \"x\\\"\\n\", \"b\":1}");
        let mut bad = b"{\"a\":\"one\ntwo\"}".to_vec();
        assert!(!flatten(&mut bad));
        let mut bad = b"{\"a\":\"\\\\\r\"}".to_vec();
        assert!(!flatten(&mut bad));
    }
}
