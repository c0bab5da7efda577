//! `fsbroker proxy --url`: the server is remote, reached as a Streamable HTTP client (or,
//! for older servers, with the HTTP+SSE transport of 2024-11-05).
//!
//! The connection is a [`Link`] like a local child's: lines in, lines out, an end signal and
//! an exit code. So the proxy's relay, capability injection, elicitation and brokering run
//! unchanged; only how a line reaches the server differs. Each file has one job:
//!
//! - `config`: the endpoint and headers from the command line (secrets from the
//!   environment only);
//! - `session`: what the session's tasks share (session id, protocol version) and how
//!   messages reach the proxy;
//! - `pending`: the requests waiting for an answer, at most 1024;
//! - `http`: sending with bounded reconnection, POST with a new session on 404, DELETE;
//! - `answer`: reading a POST's answer (a JSON body or an event stream, resumed with
//!   `Last-Event-ID` when it drops);
//! - `renew`: a new session when the server forgot ours;
//! - `sse`: bounded event streams and reconnection delays;
//! - `driver`: the order in which messages are sent, and the end;
//! - `requests`: the host's requests in flight and their cancellation;
//! - `listen`: the GET stream for the server's own messages;
//! - `legacy`: the HTTP+SSE fallback;
//! - `modern`: the Streamable HTTP of revision 2026-07-28 (no session, a POST per message
//!   with the request metadata headers), for a session whose era is modern;
//! - `params`: that transport's `Mcp-Param-*` headers, from the tools' `x-mcp-header`
//!   declarations in the server's `tools/list` results.
//!
//! The driver, which takes the lines meant for the server in order, never waits for more
//! than the server's acceptance of a message (its answer's status and headers): answers
//! are read on tasks of their own. Waiting for an answer there would let a server that
//! sends many requests before its answer fill the queues towards the host and the broker,
//! whose replies only the driver sends: a cycle that would stall the proxy.

mod answer;
mod config;
mod deliver;
mod driver;
mod error;
mod fds;
mod http;
mod legacy;
mod listen;
mod modern;
mod params;
mod pending;
mod pin;
mod renew;
mod requests;
mod session;
mod sse;

pub(crate) use config::RemoteConfig;
// What the command line builds a remote connection from.
#[cfg(feature = "cli")]
pub(crate) use config::{ConfigError, HeaderArgs, build_headers, parse_url};
pub(crate) use error::RemoteError;

use super::link::{Link, QUEUE_LINES};
use crate::lines::{budget, line_channel};
use crate::locks::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long TCP keep-alive probes wait on an idle connection: a server that vanished
/// without closing its streams is noticed by the operating system.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// How long an idle connection is kept for reuse before it is closed.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Redirects followed for one request, all within the URL's origin.
const MAX_REDIRECTS: usize = 5;

/// How a remote session ended: read it after the proxy has run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    failure: Arc<Mutex<Option<RemoteError>>>,
    key: Arc<tokio::sync::watch::Sender<Option<String>>>,
}

impl Outcome {
    /// The failure that ended the session, if one did (each failure is taken once).
    pub(crate) fn take_error(&self) -> Option<RemoteError> {
        lock(&self.failure).take()
    }

    /// The server's public key (`sha256//BASE64`), once an answer came over TLS: waited
    /// for up to `wait`, `None` when none came by then.
    pub(crate) async fn server_key(&self, wait: Duration) -> Option<String> {
        let mut key = self.key.subscribe();
        let came = tokio::time::timeout(wait, key.wait_for(Option::is_some)).await;
        came.ok()?.ok()?.clone()
    }
}

