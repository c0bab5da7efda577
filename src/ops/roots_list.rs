//! `roots/list`: the roots this server session sees, as `file://` URIs with display names.

use super::Ctx;
use crate::error::Result;
use crate::session::Session;
use serde_json::{Value, json};

pub(super) fn run(ctx: &Ctx, session: &Session, _params: Value) -> Result<Value> {
    let roots: Vec<Value> = ctx
        .config
        .roots
        .iter()
        .filter(|r| r.visible_to(session.server_id()))
        .map(|r| json!({"uri": r.uri(), "name": r.display_name()}))
        .collect();
    Ok(json!({ "roots": roots }))
}
