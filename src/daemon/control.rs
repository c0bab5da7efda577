//! The answers of the control ops that read the broker's sessions or narrow their access
//! (the protocol itself is `protocol/`, and each op is dispatched in `dispatch.rs`):
//!
//! - `{"op": "status"}` → `{"ok": true, "sessions": [...]}`, every live session as
//!   [`Broker::snapshot`] shows it;
//! - `{"op": "revoke", "server": ID?, "path": MOUNTPATH?, "all": BOOL?}` →
//!   `{"ok": true, "revoked": [...], "carved": [...]}`: the grants taken back whole, and
//!   the wider grants the path was carved out of (they stay for the rest); with neither a
//!   server nor a path, only `"all": true` revokes everything;
//! - `{"op": "resume", "server": ID}` → `{"ok": true, "resumed": BOOL}`: lifts a suspension.
//!
//! A request that is refused is answered `{"ok": false, "error": MESSAGE}`, and the
//! connection goes on.

use super::protocol::{self, Resumed};
use super::questions::Attachments;
use crate::broker::{Broker, GrantInfo, Revoked, SessionSnapshot};
use crate::path::MountPath;
use serde_json::{Value, json};
use std::time::SystemTime;

/// Every live session as `status` shows it.
pub(crate) fn status(broker: &Broker, attachments: &Attachments) -> Vec<Value> {
    let roots = broker.roots();
    // The process table, read once and only when a session is attached.
    let mut procs: Option<Option<super::usage::Procs>> = None;
    broker
        .snapshot()
        .iter()
        .map(|s| {
            let mut v = session(s);
            // The roots this session sees, by mount name (their places are the user's).
            let seen: Vec<String> = roots
                .iter()
                .filter(|r| r.visible_to(&s.server_id))
                .map(|r| r.mount().to_string())
                .collect();
            // Those whose directory is no longer at its configured path, looked at now: their
            // requests are refused (`root_unavailable`) until it is back.
            let unavailable: Vec<String> = roots
                .iter()
                .filter(|r| r.visible_to(&s.server_id) && !r.in_place())
                .map(|r| r.mount().to_string())
                .collect();
            if let Value::Object(m) = &mut v {
                m.insert("roots".into(), json!(seen));
                m.insert("unavailable".into(), json!(unavailable));
            }
            if let (Value::Object(m), Some(Value::Object(facts))) =
                (&mut v, attachments.facts(&s.server_id))
            {
                let pid = facts.get("pid").and_then(Value::as_u64);
                let process = pid.and_then(|pid| {
                    let table = procs.get_or_insert_with(super::usage::Procs::read);
                    Some(table.as_ref()?.tree(u32::try_from(pid).ok()?))
                });
                m.insert("attached".into(), Value::Bool(true));
                m.extend(facts);
                m.insert("process".into(), json!(process));
            }
            v
        })
        .collect()
}

/// What a revocation took back, as `revoke` shows it.
pub(crate) struct Taken {
    /// The grants taken back whole.
    pub(crate) revoked: Vec<Value>,
    /// The parts carved out of wider grants, which stay for the rest.
    pub(crate) carved: Vec<Value>,
}

impl Taken {
    /// The successful answer that carries it.
    pub(crate) fn answer(self) -> Value {
        json!({"ok": true, "revoked": self.revoked, "carved": self.carved})
    }
}

/// Revokes what `r` names (see the module's comment), returning what was taken back as
/// `revoke` shows it. The socket's `revoke` and the console's both come here.
pub(crate) fn revoke(broker: &Broker, r: &protocol::Revoke) -> Result<Taken, String> {
    let (server, path, all) = (r.server.as_deref(), r.path.as_deref(), r.all);
    let path = match path {
        Some(p) => Some(
            p.parse::<MountPath>()
                .map_err(|e| format!("{p:?} is not a path in mount form (MOUNT/REL): {e}"))?,
        ),
        None => None,
    };
    let revoked = match (server, &path, all) {
        (Some(_), _, true) | (_, Some(_), true) => {
            return Err("all revokes everything: give it without a server or a path".into());
        }
        (None, None, false) => {
            return Err(
                "revoke needs a server, a path, or \"all\": true to revoke every grant".into(),
            );
        }
        (None, None, true) => broker.revoke_all(),
        (Some(s), None, false) => broker.revoke_session(s).map_err(|e| e.to_string())?,
        (Some(s), Some(p), false) => broker.revoke(s, p).map_err(|e| e.to_string())?,
        (None, Some(p), false) => broker.revoke_path(p),
    };
    let (carved, whole): (Vec<&Revoked>, Vec<&Revoked>) =
        revoked.iter().partition(|r| r.carved_out.is_some());
    Ok(Taken {
        revoked: whole.into_iter().map(revoked_grant).collect(),
        carved: carved.into_iter().map(revoked_grant).collect(),
    })
}

