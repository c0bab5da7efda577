//! What a host's permissions screen shows: each session's grants, watches, uploads, work in
//! flight, counters and last request, and what a revocation took back.

use crate::access::Access;
use crate::consent::grants::{Grants, Taken};
use crate::consent::{Grant, GrantOrigin};
use crate::path::MountPath;
use crate::session::{Counters, Session};
use crate::watch::WatchHub;
use std::time::SystemTime;

/// One live session, as [`Broker::snapshot`](crate::Broker::snapshot) shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionSnapshot {
    /// The server id.
    pub server_id: String,
    /// Who its server is, when that could be told (see [`crate::Identity`]).
    pub identity: Option<crate::Identity>,
    /// When the session began.
    pub started: SystemTime,
    /// The grants it holds.
    pub grants: Vec<GrantInfo>,
    /// Its watches.
    pub watches: Vec<WatchInfo>,
    /// Its chunked uploads not yet committed.
    pub uploads: Vec<UploadInfo>,
    /// Its operations running now.
    pub in_flight: usize,
    /// What it has done so far.
    pub counters: Counters,
    /// Its last request, once one was answered.
    pub last_activity: Option<Activity>,
    /// Its suspension, while it is suspended for its violations.
    pub suspended: Option<crate::watchdog::Suspension>,
    /// The last time it was refused for a budget it had spent, and which: `requests`,
    /// `bytes` or `cpu`.
    pub throttled: Option<(SystemTime, &'static str)>,
}

/// One grant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrantInfo {
    /// The path granted, with everything beneath it.
    pub path: MountPath,
    /// What it allows.
    pub access: Access,
    /// Where it comes from.
    pub origin: GrantOrigin,
    /// When it was given.
    pub since: SystemTime,
    /// The parts of it taken back since (revoked paths beneath it): the grant holds for
    /// everything else.
    pub except: Vec<MountPath>,
    /// When a timed grant ends (it is refused from then on); `None` for one that lasts
    /// its session.
    pub expires: Option<SystemTime>,
    /// Whether it holds for the next request only.
    pub once: bool,
}

/// One watch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchInfo {
    /// The id the server was given.
    pub watch_id: String,
    /// The real path watched, in mount form.
    pub path: MountPath,
    /// Whether changes at any depth are reported.
    pub recursive: bool,
}

/// One chunked upload not yet committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadInfo {
    /// The target, as requested, in mount form.
    pub path: MountPath,
    /// The bytes staged so far.
    pub staged_bytes: u64,
}

/// A session's last request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Activity {
    /// When it ended.
    pub at: SystemTime,
    /// Its method.
    pub method: String,
    /// The path it worked on, in mount form, when it had one.
    pub path: Option<String>,
    /// `ok`, `cancelled`, or its error's `data.code`.
    pub outcome: String,
}

/// A grant a revocation took back, whole or in part.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Revoked {
    /// The session that held it.
    pub server_id: String,
    /// The grant.
    pub grant: GrantInfo,
    /// When only a part of the grant was taken back, that part: the grant stays for the
    /// rest. `None` when the whole grant went.
    pub carved_out: Option<MountPath>,
}

impl GrantInfo {
    fn of(g: &Grant, grants: &Grants) -> GrantInfo {
        GrantInfo {
            path: g.path.clone(),
            access: g.access,
            origin: g.origin,
            since: g.since,
            except: grants.carved_out_of(&g.path),
            expires: g.expires(),
            once: g.once(),
        }
    }
}

impl Revoked {
    /// What `taken` took from the session `server_id`: the grants gone whole, then those
    /// `path` was carved out of.
    pub(crate) fn of(
        server_id: &str,
        taken: Taken,
        path: Option<&MountPath>,
        grants: &Grants,
    ) -> Vec<Revoked> {
        let whole = taken.gone.into_iter().map(|g| Revoked {
            server_id: server_id.to_owned(),
            grant: GrantInfo::of(&g, grants),
            carved_out: None,
        });
        let part = taken.carved.into_iter().map(|g| Revoked {
            server_id: server_id.to_owned(),
            grant: GrantInfo::of(&g, grants),
            carved_out: path.cloned(),
        });
        whole.chain(part).collect()
    }
}

impl SessionSnapshot {
    pub(crate) fn of(s: &Session, hub: &WatchHub) -> SessionSnapshot {
        let stats = s.stats().clone();
        let mut watches: Vec<WatchInfo> = hub
            .of_session(s)
            .iter()
            .map(|w| WatchInfo {
                watch_id: w.id.clone(),
                path: w.path.clone(),
                recursive: w.recursive,
            })
            .collect();
        watches.sort_by(|a, b| a.watch_id.cmp(&b.watch_id));
        let mut uploads: Vec<UploadInfo> = s
            .uploads()
            .staged()
            .into_iter()
            .map(|(path, staged_bytes)| UploadInfo { path, staged_bytes })
            .collect();
        uploads.sort_by_key(|u| u.path.to_string());
        SessionSnapshot {
            server_id: s.server_id().to_owned(),
            identity: s.identity().cloned(),
            started: s.started,
            grants: {
                let grants = s.grants();
                grants
                    .held()
                    .iter()
                    .map(|g| GrantInfo::of(g, &grants))
                    .collect()
            },
            watches,
            uploads,
            in_flight: s.running(),
            counters: stats.counters,
            suspended: s.suspension(),
            throttled: stats.throttled,
            last_activity: stats.last.map(|(at, method, path, outcome)| Activity {
                at,
                method,
                path,
                outcome,
            }),
        }
    }
}
