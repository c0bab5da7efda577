//! The settings a host makes in code on a [`BrokerBuilder`]: each replaces one policy key's
//! value, in the policy the broker is built with and in every policy a reload brings.
//!
//! Each method is named after the key it sets, less the unit where it takes a [`Duration`]
//! (`limits.timeout_ms` is [`BrokerBuilder::timeout`]); a rate and its burst are set
//! together. A zero, or a [`Duration`] that rounds down to zero in the key's unit, is refused
//! by [`BrokerBuilder::build`] naming the key, and so is a value above the key's cap (see
//! `policy/README.md`): nothing is raised or lowered to fit.

use super::BrokerBuilder;
use crate::policy::{Given, Key};
use std::time::Duration;

impl BrokerBuilder {
    /// Sets `key` to the number `n`.
    fn number(mut self, key: Key, n: impl TryInto<u64>) -> Self {
        // A count beyond u64 cannot be held by any key, and is refused as too large.
        let n = n.try_into().unwrap_or(u64::MAX);
        self.overrides.set(key, Given::Number(n));
        self
    }

    /// Sets `key` to the span of time `d`.
    fn time(mut self, key: Key, d: Duration) -> Self {
        self.overrides.set(key, Given::Time(d));
        self
    }

    /// How long one operation may take, in whole milliseconds (`limits.timeout_ms`): past it
    /// the server is answered `TIMEOUT`.
    ///
    /// ```
    /// use mcp_fsbroker::{Broker, Policy};
    /// use std::time::Duration;
    /// let (broker, _notifications) = Broker::builder(Policy::new())
    ///     .timeout(Duration::from_secs(5))
    ///     .consent_timeout(Duration::from_secs(30))
    ///     .rate_limit(100, 1_000)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(broker.policy().limits.timeout_ms.get(), 5_000);
    /// // A zero is refused, naming the key.
    /// let e = Broker::builder(Policy::new()).timeout(Duration::ZERO).build().unwrap_err();
    /// assert_eq!((e.key.as_str(), e.message.as_str()), ("limits.timeout_ms", "must be at least 1 ms (0ns rounds down to 0)"));
    /// ```
    pub fn timeout(self, timeout: Duration) -> Self {
        self.time(Key::TimeoutMs, timeout)
    }

    /// How long a change may wait in all for the locks of the files it changes, in whole
    /// milliseconds (`limits.lock_wait_ms`): the turns of other sessions' changes of the same
    /// file, and another process's advisory lock. Past it, or past the operation's own
    /// timeout if that comes first, the change is refused (`CONCURRENCY_CONFLICT` `locked`
    /// with `data.waitedMs` and `data.retryAfterMs`, or `TIMEOUT`).
    pub fn lock_wait(self, wait: Duration) -> Self {
        self.time(Key::LockWaitMs, wait)
    }

    /// How long the consent provider may take to answer, in whole seconds
    /// (`consent.timeout_secs`): past it the request is denied.
    pub fn consent_timeout(self, timeout: Duration) -> Self {
        self.time(Key::ConsentTimeoutSecs, timeout)
    }

    /// Requests a session may send a second, sustained, and in a burst
    /// (`limits.requests_per_second`, `limits.burst`): more are answered `RATE_LIMITED`.
    pub fn rate_limit(self, per_second: u32, burst: u32) -> Self {
        self.number(Key::RequestsPerSecond, per_second)
            .number(Key::Burst, burst)
    }

    /// Payload bytes a session's reads and writes may move a second, sustained, and in a
    /// burst (`limits.bytes_per_second`, `limits.burst_bytes`).
    pub fn byte_rate_limit(self, per_second: u64, burst: u64) -> Self {
        self.number(Key::BytesPerSecond, per_second)
            .number(Key::BurstBytes, burst)
    }

    /// The bytes a `files/read` without a `length` returns (`limits.chunk_bytes`); at most
    /// [`max_chunk_bytes`](BrokerBuilder::max_chunk_bytes).
    pub fn chunk_bytes(self, bytes: usize) -> Self {
        self.number(Key::ChunkBytes, bytes)
    }

    /// The largest `length` a `files/read` may ask for (`limits.max_chunk_bytes`). Set
    /// [`chunk_bytes`](BrokerBuilder::chunk_bytes) too when going below the default chunk.
    pub fn max_chunk_bytes(self, bytes: usize) -> Self {
        self.number(Key::MaxChunkBytes, bytes)
    }

    /// The largest file `files/write` may produce (`limits.max_write_bytes`).
    pub fn max_write_bytes(self, bytes: u64) -> Self {
        self.number(Key::MaxWriteBytes, bytes)
    }

    /// The entries a `files/list` without a `limit` returns (`limits.list_page`); at most
    /// [`max_list_page`](BrokerBuilder::max_list_page).
    pub fn list_page(self, entries: usize) -> Self {
        self.number(Key::ListPage, entries)
    }

    /// The largest `limit` a `files/list` may ask for (`limits.max_list_page`). Set
    /// [`list_page`](BrokerBuilder::list_page) too when going below the default page.
    pub fn max_list_page(self, entries: usize) -> Self {
        self.number(Key::MaxListPage, entries)
    }

    /// Operations of one session running at once (`limits.max_in_flight`); more wait, within
    /// their timeout.
    pub fn max_in_flight(self, operations: usize) -> Self {
        self.number(Key::MaxInFlight, operations)
    }

    /// The longest message line accepted, in bytes (`limits.max_line_bytes`).
    pub fn max_line_bytes(self, bytes: usize) -> Self {
        self.number(Key::MaxLineBytes, bytes)
    }

    /// Watches one session may hold (`limits.max_watches`).
    pub fn max_watches(self, watches: usize) -> Self {
        self.number(Key::MaxWatches, watches)
    }

    /// Chunked uploads one session may have open (`limits.max_uploads`).
    pub fn max_uploads(self, uploads: usize) -> Self {
        self.number(Key::MaxUploads, uploads)
    }

    /// How long a chunked upload may sit idle before it is dropped, in whole seconds
    /// (`limits.upload_idle_secs`).
    pub fn upload_idle(self, idle: Duration) -> Self {
        self.time(Key::UploadIdleSecs, idle)
    }

    /// Kernel (inotify) watches all sessions together may use (`limits.max_kernel_watches`).
    pub fn max_kernel_watches(self, watches: usize) -> Self {
        self.number(Key::MaxKernelWatches, watches)
    }

    /// The span over which a burst of changes is coalesced into one notification, in whole
    /// milliseconds (`limits.watch_coalesce_ms`).
    pub fn watch_coalesce(self, window: Duration) -> Self {
        self.time(Key::WatchCoalesceMs, window)
    }

    /// Change notifications a session may have in flight before it is owed an `overflow`
    /// (`limits.watch_queue`).
    pub fn watch_queue(self, notifications: usize) -> Self {
        self.number(Key::WatchQueue, notifications)
    }

    /// The CPU time a session's operations may spend per minute, in whole milliseconds
    /// (`limits.cpu_ms_per_minute`): past it, the session's requests are `RATE_LIMITED`
    /// with `data.retryAfterMs` until the minute's budget has come back.
    pub fn cpu_per_minute(self, cpu: Duration) -> Self {
        self.time(Key::CpuMsPerMinute, cpu)
    }

    /// The security violations within a minute that suspend a session
    /// (`limits.max_violations_per_minute`; see [`Broker::resume`](crate::Broker::resume)).
    pub fn max_violations_per_minute(self, violations: u32) -> Self {
        self.number(Key::MaxViolationsPerMinute, violations)
    }
}