/// Lifts the suspension of session `r.server`: whether it was suspended. The socket's
/// `resume` and the console's both come here.
pub(crate) fn resume(broker: &Broker, r: &protocol::Resume) -> Result<Resumed, String> {
    broker
        .resume(&r.server)
        .map(|resumed| Resumed { resumed })
        .map_err(|e| e.to_string())
}

/// A grant taken back: the grant, its server, and for a part carved out of it, that part
/// (`carvedOut`).
fn revoked_grant(r: &Revoked) -> Value {
    let mut g = grant(&r.grant);
    if let Value::Object(m) = &mut g {
        m.insert("server".into(), json!(r.server_id));
        if let Some(part) = &r.carved_out {
            m.insert("carvedOut".into(), json!(part.to_string()));
        }
    }
    g
}

fn grant(g: &GrantInfo) -> Value {
    json!({
        "path": g.path.to_string(),
        "access": g.access.as_str(),
        "origin": serde_json::to_value(g.origin).unwrap_or(Value::Null),
        "since": when(g.since),
        "except": g.except.iter().map(ToString::to_string).collect::<Vec<_>>(),
        // How long it holds: `once` (the next request), `timed` (until `expires`),
        // `session`, or `standing` (the policy's or a remembered grant).
        "lifetime": match (g.once, g.expires, g.origin) {
            (true, _, _) => "once",
            (_, Some(_), _) => "timed",
            (_, _, crate::consent::GrantOrigin::Standing) => "standing",
            _ => "session",
        },
        "expires": g.expires.map(when),
    })
}

/// Who a server is, as `status`, the console and its questions show it: what it runs
/// ([`crate::Identity::what`]), the first digits of its digest, and what started it; `null`
/// when it could not be told.
pub(crate) fn program_shown(identity: Option<&crate::Identity>) -> Value {
    identity.map_or(Value::Null, |i| {
        json!({
            "what": i.what(),
            "digest": i.short(),
            "launchedBy": i.launched_by,
        })
    })
}

fn session(s: &SessionSnapshot) -> Value {
    let c = &s.counters;
    json!({
        "server": s.server_id,
        "identity": s.identity,
        "program": program_shown(s.identity.as_ref()),
        "started": when(s.started),
        "grants": s.grants.iter().map(grant).collect::<Vec<_>>(),
        "watches": s.watches.iter().map(|w| json!({
            "id": w.watch_id,
            "path": w.path.to_string(),
            "recursive": w.recursive,
        })).collect::<Vec<_>>(),
        "uploads": s.uploads.iter().map(|u| json!({
            "path": u.path.to_string(),
            "stagedBytes": u.staged_bytes,
        })).collect::<Vec<_>>(),
        "inFlight": s.in_flight,
        "counters": {
            "requests": c.requests,
            "failed": c.failed,
            "refused": c.refused,
            "cancelled": c.cancelled,
            "bytesRead": c.bytes_read,
            "bytesWritten": c.bytes_written,
            "entriesListed": c.entries_listed,
            "cpuMs": u64::try_from(c.cpu.as_millis()).unwrap_or(u64::MAX),
            "throttled": c.throttled,
        },
        "suspended": s.suspended.as_ref().map(|x| json!({
            "since": when(x.since),
            "total": x.total(),
            "summary": x.summary(),
            "violations": x.violations.iter()
                .map(|(r, n)| (r.as_str().to_owned(), json!(n)))
                .collect::<serde_json::Map<_, _>>(),
        })),
        "throttled": s.throttled.map(|(at, budget)| json!({"at": when(at), "budget": budget})),
        "lastActivity": s.last_activity.as_ref().map(|a| json!({
            "at": when(a.at),
            "method": a.method,
            "path": a.path,
            "outcome": a.outcome,
        })),
    })
}

/// A time in RFC 3339, UTC.
pub(crate) fn when(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
