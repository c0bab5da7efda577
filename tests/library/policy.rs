//! The policy: the example files, load-time errors (file, line, key), what rules, standing
//! grants and per-server roots do through a broker, the command-line builder, and the audit
//! log. The cases are split by concern into the modules under `tests/library/policy/`.

use crate::common::*;

mod audit;
// The command-line builder is the `cli` feature's.
#[cfg(feature = "cli")]
mod behaviour;
mod errors;

use mcp_fsbroker::consent::{AutoConsent, ConsentProvider};
use mcp_fsbroker::policy::Limits;
use mcp_fsbroker::{AuditLog, Broker, Policy};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// Example policies
// ---------------------------------------------------------------------------------------

const EXAMPLES: &[&str] = &["read-only", "multi-root", "per-server"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Loads `policy/NAME.toml`. Its relative root paths resolve against the file's directory,
/// `policy/`, wherever the test runs.
fn example(name: &str) -> Policy {
    let path = manifest_dir().join("policy").join(format!("{name}.toml"));
    Policy::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A broker for an example, with the audit log off (per-server.toml logs to /tmp), and with
/// `provider` in place of the example's consent mode when given.
fn example_broker(name: &str, provider: Option<Arc<dyn ConsentProvider>>) -> Broker {
    let mut builder = Broker::builder(example(name)).audit_log(AuditLog::disabled());
    if let Some(p) = provider {
        builder = builder.consent_provider(p);
    }
    builder.build().expect("broker").0
}

#[test]
fn every_example_policy_loads() {
    for name in EXAMPLES {
        let p = example(name);
        assert!(!p.roots.is_empty(), "{name} declares no roots");
    }
}

#[test]
fn check_policy_accepts_every_example_from_the_repository_root() {
    for name in EXAMPLES {
        let out = std::process::Command::new(bin())
            .arg("check-policy")
            .arg(format!("policy/{name}.toml"))
            .current_dir(manifest_dir())
            .output()
            .expect("run fsbroker");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("[[roots]]"));
    }
}

#[test]
fn check_policy_takes_several_files_and_checks_every_one() {
    let files: Vec<String> = EXAMPLES
        .iter()
        .map(|n| format!("policy/{n}.toml"))
        .collect();
    let out = std::process::Command::new(bin())
        .arg("check-policy")
        .args(&files)
        .current_dir(manifest_dir())
        .output()
        .expect("run fsbroker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each file's configuration is printed under a comment naming it.
    for f in &files {
        assert!(stdout.contains(&format!("# {f}\n")), "{f}: {stdout}");
    }
    // A bad file among good ones fails the whole check, and the files after it are still
    // checked.
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "[limits]\nbogus_limit = 3\n").unwrap();
    let out = std::process::Command::new(bin())
        .arg("check-policy")
        .arg(&bad)
        .args(&files)
        .current_dir(manifest_dir())
        .output()
        .expect("run fsbroker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bogus_limit"), "{stderr}");
    assert!(stderr.contains(&bad.display().to_string()), "{stderr}");
    for f in &files {
        assert!(stdout.contains(&format!("# {f}\n")), "{f}: {stdout}");
    }
}

#[test]
fn embedded_default_parses_with_the_built_in_limits() {
    let p = Policy::from_default_file().expect("default policy");
    assert_eq!(p.limits, Limits::default());
    assert!(p.roots.is_empty());
    assert!(p.grants.is_empty());
    assert_eq!(p.consent.mode, None);
    assert_eq!(p.consent.timeout_secs.get(), 120);
    assert!(p.audit.enabled && !p.audit.redact_paths && p.audit.file.is_none());
}

#[tokio::test]
async fn read_only_example_reads_by_standing_grant_and_refuses_consent() {
    let b = example_broker("read-only", None);
    ok(&read(&b, "any", "project/Cargo.toml").await);
    let r = call(
        &b,
        "any",
        "files/consent",
        json!({"requestedPaths": ["project/src"]}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], false, "mode deny must refuse: {r}");
    let st = call(
        &b,
        "any",
        "files/stat",
        json!({"path": "project/Cargo.toml"}),
    )
    .await;
    assert_eq!(ok(&st)["readonly"], true);
}

#[tokio::test]
async fn multi_root_example_rules_allow_docs_and_deny_code_bin() {
    // The example asks on a terminal; approve instead, so that only the rules deny.
    let b = example_broker("multi-root", Some(Arc::new(AutoConsent)));
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["docs", "code/bin", "code"]}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["approvedPaths"], json!(["docs", "code"]));
    assert_eq!(r["deniedPaths"], json!(["code/bin"]));
    ok(&read(&b, "s", "docs/multi-root.toml").await);
    ok(&read(&b, "s", "code/lib.rs").await);
}

#[tokio::test]
async fn per_server_example_shows_each_server_its_own_roots_and_grants() {
    let b = example_broker("per-server", None);
    let names = |v: Value| -> Vec<String> {
        let list = ok(&v)["roots"].as_array().unwrap().iter();
        list.map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let idx = names(call(&b, "code-indexer", "roots/list", json!({})).await);
    assert_eq!(idx, ["Sources", "Shared policy files"]);
    let tr = names(call(&b, "test-runner", "roots/list", json!({})).await);
    assert_eq!(tr, ["Tests (writable)", "Shared policy files"]);
    let other = names(call(&b, "other", "roots/list", json!({})).await);
    assert_eq!(other, ["Shared policy files"]);
    ok(&read(&b, "code-indexer", "src/lib.rs").await);
    ok(&read(&b, "other", "policy/README.md").await);
    assert_eq!(
        err(&read(&b, "test-runner", "src/lib.rs").await).2,
        "outside_root"
    );
    let stat = |server: &'static str, path: &'static str| {
        let b = b.clone();
        async move { call(&b, server, "files/stat", json!({ "path": path })).await }
    };
    let st = stat("test-runner", "tests/library/policy.rs").await;
    assert_eq!(
        ok(&st)["readonly"],
        false,
        "the write grant must hold: {st}"
    );
    assert_eq!(
        ok(&stat("test-runner", "policy/README.md").await)["readonly"],
        true
    );
}

// ---------------------------------------------------------------------------------------
// Helpers shared by the modules
// ---------------------------------------------------------------------------------------

/// A policy with the fixture's root as mount `project`, then `extra`.
fn with_root(f: &Fixture, extra: &str) -> String {
    format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\n\n{extra}",
        f.root
    )
}

fn broker_from(text: &str) -> Broker {
    let policy = Policy::parse(text, "test").unwrap_or_else(|e| panic!("{e}"));
    Broker::builder(policy)
        .audit_log(AuditLog::disabled())
        .build()
        .expect("broker")
        .0
}

async fn read(b: &Broker, server: &str, path: &str) -> Value {
    call(b, server, "files/read", json!({ "path": path })).await
}
