//! The policy: roots, which servers see them, consent rules, standing grants, limits, audit.
//!
//! Policies are TOML files ([`Policy::load`]) or built in memory by the command line. Loading
//! refuses an unknown key or a bad value with the file, line and key named; the types below
//! use `deny_unknown_fields` and validating newtypes so that a loaded [`Policy`] is valid.

use crate::path::{MountName, MountPath, RequestPath};
use crate::root::Access;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The embedded default policy, also shipped as `policy/default.toml`.
pub const DEFAULT_POLICY: &str = include_str!("../policy/default.toml");

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
}

/// One `[[roots]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootEntry {
    /// The host directory (absolute, or relative to the working directory).
    pub path: Spanned<PathBuf>,
    /// The mount name; default: the directory's final component.
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

/// The `[consent]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentConfig {
    /// The provider for requests that no rule decides; unset means `tty` where a controlling
    /// terminal exists, else `deny` (in `fsbroker proxy`, `elicit`).
    pub mode: Option<ConsentMode>,
    /// With mode `elicit`, who answers when the host cannot show a form; unset means `tty`
    /// where a controlling terminal exists, else `deny`.
    #[serde(default, deserialize_with = "fallback_mode")]
    pub fallback: Option<ConsentMode>,
    /// Seconds to wait for a decision before denying.
    #[serde(default = "default_consent_timeout")]
    pub timeout_secs: NonZeroU64,
    /// Rules tried in order before the provider is asked.
    #[serde(default)]
    pub rules: Vec<ConsentRule>,
}

impl Default for ConsentConfig {
    fn default() -> Self {
        ConsentConfig {
            mode: None,
            fallback: None,
            timeout_secs: default_consent_timeout(),
            rules: Vec::new(),
        }
    }
}

/// How consent requests that no rule decides are answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ConsentMode {
    /// Approve every path inside the roots.
    Auto,
    /// Deny everything.
    Deny,
    /// Ask on the controlling terminal (never on stdin).
    Tty,
    /// Run a program that reads the request as JSON on stdin and answers on stdout.
    Command(PathBuf),
    /// Ask through the host's `elicitation/create` (proxy only).
    Elicit,
}

impl TryFrom<String> for ConsentMode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "auto" => Ok(ConsentMode::Auto),
            "deny" => Ok(ConsentMode::Deny),
            "tty" => Ok(ConsentMode::Tty),
            "elicit" => Ok(ConsentMode::Elicit),
            _ => match s.strip_prefix("command:") {
                Some(p) if !p.is_empty() => Ok(ConsentMode::Command(PathBuf::from(p))),
                _ => Err(format!(
                    "unknown consent mode {s:?}: expected auto, deny, tty, elicit or command:PROGRAM"
                )),
            },
        }
    }
}

impl From<ConsentMode> for String {
    fn from(m: ConsentMode) -> String {
        m.to_string()
    }
}

impl fmt::Display for ConsentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsentMode::Auto => f.write_str("auto"),
            ConsentMode::Deny => f.write_str("deny"),
            ConsentMode::Tty => f.write_str("tty"),
            ConsentMode::Elicit => f.write_str("elicit"),
            ConsentMode::Command(p) => write!(f, "command:{}", p.display()),
        }
    }
}

/// A `[[consent.rules]]` entry: decides consent for matching paths without asking.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentRule {
    /// Server ids the rule applies to; `["*"]` (default) means every server.
    #[serde(default = "all_servers")]
    pub servers: Vec<String>,
    /// Mount-form paths; the rule applies to these and everything beneath them.
    pub paths: Vec<Spanned<String>>,
    /// `allow` or `deny`.
    pub decision: Decision,
    /// For `allow`: the most the rule grants (default: what the root allows).
    pub access: Option<Access>,
}

impl ConsentRule {
    /// Whether one of the rule's paths is `path` or lies above it.
    pub fn covers(&self, path: &MountPath) -> bool {
        self.paths
            .iter()
            .any(|p| match RequestPath::parse(p.get_ref()) {
                Ok(RequestPath::Mount { mount, rel }) => {
                    mount == path.mount.as_str() && path.rel.starts_with(&rel)
                }
                _ => false,
            })
    }
}

/// A rule's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Approve without asking.
    Allow,
    /// Deny without asking.
    Deny,
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
            requests_per_second: NonZeroU32::new(100).unwrap_or(NonZeroU32::MIN),
            burst: NonZeroU32::new(200).unwrap_or(NonZeroU32::MIN),
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
/// `consent.fallback`: any mode but `elicit`, since it answers when eliciting cannot.
fn fallback_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ConsentMode>, D::Error> {
    match ConsentMode::deserialize(d)? {
        ConsentMode::Elicit => Err(serde::de::Error::custom(
            "must be auto, deny, tty or command:PROGRAM: it answers when the host cannot elicit",
        )),
        mode => Ok(Some(mode)),
    }
}

fn default_consent_timeout() -> NonZeroU64 {
    NonZeroU64::new(120).unwrap_or(NonZeroU64::MIN)
}

