//! Settings a host makes in code, through the broker's builder, laid over every policy put
//! in force: the one the broker is built with and each one a reload brings, so that a value
//! the host chose does not go back to the file's when the file is reloaded.

use super::{Policy, PolicyError};
use std::collections::BTreeMap;
use std::num::NonZeroU128;
use std::time::Duration;

/// What errors about a setting made in code name in place of a file.
const ORIGIN: &str = "<builder>";

/// A policy key a host may set in code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    /// `limits.requests_per_second`.
    RequestsPerSecond,
    /// `limits.burst`.
    Burst,
    /// `limits.bytes_per_second`.
    BytesPerSecond,
    /// `limits.burst_bytes`.
    BurstBytes,
    /// `limits.timeout_ms`.
    TimeoutMs,
    /// `limits.lock_wait_ms`.
    LockWaitMs,
    /// `limits.chunk_bytes`.
    ChunkBytes,
    /// `limits.max_chunk_bytes`.
    MaxChunkBytes,
    /// `limits.max_write_bytes`.
    MaxWriteBytes,
    /// `limits.list_page`.
    ListPage,
    /// `limits.max_list_page`.
    MaxListPage,
    /// `limits.max_in_flight`.
    MaxInFlight,
    /// `limits.max_line_bytes`.
    MaxLineBytes,
    /// `limits.max_watches`.
    MaxWatches,
    /// `limits.max_uploads`.
    MaxUploads,
    /// `limits.upload_idle_secs`.
    UploadIdleSecs,
    /// `limits.max_kernel_watches`.
    MaxKernelWatches,
    /// `limits.watch_coalesce_ms`.
    WatchCoalesceMs,
    /// `limits.watch_queue`.
    WatchQueue,
    /// `limits.cpu_ms_per_minute`.
    CpuMsPerMinute,
    /// `limits.max_violations_per_minute`.
    MaxViolationsPerMinute,
    /// `consent.timeout_secs`.
    ConsentTimeoutSecs,
}

/// The unit a key counts in, named in its error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Things: requests, entries, watches.
    Count,
    /// Bytes.
    Bytes,
    /// Milliseconds.
    Millis,
    /// Seconds.
    Secs,
}

