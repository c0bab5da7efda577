//! A Rust host's session on the daemon (`mcp_fsbroker::daemon::DaemonSession`): its
//! consent provider is asked the daemon's questions for it, and its requests are answered by
//! the daemon's broker, beside the command line's sessions.

use crate::place::Place;
use mcp_fsbroker::consent::{self, ConsentDecision};
use mcp_fsbroker::daemon::DaemonSession;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

async fn answer(s: &mut DaemonSession, id: i64) -> Value {
    loop {
        let v = tokio::time::timeout(crate::sidecar::WAIT, s.recv())
            .await
            .expect("no answer in time")
            .expect("the session ended");
        if v["id"] == id {
            return v;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_session_is_asked_through_its_provider_and_answered_by_the_daemon() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "from the daemon").unwrap();
    // Elicit by default: a session with a provider is asked; the fallback would deny.
    let _d = p.start_with(&["--consent-fallback", "deny"]);
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    let provider = consent::from_fn(move |req| {
        count.fetch_add(1, Ordering::SeqCst);
        async move { ConsentDecision::approve_all(&req) }
    });
    let socket = p.socket();
    let mut s = DaemonSession::attach(Some(&socket), "host-app", Some(provider))
        .await
        .unwrap();
    let consent = json!({"jsonrpc": "2.0", "id": 1, "method": "files/consent",
        "params": {"requestedPaths": ["root/a.txt"]}});
    s.send(&consent).await.unwrap();
    let r = answer(&mut s, 1).await;
    assert_eq!(r["result"]["granted"], true, "{r}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "files/read",
        "params": {"path": "root/a.txt"}});
    s.send(&read).await.unwrap();
    let r = answer(&mut s, 2).await;
    assert_eq!(r["result"]["content"], "from the daemon", "{r}");

    let status = tokio::task::spawn_blocking(move || {
        let ran = p.verb(&["status", "--json"]);
        (serde_json::from_str::<Value>(&ran.out()).unwrap(), p)
    })
    .await
    .unwrap();
    let (status, p) = status;
    assert_eq!(status["sessions"][0]["server"], "host-app", "{status}");
    assert_eq!(
        status["sessions"][0]["grants"][0]["origin"], "consented",
        "{status}"
    );
    // Without a provider, the daemon's fallback decides.
    let mut bare = DaemonSession::attach(Some(&p.socket()), "bare", None)
        .await
        .unwrap();
    bare.send(&consent).await.unwrap();
    let r = answer(&mut bare, 1).await;
    assert_eq!(r["result"]["granted"], false, "{r}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn without_a_daemon_attaching_fails_with_the_reason() {
    let p = Place::new();
    let e = DaemonSession::attach(Some(&p.socket()), "x", None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no daemon answers"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_sessions_attach_than_there_are_control_connections() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "x").unwrap();
    let _d = p.start_with(&["--consent", "auto"]);
    let socket = p.socket();
    let mut sessions = Vec::new();
    for i in 0..100 {
        let mut s = DaemonSession::attach(Some(&socket), &format!("s{i}"), None)
            .await
            .unwrap();
        let roots = json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"});
        s.send(&roots).await.unwrap();
        let r = answer(&mut s, 1).await;
        assert!(r["result"]["roots"].is_array(), "s{i}: {r}");
        sessions.push(s);
    }
}

/// A library starts a daemon through its front door (`mcp_fsbroker::daemon::run`), as
/// `fsbroker daemon` does: the command line's verbs and a host's session reach it on its
/// socket, a policy fixed in code has no file to reload, and the daemon removes its socket
/// and key when its shutdown resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_runs_a_daemon_through_its_front_door() {
    use mcp_fsbroker::daemon::{DaemonConfig, PolicySource, run};
    use mcp_fsbroker::policy::{Policy, RootEntry};
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "from the library's daemon").unwrap();
    let policy = Policy::new().root(RootEntry::new("root", &p.root));
    let config = DaemonConfig::new(p.socket(), PolicySource::fixed(policy));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(run(config, async {
        let _ = stopped.await;
    }));
    // A hang guard only: the key is written before the daemon listens.
    let began = std::time::Instant::now();
    while !(p.key().exists() && p.socket().exists()) {
        assert!(
            began.elapsed() < crate::sidecar::WAIT,
            "the daemon did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let socket = p.socket();
    let mut s = DaemonSession::attach(Some(&socket), "library-host", None)
        .await
        .unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"});
    s.send(&list).await.unwrap();
    let r = answer(&mut s, 1).await;
    let roots = r["result"]["roots"].as_array().map_or(0, Vec::len);
    assert_eq!(roots, 1, "{r}");

    let (status, reload, p) = tokio::task::spawn_blocking(move || {
        let status = p.verb(&["status", "--json"]);
        let reload = p.verb(&["reload"]);
        (status, reload, p)
    })
    .await
    .unwrap();
    assert!(status.success(), "{}", status.log());
    let status: Value = serde_json::from_str(&status.out()).unwrap();
    assert_eq!(status["sessions"][0]["server"], "library-host", "{status}");
    assert!(!reload.success(), "{}", reload.log());
    assert!(reload.log().contains("no policy file"), "{}", reload.log());

    drop(s);
    stop.send(()).unwrap();
    let ran = tokio::time::timeout(crate::sidecar::WAIT, daemon)
        .await
        .expect("the daemon did not stop in time")
        .unwrap();
    assert_eq!(ran, Ok(()));
    assert!(!p.socket().exists() && !p.key().exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_learns_the_session_id_the_daemon_chose() {
    let p = Place::new();
    let _d = p.start_with(&["--consent", "auto"]);
    let socket = p.socket();
    let roots = json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"});
    let mut first = DaemonSession::attach(Some(&socket), "twin", None)
        .await
        .unwrap();
    assert_eq!(
        first.session_id(),
        None,
        "no session before the first message"
    );
    first.send(&roots).await.unwrap();
    answer(&mut first, 1).await;
    let mut second = DaemonSession::attach(Some(&socket), "twin", None)
        .await
        .unwrap();
    second.send(&roots).await.unwrap();
    answer(&mut second, 1).await;
    assert_eq!(first.session_id().as_deref(), Some("twin"));
    // A second live session of the name is numbered, and the host is told which it is: the
    // name `fsbroker status` and `revoke --server` know it by.
    assert_eq!(second.session_id().as_deref(), Some("twin#2"));
    let status = tokio::task::spawn_blocking(move || {
        let ran = p.verb(&["status", "--json"]);
        serde_json::from_str::<Value>(&ran.out()).unwrap()
    })
    .await
    .unwrap();
    let names: Vec<&str> = status["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["server"].as_str())
        .collect();
    assert!(names.contains(&"twin#2"), "{status}");
}
