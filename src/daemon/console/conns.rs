//! The console's connections. Any local process may connect to its port, so connections are
//! bounded in two pools: those that have not yet made a signed-in request (at most
//! [`MAX_ANONYMOUS`]; one more ends the oldest, as connections that have not said hello do
//! on the daemon's socket), and those that have (at most [`MAX_SIGNED_IN`]). Connections by
//! the hundred can then neither take the descriptors the daemon's sessions need nor keep the
//! user's page out: a browser's connection asks at once, and its first signed-in request
//! takes it out of reach of the newcomers.

use axum::Router;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::AbortHandle;

/// Most connections without a signed-in request yet.
pub(super) const MAX_ANONYMOUS: usize = 32;

/// Most connections that made a signed-in request.
const MAX_SIGNED_IN: usize = 32;

/// How long a client may take to send a request's headers.
const HEADER_WAIT: Duration = Duration::from_secs(10);

/// The two pools.
#[derive(Debug)]
struct Pools {
    anonymous: Mutex<VecDeque<(u64, AbortHandle)>>,
    signed_in: Arc<Semaphore>,
    next: AtomicU64,
}

/// One connection, as each of its requests carries it: the gate promotes it once one of
/// them is signed in.
#[derive(Debug)]
pub(super) struct Conn {
    id: u64,
    pools: Arc<Pools>,
    /// The signed-in pool's slot, once taken; given back when the connection ends.
    slot: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Conn {
    /// Moves the connection to the signed-in pool, unless it is there; false when that pool
    /// is full (the request is then refused, and the connection stays where it was).
    pub(super) fn promote(&self) -> bool {
        let mut slot = crate::locks::lock(&self.slot);
        if slot.is_some() {
            return true;
        }
        let Ok(taken) = self.pools.signed_in.clone().try_acquire_owned() else {
            return false;
        };
        *slot = Some(taken);
        crate::locks::lock(&self.pools.anonymous).retain(|(id, _)| *id != self.id);
        true
    }
}

/// Serves each connection `listener` accepts with `app`, over HTTP/1.1 only, each request
/// carrying its [`Conn`].
pub(super) async fn accept(listener: tokio::net::TcpListener, app: Router) {
    let pools = Arc::new(Pools {
        anonymous: Mutex::new(VecDeque::new()),
        signed_in: Arc::new(Semaphore::new(MAX_SIGNED_IN)),
        next: AtomicU64::new(0),
    });
    // Connections ended to make room since the last warning, which comes at most once a
    // minute: a flood of them must not flood the log too.
    let (mut ended, mut warned) = (0u64, None::<tokio::time::Instant>);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin.
                tracing::warn!("console: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let conn = Arc::new(Conn {
            id: pools.next.fetch_add(1, Ordering::Relaxed),
            pools: pools.clone(),
            slot: Mutex::new(None),
        });
        let service = hyper_util::service::TowerToHyperService::new(
            app.clone().layer(axum::Extension(conn.clone())),
        );
        let id = conn.id;
        let done = pools.clone();
        // Registered under the lock it is spawned under, so that its own removal comes after.
        let mut anonymous = crate::locks::lock(&pools.anonymous);
        let task = tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_WAIT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!("console: a connection ended: {e}");
            }
            crate::locks::lock(&done.anonymous).retain(|(i, _)| *i != id);
        });
        anonymous.push_back((id, task.abort_handle()));
        if anonymous.len() > MAX_ANONYMOUS
            && let Some((_, oldest)) = anonymous.pop_front()
        {
            oldest.abort();
            ended += 1;
            if warned.is_none_or(|w| w.elapsed() >= Duration::from_secs(60)) {
                tracing::warn!(
                    "console: more than {MAX_ANONYMOUS} connections without a signed-in \
                     request; ended {ended} of the oldest since the last warning"
                );
                (ended, warned) = (0, Some(tokio::time::Instant::now()));
            }
        }
    }
}
