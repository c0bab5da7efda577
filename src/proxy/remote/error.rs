//! Why talking to the remote server failed, and how the host is told.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// A failure of the remote connection. Messages never carry a URL's query (which may hold a
/// token) or a header value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum RemoteError {
    /// No connection could be made, after every retry.
    #[error("cannot reach the remote server at {url}: {detail}")]
    Unreachable {
        /// The endpoint, without its query.
        url: String,
        /// What the network stack said.
        detail: String,
    },
    /// The connection failed after the request may have reached the server, so it is not
    /// sent again.
    #[error("the connection to the remote server failed: {0}")]
    Transport(String),
    /// A new session could not be started after the server forgot ours.
    #[error("cannot start a new remote session: {0}")]
    RenewFailed(Box<RemoteError>),
    /// The server took longer than the limit to answer.
    #[error("the remote server did not answer within {0:?}")]
    Timeout(Duration),
    /// The server answered with an HTTP error; what it said, when its body was a JSON-RPC
    /// error or short text, is kept for the host.
    #[error("the remote server answered HTTP {status}{}", said(server.as_deref()))]
    Status {
        /// The HTTP status.
        status: StatusCode,
        /// The server's JSON-RPC error object (`code`, `message`, `data`), or `{"body":
        /// TEXT}` for a body that is not one.
        server: Option<Box<Value>>,
    },
    /// The server forgot the session while a request was under way (a restart, an expiry),
    /// so its answer is lost.
    #[error("the remote server forgot the session before it answered (HTTP {status}){}", said(server.as_deref()))]
    Expired {
        /// The HTTP status (404, or a 400 that says the session is unknown).
        status: StatusCode,
        /// What the server said, as for [`RemoteError::Status`].
        server: Option<Box<Value>>,
    },
    /// The server still refused the session as unknown right after a new one was started:
    /// no session with it can be had.
    #[error("the remote server refuses every session as unknown (HTTP {status}){}", said(server.as_deref()))]
    SessionRefused {
        /// The HTTP status.
        status: StatusCode,
        /// What the server said, as for [`RemoteError::Status`].
        server: Option<Box<Value>>,
    },
    /// A JSON body or an event was larger than the message limit.
    #[error("a message from the remote server is larger than {0} bytes")]
    TooLarge(usize),
    /// A stream ended before the responses it owed, and could not be resumed.
    #[error("the remote server's stream ended before it answered")]
    StreamLost,
    /// An event stream that does not parse.
    #[error("the remote server's event stream is malformed: {0}")]
    Malformed(String),
    /// The server sent an `Mcp-Session-Id` outside visible ASCII.
    #[error("the remote server sent an invalid Mcp-Session-Id")]
    BadSessionId,
    /// The session expired before the host's `initialize` was seen, so none can be replayed.
    #[error("the remote session expired and there is no initialize to start a new one")]
    CannotRenew,
    /// A server of the old HTTP+SSE transport named a message endpoint on another origin.
    #[error("the remote server's message endpoint is on another origin")]
    ForeignEndpoint,
    /// A server of the old HTTP+SSE transport sent no usable `endpoint` event.
    #[error("the remote server sent no endpoint event: {0}")]
    NoEndpoint(String),
    /// The session's stream of the old HTTP+SSE transport ended: the session is gone.
    #[error("the remote server closed its event stream")]
    LegacyClosed,
    /// Too many requests already wait for the remote server.
    #[error("too many requests wait for the remote server")]
    Busy,
    /// The proxy (or the system) ran out of file descriptors for a connection: a passing
    /// shortage, answered like [`RemoteError::Busy`].
    #[error("the proxy is out of file descriptors for now; try again")]
    OutOfDescriptors,
    /// The HTTP client could not be set up (TLS configuration).
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
    /// The proxy ended (the host left, or a signal) before the server answered, and the
    /// shutdown grace ran out.
    #[error("the proxy ended before the remote server answered (shutdown grace {0:?})")]
    Shutdown(Duration),
    /// How a session that did not fail still ended badly: requests left unanswered, or a
    /// server never reached. The text says which.
    #[error("{0}")]
    Abandoned(String),
}

