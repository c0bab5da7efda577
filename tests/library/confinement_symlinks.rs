//! Confinement suite, part 2: symlinks (through read, stat, list and consent), consent that a
//! link must not carry, and special files (FIFO, socket, devices).
//!
//! Every refusal asserts the exact error triple, that the canary never appears in the response
//! (plain or base64), that no host absolute path appears in the error, and that the canary
//! files are untouched. Consent on the whole root is granted first unless the case is about
//! consent itself.

use crate::common::confinement::*;
use crate::common::fs::mkfifo;
use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const NO_CONSENT: Triple = (-31002, "PERMISSION_DENIED", "no_consent");
const SYMLINK_LOOP: Triple = (-31004, "IO_ERROR", "symlink_loop");
const NOT_REGULAR: Triple = (-31003, "INVALID_PATH", "not_regular_file");

async fn stat(b: &Broker, path: &str) -> Value {
    call(b, "s", "files/stat", json!({ "path": path })).await
}

async fn list(b: &Broker, path: &str) -> Value {
    call(b, "s", "files/list", json!({ "path": path })).await
}

/// Reads, stats and lists `path`, asserting `want` from each.
async fn refused_everywhere(f: &Fixture, b: &Broker, path: &str, want: Triple) {
    assert_refused(f, &read(b, path).await, want);
    assert_refused(f, &stat(b, path).await, want);
    assert_refused(f, &list(b, path).await, want);
}

/// Reads and stats each of `paths`, asserting `want` from each.
async fn read_and_stat_refused(f: &Fixture, b: &Broker, paths: &[&str], want: Triple) {
    for p in paths {
        assert_refused(f, &read(b, p).await, want);
        assert_refused(f, &stat(b, p).await, want);
    }
}

// ---------------------------------------------------------------------------------------------
// Symlinks leading outside
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_absolute_symlink_to_outside_dir_is_outside_root() {
    let f = Fixture::new();
    f.symlink(&f.outside, "out");
    let b = consented(&f).await;
    assert_refused(&f, &read(&b, "project/out/secret.txt").await, OUTSIDE_ROOT);
    refused_everywhere(&f, &b, "project/out", OUTSIDE_ROOT).await;
}

#[tokio::test]
async fn read_absolute_symlink_to_outside_file_is_outside_root() {
    let f = Fixture::new();
    f.symlink(f.outside.join("secret.txt"), "s.txt");
    let b = consented(&f).await;
    refused_everywhere(&f, &b, "project/s.txt", OUTSIDE_ROOT).await;
}

#[tokio::test]
async fn read_relative_symlink_to_outside_file_is_outside_root() {
    let f = Fixture::new();
    f.symlink("../outside/secret.txt", "rel.txt");
    f.symlink("../../outside/secret.txt", "sub/rel.txt");
    let b = consented(&f).await;
    refused_everywhere(&f, &b, "project/rel.txt", OUTSIDE_ROOT).await;
    refused_everywhere(&f, &b, "project/sub/rel.txt", OUTSIDE_ROOT).await;
}

