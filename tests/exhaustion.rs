//! Resource exhaustion: floods past the rate limit, a hundred sessions at once, many watches,
//! requests past their deadline (the blocking work stops: threads come back), a host that
//! stops reading the sidecar's output, and an over-long line. Peak memory numbers are printed
//! for the report.
//!
//! This file runs as its own process: it counts the process's threads (`/proc/self/status`),
//! which tests of other files running beside it would change.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

#[allow(dead_code)] // this file uses a few of the shared helpers
mod common;
#[allow(dead_code)]
#[path = "common/sidecar.rs"]
mod sidecar;

use common::*;
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use sidecar::rpc_line;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `Field:` of a `/proc/.../status` text, in its unit (kB, or a count).
fn status_field(text: &str, field: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn threads() -> u64 {
    status_field(
        &std::fs::read_to_string("/proc/self/status").unwrap(),
        "Threads",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_rate_limit_is_rate_limited_and_spares_another_session() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker_with("read", "[limits]\nrequests_per_second = 10\nburst = 10\n");
    consent_all(&b, "flood").await;
    consent_all(&b, "calm").await;
    let start = Instant::now();
    let (mut passed, mut limited, mut calm_ok) = (0u64, 0u64, 0);
    for i in 0..200 {
        let r = call(&b, "flood", "files/read", json!({"path": "project/a.txt"})).await;
        if r.get("error").is_some() {
            let (code, dc, _) = err(&r);
            assert_eq!((code, dc.as_str()), (-31012, "RATE_LIMITED"), "{r}");
            let retry = r["error"]["data"]["retryAfterMs"]
                .as_u64()
                .expect("retryAfterMs");
            assert!(retry > 0 && retry <= 1000, "retryAfterMs {retry}");
            limited += 1;
        } else {
            assert_eq!(ok(&r)["content"], "a");
            passed += 1;
        }
        // The other session, interleaved, within its own burst: never limited.
        if i % 25 == 0 {
            let r = call(&b, "calm", "files/read", json!({"path": "project/a.txt"})).await;
            assert_eq!(ok(&r)["content"], "a", "the calm session was limited: {r}");
            calm_ok += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!("flood: {passed} passed, {limited} rate limited in {secs:.2}s; calm: {calm_ok} ok");
    // The burst (less the consent request) plus what the rate refilled meanwhile.
    let allowed = 9 + (secs * 10.0).ceil() as u64 + 1;
    assert!(
        passed >= 9 && passed <= allowed,
        "{passed} passed, allowed {allowed}"
    );
    assert_eq!(passed + limited, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_at_once_each_consent_and_read_correctly() {
    let f = Fixture::new();
    for i in 0..100 {
        f.file(&format!("f{i}.txt"), format!("content-{i}"));
    }
    let b = f.broker();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("server-{i}");
            consent_all(&b, &id).await;
            let r = call(
                &b,
                &id,
                "files/read",
                json!({"path": format!("project/f{i}.txt")}),
            )
            .await;
            assert_eq!(ok(&r)["content"], format!("content-{i}"), "{r}");
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
    // A session that never asked for consent still has none.
    let r = call(
        &b,
        "stranger",
        "files/read",
        json!({"path": "project/f0.txt"}),
    )
    .await;
    assert_eq!(err(&r).2, "no_consent", "{r}");
    eprintln!("100 sessions consented and read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_up_to_max_watches_succeed_and_the_next_is_quota_exceeded() {
    let f = Fixture::new();
    for i in 0..257 {
        f.dir(&format!("d{i}"));
    }
    let text = format!(
        "{}\n[consent]\nmode = \"auto\"\n",
        f.policy_text(
            "read",
            "[limits]\nrequests_per_second = 1000000\nburst = 1000000\nmax_watches = 256\n"
        )
    );
    let (b, _outbound) = Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap();
    consent_all(&b, "s").await;
    for i in 0..256 {
        let r = call(
            &b,
            "s",
            "files/watch",
            json!({"path": format!("project/d{i}")}),
        )
        .await;
        assert!(ok(&r)["watchId"].is_string(), "watch {i}: {r}");
    }
    let r = call(&b, "s", "files/watch", json!({"path": "project/d256"})).await;
    let (code, dc, _) = err(&r);
    assert_eq!((code, dc.as_str()), (-31007, "QUOTA_EXCEEDED"), "{r}");
    assert_eq!(r["error"]["data"]["limit"], 256, "{r}");
    // Another session is not affected by this one's watches.
    consent_all(&b, "t").await;
    let r = call(&b, "t", "files/watch", json!({"path": "project/d256"})).await;
    assert!(ok(&r)["watchId"].is_string(), "{r}");
    eprintln!("256 watches in one session, the 257th refused");
}

/// Timed-out listings answer `TIMEOUT`, and their blocking work stops: the thread count
/// returns to its baseline (the runtime keeps idle blocking threads only 100 ms).
#[test]
fn timed_out_listings_answer_timeout_and_their_threads_come_back() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_keep_alive(Duration::from_millis(100))
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let f = Fixture::new();
        for i in 0..4000 {
            f.file(&format!("t/d{:02}/e{i}/f.txt", i % 40), "x");
        }
        let b = f.broker_with(
            "read",
            // A standing grant, not a consent request, whose walk could meet the 50 ms
            // deadline itself on a busy machine.
            "[limits]\nrequests_per_second = 1000000\nburst = 1000000\ntimeout_ms = 50\nmax_in_flight = 64\n\
             [[grants]]\npath = \"project\"\n",
        );
        tokio::time::sleep(Duration::from_millis(300)).await; // idle threads of setup retire
        let baseline = threads();
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let b = b.clone();
            tasks.push(tokio::spawn(async move {
                call(&b, "s", "files/list", json!({"path": "project/t", "recursive": true, "limit": 10000})).await
            }));
        }
        let mut timeouts = 0;
        for t in tasks {
            let r: Value = t.await.unwrap();
            if r.get("error").is_some() {
                assert_eq!(err(&r).1, "TIMEOUT", "{r}");
                assert_eq!(err(&r).0, -31005, "{r}");
                timeouts += 1;
            }
        }
        let peak = threads();
        // A generous bound on a condition: stopped walks retire within 100 ms of idling.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut now = threads();
        while now > baseline + 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            now = threads();
        }
        eprintln!("20 slow listings: {timeouts} TIMEOUT; threads {baseline} -> {peak} -> {now}");
        assert!(timeouts >= 1, "no listing timed out");
        assert!(now <= baseline + 2, "threads stayed at {now} (baseline {baseline})");
        // The session still answers.
        let r = call(&b, "s", "ping", json!({})).await;
        ok(&r);
    });
}

/// A policy file for a read-only root with automatic consent and no practical rate limit.
fn policy_file(f: &Fixture) -> OsString {
    let text = f.policy_text(
        "read",
        "[consent]\nmode = \"auto\"\n\n[limits]\nrequests_per_second = 1000000\nburst = 1000000\n",
    );
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(&file, text).unwrap();
    file.into()
}

fn vm_hwm_kb(pid: u32) -> u64 {
    status_field(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap(),
        "VmHWM",
    )
}

/// A sidecar whose stdout the test reads only when it chooses.
struct Raw {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(f: &Fixture) -> Raw {
        let mut child = Command::new(bin())
            .args([
                "serve".into(),
                "--policy".into(),
                policy_file(f),
                "--server-id".into(),
                OsString::from("t"),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fsbroker");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut raw = Raw {
            child,
            stdin,
            stdout,
        };
        raw.stdin
            .as_mut()
            .unwrap()
            .write_all(&rpc_line(
                0,
                "files/consent",
                json!({"requestedPaths": ["project"]}),
            ))
            .unwrap();
        let r = raw.line();
        assert_eq!(r["result"]["granted"], true, "{r}");
        raw
    }

    fn line(&mut self) -> Value {
        let mut l = Vec::new();
        let n = self.stdout.read_until(b'\n', &mut l).unwrap();
        assert!(n > 0, "output ended");
        serde_json::from_slice(&l).unwrap()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_host_that_stops_reading_gets_every_answer_later_with_bounded_memory() {
    let f = Fixture::new();
    let content = "abcdefgh".repeat(8192); // 64 KiB
    f.file("big.txt", &content);
    let mut raw = Raw::start(&f);
    let pid = raw.child.id();
    let mut stdin = raw.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for id in 1..=2000 {
            stdin
                .write_all(&rpc_line(
                    id,
                    "files/read",
                    json!({"path": "project/big.txt"}),
                ))
                .unwrap();
        }
        stdin
    });
    std::thread::sleep(Duration::from_secs(2)); // the host does not read meanwhile
    let stalled = vm_hwm_kb(pid);
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while seen.len() < 2000 {
        assert!(Instant::now() < deadline, "only {} answers", seen.len());
        let r = raw.line();
        assert_eq!(
            r["result"]["content"].as_str(),
            Some(content.as_str()),
            "id {}",
            r["id"]
        );
        assert!(seen.insert(r["id"].as_u64().unwrap()), "duplicate {r}");
    }
    let stdin = writer.join().unwrap();
    let peak = vm_hwm_kb(pid);
    drop(stdin);
    eprintln!(
        "slow reader: 2000 x 64 KiB answers; VmHWM {stalled} kB while stalled, peak {peak} kB"
    );
    assert!(peak < 200 * 1024, "peak RSS {peak} kB");
}

#[test]
fn a_line_over_32_mib_is_refused_with_bounded_memory() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let mut raw = Raw::start(&f);
    let pid = raw.child.id();
    let mut stdin = raw.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut line = br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":""#.to_vec();
        let close = br#""}}"#;
        line.resize((32 << 20) + 1 - close.len(), b'x');
        line.extend_from_slice(close);
        assert_eq!(line.len(), (32 << 20) + 1);
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
        stdin
            .write_all(&rpc_line(8, "files/read", json!({"path": "project/a.txt"})))
            .unwrap();
        stdin
    });
    let r = raw.line();
    assert!(
        r.get("error").is_some(),
        "the long line was answered with success: {r}"
    );
    let r = raw.line();
    assert_eq!(r["id"], 8, "{r}");
    assert_eq!(r["result"]["content"], "a", "{r}");
    let stdin = writer.join().unwrap();
    let peak = vm_hwm_kb(pid);
    drop(stdin);
    eprintln!("32 MiB + 1 line refused; VmHWM {peak} kB");
    assert!(peak < 200 * 1024, "peak RSS {peak} kB");
}
