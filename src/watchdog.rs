//! Abuse detection: a session's attempts to reach what it may not are counted over the last
//! minute, and a session that passes the policy's threshold is suspended until the user lifts
//! it.
//!
//! Refusals alone do not stop a hostile server: each escape attempt is refused and logged,
//! and it is free to try the next. A server that tries many in a short time is no confused
//! client but one searching for a way out, and its grants are no longer safe with it. Only
//! the user lifts a suspension (or the session ends): a server that could lift its own would
//! simply carry on.

use crate::error::{Error, Reason};
use std::time::{Instant, SystemTime};

/// The window violations are counted over, in one-second buckets.
const WINDOW_SECS: usize = 60;

/// The reasons that count as a strike, in the order a suspension lists them.
const STRIKES: [Reason; 4] = [
    Reason::OutsideRoot,
    Reason::NoConsent,
    Reason::Revoked,
    Reason::Malformed,
];

/// The strike a refusal is, if any: a path outside every root (or a link that leads out), a
/// path without a grant, a revoked grant tried again, a malformed path. Refusals that are no
/// attempt of the server's (the operating system's, a root that moved, a read-only root, a
/// busy file) are not, nor is a refusal for the suspension itself.
pub(crate) fn strike_of(e: &Error) -> Option<Reason> {
    let reason = e.reason()?;
    STRIKES.contains(&reason).then_some(reason)
}

/// What lifts a suspension in the face a broker runs in: the user is told what works there,
/// never a command that reaches nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ResumedBy {
    /// An embedder's [`Broker::resume`](crate::Broker::resume): the library's default.
    #[default]
    Host,
    /// The user, through the daemon: `fsbroker resume` or the console.
    Daemon,
    /// Nothing but the session's end: a face with no control socket (plain `serve` and
    /// `proxy`), where `fsbroker resume` reaches nothing.
    SessionEnd,
}

impl ResumedBy {
    /// What the user is told lifts a suspension of `server_id`, after "only the user can".
    pub(crate) fn hint(self, server_id: &str) -> String {
        match self {
            ResumedBy::Host => "resume it (the host's Broker::resume)".to_owned(),
            ResumedBy::Daemon => {
                format!("resume it (fsbroker resume --server {server_id}, or the console)")
            }
            ResumedBy::SessionEnd => "lift it: end this session and start it again (run it \
                 attached to a daemon, with --daemon, to resume a session without ending it)"
                .to_owned(),
        }
    }
}

/// Why a session was suspended: what the user sees, and what lifts it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Suspension {
    /// When it was suspended.
    pub since: SystemTime,
    /// The violations within the minute before, by reason (`outside_root`, `no_consent`,
    /// `revoked`, `malformed`), those that occurred only.
    pub violations: Vec<(Reason, u32)>,
}

impl Suspension {
    /// The violations in all.
    pub fn total(&self) -> u32 {
        self.violations.iter().map(|(_, n)| n).sum()
    }

    /// The violations as a person reads them: `outside_root 15, no_consent 5`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .violations
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        parts.join(", ")
    }
}

/// One session's strikes over the last minute, and its suspension. Its size is fixed: a
/// bucket per second of the window, each with a count per reason, whatever the threshold.
///
/// A refusal that follows from the user's choice (a grant revoked, consent denied) is a
/// strike only for a request the server sent after it was first told of that refusal: the
/// requests it had in flight, or pipelined behind its consent request, could not know. The
/// first refusal of its kind since the user's last such choice is when the server is told.
#[derive(Debug)]
pub(crate) struct Watchdog {
    /// The instant second 0 of the buckets counts from.
    origin: Instant,
    /// Per second of the window: which second it holds, and its counts by reason.
    buckets: [(u64, [u32; STRIKES.len()]); WINDOW_SECS],
    /// Per reason: when the server was first told of it since the user's last choice.
    told: [Option<Instant>; STRIKES.len()],
    suspended: Option<Suspension>,
}

impl Watchdog {
    pub(crate) fn new(origin: Instant) -> Watchdog {
        Watchdog {
            origin,
            buckets: [(0, [0; STRIKES.len()]); WINDOW_SECS],
            told: [None; STRIKES.len()],
            suspended: None,
        }
    }

    /// The user made a choice that refuses `reason` to requests already sent (a revocation,
    /// a consent answer): until the server is told of it again, such refusals are no strikes.
    pub(crate) fn forgive(&mut self, reason: Reason) {
        if let Some(kind) = STRIKES.iter().position(|r| *r == reason) {
            self.told[kind] = None;
        }
    }

    /// The suspension, while there is one.
    pub(crate) fn suspended(&self) -> Option<&Suspension> {
        self.suspended.as_ref()
    }

    /// Suspends the session as `s` says: a suspension of its server's identity, carried over
    /// from an earlier session of it.
    pub(crate) fn suspend_as(&mut self, s: Suspension) {
        self.suspended = Some(s);
    }

