//! The policy: roots, which servers see them, consent rules, standing grants, limits, audit.
//!
//! Policies are TOML files ([`Policy::load`]) or built in memory by the command line. Loading
//! refuses an unknown key or a bad value with the file, line and key named; the types below
//! use `deny_unknown_fields` and validating newtypes so that a loaded [`Policy`] is valid.

mod consent_section;
mod grant_entry;
mod proxy_section;
mod recovery_section;
// The effective configuration as text, which only `fsbroker check-policy` prints.
#[cfg(feature = "cli")]
mod describe;
mod layer;
mod limits_caps;
mod load;
mod overrides;
mod root_path;
mod servers_section;

pub(crate) use consent_section::Ruling;
pub use consent_section::{ConsentMode, ConsentPolicy, ConsentRule, Decision, RootsShown};
#[cfg(feature = "cli")]
pub(crate) use describe::describe;
pub use grant_entry::GrantEntry;
pub(crate) use layer::Layer;
#[cfg(feature = "cli")]
pub(crate) use layer::{AddedRoot, PolicyRoot, Remembered};
pub use load::PolicyError;
pub(crate) use overrides::{Given, Key, Overrides};
pub use proxy_section::{EraMode, ProxyPolicy};
#[cfg(feature = "proxy")]
pub(crate) use recovery_section::passwd_home;
pub(crate) use recovery_section::xdg_dir;
pub use recovery_section::{RecoveryPolicy, Unkept};
pub use servers_section::{Otherwise, ServerPin};
pub(crate) use servers_section::{UNPINNED, unpinned};

use crate::access::Access;
use serde::{Deserialize, Serialize};
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The embedded default policy, also shipped as `policy/default.toml`.
pub const DEFAULT_POLICY: &str = include_str!("../../policy/default.toml");

/// A policy file as written: see `policy/README.md` for every key. In code, start from
/// [`Policy::new`].
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Policy {
    /// The approved directories.
    #[serde(default)]
    pub roots: Vec<RootEntry>,
    /// How consent is decided.
    #[serde(default)]
    pub consent: ConsentPolicy,
    /// Grants that hold from the start of a session, without asking.
    #[serde(default)]
    pub grants: Vec<GrantEntry>,
    /// Server names pinned to the programs that may use them.
    #[serde(default)]
    pub servers: Vec<ServerPin>,
    /// Per-session limits.
    #[serde(default)]
    pub limits: Limits,
    /// The audit log.
    #[serde(default)]
    pub audit: AuditPolicy,
    /// What `fsbroker proxy` does with the protocol's eras.
    #[serde(default)]
    pub proxy: ProxyPolicy,
    /// What is kept before a change destroys content, so that it can be restored.
    #[serde(default)]
    pub recovery: RecoveryPolicy,
    /// The file this policy was read from ([`Policy::load`] sets it). A policy file beneath a
    /// writable root is refused: a server could give itself roots by editing it.
    #[serde(skip)]
    pub source: Option<std::path::PathBuf>,
}

/// Where a value stood in the policy text it was loaded from (byte ranges), for errors that
/// name its line. A policy built in code has none: spans are a loading detail, kept beside
/// the plain values an embedder builds.
type Span = Option<std::ops::Range<usize>>;

/// One `[[roots]]` entry: build one with [`RootEntry::new`] (or [`RootEntry::unnamed`]).
///
/// ```
/// use mcp_fsbroker::policy::RootEntry;
/// let root = RootEntry::new("proj", "/home/me/proj").writable();
/// assert_eq!(root.mount.as_deref(), Some("proj"));
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "RawRootEntry")]
pub struct RootEntry {
    /// The host directory: absolute, or relative to the working directory. [`Policy::load`]
    /// makes a relative path in a file relative to the file's directory instead.
    pub path: PathBuf,
    /// The mount name; default: derived from the directory's final component.
    pub mount: Option<String>,
    /// The display name in `roots/list`; default: the mount name.
    pub name: Option<String>,
    /// `read` (default) or `write`.
    pub access: Access,
    /// Server ids that see the root; `["*"]` (default) means every server.
    pub servers: Vec<String>,
    /// Where `path` and `mount` stood in the file.
    spans: (Span, Span),
    /// The path as written and the directory it was taken against, when a policy file gave
    /// a relative one: what a message about the root names.
    rebased: Option<(PathBuf, PathBuf)>,
}

impl RootEntry {
    /// The directory `path` under the mount name `mount`: read-only, seen by every server.
    pub fn new(mount: impl Into<String>, path: impl Into<PathBuf>) -> RootEntry {
        RootEntry {
            mount: Some(mount.into()),
            ..RootEntry::unnamed(path)
        }
    }

    /// The directory `path`, its mount name derived from its final component (see
    /// `policy/README.md`): read-only, seen by every server.
    pub fn unnamed(path: impl Into<PathBuf>) -> RootEntry {
        RootEntry {
            path: path.into(),
            mount: None,
            name: None,
            access: Access::Read,
            servers: all_servers(),
            spans: (None, None),
            rebased: None,
        }
    }

    /// Read-only (the default).
    pub fn read_only(mut self) -> RootEntry {
        self.access = Access::Read;
        self
    }

    /// Readable and writable (within what consent grants).
    pub fn writable(mut self) -> RootEntry {
        self.access = Access::Write;
        self
    }

    /// Shows the root as `name` in `roots/list`.
    pub fn display_name(mut self, name: impl Into<String>) -> RootEntry {
        self.name = Some(name.into());
        self
    }

