//! What a new user trips over on the command line: an empty `FSBROKER_LOG`, a proxy command
//! without `--`, roots whose directory names are not mount names.

use crate::common::*;
use crate::proxy_host;
use crate::sidecar::*;
use serde_json::json;
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
        // A program that exits without a decision: the denial is logged at warn.
        "command:/bin/false",
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

/// A consent program is judged at start, and its failures say what to do: one named with
/// arguments is refused saying `command:` takes none, a missing one is refused at start (not
/// at the first consent), one that exits without a decision is logged, and the terminal
/// prompt without a terminal names the modes that work.
#[test]
fn consent_programs_and_the_terminal_fail_clearly() {
    let f = Fixture::new();
    let root = f.root.to_str().unwrap();
    let refused = [
        ("command:/bin/echo yes", "does not take"),
        (
            "command:/nonexistent/fsbroker-consent-program",
            "No such file",
        ),
    ];
    for (mode, said) in refused {
        let (code, err) = run(&[
            "serve".as_ref(),
            "--root".as_ref(),
            root.as_ref(),
            "--consent".as_ref(),
            mode.as_ref(),
        ]);
        assert_eq!(code, Some(2), "{mode}: {err}");
        assert!(err.contains(said), "{mode}: {err}");
    }
    // Without a controlling terminal (a new session), as a host starts it.
    for (mode, said) in [
        ("command:/bin/false", "without a decision"),
        ("tty", "no controlling terminal"),
    ] {
        let args: Vec<OsString> = ["serve", "--root", root, "--consent", mode]
            .map(OsString::from)
            .to_vec();
        let mut s = Sidecar::spawn_wrapped(&["setsid", "-w"], &args);
        let r = s.request("files/consent", json!({"requestedPaths": ["project"]}));
        assert_eq!(r["result"]["granted"], false, "{r}");
        s.finish();
        assert!(s.stderr().contains(said), "{mode}: {}", s.stderr());
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

/// `fsbroker ARGS...` run to completion with its input closed: exit code and stderr.
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let all: Vec<OsString> = args.iter().map(|a| a.to_os_string()).collect();
    let out = run_bounded(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory whose name is not a mount name (`My Project`, `données`, ...) is served under
/// a mount name derived from it, and the derivation is logged at info.
#[test]
fn a_directory_name_that_is_no_mount_name_gives_a_derived_one() {
    let f = Fixture::new();
    let cases = [
        ("My Project", "My-Project"),
        ("données", "donnees"),
        ("Ærø  Straße (draft)", "AEro-Strasse-draft"),
        ("项目", "root"),
    ];
    for (dir, mount) in cases {
        let d = f.tmp.path().join(dir);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("a.txt"), "hello").unwrap();
        let args: Vec<OsString> = vec![
            "serve".into(),
            "--root".into(),
            d.clone().into(),
            "--consent".into(),
            "auto".into(),
        ];
        let mut s = Sidecar::spawn_env(&args, &[("FSBROKER_LOG", "info")]);
        let r = s.request("roots/list", json!({}));
        assert_eq!(r["result"]["roots"][0]["name"], mount, "{dir}: {r}");
        let r = s.request("files/consent", json!({"requestedPaths": [mount]}));
        assert_eq!(r["result"]["granted"], true, "{dir}: {r}");
        let r = s.request("files/read", json!({"path": format!("{mount}/a.txt")}));
        assert_eq!(r["result"]["content"], "hello", "{dir}: {r}");
        let (status, _) = s.finish();
        assert!(status.success(), "{dir}: {}", s.stderr());
        let log = s.stderr();
        assert!(
            log.lines()
                .any(|l| l.contains("derived") && l.contains(mount) && l.contains(dir)),
            "{dir}: no log of the derived name: {log}"
        );
    }
}

/// A policy root without `mount` derives its name the same way (`check-policy` shows it).
#[test]
fn a_policy_root_without_mount_derives_its_name_too() {
    let f = Fixture::new();
    let d = f.tmp.path().join("My Project");
    std::fs::create_dir(&d).unwrap();
    let policy = f.tmp.path().join("p.toml");
    std::fs::write(&policy, format!("[[roots]]\npath = {d:?}\n")).unwrap();
    let out = run_bounded(&["check-policy".into(), policy.into()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("mount = \"My-Project\""), "{text}");
}

/// A root with no final component (`/`, where a GUI host starts a proxy) is an error that
/// says which flag names the mount.
#[test]
fn a_root_without_a_final_component_says_which_flag_names_it() {
    let (code, err) = run(&["serve".as_ref(), "--root".as_ref(), "/".as_ref()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--root NAME=/"), "{err}");
    // Started in `/` with no root at all, the current directory is the root.
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("proxy").arg("true").current_dir("/");
    let ran = run_within(cmd, WAIT);
    assert_eq!(ran.status.and_then(|s| s.code()), Some(2), "{}", ran.log());
    assert!(ran.log().contains("--root NAME=."), "{}", ran.log());
}

/// A root that cannot be opened is named as given and as resolved, with what it looks like
/// when it is a usual mistake: a `~` or a `${...}` a host did not expand, a relative path
/// taken against another directory.
#[test]
fn a_root_that_cannot_be_opened_is_named_with_what_it_looks_like() {
    let cases = [
        ("~/no-such-notes", "literal `~`"),
        ("${workspaceFolder}", "literal `${...}`"),
        ("no/such/relative", "working directory"),
        ("/no/such/absolute", "\"/no/such/absolute\""),
    ];
    for (root, said) in cases {
        let (code, err) = run(&["serve".as_ref(), "--root".as_ref(), root.as_ref()]);
        assert_eq!(code, Some(2), "{root}: {err}");
        assert!(err.contains(&format!("{root:?}")), "{root} is named: {err}");
        assert!(err.contains(said), "{root}: {err}");
    }
}

/// An explicit mount that breaks the rule is reported with the rule, not read as a path.
#[test]
fn an_invalid_explicit_mount_reports_the_mount_rule() {
    let f = Fixture::new();
    let arg = OsString::from(format!("My Project={}", f.root.display()));
    let (code, err) = run(&["serve".as_ref(), "--root".as_ref(), arg.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("[A-Za-z0-9._-]+"), "{err}");
    assert!(err.contains("My-Project"), "no suggestion: {err}");
    assert!(!err.contains("No such file"), "{err}");
}

/// Two roots whose names derive to the same mount are an error that names the mount and says
/// how to tell them apart; nothing is suffixed behind the user's back.
#[test]
fn two_roots_deriving_the_same_mount_are_an_error() {
    let f = Fixture::new();
    let a = f.tmp.path().join("a/My Project");
    let b = f.tmp.path().join("b/My-Project");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (code, err) = run(&[
        "serve".as_ref(),
        "--root".as_ref(),
        a.as_os_str(),
        "--root".as_ref(),
        b.as_os_str(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("My-Project"), "{err}");
    assert!(err.contains("used by another root"), "{err}");
    assert!(err.contains("--root NAME=PATH"), "{err}");
}

/// Plain `serve` has no daemon for `fsbroker resume` to reach: its suspension says what
/// works there (ending the session, or running it attached to a daemon), in the refusal the
/// server gets and in the warning the user reads. (Review: it told the user to run
/// `fsbroker resume`, which answered "no daemon".)
#[test]
fn a_plain_serve_suspension_says_what_lifts_it_there() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    for _ in 0..20 {
        let r = s.request("files/read", json!({"path": "/etc/passwd"}));
        assert_eq!(r["error"]["data"]["reason"], "outside_root", "{r}");
    }
    let r = s.request("files/read", json!({"path": "project/a.txt"}));
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    let message = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!message.contains("fsbroker resume"), "{r}");
    assert!(message.contains("end this session"), "{r}");
    assert!(message.contains("--daemon"), "{r}");
    let (status, _) = s.finish();
    assert!(status.success(), "{}", s.stderr());
    let warned = s
        .stderr()
        .lines()
        .find(|l| l.contains("suspended a session"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no warning: {}", s.stderr()));
    assert!(!warned.contains("fsbroker resume"), "{warned}");
    assert!(warned.contains("end this session"), "{warned}");
}

/// A `-32602` refusal names what was wrong in whole words: a long schema message is cut at
/// a word's end and says that it was cut. (Review: it was cut after 100 characters, mid-word.)
#[test]
fn an_invalid_params_message_is_not_cut_mid_word() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let r = s.request(
        "files/write",
        json!({"path": "project/x.txt", "content": "x", "bogusOption": true}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("bogusOption"), "{r}");
    // No name is left half-quoted, and a cut message says so at a word's end.
    assert_eq!(
        message.matches('`').count() % 2,
        0,
        "a name is cut: {message:?}"
    );
    assert!(
        message.ends_with('`') || message.ends_with(" ..."),
        "the message ends mid-word: {message:?}"
    );
}