impl RemoteError {
    /// The `data.reason` of the JSON-RPC error the host gets for a request this failure
    /// left unanswered.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            RemoteError::Unreachable { .. } => "unreachable",
            RemoteError::Transport(_) => "transport",
            RemoteError::RenewFailed(_) => "session_expired",
            RemoteError::Timeout(_) => "timeout",
            RemoteError::Status { .. } => "http_status",
            RemoteError::Expired { .. } | RemoteError::SessionRefused { .. } => "session_expired",
            RemoteError::TooLarge(_) => "too_large",
            RemoteError::StreamLost => "stream_lost",
            RemoteError::Malformed(_) => "malformed",
            RemoteError::BadSessionId => "bad_session_id",
            RemoteError::CannotRenew => "session_expired",
            RemoteError::ForeignEndpoint => "foreign_endpoint",
            RemoteError::NoEndpoint(_) => "no_endpoint",
            RemoteError::LegacyClosed => "stream_lost",
            RemoteError::Busy | RemoteError::OutOfDescriptors => "busy",
            RemoteError::Client(_) => "client",
            RemoteError::Shutdown(_) | RemoteError::Abandoned(_) => "shutdown",
        }
    }

    /// Whether the session cannot go on after this failure: the server cannot be reached,
    /// or no session with it can be had. Other failures cost one request.
    pub(crate) fn ends_session(&self) -> bool {
        match self {
            RemoteError::Unreachable { .. }
            | RemoteError::BadSessionId
            | RemoteError::CannotRenew
            | RemoteError::RenewFailed(_)
            | RemoteError::SessionRefused { .. }
            | RemoteError::ForeignEndpoint
            | RemoteError::NoEndpoint(_)
            | RemoteError::LegacyClosed
            | RemoteError::Client(_) => true,
            RemoteError::Timeout(_)
            | RemoteError::Transport(_)
            | RemoteError::Status { .. }
            | RemoteError::Expired { .. }
            | RemoteError::TooLarge(_)
            | RemoteError::StreamLost
            | RemoteError::Malformed(_)
            | RemoteError::Busy
            | RemoteError::OutOfDescriptors
            | RemoteError::Shutdown(_)
            | RemoteError::Abandoned(_) => false,
        }
    }

    /// The JSON-RPC error response for request `id`, as a line for the host. The broker's
    /// error type has no room for the transport's reasons (`unreachable`, `http_status` and
    /// its `status`), so the object is built here, with the internal error's code.
    pub(crate) fn response_for(&self, id: &Value) -> Vec<u8> {
        let mut data = json!({"reason": self.reason()});
        if let RemoteError::Status { status, server }
        | RemoteError::Expired { status, server }
        | RemoteError::SessionRefused { status, server } = self
        {
            data["status"] = json!(status.as_u16());
            if let Some(server) = server {
                data["server"] = (**server).clone();
            }
        }
        let v = json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": crate::error::ErrorKind::Internal.wire().code,
            "message": self.to_string(),
            "data": data,
        }});
        // Infallible for a value (serde_json fails only on maps with non-string keys).
        crate::json::encode(&v)
    }

    /// The end of a session that left `unanswered` requests without their answer after
    /// the shutdown `grace`, or whose server was never reached (`unreached` says why).
    pub(crate) fn abandoned(unanswered: usize, grace: Duration, unreached: Option<String>) -> Self {
        let mut text = match unanswered {
            0 => String::new(),
            1 => {
                format!("1 request was still unanswered when the {grace:?} shutdown grace ran out")
            }
            n => format!(
                "{n} requests were still unanswered when the {grace:?} shutdown grace ran out"
            ),
        };
        if let Some(why) = unreached {
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str("the remote server was never reached: ");
            text.push_str(&why);
        }
        RemoteError::Abandoned(text)
    }

    /// A connection failure from `e`, with the causes that say what went wrong (connection
    /// refused, certificate invalid) and without the URL reqwest would add.
    pub(super) fn unreachable(url: &url::Url, e: reqwest::Error) -> RemoteError {
        RemoteError::Unreachable {
            url: super::config::display_url(url),
            detail: chain(&e.without_url()),
        }
    }
}

/// The server's own words for an error message: `: MESSAGE` (or the body's text), or nothing.
fn said(server: Option<&Value>) -> String {
    server
        .and_then(|v| v.get("message").or_else(|| v.get("body")))
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .map(|m| format!(": {m}"))
        .unwrap_or_default()
}

/// What a server said in the body of an HTTP error: its JSON-RPC error object (kept whole,
/// within the size read), or else its text, stripped of control characters and cut to
/// [`MAX_SAID`] characters; `None` for an empty body.
pub(super) fn server_said(body: &[u8]) -> Option<Box<Value>> {
    if let Ok(v) = serde_json::from_slice::<Value>(body)
        && let Some(e) = v.get("error").filter(|e| e.is_object())
    {
        return Some(Box::new(e.clone()));
    }
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_SAID)
        .collect();
    let text = text.trim();
    (!text.is_empty()).then(|| Box::new(json!({ "body": text })))
}

/// Whether what a server said in a 400 is that it does not know the session: some servers
/// answer so (instead of 404) for a session they forgot.
pub(super) fn says_unknown_session(server: Option<&Value>) -> bool {
    let Some(text) = server
        .and_then(|v| v.get("message").or_else(|| v.get("body")))
        .and_then(Value::as_str)
    else {
        return false;
    };
    let text = text.to_lowercase();
    text.contains("session")
        && [
            "unknown",
            "not found",
            "invalid",
            "no valid",
            "expired",
            "missing",
            "does not exist",
            "terminated",
        ]
        .iter()
        .any(|w| text.contains(w))
}

/// Longest text of a server's error body kept for the host.
pub(super) const MAX_SAID: usize = 1024;

/// An error and its sources, joined: reqwest's own message alone ("error sending request")
/// does not say why.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}
