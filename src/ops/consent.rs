//! `files/consent`: asks for grants on paths, decided by policy rules and then the provider.
//!
//! Paths outside every root this server sees, and symlinks that lead outside, are never
//! approved and never shown to the provider. The provider is shown the real path (after
//! symlinks), and an approval grants both the path as requested and the real path. A refusal
//! is a result with `granted: false`, not an error.
//!
//! `approvedPaths` and `deniedPaths` echo the strings the server sent (the seed's example
//! sends `/home/user/project` and compares what comes back with it), so every requested path
//! is in one of them; `mountPaths` gives each one inside a root its mount form, the form the
//! other `files/*` methods answer in.

use super::{Ctx, params};
use crate::access::Access;
use crate::audit::{ConsentNote, Decider};
use crate::consent::grants::MAX_GRANTS;
use crate::consent::{ConsentAnswer, Grant, GrantOrigin, Lifetime};
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::MountPath;
use crate::policy::{ConsentMode, Ruling};
use crate::root::{Gate, Root, Said};
use crate::session::Session;
use crate::wire::{ConsentParams, ConsentResult};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

mod ask;
use ask::ask_provider;

/// Most paths one consent request may name.
const MAX_REQUESTED: usize = 64;

/// A path inside a root: as requested, and after symlinks.
struct Candidate {
    requested: MountPath,
    real: MountPath,
    root_access: Access,
    /// Whether it is an existing directory, so that a grant covers everything in it.
    folder: bool,
}

impl Candidate {
    /// The access this path asks for: as requested, else the most its root allows.
    fn wanted(&self, asked: Option<Access>) -> Access {
        asked.unwrap_or(self.root_access)
    }
}

/// Where the decision stands: the paths approved (with the access each gets) and, for the
/// audit line, what was denied and who decided each. The answer itself is built from the
/// strings the server sent (see `answer`).
#[derive(Default)]
struct Tally {
    approved: Vec<(Candidate, Access, GrantOrigin)>,
    /// How long each approved path's grant holds, in the order of `approved`.
    lifetimes: Vec<Lifetime>,
    /// Requested paths (mount form) the user narrowed, with the place each was narrowed to
    /// (the requested path's form of it).
    narrowed: Vec<(MountPath, MountPath)>,
    note: ConsentNote,
}

impl Tally {
    fn approve(&mut self, c: Candidate, access: Access, by: Decider, narrowed: bool) {
        self.note.approved.push(c.requested.to_string());
        self.note.decided(by);
        let origin = match by {
            _ if narrowed => GrantOrigin::Narrowed,
            Decider::Rule => GrantOrigin::Rule,
            Decider::Auto => GrantOrigin::Auto,
            _ => GrantOrigin::Consented,
        };
        self.approved.push((c, access, origin));
        self.lifetimes.push(Lifetime::Session);
    }

    /// Approves `c` as [`Tally::approve`] does, for `lifetime`.
    fn approve_for(
        &mut self,
        c: Candidate,
        access: Access,
        by: Decider,
        narrowed: bool,
        lifetime: Lifetime,
    ) {
        self.approve(c, access, by, narrowed);
        if let Some(last) = self.lifetimes.last_mut() {
            *last = lifetime;
        }
    }

    fn deny(&mut self, path: &MountPath, by: Decider) {
        self.note.denied.push(path.to_string());
        self.note.decided(by);
    }
}

pub(super) async fn run(ctx: &mut Ctx, session: &Session, raw: Value) -> Result<ConsentResult> {
    let p: ConsentParams = params(raw)?;
    if p.requested_paths.is_empty() || p.requested_paths.len() > MAX_REQUESTED {
        return Err(Error::invalid_params(format!(
            "requestedPaths must name 1 to {MAX_REQUESTED} paths"
        )));
    }
    let mut tally = Tally::default();
    let (located, echo) = locate(ctx, &p, &mut tally);
    // Without an explicit access, the provider is asked for the most any located root allows.
    // It is taken from the roots before anything is resolved, so that a refusal's `access`
    // says what the policy says and nothing about the disk (a link out of the root is denied
    // while resolving, and must not change it).
    let overall = p.access.unwrap_or_else(|| {
        let most = located.iter().map(|(r, _)| r.access()).max();
        most.unwrap_or(Access::Read)
    });
    let located = refuse_by_rule(ctx, session.server_id(), located, &mut tally);
    let candidates = resolve(ctx, session, located, &mut tally).await?;
    let ask = apply_rules(ctx, session.server_id(), candidates, p.access, &mut tally);
    if !ask.is_empty() {
        let (answer, by) = ask_provider(ctx, session, &p, &ask, overall).await;
        for c in ask {
            apply(c, &answer, p.access, by, &mut tally);
        }
    }
    record(session, &tally.approved, &tally.lifetimes)?;
    // What was granted, or, when nothing was, what was asked for.
    let access = tally
        .approved
        .iter()
        .map(|(_, a, _)| *a)
        .max()
        .unwrap_or(overall);
    tally.note.access = Some(access);
    ctx.audit.consent = Some(std::mem::take(&mut tally.note));
    let result = answer(echo, &tally.approved, &tally.narrowed, access);
    tracing::info!(
        server = session.server_id(),
        approved = result.approved_paths.len(),
        denied = result.denied_paths.len(),
        "consent decided"
    );
    Ok(result)
}

