//! How `fsbroker proxy` ends: broker work still queued when the session ends is dropped (a
//! slow consent program runs at most once more), the server is ended with its whole process
//! group, and SIGTERM or SIGINT to the proxy ends the server and reports its exit code.

use crate::common::Fixture;
use crate::proxy_host;
use crate::proxy_host::{initialize, line, script, start_raw};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The revision these sessions speak: the last with JSON-RPC batches, which some of these
/// tests send (2025-06-18 removed them; `batches_removed.rs` holds what happens there).
const BATCH_REVISION: &str = "2025-03-26";

/// A consent program that notes each run in `runs`, takes two seconds, then approves.
fn slow_consent(dir: &Path, runs: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let prog = dir.join("slow-consent.sh");
    std::fs::write(
        &prog,
        format!(
            "#!/bin/sh\necho run >> '{}'\nsleep 2\necho '{{\"granted\": true}}'\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    prog
}

fn run_count(runs: &Path) -> usize {
    std::fs::read_to_string(runs)
        .unwrap_or_default()
        .lines()
        .count()
}

fn consent_request(id: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"files/consent",
           "params":{"requestedPaths":["project"],"access":"read"}})
}

/// Starts the proxy with the slow consent program; returns it and the runs file.
fn with_slow_consent(f: &Fixture) -> (Sidecar, PathBuf) {
    let runs = f.tmp.path().join("runs.txt");
    let prog = slow_consent(f.tmp.path(), &runs);
    let consent = format!("command:{}", prog.display());
    let mut p = proxy_host::spawn_proxy(&f.root, &["--consent", &consent], &[]);
    initialize(&mut p, BATCH_REVISION, json!({}));
    (p, runs)
}

/// After the proxy exited: the consent program ran at most once, also a moment later.
fn assert_ran_at_most_once(runs: &Path) {
    std::thread::sleep(Duration::from_millis(500));
    let n = run_count(runs);
    assert!(
        n <= 1,
        "the consent program ran {n} times after the session ended"
    );
}

#[test]
fn queued_consents_are_dropped_when_the_server_exits() {
    let f = Fixture::new();
    let (mut p, runs) = with_slow_consent(&f);
    let lines: Vec<Value> = (1..=4)
        .map(|i| line(consent_request(&format!("c{i}")).to_string()))
        .collect();
    // Four questions written in one go, and the server is gone.
    start_raw(&mut p, 1, json!({"lines": lines, "exit": 0}));
    let started = Instant::now();
    p.wait_exit(Duration::from_secs(60));
    let took = started.elapsed();
    assert_ran_at_most_once(&runs);
    assert!(took < Duration::from_secs(60), "{took:?}");
}

#[test]
fn queued_consents_in_a_batch_are_dropped_when_the_host_leaves() {
    let f = Fixture::new();
    let (mut p, runs) = with_slow_consent(&f);
    let batch: Vec<Value> = (1..=4).map(|i| consent_request(&format!("c{i}"))).collect();
    start_raw(
        &mut p,
        1,
        json!({"lines": [line(Value::Array(batch).to_string())], "expect": 1, "timeout": 60}),
    );
    // Once the first question is being decided, the host goes away.
    let deadline = Instant::now() + Duration::from_secs(60);
    while run_count(&runs) == 0 {
        assert!(Instant::now() < deadline, "the consent program never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    p.close_stdin();
    p.wait_exit(Duration::from_secs(60));
    assert_ran_at_most_once(&runs);
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only its parent's wait is missing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn the_server_is_ended_with_its_process_group() {
    let f = Fixture::new();
    let pidfile = f.tmp.path().join("grandchild.pid");
    let server = format!(
        "sleep 1000 & echo $! > '{}'; exec python3 '{}'",
        pidfile.display(),
        script().display()
    );
    let args: Vec<OsString> = [
        "proxy",
        "--root",
        f.root.to_str().unwrap(),
        "--consent",
        "deny",
        "--shutdown-grace",
        "0.5",
        "--",
        "sh",
        "-c",
        &server,
    ]
    .map(OsString::from)
    .to_vec();
    let mut p = Sidecar::spawn_env(&args, &[("IGNORE_STDIN_EOF", "term")]);
    initialize(&mut p, BATCH_REVISION, json!({}));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        alive(pid),
        "the grandchild should run while the server does"
    );
    p.close_stdin();
    let started = Instant::now();
    // 0.5 s to SIGTERM (ignored), 0.5 s more to SIGKILL; no waiting for a grandchild that
    // holds the server's output open. The grandchild lives 1000 s, so a bound of 60 s tells
    // waiting for it apart however slow the machine.
    let status = p.wait_exit(Duration::from_secs(60));
    let took = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = alive(pid);
    if survived {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(!survived, "the server's grandchild survived the proxy");
    assert!(
        took < Duration::from_secs(60),
        "the proxy took {took:?} to end a server that ignores SIGTERM ({status:?})"
    );
}

/// A signal sent to the proxy, the server's environment, and the exit code expected.
type SignalCase = (
    rustix::process::Signal,
    &'static [(&'static str, &'static str)],
    i32,
);

#[test]
fn a_signal_to_the_proxy_ends_the_server_and_reports_its_exit_code() {
    use rustix::process::Signal;
    let cases: [SignalCase; 4] = [
        (Signal::TERM, &[("EOF_EXIT_CODE", "42")], 42),
        (Signal::INT, &[("EOF_EXIT_CODE", "43")], 43),
        // A server that stays after its input ends gets SIGTERM.
        (Signal::TERM, &[("IGNORE_STDIN_EOF", "yes")], 128 + 15),
        // One that ignores SIGTERM too is killed.
        (Signal::TERM, &[("IGNORE_STDIN_EOF", "term")], 128 + 9),
    ];
    for (signal, env, code) in cases {
        let f = Fixture::new();
        let mut p = proxy_host::spawn_proxy(
            &f.root,
            &["--consent", "deny", "--shutdown-grace", "0.5"],
            env,
        );
        initialize(&mut p, BATCH_REVISION, json!({}));
        let started = Instant::now();
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(p.pid() as i32).unwrap(),
            signal,
        )
        .unwrap();
        // The host's input stays open: the signal alone ends the session. A server left alone
        // would stay for good, so the generous bound holds only if the proxy ended it.
        let status = p.wait_exit(Duration::from_secs(60));
        let took = started.elapsed();
        assert_eq!(
            status.code(),
            Some(code),
            "{signal:?} {env:?}: {}",
            p.stderr()
        );
        assert!(
            took < Duration::from_secs(60),
            "{signal:?} {env:?}: {took:?}"
        );
    }
}