#[tokio::test]
async fn read_chained_symlinks_to_outside_is_outside_root() {
    let f = Fixture::new();
    f.symlink("link2", "link1");
    f.symlink("sub/link3", "link2");
    f.symlink(f.outside.join("secret.txt"), "sub/link3");
    f.symlink("link1", "dirlink1");
    f.symlink("../outside", "dirlink2");
    let b = consented(&f).await;
    refused_everywhere(&f, &b, "project/link1", OUTSIDE_ROOT).await;
    refused_everywhere(&f, &b, "project/dirlink1", OUTSIDE_ROOT).await;
    let r = read(&b, "project/dirlink2/secret.txt").await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_symlink_in_middle_of_path_is_outside_root() {
    let f = Fixture::new();
    f.symlink("../outside", "lnk");
    f.symlink(&f.outside, "a/b/abs");
    let b = consented(&f).await;
    let paths = ["project/lnk/secret.txt", "project/a/b/abs/secret.txt"];
    read_and_stat_refused(&f, &b, &paths, OUTSIDE_ROOT).await;
}

/// Observed and required: `..` is applied lexically to the request before any resolution, so
/// `project/lnk/../outside/secret.txt` is `project/outside/secret.txt` (inside), not the
/// kernel's `<lnk target>/../outside/secret.txt` (the canary).
#[tokio::test]
async fn read_dotdot_after_symlink_is_lexical_and_stays_inside() {
    let f = Fixture::new();
    f.symlink("../outside", "lnk");
    f.symlink(&f.sibling, "sib");
    let b = consented(&f).await;
    // Nothing of that name inside the root: not found, never the canary.
    let r = read(&b, "project/lnk/../outside/secret.txt").await;
    assert_refused(&f, &r, NOT_FOUND);
    let r = read(&b, "project/sib/../project2/secret.txt").await;
    assert_refused(&f, &r, NOT_FOUND);
    // With an inside file of that name, it is the inside file that is read.
    f.file("outside/secret.txt", "inside-not-canary");
    let r = read(&b, "project/lnk/../outside/secret.txt").await;
    assert_read(&f, &r, "inside-not-canary");
}

#[tokio::test]
async fn read_symlink_to_sibling_prefix_dir_is_outside_root() {
    let f = Fixture::new();
    f.symlink(&f.sibling, "sib");
    f.symlink("../project2/secret.txt", "sibfile");
    let b = consented(&f).await;
    assert_refused(&f, &read(&b, "project/sib/secret.txt").await, OUTSIDE_ROOT);
    refused_everywhere(&f, &b, "project/sib", OUTSIDE_ROOT).await;
    refused_everywhere(&f, &b, "project/sibfile", OUTSIDE_ROOT).await;
}

/// Existence outside the root is not probed: a dangling link that points outside gets the
/// same answer as one whose target exists.
#[tokio::test]
async fn read_dangling_symlink_to_outside_is_outside_root_not_not_found() {
    let f = Fixture::new();
    f.symlink(f.outside.join("missing.txt"), "dangle_abs");
    f.symlink("../outside/missing.txt", "dangle_rel");
    f.symlink("/nonexistent-fsbroker-dir/x", "dangle_far");
    let b = consented(&f).await;
    for p in [
        "project/dangle_abs",
        "project/dangle_rel",
        "project/dangle_far",
    ] {
        refused_everywhere(&f, &b, p, OUTSIDE_ROOT).await;
    }
}

#[tokio::test]
async fn read_dangling_symlink_inside_root_is_file_not_found() {
    let f = Fixture::new();
    f.symlink("missing.txt", "dangle");
    f.symlink("sub/missing/deeper.txt", "dangle_deep");
    let b = consented(&f).await;
    let paths = ["project/dangle", "project/dangle_deep"];
    read_and_stat_refused(&f, &b, &paths, NOT_FOUND).await;
}

#[tokio::test]
async fn read_symlink_loop_is_symlink_loop_error() {
    let f = Fixture::new();
    f.symlink("b", "a");
    f.symlink("a", "b");
    let b = consented(&f).await;
    assert_refused(&f, &read(&b, "project/a").await, SYMLINK_LOOP);
    assert_refused(&f, &stat(&b, "project/b").await, SYMLINK_LOOP);
    assert_refused(&f, &list(&b, "project/a").await, SYMLINK_LOOP);
    assert_refused(&f, &read(&b, "project/a/x").await, SYMLINK_LOOP);
}

#[tokio::test]
async fn read_self_symlink_loop_is_symlink_loop_error() {
    let f = Fixture::new();
    f.symlink("self", "self");
    f.symlink(f.root.join("abs_self"), "abs_self");
    let b = consented(&f).await;
    refused_everywhere(&f, &b, "project/self", SYMLINK_LOOP).await;
    refused_everywhere(&f, &b, "project/abs_self", SYMLINK_LOOP).await;
}

#[tokio::test]
async fn read_symlink_to_filesystem_root_is_outside_root() {
    let f = Fixture::new();
    f.symlink("/", "slash");
    let b = consented(&f).await;
    refused_everywhere(&f, &b, "project/slash", OUTSIDE_ROOT).await;
    let canary = format!("project/slash{}", abs(&f.outside.join("secret.txt")));
    assert_refused(&f, &read(&b, &canary).await, OUTSIDE_ROOT);
    assert_refused(
        &f,
        &read(&b, "project/slash/etc/passwd").await,
        OUTSIDE_ROOT,
    );
}

#[tokio::test]
async fn read_dotdot_and_dot_symlinks_climbing_out_is_outside_root() {
    let f = Fixture::new();
    f.symlink("..", "up");
    f.symlink(".", "dot");
    f.symlink("../..", "sub/upup");
    f.symlink("dot/dot/up", "chain");
    let b = consented(&f).await;
    for p in [
        "project/up/outside/secret.txt",
        "project/dot/dot/dot/up/outside/secret.txt",
        "project/sub/upup/outside/secret.txt",
        "project/chain/outside/secret.txt",
        "project/up/project2/secret.txt",
    ] {
        assert_refused(&f, &read(&b, p).await, OUTSIDE_ROOT);
    }
    refused_everywhere(&f, &b, "project/up", OUTSIDE_ROOT).await;
    refused_everywhere(&f, &b, "project/chain", OUTSIDE_ROOT).await;
}

#[tokio::test]
async fn read_absolute_symlink_back_inside_root_succeeds() {
    let f = Fixture::new();
    let a = f.file("a.txt", "inside-a");
    f.symlink(&a, "sub/abs_a");
    f.symlink(f.root.join("sub"), "abs_sub");
    let b = consented(&f).await;
    assert_read(&f, &read(&b, "project/sub/abs_a").await, "inside-a");
    assert_read(&f, &read(&b, "project/abs_sub/abs_a").await, "inside-a");
    let r = stat(&b, "project/sub/abs_a").await;
    assert_eq!(ok(&r)["type"], "file", "{r}");
}

#[tokio::test]
async fn read_relative_symlink_inside_root_succeeds() {
    let f = Fixture::new();
    f.file("sub/b.txt", "inside-b");
    f.symlink("sub/b.txt", "rel_b");
    f.symlink("../sub", "x/up_sub");
    f.symlink(".", "dot");
    let b = consented(&f).await;
    assert_read(&f, &read(&b, "project/rel_b").await, "inside-b");
    assert_read(&f, &read(&b, "project/x/up_sub/b.txt").await, "inside-b");
    assert_read(&f, &read(&b, "project/dot/dot/sub/b.txt").await, "inside-b");
}

// ---------------------------------------------------------------------------------------------
// Links through list and consent
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_symlinked_dir_to_outside_is_outside_root() {
    let f = Fixture::new();
    f.symlink(&f.outside, "out");
    f.symlink("../project2", "sib");
    let b = consented(&f).await;
    for p in ["project/out", "project/sib"] {
        let r = call(&b, "s", "files/list", json!({"path": p, "recursive": true})).await;
        assert_refused(&f, &r, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn list_recursive_root_never_shows_outside_entries() {
    let f = Fixture::new();
    f.file("a.txt", "inside-a");
    f.symlink(&f.outside, "out");
    f.symlink("../project2", "sub/sib");
    f.symlink("/", "slash");
    let b = consented(&f).await;
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "recursive": true, "includeHidden": true}),
    )
    .await;
    assert_no_leak(&f, &r);
    let entries = ok(&r)["entries"].as_array().expect("entries").clone();
    let by_path = |p: &str| entries.iter().find(|e| e["path"] == p).cloned();
    for link in ["project/out", "project/sub/sib", "project/slash"] {
        let e = by_path(link).unwrap_or_else(|| panic!("{link} missing: {r}"));
        assert_eq!(e["type"], "symlink", "{e}");
    }
    assert!(by_path("project/a.txt").is_some(), "{r}");
    for e in &entries {
        let name = e["name"].as_str().expect("name");
        assert!(
            !matches!(name, "secret.txt" | "etc" | "tmp" | "proc"),
            "an outside name was listed: {e}"
        );
    }
    assert_eq!(entries.len(), 5, "{r}");
}

#[tokio::test]
async fn consent_for_outside_absolute_path_is_denied() {
    let f = Fixture::new();
    let b = f.broker();
    let outside = abs(&f.outside);
    let outside_uri = format!("file://{outside}");
    let sibling = abs(&f.sibling);
    for p in [
        outside.as_str(),
        outside_uri.as_str(),
        sibling.as_str(),
        "project/../outside",
    ] {
        let r = call(&b, "s", "files/consent", json!({"requestedPaths": [p]})).await;
        assert_no_leak(&f, &r);
        let res = ok(&r);
        assert_eq!(res["granted"], false, "{r}");
        assert_eq!(res["approvedPaths"], json!([]), "{r}");
        // Every requested path is echoed as the server sent it, outside every root included:
        // the server learns nothing it did not send.
        assert_eq!(res["deniedPaths"], json!([p]), "{r}");
        assert_eq!(res["mountPaths"], json!({}), "{r}");
    }
    // Nothing was granted, so the root itself is still without consent.
    f.file("a.txt", "inside-a");
    let r = read(&b, "project/a.txt").await;
    assert_refused(&f, &r, NO_CONSENT);
}

#[tokio::test]
async fn consent_for_symlink_to_outside_is_denied() {
    let f = Fixture::new();
    f.symlink(&f.outside, "lnk");
    f.symlink("../outside/secret.txt", "lnk_file");
    let b = f.broker();
    for p in ["project/lnk", "project/lnk_file"] {
        let r = call(&b, "s", "files/consent", json!({"requestedPaths": [p]})).await;
        assert_no_leak(&f, &r);
        let res = ok(&r);
        assert_eq!(res["granted"], false, "{r}");
        assert_eq!(res["approvedPaths"], json!([]), "{r}");
        assert_eq!(res["deniedPaths"], json!([p]), "{r}");
        // Whatever the consent answer, the link never reads outside.
        let r = read(&b, &format!("{p}/secret.txt")).await;
        assert_no_leak(&f, &r);
        assert!(r.get("error").is_some(), "{r}");
    }
}

/// A broker whose only grant is `project/pub`.
async fn pub_only(f: &Fixture) -> Broker {
    f.file("priv/x.txt", "private-content");
    f.dir("pub");
    let b = f.broker_with("read", "[consent]\nmode = \"auto\"\n");
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/pub"]}),
    )
    .await;
    assert_eq!(ok(&r)["approvedPaths"], json!(["project/pub"]), "{r}");
    b
}

