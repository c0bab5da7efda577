//! The broker's private places stay closed to a sandboxed server, whoever asked for the rule
//! that would open them: the daemon's socket directory (its key would let the server sign in
//! to the console and answer its own questions), the state directory, the daemon's log, the
//! console's grants, the audit file, and the files that decide what a server may do (the
//! policy file and the consent program). A script kept above one of them still runs, by
//! itself: its directory is not opened. Each start is the real binary with a real server.

use crate::sandboxed::{CHECKER, Layout, report};
use crate::sidecar::*;
use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A daemon's place in the layout: `run/` as `XDG_RUNTIME_DIR`, with `run/fsbroker/broker.key`
/// (a canary: what a running daemon keeps there), `state/` and `config/` as the state and
/// configuration homes. Returns the environment that names them.
fn daemon_places(l: &Layout) -> Vec<(&'static str, String)> {
    let run = l.base.join("run");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(run.join("fsbroker"))
        .unwrap();
    std::fs::write(run.join("fsbroker/broker.key"), "KEY").unwrap();
    for d in ["state/fsbroker", "config/fsbroker"] {
        std::fs::create_dir_all(l.base.join(d)).unwrap();
    }
    std::fs::write(l.base.join("state/fsbroker/daemon.log"), "LOG").unwrap();
    std::fs::write(l.base.join("config/fsbroker/console.json"), "{}").unwrap();
    vec![
        ("XDG_RUNTIME_DIR", path(&run)),
        ("XDG_STATE_HOME", path(&l.base.join("state"))),
        ("XDG_CONFIG_HOME", path(&l.base.join("config"))),
    ]
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

/// The proxy must not have started the server: exit 1, and a message holding each of `texts`.
fn refused(p: &mut Sidecar, texts: &[&str]) {
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    for t in texts {
        assert!(p.stderr().contains(t), "{t:?} not in: {}", p.stderr());
    }
}

#[test]
fn a_script_kept_above_the_socket_directory_runs_but_cannot_read_the_key() {
    // The review's layout: the server's script in $XDG_RUNTIME_DIR, beside the daemon's
    // `fsbroker/`. Its directory would hold the key; the script alone is opened instead.
    let l = Layout::new();
    let env = daemon_places(&l);
    let script = l.base.join("run/server.py");
    std::fs::write(&script, CHECKER).unwrap();
    let beside = l.base.join("run/notes.txt");
    std::fs::write(&beside, "NOTES").unwrap();
    let key = path(&l.base.join("run/fsbroker/broker.key"));
    let check = format!("{key}:{}:{}", path(&beside), path(&script));
    let mut all = env.clone();
    all.push(("CHECK", check));
    let command: Vec<OsString> = vec![crate::sandboxed::python().into(), script.clone().into()];
    let mut p = l.run(&[], &command, &all);
    let r = report(&mut p);
    p.finish();
    assert_eq!(r["read"][&key], "PermissionError", "{r}");
    assert_eq!(r["read"][path(&beside)], "PermissionError", "{r}");
    // The script itself was opened: it is what ran.
    assert_eq!(r["read"][path(&script)], CHECKER, "{r}");
}

#[test]
fn allowing_the_socket_directory_or_a_place_above_or_within_it_is_refused() {
    let l = Layout::new();
    let env = daemon_places(&l);
    for place in [
        l.base.join("run"),
        l.base.join("run/fsbroker"),
        l.base.join("run/fsbroker/broker.key"),
    ] {
        let allow = path(&place);
        let mut p = l.run(&["--sandbox-allow", &allow], &l.checker(), &env);
        refused(
            &mut p,
            &[
                &allow,
                "--sandbox-allow",
                "socket directory",
                "XDG_RUNTIME_DIR",
            ],
        );
    }
}

#[test]
fn allowing_the_state_directory_the_daemon_log_or_the_consoles_grants_is_refused() {
    let l = Layout::new();
    let env = daemon_places(&l);
    let cases: [(PathBuf, &str); 4] = [
        (l.base.join("state/fsbroker"), "state directory"),
        (l.base.join("state/fsbroker/daemon.log"), "the daemon's log"),
        (l.base.join("config"), "console's grant file"),
        (
            l.base.join("config/fsbroker/console.json:rw"),
            "configuration directory",
        ),
    ];
    for (place, what) in cases {
        let allow = path(&place);
        let mut p = l.run(&["--sandbox-allow", &allow], &l.checker(), &env);
        refused(&mut p, &[what]);
    }
}

#[test]
fn allowing_the_audit_file_or_a_place_above_it_is_refused() {
    let l = Layout::new();
    let logs = l.base.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let audit = path(&logs.join("audit.jsonl"));
    std::fs::write(logs.join("audit.jsonl.1"), "ROTATED").unwrap();
    for place in [logs.clone(), logs.join("audit.jsonl.1")] {
        let allow = path(&place);
        let mut p = l.run(
            &["--audit-file", &audit, "--sandbox-allow", &allow],
            &l.checker(),
            &[],
        );
        refused(&mut p, &["the audit file", "--audit-file"]);
    }
}

#[test]
fn a_root_that_holds_the_state_directory_is_refused_with_the_way_out() {
    // `--root ~` would open ~/.local/state/fsbroker (the daemon's log, the socket when
    // XDG_RUNTIME_DIR is unset) to the server. The store is kept elsewhere here, as a root
    // above the store is refused by the policy itself.
    let l = Layout::new();
    let home = l.home();
    let policy = l.base.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[recovery]\ndir = {:?}\n", path(&l.base.join("store"))),
    )
    .unwrap();
    let mut cmd = l.command(
        &["--policy", &path(&policy), "--root", &path(&home)],
        &l.checker(),
    );
    cmd.env("HOME", &home)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME");
    let mut p = Sidecar::start(cmd);
    refused(
        &mut p,
        &["root home", "state directory", "XDG_STATE_HOME", "narrower"],
    );
}

#[test]
fn allowing_the_proxys_policy_file_or_its_consent_program_or_a_place_above_is_refused() {
    // The proxy's own policy file (outside the configuration directory) and the program that
    // answers its consent questions: a server that could write the first would give itself
    // roots, one that could write the second would answer its own questions.
    let l = Layout::new();
    let pol = l.base.join("pol");
    std::fs::create_dir_all(&pol).unwrap();
    let policy = pol.join("policy.toml");
    std::fs::write(&policy, "[consent]\nmode = \"deny\"\n").unwrap();
    let ask = l.base.join("ask");
    std::fs::create_dir_all(&ask).unwrap();
    let program = ask.join("answer.sh");
    std::fs::write(&program, "#!/bin/sh\necho '{\"granted\": false}'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let consent = format!("command:{}", path(&program));
    let cases: [(String, &str, &str); 4] = [
        (format!("{}:rw", path(&pol)), "policy file", "--policy"),
        (path(&policy), "policy file", "--policy"),
        (format!("{}:rw", path(&ask)), "consent program", "command:"),
        (
            format!("{}:rw", path(&program)),
            "consent program",
            "command:",
        ),
    ];
    for (allow, what, fix) in cases {
        let mut p = l.run(
            &[
                "--policy",
                &path(&policy),
                "--consent",
                &consent,
                "--sandbox-allow",
                &allow,
            ],
            &l.checker(),
            &[],
        );
        refused(&mut p, &[what, fix]);
    }
}
