//! What the daemon serves beside `status` and `revoke` (`control.rs`): the audit stream of
//! `log` (`log.rs`), the `reload` of its policy, links to its console (`console/`), and the
//! idle timer of `--idle-exit` (`idle.rs`). Their ops are answered here; the others go on to
//! `control.rs`.
//!
//! - `{"op": "console"}` → `{"ok": true, "url": LINK}`, a fresh one-time sign-in link;
//! - `{"op": "reload"}` → `{"ok": true, "rootsChanged": [...], "rootsRemoved": [...],
//!   "sessionsTold": [...], "watchesEnded": N, "roots": [...]}`, `roots` being the mounts in
//!   force afterwards; a policy that does not load or validate is refused, with why, and the
//!   old one stays in force.

use super::console::Console;
use super::idle::{Busy, Idle};
use super::line::error;
use super::log::{Follow, Ring};
use crate::broker::Broker;
use crate::policy::{Policy, PolicyError};
use serde::Deserialize;
use serde_json::{Value, json};
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

/// An answer of these services.
#[derive(Debug)]
pub(crate) enum Reply {
    /// One line, and the connection goes on.
    Line(Value),
    /// A first line, then the stream of new events until the client goes.
    Follow(Value, Follow),
}

/// Only the op, to tell whose a request is.
#[derive(Deserialize)]
struct Op {
    op: Option<String>,
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

    /// The answer to `line` when its op is one of these services' (`log`, `reload`); `None`
    /// for the others.
    pub(crate) fn answer(&self, broker: &Broker, line: &[u8]) -> Option<Reply> {
        let op = serde_json::from_slice::<Op>(line).ok()?.op?;
        match op.as_str() {
            "log" => Some(match self.log.answer(line) {
                (first, Some(follow)) => Reply::Follow(first, follow),
                (only, None) => Reply::Line(only),
            }),
            "reload" => Some(Reply::Line(self.reload(broker, line))),
            "console" => Some(Reply::Line(self.console_link(line))),
            _ => None,
        }
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
    fn console_link(&self, line: &[u8]) -> Value {
        if let Err(refused) = only_op(line, "console") {
            return refused;
        }
        let Some(console) = &self.console else {
            return error("this daemon has no console");
        };
        match super::console::link(console, None) {
            Ok(url) => json!({"ok": true, "url": url}),
            Err(e) => error(e),
        }
    }

    fn reload(&self, broker: &Broker, line: &[u8]) -> Value {
        if let Err(refused) = only_op(line, "reload") {
            return refused;
        }
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
                json!({
                    "ok": true,
                    "policy": reload.file,
                    "rootsChanged": r.roots_changed,
                    "rootsRemoved": r.roots_removed,
                    "sessionsTold": r.sessions_told,
                    "watchesEnded": r.watches_ended,
                    "roots": roots,
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

/// Nothing, when `line` holds no field but its op; else the answer that says so (`what` is
/// the op, for the message).
fn only_op(line: &[u8], what: &str) -> Result<(), Value> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        #[allow(dead_code)] // The dispatch read it.
        op: String,
    }
    serde_json::from_slice::<Request>(line)
        .map(drop)
        .map_err(|e| {
            error(format!(
                "not a {what} request (it takes nothing but op): {e}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RootEntry;

    fn line(s: &Services, b: &Broker, req: &str) -> Value {
        match s.answer(b, req.as_bytes()) {
            Some(Reply::Line(v)) => v,
            other => panic!("{req}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn reload_reports_what_changed_and_refuses_a_bad_policy() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (dir.path().join("one"), dir.path().join("two"));
        std::fs::create_dir(&one).unwrap();
        std::fs::create_dir(&two).unwrap();
        let file = dir.path().join("policy.toml");
        std::fs::write(&file, "[[roots]]\npath = \"one\"\n").unwrap();
        let (broker, _n) = Broker::builder(Policy::load(&file).unwrap())
            .build()
            .unwrap();
        let from = file.clone();
        let rebuild: Rebuild = Box::new(move || Policy::load_for_reload(&from));
        let s = Services::new(&broker, Some(Reload::new(file.clone(), rebuild)), None);
        std::fs::write(&file, "[[roots]]\npath = \"two\"\n").unwrap();
        let a = line(&s, &broker, r#"{"op":"reload"}"#);
        assert_eq!(a["ok"], true, "{a}");
        assert_eq!(a["rootsChanged"], json!(["two"]), "{a}");
        assert_eq!(a["rootsRemoved"], json!(["one"]), "{a}");
        assert_eq!(a["roots"], json!(["two"]), "{a}");
        std::fs::write(&file, "[[roots]]\npath = \"two\"\nbogus = 1\n").unwrap();
        let a = line(&s, &broker, r#"{"op":"reload"}"#);
        assert_eq!(a["ok"], false, "{a}");
        let why = a["error"].as_str().unwrap();
        assert!(
            why.contains("old one stays") && why.contains("bogus"),
            "{a}"
        );
        assert_eq!(broker.roots().iter().count(), 1);
        let a = line(&s, &broker, r#"{"op":"reload","all":true}"#);
        assert_eq!(a["ok"], false, "{a}");
    }

    #[tokio::test]
    async fn without_a_policy_file_reload_says_so_and_other_ops_pass_on() {
        let dir = tempfile::tempdir().unwrap();
        let policy = Policy::new().root(RootEntry::new("demo", dir.path()));
        let (broker, _n) = Broker::builder(policy).build().unwrap();
        let s = Services::new(&broker, None, None);
        let a = line(&s, &broker, r#"{"op":"reload"}"#);
        assert_eq!(a["ok"], false, "{a}");
        assert!(
            a["error"].as_str().unwrap().contains("no policy file"),
            "{a}"
        );
        assert!(s.answer(&broker, br#"{"op":"status"}"#).is_none());
        assert!(s.answer(&broker, b"{").is_none());
        assert!(matches!(
            s.answer(&broker, br#"{"op":"log","follow":true}"#),
            Some(Reply::Follow(..))
        ));
    }
}
