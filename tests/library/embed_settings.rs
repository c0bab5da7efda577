//! Settings a host makes in code on the builder (`.timeout(Duration)`, `.rate_limit(..)`,
//! `.chunk_bytes(..)` ...): each does what its policy key does, wins over the policy's value,
//! is refused at `build()` naming its key when it is zero (never raised to fit), and stays in
//! force when the policy is reloaded.

use crate::common::*;
use mcp_fsbroker::consent::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest};
use mcp_fsbroker::policy::PolicyError;
use mcp_fsbroker::{Broker, BrokerBuilder, Policy};
use serde_json::{Value, json};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The policy over `f`'s root (`access`, consent mode `auto`), with `extra` TOML appended.
fn policy(f: &Fixture, access: &str, extra: &str) -> Policy {
    let extra = format!("{extra}\n[consent]\nmode = \"auto\"\n");
    Policy::parse(&f.policy_text(access, &extra), "test").unwrap()
}

/// A read-only broker over `f`'s root with the settings `set` made on its builder.
fn broker(f: &Fixture, set: impl FnOnce(BrokerBuilder) -> BrokerBuilder) -> Broker {
    set(Broker::builder(policy(f, "read", "")))
        .build()
        .unwrap()
        .0
}

/// The error `build()` gives with the settings `set`.
fn refused(set: impl FnOnce(BrokerBuilder) -> BrokerBuilder) -> PolicyError {
    match set(Broker::builder(Policy::new())).build() {
        Ok(_) => panic!("a setting with a fault was built"),
        Err(e) => e,
    }
}

/// (data.code, data.limit) of an error response.
fn quota(r: &Value) -> (String, Value) {
    let (_, code, _) = err(r);
    (code, r["error"]["data"]["limit"].clone())
}

#[test]
fn every_setting_is_put_in_force_at_its_policy_key() {
    let f = Fixture::new();
    let b = broker(&f, |b| {
        b.timeout(Duration::from_millis(1500))
            .consent_timeout(Duration::from_secs(7))
            .rate_limit(11, 12)
            .byte_rate_limit(13, 14)
            .chunk_bytes(15)
            .max_chunk_bytes(16)
            .max_write_bytes(17)
            .list_page(18)
            .max_list_page(19)
            .max_in_flight(20)
            .max_line_bytes(21)
            .max_watches(22)
            .max_uploads(23)
            .upload_idle(Duration::from_secs(24))
            .max_kernel_watches(25)
            .watch_coalesce(Duration::from_millis(26))
            .watch_queue(27)
            .lock_wait(Duration::from_millis(28))
    });
    let p = b.policy();
    let l = &p.limits;
    assert_eq!(l.timeout_ms.get(), 1500);
    assert_eq!(p.consent.timeout_secs.get(), 7);
    assert_eq!((l.requests_per_second.get(), l.burst.get()), (11, 12));
    assert_eq!((l.bytes_per_second.get(), l.burst_bytes.get()), (13, 14));
    assert_eq!((l.chunk_bytes.get(), l.max_chunk_bytes.get()), (15, 16));
    assert_eq!(l.max_write_bytes.get(), 17);
    assert_eq!((l.list_page.get(), l.max_list_page.get()), (18, 19));
    assert_eq!(l.max_in_flight.get(), 20);
    assert_eq!(l.max_line_bytes.get(), 21);
    assert_eq!((l.max_watches.get(), l.max_uploads.get()), (22, 23));
    assert_eq!(l.upload_idle_secs.get(), 24);
    assert_eq!(l.max_kernel_watches.get(), 25);
    assert_eq!(l.watch_coalesce_ms.get(), 26);
    assert_eq!(l.watch_queue.get(), 27);
    assert_eq!(l.lock_wait_ms.get(), 28);
}

type Set = fn(BrokerBuilder) -> BrokerBuilder;

