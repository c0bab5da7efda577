//! What a root or a grant allows, and which servers a list of ids names: the words that
//! roots, the policy and grants share, kept in a leaf so that none of them depends on another
//! for them.

use serde::{Deserialize, Serialize};

/// What a root or a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Reading, listing, stat and watching.
    Read,
    /// Everything `Read` allows, plus changes.
    Write,
}

impl Access {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// Whether `server_id` is named by a list of ids where `*` means every server.
pub(crate) fn matches_server(list: &[String], server_id: &str) -> bool {
    list.iter().any(|s| s == "*" || s == server_id)
}
