//! The Streamable HTTP transport of revision 2026-07-28: every message is a POST of its own,
//! with no session, no GET stream, no resumption and no DELETE. Each POST carries the
//! request metadata headers the revision requires (`MCP-Protocol-Version`, equal to the
//! body's `_meta` version; `Mcp-Method`; `Mcp-Name` for `tools/call`, `prompts/get` and
//! `resources/read`), since a server must refuse a request without them (`-32020`
//! HeaderMismatch) and routes one without `MCP-Protocol-Version` to its legacy transport.
//! A request is cancelled by closing its response stream (the driver lets go of it); no
//! `notifications/cancelled` is sent. A `tools/call` refused with `-32020` is tried once
//! more after the proxy listed the tools itself, as the revision advises: the server's
//! tools may have changed their `x-mcp-header` declarations, or the host called before it
//! listed them.

use super::error::{MAX_SAID, RemoteError};
use super::http::{ACCEPT_POST, read_body};
use super::params::{self, encode_name};
use super::session::RemoteSession;
use super::sse::{Events, is_event_stream, message};
use crate::proxy::names::{MODERN_VERSION, VERSION_KEY};
use bytes::Bytes;
use reqwest::Response;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// The methods whose target is mirrored in `Mcp-Name`, and the param that names it.
/// The `tasks/*` rows are the tasks extension's HTTP binding (`params.taskId`), which the
/// TypeScript SDK 2.x server checks as it checks the core ones.
const NAMED: [(&str, &str); 6] = [
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
    ("tasks/get", "taskId"),
    ("tasks/update", "taskId"),
    ("tasks/cancel", "taskId"),
];

/// The JSON-RPC code of a header mismatch (revision 2026-07-28).
const HEADER_MISMATCH: i64 = -32020;

/// Pages of its own `tools/list` the proxy reads at most before a retry.
const MAX_OWN_PAGES: usize = 32;

/// The id of the proxy's own `tools/list`: its answer comes on its own POST's response, so
/// it never meets the host's ids.
const OWN_LIST_ID: &str = "fsbroker-mcp-param-list";

/// What a modern POST brought back once the server took it.
pub(super) enum Answered {
    /// The answer to read (a JSON body or an event stream), or the acceptance of a
    /// notification.
    Accepted(Response),
    /// An HTTP error whose body is the JSON-RPC answer (a modern server answers an unknown
    /// method with 404, an unsupported version or a header mismatch with 400, each with
    /// the JSON-RPC error): the line to pass on as the request's response.
    Said(Vec<u8>),
}

/// The request metadata headers for the message `line`. Fails when a value cannot be a
/// header at all (a method with a line break), which the server would refuse anyway.
pub(super) fn headers_for(line: &[u8]) -> Result<HeaderMap, RemoteError> {
    let v: Value = serde_json::from_slice(line)
        .map_err(|_| RemoteError::Malformed("a message that is not JSON".into()))?;
    let method = v.get("method").and_then(Value::as_str).unwrap_or_default();
    let version = v
        .pointer("/params/_meta")
        .and_then(|m| m.get(VERSION_KEY))
        .and_then(Value::as_str)
        .unwrap_or(MODERN_VERSION);
    let mut h = HeaderMap::new();
    let bad = |what: &str| RemoteError::Malformed(format!("{what} cannot be an HTTP header"));
    h.insert(
        HeaderName::from_static("mcp-protocol-version"),
        HeaderValue::from_str(version).map_err(|_| bad("the protocol version"))?,
    );
    h.insert(
        HeaderName::from_static("mcp-method"),
        HeaderValue::from_str(method).map_err(|_| bad("the method"))?,
    );
    if let Some((_, param)) = NAMED.iter().find(|(m, _)| *m == method)
        && let Some(name) = v
            .get("params")
            .and_then(|p| p.get(*param))
            .and_then(Value::as_str)
    {
        h.insert(
            HeaderName::from_static("mcp-name"),
            HeaderValue::from_str(&encode_name(name)).map_err(|_| bad("the name"))?,
        );
    }
    Ok(h)
}

impl RemoteSession {
    /// POSTs the host's request `body` (id `id`) with `headers`. A `tools/call` the server
    /// refuses with `-32020` is tried once more, with headers made again from what a fresh
    /// `tools/list` of the proxy's own taught: a refused call was never run, so a second
    /// try cannot run it twice. When the list cannot be had, or an argument then cannot be
    /// mirrored, the host gets the first refusal (or the proxy's).
    pub(super) async fn post_request_modern(
        &self,
        body: &Bytes,
        headers: &HeaderMap,
        id: &Value,
    ) -> Result<Answered, RemoteError> {
        let first = self.post_modern(body, headers, Some(id)).await?;
        let Answered::Said(said) = &first else {
            return Ok(first);
        };
        if !is_mismatch(said) || !is_tool_call(body) {
            return Ok(first);
        }
        tracing::info!(
            "the remote server refused a tool call's headers (-32020); the proxy lists the tools and tries once more"
        );
        match self.relist(body).await {
            Ok(true) => {}
            Ok(false) => return Ok(first),
            Err(e) => {
                tracing::warn!(error = %e, "the proxy's own tools/list failed; the refusal goes to the host");
                return Ok(first);
            }
        }
        let mut again = headers_for(body)?;
        if let Err(why) = self.params.mirror(body, &mut again) {
            return Ok(Answered::Said(params::refusal(id, &why)));
        }
        self.post_modern(body, &again, Some(id)).await
    }

