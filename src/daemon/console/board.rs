//! What waits for the user on the console: consent questions (the `ui` provider puts each
//! one here while its server waits) and offers ("allow this?", made when a server is refused
//! a path it never asked consent for). The page reads them and answers through the API;
//! nothing here grants anything by itself.

use crate::access::Access;
use crate::audit::AuditEvent;
use crate::broker::Broker;
use crate::consent::{ConsentAnswer, ConsentRequest};
use crate::error::Reason;
use crate::locks::lock;
use crate::path::MountPath;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::SystemTime;
use tokio::sync::{broadcast, oneshot, watch};

/// Most offers waiting; past it, the oldest goes.
pub(crate) const MAX_OFFERS: usize = 50;

/// Most offers waiting for one session; past it, its oldest goes, so that one server's
/// refusals cannot push every other server's offers off the board.
pub(crate) const MAX_OFFERS_PER_SERVER: usize = 16;

/// Most paths remembered as asked about (see [`Board::asked`]); past it, the oldest go.
const MAX_ASKED: usize = 4096;

/// Most questions waiting at once; one more is denied at once, saying why.
const MAX_QUESTIONS: usize = 256;

/// Most withdrawn questions the page is still shown (marked withdrawn, answerable no more);
/// past it, the oldest goes.
const MAX_WITHDRAWN: usize = 32;

/// How long a withdrawn question is still shown.
const WITHDRAWN_SHOWN: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Why a question was withdrawn, as the page says it.
pub(crate) const SERVER_LEFT: &str = "the server left (its session ended)";

/// Why a question was withdrawn when its session lives on.
pub(crate) const STOPPED_WAITING: &str =
    "the server stopped waiting (the time ran out, or it cancelled the request)";

/// Why a question was withdrawn when it waited its whole time limit: nobody answered, and
/// the broker denied it.
pub(crate) const TIMED_OUT: &str =
    "nobody answered within the time limit: it timed out, and was denied";

/// The questions and offers waiting for the user.
#[derive(Debug)]
pub(crate) struct Board {
    inner: Mutex<Inner>,
    changes: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    questions: Vec<Question>,
    offers: VecDeque<Offer>,
    /// The paths each session was asked about (by session id), whatever the answer: a
    /// refusal at or beneath one is the user's decision standing, never an offer.
    asked: VecDeque<(String, MountPath)>,
}

/// A consent question while its server waits.
#[derive(Debug)]
pub(crate) struct Question {
    /// Its number on the page (`q7`).
    pub id: u64,
    /// What the server asks.
    pub request: ConsentRequest,
    /// When it was asked.
    pub asked: SystemTime,
    reply: Option<oneshot::Sender<ConsentAnswer>>,
    /// Once withdrawn: why, and when. It is shown so, and no answer is taken for it.
    withdrawn: Option<(&'static str, SystemTime)>,
}

/// A refusal the user may turn into a grant.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    /// Its number on the page (`o3`).
    pub id: u64,
    /// The session refused.
    pub server: String,
    /// The path it was refused.
    pub path: MountPath,
    /// The access the refused operation needed.
    pub access: Access,
    /// The refused method.
    pub method: String,
    /// When it was refused.
    pub at: SystemTime,
}

/// A question as the page is shown it.
#[derive(Debug)]
pub(crate) struct Shown {
    /// Its number.
    pub id: u64,
    /// What the server asked.
    pub request: ConsentRequest,
    /// When it was asked.
    pub asked: SystemTime,
    /// Why it was withdrawn, and when, once it was.
    pub withdrawn: Option<(&'static str, SystemTime)>,
}

/// What became of a question the user answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Its server has the answer.
    Taken,
    /// It was withdrawn first, for this reason: nothing is granted.
    Withdrawn(&'static str),
    /// No such question waits (answered already, or never asked).
    Unknown,
}

/// A copy of what waits, for the page.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// Questions, oldest first, the withdrawn ones still shown among them.
    pub questions: Vec<Shown>,
    /// Offers, oldest first.
    pub offers: Vec<Offer>,
}

