//! Sessions attached over the socket: a proxy's or a sidecar's server session, held in the
//! daemon's one broker.
//!
//! `{"op": "describe"}` tells a client what it must know before its session begins (the
//! line limit, the capabilities, the era rule, the roots and where they are, for a sandbox's
//! profile). `{"op": "attach", "server": NAME, ...}` opens the session, named `NAME`, or
//! `NAME#2` (then `#3`, ...) while a live session has that name; after its answer the
//! connection carries the session's JSON-RPC exactly as `fsbroker serve`'s stdio does,
//! with the daemon's consent questions beside it when the client said it `asks` (see
//! `questions.rs`). The session ends with the connection.

use super::line;
use super::protocol::{self, AttachRequest};
use super::questions::Attachments;
use crate::broker::Broker;
use crate::serve::run_beside;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::watch;

/// Most sessions of one name at once (`NAME` and `NAME#2` to `NAME#64`).
const MAX_INSTANCES: u32 = 64;

/// Sends the daemon's description on `output` now and after every policy change, until the
/// peer or the daemon goes. The peer's side (`input`) is read all the while, and what it sends
/// dropped: its end is the peer gone, so that the connection's slot (and a sandboxing
/// proxy's registration) goes with the peer rather than at the next change that fails to be
/// written.
pub(crate) async fn follow<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    broker: &Broker,
    mut input: R,
    mut output: W,
    mut stop: watch::Receiver<bool>,
) {
    let mut changes = broker.policy_changes();
    let mut sink = [0u8; 1024];
    loop {
        if super::line::send(&mut output, &describe(broker))
            .await
            .is_err()
        {
            return;
        }
        loop {
            tokio::select! {
                changed = changes.changed() => match changed {
                    Ok(()) => break,
                    Err(_) => return,
                },
                _ = stop.wait_for(|s| *s) => return,
                read = input.read(&mut sink) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
            }
        }
    }
}

/// What the daemon tells a client before its session: `{"op": "describe"}`'s answer.
pub(crate) fn describe(broker: &Broker) -> Value {
    let policy = broker.policy();
    let roots: Vec<Value> = broker
        .roots()
        .iter()
        .map(|r| {
            // The directory's identity, as the daemon's handle holds it: a sandbox opens the
            // root only while the path still names that directory.
            let pin = r.pin().ok().map(|(dev, ino)| json!([dev, ino]));
            json!({
                "mount": r.mount().to_string(),
                "path": r.host_path_of(&crate::path::RelPath::root()),
                "access": r.access().as_str(),
                "servers": r.servers(),
                "pin": pin,
            })
        })
        .collect();
    json!({
        "ok": true,
        "maxLine": policy.limits.max_line_bytes.get(),
        "capabilities": broker.capabilities(),
        "era": policy.proxy.era.as_str(),
        "roots": roots,
        // Where the daemon keeps what servers' changes destroyed, its audit log, its own log
        // and the console's grants: a proxy's sandbox opens none of them, nor a place above
        // one (the proxy's environment may name other places than the daemon's).
        "recoveryStore": broker.recovery().map(|r| r.path()),
        "auditFile": policy.audit.file.as_deref().map(absolute),
        "daemonLog": super::background::log_path().ok(),
        "consoleFile": super::console::Store::default_place().map(|s| s.file().to_owned()),
        // The files whose content decides what a server may do: the policy the daemon reloads
        // on save and the programs that answer its consent questions. A server that could
        // write one would give itself roots or answer its own questions.
        "policyFile": policy.source.as_deref().map(absolute),
        "consentPrograms": policy.consent.programs(),
    })
}

/// `path` made absolute against the daemon's working directory: a client takes a relative
/// path against its own, which may be another. As given when the working directory cannot be
/// told.
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Serves the session `request` attaches until the connection or the daemon ends.
/// `pid` is the attached process, as the kernel says.
pub(crate) async fn run<R, W>(
    broker: &Broker,
    attachments: &Arc<Attachments>,
    request: AttachRequest,
    pid: Option<i32>,
    input: R,
    mut output: W,
    mut stop: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let name = request.name().unwrap_or_default();
    let (id, (session, notifications)) = match open_named(broker, &name, request.identity.clone()) {
        Ok(opened) => opened,
        Err(message) => {
            let _ = super::line::send(&mut output, &super::line::error(message)).await;
            return;
        }
    };
    let facts = json!({
        "pid": pid,
        "serverPid": request.server_pid,
        "era": request.era,
        "sandbox": request.sandbox,
    });
    let mut attachment = attachments.attach(&id, facts, request.asks);
    tracing::info!(session = %id, ?pid, "attached");
    let welcome = line::ok(&protocol::Attached {
        session: id.clone(),
    });
    if super::line::send(&mut output, &welcome).await.is_err() {
        return;
    }
    // Questions go out beside the session's answers; their answers come back beside its
    // requests and are matched by number.
    let beside = attachment.beside();
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let served = run_beside(session, notifications, input, output, shutdown, beside).await;
    drop(attachment);
    match served {
        Ok(()) => tracing::info!(session = %id, "detached"),
        Err(e) => tracing::info!(session = %id, error = %e, "detached: the connection failed"),
    }
}

/// A session named `name`, or `NAME#2` (then `#3`, ...) while a live session has that name,
/// with its id (which the policy's pin on the name may have changed), or why there is none:
/// all [`MAX_INSTANCES`] are live, the broker holds too many, or the pin refuses it.
fn open_named(
    broker: &Broker,
    name: &str,
    identity: Option<crate::Identity>,
) -> Result<(String, (crate::broker::ServerSession, crate::Notifications)), String> {
    for n in 1..=MAX_INSTANCES {
        let id = if n == 1 {
            name.to_owned()
        } else {
            format!("{name}#{n}")
        };
        let opened = match &identity {
            Some(i) => broker.open_session_as(&id, i.clone()),
            None => broker.open_session(&id),
        };
        match opened {
            Ok(s) => return Ok((s.0.server_id().to_owned(), s)),
            // Only a name in use is worth trying the next number for.
            Err(e) if e.kind() == crate::ErrorKind::InvalidRequest => continue,
            Err(e) => return Err(format!("cannot open a session for {name:?}: {e}")),
        }
    }
    Err(format!(
        "cannot open a session for {name:?}: {MAX_INSTANCES} are live, or the daemon holds too many"
    ))
}
