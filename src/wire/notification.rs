//! The notifications the broker sends on its own, typed for a host that acts on them rather
//! than relaying them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a notification of the broker's says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotificationKind {
    /// `notifications/files/changed`: a change under a watch, or the watch's end.
    FileChanged(FileChange),
    /// `notifications/roots/list_changed`: the roots this server sees changed (a reload, a
    /// root that moved away or came back).
    RootsListChanged,
}

impl NotificationKind {
    /// Reads the notification `method` with `params`; `None` for one the broker never sends.
    pub(crate) fn read(method: &str, params: Option<&Value>) -> Option<NotificationKind> {
        match method {
            "notifications/files/changed" => params
                .and_then(|p| FileChange::deserialize(p).ok())
                .map(NotificationKind::FileChanged),
            "notifications/roots/list_changed" => Some(NotificationKind::RootsListChanged),
            _ => None,
        }
    }
}

/// The params of `notifications/files/changed`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct FileChange {
    /// The watch it is for.
    pub watch_id: String,
    /// The real path that changed, in mount form; the watched path for `overflow` and
    /// `unwatched`.
    pub path: String,
    /// What happened.
    pub event: ChangeEvent,
    /// When it was seen, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Why a watch ended (`revoked`, `root_removed`, `moved_out`); only with `unwatched`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What happened at a watched path.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ChangeEvent {
    /// An entry appeared.
    Created,
    /// A file's content or metadata changed.
    Modified,
    /// An entry went away.
    Deleted,
    /// Changes were lost: the server should look again.
    Overflow,
    /// The watch ended; `reason` says why.
    Unwatched,
}
