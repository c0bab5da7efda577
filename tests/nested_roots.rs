//! A root nested in a writable root is never found again by following what the server can
//! shape: at start and at reload, the path below the writable root is opened one component at
//! a time without following links, and a link there refuses the policy with a message naming
//! both roots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
mod common;
#[path = "common/sidecar.rs"]
mod sidecar;
use common::*;
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;
use sidecar::Sidecar;
use std::ffi::OsString;
use std::path::Path;

/// `repo` (writable) at the fixture's root and `docs` (writable too: a narrower root may not
/// nest in a wider one) at `rel` beneath it.
fn nested_policy(f: &Fixture, rel: &str) -> String {
    format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n\
         [[roots]]\npath = {:?}\nmount = \"docs\"\naccess = \"write\"\n\n\
         [consent]\nmode = \"auto\"\n\n[audit]\nenabled = false\n",
        f.root,
        f.root.join(rel)
    )
}

fn build(text: &str) -> Result<Broker, String> {
    let policy = Policy::parse(text, "test").map_err(|e| e.to_string())?;
    Broker::builder(policy)
        .build()
        .map(|(b, _)| b)
        .map_err(|e| e.to_string())
}

/// Reads `docs/secret.txt` through a broker, if one starts: never the outside file.
async fn read_secret(b: &Broker) -> String {
    let c = call(b, "s", "files/consent", json!({"requestedPaths": ["docs"]})).await;
    assert_eq!(ok(&c)["granted"], true, "{c}");
    let r = call(b, "s", "files/read", json!({"path": "docs/secret.txt"})).await;
    r["result"]["content"].as_str().unwrap_or("").to_owned()
}

/// The server's move: the directory aside, a link to the outside in its place.
fn swap_for_link(at: &Path, outside: &Path) {
    std::fs::rename(at, at.with_extension("old")).unwrap();
    std::os::unix::fs::symlink(outside, at).unwrap();
}

#[tokio::test]
async fn an_honest_nested_root_opens_and_serves() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let b = build(&nested_policy(&f, "docs")).unwrap();
    assert_eq!(read_secret(&b).await, "docs");
}

#[tokio::test]
async fn a_nested_root_swapped_for_a_link_out_is_refused_at_start() {
    for rel in ["docs", "a/b/docs"] {
        let f = Fixture::new();
        f.file(&format!("{rel}/secret.txt"), "docs");
        let text = nested_policy(&f, rel);
        assert!(build(&text).is_ok());
        // The server moves the nested root (or a directory above it) aside and leaves a link.
        let moved = f.root.join(rel.split('/').next().unwrap());
        let outside = if rel == "docs" {
            f.outside.clone()
        } else {
            std::fs::create_dir_all(f.outside.join("b")).unwrap();
            std::os::unix::fs::symlink(&f.outside, f.outside.join("b/docs")).unwrap();
            f.outside.clone()
        };
        swap_for_link(&moved, &outside);
        match build(&text) {
            Ok(b) => {
                let got = read_secret(&b).await;
                assert_ne!(
                    got, SECRET,
                    "{rel}: the nested root followed the server's link"
                );
                panic!("{rel}: a policy with a nested root behind a link started");
            }
            Err(e) => {
                assert!(e.contains("docs") && e.contains("repo"), "{rel}: {e}");
            }
        }
        std::fs::remove_file(f.outside.join("b/docs")).ok();
        std::fs::remove_dir(f.outside.join("b")).ok();
        f.assert_canary_intact();
    }
}

#[tokio::test]
async fn a_nested_root_swapped_for_a_link_out_is_left_out_at_reload() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let text = nested_policy(&f, "docs");
    let b = build(&text).unwrap();
    swap_for_link(&f.root.join("docs"), &f.outside);
    // The reload goes through without the root it cannot open safely: the link is not
    // followed, and the server cannot hold the reload back by making one.
    b.reload(Policy::parse(&text, "test").unwrap()).unwrap();
    assert!(b.roots().iter().all(|r| r.mount().as_str() != "docs"));
    let r = call(&b, "s", "files/read", json!({"path": "docs/secret.txt"})).await;
    assert_ne!(r["result"]["content"], SECRET, "{r}");
    f.assert_canary_intact();
}

