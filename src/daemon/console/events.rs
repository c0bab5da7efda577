//! `GET /api/events`: the page's live feed, as server-sent events. The whole picture
//! (`state`) first and again after each change, at most every [`PACE`]; the audit events
//! (`audit`), the most recent [`RECENT`] first; `missed` when the feed fell behind.
//!
//! Nothing queues without bound: the audit events come from the ring's follower (a bounded
//! queue that reports what it dropped), and changes are only marked, the picture being
//! made when it is sent.

use super::api::picture;
use super::shared::Console;
use crate::daemon::log::{Follow, Next};
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The least time between two pictures.
const PACE: Duration = Duration::from_millis(100);

/// Audit events replayed to a new page.
const RECENT: usize = 200;

/// Streams the feed to one page until it goes.
pub(super) async fn stream(
    State(console): State<Arc<Console>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let console = console.clone();
    let (recent, follow) = console.log.follow(None);
    let mut queue: VecDeque<Event> = VecDeque::with_capacity(RECENT + 1);
    queue.push_back(state(&console));
    let skip = recent.len().saturating_sub(RECENT);
    queue.extend(recent.iter().skip(skip).map(audit));
    let feed = Feed {
        _page: console.pages.open(),
        board: console.board.changes(),
        sessions: console.broker.snapshot_changes(),
        policy: console.broker.policy_changes(),
        console,
        follow,
        queue,
        dirty: false,
        last: Instant::now(),
    };
    let events = futures_util::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok(event), feed))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// One page's feed.
struct Feed {
    /// This page counted as open while its feed lives (no notifications meanwhile).
    _page: super::shared::PageOpen,
    console: Arc<Console>,
    follow: Follow,
    board: watch::Receiver<u64>,
    sessions: watch::Receiver<u64>,
    policy: watch::Receiver<u64>,
    queue: VecDeque<Event>,
    /// Whether the picture changed since it was last sent.
    dirty: bool,
    /// When the picture was last sent.
    last: Instant,
}

impl Feed {
    /// The next event to send; `None` ends the feed (the daemon is going).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            let due = self.dirty.then_some(self.last + PACE);
            tokio::select! {
                () = at(due) => {
                    self.dirty = false;
                    self.last = Instant::now();
                    return Some(state(&self.console));
                }
                changed = self.board.changed() => { changed.ok()?; self.dirty = true; }
                changed = self.sessions.changed() => { changed.ok()?; self.dirty = true; }
                changed = self.policy.changed() => { changed.ok()?; self.dirty = true; }
                next = self.follow.next() => return match next? {
                    Next::Event(e) => Some(audit(&e)),
                    Next::Missed(n) => Some(
                        Event::default()
                            .event("missed")
                            .data(serde_json::json!({"missed": n}).to_string()),
                    ),
                },
            }
        }
    }
}

/// Resolves at `due`; never without one.
async fn at(due: Option<Instant>) {
    match due {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn state(console: &Console) -> Event {
    Event::default()
        .event("state")
        .data(picture(console).to_string())
}

fn audit(e: &serde_json::Value) -> Event {
    Event::default().event("audit").data(e.to_string())
}
