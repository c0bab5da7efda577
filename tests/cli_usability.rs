//! What a new user trips over on the command line: an empty `FSBROKER_LOG`, a proxy command
//! without `--`, roots whose directory names are not mount names.
mod common;
#[path = "common/proxy_host.rs"]
mod proxy_host;
#[path = "common/sidecar.rs"]
mod sidecar;

use common::*;
use serde_json::json;
use sidecar::*;
use std::ffi::OsString;

/// `FSBROKER_LOG=` (set but empty, as host configuration templates often produce) behaves
/// as unset: warnings still reach stderr.
#[test]
fn an_empty_fsbroker_log_still_logs_warnings() {
    let f = Fixture::new();
    let args: Vec<OsString> = [
        "serve",
        "--root",
        f.root.to_str().unwrap(),
        "--consent",
        "command:/nonexistent/fsbroker-consent-program",
    ]
    .map(OsString::from)
    .to_vec();
    for value in ["", " "] {
        let mut s = Sidecar::spawn_env(&args, &[("FSBROKER_LOG", value)]);
        let r = s.request("files/consent", json!({"requestedPaths": ["project"]}));
        assert_eq!(r["result"]["granted"], false, "{r}");
        let (status, _) = s.finish();
        assert!(status.success(), "{}", s.stderr());
        assert!(
            s.stderr().contains("consent command failed"),
            "FSBROKER_LOG={value:?} silenced the warning: {}",
            s.stderr()
        );
    }
}

/// `fsbroker proxy --root DIR ARGS...`, run to completion with its input closed; returns the
/// exit code and stderr.
fn proxy_run(root: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let mut all: Vec<OsString> = vec!["proxy".into(), "--root".into(), root.into()];
    all.extend(args.iter().map(OsString::from));
    let out = run_bounded(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--` before the server command is optional: everything from the first positional on is
/// the server's, options included (the MCP Inspector swallows `--`), and `--` still works.
#[test]
fn the_server_command_needs_no_double_dash() {
    let f = Fixture::new();
    let out = f.tmp.path().join("argv");
    // The "server" writes its arguments, one a line, and exits; the proxy then ends too.
    let script = format!("printf '%s\\n' \"$@\" > '{}'", out.display());
    let server_args = ["-y", "--root", "x", "--foo", "--", "bar"];
    let cases: [&[&str]; 2] = [
        &["sh", "-c", &script, "sh"],
        &["--", "sh", "-c", &script, "sh"],
    ];
    for prefix in cases {
        let _ = std::fs::remove_file(&out);
        let mut args: Vec<&str> = prefix.to_vec();
        args.extend(server_args);
        let (code, err) = proxy_run(&f.root, &args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        let argv = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {err}"));
        assert_eq!(argv.lines().collect::<Vec<_>>(), server_args, "{args:?}");
    }
}

/// A proxy started without `--` in front of a real MCP server works end to end.
#[test]
fn a_proxy_without_double_dash_serves_its_server() {
    let f = Fixture::new();
    f.file("a.txt", "hello");
    let args: Vec<OsString> = vec![
        "proxy".into(),
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "auto".into(),
        "python3".into(),
        proxy_host::script().into(),
    ];
    let mut p = Sidecar::spawn(&args, None);
    proxy_host::initialize(&mut p, "2025-06-18", json!({}));
    let answers = proxy_host::ask(
        &mut p,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["project"]}],
            ["files/read", {"path": "project/a.txt"}]
        ]),
    );
    assert_eq!(answers[1]["result"]["content"], "hello", "{answers:?}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
}

/// An unknown option before the server command is still a usage error, not a server to run;
/// no command at all says how to give one.
#[test]
fn an_unknown_option_is_not_taken_for_the_server() {
    let f = Fixture::new();
    let (code, err) = proxy_run(&f.root, &["--no-such-option", "sh"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--no-such-option"), "{err}");
    let (code, err) = proxy_run(&f.root, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs the server command"), "{err}");
}
