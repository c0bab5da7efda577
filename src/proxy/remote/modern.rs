//! The Streamable HTTP transport of revision 2026-07-28: every message is a POST of its own,
//! with no session, no GET stream, no resumption and no DELETE. Each POST carries the
//! request metadata headers the revision requires (`MCP-Protocol-Version`, equal to the
//! body's `_meta` version; `Mcp-Method`; `Mcp-Name` for `tools/call`, `prompts/get` and
//! `resources/read`), since a server must refuse a request without them (`-32020`
//! HeaderMismatch) and routes one without `MCP-Protocol-Version` to its legacy transport.
//! A request is cancelled by closing its response stream (the driver lets go of it); no
//! `notifications/cancelled` is sent.

use super::error::{MAX_SAID, RemoteError};
use super::http::{ACCEPT_POST, read_body};
use super::session::Shared;
use crate::proxy::era::{MODERN_VERSION, VERSION_KEY};
use base64::Engine;
use bytes::Bytes;
use reqwest::Response;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// The methods whose target is mirrored in `Mcp-Name`, and the param that names it.
const NAMED: [(&str, &str); 3] = [
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
];

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

/// A header value for `value`: as it is when it is printable ASCII without spaces at either
/// end (and does not look like the sentinel), else the revision's Base64 sentinel
/// `=?base64?...?=` of its UTF-8 bytes, so the server can compare it with the body exactly.
pub(super) fn encode_name(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value == value.trim()
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        return value.to_owned();
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
    format!("=?base64?{b64}?=")
}

impl Shared {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sent_plain_or_in_the_base64_sentinel() {
        assert_eq!(encode_name("get_weather"), "get_weather");
        assert_eq!(encode_name("file:///a b.txt"), "file:///a b.txt");
        assert_eq!(encode_name(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(encode_name("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode_name("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
    }

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
