//! What each session costs and what it tries (issue 31): its CPU time, counted per
//! operation and held to the policy's budget; its violations, which past the threshold
//! suspend it until the user resumes it. No outcome here depends on the machine's speed:
//! budgets are counted in CPU time actually spent, and the assertions are about which
//! session is refused, never how fast.

use crate::common::*;
use mcp_fsbroker::wire::{ReadParams, StatParams};
use mcp_fsbroker::{Broker, ErrorKind, Policy, Reason};
use serde_json::json;
use std::time::Duration;

/// A broker over the fixture's root with automatic consent, built with `settings`.
fn broker(
    f: &Fixture,
    settings: impl FnOnce(mcp_fsbroker::BrokerBuilder) -> mcp_fsbroker::BrokerBuilder,
) -> Broker {
    let text = f.policy_text(
        "read",
        "[consent]\nmode = \"auto\"\n[limits]\nrequests_per_second = 1000000\nburst = 1000000\n",
    );
    let policy = Policy::parse(&text, "test").unwrap();
    settings(Broker::builder(policy)).build().unwrap().0
}

#[tokio::test]
async fn a_session_looping_on_an_expensive_listing_is_held_to_its_cpu_budget_and_another_is_not() {
    let f = Fixture::new();
    for d in 0..20 {
        for i in 0..100 {
            f.file(&format!("tree/d{d}/f{i}"), "x");
        }
    }
    f.file("small.txt", "hello");
    let b = broker(&f, |b| b.cpu_per_minute(Duration::from_millis(40)));
    let mut events = b.audit_events();
    consent_all(&b, "hog").await;
    consent_all(&b, "calm").await;
    let listing = json!({"path": "project/tree", "recursive": true, "limit": 10000});
    let mut listed = 0;
    let refusal = loop {
        let r = call(&b, "hog", "files/list", listing.clone()).await;
        if r.get("error").is_some() {
            break r;
        }
        listed += 1;
        // The budget is 40 ms of CPU a minute; each listing of 2,020 entries costs some
        // hundreds of microseconds at the very least, so a few thousand would have to be
        // free for this to go on.
        assert!(listed < 5000, "the hog was never held to its budget");
        // The calm session reads beside it, and is never refused.
        let r = call(
            &b,
            "calm",
            "files/stat",
            json!({"path": "project/small.txt"}),
        )
        .await;
        assert!(r.get("error").is_none(), "{r}");
    };
    assert_eq!(
        refusal["error"]["data"]["code"], "RATE_LIMITED",
        "{refusal}"
    );
    assert!(
        refusal["error"]["data"]["retryAfterMs"].as_u64().unwrap() >= 1,
        "{refusal}"
    );
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CPU"),
        "{refusal}"
    );
    // Still refused, whatever it asks; the calm session still is not.
    let r = call(
        &b,
        "hog",
        "files/stat",
        json!({"path": "project/small.txt"}),
    )
    .await;
    assert_eq!(r["error"]["data"]["code"], "RATE_LIMITED", "{r}");
    for _ in 0..20 {
        let r = call(
            &b,
            "calm",
            "files/read",
            json!({"path": "project/small.txt"}),
        )
        .await;
        assert_eq!(r["result"]["content"], "hello", "{r}");
    }
    let snap = b.snapshot();
    let hog = snap.iter().find(|s| s.server_id == "hog").unwrap();
    let calm = snap.iter().find(|s| s.server_id == "calm").unwrap();
    // Refused only once its spending passed the minute's budget.
    assert!(hog.counters.cpu >= Duration::from_millis(40), "{hog:?}");
    assert_eq!(hog.counters.throttled, 2, "{hog:?}");
    assert_eq!(hog.throttled.map(|t| t.1), Some("cpu"));
    assert_eq!(hog.counters.entries_listed, 2020 * listed, "{hog:?}");
    assert_eq!((calm.counters.throttled, calm.throttled), (0, None));
    // Each listing's audit event carries the CPU time it spent, and the session's counter
    // is the sum of its operations'.
    let mut spent = Duration::ZERO;
    while let Ok(e) = events.try_recv() {
        if e.server_id == "hog" {
            if e.method == "files/list" && e.outcome == "ok" {
                assert!(e.cpu > Duration::ZERO, "{e:?}");
            }
            spent += e.cpu;
        }
    }
    assert_eq!(spent, hog.counters.cpu);
}

