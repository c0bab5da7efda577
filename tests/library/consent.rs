//! `files/consent`: modes, coverage, access, custom providers, time limit, revocation and
//! sessions.

use crate::common::*;
use mcp_fsbroker::consent::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest};
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

async fn consent(b: &Broker, server: &str, paths: &[&str], access: Option<&str>) -> Value {
    let mut params = json!({"requestedPaths": paths});
    if let Some(a) = access {
        params["access"] = json!(a);
    }
    let r = call(b, server, "files/consent", params).await;
    ok(&r).clone()
}

async fn read(b: &Broker, server: &str, path: &str) -> Value {
    call(b, server, "files/read", json!({"path": path})).await
}

/// The reason of a failed read, or "" when it succeeded.
async fn read_reason(b: &Broker, server: &str, path: &str) -> String {
    let r = read(b, server, path).await;
    if r.get("error").is_none() {
        return String::new();
    }
    let (code, data_code, reason) = err(&r);
    assert_eq!(
        (code, data_code.as_str()),
        (-31002, "PERMISSION_DENIED"),
        "{r}"
    );
    reason
}

fn with_provider(f: &Fixture, access: &str, extra: &str, p: impl ConsentProvider) -> Broker {
    let policy = Policy::parse(&f.policy_text(access, extra), "test").expect("policy");
    Broker::builder(policy)
        .consent_provider(Arc::new(p))
        .build()
        .expect("broker")
        .0
}

#[tokio::test]
async fn deny_mode_refuses_with_a_result_and_reads_stay_without_consent() {
    let f = Fixture::new();
    f.file("a/f.txt", "f");
    let b = f.broker_with("read", "[consent]\nmode = \"deny\"\n");
    let r = consent(&b, "s", &["project/a"], None).await;
    assert_eq!(r["granted"], false);
    assert_eq!(r["approvedPaths"], json!([]));
    assert_eq!(r["deniedPaths"], json!(["project/a"]));
    assert_eq!(read_reason(&b, "s", "project/a/f.txt").await, "no_consent");
}

#[tokio::test]
async fn auto_mode_grants_and_reads_then_work() {
    let f = Fixture::new();
    f.file("a/f.txt", "f");
    let b = f.broker();
    assert_eq!(read_reason(&b, "s", "project/a/f.txt").await, "no_consent");
    let r = consent(&b, "s", &["project/a"], None).await;
    assert_eq!(r["granted"], true);
    assert_eq!(r["approvedPaths"], json!(["project/a"]));
    assert_eq!(r["deniedPaths"], json!([]));
    assert_eq!(r["access"], "read");
    assert_eq!(read_reason(&b, "s", "project/a/f.txt").await, "");
}

#[tokio::test]
async fn a_grant_covers_descendants_component_wise_only() {
    let f = Fixture::new();
    f.file("a/b/c/deep.txt", "deep");
    f.file("ab/f.txt", "ab");
    f.file("top.txt", "top");
    let b = f.broker();
    consent(&b, "s", &["project/a"], None).await;
    assert_eq!(read_reason(&b, "s", "project/a/b/c/deep.txt").await, "");
    assert_eq!(read_reason(&b, "s", "project/ab/f.txt").await, "no_consent");
    assert_eq!(read_reason(&b, "s", "project/top.txt").await, "no_consent");
    let r = call(&b, "s", "files/list", json!({"path": "project"})).await;
    assert_eq!(err(&r).2, "no_consent");
    let r = call(&b, "s", "files/list", json!({"path": "project/a"})).await;
    assert_eq!(ok(&r)["entries"][0]["path"], "project/a/b");
}

#[tokio::test]
async fn write_access_on_a_read_only_root_is_denied() {
    let f = Fixture::new();
    f.dir("a");
    let b = f.broker_with("read", "");
    let r = consent(&b, "s", &["project/a"], Some("write")).await;
    assert_eq!(r["granted"], false);
    assert_eq!(r["approvedPaths"], json!([]));
    assert_eq!(r["deniedPaths"], json!(["project/a"]));
}

#[tokio::test]
async fn default_access_is_what_the_root_allows() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let ro = f.broker_with("read", "");
    assert_eq!(
        consent(&ro, "s", &["project"], None).await["access"],
        "read"
    );
    let rw = f.broker_with("write", "");
    assert_eq!(
        consent(&rw, "s", &["project"], None).await["access"],
        "write"
    );
    let r = call(&rw, "s", "files/stat", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["readonly"], false);
}

