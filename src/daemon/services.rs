//! What the daemon serves beside its broker: the audit ring `log` reads (`log.rs`), the
//! `reload` of its policy, links to its console (`console/`), and the idle timer of
//! `--idle-exit` (`idle.rs`). `dispatch.rs` answers their ops with what is here.
//!
//! - `{"op": "console"}` → `{"ok": true, "url": LINK}`, a fresh one-time sign-in link;
//! - `{"op": "reload"}` → `{"ok": true, "rootsChanged": [...], "rootsRemoved": [...],
//!   "sessionsTold": [...], "watchesEnded": N, "roots": [...]}`, `roots` being the mounts in
//!   force afterwards; a policy that does not load or validate is refused, with why, and the
//!   old one stays in force.

use super::console::Console;
use super::idle::{Busy, Idle};
use super::line::{self, error};
use super::log::Ring;
use super::protocol::{ConsoleLink, Reloaded};
use crate::broker::Broker;
use crate::policy::{Policy, PolicyError};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the daemon builds its policy anew: from its policy file, with its flags over it.
pub(crate) type Rebuild = Box<dyn Fn() -> Result<Policy, PolicyError> + Send + Sync>;

/// The policy file a reload reads, and how the policy is built from it.
pub(crate) struct Reload {
    file: PathBuf,
    rebuild: Rebuild,
    // One reload at a time: two at once would each compare with the same old policy.
    one: Mutex<()>,
}

impl Reload {
    /// A reload of `file`, built by `rebuild`.
    pub(crate) fn new(file: PathBuf, rebuild: Rebuild) -> Reload {
        Reload {
            file,
            rebuild,
            one: Mutex::new(()),
        }
    }
}

impl std::fmt::Debug for Reload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reload")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// The daemon's services, shared by its connections.
#[derive(Debug)]
pub(crate) struct Services {
    log: Ring,
    reload: Option<Reload>,
    idle: Arc<Idle>,
    console: Option<Arc<Console>>,
}

impl Services {
    /// The services of a daemon whose broker is `broker`: its audit ring filled from now on,
    /// `reload` when it has a policy file, and an idle timer of `idle_exit`. Must run on a
    /// tokio runtime.
    pub(crate) fn new(
        broker: &Broker,
        reload: Option<Reload>,
        idle_exit: Option<Duration>,
    ) -> Services {
        Services {
            log: Ring::start(broker),
            reload,
            idle: Idle::new(idle_exit),
            console: None,
        }
    }

    /// The audit ring, which the console streams too.
    pub(crate) fn ring(&self) -> Ring {
        self.log.clone()
    }

    /// Answers `console` with links to `console`.
    pub(crate) fn with_console(mut self, console: Arc<Console>) -> Services {
        self.console = Some(console);
        self
    }

    /// Marks the daemon in use, for its idle timer, until the guard is dropped.
    pub(crate) fn busy(&self) -> Busy {
        self.idle.busy()
    }

    /// Resolves when the daemon has been idle for its `--idle-exit`; never without one.
    pub(crate) async fn idle_expired(&self, broker: &Broker) {
        self.idle.expired(broker).await;
    }

    /// `{"op": "console"}` → `{"ok": true, "url": LINK}`: a fresh sign-in link to the
    /// console, served from now on if it was not.
    pub(crate) fn console_link(&self) -> Value {
        let Some(console) = &self.console else {
            return error("this daemon has no console");
        };
        match super::console::link(console, None) {
            Ok(url) => line::ok(&ConsoleLink { url }),
            Err(e) => error(e),
        }
    }

    /// `{"op": "reload"}`: the policy built anew from the policy file, and what changed; a
    /// refusal, with why, when it does not load or validate (the old one stays in force).
    pub(crate) fn reload(&self, broker: &Broker) -> Value {
        let Some(reload) = &self.reload else {
            return error(
                "this daemon has no policy file to reload: its roots come from its flags \
                 (--root); restart it to change them, or start it with --policy FILE",
            );
        };
        let _one = crate::locks::lock(&reload.one);
        match (reload.rebuild)().and_then(|p| broker.reload(p)) {
            Ok(r) => {
                tracing::info!(trigger = "the reload op", "policy reloaded");
                let roots: Vec<String> = broker
                    .roots()
                    .iter()
                    .map(|r| r.mount().to_string())
                    .collect();
                line::ok(&Reloaded {
                    policy: reload.file.clone(),
                    roots,
                    roots_changed: r.roots_changed,
                    roots_removed: r.roots_removed,
                    sessions_told: r.sessions_told,
                    watches_ended: r.watches_ended,
                })
            }
            Err(e) => {
                tracing::error!(
                    trigger = "the reload op",
                    error = %e,
                    "policy reload refused; the old policy stays in force"
                );
                error(format!(
                    "the policy was not reloaded, and the old one stays in force: {e}"
                ))
            }
        }
    }
}