impl Board {
    /// An empty board.
    pub(crate) fn new() -> Arc<Board> {
        Arc::new(Board {
            inner: Mutex::new(Inner::default()),
            changes: watch::Sender::new(0),
        })
    }

    /// Ticks whenever a question or an offer comes or goes.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// What waits now, and the questions withdrawn lately.
    pub(crate) fn waiting(&self) -> Waiting {
        let mut inner = lock(&self.inner);
        inner.forget_withdrawn(SystemTime::now());
        Waiting {
            questions: inner
                .questions
                .iter()
                .map(|q| Shown {
                    id: q.id,
                    request: q.request.clone(),
                    asked: q.asked,
                    withdrawn: q.withdrawn,
                })
                .collect(),
            offers: inner.offers.iter().cloned().collect(),
        }
    }

    /// Question `id` (marked withdrawn if it was); `None` when it is not on the board.
    pub(crate) fn question(&self, id: u64) -> Option<Shown> {
        let inner = lock(&self.inner);
        inner.questions.iter().find(|q| q.id == id).map(|q| Shown {
            id: q.id,
            request: q.request.clone(),
            asked: q.asked,
            withdrawn: q.withdrawn,
        })
    }

    /// Answers question `id`. A withdrawn question takes no answer, and neither does one
    /// whose session ended while the user answered: nothing is granted for a session that
    /// no longer exists.
    pub(crate) fn answer(&self, id: u64, answer: ConsentAnswer) -> Answered {
        let reply = {
            let mut inner = lock(&self.inner);
            let Some(i) = inner.questions.iter().position(|q| q.id == id) else {
                return Answered::Unknown;
            };
            if let Some((why, _)) = inner.questions[i].withdrawn {
                return Answered::Withdrawn(why);
            }
            if inner.questions[i].request.ended.has_ended() {
                inner.questions[i].withdrawn = Some((SERVER_LEFT, SystemTime::now()));
                inner.questions[i].reply = None;
                drop(inner);
                self.changed();
                return Answered::Withdrawn(SERVER_LEFT);
            }
            inner.questions.remove(i).reply
        };
        self.changed();
        // Its server may have stopped waiting in between: then nothing is granted.
        match reply.is_some_and(|r| r.send(answer).is_ok()) {
            true => Answered::Taken,
            false => Answered::Withdrawn(STOPPED_WAITING),
        }
    }

    /// Takes offer `id` off the board.
    pub(crate) fn take_offer(&self, id: u64) -> Option<Offer> {
        let offer = {
            let mut inner = lock(&self.inner);
            let i = inner.offers.iter().position(|o| o.id == id)?;
            inner.offers.remove(i)
        };
        self.changed();
        offer
    }

    /// Puts an offer on the board for `event` when it is a refusal for want of consent on a
    /// path the server never asked for; one offer per server and path, the newest kept.
    pub(crate) fn consider(&self, event: &AuditEvent) {
        if let Some(note) = &event.consent {
            // What a consent request decided, by whoever decided it: asked about.
            let decided = note.approved.iter().chain(&note.denied);
            self.asked(&event.server_id, decided.filter_map(|p| p.parse().ok()));
            return;
        }
        if event.reason != Some(Reason::NoConsent) || event.method == "files/consent" {
            return;
        }
        let Some(path) = event
            .path
            .as_deref()
            .and_then(|p| p.parse::<MountPath>().ok())
        else {
            return;
        };
        use crate::method::Method;
        let writes = matches!(
            Method::parse(&event.method),
            Some(Method::Write | Method::Create | Method::Delete | Method::Rename)
        );
        let access = if writes { Access::Write } else { Access::Read };
        {
            let mut inner = lock(&self.inner);
            // A path the user was asked about (and denied, or narrowed away) in this
            // session is not offered: the answer stands.
            let server = event.server_id.as_str();
            if inner
                .asked
                .iter()
                .any(|(s, p)| s == server && path.starts_with(p))
            {
                return;
            }
            inner
                .offers
                .retain(|o| !(o.server == event.server_id && o.path == path));
            let theirs = inner.offers.iter().filter(|o| o.server == server).count();
            if theirs >= MAX_OFFERS_PER_SERVER
                && let Some(i) = inner.offers.iter().position(|o| o.server == server)
            {
                inner.offers.remove(i);
            }
            if inner.offers.len() >= MAX_OFFERS {
                inner.offers.pop_front();
            }
            inner.next += 1;
            let id = inner.next;
            inner.offers.push_back(Offer {
                id,
                server: event.server_id.clone(),
                path,
                access,
                method: event.method.clone(),
                at: event.time,
            });
        }
        self.changed();
    }

