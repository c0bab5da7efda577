//! Rate limits: budgets of requests, payload bytes and CPU time per session.
//!
//! One keyed governor limiter counts requests for every session, keyed by server id. A second
//! budget counts the bytes `files/read` returns and `files/write` takes, a third the CPU time
//! the session's operations spend (both a [`Budget`]). Their key spaces are bounded because
//! sessions are (see [`crate::broker::MAX_SESSIONS`]), and keys of ended sessions are pruned
//! when a session ends.
//!
//! Beside them, the process's own limit on open descriptors, which the faces that hold many
//! connections (the remote proxy, the daemon) raise at start.

use crate::error::{Error, ErrorKind, Result};
use crate::locks::lock;
use crate::policy::Limits;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The per-session request, byte and CPU budgets.
#[derive(Debug)]
pub(crate) struct RateLimits {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    bytes: Budget,
    cpu: Budget,
}

/// A request refused for a budget: which, and the `RATE_LIMITED` to answer (boxed: the
/// refusal is the rare path).
pub(crate) type Refused = Box<(Spent, Error)>;

/// Which budget a refused request passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spent {
    /// `requests_per_second` and `burst`.
    Requests,
    /// `bytes_per_second` and `burst_bytes`.
    Bytes,
    /// `cpu_ms_per_minute`.
    Cpu,
}

impl Spent {
    /// The budget's name, as `status` and the log show it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Spent::Requests => "requests",
            Spent::Bytes => "bytes",
            Spent::Cpu => "cpu",
        }
    }
}

impl RateLimits {
    /// A limiter with the policy's rates and bursts.
    pub(crate) fn new(limits: &Limits) -> Self {
        let quota = Quota::per_second(limits.requests_per_second).allow_burst(limits.burst);
        // CPU time is counted in nanoseconds: the minute's budget is the burst, refilled
        // over the minute.
        let cpu_per_minute = limits.cpu_ms_per_minute.get().saturating_mul(1_000_000);
        RateLimits {
            limiter: RateLimiter::keyed(quota),
            clock: DefaultClock::default(),
            bytes: Budget::new(
                limits.bytes_per_second.get(),
                limits.burst_bytes.get(),
                "too many bytes read or written",
            ),
            cpu: Budget::new(
                cpu_per_minute / 60,
                cpu_per_minute,
                "too much CPU time spent",
            ),
        }
    }

    /// Takes one request from `server_id`'s allowance, or says when to retry and which
    /// budget it passed: requests, the CPU time owed, and for a request that moves payload
    /// (`moves_payload`), the bytes owed.
    pub(crate) fn admit(&self, server_id: &str, moves_payload: bool) -> Result<(), Refused> {
        let now = Instant::now();
        self.limiter
            .check_key(&server_id.to_owned())
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(self.clock.now());
                Box::new((Spent::Requests, rate_limited("too many requests", wait)))
            })?;
        self.cpu
            .admit(server_id, now)
            .map_err(|e| Box::new((Spent::Cpu, e)))?;
        if moves_payload {
            self.bytes
                .admit(server_id, now)
                .map_err(|e| Box::new((Spent::Bytes, e)))?;
        }
        Ok(())
    }

    /// Charges `cpu` of CPU time that an operation of `server_id` spent.
    pub(crate) fn charge_cpu(&self, server_id: &str, cpu: Duration) {
        let nanos = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
        self.cpu.charge(server_id, nanos, Instant::now());
    }

    /// Charges `n` payload bytes that a request of `server_id` moved.
    pub(crate) fn charge_bytes(&self, server_id: &str, n: u64) {
        self.bytes.charge(server_id, n, Instant::now());
    }

    /// Drops the state of keys that have fully recovered (such as ended sessions).
    pub(crate) fn prune(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
        self.bytes.prune(Instant::now());
        self.cpu.prune(Instant::now());
    }
}

/// `RATE_LIMITED`, with the wait in whole milliseconds (at least one).
fn rate_limited(message: &str, wait: Duration) -> Error {
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
    Error::new(ErrorKind::RateLimited, message).with_retry_after_ms(ms)
}

