//! Who the attaching side's server is, worked out once, when the session first attaches.
//!
//! The work is done late on purpose: a launcher (`npx`, `uvx`) installs the package it runs
//! after it starts, so what it runs can be read from disk only once the server speaks. It is
//! done once: a session attached again after a lost broker is the same server.

use crate::Identity;
use std::sync::Arc;
use tokio::sync::OnceCell;

/// The work that tells who the server is.
type Work = Arc<dyn Fn() -> Option<Identity> + Send + Sync>;

/// Who the server is: worked out on first use, then kept. Cloned, it shares the answer.
#[derive(Clone, Default)]
pub(crate) struct Identified {
    work: Option<Work>,
    done: Arc<OnceCell<Option<Identity>>>,
}

impl Identified {
    /// Worked out by `work`, which may block (it reads and hashes files).
    pub(crate) fn by(work: impl Fn() -> Option<Identity> + Send + Sync + 'static) -> Identified {
        Identified {
            work: Some(Arc::new(work)),
            done: Arc::default(),
        }
    }

    /// The identity, worked out now if it was not yet; `None` when it cannot be told.
    pub(crate) async fn get(&self) -> Option<Identity> {
        let work = self.work.clone()?;
        self.done
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || work())
                    .await
                    .ok()
                    .flatten()
            })
            .await
            .clone()
    }
}

impl std::fmt::Debug for Identified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identified")
            .field("done", &self.done.get())
            .finish_non_exhaustive()
    }
}