impl Key {
    /// The dotted policy key, as errors name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Key::RequestsPerSecond => "limits.requests_per_second",
            Key::Burst => "limits.burst",
            Key::BytesPerSecond => "limits.bytes_per_second",
            Key::BurstBytes => "limits.burst_bytes",
            Key::TimeoutMs => "limits.timeout_ms",
            Key::LockWaitMs => "limits.lock_wait_ms",
            Key::ChunkBytes => "limits.chunk_bytes",
            Key::MaxChunkBytes => "limits.max_chunk_bytes",
            Key::MaxWriteBytes => "limits.max_write_bytes",
            Key::ListPage => "limits.list_page",
            Key::MaxListPage => "limits.max_list_page",
            Key::MaxInFlight => "limits.max_in_flight",
            Key::MaxLineBytes => "limits.max_line_bytes",
            Key::MaxWatches => "limits.max_watches",
            Key::MaxUploads => "limits.max_uploads",
            Key::UploadIdleSecs => "limits.upload_idle_secs",
            Key::MaxKernelWatches => "limits.max_kernel_watches",
            Key::WatchCoalesceMs => "limits.watch_coalesce_ms",
            Key::WatchQueue => "limits.watch_queue",
            Key::CpuMsPerMinute => "limits.cpu_ms_per_minute",
            Key::MaxViolationsPerMinute => "limits.max_violations_per_minute",
            Key::ConsentTimeoutSecs => "consent.timeout_secs",
        }
    }

    /// What the key's number counts.
    fn unit(self) -> Unit {
        match self {
            Key::TimeoutMs | Key::LockWaitMs | Key::WatchCoalesceMs | Key::CpuMsPerMinute => {
                Unit::Millis
            }
            Key::UploadIdleSecs | Key::ConsentTimeoutSecs => Unit::Secs,
            Key::BytesPerSecond
            | Key::BurstBytes
            | Key::ChunkBytes
            | Key::MaxChunkBytes
            | Key::MaxWriteBytes
            | Key::MaxLineBytes => Unit::Bytes,
            Key::RequestsPerSecond
            | Key::Burst
            | Key::ListPage
            | Key::MaxListPage
            | Key::MaxInFlight
            | Key::MaxWatches
            | Key::MaxUploads
            | Key::MaxKernelWatches
            | Key::WatchQueue
            | Key::MaxViolationsPerMinute => Unit::Count,
        }
    }

    /// Puts `n` (not zero) in the key's field of `p`; `None` when the field cannot hold it.
    fn write(self, p: &mut Policy, n: NonZeroU128) -> Option<()> {
        // Each field's own non-zero type, converted from `n` without loss or not at all.
        fn nz<T: TryFrom<NonZeroU128>>(n: NonZeroU128) -> Option<T> {
            T::try_from(n).ok()
        }
        let l = &mut p.limits;
        match self {
            Key::RequestsPerSecond => l.requests_per_second = nz(n)?,
            Key::Burst => l.burst = nz(n)?,
            Key::BytesPerSecond => l.bytes_per_second = nz(n)?,
            Key::BurstBytes => l.burst_bytes = nz(n)?,
            Key::TimeoutMs => l.timeout_ms = nz(n)?,
            Key::LockWaitMs => l.lock_wait_ms = nz(n)?,
            Key::ChunkBytes => l.chunk_bytes = nz(n)?,
            Key::MaxChunkBytes => l.max_chunk_bytes = nz(n)?,
            Key::MaxWriteBytes => l.max_write_bytes = nz(n)?,
            Key::ListPage => l.list_page = nz(n)?,
            Key::MaxListPage => l.max_list_page = nz(n)?,
            Key::MaxInFlight => l.max_in_flight = nz(n)?,
            Key::MaxLineBytes => l.max_line_bytes = nz(n)?,
            Key::MaxWatches => l.max_watches = nz(n)?,
            Key::MaxUploads => l.max_uploads = nz(n)?,
            Key::UploadIdleSecs => l.upload_idle_secs = nz(n)?,
            Key::MaxKernelWatches => l.max_kernel_watches = nz(n)?,
            Key::WatchCoalesceMs => l.watch_coalesce_ms = nz(n)?,
            Key::WatchQueue => l.watch_queue = nz(n)?,
            Key::CpuMsPerMinute => l.cpu_ms_per_minute = nz(n)?,
            Key::MaxViolationsPerMinute => l.max_violations_per_minute = nz(n)?,
            Key::ConsentTimeoutSecs => p.consent.timeout_secs = nz(n)?,
        }
        Some(())
    }
}

/// A value as the host gave it: a number in the key's unit, or a span of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Given {
    /// A number, in the key's unit.
    Number(u64),
    /// A span of time, counted in the key's unit (milliseconds or seconds) rounded down.
    Time(Duration),
}

/// The settings a host made in code: the last value given for each key, the directories no
/// root may hold, and the user's edits made at run time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    set: BTreeMap<Key, Given>,
    keep_out: Vec<std::path::PathBuf>,
    store: Option<std::path::PathBuf>,
    steering: Vec<std::path::PathBuf>,
    layer: super::Layer,
}

/// The real path of `dir`, which need not exist yet: its nearest existing ancestor resolved,
/// the rest as written (taken against the working directory when relative).
fn real_path(dir: &std::path::Path) -> std::path::PathBuf {
    let absolute = match std::env::current_dir() {
        Ok(cwd) if dir.is_relative() => cwd.join(dir),
        _ => dir.to_owned(),
    };
    let mut rest = Vec::new();
    let mut at = absolute.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return absolute,
        }
    }
}

impl Overrides {
    /// Refuses every policy with a root at or above `dir` (resolved now): the daemon's
    /// socket directory, whose key a server must never reach, through the broker or through
    /// a sandbox that opens the root.
    pub(crate) fn keep_out(&mut self, dir: &std::path::Path) {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        self.keep_out.push(dir);
    }