#[tokio::test]
async fn twenty_escape_attempts_suspend_the_session_until_the_user_resumes_it() {
    let f = Fixture::new();
    f.file("ok.txt", "fine");
    f.symlink(&f.outside, "out");
    let b = broker(&f, |b| b);
    consent_all(&b, "probe").await;
    consent_all(&b, "other").await;
    let w = call(&b, "probe", "files/watch", json!({"path": "project"})).await;
    assert!(w["result"]["watchId"].is_string(), "{w}");
    // Nineteen attempts of four kinds: refused, and nothing more.
    let attempts = [
        "/etc/passwd",
        "project/out/secret.txt",
        "project/../x",
        "other/x",
    ];
    for i in 0..19 {
        let r = call(&b, "probe", "files/read", json!({"path": attempts[i % 4]})).await;
        let reason = r["error"]["data"]["reason"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            ["outside_root", "malformed"].contains(&reason.as_str()),
            "{r}"
        );
    }
    assert!(b.snapshot().iter().all(|s| s.suspended.is_none()));
    let r = call(&b, "probe", "files/read", json!({"path": "project/ok.txt"})).await;
    assert_eq!(r["result"]["content"], "fine", "{r}");
    // The twentieth suspends it.
    let r = call(&b, "probe", "files/stat", json!({"path": "/root"})).await;
    assert_eq!(r["error"]["data"]["reason"], "outside_root", "{r}");
    let e = b
        .call("probe", ReadParams::new("project/ok.txt"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.reason()),
        (ErrorKind::PermissionDenied, Some(Reason::Suspended))
    );
    assert!(e.to_string().contains("resume"), "{e}");
    // Suspended for every method, and its watches ended.
    let r = call(
        &b,
        "probe",
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    let snap = b.snapshot();
    let probe = snap.iter().find(|s| s.server_id == "probe").unwrap();
    let s = probe.suspended.as_ref().unwrap();
    assert_eq!(s.total(), 20);
    assert!(s.summary().starts_with("outside_root "), "{}", s.summary());
    assert!(probe.watches.is_empty(), "{probe:?}");
    assert_eq!(probe.grants.len(), 1, "its grants stay, unused");
    // The other session is untouched.
    let r = b.call("other", StatParams::new("project/ok.txt")).await;
    assert!(r.is_ok(), "{r:?}");
    // Only the user lifts it; then it is answered again, and starts from no strikes.
    assert!(b.resume("probe").unwrap());
    assert!(!b.resume("probe").unwrap());
    assert!(b.resume("nobody").is_err());
    let r = call(&b, "probe", "files/read", json!({"path": "project/ok.txt"})).await;
    assert_eq!(r["result"]["content"], "fine", "{r}");
    for _ in 0..19 {
        call(&b, "probe", "files/read", json!({"path": "/etc/passwd"})).await;
    }
    assert!(b.snapshot().iter().all(|s| s.suspended.is_none()));
}

#[tokio::test]
async fn the_threshold_is_the_policys_and_a_new_session_starts_clean() {
    let f = Fixture::new();
    f.file("ok.txt", "fine");
    let b = broker(&f, |b| b.max_violations_per_minute(3));
    consent_all(&b, "p").await;
    // Consent asked for places outside every root counts too.
    let r = call(
        &b,
        "p",
        "files/consent",
        json!({"requestedPaths": ["/etc"]}),
    )
    .await;
    assert_eq!(r["result"]["granted"], false, "{r}");
    for path in ["/etc/passwd", "project/a\u{0}b"] {
        call(&b, "p", "files/read", json!({"path": path})).await;
    }
    let r = call(&b, "p", "ping", json!({})).await;
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    // Refusals that are no attempt of the server's do not count: a read-only root.
    assert!(b.end_session("p"));
    consent_all(&b, "p").await;
    for _ in 0..5 {
        let r = call(
            &b,
            "p",
            "files/write",
            json!({"path": "project/ok.txt", "content": "x"}),
        )
        .await;
        assert_eq!(r["error"]["data"]["reason"], "read_only", "{r}");
    }
    let r = call(&b, "p", "files/read", json!({"path": "project/ok.txt"})).await;
    assert_eq!(r["result"]["content"], "fine", "{r}");
}

#[tokio::test]
async fn refusals_that_follow_from_the_users_choice_count_only_once_the_server_knew() {
    let f = Fixture::new();
    for i in 0..30 {
        f.file(&format!("big/f{i}"), "x");
    }
    // Consent denied: the 25 reads pipelined behind the consent request could not know.
    let text = f.policy_text("read", "[consent]\nmode = \"deny\"\n");
    let b = Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
        .0;
    let (s, _n) = b.open_session("indexer").unwrap();
    let consent = s.handle_message(json!({"jsonrpc": "2.0", "id": 0, "method": "files/consent",
        "params": {"requestedPaths": ["project/big"]}}));
    let reads: Vec<_> = (0..25)
        .map(|i| {
            s.handle_message(
                json!({"jsonrpc": "2.0", "id": i + 1, "method": "files/read",
                "params": {"path": format!("project/big/f{i}")}}),
            )
        })
        .collect();
    let r = consent.await.unwrap();
    assert_eq!(r["result"]["granted"], false, "{r}");
    // Each took its place when it was handed over, before the consent was answered.
    for read in reads {
        let read = read.await.unwrap();
        assert_eq!(read["error"]["data"]["reason"], "no_consent", "{read}");
    }
    assert!(
        s.snapshot().suspended.is_none(),
        "suspended for the user's denial"
    );
    // Asked again after it knew, one by one: those count.
    for i in 0..20 {
        let r = s
            .handle_message(
                json!({"jsonrpc": "2.0", "id": 100 + i, "method": "files/read",
                "params": {"path": "project/big/f0"}}),
            )
            .await
            .unwrap();
        assert!(r["error"].is_object(), "{r}");
    }
    assert!(s.snapshot().suspended.is_some());
}

#[tokio::test]
async fn consent_through_a_link_that_leads_out_is_a_strike() {
    let f = Fixture::new();
    f.symlink(&f.outside, "out");
    let b = broker(&f, |b| b.max_violations_per_minute(2));
    for _ in 0..2 {
        let r = call(
            &b,
            "p",
            "files/consent",
            json!({"requestedPaths": ["project/out/secret.txt"]}),
        )
        .await;
        assert_eq!(r["result"]["granted"], false, "{r}");
    }
    let r = call(&b, "p", "ping", json!({})).await;
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
}

#[tokio::test]
async fn a_session_never_inherits_the_budget_another_of_its_name_spent() {
    let f = Fixture::new();
    for i in 0..500 {
        f.file(&format!("tree/f{i}"), "x");
    }
    // A millisecond of CPU a minute: once spent, the debt takes about a minute per
    // millisecond to repay, far longer than this test, however fast the machine.
    let b = broker(&f, |b| b.cpu_per_minute(Duration::from_millis(1)));
    consent_all(&b, "github").await;
    let listing = json!({"path": "project/tree", "recursive": true});
    let mut listed = 0;
    loop {
        let r = call(&b, "github", "files/list", listing.clone()).await;
        if r["error"]["data"]["code"] == "RATE_LIMITED" {
            break;
        }
        listed += 1;
        assert!(listed < 100_000, "never held to its budget: {r}");
    }
    let r = call(&b, "github", "ping", json!({})).await;
    assert_eq!(r["error"]["data"]["code"], "RATE_LIMITED", "{r}");
    // A server that named itself `github` ends; the real one begins with its own budget.
    assert!(b.end_session("github"));
    ok(&call(&b, "github", "ping", json!({})).await);
}

#[tokio::test]
async fn a_suspended_session_that_floods_is_audited_at_most_once_a_second() {
    let f = Fixture::new();
    let b = broker(&f, |b| b.max_violations_per_minute(1));
    let mut events = b.audit_events();
    let r = call(&b, "p", "files/read", json!({"path": "/etc/passwd"})).await;
    assert_eq!(r["error"]["data"]["reason"], "outside_root", "{r}");
    let start = std::time::Instant::now();
    for _ in 0..500 {
        let r = call(&b, "p", "ping", json!({})).await;
        assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    }
    let seconds = start.elapsed().as_secs();
    let mut audited = 0;
    while let Ok(e) = events.try_recv() {
        audited += u64::from(e.reason == Some(Reason::Suspended));
    }
    // However fast or slow the machine: one line a second at most, and at least the first.
    assert!(
        (1..=seconds + 1).contains(&audited),
        "{audited} lines in {seconds} s"
    );
    let snap = b.snapshot();
    assert_eq!(snap[0].counters.refused, 501, "status counts them all");
}
