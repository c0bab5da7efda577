//! The user's changes from the page: roots added, removed or switched, grants remembered or
//! forgotten (all kept in the state file, as the daemon's [`Layer`]), and revocations.
//!
//! An edit of the layer is put in force first, as a reload would be (so that a root the
//! broker cannot open, or one that holds the daemon's own directory, is refused with why),
//! then saved; when it cannot be saved, the broker goes back to the layer before, so that
//! what is in force is always what the file says.

use super::reply::Refusal;
use super::reply::{bad, body, ok};
use super::shared::Console;
use crate::access::Access;
use crate::daemon::{control, protocol};
use crate::locks::lock;
use crate::path::{MountName, MountPath};
use crate::policy::{AddedRoot, Layer, PolicyRoot, Remembered};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// Changes the user's edits by `edit`: in force, then in the state file (see the module's
/// comment). Edits take turns.
fn edit(c: &Console, edit: impl FnOnce(&mut Layer) -> Result<(), Refusal>) -> Result<(), Refusal> {
    let store = c.store.as_ref().ok_or_else(|| {
        Refusal::new(
            StatusCode::CONFLICT,
            "there is no configuration directory to keep this in (set HOME or XDG_CONFIG_HOME)",
        )
    })?;
    let mut layer = lock(&c.layer);
    let mut next = layer.clone();
    edit(&mut next)?;
    if next == *layer {
        return Ok(());
    }
    c.broker
        .set_layer(next.clone())
        .map_err(|e| bad(format!("not changed: {e}")))?;
    if let Err(e) = store.save(&next) {
        if let Err(back) = c.broker.set_layer(layer.clone()) {
            tracing::error!("console: cannot go back to the edits before: {back}");
        }
        return Err(Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e));
    }
    *layer = next;
    Ok(())
}