#[tokio::test]
async fn read_through_link_leaving_consented_subtree_is_no_consent() {
    let f = Fixture::new();
    f.symlink("../priv/x.txt", "pub/l");
    f.symlink(f.root.join("priv/x.txt"), "pub/abs");
    let b = pub_only(&f).await;
    for p in ["project/pub/l", "project/pub/abs"] {
        let r = read(&b, p).await;
        assert!(!r.to_string().contains("private-content"), "{r}");
        assert_refused(&f, &r, NO_CONSENT);
    }
    // Direct access is refused the same way, and the grant works for what it covers.
    assert_refused(&f, &read(&b, "project/priv/x.txt").await, NO_CONSENT);
    f.file("pub/ok.txt", "public");
    assert_read(&f, &read(&b, "project/pub/ok.txt").await, "public");
}

#[tokio::test]
async fn list_and_stat_through_link_leaving_consented_subtree_is_no_consent() {
    let f = Fixture::new();
    f.symlink("../priv", "pub/d");
    let b = pub_only(&f).await;
    let r = list(&b, "project/pub/d").await;
    assert!(!r.to_string().contains("x.txt"), "{r}");
    assert_refused(&f, &r, NO_CONSENT);
    assert_refused(&f, &stat(&b, "project/pub/d").await, NO_CONSENT);
    let r = read(&b, "project/pub/d/x.txt").await;
    assert!(!r.to_string().contains("private-content"), "{r}");
    assert_refused(&f, &r, NO_CONSENT);
}

