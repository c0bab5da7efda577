//! A policy built in code is checked when the broker is built, with the checks and messages
//! of loading the same policy from a file: a grant on a mount no root declares, and limits
//! that contradict each other, fail at `build()` rather than at every request.

use crate::common;
use crate::common::Fixture;
use mcp_fsbroker::policy::{GrantEntry, Limits, Policy, PolicyError, RootEntry};
use mcp_fsbroker::{Access, Broker};
use std::num::NonZeroUsize;

/// The error `build()` gives for `policy`.
fn build_error(policy: Policy) -> PolicyError {
    match Broker::builder(policy).build() {
        Ok(_) => panic!("a policy with a fault was built"),
        Err(e) => e,
    }
}

/// The error loading `text` gives.
fn load_error(text: &str) -> PolicyError {
    match Policy::parse(text, "policy.toml") {
        Ok(_) => panic!("a policy with a fault was loaded"),
        Err(e) => e,
    }
}

#[test]
fn a_grant_on_an_unknown_mount_fails_at_build_as_in_a_file() {
    let f = Fixture::new();
    let in_code = Policy::new()
        .root(RootEntry::new("project", &f.root))
        .grant(GrantEntry::new("elsewhere/docs", Access::Read));
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\n\n[[grants]]\npath = \"elsewhere/docs\"\n",
        f.root
    );
    let (built, loaded) = (build_error(in_code), load_error(&text));
    assert_eq!(built.key, "grants[0].path");
    assert_eq!((built.key, built.message), (loaded.key, loaded.message));
}

#[test]
fn a_chunk_above_the_largest_chunk_fails_at_build_as_in_a_file() {
    let f = Fixture::new();
    let mut limits = Limits::default();
    limits.chunk_bytes = NonZeroUsize::new(32 << 20).unwrap();
    limits.max_chunk_bytes = NonZeroUsize::new(16 << 20).unwrap();
    let in_code = Policy::new()
        .root(RootEntry::new("project", &f.root))
        .limits(limits);
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\n\n[limits]\nchunk_bytes = {}\nmax_chunk_bytes = {}\n",
        f.root,
        32 << 20,
        16 << 20
    );
    let (built, loaded) = (build_error(in_code), load_error(&text));
    assert_eq!(built.key, "limits.chunk_bytes");
    assert_eq!((built.key, built.message), (loaded.key, loaded.message));
}

#[tokio::test]
async fn a_policy_built_in_code_serves_like_one_from_a_file() {
    let f = Fixture::new();
    f.file("docs/a.txt", "in code");
    let policy = Policy::new()
        .root(RootEntry::new("project", &f.root).read_only())
        .grant(GrantEntry::new("project/docs", Access::Read));
    let (broker, _outbound) = Broker::builder(policy).build().unwrap();
    let read = common::call(
        &broker,
        "s",
        "files/read",
        serde_json::json!({"path": "project/docs/a.txt"}),
    )
    .await;
    assert_eq!(common::ok(&read)["content"], "in code");
}
