//! The question a `files/consent` puts to the consent provider: what it says of the paths,
//! of who asks and of why it is asked again, and who decided.

use super::Candidate;
use crate::access::Access;
use crate::audit::Decider;
use crate::consent::{ConsentAnswer, ConsentRequest};
use crate::ops::Ctx;
use crate::policy::ConsentMode;
use crate::session::Session;
use crate::wire::ConsentParams;
use std::time::Duration;

/// Why the user is asked again about `ask`: the grants of the session's name that its
/// identity does not hold and that cover one of the paths, or lie beneath one.
fn asked_again(session: &Session, ask: &[Candidate]) -> Vec<String> {
    let mut why: Vec<String> = Vec::new();
    for held in session.held_back().iter() {
        let Ok(grant) = held.path.parse::<crate::path::MountPath>() else {
            continue;
        };
        let touches = ask
            .iter()
            .any(|c| c.real.starts_with(&grant) || grant.starts_with(&c.real));
        if touches && !why.contains(&held.why) {
            why.push(held.why.clone());
        }
    }
    why
}

/// Asks the consent provider about the real paths of `ask`, denying all when it does not
/// answer within the policy's time limit; says who decided (mode `auto`, the provider, or
/// the time limit), for the audit line.
pub(super) async fn ask_provider(
    ctx: &mut Ctx,
    session: &Session,
    p: &ConsentParams,
    ask: &[Candidate],
    access: Access,
) -> (ConsentAnswer, Decider) {
    let request = ConsentRequest {
        server_id: session.server_id().to_owned(),
        message: p.message.clone(),
        paths: ask.iter().map(|c| c.real.clone()).collect(),
        folders: ask
            .iter()
            .filter(|c| c.folder)
            .map(|c| c.real.clone())
            .collect(),
        access,
        host_paths: ask
            .iter()
            .map(|c| {
                ctx.config
                    .roots
                    .iter()
                    .find(|r| *r.mount() == c.real.mount)
                    .map(|r| r.host_path_of(&c.real.rel))
                    .unwrap_or_default()
            })
            .collect(),
        purpose: crate::consent::Purpose::Access,
        identity: session.identity().cloned(),
        asked_again: asked_again(session, ask),
        ended: session.end_signal(),
    };
    let wait = Duration::from_secs(ctx.config.policy.consent.timeout_secs.get());
    let source = &ctx.inner.consent;
    let mode = ctx.config.policy.consent.mode.as_ref();
    let auto = source.custom.is_none()
        && matches!(
            mode.or(source.default_mode.as_ref()),
            Some(ConsentMode::Auto)
        );
    let by = if auto {
        Decider::Auto
    } else {
        Decider::Provider
    };
    match crate::consent::ask(&*ctx.config.consent, &request, wait).await {
        Some(decision) => (decision, by),
        None if session.is_ended() => {
            tracing::info!(
                server = session.server_id(),
                "the session ended while its consent question waited; withdrawn"
            );
            (ConsentAnswer::deny(), Decider::Timeout)
        }
        None => {
            tracing::warn!(server = session.server_id(), "consent timed out; denying");
            (ConsentAnswer::deny(), Decider::Timeout)
        }
    }
}