/// Each string the server sent is answered as it was sent: approved when its place (its
/// mount form) was approved, denied otherwise, outside every root included.
/// A string whose place the user narrowed is denied as sent, and `narrowedPaths` names the
/// place inside it that was granted.
fn answer(
    echo: Echo,
    approved: &[(Candidate, Access, GrantOrigin)],
    narrowed: &[(MountPath, MountPath)],
    access: Access,
) -> ConsentResult {
    let mut result = ConsentResult {
        granted: !approved.is_empty(),
        approved_paths: Vec::new(),
        denied_paths: Vec::new(),
        mount_paths: BTreeMap::new(),
        narrowed_paths: BTreeMap::new(),
        access,
    };
    for (raw, mount) in echo {
        let narrow = mount
            .as_ref()
            .and_then(|m| narrowed.iter().find(|(from, _)| from == m));
        if let Some((_, to)) = narrow {
            result.narrowed_paths.insert(raw.clone(), to.to_string());
        }
        let yes = narrow.is_none()
            && mount
                .as_ref()
                .is_some_and(|m| approved.iter().any(|(c, _, _)| c.requested == *m));
        if yes {
            result.approved_paths.push(raw.clone());
        } else {
            result.denied_paths.push(raw.clone());
        }
        if let Some(m) = mount {
            result.mount_paths.insert(raw, m.to_string());
        }
    }
    result
}

/// Finds each requested path's root, once per path; a path no root could grant is denied.
/// Also returns each distinct string the server sent, in order, with its mount form when it
/// lies inside a root, for the answer's echo.
fn locate(ctx: &mut Ctx, p: &ConsentParams, tally: &mut Tally) -> (Located, Echo) {
    let mut located: Located = Vec::new();
    let mut echo: Echo = Vec::new();
    for raw_path in &p.requested_paths {
        if echo.iter().any(|(r, _)| r == raw_path) {
            continue;
        }
        let mount = match ctx.locate(raw_path) {
            Ok((root, path)) if p.access.is_none_or(|a| a <= root.access()) => {
                if !located.iter().any(|(_, c)| *c == path) {
                    located.push((root, path.clone()));
                }
                Some(path)
            }
            Ok((_, path)) => {
                tally.deny(&path, Decider::Root);
                Some(path)
            }
            // A path outside every root has no mount form: the answer echoes it as sent (the
            // server's own string), the audit line has it only as a keyed hash.
            Err(_) => {
                tally.note.outside.push(raw_path.clone());
                tally.note.decided(Decider::Confinement);
                None
            }
        };
        echo.push((raw_path.clone(), mount));
    }
    (located, echo)
}

/// Denies, before anything on disk is looked at, each located path that a `deny` rule covers
/// as requested: the rules are asked first, so their refusals cannot depend on the disk.
/// (A deny rule on the real path is applied after resolving, by [`apply_rules`].)
fn refuse_by_rule(ctx: &mut Ctx, server: &str, located: Located, tally: &mut Tally) -> Located {
    let consent = &ctx.config.policy.consent;
    located
        .into_iter()
        .filter(|(_, path)| {
            let closed = consent.rules_say(server, path) == Some(false);
            if closed {
                tally.deny(path, Decider::Rule);
            }
            !closed
        })
        .collect()
}

/// Requested paths inside a root, with the root, each once.
type Located = Vec<(Arc<Root>, MountPath)>;

/// Each distinct requested string with its mount form, when it has one.
type Echo = Vec<(String, Option<MountPath>)>;

/// Resolves each path through its root: a symlink that leads outside is never approved, and
/// what the user is asked about (and what the grant covers) is the real path.
async fn resolve(
    ctx: &mut Ctx,
    session: &Session,
    located: Vec<(Arc<Root>, MountPath)>,
    tally: &mut Tally,
) -> Result<Vec<Candidate>> {
    let grants = session.grants().clone();
    let said = said(ctx, session.server_id());
    let resolved = ctx
        .run(session, move |deadline| {
            Ok(located
                .into_iter()
                .map(|(root, path)| {
                    let gate = Gate::asking(grants.clone(), path.clone(), said.clone());
                    let real = match root.real_path(&path.rel, &gate, Some(deadline)) {
                        Ok(found) => Some(found),
                        Err(u) if u.error.kind() == ErrorKind::PermissionDenied => None,
                        Err(u) if u.error.reason() == Some(Reason::SymlinkLoop) => None,
                        // A path that does not exist yet may still be granted, as the place
                        // it would be: where the walk got to, plus the rest of the path. When
                        // that place is unknown (a `..` was still to come), it is denied.
                        Err(u) => u.place.map(|r| (r, false)),
                    };
                    (root.access(), path, real)
                })
                .collect::<Vec<_>>())
        })
        .await?;
    let mut candidates: Vec<Candidate> = Vec::new();
    for (root_access, requested, real) in resolved {
        match real {
            Some((real, folder)) => candidates.push(Candidate {
                requested,
                real,
                root_access,
                folder,
            }),
            None => tally.deny(&requested, Decider::Confinement),
        }
    }
    Ok(candidates)
}

