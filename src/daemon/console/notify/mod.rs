//! A consent question where the user is, without a console page open: when a question
//! arrives and no page follows the live feed, the daemon shows it as a desktop notification
//! (the freedesktop notification service on the session bus), with Allow and Deny where the
//! service shows actions, and the console's address otherwise.
//!
//! An action answers only the question its notification was made for, once, through
//! [`Board::answer`] as the page's answer does: a question answered elsewhere, withdrawn or
//! gone takes no answer, and its notification is closed. A page that connects closes every
//! notification: questions are shown in one place at a time. Without a session bus or a
//! notification service the daemon says so once in its log, and the questions wait on the
//! page as before.

mod desk;
mod text;

use super::board::Board;
use super::shared::Console;
use crate::consent::{ConsentAnswer, ConsentDecision};
use desk::{ALLOW, DENY, Desk, OPEN, Said};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use tokio::sync::watch;

/// Most notifications shown at once; the questions past it wait on the page, and are
/// shown as the ones before them are answered.
const MAX_SHOWN: usize = 8;

/// Shows the questions on `console`'s board as desktop notifications while no page is
/// open, the console being served at `at`. Must run on a tokio runtime.
pub(crate) fn start(console: &Arc<Console>, at: SocketAddr) {
    let notifier = Notifier {
        console: Arc::downgrade(console),
        board: console.board.clone(),
        url: format!("http://{}/", super::shared::authority(at)),
        desk: None,
        told: false,
        shown: HashMap::new(),
        seen: HashSet::new(),
    };
    tokio::spawn(notifier.run(console.pages.watch()));
}

/// The notifications of one console.
struct Notifier {
    /// The console, for "Open" (a sign-in link).
    console: Weak<Console>,
    board: Arc<Board>,
    /// The page's address, which a notification names (never a sign-in link).
    url: String,
    /// The service, once reached.
    desk: Option<Desk>,
    /// Whether the log was told that there are no notifications.
    told: bool,
    /// The notification shown for each question that has one.
    shown: HashMap<u64, u32>,
    /// The questions notified once (shown, then maybe dismissed): never shown again.
    seen: HashSet<u64>,
}