#[tokio::test]
async fn a_server_that_moves_a_nested_root_away_cannot_hold_back_a_narrowing_reload() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let b = build(&nested_policy(&f, "docs")).unwrap();
    // The server renames the nested root's directory away; the user then makes `repo`
    // read-only (and so `docs`, which may not be wider than the root it lies in).
    std::fs::rename(f.root.join("docs"), f.root.join("docs.bak")).unwrap();
    let narrowed = nested_policy(&f, "docs").replace("access = \"write\"", "access = \"read\"");
    let file = f.tmp.path().join("narrowed.toml");
    std::fs::write(&file, narrowed).unwrap();
    b.reload(Policy::load_for_reload(&file).unwrap()).unwrap();
    let repo = b
        .roots()
        .iter()
        .find(|r| r.mount().as_str() == "repo")
        .cloned();
    assert_eq!(repo.map(|r| r.access()), Some(mcp_fsbroker::Access::Read));
    let c = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["repo"]}),
    )
    .await;
    assert_eq!(ok(&c)["granted"], true, "{c}");
    let w = call(
        &b,
        "s",
        "files/write",
        json!({"path": "repo/new.txt", "content": "x"}),
    )
    .await;
    assert!(w.get("error").is_some(), "{w}");
    assert!(!f.root.join("new.txt").exists());
}

#[tokio::test]
async fn a_narrower_root_inside_a_wider_one_is_refused_naming_both() {
    // Through `repo/docs/...` every server that sees `repo` would write the read-only `docs`.
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let read_only = nested_policy(&f, "docs").replacen(
        "mount = \"docs\"\naccess = \"write\"",
        "mount = \"docs\"\naccess = \"read\"",
        1,
    );
    let e = build(&read_only)
        .err()
        .expect("a read-only root inside a writable one");
    assert!(
        e.contains("docs") && e.contains("repo") && e.contains("read"),
        "{e}"
    );
    // Seen by fewer servers: the others would read it through `repo`.
    let hidden = nested_policy(&f, "docs").replacen(
        "mount = \"docs\"\naccess = \"write\"",
        "mount = \"docs\"\naccess = \"write\"\nservers = [\"other\"]",
        1,
    );
    let e = build(&hidden)
        .err()
        .expect("a root seen by fewer servers inside one seen by all");
    assert!(
        e.contains("docs") && e.contains("repo") && e.contains("fewer servers"),
        "{e}"
    );
}

/// A root reached through a link the user made outside every writable root still opens: only
/// what lies beneath a writable root is held to no-follow.
#[tokio::test]
async fn a_link_outside_every_writable_root_is_still_followed() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let alias = f.tmp.path().join("alias");
    std::os::unix::fs::symlink(&f.root, &alias).unwrap();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"docs\"\naccess = \"read\"\n\n\
         [consent]\nmode = \"auto\"\n\n[audit]\nenabled = false\n",
        alias.join("docs")
    );
    let b = build(&text).unwrap();
    assert_eq!(read_secret(&b).await, "docs");
}

/// The policy's other paths follow the same rule: an audit log beneath a writable root (the
/// server could make it a link to a file of the user's, which the broker would then append
/// to) is refused before anything is opened.
#[tokio::test]
async fn an_audit_log_beneath_a_writable_root_is_refused_before_it_is_opened() {
    let f = Fixture::new();
    let bashrc = f.outside.join("secret.txt");
    std::os::unix::fs::symlink(&bashrc, f.root.join("audit.log")).unwrap();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n\
         [consent]\nmode = \"auto\"\n\n[audit]\nenabled = true\nfile = {:?}\n",
        f.root,
        f.root.join("audit.log")
    );
    let Err(e) = build(&text) else {
        panic!("an audit log beneath a writable root was accepted");
    };
    assert!(e.contains("repo") && e.contains("audit"), "{e}");
    f.assert_canary_intact();
}

