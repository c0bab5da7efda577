//! Where an embedded broker's audit goes: by default nowhere the host did not choose (no line
//! on the host's stderr), and to a callback or a file when the host says so.

use crate::common::Fixture;
use mcp_fsbroker::policy::{Policy, RootEntry};
use mcp_fsbroker::wire::{ConsentParams, ReadParams};
use mcp_fsbroker::{AuditLog, Broker};
use std::sync::{Arc, Mutex};

/// Set in the child process that plays the host.
const CHILD: &str = "FSBROKER_EMBED_AUDIT_CHILD";

/// A host's requests with the default audit: a read refused and a consent.
async fn host_requests(audit: Option<AuditLog>) {
    let f = Fixture::new();
    f.file("a.txt", "x");
    let policy = Policy::new().root(RootEntry::new("project", &f.root));
    let builder = Broker::builder(policy).consent_provider(mcp_fsbroker::consent::from_fn(
        |req| async move { mcp_fsbroker::ConsentDecision::approve_all(&req) },
    ));
    let builder = match audit {
        Some(a) => builder.audit_log(a),
        None => builder,
    };
    let (broker, _outbound) = builder.build().unwrap();
    let read = ReadParams::new("project/a.txt");
    assert!(broker.call("s", read.clone()).await.is_err());
    let consent = ConsentParams::new(["project"]);
    broker.call("s", consent).await.unwrap();
    broker.call("s", read).await.unwrap();
}

/// Only does anything in the child process: the host of the test below.
#[tokio::test]
async fn child_host_with_the_default_audit() {
    if std::env::var_os(CHILD).is_some() {
        host_requests(None).await;
    }
}

#[test]
fn the_default_audit_writes_nothing_to_the_host_s_stderr() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "embed_audit::child_host_with_the_default_audit",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the host failed: {stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.trim().is_empty(),
        "the library wrote to stderr: {stderr}"
    );
}

#[tokio::test]
async fn the_audit_goes_to_the_host_s_callback() {
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = lines.clone();
    host_requests(Some(AuditLog::to_fn(move |line| {
        sink.lock().unwrap().push(line.to_owned())
    })))
    .await;
    let lines = lines.lock().unwrap();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["reason"], "no_consent");
    assert!(lines[1].contains("\"method\":\"files/consent\""));
}
