//! A request being run, and what is done with it when it ends: its audit line, its session's
//! counters, and the watchdog's count of its refusals; and the seat it runs in.

use super::Broker;
use crate::audit::{AuditRecord, Violation};
use crate::error::{Error, Result};
use crate::json::Json;
use crate::method::Method;
use crate::ops::Ctx;
use crate::session::Session;
use crate::turn::Turn;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// A request being run: when it ends, or is dropped before it ends (its caller withdrew
/// it), it is counted in its session and audited, with outcome `cancelled` for the latter.
pub(super) struct Running<'a> {
    pub(super) broker: &'a Broker,
    pub(super) seat: &'a Seat,
    pub(super) method: String,
    pub(super) known: Option<Method>,
    pub(super) start: Instant,
    pub(super) ctx: Ctx,
    pub(super) done: bool,
}

impl Running<'_> {
    /// Audits and counts the request, which ended with `outcome`.
    pub(super) fn finish(&mut self, outcome: &Result<Json>) {
        self.done = true;
        self.record(Some(outcome));
    }

    /// Audits and counts the request; `None` when it was withdrawn.
    fn record(&mut self, outcome: Option<&Result<Json>>) {
        let noted = self.ctx.take_noted();
        // The bytes moved are known only now: they are charged after the fact (see `limits`).
        if let Ok(session) = &self.seat.session {
            self.ctx
                .config
                .rate
                .charge_bytes(session.budget_key(), noted.bytes);
        }
        let err = outcome.and_then(|o| o.as_ref().err());
        let requested = noted.requested;
        let ended = Ended {
            path: noted
                .path
                .or_else(|| err.and_then(|e| e.path().map(str::to_owned))),
            outcome: self.outcome_of(outcome, noted.consent.as_ref()),
            bytes: noted.bytes,
            cpu: noted.cpu,
            entries: noted.entries,
            consent: noted.consent,
            succeeded: matches!(outcome, Some(Ok(_))),
            err,
            violation: err.and_then(|e| Violation::of(e, requested.as_deref())),
            withdrawn: outcome.is_none(),
        };
        self.audit(&ended);
        if let Ok(session) = &self.seat.session {
            self.count(session, &ended);
            self.watch(session, &ended);
        }
        self.broker.inner.touch();
    }

    /// The outcome the audit line and the session's last request show.
    fn outcome_of(
        &self,
        outcome: Option<&Result<Json>>,
        consent: Option<&crate::audit::ConsentNote>,
    ) -> &'static str {
        match (outcome, consent) {
            // A change dropped by its caller may still complete: its blocking work runs on.
            (None, _) if self.known.is_some_and(|m| !m.is_cancellable()) => "abandoned",
            (None, _) => "cancelled",
            (Some(Ok(_)), Some(note)) => note.outcome(),
            (Some(Ok(_)), None) => "ok",
            (Some(Err(e)), _) => e.kind().outcome(),
        }
    }

    /// Writes the request's audit line.
    fn audit(&self, ended: &Ended<'_>) {
        // A suspended session's refusals say nothing new, and a server that floods them
        // must not fill the log (or rotate its own violations out of it): at most one a
        // second is written; `status` counts them all.
        let quiet = ended
            .violation
            .is_some_and(|v| v.reason == crate::error::Reason::Suspended)
            && self
                .seat
                .session
                .as_ref()
                .is_ok_and(|s| !s.audit_suspended_now());
        if quiet {
            return;
        }
        let identity = self
            .seat
            .session
            .as_ref()
            .ok()
            .and_then(|s| s.identity())
            .map(|i| i.digest.as_str());
        self.broker.inner.record(&AuditRecord {
            server_id: &self.seat.id,
            identity,
            method: &self.method,
            path: ended.path.as_deref(),
            outcome: ended.outcome,
            bytes: ended.bytes,
            cpu: ended.cpu,
            duration: self.start.elapsed(),
            // A consent request's note is audited only when it succeeded.
            consent: ended.consent.as_ref().filter(|_| ended.succeeded),
            violation: ended.violation,
        });
    }

    /// Counts the request in its session's statistics.
    fn count(&self, session: &Session, ended: &Ended<'_>) {
        let mut stats = session.stats();
        let counters = &mut stats.counters;
        counters.requests += 1;
        counters.failed += u64::from(ended.err.is_some());
        counters.refused += u64::from(ended.violation.is_some());
        counters.cancelled += u64::from(ended.withdrawn);
        counters.entries_listed += ended.entries;
        counters.cpu += ended.cpu;
        if self.known == Some(Method::Write) {
            counters.bytes_written += ended.bytes;
        } else {
            counters.bytes_read += ended.bytes;
        }
        stats.last = Some((
            SystemTime::now(),
            self.method.clone(),
            ended.path.clone(),
            ended.outcome.to_owned(),
        ));
    }

    /// Tells the watchdog of a refusal that counts against the session, suspending it past
    /// the policy's bound.
    fn watch(&self, session: &Session, ended: &Ended<'_>) {
        let mut strike = ended.err.and_then(crate::watchdog::strike_of);
        // A probe counts when it was refused, and a consent request (once) when it asked for
        // a place outside every root or through a link that leads out. A consent answer is
        // the user's choice: reads sent behind it could not know it.
        if let Some(c) = &ended.consent {
            session.forgive(crate::error::Reason::NoConsent);
            if c.decided_by.contains(&crate::audit::Decider::Confinement) {
                strike = Some(crate::error::Reason::OutsideRoot);
            }
        }
        if let Some(reason) = strike {
            let limit = self
                .ctx
                .config
                .policy
                .limits
                .max_violations_per_minute
                .get();
            if let Some(s) = session.strike(reason, self.seat.sent, limit) {
                self.broker.suspend(session, &s);
            }
        }
    }
}

/// What a request that ended did, as its audit line and its session's counters tell it.
struct Ended<'a> {
    /// The real path it named, or the one its error names.
    path: Option<String>,
    /// Its outcome as shown.
    outcome: &'static str,
    bytes: u64,
    cpu: std::time::Duration,
    entries: u64,
    /// What a consent request decided.
    consent: Option<crate::audit::ConsentNote>,
    /// Whether it ended with an answer, not an error or withdrawn.
    succeeded: bool,
    err: Option<&'a Error>,
    violation: Option<Violation<'a>>,
    /// Whether its caller withdrew it before it ended.
    withdrawn: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record(None);
        }
    }
}

/// The session a message runs in, as it was found when the message was handed over: the
/// session, or why there is none (the broker holds its most sessions), with the id asked by.
pub(crate) struct Seat {
    pub(super) id: String,
    pub(super) session: Result<Arc<Session>>,
    /// When the message was handed over: a refusal of the user's choice counts against a
    /// request only if it was sent after the server was told of it.
    pub(super) sent: Instant,
    /// The message's turn, once taken: the blocking work of its operations holds it too, so
    /// that work which outlives its caller (a dropped future, a timeout) still keeps the
    /// session's later changes waiting until it really ends.
    pub(super) turn: std::sync::OnceLock<Arc<Turn>>,
}

impl Seat {
    pub(super) fn of(session: Arc<Session>) -> Seat {
        Seat {
            id: session.server_id().to_owned(),
            session: Ok(session),
            sent: Instant::now(),
            turn: std::sync::OnceLock::new(),
        }
    }
}
