//! A session that keeps trying to get out is suspended (issue 31): through the real daemon,
//! twenty escape attempts within a minute stop it, `status` says why, its watches end, the
//! other sessions go on, and only `fsbroker resume` lifts it.

use crate::attach::attach;
use crate::place::Place;
use crate::sidecar::WAIT;
use serde_json::{Value, json};

fn verb(p: &Place, args: &[&str]) -> crate::sidecar::Ran {
    let mut all = args.to_vec();
    let socket = p.socket();
    all.extend(["--daemon", socket.to_str().unwrap()]);
    p.verb(&all)
}

fn session(p: &Place, id: &str) -> Value {
    let ran = verb(p, &["status", "--json"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.err());
    let v: Value = serde_json::from_str(&ran.out()).unwrap();
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no session {id}: {v}"))
}

#[test]
fn twenty_escape_attempts_suspend_a_session_and_only_resume_lifts_it() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "x").unwrap();
    let d = p.start_with(&["--consent", "auto"]);
    let mut probe = attach(&p, "probe");
    let mut other = attach(&p, "other");
    for s in [&mut probe, &mut other] {
        let r = s.request("files/consent", json!({"requestedPaths": ["root"]}));
        assert_eq!(r["result"]["granted"], true, "{r}");
    }
    let w = probe.request("files/watch", json!({"path": "root"}));
    assert!(w["result"]["watchId"].is_string(), "{w}");
    for i in 0..19 {
        let path = if i % 2 == 0 {
            "/etc/shadow"
        } else {
            "root/../../etc"
        };
        let r = probe.request("files/read", json!({"path": path}));
        assert!(r["error"]["data"]["code"].is_string(), "{r}");
    }
    assert_eq!(session(&p, "probe")["suspended"], Value::Null);
    let r = probe.request("files/list", json!({"path": "/"}));
    assert!(r["error"].is_object(), "{r}");
    // The watch ends, and says why.
    let ended = probe.next_within(WAIT);
    assert_eq!(ended["params"]["event"], "unwatched", "{ended}");
    assert_eq!(ended["params"]["reason"], "suspended", "{ended}");
    let r = probe.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    let r = other.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["result"]["content"], "x", "{r}");
    // `status` says why, as JSON and as the table.
    let s = session(&p, "probe");
    assert_eq!(s["suspended"]["total"], 20, "{s}");
    assert_eq!(
        s["suspended"]["violations"]["outside_root"]
            .as_u64()
            .unwrap()
            + s["suspended"]["violations"]["malformed"]
                .as_u64()
                .unwrap_or(0),
        20,
        "{s}"
    );
    assert_eq!(s["counters"]["refused"], 21, "{s}");
    let table = verb(&p, &["status"]).out();
    assert!(table.contains("SUSPENDED"), "{table}");
    assert!(table.contains("fsbroker resume --server probe"), "{table}");
    // The user is told in the daemon's log, once.
    crate::place::wait_for("the warning", || d.stderr().contains("suspended a session"));
    assert_eq!(
        d.stderr().matches("suspended a session").count(),
        1,
        "{}",
        d.stderr()
    );
    // Resume lifts it; a second says there was nothing to lift; an unknown session fails.
    let ran = verb(&p, &["resume", "--server", "probe"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.err());
    assert!(ran.out().contains("resumed probe"), "{}", ran.out());
    let ran = verb(&p, &["resume", "--server", "probe", "--json"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.err());
    assert_eq!(
        serde_json::from_str::<Value>(&ran.out()).unwrap()["resumed"],
        false
    );
    let ran = verb(&p, &["resume", "--server", "ghost"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    let r = probe.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["result"]["content"], "x", "{r}");
    assert_eq!(session(&p, "probe")["suspended"], Value::Null);
}