#[test]
fn a_zero_is_refused_naming_its_key_and_never_raised() {
    let cases: [(Set, &str, &str); 21] = [
        (|b| b.timeout(Duration::ZERO), "limits.timeout_ms", "1 ms"),
        (
            |b| b.consent_timeout(Duration::ZERO),
            "consent.timeout_secs",
            "1 second",
        ),
        (|b| b.rate_limit(0, 5), "limits.requests_per_second", "1"),
        (|b| b.rate_limit(5, 0), "limits.burst", "1"),
        (
            |b| b.byte_rate_limit(0, 5),
            "limits.bytes_per_second",
            "1 byte",
        ),
        (|b| b.byte_rate_limit(5, 0), "limits.burst_bytes", "1 byte"),
        (|b| b.chunk_bytes(0), "limits.chunk_bytes", "1 byte"),
        (|b| b.max_chunk_bytes(0), "limits.max_chunk_bytes", "1 byte"),
        (|b| b.max_write_bytes(0), "limits.max_write_bytes", "1 byte"),
        (|b| b.list_page(0), "limits.list_page", "1"),
        (|b| b.max_list_page(0), "limits.max_list_page", "1"),
        (|b| b.max_in_flight(0), "limits.max_in_flight", "1"),
        (|b| b.max_line_bytes(0), "limits.max_line_bytes", "1 byte"),
        (|b| b.max_watches(0), "limits.max_watches", "1"),
        (|b| b.max_uploads(0), "limits.max_uploads", "1"),
        (
            |b| b.upload_idle(Duration::ZERO),
            "limits.upload_idle_secs",
            "1 second",
        ),
        (
            |b| b.max_kernel_watches(0),
            "limits.max_kernel_watches",
            "1",
        ),
        (
            |b| b.watch_coalesce(Duration::ZERO),
            "limits.watch_coalesce_ms",
            "1 ms",
        ),
        (|b| b.watch_queue(0), "limits.watch_queue", "1"),
        (
            |b| b.lock_wait(Duration::from_micros(10)),
            "limits.lock_wait_ms",
            "1 ms",
        ),
        // The last value given for a key is the one in force: a zero after a good value is
        // still a zero.
        (
            |b| b.max_watches(5).max_watches(0),
            "limits.max_watches",
            "1",
        ),
    ];
    for (set, key, least) in cases {
        let e = refused(set);
        assert_eq!(e.key, key, "{e}");
        assert_eq!(e.file, "<builder>", "{e}");
        let at_least = format!("must be at least {least}");
        assert!(e.message.starts_with(&at_least), "{key}: {e}");
    }
}

#[test]
fn a_duration_that_rounds_down_to_zero_in_its_unit_is_refused() {
    let cases: [(Set, &str, &str); 4] = [
        (
            |b| b.timeout(Duration::from_micros(999)),
            "limits.timeout_ms",
            "must be at least 1 ms (999µs rounds down to 0)",
        ),
        (
            |b| b.consent_timeout(Duration::from_millis(999)),
            "consent.timeout_secs",
            "must be at least 1 second (999ms rounds down to 0)",
        ),
        (
            |b| b.upload_idle(Duration::from_millis(500)),
            "limits.upload_idle_secs",
            "must be at least 1 second (500ms rounds down to 0)",
        ),
        (
            |b| b.watch_coalesce(Duration::from_nanos(1)),
            "limits.watch_coalesce_ms",
            "must be at least 1 ms (1ns rounds down to 0)",
        ),
    ];
    for (set, key, message) in cases {
        let e = refused(set);
        assert_eq!((e.key.as_str(), e.message.as_str()), (key, message), "{e}");
    }
}

#[test]
fn a_setting_above_its_cap_is_refused_as_the_builders_not_lowered() {
    // Too long for the key's field at all.
    let e = refused(|b| b.timeout(Duration::MAX));
    assert_eq!(
        e.to_string(),
        format!(
            "<builder>: limits.timeout_ms: must be at most {} ms",
            u64::MAX
        )
    );
    // Above the policy's cap for the key, with the message a policy file gets.
    let e = refused(|b| b.timeout(Duration::from_secs(100_000)));
    assert_eq!(
        e.to_string(),
        "<builder>: limits.timeout_ms: must be at most 86400000"
    );
    let e = refused(|b| b.max_watches(100_000));
    assert_eq!(
        e.to_string(),
        "<builder>: limits.max_watches: must be at most 65536"
    );
}

#[tokio::test]
async fn a_setting_wins_over_the_policys_value() {
    let f = Fixture::new();
    f.file("a.txt", "x".repeat(100));
    // The policy says 50-byte chunks; the host says 10.
    let p = policy(&f, "read", "[limits]\nchunk_bytes = 50\n");
    let (b, _) = Broker::builder(p).chunk_bytes(10).build().unwrap();
    consent_all(&b, "s").await;
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["length"], 10, "{r}");
}