#[tokio::test]
async fn a_read_grant_on_a_writable_root_leaves_files_readonly() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker_with("write", "");
    let r = consent(&b, "s", &["project"], Some("read")).await;
    assert_eq!(r["granted"], true);
    assert_eq!(r["access"], "read");
    let r = call(&b, "s", "files/stat", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["readonly"], true);
    // Another session with a write grant on the same root sees it writable.
    consent(&b, "w", &["project"], Some("write")).await;
    let r = call(&b, "w", "files/stat", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["readonly"], false);
}

/// What a provider was asked: server id, message, paths in mount form.
type Asked = Vec<(String, Option<String>, Vec<String>)>;

/// Approves only paths whose final component starts with `ok`, and records what it was asked.
#[derive(Default)]
struct Picky {
    seen: Arc<Mutex<Asked>>,
}

impl ConsentProvider for Picky {
    fn decide<'a>(&'a self, req: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move {
            let paths: Vec<String> = req.paths.iter().map(|p| p.to_string()).collect();
            self.seen
                .lock()
                .unwrap()
                .push((req.server_id.clone(), req.message.clone(), paths));
            let ok = req
                .paths
                .iter()
                .filter(|p| p.rel.file_name().is_some_and(|n| n.starts_with("ok")));
            ConsentDecision::new(ok.cloned(), req.access)
        })
    }
}

#[tokio::test]
async fn a_custom_provider_splits_approved_and_denied() {
    let f = Fixture::new();
    f.file("ok1/f.txt", "1");
    f.file("no1/f.txt", "2");
    f.file("ok2/f.txt", "3");
    let picky = Picky::default();
    let seen = picky.seen.clone();
    let b = with_provider(&f, "read", "", picky);
    let params = json!({
        "message": "need the sources",
        "requestedPaths": ["project/ok1", "project/no1", "/etc", "project/ok2"],
    });
    let r = call(&b, "s", "files/consent", params).await;
    let r = ok(&r);
    assert_eq!(r["granted"], true);
    assert_eq!(r["approvedPaths"], json!(["project/ok1", "project/ok2"]));
    // `/etc`, outside every root, is denied and echoed as sent, in the order sent.
    assert_eq!(r["deniedPaths"], json!(["project/no1", "/etc"]));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "s".to_owned(),
            Some("need the sources".to_owned()),
            vec![
                "project/ok1".to_owned(),
                "project/no1".to_owned(),
                "project/ok2".to_owned()
            ]
        )],
        "the provider sees only paths inside the roots, in mount form"
    );
    assert_eq!(read_reason(&b, "s", "project/ok1/f.txt").await, "");
    assert_eq!(read_reason(&b, "s", "project/ok2/f.txt").await, "");
    assert_eq!(
        read_reason(&b, "s", "project/no1/f.txt").await,
        "no_consent"
    );
}

/// Never decides.
struct Silent;

impl ConsentProvider for Silent {
    fn decide<'a>(&'a self, _req: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_provider_that_never_answers_is_denied_after_the_time_limit() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = with_provider(&f, "read", "[consent]\ntimeout_secs = 1\n", Silent);
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        consent(&b, "s", &["project"], None),
    )
    .await
    .expect("consent answered within 10 s");
    assert_eq!(r["granted"], false);
    assert_eq!(r["approvedPaths"], json!([]));
    assert_eq!(r["deniedPaths"], json!(["project"]));
    assert_eq!(read_reason(&b, "s", "project/a.txt").await, "no_consent");
}

#[tokio::test]
async fn revoking_a_path_fails_reads_under_it_with_revoked_only() {
    let f = Fixture::new();
    f.file("a/x.txt", "x");
    f.file("a/deeper/y.txt", "y");
    f.file("b/z.txt", "z");
    let b = f.broker();
    consent_all(&b, "s").await;
    b.revoke("s", &"project/a".parse().unwrap())
        .expect("revoke");
    assert_eq!(read_reason(&b, "s", "project/a/x.txt").await, "revoked");
    assert_eq!(
        read_reason(&b, "s", "project/a/deeper/y.txt").await,
        "revoked"
    );
    let r = call(&b, "s", "files/list", json!({"path": "project/a"})).await;
    assert_eq!(err(&r).2, "revoked");
    assert_eq!(read_reason(&b, "s", "project/b/z.txt").await, "");
    // Consenting again lifts the revocation.
    let r = consent(&b, "s", &["project/a"], None).await;
    assert_eq!(r["granted"], true);
    assert_eq!(read_reason(&b, "s", "project/a/x.txt").await, "");
}

