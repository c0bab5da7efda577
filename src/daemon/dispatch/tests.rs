use super::*;
use crate::daemon::services::{Rebuild, Reload};
use crate::policy::{ConsentMode, Policy, RecoveryPolicy, RootEntry};

/// A daemon's parts around `broker`: no attached session, no console.
struct Parts {
    broker: Broker,
    attachments: Attachments,
    services: Services,
}

impl Parts {
    fn new(broker: Broker, reload: Option<Reload>) -> Parts {
        let services = Services::new(&broker, reload, None);
        Parts {
            broker,
            attachments: Attachments::default(),
            services,
        }
    }

    async fn reply(&self, line: &str) -> Reply {
        let at = Served {
            broker: &self.broker,
            attachments: &self.attachments,
            services: &self.services,
        };
        answer_line(at, line.as_bytes()).await
    }

    /// The one line that answers `line`.
    async fn line(&self, line: &str) -> Value {
        match self.reply(line).await {
            Reply::Line(v) => v,
            other => panic!("{line}: {other:?}"),
        }
    }
}

fn parts(recovery: bool) -> (Parts, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap_or_else(|e| panic!("{e}"));
    let mut policy = Policy::new()
        .root(RootEntry::new("demo", &root).writable())
        .consent_mode(ConsentMode::Auto);
    policy.recovery = RecoveryPolicy {
        enabled: recovery,
        dir: Some(dir.path().join("store")),
        ..RecoveryPolicy::default()
    };
    let (broker, _n) = Broker::builder(policy)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    (Parts::new(broker, None), dir)
}

#[tokio::test]
async fn garbage_and_unknown_ops_get_errors() {
    let (p, _d) = parts(false);
    for line in ["{", "[]", r#"{"op":"grant"}"#, r#"{"op":"status","x":1}"#] {
        let a = p.line(line).await;
        assert_eq!(a["ok"], false, "{a}");
        assert!(a["error"].as_str().is_some_and(|m| !m.is_empty()), "{a}");
    }
}

