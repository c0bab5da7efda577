//! The audit log tells the truth: a denied consent is logged as denied, with its paths, its
//! access and who decided; a violation is logged with its reason and a keyed hash of the path
//! asked for, never the outside path itself; turning the audit log off does not silence
//! violations; `--audit-file` and `--no-audit` do what they say; and a consent denied because
//! nobody could be asked is explained once, with the fix.

use crate::common::*;
use crate::sidecar::{Sidecar, WAIT, run_within};
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// A broker over the fixture's root whose audit log is `log`, with `consent` as the TOML of
/// its `[consent]` section.
fn audited(f: &Fixture, log: &Path, consent: &str) -> Broker {
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"write\"\n\n[audit]\nfile = {log:?}\n\n[consent]\n{consent}\n",
        f.root
    );
    let policy = Policy::parse(&text, "test").unwrap_or_else(|e| panic!("{e}"));
    Broker::builder(policy).build().expect("broker").0
}

fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn consent(paths: &[&str], access: &str) -> Value {
    json!({"requestedPaths": paths, "access": access})
}

/// Whether `v` is `hash:` and hex digits.
fn is_hash(v: &Value) -> bool {
    v.as_str()
        .and_then(|s| s.strip_prefix("hash:"))
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[tokio::test]
async fn a_denied_consent_is_logged_as_denied_with_its_paths_access_and_decider() {
    let f = Fixture::new();
    f.dir("open");
    f.dir("closed");
    f.dir("other");
    let log = f.tmp.path().join("audit.jsonl");
    let rules = "mode = \"deny\"\n\
                 [[consent.rules]]\npaths = [\"project/open\"]\ndecision = \"allow\"\n\
                 [[consent.rules]]\npaths = [\"project/closed\"]\ndecision = \"deny\"\n";
    let b = audited(&f, &log, rules);
    // Asked of the provider (mode deny), which refuses.
    let r = call(
        &b,
        "srv",
        "files/consent",
        consent(&["project/other"], "write"),
    )
    .await;
    assert_eq!(ok(&r)["granted"], false, "{r}");
    // Decided by the rules, one each way.
    let r = call(
        &b,
        "srv",
        "files/consent",
        consent(&["project/open", "project/closed"], "read"),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true, "{r}");
    let l = lines(&log);
    assert_eq!(l.len(), 2, "{l:?}");
    assert_eq!(l[0]["method"], "files/consent");
    assert_eq!(l[0]["outcome"], "denied", "{}", l[0]);
    assert_eq!(l[0]["approved"], json!([]), "{}", l[0]);
    assert_eq!(l[0]["denied"], json!(["project/other"]), "{}", l[0]);
    assert_eq!(l[0]["access"], "write", "{}", l[0]);
    assert_eq!(l[0]["decidedBy"], json!(["provider"]), "{}", l[0]);
    assert_eq!(l[1]["outcome"], "partial", "{}", l[1]);
    assert_eq!(l[1]["approved"], json!(["project/open"]), "{}", l[1]);
    assert_eq!(l[1]["denied"], json!(["project/closed"]), "{}", l[1]);
    assert_eq!(l[1]["access"], "read", "{}", l[1]);
    assert_eq!(l[1]["decidedBy"], json!(["rule"]), "{}", l[1]);

    // Mode auto approves everything, and says so.
    let log = f.tmp.path().join("auto.jsonl");
    let b = audited(&f, &log, "mode = \"auto\"");
    let r = call(
        &b,
        "srv",
        "files/consent",
        consent(&["project/other"], "read"),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true, "{r}");
    let l = lines(&log);
    assert_eq!(l[0]["outcome"], "ok", "{}", l[0]);
    assert_eq!(l[0]["approved"], json!(["project/other"]), "{}", l[0]);
    assert_eq!(l[0]["denied"], json!([]), "{}", l[0]);
    assert_eq!(l[0]["decidedBy"], json!(["auto"]), "{}", l[0]);
}

#[tokio::test]
async fn an_escape_attempt_is_logged_with_its_reason_and_a_hash_never_the_outside_path() {
    let f = Fixture::new();
    f.file("inside.txt", "x");
    f.symlink(&f.outside, "door");
    let log = f.tmp.path().join("audit.jsonl");
    let b = audited(&f, &log, "mode = \"auto\"");
    let absolute = f.outside.join("secret.txt").display().to_string();
    // Before consent: denied for no grant.
    let r = read(&b, "srv", "project/inside.txt").await;
    assert_eq!(err(&r).2, "no_consent", "{r}");
    consent_all(&b, "srv").await;
    // Outside every root, by absolute path, by `..`, and through a symlink.
    for (path, reason) in [
        (absolute.as_str(), "outside_root"),
        ("project/../outside/secret.txt", "outside_root"),
        ("project/door/secret.txt", "outside_root"),
    ] {
        let r = read(&b, "srv", path).await;
        assert_eq!(err(&r).1, "PERMISSION_DENIED", "{path}: {r}");
        assert_eq!(err(&r).2, reason, "{path}: {r}");
    }
    // A consent request for an outside path is a violation of its own kind: denied, hashed.
    let r = call(&b, "srv", "files/consent", consent(&[&absolute], "read")).await;
    assert_eq!(ok(&r)["granted"], false, "{r}");
    f.assert_canary_intact();

    let text = std::fs::read_to_string(&log).unwrap();
    for needle in [absolute.as_str(), "outside/", "../"] {
        assert!(
            !text.contains(needle),
            "{needle:?} is in the audit log:\n{text}"
        );
    }
    let l = lines(&log);
    assert_eq!(l.len(), 6, "{l:?}");
    assert_eq!(l[0]["reason"], "no_consent", "{}", l[0]);
    assert!(is_hash(&l[0]["requested"]), "{}", l[0]);
    for line in &l[2..5] {
        assert_eq!(line["outcome"], "PERMISSION_DENIED", "{line}");
        assert_eq!(line["reason"], "outside_root", "{line}");
        assert!(is_hash(&line["requested"]), "{line}");
    }
    // The same path asked for twice has the same hash in one process; different paths differ.
    assert_ne!(l[2]["requested"], l[3]["requested"]);
    let r = read(&b, "srv", &absolute).await;
    assert_eq!(err(&r).2, "outside_root");
    assert_eq!(lines(&log)[6]["requested"], l[2]["requested"]);
    // The consent line shows the outside path as a hash among the denied.
    assert_eq!(l[5]["outcome"], "denied", "{}", l[5]);
    let denied = l[5]["denied"].as_array().expect("denied");
    assert!(denied.len() == 1 && is_hash(&denied[0]), "{}", l[5]);
    assert_eq!(denied[0], l[2]["requested"], "{}", l[5]);
}

async fn read(b: &Broker, server: &str, path: &str) -> Value {
    call(b, server, "files/read", json!({"path": path})).await
}

/// `fsbroker ARGS...` in a new session (no controlling terminal, so no one can be asked on
/// one) with `FSBROKER_LOG` unset: the default log level.
fn sidecar(args: &[&str]) -> Sidecar {
    let mut cmd = Command::new("setsid");
    cmd.arg("-w")
        .arg(bin())
        .args(args.iter().map(OsString::from));
    cmd.env_remove("FSBROKER_LOG");
    Sidecar::start(cmd)
}

/// Waits (bounded) until the process's stderr satisfies `done`, and returns it.
fn stderr_until(s: &Sidecar, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let text = s.stderr();
        if done(&text) || start.elapsed() > WAIT {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Ends the process and returns all it wrote to stderr.
fn finish(mut s: Sidecar) -> String {
    // `Sidecar::finish` waits for the reader of stderr to see its end: the process may have
    // exited with its last lines still in the pipe.
    let (status, _) = s.finish();
    assert!(status.success(), "{status:?}\n{}", s.stderr());
    s.stderr()
}

#[test]
fn with_the_audit_off_a_violation_still_reaches_stderr_at_warn() {
    let f = Fixture::new();
    let policy = f.tmp.path().join("policy.toml");
    std::fs::write(&policy, "[audit]\nenabled = false\n").unwrap();
    let root = f.root.display().to_string();
    let p = policy.display().to_string();
    let mut s = sidecar(&[
        "serve",
        "--policy",
        &p,
        "--root",
        &root,
        "--consent",
        "auto",
        "--server-id",
        "t",
    ]);
    let absolute = f.outside.join("secret.txt").display().to_string();
    let r = s.request("files/read", json!({"path": absolute}));
    assert_eq!(err(&r).2, "outside_root", "{r}");
    let text = stderr_until(&s, |t| t.contains("outside_root"));
    let line = text
        .lines()
        .find(|l| l.contains("outside_root"))
        .unwrap_or_else(|| panic!("no violation on stderr:\n{text}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("hash:"), "{line}");
    let text = finish(s);
    assert!(!text.contains(&absolute), "{text}");
    assert!(
        !text.contains("\"outcome\""),
        "an audit line was written:\n{text}"
    );
}

#[test]
fn audit_file_writes_there_and_no_audit_writes_nothing() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    let root = f.root.display().to_string();
    let log = f.tmp.path().join("flag.jsonl");
    let l = log.display().to_string();
    let base = [
        "serve",
        "--root",
        &root,
        "--consent",
        "auto",
        "--server-id",
        "t",
    ];

    let mut s = sidecar(&[&base[..], &["--audit-file", &l]].concat());
    let r = s.request("files/consent", consent(&["project"], "read"));
    assert_eq!(ok(&r)["granted"], true, "{r}");
    ok(&s.request("files/read", json!({"path": "project/a.txt"})));
    let text = finish(s);
    assert!(
        !text.contains("\"outcome\""),
        "audit went to stderr:\n{text}"
    );
    let got = lines(&log);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1]["path"], "project/a.txt");

    // --no-audit wins over the policy's [audit] section: neither its file nor stderr.
    let policy = f.tmp.path().join("policy.toml");
    let named = f.tmp.path().join("named.jsonl");
    std::fs::write(&policy, format!("[audit]\nfile = {named:?}\n")).unwrap();
    let p = policy.display().to_string();
    let mut s = sidecar(&[&base[..], &["--policy", &p, "--no-audit"]].concat());
    let r = s.request("files/consent", consent(&["project"], "read"));
    assert_eq!(ok(&r)["granted"], true, "{r}");
    ok(&s.request("files/read", json!({"path": "project/a.txt"})));
    let text = finish(s);
    assert!(
        !text.contains("\"outcome\""),
        "audit went to stderr:\n{text}"
    );
    assert!(!named.exists(), "the policy's audit file was written");

    // And the same flags on the proxy.
    let help = run_within(
        {
            let mut c = Command::new(bin());
            c.args(["proxy", "--help"]);
            c
        },
        WAIT,
    );
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--audit-file") && help.contains("--no-audit"),
        "{help}"
    );
}

#[test]
fn a_consent_nobody_could_be_asked_about_is_explained_once_with_the_fix() {
    let f = Fixture::new();
    let root = f.root.display().to_string();
    // No --consent: without a terminal, nobody can be asked.
    let mut s = sidecar(&["serve", "--root", &root, "--server-id", "t", "--no-audit"]);
    for _ in 0..2 {
        let r = s.request("files/consent", consent(&["project"], "read"));
        assert_eq!(ok(&r)["granted"], false, "{r}");
    }
    let text = finish(s);
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("nobody could be asked"))
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("WARN"), "{text}");
    for fix in [
        "--consent-fallback",
        "--consent",
        "[[consent.rules]]",
        "fsbroker console",
    ] {
        assert!(warnings[0].contains(fix), "{fix} not named:\n{text}");
    }
}