#[tokio::test]
async fn revoking_an_exact_grant_removes_it() {
    let f = Fixture::new();
    f.file("a/x.txt", "x");
    let b = f.broker();
    consent(&b, "s", &["project/a"], None).await;
    let revoked = b
        .revoke("s", &"project/a".parse().unwrap())
        .expect("revoke");
    assert_eq!(revoked.len(), 1);
    assert_eq!(revoked[0].grant.path.to_string(), "project/a");
    assert_eq!(read_reason(&b, "s", "project/a/x.txt").await, "revoked");
}

#[tokio::test]
async fn revoking_everything_affects_every_session_until_consent_again() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker();
    for s in ["s1", "s2"] {
        consent_all(&b, s).await;
        assert_eq!(read_reason(&b, s, "project/a.txt").await, "");
    }
    assert_eq!(b.revoke_all().len(), 2);
    for s in ["s1", "s2"] {
        assert_eq!(read_reason(&b, s, "project/a.txt").await, "revoked", "{s}");
    }
    consent_all(&b, "s1").await;
    assert_eq!(read_reason(&b, "s1", "project/a.txt").await, "");
    assert_eq!(read_reason(&b, "s2", "project/a.txt").await, "revoked");
}

#[tokio::test]
async fn ending_a_session_drops_consent_grants_but_not_standing_grants() {
    let f = Fixture::new();
    f.file("pub/p.txt", "p");
    f.file("priv/q.txt", "q");
    let b = f.broker_with(
        "read",
        "[[grants]]\npath = \"project/pub\"\naccess = \"read\"\n",
    );
    // The standing grant holds from the start, without asking.
    assert_eq!(read_reason(&b, "s", "project/pub/p.txt").await, "");
    assert_eq!(
        read_reason(&b, "s", "project/priv/q.txt").await,
        "no_consent"
    );
    consent(&b, "s", &["project/priv"], None).await;
    assert_eq!(read_reason(&b, "s", "project/priv/q.txt").await, "");
    assert!(b.end_session("s"));
    assert_eq!(
        read_reason(&b, "s", "project/priv/q.txt").await,
        "no_consent"
    );
    assert_eq!(read_reason(&b, "s", "project/pub/p.txt").await, "");
}

#[tokio::test]
async fn a_standing_grant_on_the_whole_root_survives_the_end_of_a_session() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker_with(
        "read",
        "[[grants]]\npath = \"project\"\naccess = \"read\"\n\n[consent]\nmode = \"deny\"\n",
    );
    assert_eq!(read_reason(&b, "s", "project/a.txt").await, "");
    b.end_session("s");
    assert_eq!(read_reason(&b, "s", "project/a.txt").await, "");
}

#[tokio::test]
async fn sessions_are_independent() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker();
    consent_all(&b, "a").await;
    assert_eq!(read_reason(&b, "a", "project/a.txt").await, "");
    assert_eq!(read_reason(&b, "b", "project/a.txt").await, "no_consent");
    b.revoke_session("b").expect("revoke");
    assert_eq!(read_reason(&b, "a", "project/a.txt").await, "");
}

#[tokio::test]
async fn paths_outside_every_root_are_denied_and_echoed_as_sent() {
    let f = Fixture::new();
    f.dir("sub");
    let b = f.broker();
    let sibling = f.sibling.display().to_string();
    let sibling_file = f.sibling.join("secret.txt").display().to_string();
    let inside = f.root.join("sub").display().to_string();
    let outside = [
        "/etc",
        "../project",
        "project/../../outside",
        "other/thing",
        "file:///etc/passwd",
        sibling.as_str(),
        sibling_file.as_str(),
    ];
    let mut asked: Vec<&str> = outside.to_vec();
    asked.push(&inside);
    let r = consent(&b, "s", &asked, None).await;
    assert_eq!(r["granted"], true);
    // Every path is echoed as sent, the absolute one inside the root included; the mount form
    // is in mountPaths. Outside paths are denied as sent, in the order sent, and have no mount
    // form. Host paths in the answer are only those the server sent.
    assert_eq!(r["approvedPaths"], json!([inside]));
    assert_eq!(r["mountPaths"], json!({inside.as_str(): "project/sub"}));
    assert_eq!(r["deniedPaths"], json!(outside), "outside paths are denied");
    let r = read(&b, "s", &sibling_file).await;
    assert_eq!(err(&r).2, "outside_root");
    f.assert_canary_intact();
}
