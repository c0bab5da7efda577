//! Confinement suite, part 1: request-path grammar. No spelling of a path (lexical `..`,
//! prefix-collision siblings, absolute and `file://` forms, percent encoding, malformed
//! strings, root visibility) may reach anything outside the root.
//!
//! Every refusal asserts the exact error triple, that the canary never appears in the response
//! (plain or base64), that no host absolute path appears in the error, and that the canary
//! files are untouched. Consent on the whole root is granted first, so each refusal is due to
//! confinement and not to consent.
//!
//! Symlinks and special files are in `confinement_symlinks.rs`; races in `confinement_race.rs`.

use crate::common::confinement::*;
use crate::common::*;
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;
use std::path::Path;

const MALFORMED: Triple = (-31003, "INVALID_PATH", "malformed");

/// `file://` + the percent-encoded absolute path `p` (unreserved bytes and `/` kept).
fn uri(p: &Path) -> String {
    format!("file://{}", encode(&p.to_string_lossy()))
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Lexical `..` in mount-form paths
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_mount_dotdot_to_outside_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let r = read(&b, "project/../outside/secret.txt").await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_nested_dotdot_climbing_out_is_outside_root() {
    let f = Fixture::new();
    f.file("a/x.txt", "inside");
    let b = consented(&f).await;
    for p in [
        "project/a/../../outside/secret.txt",
        "project/a/./../../outside/secret.txt",
        "project//a//..//..//outside//secret.txt",
    ] {
        assert_refused(&f, &read(&b, p).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn read_leading_dotdot_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for p in [
        "../outside",
        "../outside/secret.txt",
        "./../outside/secret.txt",
    ] {
        assert_refused(&f, &read(&b, p).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn list_and_read_mount_dotdot_alone_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    assert_refused(&f, &read(&b, "project/..").await, OUTSIDE_ROOT);
    let r = call(&b, "s", "files/list", json!({"path": "project/.."})).await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
    let r = call(&b, "s", "files/stat", json!({"path": "project/../"})).await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_many_repeated_dotdots_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let deep = format!("project/{}etc/passwd", "../".repeat(64));
    let outside = format!("project/{}{}", "../".repeat(40), abs(&f.outside));
    let leading = format!("{}outside/secret.txt", "../".repeat(64));
    for p in [deep, outside, leading] {
        assert_refused(&f, &read(&b, &p).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn read_dot_then_dotdot_into_sibling_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for p in [
        "project/./../project2/secret.txt",
        "project/../project2/secret.txt",
    ] {
        assert_refused(&f, &read(&b, p).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn stat_and_list_dotdot_escape_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let r = call(
        &b,
        "s",
        "files/stat",
        json!({"path": "project/../outside/secret.txt"}),
    )
    .await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project/../outside", "recursive": true}),
    )
    .await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_dotdot_that_stays_inside_root_succeeds() {
    let f = Fixture::new();
    f.file("a.txt", "inside-a");
    f.dir("sub/deeper");
    let b = consented(&f).await;
    let r = read(&b, "project/sub/deeper/../../a.txt").await;
    assert_read(&f, &r, "inside-a");
}

// ---------------------------------------------------------------------------------------------
// Prefix-collision sibling (`project2` is not inside `project`) and unknown mounts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_absolute_sibling_prefix_collision_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let r = read(&b, &abs(&f.sibling.join("secret.txt"))).await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_file_uri_sibling_prefix_collision_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let r = read(&b, &uri(&f.sibling.join("secret.txt"))).await;
    assert_refused(&f, &r, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_sibling_name_as_mount_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for p in ["project2/secret.txt", "outside/secret.txt", "project2"] {
        assert_refused(&f, &read(&b, p).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn read_mount_name_is_case_sensitive() {
    let f = Fixture::new();
    f.file("a.txt", "inside-a");
    let b = consented(&f).await;
    for p in ["Project/a.txt", "PROJECT/a.txt"] {
        assert_refused(&f, &read(&b, p).await, OUTSIDE_ROOT);
    }
}

// ---------------------------------------------------------------------------------------------
// Absolute and file:// forms
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_absolute_path_inside_root_succeeds() {
    let f = Fixture::new();
    let p = f.file("a.txt", "inside-a");
    let b = consented(&f).await;
    assert_read(&f, &read(&b, &abs(&p)).await, "inside-a");
}

#[tokio::test]
async fn read_file_uri_inside_root_succeeds() {
    let f = Fixture::new();
    let p = f.file("a.txt", "inside-a");
    let b = consented(&f).await;
    assert_read(&f, &read(&b, &uri(&p)).await, "inside-a");
}

#[tokio::test]
async fn read_file_uri_with_localhost_inside_root_succeeds() {
    let f = Fixture::new();
    let p = f.file("a.txt", "inside-a");
    let b = consented(&f).await;
    let u = format!("file://localhost{}", encode(&abs(&p)));
    assert_read(&f, &read(&b, &u).await, "inside-a");
    let u = format!("file://LOCALHOST{}", encode(&abs(&p)));
    assert_read(&f, &read(&b, &u).await, "inside-a");
}

#[tokio::test]
async fn read_file_uri_percent_encoded_space_succeeds() {
    let f = Fixture::new();
    let p = f.file("a b.txt", "inside-space");
    let b = consented(&f).await;
    let u = uri(&p);
    assert!(u.ends_with("a%20b.txt"), "{u}");
    assert_read(&f, &read(&b, &u).await, "inside-space");
}

#[tokio::test]
async fn read_absolute_dotdot_out_of_root_is_outside_root() {
    let f = Fixture::new();
    f.dir("a");
    let b = consented(&f).await;
    let root = abs(&f.root);
    for p in [
        format!("{root}/../outside/secret.txt"),
        format!("{root}/a/../../project2/secret.txt"),
        format!(
            "{root}/../../../../../{}",
            abs(&f.outside.join("secret.txt"))
        ),
        format!("file://{}/../outside/secret.txt", encode(&root)),
    ] {
        assert_refused(&f, &read(&b, &p).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn read_absolute_outside_canary_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let p = f.outside.join("secret.txt");
    assert_refused(&f, &read(&b, &abs(&p)).await, OUTSIDE_ROOT);
    assert_refused(&f, &read(&b, &uri(&p)).await, OUTSIDE_ROOT);
}

#[tokio::test]
async fn read_file_uri_with_other_host_is_malformed() {
    let f = Fixture::new();
    let p = f.file("a.txt", "inside-a");
    let b = consented(&f).await;
    for u in [
        format!("file://otherhost{}", encode(&abs(&p))),
        format!(
            "file://otherhost{}",
            encode(&abs(&f.outside.join("secret.txt")))
        ),
        "file://evil.example/etc/passwd".to_owned(),
    ] {
        assert_refused(&f, &read(&b, &u).await, MALFORMED);
    }
}

#[tokio::test]
async fn read_file_uri_etc_passwd_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for u in ["file:///etc/passwd", "FILE:///etc/passwd", "/etc/passwd"] {
        assert_refused(&f, &read(&b, u).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn list_filesystem_root_is_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for p in ["/", "file:///", "file://localhost/", "//"] {
        let r = call(&b, "s", "files/list", json!({ "path": p })).await;
        assert_refused(&f, &r, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn read_file_uri_without_authority_is_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let no_slashes = format!("file:{}", abs(&f.outside.join("secret.txt")));
    for u in ["file:/etc/passwd", no_slashes.as_str(), "file:"] {
        assert_refused(&f, &read(&b, u).await, MALFORMED);
    }
}

// ---------------------------------------------------------------------------------------------
// Percent encoding: decoded exactly once in URIs, literal in mount form
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_file_uri_encoded_dotdot_is_decoded_once_and_outside_root() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let root = encode(&abs(&f.root));
    for u in [
        format!("file://{root}/%2e%2e/outside/secret.txt"),
        format!("file://{root}/%2E%2E/outside/secret.txt"),
        format!("file://{root}/%2e%2e%2foutside%2fsecret.txt"),
        format!("file://{root}/.%2e/project2/secret.txt"),
    ] {
        assert_refused(&f, &read(&b, &u).await, OUTSIDE_ROOT);
    }
}

#[tokio::test]
async fn read_file_uri_double_encoded_dotdot_stays_literal_and_not_found() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let root = encode(&abs(&f.root));
    let u = format!("file://{root}/%252e%252e/outside/secret.txt");
    assert_refused(&f, &read(&b, &u).await, NOT_FOUND);
}

#[tokio::test]
async fn read_file_uri_double_encoded_dotdot_names_literal_dir_inside() {
    let f = Fixture::new();
    f.file("%2e%2e/outside/secret.txt", "inside-literal");
    let b = consented(&f).await;
    let root = encode(&abs(&f.root));
    let u = format!("file://{root}/%252e%252e/outside/secret.txt");
    assert_read(&f, &read(&b, &u).await, "inside-literal");
}

#[tokio::test]
async fn read_mount_form_percent_is_literal() {
    let f = Fixture::new();
    f.file("100%25", "hundred-literal");
    f.file("100%", "hundred-decoded");
    let b = consented(&f).await;
    assert_read(&f, &read(&b, "project/100%25").await, "hundred-literal");
}

#[tokio::test]
async fn read_mount_form_encoded_dotdot_is_literal_not_found() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for p in [
        "project/%2e%2e/outside/secret.txt",
        "project/%2E%2E/%2E%2E/outside/secret.txt",
    ] {
        assert_refused(&f, &read(&b, p).await, NOT_FOUND);
    }
}

#[tokio::test]
async fn read_file_uri_encoded_nul_backslash_or_control_is_malformed() {
    let f = Fixture::new();
    f.file("a.txt", "inside-a");
    let b = consented(&f).await;
    let root = encode(&abs(&f.root));
    for tail in [
        "a.txt%00",
        "%5c..%5coutside",
        "a%0a.txt",
        "a%7f.txt",
        "a%c2%85.txt",
    ] {
        let u = format!("file://{root}/{tail}");
        assert_refused(&f, &read(&b, &u).await, MALFORMED);
    }
}

#[tokio::test]
async fn read_file_uri_bad_percent_escape_is_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let root = encode(&abs(&f.root));
    for tail in ["%zz", "%2", "%", "%ff%fe"] {
        let u = format!("file://{root}/{tail}");
        assert_refused(&f, &read(&b, &u).await, MALFORMED);
    }
}

// ---------------------------------------------------------------------------------------------
// Malformed strings: backslash, NUL and control characters, lengths, empty
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_backslash_dotdot_is_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for p in [
        "project\\..\\outside\\secret.txt",
        "project/..\\outside/secret.txt",
        "project\\a.txt",
    ] {
        assert_refused(&f, &read(&b, p).await, MALFORMED);
    }
}

#[tokio::test]
async fn read_nul_is_malformed() {
    let f = Fixture::new();
    f.file("a", "inside-a");
    let b = consented(&f).await;
    for p in [
        "project/a\u{0}b",
        "project/a\u{0}",
        "project/a\u{0}/../../outside",
    ] {
        assert_refused(&f, &read(&b, p).await, MALFORMED);
    }
}

#[tokio::test]
async fn read_control_characters_are_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    for c in ['\n', '\r', '\t', '\u{1b}', '\u{7f}', '\u{85}', '\u{9f}'] {
        let p = format!("project/a{c}b");
        assert_refused(&f, &read(&b, &p).await, MALFORMED);
    }
}

#[tokio::test]
async fn read_component_over_255_bytes_is_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let long = format!("project/{}", "a".repeat(256));
    assert_refused(&f, &read(&b, &long).await, MALFORMED);
    let long_abs = format!("{}/{}", abs(&f.root), "a".repeat(256));
    assert_refused(&f, &read(&b, &long_abs).await, MALFORMED);
    // 255 bytes is still a valid name: it is looked up inside the root and is not there.
    let max = format!("project/{}", "a".repeat(255));
    assert_refused(&f, &read(&b, &max).await, NOT_FOUND);
}

#[tokio::test]
async fn read_path_over_4096_bytes_is_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let long = format!("project/{}", "a/".repeat(2048));
    assert!(long.len() > 4096);
    assert_refused(&f, &read(&b, &long).await, MALFORMED);
    // A `..` run that would climb out is refused before normalisation shortens it.
    let climb = format!("project/{}outside/secret.txt", "x/../".repeat(900));
    assert!(climb.len() > 4096);
    assert_refused(&f, &read(&b, &climb).await, MALFORMED);
}

#[tokio::test]
async fn read_empty_path_is_malformed() {
    let f = Fixture::new();
    let b = consented(&f).await;
    assert_refused(&f, &read(&b, "").await, MALFORMED);
    let r = call(&b, "s", "files/list", json!({"path": ""})).await;
    assert_refused(&f, &r, MALFORMED);
}

// ---------------------------------------------------------------------------------------------
// Root visibility: a root for other servers is outside for this one
// ---------------------------------------------------------------------------------------------

fn policy_only_for_other(f: &Fixture) -> Policy {
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"read\"\nservers = [\"other\"]\n\n\
         [audit]\nenabled = false\n\n[consent]\nmode = \"auto\"\n",
        f.root
    );
    Policy::parse(&text, "test").expect("policy")
}

#[tokio::test]
async fn root_invisible_to_unlisted_server_is_outside_root() {
    let f = Fixture::new();
    let p = f.file("a.txt", "inside-a");
    let (b, _rx) = Broker::builder(policy_only_for_other(&f))
        .build()
        .expect("broker");
    // Server `s` does not see the root: consent is refused and every form is outside.
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], false, "{r}");
    for path in ["project/a.txt".to_owned(), abs(&p), uri(&p)] {
        assert_refused(&f, &read(&b, &path).await, OUTSIDE_ROOT);
    }
    let r = call(&b, "s", "roots/list", json!({})).await;
    assert_eq!(ok(&r)["roots"], json!([]), "{r}");
    // The server it is meant for reads it.
    consent_all(&b, "other").await;
    let r = call(&b, "other", "files/read", json!({"path": "project/a.txt"})).await;
    assert_read(&f, &r, "inside-a");
}
