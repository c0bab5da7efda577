//! `fsbroker proxy` under size and volume pressure: lines over the line limit in either
//! direction are refused to their sender and never passed on, and the connection stays
//! usable; a flood of big brokered requests behind a consent question the host holds keeps
//! the proxy's memory bounded, the excess answered `RATE_LIMITED` at once.

use crate::common::Fixture;
use crate::proxy_host::{
    ask, contains, host_lines_until, initialize, is_null_id_error, line, padded, raw, sentinel,
    show, spawn_proxy, start_raw,
};
use crate::sidecar::{Sidecar, WAIT};
use serde_json::{Value, json};
use std::time::Duration;

/// The line limit of these tests' policy.
const LIMIT: usize = 64 * 1024;

/// A proxy whose policy sets the line limit to [`LIMIT`], initialized.
fn limited(f: &Fixture, env: &[(&str, &str)]) -> Sidecar {
    let policy = f.tmp.path().join("policy.toml");
    let extra = format!("[consent]\nmode = \"auto\"\n\n[limits]\nmax_line_bytes = {LIMIT}\n");
    std::fs::write(&policy, f.policy_text("read", &extra)).unwrap();
    let mut p = spawn_proxy(&f.root, &["--policy", policy.to_str().unwrap()], env);
    initialize(&mut p, "2025-06-18", json!({}));
    p
}

fn assert_line_limit_error(v: &Value) {
    assert!(is_null_id_error(v, -32600), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("limit"),
        "the message should name the line limit: {v}"
    );
}

#[test]
fn an_over_long_server_line_is_refused_to_the_server_and_never_reaches_the_host() {
    let f = Fixture::new();
    f.file("a.txt", "still usable");
    let mut p = limited(&f, &[]);
    let templates = [
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"marker":"over-long","pad":"@PAD@"}}"#,
        r#"{"jsonrpc":"2.0","id":"big","method":"files/read","params":{"path":"project/a.txt","marker":"over-long","pad":"@PAD@"}}"#,
        r#"{"jsonrpc":"2.0","id":"big2","method":"sampling/createMessage","params":{"marker":"over-long","pad":"@PAD@"}}"#,
    ];
    for (i, template) in templates.iter().enumerate() {
        let call = i as i64 + 1;
        let until = format!("s{call}");
        let r = raw(
            &mut p,
            call,
            json!({"lines": [padded(template, 2 * LIMIT, 1), sentinel(&until)],
                   "expect": 1, "until": until, "timeout": 60}),
        );
        assert!(
            !r.host_lines.iter().any(|l| contains(l, b"over-long")),
            "{template}: an over-long line reached the host"
        );
        assert!(
            r.host_lines.is_empty(),
            "{template}: {:?}",
            r.host_lines.iter().map(|l| show(l)).collect::<Vec<_>>()
        );
        assert_eq!(r.received.len(), 1, "{template}: {:?}", r.received);
        assert_line_limit_error(&r.received[0]);
        assert!(r.until_answer["result"]["roots"].is_array(), "{r:?}");
    }
    // A tool call and a brokered request still work.
    let a = ask(
        &mut p,
        10,
        json!([
            ["files/consent", {"requestedPaths": ["project/a.txt"]}],
            ["files/read", {"path": "project/a.txt"}],
        ]),
    );
    assert_eq!(a[1]["result"]["content"], "still usable", "{}", a[1]);
    p.finish();
}

