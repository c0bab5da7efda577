//! A server that ignores roots is told apart: one that ends its handshake without asking for
//! them is named once, at warn, and the directories on its own command line that no root
//! holds are named at start, with the `--root` that would hold them under `--sandbox`.

use crate::common::*;
use crate::proxy_host::{self, spawn_proxy};
use crate::sidecar::*;
use serde_json::json;
use std::ffi::OsString;

/// What the proxy says of a server that did not ask for its roots.
const UNASKED: &str = "without asking for its roots";

/// A server that answers the host after its handshake without having asked for its roots
/// (as the official filesystem server does in a 2026-07-28 session, or any server that uses
/// only its own arguments) is said to, once; one that asks on `initialized` is not.
#[test]
fn a_server_that_ends_its_handshake_without_asking_for_roots_is_named_once() {
    let f = Fixture::new();
    for (env, said) in [(&[][..], 1), (&[("ROOTS_ON_INITIALIZED", "1")][..], 0)] {
        let mut p = spawn_proxy(&f.root, &[], env);
        proxy_host::initialize(&mut p, "2025-06-18", json!({}));
        for id in [1, 2] {
            p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/list"}));
            let r = p.wait_id(&json!(id));
            assert!(r.get("result").is_some(), "{r}");
        }
        if said == 0 {
            // The server waits for its roots to end well: the host goes only once they were
            // answered (the audit line of `roots/list`), however long attaching took.
            let deadline = std::time::Instant::now() + WAIT;
            while !p.stderr().contains("\"method\":\"roots/list\"") {
                assert!(std::time::Instant::now() < deadline, "{}", p.stderr());
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let (status, _) = p.finish();
        assert!(status.success(), "{}", p.stderr());
        assert_eq!(
            p.stderr().matches(UNASKED).count(),
            said,
            "{env:?}: {}",
            p.stderr()
        );
    }
}

/// `fsbroker proxy --root ROOT OPTS... -- python3 scripted_server.py ARGS...`, run with its
/// input closed; returns stderr.
fn started(root: &std::path::Path, opts: &[&str], args: &[&std::path::Path]) -> String {
    let mut all: Vec<OsString> = vec!["proxy".into(), "--root".into(), root.into()];
    all.extend(opts.iter().map(OsString::from));
    all.extend(["--".into(), "python3".into(), proxy_host::script().into()]);
    all.extend(args.iter().map(OsString::from));
    let out = run_bounded(&all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// A directory on the server's command line that no root holds is named at start; under
/// `--sandbox`, which would keep the server from it, with the `--root` that would let it.
/// One inside a root is not named.
#[test]
fn directories_on_the_servers_command_line_outside_every_root_are_named_at_start() {
    let f = Fixture::new();
    let inside = f.dir("docs");
    let outside = std::fs::canonicalize(&f.outside).unwrap();
    let inside_real = std::fs::canonicalize(&inside).unwrap();
    let err = started(&f.root, &[], &[&outside, &inside]);
    let named = outside.display().to_string();
    assert!(
        err.contains(&named) && err.contains("not inside any root"),
        "{err}"
    );
    assert!(!err.contains(&inside_real.display().to_string()), "{err}");
    let err = started(&f.root, &["--sandbox=best-effort"], &[&outside, &inside]);
    assert!(err.contains(&format!("--root {named}")), "{err}");
    assert!(
        !err.contains(&format!("--root {}", inside_real.display())),
        "{err}"
    );
}
