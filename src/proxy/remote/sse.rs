//! Reading a server's event stream: events of bounded size, the last event id (the cursor
//! for resumption), and the server's advice on when to reconnect.

use super::error::RemoteError;
use futures_util::{Stream, StreamExt};
use sse_stream::{Sse, SseByteStream};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The first reconnection delay, doubled at each further attempt.
pub(super) const FIRST_DELAY: Duration = Duration::from_millis(200);
/// The longest delay between two reconnection attempts, whatever the server advises.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(10);
/// The shortest delay, whatever the server advises: a server that closes every stream at
/// once and advises `retry: 0` must not make the proxy spin.
pub(super) const MIN_DELAY: Duration = Duration::from_millis(100);

/// The longest event id kept as the resumption cursor. Ids are sent back in
/// `Last-Event-ID`; a server's ids are short (the TypeScript SDK's are under 100 bytes), and
/// one of megabytes would be sent back with every reconnection.
pub(super) const MAX_EVENT_ID: usize = 1024;

/// Why a byte stream was cut.
#[derive(Debug, thiserror::Error)]
enum Cut {
    /// More bytes than the message limit arrived without completing an event.
    #[error("event larger than the limit")]
    TooLarge,
    /// The connection failed.
    #[error("{0}")]
    Http(String),
}

/// How a stream ended.
#[derive(Debug)]
pub(super) enum End {
    /// The server closed it, or the connection dropped: it may be resumed.
    Dropped,
    /// It cannot be read on: an event over the limit or malformed data. Resuming would
    /// replay the same bytes.
    Broken(RemoteError),
}

/// The events of one response body.
pub(super) struct Events {
    inner: Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>,
    /// Bytes received since the last complete event.
    since_event: Arc<AtomicUsize>,
    limit: usize,
    /// The id of the last event that carried one.
    pub(crate) last_id: Option<String>,
    /// The server's last `retry` advice.
    pub(crate) retry: Option<Duration>,
}

impl Events {
    /// Reads `resp` as an event stream. An event (with the comments and blank lines before
    /// it) may take at most `limit` bytes plus one network chunk; a larger one breaks the
    /// stream, so memory stays bounded whatever the server sends.
    pub(super) fn new(resp: reqwest::Response, limit: usize) -> Events {
        let chunks = resp
            .bytes_stream()
            .map(|chunk| chunk.map_err(|e| super::error::chain(&e.without_url())));
        Events::from_chunks(chunks, limit)
    }

    /// Reads a body given as its chunks (an error says why the connection failed).
    fn from_chunks(
        chunks: impl Stream<Item = Result<bytes::Bytes, String>> + Send + 'static,
        limit: usize,
    ) -> Events {
        let since_event = Arc::new(AtomicUsize::new(0));
        let count = since_event.clone();
        let bytes = chunks.map(move |chunk| {
            let chunk = chunk.map_err(Cut::Http)?;
            let total = count.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if total > limit {
                return Err(Cut::TooLarge);
            }
            Ok(chunk)
        });
        Events {
            inner: Box::pin(SseByteStream::new(bytes)),
            since_event,
            limit,
            last_id: None,
            retry: None,
        }
    }

    /// The next event, or how the stream ended. Ids and `retry` advice are noted as they
    /// pass, also on events without data (such as a server's priming event).
    pub(super) async fn next(&mut self) -> Result<Sse, End> {
        match self.inner.next().await {
            Some(Ok(event)) => {
                self.since_event.store(0, Ordering::Relaxed);
                if let Some(id) = &event.id {
                    // An empty id resets the cursor, as in the SSE standard. So does one
                    // too long to send back: resuming from an older id would replay
                    // messages already passed on.
                    if id.len() > MAX_EVENT_ID {
                        tracing::warn!(bytes = id.len(), "an event id is too long to resume from");
                    }
                    self.last_id = (!id.is_empty() && id.len() <= MAX_EVENT_ID).then(|| id.clone());
                }
                if let Some(ms) = event.retry {
                    self.retry = Some(Duration::from_millis(ms).min(MAX_DELAY));
                }
                Ok(event)
            }
            Some(Err(sse_stream::Error::Body(cause))) => match cause.downcast_ref::<Cut>() {
                Some(Cut::TooLarge) => Err(End::Broken(RemoteError::TooLarge(self.limit))),
                Some(Cut::Http(why)) => {
                    tracing::debug!(error = %why, "event stream dropped");
                    Err(End::Dropped)
                }
                None => Err(End::Dropped),
            },
            Some(Err(e)) => Err(End::Broken(RemoteError::Malformed(e.to_string()))),
            None => Err(End::Dropped),
        }
    }
}

/// The message an event carries, if any: events named other than `message` and events
/// without data (priming events, keep-alives) carry none.
pub(super) fn message(event: Sse) -> Option<Vec<u8>> {
    if event.event.as_deref().is_some_and(|e| e != "message") {
        return None;
    }
    let data = event.data?;
    if data.trim().is_empty() {
        return None;
    }
    Some(data.into_bytes())
}

/// Whether a response's content type is `text/event-stream`.
pub(super) fn is_event_stream(resp: &reqwest::Response) -> bool {
    content_type(resp).is_some_and(|t| t == "text/event-stream")
}

fn content_type(resp: &reqwest::Response) -> Option<String> {
    let raw = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)?
        .to_str()
        .ok()?;
    let essence = raw.split(';').next()?.trim().to_ascii_lowercase();
    Some(essence)
}

/// The delay before reconnection attempt `attempt` (0 for the first): the server's advice
/// (at least [`MIN_DELAY`]) or [`FIRST_DELAY`], doubled at each attempt, at most
/// [`MAX_DELAY`].
pub(super) fn backoff(attempt: u32, advice: Option<Duration>) -> Duration {
    let base = advice.unwrap_or(FIRST_DELAY).clamp(MIN_DELAY, MAX_DELAY);
    base.saturating_mul(1u32 << attempt.min(10)).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_bounds() {
        assert_eq!(backoff(0, None), FIRST_DELAY);
        assert_eq!(backoff(2, None), FIRST_DELAY * 4);
        assert_eq!(backoff(30, None), MAX_DELAY);
        assert_eq!(backoff(0, Some(Duration::from_secs(60))), MAX_DELAY);
        assert_eq!(backoff(0, Some(Duration::ZERO)), MIN_DELAY);
        assert_eq!(
            backoff(1, Some(Duration::from_millis(300))),
            Duration::from_millis(600)
        );
    }

    #[tokio::test]
    async fn an_event_id_too_long_to_send_back_is_not_kept() {
        let long = "x".repeat(MAX_EVENT_ID + 1);
        let body = format!("id: short\ndata: 1\n\nid: {long}\ndata: 2\n\n");
        let chunks = futures_util::stream::iter([Ok(bytes::Bytes::from(body))]);
        let mut events = Events::from_chunks(chunks, 1 << 20);
        assert!(events.next().await.is_ok());
        assert_eq!(events.last_id.as_deref(), Some("short"));
        assert!(events.next().await.is_ok());
        assert_eq!(events.last_id, None);
    }

    #[test]
    fn only_message_events_with_data_carry_messages() {
        let e = Sse::default().data("{\"jsonrpc\":\"2.0\"}");
        assert!(message(e).is_some());
        assert!(message(Sse::default().data(" ")).is_none());
        assert!(message(Sse::default().id("1")).is_none());
        assert!(message(Sse::default().event("endpoint").data("/m")).is_none());
        assert!(message(Sse::default().event("message").data("{}")).is_some());
    }
}
