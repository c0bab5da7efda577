//! Helpers shared by the black-box tests: a temporary tree with a root and an outside canary,
//! a broker over it, and one-line request helpers.

use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub mod confinement;
pub mod fs;
pub mod pty;
pub mod wire;
pub mod write;

/// A temporary tree: `<tmp>/project` (the root, mount `project`), `<tmp>/project2` (a sibling
/// whose name extends the root's, a prefix-collision trap) and `<tmp>/outside` (a canary
/// directory holding `secret.txt`). Nothing outside `project` may ever be read or changed.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    /// Where the fixture's recovery store goes: apart from `tmp`, whose every change outside
    /// the root the confinement suites count as an escape.
    pub kept: tempfile::TempDir,
    pub root: PathBuf,
    pub sibling: PathBuf,
    pub outside: PathBuf,
}

pub const SECRET: &str = "TOP-SECRET-CANARY";

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("project");
        let sibling = tmp.path().join("project2");
        let outside = tmp.path().join("outside");
        for d in [&root, &sibling, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        std::fs::write(sibling.join("secret.txt"), SECRET).unwrap();
        Fixture {
            tmp,
            kept: tempfile::tempdir().expect("tempdir"),
            root,
            sibling,
            outside,
        }
    }

    /// Writes a file under the root (creating parents).
    pub fn file(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Creates a directory under the root.
    pub fn dir(&self, rel: &str) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Creates a symlink at `rel` under the root pointing at `target` (verbatim).
    pub fn symlink(&self, target: impl AsRef<Path>, rel: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    /// The policy text for this fixture's root, plus `extra` TOML appended.
    /// The recovery store is the fixture's own (`<tmp>/store`), unless `extra` has a
    /// `[recovery]` section: tests never share one.
    pub fn policy_text(&self, access: &str, extra: &str) -> String {
        let recovery = if extra.contains("[recovery]") {
            String::new()
        } else {
            format!("\n[recovery]\ndir = {:?}\n", self.store())
        };
        format!(
            "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"{access}\"\n\n[audit]\nenabled = false\n\n{extra}{recovery}",
            self.root
        )
    }

    /// The fixture's recovery store, outside the root and apart from `tmp`.
    pub fn store(&self) -> PathBuf {
        self.kept.path().join("store")
    }

    /// A broker with consent mode `auto` (read-only root unless `access` is `write`).
    ///
    /// Its sessions are never suspended for their violations: the suites that use it send
    /// every spelling of an escape from one session and check each refusal's own reason.
    /// Suspension has its tests of its own (`tests/library/monitoring.rs`), which build
    /// their brokers from [`Fixture::policy_text`].
    pub fn broker_with(&self, access: &str, extra: &str) -> Broker {
        let extra = unsuspended(extra);
        let text = self.policy_text(access, &extra);
        let text = if text.contains("[consent]") {
            text
        } else {
            format!("{text}\n[consent]\nmode = \"auto\"\n")
        };
        let policy = Policy::parse(&text, "test").expect("policy");
        Broker::builder(policy).build().expect("broker").0
    }

    /// A broker with a read-only root and automatic consent.
    pub fn broker(&self) -> Broker {
        self.broker_with("read", "")
    }

    /// Asserts that the canary files are untouched.
    pub fn assert_canary_intact(&self) {
        for d in [&self.outside, &self.sibling] {
            assert_eq!(
                std::fs::read_to_string(d.join("secret.txt")).unwrap(),
                SECRET
            );
            let names: Vec<_> = std::fs::read_dir(d).unwrap().collect();
            assert_eq!(names.len(), 1, "canary directory {d:?} changed");
        }
    }
}

/// `extra` with `limits.max_violations_per_minute` lifted, in its `[limits]` section if it
/// has one.
fn unsuspended(extra: &str) -> String {
    const LIFT: &str = "max_violations_per_minute = 1000000\n";
    if extra.contains("max_violations_per_minute") {
        extra.to_owned()
    } else if let Some(at) = extra.find("[limits]\n") {
        let at = at + "[limits]\n".len();
        format!("{}{LIFT}{}", &extra[..at], &extra[at..])
    } else {
        format!("{extra}\n[limits]\n{LIFT}")
    }
}

/// Sends one request and returns the whole response object.
pub async fn call(broker: &Broker, server: &str, method: &str, params: Value) -> Value {
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    broker
        .handle_message(server, req)
        .await
        .expect("a request gets a response")
}

/// Grants consent on the whole `project` root to `server` (mode must approve).
pub async fn consent_all(broker: &Broker, server: &str) {
    let r = call(
        broker,
        server,
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(r["result"]["granted"], true, "consent refused: {r}");
}

/// The result of a successful response, or a panic showing the error.
pub fn ok(resp: &Value) -> &Value {
    assert!(resp.get("error").is_none(), "expected success, got {resp}");
    &resp["result"]
}

/// (code, data.code, data.reason) of an error response, or a panic showing the result.
pub fn err(resp: &Value) -> (i64, String, String) {
    let e = resp
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {resp}"));
    (
        e["code"].as_i64().unwrap(),
        e["data"]["code"].as_str().unwrap_or("").to_owned(),
        e["data"]["reason"].as_str().unwrap_or("").to_owned(),
    )
}

/// A broker from policy text, or the error that refused it (parse or build), as text.
pub fn try_broker(text: &str) -> Result<Broker, String> {
    let policy = Policy::parse(text, "test").map_err(|e| e.to_string())?;
    Broker::builder(policy)
        .build()
        .map(|(b, _)| b)
        .map_err(|e| e.to_string())
}

/// The path to the built `fsbroker` binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fsbroker"))
}

/// Asserts that `r` is the error (code, data.code, data.reason).
pub fn assert_error(r: &Value, code: i64, data_code: &str, reason: &str) {
    let (c, d, why) = err(r);
    assert_eq!(
        (c, d.as_str(), why.as_str()),
        (code, data_code, reason),
        "{r}"
    );
}

/// A broker over a read-only root (automatic consent) with consent granted on the whole root
/// to server `s`.
pub async fn consented(f: &Fixture) -> Broker {
    let b = f.broker();
    consent_all(&b, "s").await;
    b
}

/// Like [`consented`], with a rate limit high enough for tests that send many requests.
pub async fn consented_unthrottled(f: &Fixture) -> Broker {
    let b = f.broker_with(
        "read",
        "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n",
    );
    consent_all(&b, "s").await;
    b
}
