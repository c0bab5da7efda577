//! Live policy: [`Broker::reload`] puts a new policy in force, and [`watch_policy`] makes the
//! sidecar reload on SIGHUP and when the policy file changes. A policy that does not load is
//! refused with a log line, and the old one stays in force.

use crate::access::Access;
use crate::broker::{Broker, standing_grants};
use crate::config::Config;
use crate::path::{MountPath, RelPath};
use crate::policy::{Policy, PolicyError};
use crate::session::Session;
use crate::state::BrokerState;
use crate::watch::Sink;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Mounts that are new or whose directory, access or servers changed.
    pub roots_changed: Vec<String>,
    /// Mounts that are gone.
    pub roots_removed: Vec<String>,
    /// Sessions sent `notifications/roots/list_changed`.
    pub sessions_told: Vec<String>,
    /// Watches ended because their root went away or their grant was revoked.
    pub watches_ended: usize,
}

/// One root as a session sees it: two views are the same when every field is.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// The mount name.
    mount: String,
    /// The root's URI.
    uri: String,
    /// The display name.
    name: String,
    /// The access the root allows.
    access: Access,
    /// The servers that see the root (empty in a session's own view).
    servers: Vec<String>,
}

/// The roots as a session sees them (all roots, with their servers, for `None`), for telling
/// what changed.
fn seen(config: &Config, server_id: Option<&str>) -> Vec<Seen> {
    config
        .roots
        .iter()
        .filter(|r| server_id.is_none_or(|id| r.visible_to(id)))
        .map(|r| {
            let servers = match server_id {
                Some(_) => Vec::new(),
                None => r.servers().to_vec(),
            };
            Seen {
                mount: r.mount().to_string(),
                uri: r.uri(),
                name: r.display_name().to_owned(),
                access: r.access(),
                servers,
            }
        })
        .collect()
}

impl Broker {
    /// Puts `policy` in force: roots are opened anew, each session whose visible roots changed
    /// is sent `notifications/roots/list_changed`, standing grants are replaced (a removed one is
    /// revoked), grants under a root a session no longer sees are revoked, and watches whose
    /// root is gone or whose grant was revoked end (their server is told). The settings the
    /// host made on the [`BrokerBuilder`](crate::BrokerBuilder) stay in force over `policy`'s
    /// values. On error nothing changes.
    pub fn reload(&self, policy: Policy) -> Result<ReloadReport, PolicyError> {
        self.reload_with(|old| (policy, old.overrides.clone()))
    }

    /// Lays `layer` (the user's run-time edits) over the policy in force in place of the
    /// one laid before, as a reload of that policy would put it in force.
    #[cfg(feature = "cli")]
    pub(crate) fn set_layer(
        &self,
        layer: crate::policy::Layer,
    ) -> Result<ReloadReport, PolicyError> {
        self.reload_with(|old| {
            let mut overrides = old.overrides.clone();
            overrides.set_layer(layer);
            (old.base.clone(), overrides)
        })
    }

    /// The reload of the policy and settings `next` makes of the configuration in force.
    fn reload_with(
        &self,
        next: impl FnOnce(&Config) -> (Policy, crate::policy::Overrides),
    ) -> Result<ReloadReport, PolicyError> {
        let inner = &self.inner;
        let _one = crate::locks::lock(&inner.reloading);
        let old = inner.config();
        let (policy, overrides) = next(&old);
        let new = Arc::new(Config::open(
            policy,
            &inner.consent,
            &overrides,
            Some(&old),
        )?);
        inner.set_config(new.clone());
        let mut report = compare(&old, &new);
        for session in inner.sessions() {
            let sid = session.server_id().to_owned();
            let before = seen(&old, Some(&sid));
            let after = seen(&new, Some(&sid));
            if before != after {
                inner.notify(&sid, "notifications/roots/list_changed", None, None);
                report.sessions_told.push(sid.clone());
            }
            // A reload that takes grants back is the user's choice, as a revocation is.
            session.forgive(crate::error::Reason::Revoked);
            regrant(&session, &new, &before, &after);
            report.watches_ended += end_watches(inner, &session, &new);
        }
        tracing::info!(
            changed = ?report.roots_changed,
            removed = ?report.roots_removed,
            told = report.sessions_told.len(),
            watches_ended = report.watches_ended,
            "policy reloaded"
        );
        Ok(report)
    }
}

