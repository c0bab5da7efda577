//! `files/consent`: asks for grants on paths, decided by policy rules and then the provider.
//!
//! Paths outside every root this server sees are never approved and never shown to the
//! provider. A refusal is a result with `granted: false`, not an error.

use super::{Ctx, params};
use crate::consent::{ConsentDecision, ConsentRequest, Grant};
use crate::error::{Error, Result};
use crate::path::MountPath;
use crate::policy::{Decision, matches_server};
use crate::root::Access;
use crate::session::Session;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

/// Most paths one consent request may name.
const MAX_REQUESTED: usize = 64;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    message: Option<String>,
    requested_paths: Vec<String>,
    access: Option<Access>,
}

pub(super) async fn run(ctx: &Ctx, session: &Session, raw: Value) -> Result<Value> {
    let p: Params = params(raw)?;
    if p.requested_paths.is_empty() || p.requested_paths.len() > MAX_REQUESTED {
        return Err(Error::invalid_params(format!(
            "requestedPaths must name 1 to {MAX_REQUESTED} paths"
        )));
    }
    let mut denied: Vec<String> = Vec::new();
    let mut candidates: Vec<(MountPath, Access)> = Vec::new();
    for raw_path in &p.requested_paths {
        match ctx.locate(raw_path) {
            Ok((root, path)) if p.access.is_none_or(|a| a <= root.access()) => {
                if !candidates.iter().any(|(c, _)| *c == path) {
                    candidates.push((path, root.access()));
                }
            }
            Ok((_, path)) => denied.push(path.to_string()),
            // A path outside the roots is echoed as the server sent it: it names nothing the
            // broker would reveal.
            Err(_) => denied.push(raw_path.clone()),
        }
    }
    let overall = p.access.unwrap_or_else(|| {
        candidates
            .iter()
            .map(|(_, a)| *a)
            .min()
            .unwrap_or(Access::Read)
    });

    let mut approved: Vec<(MountPath, Access)> = Vec::new();
    let mut ask: Vec<MountPath> = Vec::new();
    let rules = &ctx.inner.policy.consent.rules;
    for (path, _) in candidates {
        let rule = rules
            .iter()
            .find(|r| matches_server(&r.servers, session.server_id()) && r.covers(&path));
        match rule.map(|r| (r.decision, r.access)) {
            Some((Decision::Deny, _)) => denied.push(path.to_string()),
            Some((Decision::Allow, cap)) => {
                let a = cap.map_or(overall, |c| c.min(overall));
                approved.push((path, a));
            }
            None => ask.push(path),
        }
    }

    if !ask.is_empty() {
        let request = ConsentRequest {
            server_id: session.server_id().to_owned(),
            message: p.message.clone(),
            paths: ask.clone(),
            access: overall,
        };
        let wait = Duration::from_secs(ctx.inner.policy.consent.timeout_secs.get());
        let decision = tokio::time::timeout(wait, ctx.inner.consent.decide(&request))
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(server = session.server_id(), "consent timed out; denying");
                ConsentDecision::deny()
            });
        let access = decision.access.min(overall);
        for path in ask {
            if decision.approved.contains(&path) {
                approved.push((path, access));
            } else {
                denied.push(path.to_string());
            }
        }
    }

    let mut grants = session.grants();
    for (path, access) in &approved {
        let added = grants.add(Grant {
            path: path.clone(),
            access: *access,
            standing: false,
        });
        if !added {
            return Err(Error::quota(
                "too many grants in this session",
                crate::consent::MAX_GRANTS as u64,
            ));
        }
    }
    drop(grants);
    let access = approved.iter().map(|(_, a)| *a).min().unwrap_or(overall);
    tracing::info!(
        server = session.server_id(),
        approved = approved.len(),
        denied = denied.len(),
        "consent decided"
    );
    Ok(json!({
        "granted": !approved.is_empty(),
        "approvedPaths": approved.iter().map(|(p, _)| p.to_string()).collect::<Vec<_>>(),
        "deniedPaths": denied,
        "access": access.as_str(),
    }))
}