/// A policy that could not be loaded: the file, the line, the key and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file (or `<command line>`, `<default>`).
    pub file: String,
    /// The 1-based line, where known.
    pub line: Option<usize>,
    /// The dotted key, such as `limits.timeout_ms` or `roots[1].mount`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PolicyError {}

impl Policy {
    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            file: path.display().to_string(),
            line: None,
            key: String::new(),
            message: format!("cannot read policy: {e}"),
        })?;
        Policy::parse(&text, &path.display().to_string())
    }

    /// The embedded default policy.
    pub fn embedded_default() -> Result<Policy, PolicyError> {
        Policy::parse(DEFAULT_POLICY, "<default>")
    }

    /// Parses and validates policy text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Policy, PolicyError> {
        let line_of = |offset: usize| text.get(..offset).map(|t| t.matches('\n').count() + 1);
        let de = toml::Deserializer::parse(text).map_err(|e| PolicyError {
            file: file.to_owned(),
            line: e.span().and_then(|s| line_of(s.start)),
            key: String::new(),
            message: e.message().to_owned(),
        })?;
        let policy: Policy = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            PolicyError {
                file: file.to_owned(),
                line: inner.span().and_then(|s| line_of(s.start)),
                key: if key == "." { String::new() } else { key },
                message: inner.message().to_owned(),
            }
        })?;
        policy
            .validate()
            .map_err(|(key, span, message)| PolicyError {
                file: file.to_owned(),
                line: span
                    .or_else(|| key_span(text, &key))
                    .and_then(|s| line_of(s.start)),
                key,
                message,
            })?;
        Ok(policy)
    }

    /// Validates a policy changed in memory (such as by command-line flags); `file` names
    /// its origin in errors.
    pub fn revalidate(&self, file: &str) -> Result<(), PolicyError> {
        self.validate().map_err(|(key, _, message)| PolicyError {
            file: file.to_owned(),
            line: None,
            key,
            message,
        })
    }

    /// The mount name of root entry `root`: its `mount`, or the directory's final component.
    pub fn mount_of(root: &RootEntry) -> Result<MountName, String> {
        match &root.mount {
            Some(m) => MountName::new(m.get_ref()),
            None => {
                let abs = std::path::absolute(root.path.get_ref())
                    .map_err(|e| format!("cannot make the root path absolute: {e}"))?;
                let cleaned = path_clean::clean(&abs);
                let last = cleaned
                    .file_name()
                    .and_then(|n| n.to_str())
                    .ok_or("the root has no final component to name its mount; set mount")?;
                MountName::new(last).map_err(|e| format!("{e}; set mount"))
            }
        }
    }

    /// Checks what types alone cannot: root directories exist, mounts are unique, rule and
    /// grant paths are mount-form paths of declared roots, limits are consistent.
    fn validate(&self) -> Result<(), (String, Option<std::ops::Range<usize>>, String)> {
        let mut mounts: Vec<MountName> = Vec::new();
        for (i, r) in self.roots.iter().enumerate() {
            let mount = Policy::mount_of(r).map_err(|m| {
                let span = r.mount.as_ref().map_or(r.path.span(), |m| m.span());
                (format!("roots[{i}].mount"), Some(span), m)
            })?;
            match std::fs::metadata(r.path.get_ref()) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err((
                        format!("roots[{i}].path"),
                        Some(r.path.span()),
                        "not a directory".into(),
                    ));
                }
                Err(e) => {
                    return Err((
                        format!("roots[{i}].path"),
                        Some(r.path.span()),
                        format!("cannot open root directory: {e}"),
                    ));
                }
            }
            if mounts.contains(&mount) {
                let span = r.mount.as_ref().map_or(r.path.span(), |m| m.span());
                return Err((
                    format!("roots[{i}].mount"),
                    Some(span),
                    format!("mount name {mount} is used by another root"),
                ));
            }
            mounts.push(mount);
        }
        let check_path = |key: String, p: &Spanned<String>| match RequestPath::parse(p.get_ref()) {
            Ok(RequestPath::Mount { mount, .. }) if mounts.iter().any(|m| m.as_str() == mount) => {
                Ok(())
            }
            Ok(_) => Err((
                key,
                Some(p.span()),
                "must be a mount-form path (MOUNT/REL) of a root declared in this policy".into(),
            )),
            Err(e) => Err((key, Some(p.span()), e.message().to_owned())),
        };
        for (i, rule) in self.consent.rules.iter().enumerate() {
            for (j, p) in rule.paths.iter().enumerate() {
                check_path(format!("consent.rules[{i}].paths[{j}]"), p)?;
            }
        }
        for (i, g) in self.grants.iter().enumerate() {
            check_path(format!("grants[{i}].path"), &g.path)?;
        }
        let l = &self.limits;
        let caps: [(&str, u64, u64); 11] = [
            ("limits.timeout_ms", l.timeout_ms.get(), 86_400_000),
            (
                "limits.max_chunk_bytes",
                l.max_chunk_bytes.get() as u64,
                256 << 20,
            ),
            (
                "limits.max_line_bytes",
                l.max_line_bytes.get() as u64,
                1 << 30,
            ),
            (
                "limits.max_list_page",
                l.max_list_page.get() as u64,
                100_000,
            ),
            ("limits.max_in_flight", l.max_in_flight.get() as u64, 1024),
            ("limits.max_uploads", l.max_uploads.get() as u64, 1024),
            ("limits.max_watches", l.max_watches.get() as u64, 65_536),
            ("limits.upload_idle_secs", l.upload_idle_secs.get(), 86_400),
            (
                "limits.max_kernel_watches",
                l.max_kernel_watches.get() as u64,
                1 << 20,
            ),
            (
                "limits.watch_coalesce_ms",
                l.watch_coalesce_ms.get(),
                10_000,
            ),
            ("limits.watch_queue", l.watch_queue.get() as u64, 65_536),
        ];
        for (key, value, cap) in caps {
            if value > cap {
                return Err((key.into(), None, format!("must be at most {cap}")));
            }
        }
        if l.chunk_bytes > l.max_chunk_bytes {
            return Err((
                "limits.chunk_bytes".into(),
                None,
                "must not exceed limits.max_chunk_bytes".into(),
            ));
        }
        if l.list_page > l.max_list_page {
            return Err((
                "limits.list_page".into(),
                None,
                "must not exceed limits.max_list_page".into(),
            ));
        }
        if let Some(k) = &self.audit.redact_key
            && (k.len() != 64 || !k.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err((
                "audit.redact_key".into(),
                None,
                "must be 64 hex digits".into(),
            ));
        }
        Ok(())
    }
}

