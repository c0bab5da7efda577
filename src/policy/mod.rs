//! The policy: roots, which servers see them, consent rules, standing grants, limits, audit.
//!
//! Policies are TOML files ([`Policy::load`]) or built in memory by the command line. Loading
//! refuses an unknown key or a bad value with the file, line and key named; the types below
//! use `deny_unknown_fields` and validating newtypes so that a loaded [`Policy`] is valid.

mod consent;
mod describe;
mod load;

pub(crate) use consent::Ruling;
pub use consent::{ConsentConfig, ConsentMode, ConsentRule, Decision};
pub use describe::describe;
pub use load::PolicyError;

use crate::access::Access;
use serde::{Deserialize, Serialize};
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The embedded default policy, also shipped as `policy/default.toml`.
pub const DEFAULT_POLICY: &str = include_str!("../../policy/default.toml");

/// A policy file as written: see `policy/README.md` for every key.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The approved directories.
    #[serde(default)]
    pub roots: Vec<RootEntry>,
    /// How consent is decided.
    #[serde(default)]
    pub consent: ConsentConfig,
    /// Grants that hold from the start of a session, without asking.
    #[serde(default)]
    pub grants: Vec<GrantEntry>,
    /// Per-session limits.
    #[serde(default)]
    pub limits: Limits,
    /// The audit log.
    #[serde(default)]
    pub audit: AuditConfig,
    /// What `fsbroker proxy` does with the protocol's eras.
    #[serde(default)]
    pub proxy: ProxyConfig,
}

/// The `[proxy]` section.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Which era a proxied session may take (`--era` overrides it).
    pub era: EraMode,
}

/// Which protocol era `fsbroker proxy` lets a session take: the legacy era (2025-11-25 and
/// earlier, with `initialize`), where roots, consent and `files/*` are brokered, or the
/// modern one (2026-07-28), where only roots are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EraMode {
    /// Legacy whenever the server speaks it; modern only with a modern-only server.
    #[default]
    Auto,
    /// Legacy only: a modern-only server is an error.
    Legacy,
    /// Modern only: a host's `initialize` is refused.
    Modern,
}

impl EraMode {
    /// The mode named `s` on the command line or in a policy.
    pub fn parse(s: &str) -> Option<EraMode> {
        match s {
            "auto" => Some(EraMode::Auto),
            "legacy" => Some(EraMode::Legacy),
            "modern" => Some(EraMode::Modern),
            _ => None,
        }
    }
}

/// One `[[roots]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootEntry {
    /// The host directory (absolute, or relative to the working directory).
    pub path: Spanned<PathBuf>,
    /// The mount name; default: derived from the directory's final component.
    pub mount: Option<Spanned<String>>,
    /// The display name in `roots/list`; default: the mount name.
    pub name: Option<String>,
    /// `read` (default) or `write`.
    #[serde(default = "default_access")]
    pub access: Access,
    /// Server ids that see the root; `["*"]` (default) means every server.
    #[serde(default = "all_servers")]
    pub servers: Vec<String>,
}

/// A `[[grants]]` entry: a standing grant, in force from the start of every matching session
/// and kept when the session ends.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantEntry {
    /// Server ids the grant is for; `["*"]` (default) means every server.
    #[serde(default = "all_servers")]
    pub servers: Vec<String>,
    /// The mount-form path granted, with everything beneath it.
    pub path: Spanned<String>,
    /// `read` (default) or `write`.
    #[serde(default = "default_access")]
    pub access: Access,
}

/// The `[limits]` section: every limit applies per server session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Sustained requests per second.
    pub requests_per_second: NonZeroU32,
    /// Requests allowed in a burst.
    pub burst: NonZeroU32,
    /// Sustained payload bytes per second that `files/read` returns and `files/write` takes.
    pub bytes_per_second: NonZeroU64,
    /// Payload bytes allowed in a burst.
    pub burst_bytes: NonZeroU64,
    /// Operation timeout in milliseconds.
    pub timeout_ms: NonZeroU64,
    /// Default `files/read` chunk, in bytes.
    pub chunk_bytes: NonZeroUsize,
    /// Largest `files/read` length accepted.
    pub max_chunk_bytes: NonZeroUsize,
    /// Largest file `files/write` may produce.
    pub max_write_bytes: NonZeroU64,
    /// Default `files/list` page.
    pub list_page: NonZeroUsize,
    /// Largest `files/list` limit accepted.
    pub max_list_page: NonZeroUsize,
    /// Operations running at once per session; more wait, within their timeout.
    pub max_in_flight: NonZeroUsize,
    /// Longest accepted message line, in bytes.
    pub max_line_bytes: NonZeroUsize,
    /// Watches per session.
    pub max_watches: NonZeroUsize,
    /// Chunked uploads open at once per session.
    pub max_uploads: NonZeroUsize,
    /// Seconds after which an idle chunked upload is dropped.
    pub upload_idle_secs: NonZeroU64,
    /// Kernel (inotify) watches all sessions together may use.
    pub max_kernel_watches: NonZeroUsize,
    /// Milliseconds over which bursts of changes are coalesced.
    pub watch_coalesce_ms: NonZeroU64,
    /// Change notifications a session may have in flight before it is owed an `overflow`.
    pub watch_queue: NonZeroUsize,
}

impl Default for Limits {
    fn default() -> Self {
        let nz = |n: usize| NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN);
        Limits {
            // Sized in policy/README.md ("Why these rate limits"): a developer's workload fits
            // the bursts whole, and a runaway loop is held to a fraction of the broker's speed.
            requests_per_second: NonZeroU32::new(5_000).unwrap_or(NonZeroU32::MIN),
            burst: NonZeroU32::new(50_000).unwrap_or(NonZeroU32::MIN),
            bytes_per_second: NonZeroU64::new(64 << 20).unwrap_or(NonZeroU64::MIN),
            burst_bytes: NonZeroU64::new(1 << 30).unwrap_or(NonZeroU64::MIN),
            timeout_ms: NonZeroU64::new(60_000).unwrap_or(NonZeroU64::MIN),
            chunk_bytes: nz(1 << 20),
            max_chunk_bytes: nz(16 << 20),
            max_write_bytes: NonZeroU64::new(1 << 30).unwrap_or(NonZeroU64::MIN),
            list_page: nz(1000),
            max_list_page: nz(10_000),
            max_in_flight: nz(16),
            max_line_bytes: nz(32 << 20),
            max_watches: nz(256),
            max_uploads: nz(8),
            upload_idle_secs: NonZeroU64::new(300).unwrap_or(NonZeroU64::MIN),
            max_kernel_watches: nz(16_384),
            watch_coalesce_ms: NonZeroU64::new(50).unwrap_or(NonZeroU64::MIN),
            watch_queue: nz(1024),
        }
    }
}

/// The `[audit]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Whether operations are logged.
    pub enabled: bool,
    /// The file to append JSON lines to; unset means stderr.
    pub file: Option<PathBuf>,
    /// Log a keyed hash instead of each path.
    pub redact_paths: bool,
    /// The hash key, 64 hex digits; unset means a random key per process.
    pub redact_key: Option<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            file: None,
            redact_paths: false,
            redact_key: None,
        }
    }
}

fn default_access() -> Access {
    Access::Read
}
fn all_servers() -> Vec<String> {
    vec!["*".to_owned()]
}

/// A policy file's identity and version (inode, size, modification time), to notice that it
/// changed or was replaced.
pub(crate) fn file_stamp(path: &Path) -> Option<(u64, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}