    /// Only the servers `ids` see the root.
    pub fn servers<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> RootEntry {
        self.servers = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The span of `path` in the file it was loaded from.
    pub(crate) fn path_span(&self) -> Span {
        self.spans.0.clone()
    }

    /// The span of `mount` (else of `path`) in the file it was loaded from.
    pub(crate) fn mount_span(&self) -> Span {
        self.spans.1.clone().or_else(|| self.spans.0.clone())
    }
}

/// A `[[roots]]` entry as written, with the places of its values.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRootEntry {
    path: Spanned<PathBuf>,
    mount: Option<Spanned<String>>,
    name: Option<String>,
    #[serde(default = "default_access")]
    access: Access,
    #[serde(default = "all_servers")]
    servers: Vec<String>,
}

impl From<RawRootEntry> for RootEntry {
    fn from(r: RawRootEntry) -> RootEntry {
        let path_span = Some(r.path.span());
        let mount_span = r.mount.as_ref().map(Spanned::span);
        RootEntry {
            path: r.path.into_inner(),
            mount: r.mount.map(Spanned::into_inner),
            name: r.name,
            access: r.access,
            servers: r.servers,
            spans: (path_span, mount_span),
            rebased: None,
        }
    }
}

/// The `[limits]` section: every limit applies per server session. A host sets them in code
/// on the builder ([`BrokerBuilder::timeout`](crate::BrokerBuilder::timeout) and the methods
/// after it), which keeps them over every policy a reload brings; or it changes the fields
/// of `Limits::default()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
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
    /// Milliseconds a change waits in all for the locks of the files it changes, never past
    /// `timeout_ms`; then `CONCURRENCY_CONFLICT` `locked`.
    pub lock_wait_ms: NonZeroU64,
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
    /// CPU time, in milliseconds, a session's operations may spend per minute.
    pub cpu_ms_per_minute: NonZeroU64,
    /// Security violations (outside a root, no grant, revoked, malformed) within a minute
    /// that suspend a session.
    pub max_violations_per_minute: NonZeroU32,
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
            // Why five seconds: policy/README.md, at `lock_wait_ms`.
            lock_wait_ms: NonZeroU64::new(5_000).unwrap_or(NonZeroU64::MIN),
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
            // Why half a core: policy/README.md ("Why these budgets").
            cpu_ms_per_minute: NonZeroU64::new(30_000).unwrap_or(NonZeroU64::MIN),
            max_violations_per_minute: NonZeroU32::new(20).unwrap_or(NonZeroU32::MIN),
        }
    }
}

/// The `[audit]` section: in code, change the fields of `AuditPolicy::default()`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct AuditPolicy {
    /// Whether operations are logged.
    pub enabled: bool,
    /// The file to append JSON lines to; unset means stderr.
    pub file: Option<PathBuf>,
    /// Log a keyed hash instead of each path.
    pub redact_paths: bool,
    /// The hash key, 64 hex digits; unset means a random key per process.
    pub redact_key: Option<String>,
    /// Rotate `file` before a line would take it past this many bytes: FILE becomes FILE.1
    /// (FILE.1 becomes FILE.2, and so on); unset means never.
    pub rotate_bytes: Option<u64>,
    /// How many rotated files to keep (FILE.1 to FILE.keep), 1 to 1000.
    pub keep: u32,
}

impl Default for AuditPolicy {
    fn default() -> Self {
        AuditPolicy {
            enabled: true,
            file: None,
            redact_paths: false,
            redact_key: None,
            rotate_bytes: None,
            keep: 5,
        }
    }
}

fn default_access() -> Access {
    Access::Read
}
pub(crate) fn all_servers() -> Vec<String> {
    vec!["*".to_owned()]
}

impl Policy {
    /// An empty policy: no roots, no grants, the default limits, consent by the policy's
    /// default mode, and the audit log on (where it goes: see [`AuditPolicy`]). Add to it
    /// with the methods below; [`Broker::builder`](crate::Broker::builder) validates it, with
    /// the messages loading a file gives.
    ///
    /// ```
    /// use mcp_fsbroker::policy::{GrantEntry, Policy, RootEntry};
    /// use mcp_fsbroker::Access;
    /// let policy = Policy::new()
    ///     .root(RootEntry::new("proj", "/home/me/proj"))
    ///     .grant(GrantEntry::new("proj/docs", Access::Read));
    /// assert_eq!(policy.roots.len(), 1);
    /// ```
    pub fn new() -> Policy {
        Policy::default()
    }

    /// Adds a root.
    pub fn root(mut self, root: RootEntry) -> Policy {
        self.roots.push(root);
        self
    }

    /// Adds a standing grant.
    pub fn grant(mut self, grant: GrantEntry) -> Policy {
        self.grants.push(grant);
        self
    }

    /// Adds a consent rule, tried in order before the consent provider is asked.
    pub fn consent_rule(mut self, rule: ConsentRule) -> Policy {
        self.consent.rules.push(rule);
        self
    }

    /// Sets the consent mode (used when the broker has no consent provider of its own).
    pub fn consent_mode(mut self, mode: ConsentMode) -> Policy {
        self.consent.mode = Some(mode);
        self
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: Limits) -> Policy {
        self.limits = limits;
        self
    }

    /// Sets the `[audit]` section.
    pub fn audit(mut self, audit: AuditPolicy) -> Policy {
        self.audit = audit;
        self
    }
}

/// A policy file's identity and version (inode, size, modification time), to notice that it
/// changed or was replaced.
pub(crate) fn file_stamp(path: &Path) -> Option<(u64, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}