/// Starts a session with the remote server of `cfg` and returns its [`Link`]. Nothing is
/// sent until the host's first message (its `initialize`); an unreachable server is then
/// reported to the host as an error for that request, and the link's exit code is 1.
///
/// TLS uses the platform's certificate verifier and roots with the ring provider, which is
/// installed as the process's default rustls provider if there is none yet. The proxy
/// variables of the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`) are
/// honoured, except for a loopback URL, which is always reached directly.
pub(crate) fn connect(cfg: RemoteConfig) -> Result<(Link, Outcome), RemoteError> {
    // Fails only when a provider is already installed, which then serves as well.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let origin_only = reqwest::redirect::Policy::custom(|attempt| {
        if may_follow(attempt.previous(), attempt.url()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    // Sized from the descriptor limit, raised first: each answer that streams holds a
    // socket, and a burst must not leave a socket per request open once it is over.
    let limit = crate::limits::raise_descriptor_limit();
    let max_pending = fds::pending_cap(limit);
    tracing::info!(descriptors = ?limit, max_pending, "requests that may wait for the remote server");
    let mut builder = reqwest::Client::builder()
        .connect_timeout(cfg.connect_timeout)
        .pool_max_idle_per_host(fds::POOL_IDLE)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .tcp_keepalive(KEEPALIVE)
        .redirect(origin_only)
        // The certificate each answer came over, for the server's key (`pin.rs`).
        .tls_info(true)
        .user_agent(concat!("fsbroker/", env!("CARGO_PKG_VERSION")));
    if config::is_loopback(&cfg.url) {
        // Headers from the environment may go over plain http to loopback only because
        // they never leave the machine; a proxy would carry them off it in clear (and it
        // could not reach our loopback anyway). Redirects and the old transport's endpoint
        // stay on this origin, so this covers every request of the session.
        builder = builder.no_proxy();
    }
    let client = builder
        .build()
        .map_err(|e| RemoteError::Client(error::chain(&e)))?;
    tracing::info!(url = %config::display_url(&cfg.url), headers = ?header_names(&cfg), "remote server");

    let (to_server, outgoing) = line_channel(QUEUE_LINES, budget(cfg.max_message));
    let (incoming, from_server) = line_channel(QUEUE_LINES, budget(cfg.max_message));
    let (end, end_rx) = oneshot::channel::<()>();
    let outcome = Outcome::default();
    let shared = session::RemoteSession::new(
        client,
        cfg,
        incoming,
        (outcome.failure.clone(), outcome.key.clone()),
        max_pending,
    );
    let task = tokio::spawn(driver::drive(shared, outgoing, end_rx));
    let exit = Box::pin(async move { task.await.unwrap_or(1) });
    Ok((
        Link {
            to_server,
            from_server,
            end,
            exit,
            pid: None,
        },
        outcome,
    ))
}

/// Whether a redirect from the request whose URLs so far are `previous` (the original
/// first) to `next` is followed: only within the original URL's origin (scheme, host and
/// port, so never from https to http), since the extra headers (a token) go with it, and at
/// most [`MAX_REDIRECTS`] times.
fn may_follow(previous: &[url::Url], next: &url::Url) -> bool {
    let same = previous
        .first()
        .is_some_and(|first| first.origin() == next.origin());
    same && previous.len() <= MAX_REDIRECTS
}

/// The names (never the values) of the extra headers, for the log.
fn header_names(cfg: &RemoteConfig) -> Vec<String> {
    cfg.headers.keys().map(|k| k.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn redirects_stay_within_the_origin_and_stop_after_five() {
        let start = url("https://mcp.example.com/mcp");
        assert!(may_follow(
            std::slice::from_ref(&start),
            &url("https://mcp.example.com/v2")
        ));
        for other in [
            "http://mcp.example.com/mcp",
            "https://mcp.example.com:8443/mcp",
            "https://evil.example.com/mcp",
        ] {
            assert!(
                !may_follow(std::slice::from_ref(&start), &url(other)),
                "{other}"
            );
        }
        // Reqwest lists the URLs before this redirect: the fifth redirect sees five.
        let hops: Vec<url::Url> = (0..5).map(|_| start.clone()).collect();
        assert!(may_follow(&hops, &start));
        let hops: Vec<url::Url> = (0..6).map(|_| start.clone()).collect();
        assert!(!may_follow(&hops, &start));
    }
}