// ---------------------------------------------------------------------------------------------
// Special files: never opened for data, answered at once
// ---------------------------------------------------------------------------------------------

/// Reads `path` within 60 s (a bound for a hang, not a speed); on a hang, unblocks the reader
/// through `fifo` and fails.
async fn read_within(b: &Broker, path: &str, fifo: &Path) -> Value {
    match tokio::time::timeout(Duration::from_secs(60), read(b, path)).await {
        Ok(r) => r,
        Err(_) => {
            // Opening the write end releases a reader blocked in open or read.
            drop(std::fs::OpenOptions::new().write(true).open(fifo));
            panic!("files/read on a FIFO did not answer within 60 s");
        }
    }
}

#[tokio::test]
async fn read_fifo_is_not_regular_file_without_hanging() {
    let f = Fixture::new();
    let fifo = f.root.join("fifo");
    mkfifo(&fifo);
    let b = consented(&f).await;
    let r = read_within(&b, "project/fifo", &fifo).await;
    assert_refused(&f, &r, NOT_REGULAR);
    let r = stat(&b, "project/fifo").await;
    assert_eq!(ok(&r)["type"], "other", "{r}");
}

#[tokio::test]
async fn read_symlink_to_fifo_inside_root_is_not_regular_file() {
    let f = Fixture::new();
    let fifo = f.dir("sub").join("fifo");
    mkfifo(&fifo);
    f.symlink("sub/fifo", "to_fifo");
    let b = consented(&f).await;
    let r = read_within(&b, "project/to_fifo", &fifo).await;
    assert_refused(&f, &r, NOT_REGULAR);
}

