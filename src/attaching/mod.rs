//! The attaching end of a session held by a broker: the daemon's (`serve --daemon`, `proxy
//! --daemon`, a library host's `DaemonSession`) or a proxy's own. The server's brokered
//! requests go through the broker's door (`door.rs`: the daemon's socket, or an in-memory
//! line pair) in their order, and the broker's answers and notifications come back to the
//! server. Nothing is decided here: the broker's session loop orders, checks and answers, as
//! `fsbroker serve` does on stdio; a server's cancellation is forwarded, and acted on there.
//!
//! When the broker cannot be reached, every request is answered at once with
//! `INTERNAL_ERROR`, `data.reason` `broker_unavailable`: those waiting for an answer when the
//! connection was lost, and those sent while it is down. The next request after a bounded
//! backoff tries again, and a daemon that answers gets a new session (grants given by
//! consent are not carried over; standing ones come back with the policy).

pub(crate) mod ask;
mod conn;
mod control;
mod described;
mod door;
mod identified;
mod pending;
pub(crate) mod places;
pub(crate) mod protocol;

#[cfg(any(feature = "cli", feature = "proxy"))]
pub(crate) use described::Described;
pub(crate) use described::describe;
#[cfg(feature = "proxy")]
pub(crate) use described::{DescribedRoot, Following, Kept};
pub(crate) use door::{Door, Opened};
pub(crate) use identified::Identified;

use crate::consent::{BoxFuture, ConsentAnswer, ConsentRequest};
use crate::lines::{LineReceiver, LineSender};
use conn::Live;
use pending::{Noted, Pending};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// The first wait before trying a lost daemon again; it doubles up to [`BACKOFF_MOST`].
const BACKOFF_FIRST: Duration = Duration::from_millis(100);

/// The longest wait between attempts to reach a lost daemon.
const BACKOFF_MOST: Duration = Duration::from_secs(5);

/// Who answers the daemon's consent questions for an attached proxy: its host, when the
/// host can show a form. `None`: nobody could be asked, and the daemon asks its own.
pub(crate) trait Asker: Send + Sync {
    /// Asks the user about `request`.
    fn ask(&self, request: ConsentRequest) -> BoxFuture<'static, Option<ConsentAnswer>>;
}

/// What is told of every request the daemon answered (or that was answered for it).
pub(crate) type Answered = Arc<dyn Fn(&Value) + Send + Sync>;

/// A request of the attaching side's own (the proxy's roots rounds), with where its answer
/// goes.
pub(crate) struct Call {
    /// The request line; its id is the attaching side's, unique among its calls.
    pub(crate) line: Vec<u8>,
    /// The request's id.
    pub(crate) id: Value,
    /// Gets the daemon's answer, or nothing when the daemon was lost.
    pub(crate) answer: oneshot::Sender<Value>,
}

/// One attached session, before it runs.
pub(crate) struct Attach {
    /// Where the broker's sessions open.
    pub(crate) door: Arc<dyn Door>,
    /// The server's process id, when this side started it.
    pub(crate) server_pid: Option<u32>,
    /// Who the server is, as this side works it out.
    pub(crate) identity: Identified,
    /// The sandbox the server runs in, for `status`.
    pub(crate) sandbox: Option<Value>,
    /// Who answers consent questions, if anyone here can.
    pub(crate) asker: Option<Arc<dyn Asker>>,
    /// The longest line the daemon takes and sends.
    pub(crate) max_line: usize,
}

/// What the session is called and in which era, asked when it attaches (the first request
/// fixes the name, as a session of an embedded broker is fixed).
pub(crate) trait Naming: Send + Sync {
    /// The session's name.
    fn name(&self) -> String;
    /// The protocol era, when known.
    fn era(&self) -> Option<String>;
    /// Whether the name and era are known from the start: then the session attaches at
    /// once, and `status` shows it before its first request.
    fn known_at_start(&self) -> bool {
        false
    }
    /// Told the session's id on the broker each time it attaches (the name asked for, or
    /// `NAME#2`, ... while one of that name is live; a new session after a lost broker).
    fn attached(&self, _session: &str) {}
}

/// Runs the session: each line of `input` (the server's brokered requests, its cancellations
/// of them, and nothing else) goes to the daemon, each of `calls` too, and what the daemon
/// sends goes to `output`, until `input` ends or `stop` completes (then what is still queued
/// is dropped, and what the daemon has under way gets its grace). `answered` hears of every
/// request answered.
pub(crate) async fn run<M: Default + Send + 'static>(
    attach: Attach,
    naming: Arc<dyn Naming>,
    mut input: LineReceiver,
    mut calls: mpsc::Receiver<Call>,
    output: LineSender<M>,
    answered: Answered,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    let pending = Arc::new(Pending::default());
    let mut live: Option<Live> = None;
    let mut next_try = Instant::now();
    let mut backoff = BACKOFF_FIRST;
    let mut calls_open = true;
    // A session whose name is fixed attaches now, so that the user sees it from the start;
    // one that cannot is tried again at its first request, as after a lost daemon.
    if naming.known_at_start() {
        match conn::open(&attach, naming.as_ref(), &pending, &output, &answered).await {
            Ok(l) => {
                tracing::info!(session = %l.session(), "attached to the daemon");
                naming.attached(l.session());
                live = Some(l);
            }
            Err(e) => tracing::warn!(
                "{} cannot be reached: {e}; brokered requests fail until it can",
                attach.door.name()
            ),
        }
    }
    loop {
        let (line, call) = tokio::select! {
            biased;
            () = &mut stop => break,
            l = input.recv() => match l {
                Some(l) => (l, None),
                None => break,
            },
            c = calls.recv(), if calls_open => match c {
                Some(mut c) => (std::mem::take(&mut c.line), Some(c)),
                None => { calls_open = false; continue }
            },
        };
        if live.as_ref().is_some_and(|l| pending.is_lost(l.epoch())) {
            live = None;
        }
        if live.is_none() && Instant::now() >= next_try {
            let fresh = conn::open(&attach, naming.as_ref(), &pending, &output, &answered).await;
            match fresh {
                Ok(l) => {
                    tracing::info!(session = %l.session(), "attached to the daemon");
                    naming.attached(l.session());
                    live = Some(l);
                    backoff = BACKOFF_FIRST;
                }
                Err(e) => {
                    tracing::warn!(
                        "{} cannot be reached: {e}; brokered requests fail until it can (next try in {} ms)",
                        attach.door.name(),
                        backoff.as_millis()
                    );
                    next_try = Instant::now() + backoff;
                    backoff = (backoff * 2).min(BACKOFF_MOST);
                }
            }
        }
        if let Some(Call { id, answer, .. }) = call {
            // A call that cannot go is dropped, which tells its caller.
            if let Some(l) = &live
                && pending.note_call(l.epoch(), &id, answer)
                && !l.send(line).await
            {
                pending.drop_call(&id);
            }
            continue;
        }
        let noted = match &live {
            Some(l) => pending.note(l.epoch(), &line),
            None => Noted::Lost,
        };
        let answers = match (noted, &live) {
            (Noted::Send, Some(l)) if l.send(line.clone()).await => Vec::new(),
            (Noted::Full, _) => pending.busy(&line),
            _ => pending.unavailable(&line),
        };
        {
            for answer in answers {
                if let Some(id) = answer.get("id") {
                    answered(id);
                }
                if let Ok(l) = serde_json::to_vec(&answer) {
                    let _ = output.send(l).await;
                }
            }
        }
    }
    if let Some(l) = live {
        l.finish().await;
    }
}