impl Notifier {
    async fn run(mut self, mut pages: watch::Receiver<usize>) {
        let mut changes = self.board.changes();
        loop {
            let open = *pages.borrow_and_update();
            self.follow(open).await;
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = pages.changed() => if changed.is_err() { return },
                said = heard(&mut self.desk) => self.hear(said).await,
            }
        }
    }

    /// Brings the notifications in line with the board: closes those whose question no
    /// longer waits (or all, while a page is open), and shows the new questions.
    async fn follow(&mut self, pages: usize) {
        let waiting = self.board.waiting();
        let open: Vec<_> = waiting
            .questions
            .iter()
            .filter(|q| q.withdrawn.is_none())
            .collect();
        let stale: Vec<(u64, u32)> = self
            .shown
            .iter()
            .filter(|(q, _)| pages > 0 || !open.iter().any(|o| o.id == **q))
            .map(|(q, n)| (*q, *n))
            .collect();
        for (q, n) in stale {
            self.shown.remove(&q);
            self.close(n).await;
        }
        // Bounded by the board: a question that left it is forgotten here too.
        self.seen
            .retain(|q| waiting.questions.iter().any(|o| o.id == *q));
        if pages > 0 {
            return;
        }
        for q in &open {
            if self.seen.contains(&q.id) || self.shown.len() >= MAX_SHOWN {
                continue;
            }
            if !self.reach().await {
                // Tried again at the next question, not at every change of the board.
                self.seen.extend(open.iter().map(|o| o.id));
                return;
            }
            let Some(desk) = &self.desk else {
                return;
            };
            let text = text::of(&q.request, &self.url, desk.actions);
            match desk.show(&text).await {
                Ok(n) => {
                    self.seen.insert(q.id);
                    self.shown.insert(q.id, n);
                }
                Err(e) => {
                    // Reached anew for the next question (the service may have restarted).
                    tracing::info!(
                        "console: the notification service did not show a question: {e}"
                    );
                    self.seen.insert(q.id);
                    self.desk = None;
                    return;
                }
            }
        }
    }

    /// Whether the service is reached (now, if it was not); not (said once in the log) when
    /// there is no session bus or no service on it.
    async fn reach(&mut self) -> bool {
        if self.desk.is_none() {
            match Desk::reach().await {
                Ok(d) => {
                    tracing::info!(
                        actions = d.actions,
                        "console: questions are shown as desktop notifications while no \
                         console page is open"
                    );
                    self.desk = Some(d);
                }
                Err(why) => {
                    if !self.told {
                        tracing::info!(
                            "console: desktop notifications are unavailable: {why}; \
                             questions wait on the console page"
                        );
                        self.told = true;
                    }
                    return false;
                }
            }
        }
        true
    }

    /// Acts on what the service said: an action on one of our notifications answers its
    /// question, once.
    async fn hear(&mut self, said: Said) {
        match said {
            Said::Invoked(n, key) => {
                let Some(q) = self.question_of(n) else {
                    return;
                };
                let answer = match key.as_str() {
                    ALLOW => match self.board.question(q) {
                        Some(shown) => ConsentDecision::approve_all(&shown.request).into(),
                        None => ConsentAnswer::deny(),
                    },
                    DENY => ConsentAnswer::deny(),
                    // The notification stays: the question may be answered there still.
                    OPEN => {
                        self.open();
                        return;
                    }
                    // Not an action of ours: nothing is answered.
                    _ => return,
                };
                self.shown.remove(&q);
                let became = self.board.answer(q, answer);
                tracing::info!(
                    question = q,
                    action = key.as_str(),
                    "console: a question answered from its desktop notification: {became:?}"
                );
                // Some services keep a notification after an action: it answers no more.
                self.close(n).await;
            }
            Said::Closed(n) => {
                if let Some(q) = self.question_of(n) {
                    self.shown.remove(&q);
                }
            }
            Said::Odd => {}
            Said::Gone => {
                tracing::info!("console: the notification service went away");
                self.desk = None;
                self.shown.clear();
            }
        }
    }

    /// Opens the console, signed in, as `fsbroker console` does: a fresh one-time link,
    /// handed to the desktop's opener in a private page, never on a command line.
    fn open(&self) {
        let Some(console) = self.console.upgrade() else {
            return;
        };
        if !super::opener::desktop() {
            tracing::info!(
                "console: no desktop to open the console on (neither DISPLAY nor \
                 WAYLAND_DISPLAY is set); run `fsbroker console`"
            );
            return;
        }
        let link = match console.sign_in_link() {
            Ok(link) => link,
            Err(e) => {
                tracing::warn!("console: no sign-in link to open: {e}");
                return;
            }
        };
        let socket = console.socket.clone();
        tokio::task::spawn_blocking(
            move || match super::opener::open_privately(&socket, &link) {
                Ok(true) => {}
                Ok(false) => tracing::info!("console: the desktop's opener did not open it"),
                Err(e) => tracing::warn!("console: {e}"),
            },
        );
    }

    /// The question notification `n` was made for.
    fn question_of(&self, n: u32) -> Option<u64> {
        self.shown.iter().find(|(_, id)| **id == n).map(|(q, _)| *q)
    }

    /// Closes notification `n`; a service that fails is let go (reached again when needed).
    async fn close(&mut self, n: u32) {
        if let Some(desk) = &self.desk
            && let Err(e) = desk.close(n).await
        {
            tracing::debug!("console: could not close a notification: {e}");
        }
    }
}

/// What the service says next; never, without one.
async fn heard(desk: &mut Option<Desk>) -> Said {
    match desk {
        Some(d) => d.next().await,
        None => std::future::pending().await,
    }
}
