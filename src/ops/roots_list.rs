//! `roots/list`: the roots this server session sees, as `file://` URIs with display names. A
//! root whose directory is not at its configured path is left out until it is back.
//!
//! Under `consent.roots = "ask"` a root is shown only once the user let this session see it,
//! or the session holds a grant in it: the roots not asked about yet are put to the consent
//! provider in one question (purpose `roots`: their names and places, none of their
//! contents) at the first `roots/list` that meets them, and never again in that session,
//! whatever the answer. A question nobody answers in time hides them, as a refusal does.

use super::Ctx;
use crate::access::Access;
use crate::consent::{ConsentRequest, Purpose};
use crate::error::Result;
use crate::path::{MountPath, RelPath};
use crate::policy::RootsShown;
use crate::root::Root;
use crate::session::Session;
use crate::wire::{RootInfo, RootsListResult};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn run(
    ctx: &mut Ctx,
    session: &Session,
    _params: Value,
) -> Result<RootsListResult> {
    let visible: Vec<Arc<Root>> = ctx
        .config
        .roots
        .iter()
        .filter(|r| r.visible_to(session.server_id()) && ctx.available(r))
        .cloned()
        .collect();
    let shown = match ctx.config.policy.consent.roots {
        RootsShown::Ask => agreed(ctx, session, visible).await,
        _ => visible,
    };
    let roots = shown
        .iter()
        .map(|r| RootInfo {
            uri: r.uri(),
            name: r.display_name().to_owned(),
        })
        .collect();
    Ok(RootsListResult { roots })
}

/// The roots of `visible` the user let this session see, asking about those not asked yet.
async fn agreed(ctx: &Ctx, session: &Session, visible: Vec<Arc<Root>>) -> Vec<Arc<Root>> {
    let unasked: Vec<Arc<Root>> = {
        let mut seen = session.roots_seen();
        let fresh: Vec<Arc<Root>> = visible
            .iter()
            .filter(|r| !seen.asked.contains(&seen_as(r)))
            .cloned()
            .collect();
        // Marked before the question is put: a second `roots/list` meanwhile shows nothing
        // new rather than asking twice.
        seen.asked.extend(fresh.iter().map(|r| seen_as(r)));
        fresh
    };
    if !unasked.is_empty() {
        let paths: Vec<MountPath> = unasked
            .iter()
            .map(|r| MountPath {
                mount: r.mount().clone(),
                rel: RelPath::root(),
            })
            .collect();
        let mut request = ConsentRequest::new(session.server_id(), paths.clone(), Access::Read);
        request.folders = paths;
        request.host_paths = unasked
            .iter()
            .map(|r| r.host_path_of(&RelPath::root()))
            .collect();
        request.purpose = Purpose::SeeRoots;
        request.ended = session.end_signal();
        let wait = Duration::from_secs(ctx.config.policy.consent.timeout_secs.get());
        let answer = crate::consent::ask(&*ctx.config.consent, &request, wait).await;
        let approved: Vec<(String, std::path::PathBuf)> = answer
            .map(|a| a.approved)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| request.paths.contains(&c.asked))
            .filter_map(|c| unasked.iter().find(|r| *r.mount() == c.asked.mount))
            .map(|r| seen_as(r))
            .collect();
        tracing::info!(
            server = %session.server_id(),
            asked = request.paths.len(),
            shown = approved.len(),
            "roots/list: the user was asked which roots this server may see"
        );
        session.roots_seen().shown.extend(approved);
    }
    let seen = session.roots_seen();
    let grants = session.grants();
    visible
        .into_iter()
        .filter(|r| seen.shown.contains(&seen_as(r)) || grants.any_in(r.mount()))
        .collect()
}

/// How a session's answers name a root: its mount name and its directory.
fn seen_as(r: &Root) -> (String, std::path::PathBuf) {
    (r.mount().to_string(), r.host_path_of(&RelPath::root()))
}
