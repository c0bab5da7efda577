//! The `[recovery]` section: what the broker keeps before a server's change destroys content,
//! where, and for how long.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[recovery]` section: in code, change the fields of `RecoveryPolicy::default()`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct RecoveryPolicy {
    /// Whether content a server's change replaces or removes is kept, and every change
    /// journaled, so that it can be restored.
    pub enabled: bool,
    /// The store: unset means `$XDG_STATE_HOME/fsbroker/recovery` (else
    /// `~/.local/state/fsbroker/recovery`). No root may hold it or lie within it. Read when
    /// the broker starts; a reload does not move it.
    pub dir: Option<PathBuf>,
    /// The most the store holds, in bytes. Past it, the oldest changes older than
    /// `min_keep_hours` are pruned first; when none is, the change is refused.
    pub max_bytes: u64,
    /// Changes older than this many days are pruned.
    pub keep_days: u32,
    /// Changes younger than this many hours are never pruned to make room: a server that
    /// fills the store is refused instead of pushing other changes out.
    pub min_keep_hours: u32,
    /// The most copied to keep one change whose content is on another filesystem than the
    /// store (the same filesystem needs no copy: a link or a rename keeps it).
    pub copy_max_bytes: u64,
    /// What happens to a change whose content is past `copy_max_bytes`: it proceeds, marked
    /// not recoverable, or it is refused (`QUOTA_EXCEEDED`, reason `not_recoverable`).
    pub unkept: Unkept,
}

/// What happens to a change whose content cannot be kept because it is too large to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Unkept {
    /// The change proceeds; the journal marks it not recoverable.
    #[default]
    Proceed,
    /// The change is refused with `QUOTA_EXCEEDED`, reason `not_recoverable`.
    Refuse,
}

impl Default for RecoveryPolicy {
    fn default() -> Self {
        RecoveryPolicy {
            enabled: true,
            dir: None,
            max_bytes: 4 << 30,
            keep_days: 30,
            min_keep_hours: 24,
            copy_max_bytes: 64 << 20,
            unkept: Unkept::Proceed,
        }
    }
}

impl RecoveryPolicy {
    /// The store's directory: `dir`, else the user's state directory's (`XDG_STATE_HOME`,
    /// else `.local/state` in `HOME`, else in the home the password database names: service
    /// managers start processes without `HOME`).
    pub fn store_dir(&self) -> Option<PathBuf> {
        let state = || {
            xdg_dir("XDG_STATE_HOME", ".local/state").or_else(|| {
                passwd_home(rustix::process::geteuid().as_raw()).map(|h| h.join(".local/state"))
            })
        };
        self.dir
            .clone()
            .or_else(|| state().map(|s| s.join("fsbroker/recovery")))
    }
}

/// The home directory `/etc/passwd` gives `uid`. (Users known only to a directory service
/// are not there.)
pub(crate) fn passwd_home(uid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let home = fields.get(5)?;
        (fields.get(2)?.parse::<u32>().ok()? == uid && home.starts_with('/'))
            .then(|| PathBuf::from(home))
    })
}

/// A directory of the XDG base directory specification: `$VAR`, else `~/FALLBACK`. Empty
/// or relative values count as unset, as the specification says.
pub(crate) fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute(var).or_else(|| absolute("HOME").map(|h| h.join(fallback)))
}
