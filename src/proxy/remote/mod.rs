//! `fsbroker proxy --url`: the server is remote, reached as a Streamable HTTP client (or,
//! for older servers, with the HTTP+SSE transport of 2024-11-05).
//!
//! The connection is a [`Link`] like a local child's: lines in, lines out, an end signal and
//! an exit code. So the proxy's relay, capability injection, elicitation and brokering run
//! unchanged; only how a line reaches the server differs. Each file has one job:
//!
//! - `config`: the endpoint and headers from the command line (secrets from the
//!   environment only);
//! - `session`: what the session's tasks share (session id, protocol version, requests
//!   waiting for answers) and how messages reach the proxy;
//! - `http`: POST and its answers, resumption with `Last-Event-ID`, a new session on 404,
//!   DELETE;
//! - `sse`: bounded event streams and reconnection delays;
//! - `driver`: the order in which messages are sent, the GET stream, the end;
//! - `legacy`: the HTTP+SSE fallback.

mod config;
mod driver;
mod error;
mod http;
mod legacy;
mod session;
mod sse;

pub use config::{
    ConfigError, HeaderArgs, RemoteConfig, build_headers, display_url, is_loopback, looks_secret,
    parse_url,
};
pub use error::RemoteError;
pub use session::MAX_PENDING;
pub use sse::{FIRST_DELAY, MAX_DELAY, MIN_DELAY};

use super::link::{Link, QUEUE_LINES};
use crate::lines::{budget, line_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long TCP keep-alive probes wait on an idle connection: a server that vanished
/// without closing its streams is noticed by the operating system.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// How a remote session ended: read it after the proxy has run.
#[derive(Debug, Clone, Default)]
pub struct Outcome(Arc<Mutex<Option<RemoteError>>>);

impl Outcome {
    /// The failure that ended the session, if one did (each failure is taken once).
    pub fn take_error(&self) -> Option<RemoteError> {
        match self.0.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        }
    }
}

/// Starts a session with the remote server of `cfg` and returns its [`Link`]. Nothing is
/// sent until the host's first message (its `initialize`); an unreachable server is then
/// reported to the host as an error for that request, and the link's exit code is 1.
///
/// TLS uses the platform's certificate verifier and roots with the ring provider, which is
/// installed as the process's default rustls provider if there is none yet.
pub fn connect(cfg: RemoteConfig) -> Result<(Link, Outcome), RemoteError> {
    // Fails only when a provider is already installed, which then serves as well.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let origin_only = reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same && attempt.previous().len() < 5 {
            attempt.follow()
        } else {
            // The extra headers (a token) must not follow a redirect to another origin.
            attempt.stop()
        }
    });
    let client = reqwest::Client::builder()
        .connect_timeout(cfg.connect_timeout)
        .tcp_keepalive(KEEPALIVE)
        .redirect(origin_only)
        .user_agent(concat!("fsbroker/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| RemoteError::Client(error::chain(&e)))?;
    tracing::info!(url = %display_url(&cfg.url), headers = ?header_names(&cfg), "remote server");

    let (to_server, outgoing) = line_channel(QUEUE_LINES, budget(cfg.max_message));
    let (incoming, from_server) = line_channel(QUEUE_LINES, budget(cfg.max_message));
    let (end, end_rx) = oneshot::channel::<()>();
    let outcome = Outcome::default();
    let shared = session::Shared::new(client, cfg, incoming, outcome.0.clone());
    let task = tokio::spawn(driver::drive(shared, outgoing, end_rx));
    let exit = Box::pin(async move { task.await.unwrap_or(1) });
    Ok((
        Link {
            to_server,
            from_server,
            end,
            exit,
        },
        outcome,
    ))
}

/// The names (never the values) of the extra headers, for the log.
fn header_names(cfg: &RemoteConfig) -> Vec<String> {
    cfg.headers.keys().map(|k| k.to_string()).collect()
}
