//! The grants a session holds. A grant covers a mount-form path and everything beneath it,
//! with `read` or `write` access. Revocation leaves a mark, so that an operation under a
//! revoked path fails with `revoked` rather than `no_consent` until a new grant lifts the
//! mark.

use crate::access::Access;
use crate::error::{Error, Reason, Result};
use crate::path::MountPath;
use std::time::{Duration, SystemTime};

/// How long a grant the user gives holds. Every grant ends with its session at the latest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Lifetime {
    /// For the next request only: the grant ends when the first request that its session
    /// begins after it was given (other than `ping`, `files/consent`, `roots/list` and
    /// `files/unwatch`, which use no grant) has ended, answered or withdrawn, whether or
    /// not that request used it.
    Once,
    /// As long as the session lasts.
    #[default]
    Session,
    /// For this long from when it was given (and never past the session): checked at every
    /// use against the monotonic clock and the wall clock both, so that it ends when
    /// either says the time has passed (a machine suspended in between included).
    For(Duration),
}

/// When a grant ends, before its session does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ends {
    /// With its session (or never, for a standing grant).
    WithSession,
    /// At this instant of the runtime's clock, or at this time of the wall clock, whichever
    /// comes first.
    At(tokio::time::Instant, SystemTime),
    /// Once the first request begun after request number `.0` has completed (see
    /// [`Lifetime::Once`]); `u64::MAX` until the grant is added.
    AfterRequest(u64),
}

impl Ends {
    /// Whether a grant that ends so still holds now.
    fn holds(self) -> bool {
        match self {
            Ends::At(mono, wall) => tokio::time::Instant::now() < mono && SystemTime::now() < wall,
            Ends::WithSession | Ends::AfterRequest(_) => true,
        }
    }

    /// How long it lasts, to compare two grants: the rank of its kind, and for a timed one
    /// its end.
    fn rank(self) -> (u8, Option<tokio::time::Instant>) {
        match self {
            Ends::AfterRequest(_) => (0, None),
            Ends::At(mono, _) => (1, Some(mono)),
            Ends::WithSession => (2, None),
        }
    }
}

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
    /// When it ends, before its session does.
    pub ends: Ends,
}

impl Grant {
    /// A grant given now, for as long as its session.
    pub(crate) fn new(path: MountPath, access: Access, origin: GrantOrigin) -> Grant {
        Grant::lasting(path, access, origin, Lifetime::Session)
    }

    /// A grant given now, for `lifetime`.
    pub(crate) fn lasting(
        path: MountPath,
        access: Access,
        origin: GrantOrigin,
        lifetime: Lifetime,
    ) -> Grant {
        let since = SystemTime::now();
        let ends = match lifetime {
            Lifetime::Session => Ends::WithSession,
            Lifetime::Once => Ends::AfterRequest(u64::MAX),
            // A time too far to be told holds with the session: it cannot end sooner.
            Lifetime::For(d) => match (
                tokio::time::Instant::now().checked_add(d),
                since.checked_add(d),
            ) {
                (Some(mono), Some(wall)) => Ends::At(mono, wall),
                _ => Ends::WithSession,
            },
        };
        Grant {
            path,
            access,
            origin,
            since,
            ends,
        }
    }

    fn standing(&self) -> bool {
        self.origin == GrantOrigin::Standing
    }

    /// Whether it still holds (its time has not run out).
    pub(crate) fn holds(&self) -> bool {
        self.ends.holds()
    }

    /// When it ends by the wall clock, for a timed grant.
    pub(crate) fn expires(&self) -> Option<SystemTime> {
        match self.ends {
            Ends::At(_, wall) => Some(wall),
            _ => None,
        }
    }

    /// Whether it holds for the next request only.
    pub(crate) fn once(&self) -> bool {
        matches!(self.ends, Ends::AfterRequest(_))
    }

    /// Whether `self` says all `other` says about the same path: as much access, for at
    /// least as long (a standing grant outlasting a session's).
    pub(crate) fn covers(&self, other: &Grant) -> bool {
        let lasts = |g: &Grant| (g.standing(), g.ends.rank());
        self.path == other.path && self.access >= other.access && lasts(self) >= lasts(other)
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
    /// The number of the last request begun that may use a grant (see [`Lifetime::Once`]).
    begun: u64,
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
        // A grant whose time has run out holds nothing, whatever removed it or not yet.
        let best = self
            .grants
            .iter()
            .filter(|g| g.holds() && path.starts_with(&g.path))
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
            && self
                .grants
                .iter()
                .any(|g| g.holds() && g.path.starts_with(path))
    }

    /// Whether a grant lies in the root mounted as `mount`.
    pub(crate) fn any_in(&self, mount: &crate::path::MountName) -> bool {
        self.grants
            .iter()
            .any(|g| g.holds() && g.path.mount == *mount)
    }

    /// Adds a grant, lifting revocation marks at or beneath it. Returns false when the
    /// session already holds [`MAX_GRANTS`] grants.
    pub(crate) fn add(&mut self, mut grant: Grant) -> bool {
        self.revoked.retain(|r| !r.starts_with(&grant.path));
        self.grants.retain(Grant::holds);
        if let Ends::AfterRequest(_) = grant.ends {
            grant.ends = Ends::AfterRequest(self.begun);
        }
        if let Some(g) = self.grants.iter_mut().find(|g| {
            g.path == grant.path && g.standing() == grant.standing() && g.ends == grant.ends
        }) {
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

    /// The grants that hold, in the order they were given, those said in full by another
    /// left out (a remembered grant is held twice once the user answers with "remember":
    /// as the answer's grant and as the standing grant the remembering adds).
    pub(crate) fn held(&self) -> Vec<&Grant> {
        let live: Vec<&Grant> = self.grants.iter().filter(|g| g.holds()).collect();
        let mut by_path: std::collections::HashMap<&MountPath, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, g) in live.iter().enumerate() {
            by_path.entry(&g.path).or_default().push(i);
        }
        let said_by_another = |i: usize, g: &Grant| {
            by_path.get(&g.path).is_some_and(|same| {
                same.iter().any(|&j| {
                    let o = live[j];
                    j != i && o.covers(g) && (!g.covers(o) || j < i)
                })
            })
        };
        live.iter()
            .enumerate()
            .filter(|(i, g)| !said_by_another(*i, g))
            .map(|(_, g)| *g)
            .collect()
    }

    /// Notes that request number `n` (from [`Grants::begin`]) has completed: the grants for
    /// one request given before it began end.
    pub(crate) fn finish(&mut self, n: u64) {
        self.grants
            .retain(|g| !matches!(g.ends, Ends::AfterRequest(given) if given < n));
    }

    /// Numbers a request that may use a grant, as it begins.
    pub(crate) fn begin(&mut self) -> u64 {
        self.begun = self.begun.saturating_add(1);
        self.begun
    }

    /// How many more grants the session may hold.
    pub(crate) fn room(&self) -> usize {
        MAX_GRANTS.saturating_sub(self.grants.iter().filter(|g| g.holds()).count())
    }
}
