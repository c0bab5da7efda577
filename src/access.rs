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

/// Whether `server_id` is named by a list of ids where `*` means every server. A daemon names
/// a second live session of one server `NAME#2` (then `#3`, ...): it is still that server, so
/// what names `NAME` names it too. A server could call itself `NAME` as easily, so this gives
/// no server more than its own choice of name already does.
pub(crate) fn matches_server(list: &[String], server_id: &str) -> bool {
    let base = instance_of(server_id);
    list.iter()
        .any(|s| s == "*" || s == server_id || Some(s.as_str()) == base)
}

/// `NAME` for a session id `NAME#N`, N a number of 2 or more written without a leading zero.
fn instance_of(server_id: &str) -> Option<&str> {
    let (base, n) = server_id.rsplit_once('#')?;
    let numbered = !base.is_empty()
        && n.len() <= 6
        && n.bytes().all(|b| b.is_ascii_digit())
        && !n.starts_with('0')
        && n.parse::<u32>().is_ok_and(|n| n >= 2);
    numbered.then_some(base)
}

#[cfg(test)]
mod tests {
    use super::matches_server;

    #[test]
    fn a_numbered_instance_is_its_server_and_nothing_else_is() {
        let list = ["editor".to_owned()];
        for id in ["editor", "editor#2", "editor#17"] {
            assert!(matches_server(&list, id), "{id}");
        }
        for id in [
            "editor#1",
            "editor#0",
            "editor#02",
            "editor#",
            "editor#x",
            "editorx#2",
            "#2",
        ] {
            assert!(!matches_server(&list, id), "{id}");
        }
    }
}
