//! What the journal tells of a change, and what restoring changes reports.

use super::journal::Line;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The name the journal gives the user's own changes (what a restore displaced) as their
/// `server` and `session`: a name servers may not take (see [`crate::session::reserved`]),
/// though what tells the user's changes apart is [`Change::by`], never this name.
pub(crate) const USER: &str = "user";

/// Who made a change: set by the broker from the path the change came by (a server's
/// request, or the user's restore or undo), never from a name a server could choose.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum By {
    /// A server session's request.
    #[default]
    Server,
    /// The user's restore or undo (what stood in the way, kept in turn).
    User,
}

/// One change a server made (or a restore made, with `by` `user`), as journaled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Change {
    /// Its id: what `fsbroker restore` takes.
    pub id: String,
    /// When, RFC 3339 in UTC.
    pub time: String,
    /// When, in milliseconds since the epoch.
    pub at: u64,
    /// Whether a server or the user made it: what tells the user's own changes apart,
    /// whatever a server named itself.
    #[serde(default)]
    pub by: By,
    /// The server id of the session that made it (`user` for a restore).
    pub server: String,
    /// The session: server id, process and serial.
    pub session: String,
    /// The digest of the session's [`Identity`](crate::Identity), when it was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// `files/write`, `files/create`, `files/delete`, `files/rename` or `restore`.
    pub method: String,
    /// The entry changed, in mount form (a rename's old path).
    pub path: String,
    /// A rename's new path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The root's directory when the change was made.
    pub root: PathBuf,
    /// What was kept of the content the change replaced or removed; `None` when it destroyed
    /// nothing, or nothing could be kept (see `not_kept`).
    pub kept: Option<Kept>,
    /// Why content the change destroyed was not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_kept: Option<String>,
    /// The entry's etag before the change (a directory's is its identity alone).
    pub etag_before: Option<String>,
    /// The entry's etag after it, at `to` for a rename; `None` when it is gone.
    pub etag_after: Option<String>,
    /// The restore that took this change back: the ids of the changes it made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_by: Option<Vec<String>>,
    /// Set when its kept content was pruned early to make room (`space`): it can no longer
    /// be restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned: Option<String>,
}

/// The names the interface uses for itself: `user` names the user's own changes in the
/// recovery journal (see [`Change::by`]).
const RESERVED: &[&str] = &["user"];

/// Whether `name` is, or would pass for, a name the interface uses for itself: compared
/// without surrounding spaces, without an instance suffix (`#2`) and without regard to case,
/// so that `User`, ` user ` and `user#2` are reserved as `user` is. No session takes one
/// (the broker refuses to open it); what tells the user's own actions apart is a field the
/// broker sets, and the reservation keeps the names people read from saying otherwise.
pub(crate) fn reserved_name(name: &str) -> bool {
    let mut base = name.trim();
    if let Some((head, n)) = base.rsplit_once('#')
        && !n.is_empty()
        && n.chars().all(|c| c.is_ascii_digit())
    {
        base = head.trim();
    }
    let base = base.to_lowercase();
    RESERVED.contains(&base.as_str())
}

impl Change {
    /// Who made it, for a person: `user` for the user's own changes, else the server's
    /// name, said to be a server's when it is one the interface keeps for itself (a journal
    /// written before such names were refused may hold one).
    pub fn who(&self) -> String {
        match self.by {
            By::User => USER.to_owned(),
            By::Server if reserved_name(&self.server) => {
                format!("{} (a server)", self.server)
            }
            By::Server => self.server.clone(),
        }
    }
}

/// What was kept of the content a change replaced or removed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kept {
    /// `link` (a hard link), `move` (the entry itself), `copy`, or `empty` (an empty
    /// directory, of which only the mode is kept).
    pub how: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub kind: String,
    /// What it costs the store, in bytes (content plus a little per entry).
    pub bytes: u64,
}

/// One change taken back.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Restored {
    /// The change.
    pub id: String,
    /// Where its content was put back, in mount form.
    pub path: String,
    /// The changes the restore made: what stood in the way, kept in turn.
    pub kept: Vec<String>,
}

/// A change `undo` left alone, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Conflict {
    /// The change.
    pub id: String,
    /// Its path, in mount form.
    pub path: String,
    /// What is in the way.
    pub why: String,
}

/// What `undo` did: the changes taken back, newest first, and those left alone.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Undone {
    /// Taken back, newest first.
    pub restored: Vec<Restored>,
    /// Left alone.
    pub conflicts: Vec<Conflict>,
}

/// The changes of a journal's lines with what became of them: restored ones marked, pruned
/// ones left out (marked, when it was for space). Oldest first.
pub(super) fn fold(lines: Vec<Line>) -> Vec<Change> {
    let mut out: Vec<Change> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut pruned = std::collections::HashSet::new();
    for line in lines {
        match line {
            Line::Change(mut c) => {
                // Lines journaled before `by` was written: only a restore's method is the
                // user's (a server's request is always a `files/` method), whatever the
                // server's name.
                if c.method == "restore" {
                    c.by = By::User;
                }
                at.insert(c.id.clone(), out.len());
                out.push(*c);
            }
            Line::Restored { restored, by, .. } => {
                if let Some(&i) = at.get(&restored) {
                    out[i].restored_by = Some(by);
                }
            }
            Line::Pruned {
                pruned: id, why, ..
            } if why == "space" => {
                if let Some(&i) = at.get(&id) {
                    out[i].pruned = Some(why);
                }
            }
            Line::Pruned { pruned: id, .. } => {
                pruned.insert(id);
            }
        }
    }
    out.retain(|c| !pruned.contains(&c.id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines journaled before `by` was written: a restore's is the user's, and a server's is
    /// the server's whatever its name (`user` too).
    #[test]
    fn who_made_a_change_is_never_read_from_a_name() {
        let line = |method: &str, server: &str| {
            format!(
                r#"{{"id":"c{method}","time":"","at":1,"server":"{server}","session":"{server}@1#0","method":"{method}","path":"m/x","root":"/r","kept":null,"etagBefore":null,"etagAfter":null}}"#
            )
        };
        let lines: Vec<Line> = [line("restore", "user"), line("files/write", "user")]
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let folded = fold(lines);
        assert_eq!(folded[0].by, By::User);
        assert_eq!(folded[0].who(), "user");
        assert_eq!(folded[1].by, By::Server);
        assert_eq!(folded[1].who(), "user (a server)");
        let v = serde_json::to_value(&folded[1]).unwrap();
        assert_eq!(v["by"], "server");
    }
}
