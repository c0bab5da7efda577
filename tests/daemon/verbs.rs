//! The control verbs against a running daemon: `status` (table and JSON) and `revoke`, which
//! needs to be told what to take back.

use crate::place::Place;
use serde_json::{Value, json};

fn json_of(ran: &crate::sidecar::Ran) -> Value {
    serde_json::from_slice(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {}", ran.log()))
}

#[test]
fn status_on_a_fresh_daemon_shows_no_sessions() {
    let p = Place::new();
    let _d = p.start();
    let ran = p.verb(&["status", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    assert_eq!(json_of(&ran), json!({"ok": true, "sessions": []}));
    let ran = p.verb(&["status"]);
    assert!(ran.success(), "{}", ran.log());
    assert_eq!(ran.out(), "no sessions\n");
    // The socket named outright, from anywhere.
    let socket = p.socket();
    let ran = p.verb(&["status", "--json", "--daemon", socket.to_str().unwrap()]);
    assert!(ran.success(), "{}", ran.log());
}

#[test]
fn revoke_without_a_target_is_refused_unless_all() {
    let p = Place::new();
    let _d = p.start();
    let ran = p.verb(&["revoke"]);
    assert_eq!(ran.code(), Some(2), "{}", ran.log());
    assert!(ran.err().contains("--all"), "{}", ran.log());
    let ran = p.verb(&["revoke", "--all", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    assert_eq!(json_of(&ran), json!({"ok": true, "revoked": []}));
    let ran = p.verb(&["revoke", "--all", "--server", "a"]);
    assert_eq!(ran.code(), Some(2), "{}", ran.log());
    // A path that matches no grant revokes nothing, and says so.
    let ran = p.verb(&["revoke", "root/src"]);
    assert!(ran.success(), "{}", ran.log());
    assert!(ran.out().contains("nothing revoked"), "{}", ran.log());
}

#[test]
fn revoke_errors_are_reported_with_exit_1() {
    let p = Place::new();
    let _d = p.start();
    let ran = p.verb(&["revoke", "--server", "ghost"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(
        ran.err().contains("no live session named \"ghost\""),
        "{}",
        ran.log()
    );
    let ran = p.verb(&["revoke", "/etc/passwd"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(ran.err().contains("mount form"), "{}", ran.log());
}

#[test]
fn verbs_without_a_daemon_say_no_daemon_answers() {
    let p = Place::new();
    let socket = p.tmp.path().join("none.sock");
    for verb in [&["status"][..], &["revoke", "--all"]] {
        let mut args = verb.to_vec();
        args.extend(["--daemon", socket.to_str().unwrap()]);
        let ran = p.verb(&args);
        assert_eq!(ran.code(), Some(1), "{}", ran.log());
        let expected = format!("no daemon answers on {}", socket.display());
        assert!(ran.err().contains(&expected), "{}", ran.log());
    }
}