#[tokio::test]
async fn revoke_needs_a_target_or_all() {
    let (p, _d) = parts(false);
    let a = p.line(r#"{"op":"revoke"}"#).await;
    assert_eq!(a["ok"], false, "{a}");
    let a = p.line(r#"{"op":"revoke","all":true}"#).await;
    assert_eq!(a, json!({"ok": true, "revoked": [], "carved": []}));
    let a = p.line(r#"{"op":"revoke","path":"/etc"}"#).await;
    assert_eq!(a["ok"], false, "{a}");
}

#[tokio::test]
async fn status_shows_a_session_and_revoke_takes_its_grant() {
    let (p, _d) = parts(false);
    let consent = json!({"jsonrpc": "2.0", "id": 1, "method": "files/consent",
        "params": {"requestedPaths": ["demo"]}});
    let r = p
        .broker
        .handle_message("s1", consent)
        .await
        .unwrap_or_else(|| panic!("no answer to the consent request"));
    assert_eq!(r["result"]["granted"], true, "{r}");
    let a = p.line(r#"{"op":"status"}"#).await;
    assert_eq!(a["sessions"][0]["server"], "s1", "{a}");
    assert_eq!(a["sessions"][0]["grants"][0]["path"], "demo", "{a}");
    let a = p
        .line(r#"{"op":"revoke","server":"s1","path":"demo"}"#)
        .await;
    assert_eq!(a["revoked"][0]["server"], "s1", "{a}");
    let a = p.line(r#"{"op":"status"}"#).await;
    assert_eq!(a["sessions"][0]["grants"], json!([]), "{a}");
    let a = p.line(r#"{"op":"resume","server":"s1"}"#).await;
    assert_eq!(a, json!({"ok": true, "resumed": false}));
}

#[tokio::test]
async fn each_op_that_streams_or_attaches_is_handed_back_to_the_connection() {
    let (p, _d) = parts(false);
    assert!(matches!(
        p.reply(r#"{"op":"log","follow":true}"#).await,
        Reply::Log(..)
    ));
    assert!(matches!(
        p.reply(r#"{"op":"describe","follow":true}"#).await,
        Reply::Describing
    ));
    assert!(matches!(
        p.reply(r#"{"op":"attach","server":"s"}"#).await,
        Reply::Attach(_)
    ));
    let a = p.line(r#"{"op":"attach","server":"\u0007"}"#).await;
    assert_eq!(
        a["error"], "attach needs a server name with a printable character",
        "{a}"
    );
    let a = p.line(r#"{"op":"describe"}"#).await;
    assert_eq!(a["ok"], true, "{a}");
    let a = p.line(r#"{"op":"log"}"#).await;
    assert_eq!(a, json!({"ok": true, "events": []}));
    let a = p.line(r#"{"op":"console"}"#).await;
    assert_eq!(a["error"], "this daemon has no console", "{a}");
}

#[tokio::test]
async fn reload_reports_what_changed_and_refuses_a_bad_policy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    std::fs::create_dir(&one).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(&two).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("policy.toml");
    std::fs::write(&file, "[[roots]]\npath = \"one\"\n").unwrap_or_else(|e| panic!("{e}"));
    let policy = Policy::load(&file).unwrap_or_else(|e| panic!("{e}"));
    let (broker, _n) = Broker::builder(policy)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let from = file.clone();
    let rebuild: Rebuild = Box::new(move || Policy::load_for_reload(&from));
    let p = Parts::new(broker, Some(Reload::new(file.clone(), rebuild)));
    std::fs::write(&file, "[[roots]]\npath = \"two\"\n").unwrap_or_else(|e| panic!("{e}"));
    let a = p.line(r#"{"op":"reload"}"#).await;
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["rootsChanged"], json!(["two"]), "{a}");
    assert_eq!(a["rootsRemoved"], json!(["one"]), "{a}");
    assert_eq!(a["roots"], json!(["two"]), "{a}");
    std::fs::write(&file, "[[roots]]\npath = \"two\"\nbogus = 1\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let a = p.line(r#"{"op":"reload"}"#).await;
    assert_eq!(a["ok"], false, "{a}");
    let why = a["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("old one stays") && why.contains("bogus"),
        "{a}"
    );
    assert_eq!(p.broker.roots().iter().count(), 1);
    let a = p.line(r#"{"op":"reload","all":true}"#).await;
    assert_eq!(a["ok"], false, "{a}");
}

#[tokio::test]
async fn without_a_policy_file_reload_says_so() {
    let (p, _d) = parts(false);
    let a = p.line(r#"{"op":"reload"}"#).await;
    assert_eq!(a["ok"], false, "{a}");
    assert!(
        a["error"]
            .as_str()
            .is_some_and(|m| m.contains("no policy file")),
        "{a}"
    );
}

#[tokio::test]
async fn malformed_recovery_requests_and_a_store_that_is_off_are_refused_with_why() {
    let (p, _d) = parts(false);
    let a = p.line(r#"{"op":"history"}"#).await;
    assert_eq!(a["ok"], false, "{a}");
    assert!(
        a["error"]
            .as_str()
            .is_some_and(|m| m.contains("recovery is off")),
        "{a}"
    );
    let (p, _d) = parts(true);
    for line in [
        r#"{"op":"restore"}"#,
        r#"{"op":"restore","id":"x","all":true}"#,
        r#"{"op":"undo"}"#,
        r#"{"op":"history","since":"yesterday"}"#,
    ] {
        let a = p.line(line).await;
        assert_eq!(a["ok"], false, "{a}");
    }
    let a = p.line(r#"{"op":"restore","id":"nope"}"#).await;
    assert_eq!(a["code"], "FILE_NOT_FOUND", "{a}");
    let a = p.line(r#"{"op":"history"}"#).await;
    assert_eq!(a, json!({"ok": true, "changes": []}));
}
