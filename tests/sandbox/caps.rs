//! `--sandbox-limit`: caps on the sandboxed server's own resources, set before it starts and
//! held by everything it starts; a server past one is stopped, and the user is told why.

use crate::sandboxed::{Layout, python};
use std::ffi::OsString;

/// A server that, once started, takes what it is told to: `memory` allocates 512 MiB and
/// says so; `cpu` spins.
const HOG: &str = r#"
import sys
if sys.argv[1] == "memory":
    block = bytearray(512 * 1024 * 1024)
    print("allocated", len(block), file=sys.stderr, flush=True)
else:
    while True:
        pass
sys.stdin.read()
"#;

fn hog(l: &Layout, what: &str) -> Vec<OsString> {
    std::fs::write(l.base.join("hog.py"), HOG).unwrap();
    vec![python().into(), l.base.join("hog.py").into(), what.into()]
}

#[test]
fn a_server_past_its_memory_cap_is_stopped_and_the_user_told() {
    let l = Layout::new();
    let mut p = l.run(&["--sandbox-limit", "memory=256M"], &hog(&l, "memory"), &[]);
    let (status, _) = p.finish();
    let err = p.stderr();
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(err.contains("MemoryError"), "{err}");
    assert!(!err.contains("allocated"), "{err}");
    assert!(err.contains("under the caps memory 256 MiB"), "{err}");
    // The same server without the cap allocates: the cap is what stopped it.
    let mut p = l.run(&[], &hog(&l, "memory"), &[]);
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    assert!(p.stderr().contains("allocated"), "{}", p.stderr());
}

#[test]
fn a_server_past_its_cpu_cap_is_stopped_and_the_user_told() {
    let l = Layout::new();
    let mut p = l.run(&["--sandbox-limit", "cpu=1"], &hog(&l, "cpu"), &[]);
    // Its input stays open: the server is stopped by its cap, not by the proxy's shutdown,
    // however long a second of CPU takes on a busy machine.
    p.wait_exit(crate::sandboxed::LONG);
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(128 + 24), "{}", p.stderr());
    assert!(
        p.stderr().contains("it used its CPU time cap (1 s)"),
        "{}",
        p.stderr()
    );
}

#[test]
fn bad_limits_are_refused_before_anything_starts() {
    let l = Layout::new();
    for (spec, says) in [
        ("memory=lots", "expected a positive whole number"),
        (
            "disk=1G",
            "the limits are cpu, memory, processes and file-size",
        ),
    ] {
        let mut p = l.run(&["--sandbox-limit", spec], &hog(&l, "cpu"), &[]);
        let (status, _) = p.finish();
        assert_eq!(status.code(), Some(2), "{}", p.stderr());
        assert!(p.stderr().contains(says), "{spec}: {}", p.stderr());
    }
}
