//! The policy's own paths (the policy file, the audit log, `command:` consent programs) are
//! held to the rule roots are: beneath a writable root, reached through a link or a directory
//! there, or in a place that cannot be judged, they are refused; a consent program runs by the
//! real path found at start.

use crate::common;
use crate::common::*;
use crate::sidecar::Sidecar;
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;
use std::ffi::OsString;
use std::path::Path;

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
    let Err(e) = try_broker(&text) else {
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
    let Err(e) = try_broker(&text) else {
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
    let e = try_broker(&text).expect_err("a consent program reached through the root");
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
