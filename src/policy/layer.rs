//! The user's edits made at run time (the daemon's console): roots added, removed or switched
//! between read-only and writable, and grants the user asked to be remembered. The broker
//! lays them over every policy it puts in force, the one it starts with and each one a reload
//! brings, so that an edit outlives a reload of the file it was made over.

use super::{GrantEntry, Policy, RootEntry};
use crate::access::Access;
use std::path::PathBuf;

/// The user's run-time edits of the policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct Layer {
    /// Roots added, after the policy's own.
    pub added: Vec<AddedRoot>,
    /// The policy's roots taken away.
    pub removed: Vec<PolicyRoot>,
    /// The access of a policy's root in place of the policy's.
    pub access: Vec<(PolicyRoot, Access)>,
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

impl AddedRoot {
    /// Its mount name: the one given, else the one derived from the directory's name.
    pub(crate) fn mount(&self) -> Option<String> {
        let entry = match &self.mount {
            Some(m) => RootEntry::new(m.clone(), self.path.clone()),
            None => RootEntry::unnamed(self.path.clone()),
        };
        Policy::mount_of(&entry).ok().map(|m| m.to_string())
    }
}

/// A root of the policy's, as the user saw it when editing it: an edit holds only while the
/// policy's root of that mount name is still that directory, so that an edit made of one
/// directory never applies to another the policy later mounts under the name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PolicyRoot {
    /// Its mount name.
    pub mount: String,
    /// Its directory, resolved.
    pub path: PathBuf,
}

impl PolicyRoot {
    /// Whether `entry` is this root: the same mount name, the same directory.
    fn is(&self, entry: &RootEntry) -> bool {
        let real = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
        Policy::mount_of(entry).is_ok_and(|m| m.as_str() == self.mount)
            && real(&entry.path) == real(&self.path)
    }
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
    /// The program it was given to: only a session of that identity holds it. A grant
    /// remembered before identities were kept has none, and is held by no session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::identity::Recorded>,
}

impl Layer {
    /// `policy` with these edits over it: removed roots gone, switched roots at their new
    /// access, added roots after the others, remembered grants after the policy's.
    pub(crate) fn apply(&self, mut policy: Policy) -> Policy {
        policy
            .roots
            .retain(|r| !self.removed.iter().any(|gone| gone.is(r)));
        for root in &mut policy.roots {
            if let Some((_, access)) = self.access.iter().find(|(edited, _)| edited.is(root)) {
                root.access = *access;
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
            let mut grant = GrantEntry::new(r.path.clone(), r.access)
                .servers([r.server.clone()])
                .identity(
                    r.identity
                        .as_ref()
                        .map(|i| i.digest.clone())
                        .unwrap_or_default(),
                );
            grant.made_for = r.identity.clone();
            policy.grants.push(grant);
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
        for d in [&a, &b, &c] {
            std::fs::create_dir(d).unwrap();
        }
        let mut layer = Layer::default();
        assert!(layer.is_empty());
        let root = |mount: &str, path: &std::path::Path| PolicyRoot {
            mount: mount.into(),
            path: path.to_owned(),
        };
        layer.removed.push(root("b", &b));
        layer.access.push((root("a", &a), Access::Write));
        // Made of another directory once mounted as `a`: not this one's.
        layer.access.push((root("a", &c), Access::Read));
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
            identity: None,
        });
        let p = layer.apply(policy.clone());
        let roots: Vec<_> = p.roots.iter().map(|r| (r.path.clone(), r.access)).collect();
        assert_eq!(
            roots,
            [(a.clone(), Access::Write), (c.clone(), Access::Read)]
        );
        // The policy now mounts another directory as `b`: the removal was of the old one.
        let moved = Policy::new()
            .root(RootEntry::new("a", &a))
            .root(RootEntry::new("b", &c));
        let p = layer.apply(moved);
        assert_eq!(p.roots.len(), 3, "{:?}", p.roots);
        assert_eq!(p.grants.len(), 1);
        assert_eq!(p.grants[0].servers, ["s"]);
        assert_eq!(p.grants[0].path, "a/x");
    }
}
