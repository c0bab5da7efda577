//! Where a keep works and under what terms: the arguments that travel together through
//! keeping, removing and putting back.

use super::RecoveryStore;
use crate::deadline::Deadline;
use crate::policy::{RecoveryPolicy, Unkept};
use crate::root::Granted;
use cap_std::fs::Dir;

/// Where an entry is: the directory handle that holds it and its name there. A keep reads,
/// links, moves and copies the entry through this, never through a path.
#[derive(Clone, Copy)]
pub(super) struct Place<'a> {
    /// The directory that holds the entry.
    pub parent: &'a Dir,
    /// The entry's name in it.
    pub name: &'a str,
}

impl<'a> Place<'a> {
    /// The place of `g`'s entry (`.`, the handle itself, for a root, which no caller keeps).
    pub(super) fn of(g: &'a Granted) -> Place<'a> {
        Place {
            parent: g.parent(),
            name: g.name().unwrap_or("."),
        }
    }
}

/// The terms one keep works under: the store's policy as it is when the keep starts, what
/// becomes of content past `copy_max_bytes`, and the operation's deadline.
pub(super) struct Terms {
    /// The store's bounds.
    pub policy: RecoveryPolicy,
    /// Whether content too large to copy lets the change proceed unkept.
    pub unkept: Unkept,
    /// When the operation must give up.
    pub deadline: Deadline,
}

impl Terms {
    /// The terms of a keep in `store` starting now: its policy as it is now, `unkept` deciding
    /// content too large to copy (`None`: as the policy says), within `deadline`.
    pub(super) fn now(store: &RecoveryStore, unkept: Option<Unkept>, deadline: Deadline) -> Terms {
        let policy = store.policy();
        Terms {
            unkept: unkept.unwrap_or(policy.unkept),
            policy,
            deadline,
        }
    }
}
