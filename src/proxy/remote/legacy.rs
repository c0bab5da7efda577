//! The HTTP+SSE transport of protocol revision 2024-11-05, for servers that predate
//! Streamable HTTP: a GET on the URL opens the session's one event stream, whose first
//! `endpoint` event names where to POST messages; every answer comes on that stream.
//!
//! The stream is the session: when it ends, the session is over (the transport has no
//! resumption), and the proxy ends with an error.

use super::answer::Stop;
use super::error::RemoteError;
use super::http::ACCEPT_STREAM;
use super::session::RemoteSession;
use super::sse::{End, Events, is_event_stream};
use reqwest::Method;
use reqwest::header::ACCEPT;
use std::future::Future;
use std::sync::Arc;
use url::Url;

/// Opens the event stream and waits (within the connect timeout) for its `endpoint` event.
/// Returns the endpoint and the task that passes on the rest of the stream. An endpoint on
/// another origin is refused: the extra headers (a bearer token) must not follow it there.
pub(super) async fn open(
    shared: &Arc<RemoteSession>,
) -> Result<(Url, impl Future<Output = ()> + Send + 'static), RemoteError> {
    let url = shared.cfg.url.clone();
    // Before the switch no session id is known (the refused initialize gave none), so this
    // carries the extra headers only.
    let make = || {
        shared
            .request(Method::GET, url.clone())
            .0
            .header(ACCEPT, ACCEPT_STREAM)
    };
    let resp = shared
        .send(make, shared.cfg.connect_timeout, shared.cfg.retries)
        .await?;
    let status = resp.status();
    if !status.is_success() {
        let server = shared.error_body(resp).await;
        return Err(RemoteError::Status { status, server });
    }
    if !is_event_stream(&resp) {
        return Err(RemoteError::NoEndpoint(
            "the answer to GET is not an event stream".into(),
        ));
    }
    let mut events = Events::new(resp, shared.cfg.max_message);
    let wait = shared.cfg.connect_timeout;
    let first = async {
        loop {
            match events.next().await {
                Ok(event) if event.event.as_deref() == Some("endpoint") => {
                    return Ok(event.data.unwrap_or_default());
                }
                Ok(_) => continue,
                Err(End::Broken(e)) => return Err(e),
                Err(End::Dropped) => {
                    return Err(RemoteError::NoEndpoint("the stream ended before it".into()));
                }
            }
        }
    };
    let named = tokio::time::timeout(wait, first)
        .await
        .map_err(|_| RemoteError::NoEndpoint(format!("none within {wait:?}")))??;
    let endpoint = url
        .join(named.trim())
        .map_err(|e| RemoteError::NoEndpoint(e.to_string()))?;
    if endpoint.origin() != url.origin() {
        return Err(RemoteError::ForeignEndpoint);
    }
    tracing::info!(
        endpoint = %super::config::display_url(&endpoint),
        "connected with the HTTP+SSE transport"
    );
    let s = shared.clone();
    let reader = async move {
        let (stop, _) = s.pump(&mut events, &[], std::future::pending()).await;
        match stop {
            Stop::Ended(End::Broken(e)) => s.fatal(e),
            Stop::Ended(End::Dropped) | Stop::Settled | Stop::Interrupted => {
                s.fatal(RemoteError::LegacyClosed)
            }
        }
    };
    Ok((endpoint, reader))
}