#[tokio::test]
async fn a_policy_file_beneath_a_writable_root_is_refused() {
    // A server that may write its root could give itself new roots by editing the policy.
    let f = Fixture::new();
    let file = f.root.join("fsbroker.toml");
    std::fs::write(
        &file,
        format!(
            "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n",
            f.root
        ),
    )
    .unwrap();
    let policy = Policy::load(&file).unwrap();
    let Err(e) = Broker::builder(policy).build() else {
        panic!("a policy file beneath a writable root was accepted");
    };
    let e = e.to_string();
    assert!(e.contains("repo") && e.contains("fsbroker.toml"), "{e}");
}

#[tokio::test]
async fn an_audit_log_linked_from_outside_into_a_writable_root_is_refused() {
    // The user's link outside every root leads into the writable root, where the server can
    // put a link of its own in the file's place.
    let f = Fixture::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let user_link = elsewhere.path().join("audit-link.log");
    std::os::unix::fs::symlink(f.root.join("audit.log"), &user_link).unwrap();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n\
         [consent]\nmode = \"auto\"\n\n[audit]\nenabled = true\nfile = {:?}\n",
        f.root, user_link
    );
    let Err(e) = build(&text) else {
        panic!("an audit log reached through a link into a writable root was accepted");
    };
    assert!(e.contains("repo") && e.contains("audit"), "{e}");
    f.assert_canary_intact();
}

