//! `roots/list`: the roots this server session sees, as `file://` URIs with display names. A
//! root whose directory is not at its configured path is left out until it is back.

use super::Ctx;
use crate::error::Result;
use crate::session::Session;
use crate::wire::{RootInfo, RootsListResult};
use serde_json::Value;

pub(super) fn run(ctx: &mut Ctx, session: &Session, _params: Value) -> Result<RootsListResult> {
    let roots = ctx
        .config
        .roots
        .iter()
        .filter(|r| r.visible_to(session.server_id()) && ctx.available(r))
        .map(|r| RootInfo {
            uri: r.uri(),
            name: r.display_name().to_owned(),
        })
        .collect();
    Ok(RootsListResult { roots })
}