#[test]
fn an_over_long_host_line_is_refused_to_the_host_and_never_reaches_the_server() {
    let f = Fixture::new();
    let log = f.tmp.path().join("recv.log");
    let mut p = limited(&f, &[("RECV_LOG", log.to_str().unwrap())]);
    let big = json!({"jsonrpc":"2.0","id":"huge","method":"tools/call",
        "params":{"name":"raw","arguments":{"marker":"host-over-long","pad":"y".repeat(2 * LIMIT)}}});
    p.send(&big);
    let lines = host_lines_until(&mut p, WAIT, |v| v.get("error").is_some());
    assert_eq!(
        lines.len(),
        1,
        "{:?}",
        lines.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
    assert_line_limit_error(&serde_json::from_slice(&lines[0]).unwrap());
    // The connection stays usable, and what follows reaches the server.
    let r = p.request("tools/list", json!({}));
    assert_eq!(r["result"]["tools"][0]["name"], "ask", "{r}");
    let got = std::fs::read(&log).unwrap_or_default();
    assert!(
        !contains(&got, b"host-over-long"),
        "the server saw the over-long line"
    );
    let (status, rest) = p.finish();
    assert!(status.success(), "{status:?}");
    assert!(
        !rest.iter().any(|l| contains(l, b"huge")),
        "something answered the over-long request: {:?}",
        rest.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
}

/// `VmHWM` of the proxy in MiB (0 where the system does not report it).
fn hwm_mib(p: &Sidecar) -> u64 {
    p.proc_status_kb("VmHWM").unwrap_or(0) / 1024
}

#[test]
fn a_flood_of_big_brokered_requests_behind_a_pending_consent_stays_bounded() {
    const COUNT: usize = 130;
    const CEILING_MIB: u64 = 400;
    let f = Fixture::new();
    f.file("a.txt", "flood target");
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[]);
    initialize(&mut p, "2025-06-18", json!({"elicitation": {}}));
    let consent = json!({"jsonrpc":"2.0","id":"c","method":"files/consent",
                         "params":{"requestedPaths":["project/a.txt"],"access":"read"}});
    let read = r#"{"jsonrpc":"2.0","id":"r@N@","method":"files/read","params":{"path":"project/a.txt","_meta":{"pad":"@PAD@"}}}"#;
    // The consent question goes to the host, which holds it; behind it the server writes
    // ~1 GiB of reads, then tells the host it is done.
    start_raw(
        &mut p,
        1,
        json!({"lines": [line(consent.to_string()), padded(read, 8 << 20, COUNT)],
               "expect": COUNT + 1, "announce": true, "timeout": 120}),
    );
    let written = p.notifications_until(Duration::from_secs(90), |n| {
        n["method"] == "notifications/test/written"
    });
    assert!(
        written
            .last()
            .is_some_and(|n| n["method"] == "notifications/test/written"),
        "the server could not write its flood within 90 s (the proxy stopped reading); \
         VmHWM {} MiB; stderr: {}",
        hwm_mib(&p),
        p.stderr()
    );
    let during = hwm_mib(&p);
    assert!(during < CEILING_MIB, "VmHWM {during} MiB during the flood");
    let e = p.next();
    assert_eq!(e["method"], "elicitation/create", "{e}");
    // Everything the server got before this mark was answered while the question was open.
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/test/mark"}));
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    let r = p.wait_id(&json!(1));
    let s = &r["result"]["structuredContent"];
    assert_eq!(s["timedOut"], false, "not every request was answered: {r}");
    let got = s["received"].as_array().unwrap();
    let mark = got
        .iter()
        .position(|m| m["method"] == "notifications/test/mark")
        .unwrap_or_else(|| panic!("the mark never reached the server"));
    let is_limited = |m: &Value| m["error"]["code"] == -31012;
    for m in got.iter().filter(|m| is_limited(m)) {
        assert_eq!(m["error"]["data"]["code"], "RATE_LIMITED", "{m}");
        assert!(m["error"]["data"]["retryAfterMs"].is_number(), "{m}");
    }
    let early = got[..mark].iter().filter(|m| is_limited(m)).count();
    eprintln!(
        "VmHWM {during} MiB after the flood; {early} of {COUNT} refused while the consent was open"
    );
    assert!(
        early > 0,
        "no request was refused while the consent was open: they were queued"
    );
    let consent_answer = got.iter().find(|m| m["id"] == "c").unwrap();
    assert_eq!(
        consent_answer["result"]["granted"], true,
        "{consent_answer}"
    );
    for i in 0..COUNT {
        let id = format!("r{i}");
        let answers: Vec<&Value> = got.iter().filter(|m| m["id"] == id.as_str()).collect();
        assert_eq!(answers.len(), 1, "{id}: {answers:?}");
        let a = answers[0];
        assert!(
            is_limited(a) || a["result"]["content"] == "flood target",
            "{id}: {a}"
        );
    }
    // After the host answered, the connection still works.
    let a = ask(
        &mut p,
        2,
        json!([["files/read", {"path": "project/a.txt"}]]),
    );
    assert_eq!(a[0]["result"]["content"], "flood target", "{}", a[0]);
    let peak = hwm_mib(&p);
    assert!(peak < CEILING_MIB, "VmHWM {peak} MiB");
    p.finish();
}
