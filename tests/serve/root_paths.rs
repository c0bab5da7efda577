//! Where a root's path leads: a relative path in a policy file is taken against the file's
//! directory, wherever fsbroker is started (one on the command line against the working
//! directory).

use crate::common::*;
use crate::sidecar::*;
use serde_json::json;
use std::ffi::OsString;
use std::path::Path;

/// Writes `text` to `at`, creating its directory.
fn put(at: &Path, text: &str) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(at, text).unwrap();
}

/// A policy naming `path = "data"` is about the `data` beside it: started from another
/// directory that has a `data` of its own (a host starts fsbroker wherever it likes), the
/// broker serves the policy's, and the audit file named `audit.jsonl` lands beside the policy
/// too; `--root` on the command line still means the working directory's. `check-policy` run
/// from elsewhere says so, and a relative root that is missing names the directory it was
/// taken against.
#[test]
fn relative_paths_in_a_policy_file_are_taken_against_its_directory() {
    let conf = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    put(&conf.path().join("data/which.txt"), "beside the policy");
    put(&cwd.path().join("data/which.txt"), "working directory");
    put(&cwd.path().join("here/which.txt"), "command line");
    let policy = conf.path().join("policy.toml");
    put(
        &policy,
        "[[roots]]\npath = \"data\"\nmount = \"data\"\n\n[consent]\nmode = \"auto\"\n\n\
         [audit]\nfile = \"audit.jsonl\"\n",
    );
    let args: Vec<OsString> = vec![
        "serve".into(),
        "--policy".into(),
        policy.clone().into(),
        "--root".into(),
        "here".into(),
    ];
    let mut s = Sidecar::spawn(&args, Some(cwd.path()));
    let r = s.request("roots/list", json!({}));
    let uris: Vec<&str> = ok(&r)["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    let expected = [
        file_uri(&conf.path().join("data")),
        file_uri(&cwd.path().join("here")),
    ];
    assert_eq!(uris, expected, "{r}");
    ok(&s.request("files/consent", json!({"requestedPaths": ["data", "here"]})));
    for (path, content) in [
        ("data/which.txt", "beside the policy"),
        ("here/which.txt", "command line"),
    ] {
        let r = s.request("files/read", json!({"path": path}));
        assert_eq!(ok(&r)["content"], content, "{path}: {r}");
    }
    let (status, _) = s.finish();
    assert!(status.success(), "{}", s.stderr());
    assert!(
        conf.path().join("audit.jsonl").exists() && !cwd.path().join("audit.jsonl").exists(),
        "the audit file is the policy's: {}",
        s.stderr()
    );

    // check-policy from another directory prints the root beside the policy.
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("check-policy").arg(&policy).current_dir(cwd.path());
    let ran = run_within(cmd, WAIT);
    assert!(ran.success(), "{}", ran.log());
    let canonical = std::fs::canonicalize(conf.path().join("data")).unwrap();
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains(&format!("path = {canonical:?}")),
        "{}",
        ran.log()
    );

    // A relative root that is not there names the directory it was taken against.
    put(&policy, "[[roots]]\npath = \"missing\"\n");
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("check-policy").arg(&policy).current_dir(cwd.path());
    let ran = run_within(cmd, WAIT);
    assert_eq!(ran.status.and_then(|s| s.code()), Some(2), "{}", ran.log());
    let err = String::from_utf8_lossy(&ran.stderr);
    let dir = conf.path().display().to_string();
    assert!(
        err.contains("\"missing\"") && err.contains("policy file") && err.contains(&dir),
        "{err}"
    );
}
