//! The end of the session that asked a consent question. A question outlives neither its
//! session nor its answer's use: when the session ends, or its input does (its server
//! disconnected: no request can follow to use a grant), the question is withdrawn, so that no answer given later (a "remember" on the console, a
//! terminal prompt, an attached proxy's host) grants anything for a session that no longer
//! exists, or for whichever process claims its name next.

use tokio::sync::watch;

/// The end of a question's session, as [`crate::consent::ask`] races it; `None` for a
/// request made outside a session (a host trying its provider).
#[derive(Clone, Default)]
pub(crate) struct SessionEnd(Option<watch::Receiver<bool>>);

impl SessionEnd {
    /// The end that `ends` announces (a session's signal, set once when it ends).
    pub(crate) fn of(ends: &watch::Sender<bool>) -> SessionEnd {
        SessionEnd(Some(ends.subscribe()))
    }

    /// Whether the session has ended (or is gone without saying so).
    pub(crate) fn has_ended(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|r| *r.borrow() || r.has_changed().is_err())
    }

    /// Resolves when the session ends; never for a request made outside one. A signal whose
    /// session is dropped counts as ended.
    pub(crate) async fn wait(&self) {
        match &self.0 {
            Some(r) => {
                let mut r = r.clone();
                let _ = r.wait_for(|ended| *ended).await;
            }
            None => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.has_ended() {
            "SessionEnd(ended)"
        } else {
            "SessionEnd"
        })
    }
}

/// Two requests are alike whatever their sessions' states: the signal is no part of what is
/// asked.
impl PartialEq for SessionEnd {
    fn eq(&self, _: &SessionEnd) -> bool {
        true
    }
}