#[tokio::test]
async fn read_unix_socket_is_not_regular_file() {
    let f = Fixture::new();
    let _listener = std::os::unix::net::UnixListener::bind(f.root.join("sock")).expect("bind");
    let b = consented(&f).await;
    let r = tokio::time::timeout(Duration::from_secs(60), read(&b, "project/sock"))
        .await
        .expect("files/read on a socket answered within 60 s");
    assert_refused(&f, &r, NOT_REGULAR);
}

#[tokio::test]
async fn read_symlink_to_dev_null_and_dev_zero_is_outside_root() {
    let f = Fixture::new();
    f.symlink("/dev/null", "null");
    f.symlink("/dev/zero", "zero");
    let b = consented(&f).await;
    for p in ["project/null", "project/zero"] {
        let r = tokio::time::timeout(Duration::from_secs(60), read(&b, p))
            .await
            .expect("answered within 60 s");
        assert_refused(&f, &r, OUTSIDE_ROOT);
        assert_refused(&f, &stat(&b, p).await, OUTSIDE_ROOT);
    }
}

/// `mknod` needs CAP_MKNOD. Where it fails the device part is skipped (reported on stderr);
/// the symlink-to-device part above still runs everywhere.
#[tokio::test]
async fn read_character_device_is_not_regular_file() {
    let f = Fixture::new();
    let made = ["null", "zero"]
        .iter()
        .zip(["3", "5"])
        .all(|(name, minor)| {
            std::process::Command::new("mknod")
                .arg(f.root.join(name))
                .args(["c", "1", minor])
                .status()
                .is_ok_and(|s| s.success())
        });
    if !made {
        eprintln!("mknod failed (no CAP_MKNOD): character-device case skipped");
        return;
    }
    let b = consented(&f).await;
    for p in ["project/null", "project/zero"] {
        let r = tokio::time::timeout(Duration::from_secs(60), read(&b, p))
            .await
            .expect("files/read on a device answered within 60 s");
        assert_refused(&f, &r, NOT_REGULAR);
    }
}
