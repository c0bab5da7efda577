//! Rate limits.
//!
//! One keyed governor limiter serves every session, keyed by server id. Its key space is
//! bounded because sessions are (see [`crate::broker::MAX_SESSIONS`]), and keys of ended
//! sessions are pruned when a session ends.

use crate::error::{Error, ErrorKind, Result};
use crate::policy::Limits;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The per-session request rate limiter.
#[derive(Debug)]
pub(crate) struct RateLimits {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

impl RateLimits {
    /// A limiter with the policy's rate and burst.
    pub(crate) fn new(limits: &Limits) -> Self {
        let quota = Quota::per_second(limits.requests_per_second).allow_burst(limits.burst);
        RateLimits {
            limiter: RateLimiter::keyed(quota),
            clock: DefaultClock::default(),
        }
    }

    /// Takes one request from `server_id`'s allowance, or says when to retry.
    pub(crate) fn check(&self, server_id: &str) -> Result<()> {
        self.limiter
            .check_key(&server_id.to_owned())
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(self.clock.now());
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
                Error::new(ErrorKind::RateLimited, "too many requests").with_retry_after_ms(ms)
            })
    }

    /// Drops the state of keys that have fully recovered (such as ended sessions).
    pub(crate) fn prune(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}