    /// Counts a strike of `reason` at `now` for a request sent at `sent`; suspends the
    /// session when it makes `limit` strikes within the window, and then returns the
    /// suspension (once: a suspended session's refusals count no further).
    pub(crate) fn strike(
        &mut self,
        now: Instant,
        sent: Instant,
        reason: Reason,
        limit: u32,
    ) -> Option<Suspension> {
        if self.suspended.is_some() {
            return None;
        }
        let kind = STRIKES.iter().position(|r| *r == reason)?;
        if matches!(reason, Reason::NoConsent | Reason::Revoked) {
            match self.told[kind] {
                Some(told) if sent > told => {}
                // The first refusal tells the server; those sent before it could not know.
                told => {
                    self.told[kind] = told.or(Some(now));
                    return None;
                }
            }
        }
        // Second 1 onwards, so that a bucket still at 0 was never used.
        let second = now.saturating_duration_since(self.origin).as_secs() + 1;
        let slot = usize::try_from(second % WINDOW_SECS as u64).unwrap_or(0);
        let bucket = &mut self.buckets[slot];
        if bucket.0 != second {
            *bucket = (second, [0; STRIKES.len()]);
        }
        bucket.1[kind] = bucket.1[kind].saturating_add(1);
        let mut counts = [0u32; STRIKES.len()];
        for (at, c) in &self.buckets {
            if *at != 0 && second - at < WINDOW_SECS as u64 {
                for (sum, n) in counts.iter_mut().zip(c) {
                    *sum = sum.saturating_add(*n);
                }
            }
        }
        if counts.iter().fold(0u32, |a, n| a.saturating_add(*n)) < limit {
            return None;
        }
        let suspension = Suspension {
            since: SystemTime::now(),
            violations: STRIKES
                .iter()
                .zip(counts)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (*r, n))
                .collect(),
        };
        self.suspended = Some(suspension.clone());
        Some(suspension)
    }

    /// Lifts the suspension, and forgets the strikes before it; says whether there was one.
    pub(crate) fn resume(&mut self) -> bool {
        self.buckets = [(0, [0; STRIKES.len()]); WINDOW_SECS];
        self.suspended.take().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn strikes_within_a_minute_suspend_and_older_ones_lapse() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0);
        for i in 0..19 {
            assert!(w.strike(t0, t0, Reason::OutsideRoot, 20).is_none(), "{i}");
        }
        // A minute later, those nineteen no longer count.
        let later = t0 + Duration::from_secs(60);
        // The first `no_consent` tells the server, and is none.
        assert!(w.strike(later, later, Reason::NoConsent, 1).is_none());
        let after = later + Duration::from_millis(1);
        for _ in 0..19 {
            assert!(w.strike(after, after, Reason::NoConsent, 20).is_none());
        }
        let s = w
            .strike(
                later + Duration::from_secs(59),
                after,
                Reason::Malformed,
                20,
            )
            .unwrap();
        assert_eq!(
            s.violations,
            vec![(Reason::NoConsent, 19), (Reason::Malformed, 1)]
        );
        assert_eq!(
            (s.total(), s.summary().as_str()),
            (20, "no_consent 19, malformed 1")
        );
        assert!(w.suspended().is_some());
        // Suspended: no second suspension, and resuming starts from nothing.
        assert!(w.strike(later, later, Reason::Malformed, 1).is_none());
        assert!(w.resume());
        assert!(!w.resume());
        assert!(w.strike(after, after, Reason::Malformed, 2).is_none());
        assert!(w.strike(after, after, Reason::Malformed, 2).is_some());
    }

    #[test]
    fn refusals_of_the_users_choices_count_only_once_the_server_was_told() {
        let t0 = Instant::now();
        let t = |ms| t0 + Duration::from_millis(ms);
        let mut w = Watchdog::new(t0);
        // Thirty requests in flight when a grant was revoked: the first answer tells the
        // server, and the others were sent before it.
        for _ in 0..30 {
            assert!(w.strike(t(10), t(1), Reason::Revoked, 2).is_none());
        }
        // Sent after it: counted.
        assert!(w.strike(t(20), t(15), Reason::Revoked, 2).is_none());
        assert!(w.strike(t(21), t(15), Reason::Revoked, 2).is_some());
        // A new revocation forgives what was already on its way.
        let mut w = Watchdog::new(t0);
        w.strike(t(10), t(1), Reason::NoConsent, 2);
        w.strike(t(20), t(15), Reason::NoConsent, 2);
        w.forgive(Reason::NoConsent);
        for _ in 0..5 {
            assert!(w.strike(t(30), t(16), Reason::NoConsent, 2).is_none());
        }
    }

    #[test]
    fn other_refusals_are_no_strikes() {
        for r in [
            Reason::OsDenied,
            Reason::ReadOnly,
            Reason::RootUnavailable,
            Reason::Suspended,
            Reason::Locked,
        ] {
            let e = Error::denied(r);
            assert_eq!(strike_of(&e), None, "{r}");
            let now = Instant::now();
            assert!(Watchdog::new(now).strike(now, now, r, 1).is_none());
        }
        assert_eq!(
            strike_of(&Error::denied(Reason::OutsideRoot)),
            Some(Reason::OutsideRoot)
        );
    }
}