    /// Lists the server's tools for the proxy itself, with the `_meta` of the host's
    /// request `call`, and learns their declarations, page by page (at most
    /// [`MAX_OWN_PAGES`]). Returns false when the server refused the list.
    async fn relist(&self, call: &[u8]) -> Result<bool, RemoteError> {
        let meta = serde_json::from_slice::<Value>(call)
            .ok()
            .and_then(|v| v.pointer("/params/_meta").cloned())
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        let id = Value::String(OWN_LIST_ID.into());
        let mut cursor: Option<String> = None;
        for page in 0..MAX_OWN_PAGES {
            let mut params = serde_json::json!({"_meta": meta});
            if let Some(c) = &cursor {
                params["cursor"] = Value::String(c.clone());
            }
            let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
                "params": params});
            let line = crate::json::encode(&req);
            let headers = headers_for(&line)?;
            let resp = match self
                .post_modern(&Bytes::from(line), &headers, Some(&id))
                .await?
            {
                Answered::Accepted(resp) => resp,
                Answered::Said(_) => {
                    tracing::warn!(
                        "the remote server refused the proxy's own tools/list; the refusal goes to the host"
                    );
                    return Ok(false);
                }
            };
            let answer = self.read_own(resp, &id).await?;
            cursor = self.params.learn_own(&answer, page == 0);
            if cursor.is_none() {
                return Ok(true);
            }
        }
        tracing::warn!(
            pages = MAX_OWN_PAGES,
            "the server's tool list has more pages than the proxy reads; the rest are not known"
        );
        Ok(true)
    }

    /// The answer to the proxy's own request `id` from its POST's response (a JSON body or
    /// an event stream), within the request timeout; nothing of it reaches the host.
    async fn read_own(&self, resp: Response, id: &Value) -> Result<Vec<u8>, RemoteError> {
        let limit = self.cfg.request_timeout;
        if !is_event_stream(&resp) {
            return read_body(resp, self.cfg.max_message, limit).await;
        }
        let mut events = Events::new(resp, self.cfg.max_message);
        let reading = async {
            loop {
                let Ok(event) = events.next().await else {
                    return Err(RemoteError::StreamLost);
                };
                let Some(m) = message(event) else { continue };
                if serde_json::from_slice::<Value>(&m)
                    .is_ok_and(|v| v.get("id") == Some(id) && v.get("method").is_none())
                {
                    return Ok(m);
                }
            }
        };
        tokio::time::timeout(limit, reading)
            .await
            .unwrap_or(Err(RemoteError::Timeout(limit)))
    }

    /// POSTs one message of the modern transport with `headers`. `waits` says whether it is
    /// a request (whose answer's headers may take the request timeout). A 4xx or 5xx whose
    /// body is a JSON-RPC error is that request's answer (with `id`, when the server could
    /// not read it); any other is an error.
    pub(super) async fn post_modern(
        &self,
        body: &Bytes,
        headers: &HeaderMap,
        id: Option<&Value>,
    ) -> Result<Answered, RemoteError> {
        let limit = if id.is_some() {
            self.cfg.request_timeout
        } else {
            self.cfg.connect_timeout
        };
        let make = || {
            self.client
                .post(self.cfg.url.clone())
                .headers(self.cfg.headers.clone())
                .headers(headers.clone())
                .header(ACCEPT, ACCEPT_POST)
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
        };
        let resp = self.send(make, limit, self.cfg.retries).await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(Answered::Accepted(resp));
        }
        let raw = read_body(resp, MAX_SAID * 4, self.cfg.connect_timeout)
            .await
            .unwrap_or_default();
        if let Some(id) = id
            && let Ok(mut said) = serde_json::from_slice::<Value>(&raw)
            && said.get("error").is_some_and(Value::is_object)
            && said.get("result").is_none()
        {
            if said.get("id").is_none_or(Value::is_null)
                && let Some(o) = said.as_object_mut()
            {
                o.insert("id".into(), id.clone());
            }
            if said.get("id") == Some(id)
                && let Ok(line) = serde_json::to_vec(&said)
            {
                tracing::debug!(%status, "the remote server answered a request with an HTTP error and a JSON-RPC error");
                return Ok(Answered::Said(line));
            }
        }
        Err(RemoteError::Status {
            status,
            server: super::error::server_said(&raw),
        })
    }
}

/// Whether an answer is the `-32020` header mismatch error.
fn is_mismatch(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line)
        .is_ok_and(|v| v.pointer("/error/code").and_then(Value::as_i64) == Some(HEADER_MISMATCH))
}

/// Whether a request is a `tools/call`.
fn is_tool_call(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line)
        .is_ok_and(|v| v.get("method").and_then(Value::as_str) == Some("tools/call"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_mirror_the_body() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"roots","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let h = headers_for(line).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h["mcp-name"], "roots");
        assert_eq!(h["mcp-protocol-version"], "2026-07-28");
        let probe = br#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#;
        let h = headers_for(probe).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(h["mcp-protocol-version"], MODERN_VERSION);
        assert!(h.get("mcp-name").is_none());
    }
}