/// Lets the policy's rules decide what they cover (see
/// [`crate::policy::ConsentPolicy::rule_on`]) and returns the paths left for the provider.
fn apply_rules(
    ctx: &mut Ctx,
    server: &str,
    candidates: Vec<Candidate>,
    asked: Option<Access>,
    tally: &mut Tally,
) -> Vec<Candidate> {
    let consent = &ctx.config.policy.consent;
    let mut ask = Vec::new();
    for c in candidates {
        match consent.rule_on(server, &c.requested, &c.real) {
            Ruling::Deny => tally.deny(&c.requested, Decider::Rule),
            Ruling::Allow(cap) => {
                let wanted = c.wanted(asked);
                let access = cap.map_or(wanted, |x| x.min(wanted));
                tally.approve(c, access, Decider::Rule, false);
            }
            Ruling::Ask => ask.push(c),
        }
    }
    ask
}

/// Applies the provider's answer to one candidate: approved whole, narrowed to a place
/// inside it (granted there only, in both its real and its requested form), or denied. A
/// choice is only ever capped: its access by what was asked, its place by the path asked
/// about; a place outside that path is a refusal.
fn apply(
    c: Candidate,
    answer: &ConsentAnswer,
    asked: Option<Access>,
    by: Decider,
    tally: &mut Tally,
) {
    let Some(choice) = answer.approved.iter().find(|ch| ch.asked == c.real) else {
        tally.deny(&c.requested, by);
        return;
    };
    let access = choice.access.min(c.wanted(asked));
    let lifetime = choice.lifetime;
    if choice.granted == c.real {
        tally.approve_for(c, access, by, false, lifetime);
        return;
    }
    if !choice.granted.starts_with(&c.real) {
        tracing::warn!("a consent answer narrowed a path to a place outside it; denied");
        tally.deny(&c.requested, by);
        return;
    }
    // The place beneath the real path, and the same place beneath the path as requested.
    let below = choice
        .granted
        .rel
        .components()
        .get(c.real.rel.components().len()..)
        .unwrap_or_default();
    let mut requested = c.requested.clone();
    for name in below {
        requested.rel.push(name);
    }
    tally
        .narrowed
        .push((c.requested.clone(), requested.clone()));
    let inner = Candidate {
        requested,
        real: choice.granted.clone(),
        root_access: c.root_access,
        folder: false,
    };
    tally.approve_for(inner, access, by, true, lifetime);
}

/// Adds the grants for the approved paths (the real path, and the path as requested when
/// it differs), all or none: a session with too little room left gets `QUOTA_EXCEEDED`.
fn record(
    session: &Session,
    approved: &[(Candidate, Access, GrantOrigin)],
    lifetimes: &[Lifetime],
) -> Result<()> {
    let too_many = || Error::quota("too many grants in this session", MAX_GRANTS as u64);
    let mut grants = session.grants();
    let needed: usize = approved
        .iter()
        .map(|(c, _, _)| if c.requested == c.real { 1 } else { 2 })
        .sum();
    if grants.room() < needed {
        return Err(too_many());
    }
    for (i, (c, access, origin)) in approved.iter().enumerate() {
        let lifetime = lifetimes.get(i).copied().unwrap_or_default();
        let grant = |path: &MountPath| Grant::lasting(path.clone(), *access, *origin, lifetime);
        let mut added = grants.add(grant(&c.real));
        if c.requested != c.real {
            added &= grants.add(grant(&c.requested));
        }
        if !added {
            return Err(too_many());
        }
    }
    Ok(())
}

/// What the policy says of a place for `server` without asking anyone: closed by a deny rule,
/// open by an allow rule or mode `auto` (when no embedder's provider replaces the mode), else
/// unknown. The consent walk looks only where the answer would not tell the server anything
/// it could not learn by asking for the place itself.
fn said(ctx: &mut Ctx, server: &str) -> Said {
    let config = ctx.config.clone();
    let auto = ctx.inner.consent.custom.is_none()
        && matches!(config.policy.consent.mode, Some(ConsentMode::Auto));
    let server = server.to_owned();
    Said::new(move |place| {
        let ruled = config.policy.consent.rules_say(&server, place);
        ruled.or(auto.then_some(true))
    })
}
