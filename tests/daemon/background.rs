//! Daemons that start themselves: `fsbroker daemon` in the background, and `--ensure`, which
//! many callers at once share.

use crate::place::{Detached, Place, wait_for};
use crate::sidecar::{Ran, WAIT};
use serde_json::Value;
use std::process::Stdio;

/// The one daemon the background log names, with its pid.
fn the_daemon(p: &Place) -> Detached {
    let pids = p.logged_pids();
    assert_eq!(pids.len(), 1, "{}", p.daemon_log_text());
    Detached(pids[0])
}

#[test]
fn a_daemon_started_in_the_background_answers_and_stops_on_sigterm() {
    let p = Place::new();
    let mut cmd = p.command(&["daemon", "--root"]);
    cmd.arg(&p.root);
    let ran = crate::sidecar::run_within(cmd, WAIT);
    assert!(ran.success(), "{}", ran.log());
    assert_eq!(ran.out(), format!("{}\n", p.socket().display()));
    let d = the_daemon(&p);
    // A session of its own, so that the terminal it was started from is not its own.
    assert_eq!(d.session(), Some(d.0), "{:?}", d.args());
    let status = p.verb(&["status", "--json"]);
    let v: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["ok"], true, "{}", status.log());
    // No idle exit unless asked for.
    assert!(
        !d.args().iter().any(|a| a == "--idle-exit"),
        "{:?}",
        d.args()
    );
    d.terminate();
    wait_for("the daemon's exit", || !d.alive());
    assert!(!p.socket().exists() && !p.key().exists());
}

#[test]
fn a_daemon_that_does_not_come_up_in_the_background_says_why() {
    let p = Place::new();
    let missing = p.tmp.path().join("missing");
    let mut cmd = p.command(&["daemon", "--root"]);
    cmd.arg(&missing);
    let ran = crate::sidecar::run_within(cmd, WAIT);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    // The tail of its log: the policy's own error, naming the root.
    let err = ran.err();
    assert!(err.contains("the daemon did not start"), "{}", ran.log());
    assert!(
        err.contains(&missing.display().to_string()),
        "{}",
        ran.log()
    );
    assert!(
        err.contains(&p.daemon_log().display().to_string()),
        "{}",
        ran.log()
    );
    assert!(!p.socket().exists());
}

#[test]
fn a_background_start_is_refused_while_a_daemon_answers() {
    let p = Place::new();
    let _d = p.start();
    let mut cmd = p.command(&["daemon", "--root"]);
    cmd.arg(&p.root);
    let ran = crate::sidecar::run_within(cmd, WAIT);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(ran.err().contains("already answers"), "{}", ran.log());
    assert!(p.logged_pids().is_empty(), "{}", p.daemon_log_text());
}

#[test]
fn ensure_without_the_users_policy_says_how_to_write_one() {
    let p = Place::new();
    let ran = p.verb(&["daemon", "--ensure"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    let err = ran.err();
    assert!(err.contains("fsbroker daemon --init"), "{}", ran.log());
    assert!(
        err.contains(&p.user_policy().display().to_string()),
        "{}",
        ran.log()
    );
    assert!(!p.socket().exists());
    let ran = p.verb(&["daemon", "--ensure", "--root", "x"]);
    assert_eq!(ran.code(), Some(2), "{}", ran.log());
}

#[test]
fn ensure_ten_times_at_once_starts_one_daemon() {
    let p = Place::new();
    let mut init = p.command(&["daemon", "--init", "--root"]);
    init.arg(&p.root);
    let ran = crate::sidecar::run_within(init, WAIT);
    assert!(ran.success(), "{}", ran.log());
    let callers: Vec<_> = (0..10)
        .map(|_| {
            p.command(&["daemon", "--ensure"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ran: Vec<Ran> = callers
        .into_iter()
        .map(|mut c| {
            let status = crate::sidecar::wait_child(&mut c, WAIT, "a caller of --ensure");
            let read = |r: Option<Box<dyn std::io::Read>>| {
                let mut v = Vec::new();
                if let Some(mut r) = r {
                    r.read_to_end(&mut v).unwrap();
                }
                v
            };
            Ran {
                status: Some(status),
                stdout: read(c.stdout.take().map(|r| Box::new(r) as _)),
                stderr: read(c.stderr.take().map(|r| Box::new(r) as _)),
            }
        })
        .collect();
    let d = the_daemon(&p);
    for r in &ran {
        assert!(r.success(), "{}", r.log());
        assert_eq!(r.out(), format!("{}\n", p.socket().display()));
    }
    // On the user's policy, going when idle for ten minutes.
    let args = d.args();
    let policy = p.user_policy().display().to_string();
    assert!(
        args.windows(2).any(|w| w == ["--idle-exit", "600"]),
        "{args:?}"
    );
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--policy" && w[1] == policy),
        "{args:?}"
    );
    let status = p.verb(&["status", "--json"]);
    assert!(status.success(), "{}", status.log());
    // One more finds it and starts nothing.
    let again = p.verb(&["daemon", "--ensure"]);
    assert!(again.success(), "{}", again.log());
    assert_eq!(p.logged_pids(), [d.0], "{}", p.daemon_log_text());
}