#[tokio::test]
async fn chunk_and_list_sizes_set_in_code_shape_reads_and_listings() {
    let f = Fixture::new();
    f.file("a.txt", "x".repeat(100));
    for i in 0..5 {
        f.file(&format!("d/f{i}.txt"), "f");
    }
    let b = broker(&f, |b| {
        b.chunk_bytes(7)
            .max_chunk_bytes(20)
            .list_page(2)
            .max_list_page(3)
    });
    consent_all(&b, "s").await;
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["length"], 7, "{r}");
    let r = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/a.txt", "length": 21}),
    )
    .await;
    assert_eq!(quota(&r), ("QUOTA_EXCEEDED".to_owned(), json!(20)), "{r}");
    let r = call(&b, "s", "files/list", json!({"path": "project/d"})).await;
    assert_eq!(ok(&r)["entries"].as_array().unwrap().len(), 2, "{r}");
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project/d", "limit": 4}),
    )
    .await;
    assert_eq!(quota(&r), ("QUOTA_EXCEEDED".to_owned(), json!(3)), "{r}");
}

#[tokio::test]
async fn the_write_size_and_upload_count_set_in_code_are_enforced() {
    let f = Fixture::new();
    let (b, _) = Broker::builder(policy(&f, "write", ""))
        .max_write_bytes(4)
        .max_uploads(1)
        .build()
        .unwrap();
    let consent = json!({"requestedPaths": ["project"], "access": "write"});
    ok(&call(&b, "s", "files/consent", consent).await);
    let write = |params: Value| call(&b, "s", "files/write", params);
    let r = write(json!({"path": "project/big.txt", "content": "12345"})).await;
    assert_eq!(quota(&r), ("QUOTA_EXCEEDED".to_owned(), json!(4)), "{r}");
    ok(&write(json!({"path": "project/small.txt", "content": "1234"})).await);
    let chunk = |path: &str| json!({"path": path, "content": "a", "offset": 0, "final": false});
    ok(&write(chunk("project/u1.txt")).await);
    let r = write(chunk("project/u2.txt")).await;
    assert_eq!(quota(&r), ("QUOTA_EXCEEDED".to_owned(), json!(1)), "{r}");
}

#[tokio::test]
async fn an_upload_idle_past_the_time_set_in_code_is_dropped() {
    let f = Fixture::new();
    let (b, _) = Broker::builder(policy(&f, "write", ""))
        .upload_idle(Duration::from_secs(1))
        .build()
        .unwrap();
    let consent = json!({"requestedPaths": ["project"], "access": "write"});
    ok(&call(&b, "s", "files/consent", consent).await);
    let chunk = |offset: u64, content: &str, last: bool| json!({"path": "project/a.txt", "content": content, "offset": offset, "final": last});
    ok(&call(&b, "s", "files/write", chunk(0, "aaa", false)).await);
    // Well past the second set in code, far below the policy's five minutes.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = call(&b, "s", "files/write", chunk(3, "x", true)).await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "upload_offset");
    assert!(!f.root.join("a.txt").exists());
}