/// Keeps `grants` as standing grants of the server of `session` (its name without the `#N`,
/// and its identity): another program that calls itself by the name does not hold them.
///
/// Refused (`GONE`, nothing kept) when the session's program could not be told: a grant
/// kept for a name alone would go to whichever program claims it next.
pub(super) fn remember(
    c: &Console,
    session: &crate::session::Session,
    grants: &[(MountPath, Access)],
) -> Result<(), Refusal> {
    let server = crate::session::base_name(session.server_id()).to_owned();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let identity = session.identity().map(|i| i.record(since)).ok_or_else(|| {
        Refusal::new(
            StatusCode::GONE,
            "answered for this session only, not remembered: the program of this session \
             could not be told, and a grant remembered for its name alone would go to any \
             program that takes the name",
        )
    })?;
    edit(c, |layer| {
        for (path, access) in grants {
            let path = path.to_string();
            match layer.remembered.iter_mut().find(|r| {
                r.server == server
                    && r.path == path
                    && r.identity
                        .as_ref()
                        .is_some_and(|i| i.digest == identity.digest)
            }) {
                Some(r) => r.access = r.access.max(*access),
                None => layer.remembered.push(Remembered {
                    server: server.clone(),
                    path,
                    access: *access,
                    since,
                    identity: Some(identity.clone()),
                }),
            }
        }
        Ok(())
    })?;
    tracing::info!(%server, count = grants.len(), "console: grants remembered");
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Forget {
    server: String,
    path: String,
}

/// `POST /api/remembered/forget`.
pub(super) async fn forget(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    let run = || -> Result<Response, Refusal> {
        let f: Forget = body(&bytes)?;
        edit(&console, |layer| {
            let before = layer.remembered.len();
            layer
                .remembered
                .retain(|r| !(r.server == f.server && r.path == f.path));
            if layer.remembered.len() == before {
                return Err(Refusal::new(
                    StatusCode::NOT_FOUND,
                    "no such remembered grant",
                ));
            }
            Ok(())
        })?;
        tracing::info!(server = %f.server, path = %f.path, "console: remembered grant forgotten");
        Ok(ok())
    };
    run().unwrap_or_else(IntoResponse::into_response)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revoke {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    path: Option<String>,
    /// Forget the remembered grant of the server's name on the path too, so that it does
    /// not come back at the next session or start.
    #[serde(default)]
    forget: bool,
}

/// `POST /api/revoke`: a grant, a path from every server, or a whole server.
pub(super) async fn revoke(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    let run = || -> Result<Response, Refusal> {
        let r: Revoke = body(&bytes)?;
        if r.server.is_none() && r.path.is_none() {
            return Err(bad("revoke needs a server, a path, or both"));
        }
        // Forgotten first: a standing grant still remembered would be put back by the next
        // reload of the layer.
        let forgot = match (&r.server, &r.path, r.forget) {
            (_, _, false) => 0,
            (Some(server), Some(path), true) => forget_for(&console, server, path)?,
            _ => return Err(bad("forget needs the grant's server and path")),
        };
        // What the socket's `revoke` takes, but never `all`: the page takes grants back one
        // server or one path at a time.
        let request = protocol::Revoke {
            server: r.server,
            path: r.path,
            all: false,
        };
        let taken = control::revoke(&console.broker, &request).map_err(bad)?;
        let (server, path) = (&request.server, &request.path);
        tracing::info!(
            ?server,
            ?path,
            count = taken.revoked.len(),
            carved = taken.carved.len(),
            forgot,
            "console: revoked"
        );
        let mut answer = taken.answer();
        if let serde_json::Value::Object(m) = &mut answer {
            m.insert("forgot".into(), json!(forgot));
        }
        Ok(Json(answer).into_response())
    };
    run().unwrap_or_else(IntoResponse::into_response)
}

/// Forgets the grants remembered for the server of session `server` (its name without the
/// `#N`) on `path`, for every program: how many there were.
fn forget_for(c: &Console, server: &str, path: &str) -> Result<usize, Refusal> {
    let name = crate::session::base_name(server).to_owned();
    let mut forgot = 0;
    edit(c, |layer| {
        let before = layer.remembered.len();
        layer
            .remembered
            .retain(|m| !(m.server == name && m.path == path));
        forgot = before - layer.remembered.len();
        Ok(())
    })?;
    Ok(forgot)
}

/// `POST /api/resume`: lifts a session's suspension.
pub(super) async fn resume(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    let run = || -> Result<Response, Refusal> {
        // The socket's `resume` request, the same fields and the same answer.
        let r: protocol::Resume = body(&bytes)?;
        let resumed = control::resume(&console.broker, &r).map_err(bad)?;
        tracing::info!(
            server = r.server,
            resumed = resumed.resumed,
            "console: resumed"
        );
        Ok(Json(crate::daemon::line::ok(&resumed)).into_response())
    };
    run().unwrap_or_else(IntoResponse::into_response)
}

/// One edit of the roots.
#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum RootEdit {
    Add {
        path: PathBuf,
        access: Access,
        #[serde(default)]
        mount: Option<String>,
    },
    Remove {
        mount: String,
    },
    Access {
        mount: String,
        access: Access,
    },
}

/// `POST /api/roots`.
pub(super) async fn roots(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    let c = &console;
    let run = || -> Result<Response, Refusal> {
        let e: RootEdit = body(&bytes)?;
        let roots: Vec<PolicyRoot> = c
            .broker
            .roots()
            .iter()
            .map(|r| PolicyRoot {
                mount: r.mount().to_string(),
                path: r.host_path_of(&crate::path::RelPath::root()),
            })
            .collect();
        let mounts: Vec<String> = roots.iter().map(|r| r.mount.clone()).collect();
        // The root in force of that name, with the directory it is now.
        let known = |m: &str| {
            roots.iter().find(|r| r.mount == m).cloned().ok_or_else(|| {
                Refusal::new(StatusCode::NOT_FOUND, format!("there is no root {m:?}"))
            })
        };
        match e {
            RootEdit::Add {
                path,
                access,
                mount,
            } => {
                let added = new_root(path, access, mount, &mounts)?;
                edit(c, |l| {
                    l.added.push(added);
                    Ok(())
                })?;
            }
            RootEdit::Remove { mount } => {
                let root = known(&mount)?;
                edit(c, |l| {
                    let before = l.added.len();
                    l.added
                        .retain(|a| a.mount().as_deref() != Some(mount.as_str()));
                    if l.added.len() == before && !l.removed.contains(&root) {
                        l.removed.push(root.clone());
                    }
                    l.access.retain(|(r, _)| *r != root);
                    Ok(())
                })?;
            }
            RootEdit::Access { mount, access } => {
                let root = known(&mount)?;
                edit(c, |l| {
                    match l
                        .added
                        .iter_mut()
                        .find(|a| a.mount().as_deref() == Some(mount.as_str()))
                    {
                        Some(a) => a.access = access,
                        None => {
                            l.access.retain(|(r, _)| *r != root);
                            l.access.push((root.clone(), access));
                        }
                    }
                    Ok(())
                })?;
            }
        }
        let now: Vec<String> = c
            .broker
            .roots()
            .iter()
            .map(|r| r.mount().to_string())
            .collect();
        Ok(Json(json!({"ok": true, "roots": now})).into_response())
    };
    run().unwrap_or_else(IntoResponse::into_response)
}

/// The root the user asks to add, checked: an absolute path to a directory, under a mount
/// name that is valid and not taken.
fn new_root(
    path: PathBuf,
    access: Access,
    mount: Option<String>,
    taken: &[String],
) -> Result<AddedRoot, Refusal> {
    if !path.is_absolute() {
        return Err(bad(format!("{} is not an absolute path", path.display())));
    }
    let real = std::fs::canonicalize(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    if !real.is_dir() {
        return Err(bad(format!("{} is not a directory", path.display())));
    }
    let mount = mount.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
    if let Some(m) = &mount {
        MountName::new(m).map_err(|e| bad(format!("mount name {m:?}: {e}")))?;
    }
    let added = AddedRoot {
        path: real,
        mount,
        access,
    };
    let name = added
        .mount()
        .ok_or_else(|| bad("no mount name can be made of this directory's name: give one"))?;
    if taken.contains(&name) {
        return Err(bad(format!(
            "a root is already mounted as {name:?}: give another mount name"
        )));
    }
    Ok(added)
}
