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

/// `fsbroker ARGS...` as the unprivileged user 65534 (root reads every directory whatever its
/// mode), with `bin`, a copy that user may run wherever the checkout lives.
fn as_nobody(bin: &Path, args: &[&std::ffi::OsStr]) -> std::process::Command {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin)
        .args(args);
    cmd
}

/// A root the user fsbroker runs as cannot read is refused naming it, by `check-policy` (which
/// passed it before) as at start; at a reload it is left out with a warning naming it, and
/// the rest of the policy applies.
#[test]
fn a_root_that_cannot_be_read_is_refused_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    put(&base.join("open/a.txt"), "readable");
    std::fs::create_dir(base.join("locked")).unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m)).unwrap();
    mode(&base, 0o755);
    mode(&base.join("open"), 0o755);
    mode(&base.join("locked"), 0o000);
    let copy = base.join("fsbroker");
    std::fs::copy(bin(), &copy).unwrap();
    let bin = copy;
    let policy = base.join("policy.toml");
    let both = "[[roots]]\npath = \"open\"\n\n[[roots]]\npath = \"locked\"\n";
    let refused = |what: &str, ran: &Ran| {
        let err = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(
            ran.status.and_then(|s| s.code()),
            Some(2),
            "{what}: {}",
            ran.log()
        );
        assert!(
            err.contains("roots[1].path")
                && err.contains("\"locked\"")
                && err.contains("uid 65534"),
            "{what}: {err}"
        );
    };
    put(&policy, both);
    let check = as_nobody(&bin, &["check-policy".as_ref(), policy.as_os_str()]);
    refused("check-policy", &run_within(check, WAIT));
    let serve = as_nobody(
        &bin,
        &["serve".as_ref(), "--policy".as_ref(), policy.as_os_str()],
    );
    refused("serve", &run_within(serve, WAIT));

    // At a reload: left out, named, and the rest applies.
    // The recovery store goes where the other user may make it.
    put(
        &policy,
        "[[roots]]\npath = \"open\"\n[recovery]\ndir = \"state/recovery\"\n",
    );
    let state = base.join("state");
    std::fs::create_dir(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
    let mut cmd = as_nobody(
        &bin,
        &["serve".as_ref(), "--policy".as_ref(), policy.as_os_str()],
    );
    cmd.env("FSBROKER_LOG", "info");
    let mut s = Sidecar::start(cmd);
    ok(&s.request("roots/list", json!({})));
    let tmp = base.join("policy.tmp");
    put(
        &tmp,
        &format!("{both}[consent]\nmode = \"auto\"\n[recovery]\ndir = \"state/recovery\"\n"),
    );
    std::fs::rename(&tmp, &policy).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while !s.stderr().contains("policy reloaded") {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload: {}",
            s.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let warned = s.stderr();
    assert!(
        warned.contains("left out") && warned.contains("\"locked\""),
        "{warned}"
    );
    let r = s.request("roots/list", json!({}));
    let names: Vec<&str> = ok(&r)["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["open"], "{r}");
    ok(&s.request("files/consent", json!({"requestedPaths": ["open"]})));
    let r = s.request("files/read", json!({"path": "open/a.txt"}));
    assert_eq!(ok(&r)["content"], "readable", "{r}");
    s.finish();
}

/// A policy file named through a writable root (`../..` from a directory inside it) is
/// refused, since the server could make a directory on the way a link; the refusal says why
/// a path that looks outside is not.
#[test]
fn a_policy_path_through_a_writable_root_is_refused_saying_why() {
    let base = tempfile::tempdir().unwrap();
    let policy = base.path().join("policy.toml");
    put(&policy, "[[roots]]\npath = \"proj\"\naccess = \"write\"\n");
    std::fs::create_dir_all(base.path().join("proj/sub")).unwrap();
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["check-policy", "../../policy.toml"])
        .current_dir(base.path().join("proj/sub"));
    let ran = run_within(cmd, WAIT);
    assert_eq!(ran.status.and_then(|s| s.code()), Some(2), "{}", ran.log());
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(err.contains("without `..`"), "{err}");
    // Named without `..`, the same file loads.
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("check-policy").arg(&policy);
    let ran = run_within(cmd, WAIT);
    assert!(ran.success(), "{}", ran.log());
}