#[tokio::test]
async fn a_line_longer_than_the_length_set_in_code_is_refused() {
    let f = Fixture::new();
    let b = broker(&f, |b| b.max_line_bytes(200));
    let line = |pad: usize| {
        let msg = json!({"jsonrpc": "2.0", "id": "p".repeat(pad), "method": "ping"});
        serde_json::to_vec(&msg).unwrap()
    };
    let short = line(10);
    assert!(short.len() < 200);
    let answer: Value = serde_json::from_slice(&b.handle_line("s", &short).await.unwrap()).unwrap();
    assert_eq!(ok(&answer), &json!({}));
    let long = line(300);
    let answer: Value = serde_json::from_slice(&b.handle_line("s", &long).await.unwrap()).unwrap();
    assert!(answer.get("error").is_some(), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_watch_past_the_count_set_in_code_is_refused() {
    let f = Fixture::new();
    f.dir("a");
    f.dir("b");
    let b = broker(&f, |b| b.max_watches(1));
    consent_all(&b, "s").await;
    ok(&call(&b, "s", "files/watch", json!({"path": "project/a"})).await);
    let r = call(&b, "s", "files/watch", json!({"path": "project/b"})).await;
    assert_eq!(quota(&r), ("QUOTA_EXCEEDED".to_owned(), json!(1)), "{r}");
}

#[tokio::test]
async fn the_rate_limits_set_in_code_refuse_past_their_bursts() {
    let f = Fixture::new();
    f.file("a.txt", "x".repeat(100));
    // One request a second, a burst of three: the consent and the two reads take it (or
    // two of it, should a read refused for its bytes not count), and a ping passes only on
    // what is left of it and what the time since refilled.
    let b = broker(&f, |b| b.rate_limit(1, 3).byte_rate_limit(1, 1));
    let start = Instant::now();
    consent_all(&b, "s").await;
    ok(&call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await);
    // The read moved 100 bytes on a budget of one byte a second: the next read owes them.
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_error(&r, -31012, "RATE_LIMITED", "");
    let mut passed = 0;
    let refused = loop {
        let r = call(&b, "s", "ping", json!({})).await;
        if r.get("error").is_some() {
            break r;
        }
        passed += 1;
        assert!(passed < 100, "pings were never refused");
    };
    assert!(
        passed <= 1 + start.elapsed().as_secs(),
        "{passed} pings passed after a spent burst of 3 in {:?}",
        start.elapsed()
    );
    assert_error(&refused, -31012, "RATE_LIMITED", "");
}

/// Never answers.
struct Silent;

impl ConsentProvider for Silent {
    fn decide<'a>(&'a self, _req: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_consent_provider_that_never_answers_is_denied_at_the_time_set_in_code() {
    let f = Fixture::new();
    // The policy gives the provider two minutes; the host gives it a second.
    let (b, _) = Broker::builder(policy(&f, "read", ""))
        .consent_provider(Arc::new(Silent))
        .consent_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    assert_eq!(b.policy().consent.timeout_secs.get(), 1);
    let consent = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    );
    let r = tokio::time::timeout(Duration::from_secs(60), consent)
        .await
        .expect("the consent was answered before the policy's two minutes");
    assert_eq!(ok(&r)["granted"], false, "{r}");
    assert_eq!(ok(&r)["deniedPaths"], json!(["project"]), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_past_the_timeout_set_in_code_is_timeout() {
    let f = Fixture::new();
    for i in 0..30 {
        for j in 0..100 {
            f.dir(&format!("d{i:02}/e{j:03}"));
        }
    }
    // A standing grant rather than a consent, whose own walk would be held to the same
    // millisecond; the policy allows a minute.
    let p = policy(&f, "read", "[[grants]]\npath = \"project\"\n");
    let (b, _) = Broker::builder(p)
        .timeout(Duration::from_millis(1))
        .build()
        .unwrap();
    let params = json!({"path": "project", "recursive": true, "limit": 10000});
    let r = call(&b, "s", "files/list", params).await;
    assert_error(&r, -31005, "TIMEOUT", "");
}

#[tokio::test]
async fn settings_made_in_code_stay_in_force_through_a_reload() {
    let f = Fixture::new();
    f.file("a.txt", "x".repeat(100));
    for i in 0..5 {
        f.file(&format!("d/f{i}.txt"), "f");
    }
    let b = broker(&f, |b| {
        b.chunk_bytes(10)
            .max_chunk_bytes(20)
            .consent_timeout(Duration::from_secs(9))
    });
    consent_all(&b, "s").await;
    // The reloaded policy sets its own chunk and page; the host's chunk stays, the page is
    // the new policy's.
    let mut reloaded = policy(&f, "read", "[limits]\nchunk_bytes = 15\nlist_page = 3\n");
    reloaded.consent.timeout_secs = NonZeroU64::new(100).unwrap();
    b.reload(reloaded).unwrap();
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["length"], 10, "{r}");
    let r = call(&b, "s", "files/list", json!({"path": "project/d"})).await;
    assert_eq!(ok(&r)["entries"].as_array().unwrap().len(), 3, "{r}");
    let in_force = b.policy();
    assert_eq!(in_force.consent.timeout_secs.get(), 9);
    assert_eq!(in_force.limits.max_chunk_bytes.get(), 20);
}

#[tokio::test]
async fn a_reload_whose_limits_do_not_fit_the_settings_made_in_code_is_refused() {
    let f = Fixture::new();
    f.file("a.txt", "x".repeat(100));
    let b = broker(&f, |b| b.chunk_bytes(10));
    consent_all(&b, "s").await;
    // Valid on its own (5-byte chunks of at most 5 bytes), not with the host's 10-byte chunk.
    let reloaded = policy(
        &f,
        "read",
        "[limits]\nchunk_bytes = 5\nmax_chunk_bytes = 5\n",
    );
    let e = b.reload(reloaded).unwrap_err();
    assert_eq!(
        e.to_string(),
        "<builder>: limits.chunk_bytes: must not exceed limits.max_chunk_bytes"
    );
    // The old policy, with the host's settings, stays in force.
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["length"], 10, "{r}");
    assert_eq!(b.policy().limits.max_chunk_bytes.get(), 16 << 20);
}
