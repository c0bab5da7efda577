//! Trailing slashes and `.` after a link never lead out of the root (cap-std's own resolver
//! followed `link/` out of its sandbox until 4.0.3, GHSA-hp8f-xmx4-4qrg). Every method is tried
//! on `ln/`, `ln/.`, `ln//` and `d/ln/`, with `ln` a link to a directory outside and to a file
//! outside: none may read, list, change, watch or grant anything there, nor tell what is there.

use crate::common::*;
use serde_json::{Value, json};

const SHAPES: [&str; 5] = ["ln/", "ln/.", "ln//", "d/ln/", "ln/./"];

/// Every method on `path`: (method, params).
fn calls(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("files/read", json!({"path": path})),
        ("files/read", json!({"path": format!("{path}secret.txt")})),
        ("files/stat", json!({"path": path})),
        ("files/list", json!({"path": path, "recursive": true})),
        (
            "files/create",
            json!({"path": format!("{path}made"), "type": "file"}),
        ),
        ("files/create", json!({"path": path, "type": "directory"})),
        (
            "files/write",
            json!({"path": format!("{path}secret.txt"), "content": "pwned"}),
        ),
        (
            "files/write",
            json!({"path": format!("{path}new.txt"), "content": "pwned"}),
        ),
        ("files/write", json!({"path": path, "content": "pwned"})),
        (
            "files/rename",
            json!({"oldPath": "project/inside.txt", "newPath": format!("{path}moved.txt")}),
        ),
        (
            "files/rename",
            json!({"oldPath": format!("{path}secret.txt"), "newPath": "project/stolen.txt"}),
        ),
        ("files/delete", json!({"path": format!("{path}secret.txt")})),
        ("files/watch", json!({"path": path, "recursive": true})),
    ]
}

/// Methods that act on a name and never follow it: on `ln/` they may act on the link itself,
/// inside the root, and must leave what it points at alone.
fn on_the_name(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "files/rename",
            json!({"oldPath": path, "newPath": "project/renamed"}),
        ),
        ("files/delete", json!({"path": path, "recursive": true})),
    ]
}

/// Runs every method on every shape, with `ln` leading to a directory and to a file outside.
pub async fn every_method_on_every_shape_stays_inside() {
    for target in ["dir", "file"] {
        for shape in SHAPES {
            let f = Fixture::new();
            f.file("inside.txt", "in");
            f.dir("d");
            let out = if target == "dir" {
                f.outside.clone()
            } else {
                f.outside.join("secret.txt")
            };
            f.symlink(&out, "ln");
            f.symlink(&out, "d/ln");
            let b = f.broker_with("write", "");
            consent_all(&b, "s").await;
            let path = format!("project/{shape}");
            for (method, params) in calls(&path) {
                let r = call(&b, "s", method, params.clone()).await;
                assert!(
                    r.get("error").is_some(),
                    "{target} {method} {params} succeeded: {r}"
                );
                assert!(!r.to_string().contains(SECRET), "{method} {params}: {r}");
                f.assert_canary_intact();
            }
            let c = call(&b, "s", "files/consent", json!({"requestedPaths": [path]})).await;
            assert!(
                ok(&c)["approvedPaths"].as_array().unwrap().is_empty(),
                "{target} consent on {path}: {c}"
            );
            for (method, params) in on_the_name(&path) {
                let r = call(&b, "s", method, params.clone()).await;
                assert!(!r.to_string().contains(SECRET), "{method} {params}: {r}");
                f.assert_canary_intact();
            }
            assert!(f.root.join("inside.txt").exists(), "{target} {shape}");
            assert!(!f.root.join("stolen.txt").exists() && !f.root.join("stolen").exists());
            // What the link pointed at is still there, whatever happened to the link.
            f.assert_canary_intact();
        }
    }
}

#[tokio::test]
async fn trailing_slashes_after_a_link_out_never_reach_outside() {
    every_method_on_every_shape_stays_inside().await;
}

/// The environment variable that makes this binary's `fallback_child` install the filter:
/// the errno `openat2` answers with.
const ERRNO_VAR: &str = "FSBROKER_TEST_OPENAT2_ERRNO";

/// In a child process only (see below): makes `openat2` fail with the errno the parent chose,
/// checks that it does, then runs every case above on cap-std's fallback resolver.
#[test]
fn fallback_child() {
    let Ok(errno) = std::env::var(ERRNO_VAR) else {
        return;
    };
    let code = match errno.as_str() {
        "ENOSYS" => 38,
        "EPERM" => 1,
        other => panic!("unknown errno {other}"),
    };
    // openat2 is 437 on every architecture with the unified syscall table.
    let rules = std::collections::BTreeMap::from([(437_i64, Vec::new())]);
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(code),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let program: seccompiler::BpfProgram = filter.try_into().unwrap();
    // Applies to this thread and every thread it starts afterwards: the runtime below.
    seccompiler::apply_filter(&program).unwrap();
    let how = rustix::fs::ResolveFlags::BENEATH;
    let tried = rustix::fs::openat2(
        rustix::fs::CWD,
        ".",
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
        how,
    );
    assert_eq!(
        tried.err().map(|e| e.raw_os_error()),
        Some(code as i32),
        "the filter did not take"
    );
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(every_method_on_every_shape_stays_inside());
    // The filter is inherited by every process started from here on: the confinement suites
    // run whole a second time, each in its own process of this binary, on the fallback resolver.
    let exe = std::env::current_exe().unwrap();
    for suite in CONFINEMENT_SUITES {
        let out = std::process::Command::new(&exe)
            .arg(format!("{suite}::"))
            .arg("--test-threads=2")
            .output()
            .unwrap();
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{suite} with openat2 {errno}: {text}");
        assert!(text.contains("test result: ok."), "{suite}: {text}");
        // The filter selected the suite's tests, not nothing.
        assert!(passed(&text) > 0, "{suite} ran no test: {text}");
        println!("SUITE-RAN {suite}");
    }
    println!("FALLBACK-CASES-RAN");
}

/// The confinement suites (modules of this binary) run again under the filter.
const CONFINEMENT_SUITES: &[&str] = &[
    "confinement",
    "confinement_symlinks",
    "confinement_write",
    "confinement_race",
];

/// The count of passed tests in a libtest summary (`test result: ok. N passed; ...`).
fn passed(text: &str) -> usize {
    text.lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum()
}

/// The same cases where `openat2` is missing (ENOSYS) and refused (EPERM), in a child process
/// of this binary, so that cap-std's manual resolver is the one confining every open.
#[test]
fn trailing_slashes_stay_inside_when_openat2_fails() {
    let exe = std::env::current_exe().unwrap();
    for errno in ["ENOSYS", "EPERM"] {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "trailing_slash::fallback_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ERRNO_VAR, errno)
            .output()
            .unwrap();
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{errno}: {text}");
        assert!(text.contains("FALLBACK-CASES-RAN"), "{errno}: {text}");
        for suite in CONFINEMENT_SUITES {
            assert!(
                text.contains(&format!("SUITE-RAN {suite}\n")),
                "{errno}: {text}"
            );
        }
    }
}
