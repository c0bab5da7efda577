//! A new session when the server has forgotten ours (404 to a request carrying its id): the
//! host's `initialize` and `notifications/initialized` are replayed, and the replayed
//! `initialize`'s response is kept from the host, which has one already.

use super::error::RemoteError;
use super::http::Post;
use super::pending::request_ids;
use super::session::RemoteSession;
use bytes::Bytes;
use std::sync::Arc;

impl RemoteSession {
    /// Starts a new session after the one of generation `seen` expired. Does nothing when
    /// another task already did it. Everything it waits for (the new session's id in the
    /// `initialize` answer's headers, the acceptance of `notifications/initialized`) takes at
    /// most the request timeout together, since every message waits while it runs. The
    /// `initialize` answer's body is read on a task of its own, within the same limit:
    /// whoever met the 404 (the driver, for a notification) must not wait on the server's
    /// stream.
    pub(super) async fn renew(self: &Arc<Self>, seen: u64) -> Result<(), RemoteError> {
        let _only_one = self.renewing.lock().await;
        if self.generation() != seen {
            return Ok(());
        }
        let limit = self.cfg.request_timeout;
        let (init, initialized) = self
            .restart()
            .map_err(|e| RemoteError::RenewFailed(Box::new(e)))?;
        let ids = request_ids(&init);
        let attempt = async {
            self.pending.track(&ids)?;
            let resp = self.post(&Bytes::from(init), true, Post::Init).await?;
            let (s, read_ids) = (self.clone(), ids.clone());
            self.spawn_reader(async move {
                let read = tokio::time::timeout(limit, s.answer(resp, &read_ids)).await;
                if let Err(e) = read.unwrap_or(Err(RemoteError::Timeout(limit))) {
                    tracing::warn!(error = %e, "no response to the replayed initialize");
                    s.pending.take(&read_ids);
                    s.unswallow();
                }
            });
            if let Some(line) = initialized {
                self.notify(Bytes::from(line), Post::Replay).await?;
            }
            Ok::<(), RemoteError>(())
        };
        let failure = match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(())) => {
                self.renewed();
                tracing::info!("a new remote session started");
                return Ok(());
            }
            Ok(Err(e)) => e,
            Err(_) => RemoteError::Timeout(limit),
        };
        // The session cannot go on; nothing is to be kept from the host any more.
        self.pending.take(&ids);
        self.unswallow();
        Err(RemoteError::RenewFailed(Box::new(failure)))
    }
}