    /// Whether a root at `root` (its directory as opened) holds a directory kept out; a root
    /// whose place cannot be resolved is taken to, as the check cannot decide.
    pub(crate) fn holds_kept_out(&self, root: &std::path::Path) -> Option<&std::path::Path> {
        let real = std::fs::canonicalize(root).ok();
        self.keep_out
            .iter()
            .find(|d| real.as_ref().is_none_or(|r| d.starts_with(r)))
            .map(std::path::PathBuf::as_path)
    }

    /// Refuses every policy with a root at, above or within `dir` (resolved now): the
    /// recovery store, whose kept content and journal are the user's alone.
    pub(crate) fn keep_store_out(&mut self, dir: &std::path::Path) {
        self.store = Some(real_path(dir));
    }

    /// The recovery store, when a root at `root` (its directory as opened) holds it or lies
    /// within it; a root whose place cannot be resolved is taken to, as the check cannot
    /// decide.
    pub(crate) fn meets_store(&self, root: &std::path::Path) -> Option<&std::path::Path> {
        let store = self.store.as_deref()?;
        let real = std::fs::canonicalize(root).ok();
        real.as_ref()
            .is_none_or(|r| store.starts_with(r) || r.starts_with(store))
            .then_some(store)
    }

    /// Refuses, in every policy, a writable root that holds `file` (the console's state
    /// file, which decides what servers are granted at the daemon's next start), as the
    /// policy file itself is.
    pub(crate) fn steer_from(&mut self, file: &std::path::Path) {
        self.steering.push(file.to_owned());
    }

    /// The files given to [`Overrides::steer_from`].
    pub(crate) fn steering(&self) -> &[std::path::PathBuf] {
        &self.steering
    }

    /// Lays `layer` over every policy, in place of the one laid before.
    pub(crate) fn set_layer(&mut self, layer: super::Layer) {
        self.layer = layer;
    }

    /// Sets `key` to `value`, replacing what was set for it before.
    pub(crate) fn set(&mut self, key: Key, value: Given) {
        self.set.insert(key, value);
    }

    /// `policy` with these settings over its own values. A zero (or a span of time that
    /// rounds down to zero in the key's unit) is refused rather than raised to the least
    /// value, and so is a span too long for the key's field: the host meant something else.
    pub(crate) fn apply(&self, policy: Policy) -> Result<Policy, PolicyError> {
        let mut policy = if self.layer.is_empty() {
            policy
        } else {
            self.layer.apply(policy)
        };
        for (&key, &given) in &self.set {
            let unit = key.unit();
            let amount = match (given, unit) {
                (Given::Number(n), _) => u128::from(n),
                (Given::Time(d), Unit::Secs) => u128::from(d.as_secs()),
                (Given::Time(d), _) => d.as_millis(),
            };
            let refuse = |message: String| PolicyError {
                file: ORIGIN.into(),
                line: None,
                key: key.name().into(),
                message,
            };
            let least = match unit {
                Unit::Count => "1".to_owned(),
                Unit::Bytes => "1 byte".to_owned(),
                Unit::Millis => "1 ms".to_owned(),
                Unit::Secs => "1 second".to_owned(),
            };
            let Some(n) = NonZeroU128::new(amount) else {
                let why = match given {
                    Given::Time(d) => format!(" ({d:?} rounds down to 0)"),
                    Given::Number(_) => String::new(),
                };
                return Err(refuse(format!("must be at least {least}{why}")));
            };
            // Numbers come in their field's own type, so only a span of time can overflow a
            // field, and every field counting time is a u64.
            key.write(&mut policy, n).ok_or_else(|| {
                let unit = if unit == Unit::Secs { "seconds" } else { "ms" };
                refuse(format!("must be at most {} {unit}", u64::MAX))
            })?;
        }
        Ok(policy)
    }

    /// `e`, named as the builder's when its key is one set in code: the value at fault is
    /// the host's, not the policy file's.
    pub(crate) fn blame(&self, mut e: PolicyError) -> PolicyError {
        if self.set.keys().any(|k| k.name() == e.key) {
            e.file = ORIGIN.into();
            e.line = None;
        }
        e
    }
}
