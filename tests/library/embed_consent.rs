//! Consent for a host without boilerplate: a closure provider (`consent::from_fn`) that
//! approves one sub-folder by testing `MountPath::starts_with` against a path parsed from a
//! string, and sees the host paths of what it is asked, for its dialog.

use crate::common::Fixture;
use mcp_fsbroker::policy::{Policy, RootEntry};
use mcp_fsbroker::wire::{ConsentParams, ReadParams};
use mcp_fsbroker::{Broker, ConsentDecision, ErrorKind, MountPath, Reason, consent};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn a_closure_approves_one_folder_and_sees_host_paths() {
    let f = Fixture::new();
    f.file("docs/a.txt", "docs");
    f.file("src/b.rs", "src");
    let seen: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
    let docs: MountPath = "project/docs".parse().unwrap();
    let log = seen.clone();
    let provider = consent::from_fn(move |req| {
        let docs = docs.clone();
        log.lock().unwrap().extend(req.host_paths.iter().cloned());
        async move {
            let approved = req.paths.iter().filter(|p| p.starts_with(&docs)).cloned();
            ConsentDecision::new(approved, req.access)
        }
    });
    let policy = Policy::new().root(RootEntry::new("project", &f.root));
    let (broker, _outbound) = Broker::builder(policy)
        .consent_provider(provider)
        .build()
        .unwrap();
    let answer = broker
        .call("s", ConsentParams::new(["project/docs", "project/src"]))
        .await
        .unwrap();
    assert_eq!(answer.approved_paths, ["project/docs"], "{answer:?}");
    let read = |path: &str| broker.call("s", ReadParams::new(path));
    assert_eq!(read("project/docs/a.txt").await.unwrap().content, "docs");
    let e = read("project/src/b.rs").await.unwrap_err();
    assert_eq!(
        (e.kind(), e.reason()),
        (ErrorKind::PermissionDenied, Some(Reason::NoConsent))
    );
    let canonical = std::fs::canonicalize(&f.root).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [canonical.join("docs"), canonical.join("src")]
    );
}

#[test]
fn mount_paths_parse_from_strings() {
    let p: MountPath = "project/docs/a.txt".parse().unwrap();
    assert!(p.starts_with(&"project/docs".parse().unwrap()));
    assert!(!p.starts_with(&"project/src".parse().unwrap()));
    assert_eq!(p.to_string(), "project/docs/a.txt");
    for bad in ["/etc/passwd", "file:///etc", "project/../x", ""] {
        assert!(bad.parse::<MountPath>().is_err(), "{bad}");
    }
}

/// Set in the child process of [`a_library_broker_never_asks_on_the_hosts_terminal`].
const TERMINAL_CHILD: &str = "FSBROKER_TEST_TERMINAL_CHILD";

/// The child: a host in a process whose controlling terminal is a pseudo-terminal the parent
/// holds, with a broker given neither a consent provider nor a mode.
#[tokio::test]
async fn child_host_with_a_terminal_and_no_consent_mode() {
    if std::env::var_os(TERMINAL_CHILD).is_none() {
        return;
    }
    assert!(
        mcp_fsbroker::consent::TtyConsent::available(),
        "the child has no terminal to be tempted by"
    );
    let f = Fixture::new();
    f.file("a.txt", "secret");
    let policy = Policy::parse(
        &f.policy_text("read", "[consent]\ntimeout_secs = 3\n"),
        "test",
    )
    .unwrap();
    let (broker, _outbound) = Broker::builder(policy).build().unwrap();
    let params = ConsentParams::new(["project/a.txt"]);
    let r = broker.call("host", params).await.unwrap();
    assert!(!r.granted, "{r:?}");
    println!("CHILD-DENIED");
}

/// A library broker with no consent provider and no mode never writes to (or reads from)
/// the process's terminal, which is the host's own (a terminal agent's screen): nobody
/// chosen means nobody asked. Only the `fsbroker` binary falls back to the terminal.
#[test]
fn a_library_broker_never_asks_on_the_hosts_terminal() {
    use std::io::Read;
    let (mut master, slave) = crate::common::pty::pty();
    // A new session whose controlling terminal is the pseudo-terminal's slave side.
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys; os.setsid(); os.open(sys.argv[1], os.O_RDWR); os.execv(sys.argv[2], sys.argv[2:])",
        ])
        .arg(&slave)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "embed_consent::child_host_with_a_terminal_and_no_consent_mode",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TERMINAL_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CHILD-DENIED"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Whatever the child wrote on its terminal is still in the master's queue.
    rustix::io::ioctl_fionbio(&master, true).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(
        seen.is_empty(),
        "the library wrote on the host's terminal: {}",
        String::from_utf8_lossy(&seen)
    );
}
