//! Regressions for the findings of the first security review of the core: each test names
//! the finding it holds down.

use crate::common::*;
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;

#[tokio::test]
async fn deep_recursive_listing_is_capped_and_never_overflows_the_stack() {
    let f = Fixture::new();
    // 1200 nested directories: far past what a recursive walk survives in a debug build.
    let deep = f
        .root
        .join(std::iter::repeat_n("a", 1200).collect::<Vec<_>>().join("/"));
    std::fs::create_dir_all(&deep).unwrap();
    let b = f.broker_with(
        "read",
        "[limits]\nrequests_per_second = 100000\nburst = 100000\nmax_list_page = 10000\n",
    );
    consent_all(&b, "s").await;
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "recursive": true, "limit": 10000}),
    )
    .await;
    let entries = ok(&r)["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), mcp_fsbroker::fixed_limits::MAX_LIST_DEPTH);
    // A cursor deep in the chain skips without emitting and still does not overflow.
    let deep_cursor: Vec<&str> = std::iter::repeat_n("a", 1000).collect();
    let cursor = base64_url(&serde_json::to_vec(&deep_cursor).unwrap());
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "recursive": true, "cursor": cursor}),
    )
    .await;
    assert_eq!(ok(&r)["entries"], json!([]));
}

fn base64_url(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn a_huge_batch_is_refused_whole_with_one_error() {
    let f = Fixture::new();
    let b = f.broker();
    let batch = serde_json::Value::Array(vec![json!(0); 5000]);
    let r = b.handle_message("s", batch).await.unwrap();
    assert_eq!(
        r["error"]["code"],
        -32600,
        "one error, not 5000: {}",
        &r.to_string()[..100]
    );
    assert!(r.get("error").is_some());
    let r = call(&b, "s", "ping", json!({})).await;
    assert_eq!(ok(&r), &json!({}));
}

#[tokio::test]
async fn revoke_of_a_path_reaches_every_session_that_sees_it() {
    let f = Fixture::new();
    let other = f.tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    f.file("a.txt", "a");
    let text = format!(
        "{}\n[[roots]]\npath = {:?}\nmount = \"other\"\nservers = [\"hidden\"]\n",
        f.policy_text("read", "[consent]\nmode = \"auto\"\n"),
        other
    );
    // The `project` root is visible to everyone; sessions are created in several orders.
    let (b, _) = Broker::builder(Policy::parse(&text, "t").unwrap())
        .build()
        .unwrap();
    for s in ["a", "b", "c", "d"] {
        consent_all(&b, s).await;
    }
    call(&b, "hidden", "ping", json!({})).await;
    b.revoke_path(&"project".parse().unwrap());
    for s in ["a", "b", "c", "d"] {
        let r = call(&b, s, "files/read", json!({"path": "project/a.txt"})).await;
        assert_eq!(err(&r).2, "revoked", "session {s} kept its grant");
    }
}

#[tokio::test]
async fn a_symlink_cannot_probe_what_exists_where_no_grant_reaches() {
    let f = Fixture::new();
    f.dir("pub");
    f.file("secret/exists/key", "k");
    f.file("secret/file", "f");
    f.symlink("../secret", "pub/l2");
    let b = f.broker();
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/pub"]}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true);
    for method in ["files/stat", "files/read", "files/list"] {
        for p in [
            "project/pub/l2/nothere/x",
            "project/pub/l2/exists/x",
            "project/pub/l2/file/x",
        ] {
            let r = call(&b, "s", method, json!({"path": p})).await;
            assert_eq!(
                err(&r).2,
                "no_consent",
                "{method} {p} told more than no_consent: {r}"
            );
        }
    }
}

#[tokio::test]
async fn consent_through_a_link_into_a_denied_directory_is_denied_even_for_missing_paths() {
    let f = Fixture::new();
    f.dir("secret");
    f.symlink("secret", "link");
    let b = f.broker_with(
        "read",
        "[consent]\nmode = \"auto\"\n[[consent.rules]]\npaths = [\"project/secret\"]\ndecision = \"deny\"\n",
    );
    for p in ["project/link/new/deeper", "project/link", "project/link/x"] {
        let r = call(&b, "s", "files/consent", json!({"requestedPaths": [p]})).await;
        assert_eq!(ok(&r)["granted"], false, "{p}: {r}");
    }
}

#[tokio::test]
async fn a_recursive_listing_hides_what_was_revoked() {
    let f = Fixture::new();
    f.file("open/a.txt", "a");
    f.file("secret/key", "k");
    let b = f.broker();
    consent_all(&b, "s").await;
    b.revoke("s", &"project/secret".parse().unwrap()).unwrap();
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "recursive": true}),
    )
    .await;
    let text = ok(&r).to_string();
    assert!(text.contains("project/open/a.txt"));
    assert!(
        !text.contains("project/secret"),
        "revoked entries listed: {text}"
    );
}

#[test]
fn absurd_limits_are_refused_at_load_not_at_run_time() {
    let f = Fixture::new();
    for extra in [
        "[limits]\nmax_in_flight = 18446744073709551615\n",
        "[limits]\nmax_line_bytes = 1099511627776\n",
        "[limits]\nmax_chunk_bytes = 1099511627776\n",
    ] {
        let e = Policy::parse(&f.policy_text("read", extra), "p.toml").unwrap_err();
        assert!(e.key.starts_with("limits."), "{e}");
        assert!(e.line.is_some(), "{e}");
    }
}
