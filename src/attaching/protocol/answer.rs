//! The answers a client reads, typed: what `{"ok": true, ...}` carries for each op whose
//! answer a client looks into. A client that prints the daemon's answer as it came
//! (`--json`) reads it as a plain JSON value instead.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `status`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Sessions {
    /// Every live session as the daemon shows it (see `control.rs`): its grants, watches,
    /// uploads, counters, and for an attached one its processes.
    pub(crate) sessions: Vec<Value>,
}

/// `revoke`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Revoked {
    /// The grants taken back whole.
    pub(crate) revoked: Vec<RevokedGrant>,
    /// The parts carved out of wider grants, which stay for the rest.
    pub(crate) carved: Vec<RevokedGrant>,
}

/// A grant taken back, whole or in part.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RevokedGrant {
    /// The grant's path, in mount form.
    pub(crate) path: String,
    /// `read` or `write`.
    pub(crate) access: String,
    /// How it was granted.
    #[serde(default)]
    pub(crate) origin: Option<String>,
    /// The session it was taken from.
    pub(crate) server: String,
    /// For a part carved out of the grant, that part.
    #[serde(default)]
    pub(crate) carved_out: Option<String>,
}

/// `resume`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Resumed {
    /// Whether the session was suspended (it no longer is).
    pub(crate) resumed: bool,
}

/// `reload`'s answer: what the reload changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reloaded {
    /// The policy file read.
    pub(crate) policy: std::path::PathBuf,
    /// The roots in force afterwards, by mount name.
    pub(crate) roots: Vec<String>,
    /// The roots added or changed.
    pub(crate) roots_changed: Vec<String>,
    /// The roots removed.
    pub(crate) roots_removed: Vec<String>,
    /// The sessions told their roots changed.
    pub(crate) sessions_told: Vec<String>,
    /// How many watches ended with their roots.
    pub(crate) watches_ended: usize,
}

/// `console`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ConsoleLink {
    /// A fresh sign-in link, good once.
    pub(crate) url: String,
}

/// `log`'s (first) answer.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Events {
    /// The events kept, oldest first.
    pub(crate) events: Vec<Value>,
}

/// `attach`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Attached {
    /// The session the daemon opened: the name asked for, or `NAME#2`, ... while one of that
    /// name is live.
    pub(crate) session: String,
}
