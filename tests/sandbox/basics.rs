//! `fsbroker proxy --sandbox`: a server that opens files itself reaches, with the kernel's
//! Landlock rules in force, only its roots (read-only ones read-only), the system, its own
//! installation and a private temporary directory; so does every process it starts. Strict
//! mode refuses a kernel that lacks a right; best effort names what it does not enforce; a
//! reload that takes a root away ends the server. Real peers: a Python stdlib server and the
//! official filesystem server. Every wait is bounded.

use crate::interop;
use crate::sandboxed::{LONG, python, report};
use crate::sidecar::*;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A Python server that tries to read and write around the user's files, runs `cat` on the
/// home canary as a child process, reports what happened as one notification, then waits for
/// its input to end.
const PROBE: &str = r#"
import json, os, subprocess, sys
def read(p):
    try:
        return open(p).read()
    except Exception as e:
        return type(e).__name__
def write(p):
    try:
        open(p, "w").write("x")
        return "ok"
    except Exception as e:
        return type(e).__name__
base = sys.argv[1]
tmp = os.environ.get("TMPDIR", "")
report = {
    "home": read(os.path.join(base, "home/.ssh/id_rsa")),
    "other": read(os.path.join(base, "other/secret.txt")),
    "proj": read(os.path.join(base, "proj/a.txt")),
    "proj_write": write(os.path.join(base, "proj/new.txt")),
    "tmp_write": write(os.path.join(tmp, "scratch")) if tmp else "no TMPDIR",
    "tmpdir": tmp,
    "child": subprocess.run(["cat", os.path.join(base, "home/.ssh/id_rsa")],
                            capture_output=True).returncode,
}
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": report}}), flush=True)
sys.stdin.read()
"#;

/// A fresh layout: `proj` (the root), `other` and a fake `home` with canaries, the probe.
fn layout() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    for d in ["proj", "other", "home/.ssh"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    std::fs::write(base.join("proj/a.txt"), "inside").unwrap();
    std::fs::write(base.join("other/secret.txt"), "CANARY-OTHER").unwrap();
    std::fs::write(base.join("home/.ssh/id_rsa"), "CANARY-HOME").unwrap();
    std::fs::write(base.join("probe.py"), PROBE).unwrap();
    (t, base)
}

/// `fsbroker proxy PROXY_ARGS... python probe.py BASE` with HOME at the fake home.
fn probe(base: &Path, proxy_args: &[&str], env: &[(&str, &str)]) -> Sidecar {
    let mut args: Vec<OsString> = vec!["proxy".into()];
    args.extend(proxy_args.iter().map(OsString::from));
    args.push(python().into());
    args.push(base.join("probe.py").into());
    args.push(base.into());
    let home = base.join("home");
    let mut all: Vec<(&str, &str)> = vec![("HOME", home.to_str().unwrap())];
    all.extend_from_slice(env);
    Sidecar::spawn_env(&args, &all)
}

#[test]
fn a_sandboxed_server_reaches_its_root_and_none_of_the_users_other_files() {
    let (_t, base) = layout();
    let root = base.join("proj");
    let mut p = probe(&base, &["--sandbox", "--root", root.to_str().unwrap()], &[]);
    let r = report(&mut p);
    assert_eq!(r["proj"], "inside", "{r}");
    assert_eq!(r["home"], "PermissionError", "{r}");
    assert_eq!(r["other"], "PermissionError", "{r}");
    assert_eq!(r["proj_write"], "PermissionError", "a read-only root: {r}");
    assert!(!root.join("new.txt").exists());
    assert_ne!(r["child"], 0, "a child process is confined too: {r}");
    let tmp = PathBuf::from(r["tmpdir"].as_str().unwrap());
    assert!(
        tmp.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("fsbroker-sandbox-"),
        "{r}"
    );
    assert_eq!(r["tmp_write"], "ok", "{r}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    assert!(
        !tmp.exists(),
        "the private temporary directory outlived the server"
    );
}

#[test]
fn without_the_sandbox_the_same_server_reads_everything() {
    // The control: the probe can tell, so the test above fails if the sandbox does nothing.
    let (_t, base) = layout();
    let root = base.join("proj");
    let mut p = probe(&base, &["--root", root.to_str().unwrap()], &[]);
    let r = report(&mut p);
    assert_eq!(r["home"], "CANARY-HOME", "{r}");
    assert_eq!(r["other"], "CANARY-OTHER", "{r}");
    assert_eq!(r["child"], 0, "{r}");
    p.finish();
}

