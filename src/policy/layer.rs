//! The user's edits made at run time (the daemon's console): roots added, removed or switched
//! between read-only and writable, and grants the user asked to be remembered. The broker
//! lays them over every policy it puts in force, the one it starts with and each one a reload
//! brings, so that an edit outlives a reload of the file it was made over.

use super::{GrantEntry, Policy, RootEntry};
use crate::access::Access;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The user's run-time edits of the policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct Layer {
    /// Roots added, after the policy's own.
    pub added: Vec<AddedRoot>,
    /// Mount names of the policy's roots taken away.
    pub removed: Vec<String>,
    /// The access of a policy's root, by mount name, in place of the policy's.
    pub access: BTreeMap<String, Access>,
    /// Standing grants the user asked to keep, each for one server.
    pub remembered: Vec<Remembered>,
}

/// A root the user added.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AddedRoot {
    /// Its directory, absolute.
    pub path: PathBuf,
    /// Its mount name; derived from the directory's name when absent.
    #[serde(default)]
    pub mount: Option<String>,
    /// What it allows.
    pub access: Access,
}

/// A grant the user asked to keep for a server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Remembered {
    /// The server it is for (its session name without a `#N`).
    pub server: String,
    /// The path, in mount form.
    pub path: String,
    /// What it allows.
    pub access: Access,
    /// When it was given, in seconds since the Unix epoch.
    pub since: u64,
}

impl Layer {
    /// `policy` with these edits over it: removed roots gone, switched roots at their new
    /// access, added roots after the others, remembered grants after the policy's.
    pub(crate) fn apply(&self, mut policy: Policy) -> Policy {
        let mount = |r: &RootEntry| Policy::mount_of(r).map(|m| m.to_string()).ok();
        policy
            .roots
            .retain(|r| mount(r).is_none_or(|m| !self.removed.contains(&m)));
        for root in &mut policy.roots {
            if let Some(access) = mount(root).and_then(|m| self.access.get(&m).copied()) {
                root.access = access;
            }
        }
        for added in &self.added {
            let entry = match &added.mount {
                Some(m) => RootEntry::new(m.clone(), added.path.clone()),
                None => RootEntry::unnamed(added.path.clone()),
            };
            policy.roots.push(match added.access {
                Access::Write => entry.writable(),
                Access::Read => entry.read_only(),
            });
        }
        for r in &self.remembered {
            policy
                .grants
                .push(GrantEntry::new(r.path.clone(), r.access).servers([r.server.clone()]));
        }
        policy
    }

    /// Whether no edit is made.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Layer::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_lie_over_the_policy() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        let policy = Policy::new()
            .root(RootEntry::new("a", &a))
            .root(RootEntry::unnamed(&b));
        let mut layer = Layer::default();
        assert!(layer.is_empty());
        layer.removed.push("b".into());
        layer.access.insert("a".into(), Access::Write);
        layer.added.push(AddedRoot {
            path: c.clone(),
            mount: None,
            access: Access::Read,
        });
        layer.remembered.push(Remembered {
            server: "s".into(),
            path: "a/x".into(),
            access: Access::Read,
            since: 0,
        });
        let p = layer.apply(policy);
        let roots: Vec<_> = p.roots.iter().map(|r| (r.path.clone(), r.access)).collect();
        assert_eq!(roots, [(a, Access::Write), (c, Access::Read)]);
        assert_eq!(p.grants.len(), 1);
        assert_eq!(p.grants[0].servers, ["s"]);
        assert_eq!(p.grants[0].path, "a/x");
    }
}
