//! The audit log as typed events, for any number of subscribers (a host's activity view, the
//! file, a follower of the log): the same records the log writes, with paths in mount form.

use super::{AuditRecord, Decider};
use crate::access::Access;
use crate::error::Reason;
use std::time::{Duration, SystemTime};

/// One audited message, as a subscriber of
/// [`Broker::audit_events`](crate::Broker::audit_events) gets it.
///
/// Paths are in mount form and never redacted (a host's own view of its user's files); a
/// path a server asked for outside every root is never given, only counted, as in the log.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AuditEvent {
    /// When it ended.
    pub time: SystemTime,
    /// The server session.
    pub server_id: String,
    /// The digest of its [`Identity`](crate::Identity), when it is known.
    pub identity: Option<String>,
    /// The JSON-RPC method; empty for a message that was no valid request.
    pub method: String,
    /// The real path it worked on (or the path of its error), in mount form.
    pub path: Option<String>,
    /// `ok`; for consent `partial` or `denied`; `cancelled` when the request was withdrawn
    /// before its answer; else the error's `data.code` (or a protocol fault's name).
    pub outcome: String,
    /// Why it was refused, when it was refused as a violation (outside a root, no grant,
    /// revoked, read-only).
    pub reason: Option<Reason>,
    /// File bytes read or written.
    pub bytes: u64,
    /// The CPU time its work spent (zero for a request that did no filesystem work).
    pub cpu: Duration,
    /// How long it took.
    pub duration: Duration,
    /// What a `files/consent` decided.
    pub consent: Option<ConsentEvent>,
}

/// What one `files/consent` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsentEvent {
    /// The approved paths, in mount form.
    pub approved: Vec<String>,
    /// The denied paths that lie inside a root, in mount form.
    pub denied: Vec<String>,
    /// How many requested paths lay outside every root (denied, never shown).
    pub outside: usize,
    /// The access granted, or asked for when nothing was.
    pub access: Option<Access>,
    /// Who decided, each once, in the order they did.
    pub decided_by: Vec<Decider>,
}

impl AuditEvent {
    pub(crate) fn of(r: &AuditRecord<'_>) -> AuditEvent {
        AuditEvent {
            time: SystemTime::now(),
            server_id: r.server_id.to_owned(),
            identity: r.identity.map(str::to_owned),
            method: r.method.to_owned(),
            path: r.path.map(str::to_owned),
            outcome: r.outcome.to_owned(),
            reason: r.violation.map(|v| v.reason),
            bytes: r.bytes,
            cpu: r.cpu,
            duration: r.duration,
            consent: r.consent.map(|c| ConsentEvent {
                approved: c.approved.clone(),
                denied: c.denied.clone(),
                outside: c.outside.len(),
                access: c.access,
                decided_by: c.decided_by.clone(),
            }),
        }
    }
}