#[test]
fn a_writable_root_is_writable_in_the_sandbox_and_nothing_else_is() {
    let (_t, base) = layout();
    let root = base.join("proj");
    let mut p = probe(
        &base,
        &["--sandbox", "--writable", "--root", root.to_str().unwrap()],
        &[],
    );
    let r = report(&mut p);
    assert_eq!(r["proj_write"], "ok", "{r}");
    assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "x");
    assert_eq!(r["home"], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn sandbox_allow_adds_a_directory() {
    let (_t, base) = layout();
    let root = base.join("proj");
    let other = base.join("other");
    let mut p = probe(
        &base,
        &[
            "--sandbox",
            "--sandbox-allow",
            other.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
        &[],
    );
    let r = report(&mut p);
    assert_eq!(r["other"], "CANARY-OTHER", "{r}");
    assert_eq!(r["home"], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn strict_mode_refuses_to_start_the_server_on_a_kernel_that_lacks_a_right() {
    // Landlock ABI 5 has no scoping of signals and abstract sockets, which the profile needs.
    let (_t, base) = layout();
    let root = base.join("proj");
    let mut p = probe(
        &base,
        &["--sandbox", "--root", root.to_str().unwrap()],
        &[("FSBROKER_LANDLOCK_ABI", "5")],
    );
    let (status, lines) = p.finish();
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(lines.is_empty(), "the server ran: {lines:?}");
    let err = p.stderr();
    assert!(err.contains("--sandbox cannot be enforced"), "{err}");
    assert!(err.contains("signals and abstract UNIX sockets"), "{err}");
    assert!(err.contains("--sandbox=best-effort"), "{err}");
}

#[test]
fn best_effort_starts_the_server_and_names_what_is_not_enforced() {
    let (_t, base) = layout();
    let root = base.join("proj");
    let mut p = probe(
        &base,
        &[
            "--sandbox=best-effort",
            "--sandbox-net",
            "none",
            "--root",
            root.to_str().unwrap(),
        ],
        &[("FSBROKER_LANDLOCK_ABI", "3")],
    );
    let r = report(&mut p);
    // ABI 3 still has the file rules.
    assert_eq!(r["home"], "PermissionError", "{r}");
    p.finish();
    let err = p.stderr();
    assert!(err.contains("not enforced on this kernel"), "{err}");
    for missing in ["device ioctl", "TCP connect and bind", "signals"] {
        assert!(err.contains(missing), "{missing} not named: {err}");
    }
    assert!(
        !err.contains("truncating files"),
        "ABI 3 truncation is enforced: {err}"
    );
}

#[test]
fn a_reload_that_removes_the_root_ends_the_sandboxed_server() {
    let (_t, base) = layout();
    let policy = base.join("policy.toml");
    let entry = |dir: &Path, mount: &str| {
        format!("[[roots]]\npath = {dir:?}\nmount = \"{mount}\"\naccess = \"read\"\n\n")
    };
    let tail = "[audit]\nenabled = false\n";
    let put = |text: String| {
        let tmp = policy.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &policy).unwrap();
    };
    put(format!("{}{tail}", entry(&base.join("proj"), "proj")));
    let mut p = probe(
        &base,
        &["--sandbox", "--policy", policy.to_str().unwrap()],
        &[("FSBROKER_LOG", "info")],
    );
    let r = report(&mut p);
    assert_eq!(r["proj"], "inside", "{r}");
    let hup = || {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(p.pid() as i32).unwrap(),
            rustix::process::Signal::HUP,
        )
        .unwrap()
    };
    // A root added: the server keeps running and the log says when it will see it.
    put(format!(
        "{}{}{tail}",
        entry(&base.join("proj"), "proj"),
        entry(&base.join("other"), "other")
    ));
    hup();
    wait_for_log(&p, "only after a restart");
    // The root taken away: the server is ended, and the proxy with it.
    put(format!("{}{tail}", entry(&base.join("other"), "other")));
    hup();
    let status = p.wait_exit(LONG);
    assert!(!status.success(), "{}", p.stderr());
    let err = p.stderr();
    assert!(err.contains("ending the server"), "{err}");
}

/// Waits until the proxy's log contains `text`.
fn wait_for_log(p: &Sidecar, text: &str) {
    let start = std::time::Instant::now();
    while !p.stderr().contains(text) {
        assert!(
            start.elapsed() < LONG,
            "no {text:?} in the log:\n{}",
            p.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The official filesystem server behind `proxy --sandbox`, given `other` as an allowed
/// directory on its own command line.
fn fs_server(base: &Path, extra: &[&str]) -> Sidecar {
    let mut args: Vec<OsString> = vec!["proxy".into(), "--sandbox".into()];
    args.extend(extra.iter().map(OsString::from));
    args.extend([
        "--root".into(),
        base.join("proj").into_os_string(),
        "node".into(),
        interop::fs_server().into(),
        base.join("proj").into_os_string(),
        base.join("other").into_os_string(),
    ]);
    let home = base.join("home");
    let mut p = Sidecar::spawn_env(&args, &[("HOME", home.to_str().unwrap())]);
    p.send(&rpc(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    ));
    let init = p.wait_id(&json!(1));
    assert!(init.get("result").is_some(), "{init}\n{}", p.stderr());
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    p
}

/// Calls a tool; returns (isError, text).
fn call(p: &mut Sidecar, id: i64, tool: &str, arguments: Value) -> (bool, String) {
    p.send(&rpc(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    ));
    let r = p.wait_id(&json!(id));
    let result = &r["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (
        result["isError"] == true || r.get("error").is_some(),
        format!("{text} {r}"),
    )
}

#[test]
fn the_official_filesystem_server_cannot_write_a_read_only_root_or_read_outside_it() {
    let (_t, base) = layout();
    let mut p = fs_server(&base, &[]);
    let inside = base.join("proj/a.txt");
    let (err, text) = call(&mut p, 2, "read_text_file", json!({"path": inside}));
    assert!(!err && text.contains("inside"), "{text}\n{}", p.stderr());
    let canary = base.join("other/secret.txt");
    let (err, text) = call(&mut p, 3, "read_text_file", json!({"path": canary}));
    assert!(err && !text.contains("CANARY"), "{text}");
    let target = base.join("proj/written.txt");
    let (err, text) = call(
        &mut p,
        4,
        "write_file",
        json!({"path": target, "content": "should not land"}),
    );
    assert!(err, "a write in a read-only root succeeded: {text}");
    assert!(!target.exists());
    p.finish();
}

#[test]
fn the_official_filesystem_server_writes_a_writable_root_in_the_sandbox() {
    let (_t, base) = layout();
    let mut p = fs_server(&base, &["--writable"]);
    let target = base.join("proj/written.txt");
    let (err, text) = call(
        &mut p,
        2,
        "write_file",
        json!({"path": target, "content": "landed"}),
    );
    assert!(!err, "{text}\n{}", p.stderr());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "landed");
    p.finish();
}
