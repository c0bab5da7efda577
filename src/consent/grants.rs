//! The grants a session holds. A grant covers a mount-form path and everything beneath it,
//! with `read` or `write` access. Revocation leaves a mark, so that an operation under a
//! revoked path fails with `revoked` rather than `no_consent` until a new grant lifts the
//! mark.

use crate::access::Access;
use crate::error::{Error, Reason, Result};
use crate::path::MountPath;
use std::time::SystemTime;

/// One grant held by a session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    /// The path granted, with everything beneath it.
    pub path: MountPath,
    /// What it allows.
    pub access: Access,
    /// Where it comes from: the policy's standing grants are kept across sessions and
    /// replaced at a reload; the others come from a consent request.
    pub origin: GrantOrigin,
    /// When it was given.
    pub since: SystemTime,
}

impl Grant {
    /// A grant given now.
    pub(crate) fn new(path: MountPath, access: Access, origin: GrantOrigin) -> Grant {
        Grant {
            path,
            access,
            origin,
            since: SystemTime::now(),
        }
    }

    fn standing(&self) -> bool {
        self.origin == GrantOrigin::Standing
    }
}

/// Where a grant comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum GrantOrigin {
    /// A standing grant of the policy (`[[grants]]`), held from the start of every matching
    /// session.
    Standing,
    /// A consent rule (`[[consent.rules]]`) allowed it without asking anyone.
    Rule,
    /// Consent mode `auto` allowed it without asking anyone.
    Auto,
    /// The consent provider (the user, a program, an embedder's dialog) approved it.
    Consented,
    /// The provider approved a place inside the path the server asked for.
    Narrowed,
}

/// The grants of one session, with revocation marks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
    grants: Vec<Grant>,
    revoked: Vec<MountPath>,
}

/// What one revocation took back.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// The grants removed whole.
    pub gone: Vec<Grant>,
    /// The wider grants the revoked path was carved out of: they stay, without it.
    pub carved: Vec<Grant>,
}

/// Most grants one session may hold; consent requests beyond it replace nothing and fail.
pub const MAX_GRANTS: usize = 4096;

impl Grants {
    /// Checks that `path` is covered for `need`.
    ///
    /// Errors: `PERMISSION_DENIED` with `revoked` under a revocation mark, `read_only` when
    /// only read grants cover a write, `no_consent` otherwise.
    pub(crate) fn check(&self, path: &MountPath, need: Access) -> Result<()> {
        if self.revoked.iter().any(|r| path.starts_with(r)) {
            return Err(Error::denied(Reason::Revoked).with_path(path.to_string()));
        }
        let best = self
            .grants
            .iter()
            .filter(|g| path.starts_with(&g.path))
            .map(|g| g.access)
            .max();
        match best {
            Some(a) if a >= need => Ok(()),
            Some(_) => Err(Error::denied(Reason::ReadOnly).with_path(path.to_string())),
            None => Err(Error::denied(Reason::NoConsent).with_path(path.to_string())),
        }
    }

    /// Whether `path` lies on the way to a grant: some grant is at or beneath it. A walk may
    /// look at such a place to reach the grant (the grant itself says it is there).
    pub(crate) fn leads_to_grant(&self, path: &MountPath) -> bool {
        !self.revoked.iter().any(|r| path.starts_with(r))
            && self.grants.iter().any(|g| g.path.starts_with(path))
    }

    /// Whether a grant lies in the root mounted as `mount`.
    pub(crate) fn any_in(&self, mount: &crate::path::MountName) -> bool {
        self.grants.iter().any(|g| g.path.mount == *mount)
    }

    /// Adds a grant, lifting revocation marks at or beneath it. Returns false when the
    /// session already holds [`MAX_GRANTS`] grants.
    pub(crate) fn add(&mut self, grant: Grant) -> bool {
        self.revoked.retain(|r| !r.starts_with(&grant.path));
        if let Some(g) = self
            .grants
            .iter_mut()
            .find(|g| g.path == grant.path && g.standing() == grant.standing())
        {
            g.access = g.access.max(grant.access);
            return true;
        }
        if self.grants.len() >= MAX_GRANTS {
            return false;
        }
        self.grants.push(grant);
        true
    }

    /// Revokes grants at or beneath `path` (all grants when `None`) and marks `path` revoked.
    /// Returns the grants removed, and the wider grants `path` was carved out of (they stay,
    /// without it).
    pub(crate) fn revoke(&mut self, path: Option<&MountPath>) -> Taken {
        // A revocation under a wider grant holds only by its mark. With no room left for
        // one, the grants that cover the path go too: less access than asked to take back,
        // never more left.
        let marked =
            path.is_none_or(|p| self.revoked.len() < MAX_GRANTS || self.revoked.contains(p));
        let (gone, kept) = std::mem::take(&mut self.grants).into_iter().partition(|g| {
            path.is_none_or(|p| g.path.starts_with(p) || (!marked && p.starts_with(&g.path)))
        });
        self.grants = kept;
        // The grants kept that cover `path` hold on without it, by its mark: the user is told
        // what was carved out of what, rather than that nothing matched.
        let carved = match path {
            Some(p) if marked => self
                .grants
                .iter()
                .filter(|g| p.starts_with(&g.path))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        match path {
            None => {
                let mounts: Vec<MountPath> = gone
                    .iter()
                    .map(|g| MountPath {
                        mount: g.path.mount.clone(),
                        rel: crate::path::RelPath::root(),
                    })
                    .collect();
                for m in mounts {
                    if !self.revoked.contains(&m) {
                        self.revoked.push(m);
                    }
                }
            }
            Some(p) => {
                if self.revoked.len() < MAX_GRANTS && !self.revoked.contains(p) {
                    self.revoked.push(p.clone());
                }
            }
        }
        Taken { gone, carved }
    }

    /// The revocation marks strictly beneath `path`: the parts carved out of a grant on it.
    pub(crate) fn carved_out_of(&self, path: &MountPath) -> Vec<MountPath> {
        self.revoked
            .iter()
            .filter(|r| r.starts_with(path) && *r != path)
            .cloned()
            .collect()
    }

    /// Removes the standing grants, returning them (a reload puts the new ones in).
    pub(crate) fn remove_standing(&mut self) -> Vec<Grant> {
        let (standing, rest) = std::mem::take(&mut self.grants)
            .into_iter()
            .partition(Grant::standing);
        self.grants = rest;
        standing
    }

    /// The grants held, in the order they were given.
    pub(crate) fn held(&self) -> &[Grant] {
        &self.grants
    }

    /// How many more grants the session may hold.
    pub(crate) fn room(&self) -> usize {
        MAX_GRANTS.saturating_sub(self.grants.len())
    }
}
