//! File descriptors under `proxy --url`: under a low limit (256, the default for GUI
//! applications on some systems), a burst of concurrent calls is met with back-pressure
//! (`busy`) for what does not fit, never `unreachable`, the session goes on, and idle
//! connections do not pile up after the burst. The soft limit is raised to the hard one.

use crate::common::Fixture;
use crate::remote::{RemoteServer, error_of, initialize, start_tool};
use crate::sidecar::Sidecar;
use serde_json::json;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// The proxy in front of `server`, started through `wrapper` (which sets the limit).
fn limited(server: &RemoteServer, f: &Fixture, wrapper: &[&str]) -> Sidecar {
    let args: Vec<OsString> = [
        "proxy",
        "--url",
        &server.url(),
        "--root",
        f.root.to_str().unwrap(),
        "--consent",
        "auto",
        // No retries: a connection that cannot be made is reported at once, so a shortage
        // of descriptors taken for an unreachable server shows at once too.
        "--retries",
        "0",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    Sidecar::spawn_wrapped(wrapper, &args)
}

/// The number of descriptors `pid` has open.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_burst_under_256_descriptors_is_met_with_busy_never_unreachable() {
    let f = Fixture::new();
    let server = RemoteServer::evil("slow", "1");
    // `ulimit -n` sets the soft and the hard limit: nothing to raise.
    let mut p = limited(
        &server,
        &f,
        &["sh", "-c", "ulimit -n 256 && exec \"$@\"", "sh"],
    );
    initialize(&mut p, json!({}));
    const CALLS: i64 = 400;
    for id in 1..=CALLS {
        start_tool(&mut p, id, "anything", json!({}));
    }
    let (mut ok, mut busy) = (0, 0);
    for id in 1..=CALLS {
        let r = p.wait_id(&json!(id));
        if r.get("result").is_some() {
            ok += 1;
        } else {
            assert_eq!(error_of(&r).2, "busy", "call {id}: {r}");
            busy += 1;
        }
    }
    assert!(ok > 0, "no call got through");
    assert_eq!(ok + busy, CALLS);
    // The session goes on.
    start_tool(&mut p, CALLS + 1, "anything", json!({}));
    let r = p.wait_id(&json!(CALLS + 1));
    assert!(r.get("result").is_some(), "{r}");
    // Idle connections are closed, not kept one per request of the burst.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = open_descriptors(p.pid());
    while n > 64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        n = open_descriptors(p.pid());
    }
    assert!(n <= 64, "{n} descriptors still open after the burst");
    let (status, _) = p.finish();
    assert!(status.success(), "{status:?}: {}", p.stderr());
}

#[test]
fn the_soft_descriptor_limit_is_raised_to_the_hard_one() {
    let f = Fixture::new();
    let server = RemoteServer::evil("plain", "");
    let mut p = limited(&server, &f, &["prlimit", "--nofile=256:4096"]);
    initialize(&mut p, json!({}));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", p.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .to_owned();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, ["4096", "4096"], "{line}");
    p.finish();
}
