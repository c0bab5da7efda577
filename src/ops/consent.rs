//! `files/consent`: asks for grants on paths, decided by policy rules and then the provider.
//!
//! Paths outside every root this server sees, and symlinks that lead outside, are never
//! approved and never shown to the provider. The provider is shown the real path (after
//! symlinks), and an approval grants both the path as requested and the real path. A refusal
//! is a result with `granted: false`, not an error.

use super::wire::{ConsentParams, ConsentResult};
use super::{Ctx, params};
use crate::access::Access;
use crate::access::matches_server;
use crate::consent::{ConsentDecision, ConsentRequest, Grant};
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::MountPath;
use crate::policy::{ConsentMode, Decision};
use crate::root::{Gate, Root, Said};
use crate::session::Session;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

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

pub(super) async fn run(ctx: &Ctx, session: &Session, raw: Value) -> Result<ConsentResult> {
    let p: ConsentParams = params(raw)?;
    if p.requested_paths.is_empty() || p.requested_paths.len() > MAX_REQUESTED {
        return Err(Error::invalid_params(format!(
            "requestedPaths must name 1 to {MAX_REQUESTED} paths"
        )));
    }
    let mut denied: Vec<String> = Vec::new();
    let mut located: Vec<(Arc<Root>, MountPath)> = Vec::new();
    for raw_path in &p.requested_paths {
        match ctx.locate(raw_path) {
            Ok((root, path)) if p.access.is_none_or(|a| a <= root.access()) => {
                if !located.iter().any(|(_, c)| *c == path) {
                    located.push((root, path));
                }
            }
            Ok((_, path)) => denied.push(path.to_string()),
            // A path outside every root has no mount form. A relative one is echoed as sent;
            // an absolute path or URI is left out, since host paths never leave the broker.
            Err(_) if raw_path.starts_with('/') || raw_path.contains(':') => {}
            Err(_) => denied.push(raw_path.clone()),
        }
    }
    // Resolve each path through its root: a symlink that leads outside is never approved,
    // and what the user is asked about (and what the grant covers) is the real path.
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
                        Err((e, _)) if e.kind() == ErrorKind::PermissionDenied => None,
                        Err((e, _)) if e.reason() == Some(Reason::SymlinkLoop) => None,
                        // A path that does not exist yet may still be granted, as the place
                        // it would be: where the walk got to, plus the rest of the path. When
                        // that place is unknown (a `..` was still to come), it is denied.
                        Err((_, reached)) => reached.map(|r| (r, false)),
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
            None => denied.push(requested.to_string()),
        }
    }
    // Without an explicit access, each path asks for the most its root allows.
    let wanted = |c: &Candidate| p.access.unwrap_or(c.root_access);
    let overall = p.access.unwrap_or_else(|| {
        candidates
            .iter()
            .map(|c| c.root_access)
            .max()
            .unwrap_or(Access::Read)
    });

    let mut approved: Vec<(Candidate, Access)> = Vec::new();
    let mut ask: Vec<Candidate> = Vec::new();
    let rules = &ctx.config.policy.consent.rules;
    for c in candidates {
        // A deny rule on either the requested or the real path wins; otherwise the first rule
        // covering the real path decides.
        let sid = session.server_id();
        let deny = rules.iter().any(|r| {
            r.decision == Decision::Deny
                && matches_server(&r.servers, sid)
                && (r.covers(&c.requested) || r.covers(&c.real))
        });
        let rule = rules
            .iter()
            .find(|r| matches_server(&r.servers, sid) && r.covers(&c.real));
        match rule.map(|r| (r.decision, r.access)) {
            _ if deny => denied.push(c.requested.to_string()),
            Some((Decision::Deny, _)) => denied.push(c.requested.to_string()),
            Some((Decision::Allow, cap)) => {
                let a = cap.map_or(wanted(&c), |x| x.min(wanted(&c)));
                approved.push((c, a));
            }
            None => ask.push(c),
        }
    }

    if !ask.is_empty() {
        let request = ConsentRequest {
            server_id: session.server_id().to_owned(),
            message: p.message.clone(),
            paths: ask.iter().map(|c| c.real.clone()).collect(),
            folders: ask
                .iter()
                .filter(|c| c.folder)
                .map(|c| c.real.clone())
                .collect(),
            access: overall,
        };
        let wait = Duration::from_secs(ctx.config.policy.consent.timeout_secs.get());
        let decision = tokio::time::timeout(wait, ctx.config.consent.decide(&request))
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(server = session.server_id(), "consent timed out; denying");
                ConsentDecision::deny()
            });
        for c in ask {
            if decision.approved.contains(&c.real) {
                let access = decision.access.min(wanted(&c));
                approved.push((c, access));
            } else {
                denied.push(c.requested.to_string());
            }
        }
    }

    let mut grants = session.grants();
    let needed: usize = approved
        .iter()
        .map(|(c, _)| if c.requested == c.real { 1 } else { 2 })
        .sum();
    if grants.room() < needed {
        return Err(Error::quota(
            "too many grants in this session",
            crate::consent::MAX_GRANTS as u64,
        ));
    }
    for (c, access) in &approved {
        let mut added = grants.add(Grant {
            path: c.real.clone(),
            access: *access,
            standing: false,
        });
        if c.requested != c.real {
            added &= grants.add(Grant {
                path: c.requested.clone(),
                access: *access,
                standing: false,
            });
        }
        if !added {
            return Err(Error::quota(
                "too many grants in this session",
                crate::consent::MAX_GRANTS as u64,
            ));
        }
    }
    drop(grants);
    let access = approved.iter().map(|(_, a)| *a).max().unwrap_or(overall);
    tracing::info!(
        server = session.server_id(),
        approved = approved.len(),
        denied = denied.len(),
        "consent decided"
    );
    Ok(ConsentResult {
        granted: !approved.is_empty(),
        approved_paths: approved
            .iter()
            .map(|(c, _)| c.requested.to_string())
            .collect(),
        denied_paths: denied,
        access,
    })
}

/// What the policy says of a place for `server` without asking anyone: closed by a deny rule,
/// open by an allow rule or mode `auto` (when no embedder's provider replaces the mode), else
/// unknown. The consent walk looks only where the answer would not tell the server anything
/// it could not learn by asking for the place itself.
fn said(ctx: &Ctx, server: &str) -> Said {
    let config = ctx.config.clone();
    let auto = ctx.inner.consent.custom.is_none()
        && matches!(config.policy.consent.mode, Some(ConsentMode::Auto));
    let server = server.to_owned();
    Said::new(move |place| {
        let mut covering = config
            .policy
            .consent
            .rules
            .iter()
            .filter(|r| matches_server(&r.servers, &server) && r.covers(place))
            .peekable();
        if covering.clone().any(|r| r.decision == Decision::Deny) {
            return Some(false);
        }
        if covering.peek().is_some() || auto {
            return Some(true);
        }
        None
    })
}