/// The position of a `section.key` in policy text, for errors found after deserialising
/// (such as two limits that contradict each other), whose types keep no spans.
fn key_span(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    #[derive(Deserialize)]
    struct Sections {
        #[serde(default)]
        limits: std::collections::BTreeMap<String, Spanned<toml::Value>>,
        #[serde(default)]
        audit: std::collections::BTreeMap<String, Spanned<toml::Value>>,
    }
    let (section, name) = key.split_once('.')?;
    if let Ok(sections) = toml::from_str::<Sections>(text) {
        let table = match section {
            "limits" => &sections.limits,
            "audit" => &sections.audit,
            _ => return None,
        };
        return table.get(name).map(Spanned::span);
    }
    // A value too large for a TOML value (an integer past i64) still has a line: find the key
    // in its section by reading the text.
    let mut in_section = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if t.starts_with('[') {
            in_section = t.trim_matches(|c| c == '[' || c == ']').trim() == section;
        } else if in_section
            && t.strip_prefix(name)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            return Some(offset..offset + line.len());
        }
        offset += line.len();
    }
    None
}

/// The effective configuration as TOML-like text, for `fsbroker check-policy`.
pub fn describe(policy: &Policy) -> String {
    let mut out = String::new();
    for r in &policy.roots {
        let mount = Policy::mount_of(r)
            .map(|m| m.to_string())
            .unwrap_or_default();
        let abs = std::fs::canonicalize(r.path.get_ref())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| r.path.get_ref().display().to_string());
        out.push_str(&format!(
            "[[roots]]\npath = {abs:?}\nmount = {mount:?}\nname = {:?}\naccess = {:?}\nservers = {:?}\n\n",
            r.name.clone().unwrap_or_else(|| mount.clone()),
            r.access.as_str(),
            r.servers,
        ));
    }
    let mode = policy
        .consent
        .mode
        .as_ref()
        .map_or("unset (tty with a terminal, else deny)".to_owned(), |m| {
            m.to_string()
        });
    let fallback = policy
        .consent
        .fallback
        .as_ref()
        .map_or("unset (tty with a terminal, else deny)".to_owned(), |m| {
            m.to_string()
        });
    out.push_str(&format!(
        "[consent]\nmode = {mode:?}\nfallback = {fallback:?}\ntimeout_secs = {}\nrules = {}\n\n",
        policy.consent.timeout_secs,
        policy.consent.rules.len()
    ));
    for g in &policy.grants {
        out.push_str(&format!(
            "[[grants]]\nservers = {:?}\npath = {:?}\naccess = {:?}\n\n",
            g.servers,
            g.path.get_ref(),
            g.access.as_str()
        ));
    }
    out.push_str(
        &toml::to_string(&LimitsSection {
            limits: &policy.limits,
        })
        .unwrap_or_default(),
    );
    out.push('\n');
    out.push_str(
        &toml::to_string(&AuditSection {
            audit: &policy.audit,
        })
        .unwrap_or_default(),
    );
    out
}

#[derive(Serialize)]
struct LimitsSection<'a> {
    limits: &'a Limits,
}

#[derive(Serialize)]
struct AuditSection<'a> {
    audit: &'a AuditConfig,
}

/// A policy file's identity and version (inode, size, modification time), to notice that it
/// changed or was replaced.
pub fn file_stamp(path: &Path) -> Option<(u64, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// Whether `server_id` is named by a list of ids where `*` means every server.
pub fn matches_server(list: &[String], server_id: &str) -> bool {
    list.iter().any(|s| s == "*" || s == server_id)
}