#[test]
fn a_consent_program_named_bare_is_found_on_path_at_start_and_judged_there() {
    // A directory on PATH inside the writable root (an activated virtual environment) holds a
    // program of the server's under the consent program's name.
    let f = Fixture::new();
    let bin = f.root.join(".venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let planted = bin.join("fsbroker-test-consent");
    std::fs::write(&planted, "#!/bin/sh\necho '{\"approved\": true}'\n").unwrap();
    std::fs::set_permissions(
        &planted,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--writable", "--root"])
        .arg(&f.root)
        .args(["--consent", "command:fsbroker-test-consent"])
        .env("PATH", &path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("fsbroker-test-consent") && stderr.contains("writable root"),
        "{stderr}"
    );
    // A bare name found nowhere on PATH is said at start, not at the first consent.
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--root"])
        .arg(&f.root)
        .args(["--consent", "command:fsbroker-no-such-consent-program"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not on PATH"), "{stderr}");
}

#[test]
fn a_policy_path_in_a_directory_the_server_made_unreadable_is_still_judged() {
    // Run as an ordinary user (root reads every directory): the server removes read
    // permission from a directory of its own in the root; the audit log there may still be
    // appended to, so it must still be found beneath the writable root.
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let root = base.join("proj");
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for d in [&base, &root, &logs] {
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&logs, std::os::unix::fs::PermissionsExt::from_mode(0o300)).unwrap();
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[consent]\nmode = \"auto\"\n\n[audit]\nenabled = true\nfile = {:?}\n",
            root,
            logs.join("audit.log")
        ),
    )
    .unwrap();
    std::os::unix::fs::chown(&policy, Some(65534), Some(65534)).unwrap();
    // A copy the other user may run wherever the checkout lives.
    let bin = base.join("fsbroker");
    std::fs::copy(common::bin(), &bin).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .arg("serve")
        .arg("--policy")
        .arg(&policy)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("writable root `repo`"), "{stderr}");
    assert!(!logs.join("audit.log").exists());
}

/// Writes an executable consent program at `at` that answers `granted`.
fn consent_program(at: &Path, granted: bool) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(
        at,
        format!("#!/bin/sh\ncat >/dev/null\necho '{{\"granted\": {granted}}}'\n"),
    )
    .unwrap();
    std::fs::set_permissions(at, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn the_consent_program_found_at_start_is_the_one_that_runs() {
    // An empty PATH entry (the working directory) found the user's program at start; a
    // directory earlier on PATH lies in the writable root, and the server puts a program of
    // its own there under the same name afterwards.
    let f = Fixture::new();
    let cwd = tempfile::tempdir().unwrap();
    consent_program(&cwd.path().join("fsbroker-test-consent"), false);
    let venv = f.root.join(".venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    let path = format!("{}::/usr/bin:/bin", venv.display());
    let args: Vec<OsString> = vec![
        "serve".into(),
        "--writable".into(),
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "command:fsbroker-test-consent".into(),
    ];
    let mut s = Sidecar::spawn_with(&args, Some(cwd.path()), &[("PATH", &path)]);
    // Planted once the broker is up (it answers), as a server would.
    let r = s.request("roots/list", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    consent_program(&venv.join("fsbroker-test-consent"), true);
    let r = s.request("files/consent", json!({"requestedPaths": ["project"]}));
    assert_eq!(
        r["result"]["granted"], false,
        "the server's program ran: {r}"
    );
    s.finish();
}

#[test]
fn a_policy_path_that_passes_through_a_writable_root_and_leaves_by_dotdot_is_refused() {
    // Once `sub` is a link the server made, `sub/../..` leads wherever it likes.
    let f = Fixture::new();
    std::fs::create_dir_all(f.root.join("sub")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let ok = elsewhere.path().join("consent");
    consent_program(&ok, true);
    let dotted = f
        .root
        .join("sub/../..")
        .join(pathdiff(elsewhere.path(), f.root.parent().unwrap()))
        .join("consent");
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[consent]\nmode = \"command:{}\"\n",
        f.root,
        dotted.display()
    );
    let e = build(&text)
        .err()
        .expect("a consent program reached through the root");
    assert!(e.contains("repo"), "{e}");
}

/// `to` relative to `from`, by `..` steps: the tests' temporary directories share `/tmp`.
fn pathdiff(to: &Path, from: &Path) -> std::path::PathBuf {
    let mut up = std::path::PathBuf::new();
    let mut base = from.to_path_buf();
    while !to.starts_with(&base) {
        up.push("..");
        base.pop();
    }
    up.join(to.strip_prefix(&base).unwrap())
}

#[tokio::test]
async fn a_root_narrowed_to_a_link_the_server_made_is_never_followed_on_any_reload() {
    // `repo` is P, writable; the server makes P/sub a link out. The user narrows `repo` to
    // P/sub: neither that reload nor any later one may open where the link leads.
    let f = Fixture::new();
    let b = build(&format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[consent]\nmode = \"auto\"\n",
        f.root
    ))
    .unwrap();
    std::os::unix::fs::symlink(&f.outside, f.root.join("sub")).unwrap();
    let narrowed = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[consent]\nmode = \"auto\"\n",
        f.root.join("sub")
    );
    let file = f.tmp.path().join("narrowed.toml");
    std::fs::write(&file, narrowed).unwrap();
    for reload in 0..2 {
        b.reload(Policy::load_for_reload(&file).unwrap()).unwrap();
        assert!(b.roots().iter().next().is_none(), "reload {reload}");
        let c = call(
            &b,
            "s",
            "files/consent",
            json!({"requestedPaths": ["repo"]}),
        )
        .await;
        let r = call(&b, "s", "files/read", json!({"path": "repo/secret.txt"})).await;
        assert_ne!(r["result"]["content"], SECRET, "reload {reload}: {c} {r}");
    }
    f.assert_canary_intact();
}

#[tokio::test]
async fn the_same_directory_as_a_wider_and_a_narrower_root_is_refused() {
    let f = Fixture::new();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[[roots]]\npath = {:?}\nmount = \"again\"\naccess = \"read\"\n",
        f.root,
        f.root.join("x/..")
    );
    std::fs::create_dir_all(f.root.join("x")).unwrap();
    let e = build(&text)
        .err()
        .expect("one directory as two roots of different access");
    assert!(e.contains("again") && e.contains("repo"), "{e}");
}