    /// Notes that session `server` was asked about `paths`: no offer is made at or beneath
    /// them, and the offers waiting there go.
    pub(crate) fn asked(&self, server: &str, paths: impl IntoIterator<Item = MountPath>) {
        let mut inner = lock(&self.inner);
        let before = inner.offers.len();
        for p in paths {
            inner
                .offers
                .retain(|o| !(o.server == server && o.path.starts_with(&p)));
            if !inner.asked.iter().any(|(s, a)| s == server && *a == p) {
                if inner.asked.len() >= MAX_ASKED {
                    inner.asked.pop_front();
                }
                inner.asked.push_back((server.to_owned(), p));
            }
        }
        let gone = inner.offers.len() != before;
        drop(inner);
        if gone {
            self.changed();
        }
    }

    /// Takes the offers to session `server` off the board (every offer when `None`): how
    /// many went.
    pub(crate) fn dismiss(&self, server: Option<&str>) -> usize {
        let gone = {
            let mut inner = lock(&self.inner);
            let before = inner.offers.len();
            inner
                .offers
                .retain(|o| server.is_some_and(|s| o.server != s));
            before - inner.offers.len()
        };
        if gone > 0 {
            self.changed();
        }
        gone
    }

    /// Forgets what was asked of the sessions not in `live` (they have ended): a later
    /// session of the name starts with nothing asked.
    pub(crate) fn keep_asked_of(&self, live: &[String]) {
        lock(&self.inner)
            .asked
            .retain(|(s, _)| live.iter().any(|l| l == s));
    }

    /// Makes offers of `broker`'s refusals, as long as the broker lives. Must run on a tokio
    /// runtime.
    pub(crate) fn watch_refusals(self: &Arc<Self>, broker: &Broker) {
        let mut events = broker.audit_events();
        let board = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(e) => match board.upgrade() {
                        Some(b) => b.consider(&e),
                        None => return,
                    },
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Marks question `id` withdrawn (its server stopped waiting, or left) for `why`: the
    /// page shows it so for a while, and no answer is taken for it.
    fn withdraw(&self, id: u64, why: &'static str) {
        let marked = {
            let mut inner = lock(&self.inner);
            let now = SystemTime::now();
            let marked = match inner
                .questions
                .iter_mut()
                .find(|q| q.id == id && q.withdrawn.is_none())
            {
                Some(q) => {
                    q.withdrawn = Some((why, now));
                    q.reply = None;
                    true
                }
                None => false,
            };
            inner.forget_withdrawn(now);
            marked
        };
        if marked {
            self.changed();
        }
    }
}

impl Inner {
    /// Drops the withdrawn questions shown long enough, and the oldest past
    /// [`MAX_WITHDRAWN`].
    fn forget_withdrawn(&mut self, now: SystemTime) {
        self.questions.retain(|q| {
            q.withdrawn.is_none_or(|(_, at)| {
                now.duration_since(at)
                    .is_ok_and(|shown| shown < WITHDRAWN_SHOWN)
            })
        });
        let mut excess = self
            .questions
            .iter()
            .filter(|q| q.withdrawn.is_some())
            .count()
            .saturating_sub(MAX_WITHDRAWN);
        self.questions.retain(|q| {
            let drop = excess > 0 && q.withdrawn.is_some();
            excess -= usize::from(drop);
            !drop
        });
    }
}

mod ui;
pub(crate) use ui::UiConsent;

#[cfg(test)]
mod tests;