/// Ends the watches of `session` whose root is gone from `new` (or is another directory now)
/// or whose grant was revoked, telling its server; answers how many.
fn end_watches(inner: &BrokerState, session: &Session, new: &Config) -> usize {
    let sid = session.server_id();
    let mut ended = 0;
    for w in inner.hub.of_session(session) {
        let same_root = new.roots.iter().any(|r| {
            r.visible_to(sid)
                && r.mount() == w.root.mount()
                && r.host_path_of(&RelPath::root()) == w.root.host_path_of(&RelPath::root())
        });
        let reason = if !same_root {
            Some("root_removed")
        } else if session.grants().check(&w.path, Access::Read).is_err() {
            Some("revoked")
        } else {
            None
        };
        if let Some(reason) = reason {
            inner.end_watch(&w.id, reason);
            ended += 1;
        }
    }
    ended
}

/// The report of a reload from `old` to `new` as far as the roots tell it: the mounts that
/// are new or changed, and those gone.
fn compare(old: &Config, new: &Config) -> ReloadReport {
    let mut report = ReloadReport::default();
    let all_old = seen(old, None);
    let all_new = seen(new, None);
    for r in &all_new {
        if !all_old.contains(r) {
            report.roots_changed.push(r.mount.clone());
        }
    }
    for r in &all_old {
        if !all_new.iter().any(|n| n.mount == r.mount) {
            report.roots_removed.push(r.mount.clone());
        }
    }
    report
}

/// Replaces `session`'s standing grants with those of `new` (a removed or narrowed one is
/// revoked), and revokes its grants under the roots it saw `before` and no longer sees
/// `after`.
fn regrant(session: &Session, new: &Config, before: &[Seen], after: &[Seen]) {
    let mut grants = session.grants();
    let old_standing = grants.remove_standing();
    let (fresh, held_back) = standing_grants(new, session.server_id(), session.identity());
    *session.held_back() = held_back;
    for g in &old_standing {
        if !fresh
            .iter()
            .any(|f| f.path == g.path && f.access >= g.access)
        {
            grants.revoke(Some(&g.path));
        }
    }
    for g in fresh {
        grants.add(g);
    }
    for gone in before
        .iter()
        .filter(|b| !after.iter().any(|a| a.mount == b.mount))
    {
        if let Ok(m) = crate::path::MountName::new(&gone.mount) {
            grants.revoke(Some(&MountPath {
                mount: m,
                rel: RelPath::root(),
            }));
        }
    }
}

/// Reloads the policy built by `build` on SIGHUP, and when `file` changes (checked every
/// `poll`, as is whether each root is still at its configured path). Runs until the task is
/// dropped.
pub async fn watch_policy<F>(broker: Broker, build: F, file: Option<PathBuf>, poll: Duration)
where
    F: Fn() -> Result<Policy, PolicyError>,
{
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup()).ok();
    let mut last = file.as_deref().and_then(crate::policy::file_stamp);
    let mut tick = tokio::time::interval(poll);
    loop {
        let why = tokio::select! {
            Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
            _ = tick.tick() => {
                // Roots that moved are found here too, so an idle session still hears of it.
                let inner = &broker.inner;
                inner.check_roots(&inner.config());
                let now = file.as_deref().and_then(crate::policy::file_stamp);
                if now == last || now.is_none() {
                    continue;
                }
                last = now;
                "the policy file changed"
            }
        };
        match build().and_then(|p| broker.reload(p)) {
            Ok(_) => tracing::info!(trigger = why, "policy reloaded"),
            Err(e) => tracing::error!(
                trigger = why,
                error = %e,
                "policy reload refused; the old policy stays in force"
            ),
        }
    }
}
