//! The roots a sandboxed server may reach, and the watch that ends it when one is taken
//! away. They come from the broker that answers the server (the proxy's own or the user's
//! daemon, alike), which describes its roots, with each directory's identity, now and after
//! every policy change.

use crate::attaching::{DescribedRoot, Door, Following, Kept};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;

/// Where the sandbox learns the roots: the broker behind `door`, which described its roots
/// as `roots` when the proxy started.
#[derive(Clone)]
pub(crate) struct RootSource {
    /// The broker's door.
    pub(crate) door: Arc<dyn Door>,
    /// Its roots as it described them.
    pub(crate) roots: Vec<DescribedRoot>,
    /// The places the broker keeps for itself, as it said.
    pub(crate) kept: Kept,
}

/// One root the sandbox opens to the server: its real directory, pinned by device and inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SandboxRoot {
    pub(super) mount: String,
    pub(super) path: PathBuf,
    pub(super) pin: (u64, u64),
    pub(super) write: bool,
}

/// Whether a root offered to `servers` is seen by the session `server_id`; without a
/// configured id, only a root offered to every server is, since the session's name is known
/// only once the server has answered `initialize`.
fn seen(servers: &[String], server_id: Option<&str>) -> bool {
    match server_id {
        Some(id) => crate::access::matches_server(servers, id),
        None => servers.iter().any(|s| s == "*"),
    }
}

impl RootSource {
    /// The roots the server may reach (see [`super::spawn_sandboxed`]).
    pub(super) fn sandbox_roots(&self, server_id: Option<&str>) -> Vec<SandboxRoot> {
        sandbox_roots(&self.roots, server_id)
    }

    /// Every root's directory, seen by the server or not.
    pub(super) fn all_roots(&self) -> Vec<PathBuf> {
        self.roots.iter().map(|r| r.path.clone()).collect()
    }

    /// The socket the broker is reached through, when it is one.
    pub(super) fn socket(&self) -> Option<&std::path::Path> {
        self.door.socket()
    }

    /// The places the broker keeps for itself, as it named them.
    pub(super) fn kept(&self) -> Kept {
        self.kept.clone()
    }
}

fn sandbox_roots(roots: &[DescribedRoot], server_id: Option<&str>) -> Vec<SandboxRoot> {
    let mut out = Vec::new();
    for r in roots {
        if !seen(&r.servers, server_id) {
            left_out(&r.mount, server_id);
            continue;
        }
        match r.pin {
            Some(pin) => out.push(SandboxRoot {
                mount: r.mount.clone(),
                path: r.path.clone(),
                pin,
                write: r.access == crate::access::Access::Write,
            }),
            None => {
                tracing::warn!(mount = %r.mount, "sandbox: root left out: the broker cannot say what its directory is")
            }
        }
    }
    out
}

fn left_out(mount: &str, server_id: Option<&str>) {
    if server_id.is_none() {
        tracing::info!(
            mount,
            "sandbox: root offered to named servers only is left out; pass --server-id to include it"
        );
    }
}

/// Waits for policy changes and ends the server when one of `started` is gone or narrowed:
/// a Landlock domain can be neither widened nor narrowed from outside, so the kernel would
/// go on allowing what the user took back. A root added is logged: the server sees it after
/// a restart. A daemon that goes away is followed again once it answers (the policy of a
/// new daemon is checked as a change).
pub(super) async fn police(
    source: RootSource,
    server_id: Option<String>,
    started: Vec<SandboxRoot>,
    mut stop: oneshot::Sender<()>,
    ended: Arc<AtomicBool>,
) {
    let id = server_id.as_deref();
    let mut backoff = Duration::from_millis(100);
    loop {
        if let Ok(mut following) = Following::start(source.door.as_ref()).await {
            backoff = Duration::from_millis(100);
            loop {
                let next = tokio::select! {
                    d = following.next() => d,
                    _ = stop.closed() => return,
                };
                let Some(described) = next else { break };
                if taken(&started, &sandbox_roots(&described.roots, id)) {
                    return end(stop, &ended);
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.closed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Whether a root of `started` is gone from `now` or narrowed there (said at warn); roots
/// added are said at info.
fn taken(started: &[SandboxRoot], now: &[SandboxRoot]) -> bool {
    let taken: Vec<&str> = started
        .iter()
        .filter(|s| {
            !now.iter()
                .any(|n| n.mount == s.mount && n.pin == s.pin && (n.write || !s.write))
        })
        .map(|t| t.mount.as_str())
        .collect();
    if !taken.is_empty() {
        tracing::warn!(
            roots = ?taken,
            "sandbox: a root the server was started with was removed or narrowed; ending the server (the kernel cannot take back what it allows a running process)"
        );
        return true;
    }
    let added: Vec<&str> = now
        .iter()
        .filter(|n| !started.iter().any(|s| s.mount == n.mount))
        .map(|n| n.mount.as_str())
        .collect();
    if !added.is_empty() {
        tracing::info!(
            roots = ?added,
            "sandbox: roots added; the running server can reach them on disk only after a restart"
        );
    }
    false
}

fn end(stop: oneshot::Sender<()>, ended: &AtomicBool) {
    ended.store(true, Ordering::SeqCst);
    let _ = stop.send(());
}