/// A budget of units (payload bytes, nanoseconds of CPU time) per key, refilled at `rate`
/// units a second up to `burst`.
///
/// A payload's size or an operation's CPU time is known only once the operation has run (a
/// read may stop at the end of the file), so units are charged after the fact and the budget
/// may go into debt by the requests in flight; the next request is refused until the debt is
/// repaid. This is the generic cell rate algorithm kept as one instant per key: `tat` is when
/// the budget would be full again, and a key owes bytes while `tat` is more than `burst`'s
/// worth of time ahead.
#[derive(Debug)]
struct Budget {
    rate: u64,
    tolerance: Duration,
    tat: Mutex<HashMap<String, Instant>>,
    /// The message of its `RATE_LIMITED`.
    refusal: &'static str,
}

impl Budget {
    fn new(rate: u64, burst: u64, refusal: &'static str) -> Self {
        Budget {
            rate,
            tolerance: Self::time_for(rate, burst),
            tat: Mutex::new(HashMap::new()),
            refusal,
        }
    }

    /// The time `n` bytes take to refill at `rate` bytes a second (saturating).
    fn time_for(rate: u64, n: u64) -> Duration {
        let nanos = u128::from(n) * 1_000_000_000 / u128::from(rate.max(1));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn admit(&self, key: &str, now: Instant) -> Result<()> {
        let tat = lock(&self.tat).get(key).copied();
        let Some(tat) = tat else { return Ok(()) };
        // A tolerance too large to add to an instant is a budget that cannot be exhausted.
        match now.checked_add(self.tolerance) {
            Some(limit) if tat > limit => {
                Err(rate_limited(self.refusal, tat.duration_since(limit)))
            }
            _ => Ok(()),
        }
    }

    fn charge(&self, key: &str, n: u64, now: Instant) {
        if n == 0 {
            return;
        }
        let cost = Self::time_for(self.rate, n);
        let mut map = lock(&self.tat);
        let tat = map.entry(key.to_owned()).or_insert(now);
        let base = (*tat).max(now);
        // Past what an instant can hold, the debt is as large as it can be: keep the later
        // of the two so the key stays refused.
        *tat = base.checked_add(cost).unwrap_or(base);
    }

    fn prune(&self, now: Instant) {
        let mut map = lock(&self.tat);
        map.retain(|_, tat| *tat > now);
        map.shrink_to_fit();
    }
}

/// Raises the soft descriptor limit to the hard one (at most 65536) and returns the limit in
/// force afterwards (`None`: unlimited).
#[cfg(any(feature = "proxy", feature = "cli"))]
pub(crate) fn raise_descriptor_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    // Raised to the hard limit when that is unlimited up to this, as servers commonly do;
    // no process of ours needs more.
    const WANTED_DESCRIPTORS: u64 = 1 << 16;
    let limit = getrlimit(Resource::Nofile);
    let target = match limit.maximum {
        Some(hard) => hard.min(WANTED_DESCRIPTORS.max(limit.current.unwrap_or(0))),
        None => WANTED_DESCRIPTORS,
    };
    if limit.current.is_some_and(|soft| soft < target) {
        let raised = rustix::process::Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => {
                tracing::info!(from = ?limit.current, to = target, "raised the descriptor limit")
            }
            Err(e) => tracing::info!(error = %e, "could not raise the descriptor limit"),
        }
    }
    getrlimit(Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_goes_into_debt_and_is_repaid_at_its_rate() {
        let b = Budget::new(1000, 2000, "x");
        let t0 = Instant::now();
        assert!(b.admit("s", t0).is_ok());
        b.charge("s", 1500, t0);
        assert!(b.admit("s", t0).is_ok(), "500 bytes are left");
        b.charge("s", 1500, t0);
        let e = b.admit("s", t0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        // 1000 bytes of debt at 1000 a second: a second.
        assert!(b.admit("s", t0 + Duration::from_millis(999)).is_err());
        assert!(b.admit("s", t0 + Duration::from_secs(1)).is_ok());
        assert!(b.admit("t", t0).is_ok(), "another key has its own budget");
        b.prune(t0 + Duration::from_secs(3));
        assert!(lock(&b.tat).is_empty());
    }

    #[test]
    fn huge_budgets_and_charges_saturate() {
        let b = Budget::new(1, u64::MAX, "x");
        let t0 = Instant::now();
        b.charge("s", u64::MAX, t0);
        assert!(
            b.admit("s", t0).is_ok(),
            "the whole burst was spent, not more"
        );
        b.charge("s", u64::MAX, t0);
        assert!(b.admit("s", t0).is_err());
        let unbounded = Budget::new(1, u64::MAX, "x");
        unbounded.charge("s", 1, t0);
        assert!(unbounded.admit("s", t0).is_ok());
    }
}
