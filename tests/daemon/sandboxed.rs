//! `proxy --daemon --sandbox`: the sandbox's profile comes from the daemon's roots, `status`
//! shows the session sandboxed, and a reload of the daemon's policy that takes a root away
//! ends the sandboxed server, as it does with the proxy's own broker.

use crate::place::Place;
use crate::sidecar::Sidecar;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Asks for its roots through the proxy, reports them, then waits for its input to end.
const SERVER: &str = r#"
import json, sys
print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}), flush=True)
answer = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": answer}}), flush=True)
sys.stdin.read()
"#;

const LONG: Duration = Duration::from_secs(60);

#[test]
fn a_sandboxed_attached_server_is_ended_when_the_daemon_takes_its_root_away() {
    let p = Place::new();
    let proj = p.tmp.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    let policy = p.tmp.path().join("policy.toml");
    let put = |text: String| {
        let tmp = policy.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &policy).unwrap();
    };
    let tail = "[consent]\nmode = \"deny\"\n";
    put(format!(
        "[[roots]]\npath = {proj:?}\nmount = \"proj\"\n\n{tail}"
    ));
    let d = p.start_with(&["--policy", policy.to_str().unwrap()]);

    let mut cmd = std::process::Command::new(crate::common::bin());
    cmd.arg("proxy")
        .arg(format!("--daemon={}", p.socket().display()))
        .args(["--sandbox", "--sandbox-limit", "memory=1G", "--"])
        .args(["python3", "-c", SERVER])
        .env("FSBROKER_LOG", "info");
    let mut proxy = Sidecar::start(cmd);
    let n = proxy.next_within(LONG);
    let roots = &n["params"]["data"]["result"]["roots"];
    let names: Vec<&str> = roots
        .as_array()
        .unwrap_or_else(|| panic!("{n}\n{}", proxy.stderr()))
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"proj"), "{n}");

    let ran = p.verb(&["status", "--json", "--daemon", p.socket().to_str().unwrap()]);
    let status: Value = serde_json::from_str(&ran.out()).unwrap();
    let session = &status["sessions"][0];
    assert_eq!(session["sandbox"]["mode"], "strict", "{status}");
    assert_eq!(session["sandbox"]["caps"], "memory 1 GiB", "{status}");
    assert!(session["serverPid"].as_u64().is_some(), "{status}");
    // What the server's processes cost, read beneath the proxy the kernel names.
    assert!(
        session["process"]["processes"].as_u64().unwrap() >= 1,
        "{status}"
    );
    assert!(
        session["process"]["rssBytes"].as_u64().unwrap() > 0,
        "{status}"
    );
    let table = p
        .verb(&["status", "--daemon", p.socket().to_str().unwrap()])
        .out();
    assert!(
        table.contains("sandboxed (strict; caps memory 1 GiB)"),
        "{table}"
    );
    assert!(table.contains("  process    "), "{table}");

    // The root taken away, on the daemon: the server is ended, and the proxy with it.
    put(tail.to_owned());
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(d.pid() as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    let status = proxy.wait_exit(LONG);
    assert!(!status.success(), "{}", proxy.stderr());
    assert!(
        proxy.stderr().contains("ending the server"),
        "{}",
        proxy.stderr()
    );
    // And the daemon's session went with it.
    let deadline = Instant::now() + LONG;
    loop {
        let ran = p.verb(&["status", "--json", "--daemon", p.socket().to_str().unwrap()]);
        let v: Value = serde_json::from_str(&ran.out()).unwrap();
        if v["sessions"] == serde_json::json!([]) {
            break;
        }
        assert!(Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_sandboxed_attached_server_is_refused_the_places_the_daemon_keeps() {
    // The daemon names its socket (through `--daemon=SOCKET`), its audit file, its log and
    // its console's grant file (in its description); the proxy's own environment names none
    // of them, and still none opens.
    let p = Place::new();
    let logs = p.tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let audit = logs.join("audit.jsonl");
    let _d = p.start_with(&["--audit-file", audit.to_str().unwrap()]);
    let log = p.daemon_log();
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "LOG").unwrap();
    let config = p.tmp.path().join("config");
    std::fs::create_dir_all(config.join("fsbroker")).unwrap();
    for (allow, what) in [
        (p.run.clone(), "socket directory"),
        (p.key(), "socket directory"),
        (logs.clone(), "the audit file"),
        (log, "the daemon's log"),
        (config, "configuration directory"),
    ] {
        let mut cmd = std::process::Command::new(crate::common::bin());
        cmd.arg("proxy")
            .arg(format!("--daemon={}", p.socket().display()))
            .args(["--sandbox", "--sandbox-allow"])
            .arg(&allow)
            .args(["--", "python3", "-c", "import sys; sys.stdin.read()"]);
        let mut proxy = Sidecar::start(cmd);
        let (status, _) = proxy.finish();
        assert_eq!(status.code(), Some(1), "{}", proxy.stderr());
        assert!(proxy.stderr().contains(what), "{what}: {}", proxy.stderr());
    }
}

#[test]
fn a_sandboxed_attached_server_is_refused_the_daemons_policy_file_and_consent_program() {
    // The daemon's policy file lies outside its configuration directory (`--policy`), and a
    // program of the user's answers its consent questions; the proxy's environment names
    // neither. A server that could write the policy would give itself roots when the daemon
    // reloads it on save; one that could write the program would answer its own questions.
    let p = Place::new();
    let pol = p.tmp.path().join("pol");
    std::fs::create_dir(&pol).unwrap();
    let policy = pol.join("policy.toml");
    std::fs::write(&policy, "[consent]\nmode = \"deny\"\n").unwrap();
    let ask = p.tmp.path().join("ask");
    std::fs::create_dir(&ask).unwrap();
    let program = ask.join("answer.sh");
    std::fs::write(&program, "#!/bin/sh\necho '{\"granted\": false}'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let consent = format!("command:{}", program.display());
    let _d = p.start_with(&["--policy", policy.to_str().unwrap(), "--consent", &consent]);
    for (allow, what) in [
        (format!("{}:rw", pol.display()), "the broker's policy file"),
        (policy.display().to_string(), "the broker's policy file"),
        (format!("{}:rw", ask.display()), "the consent program"),
    ] {
        let mut cmd = std::process::Command::new(crate::common::bin());
        cmd.arg("proxy")
            .arg(format!("--daemon={}", p.socket().display()))
            .args(["--sandbox", "--sandbox-allow", &allow])
            .args(["--", "python3", "-c", "import sys; sys.stdin.read()"]);
        let mut proxy = Sidecar::start(cmd);
        let (status, _) = proxy.finish();
        assert_eq!(status.code(), Some(1), "{allow}: {}", proxy.stderr());
        assert!(proxy.stderr().contains(what), "{what}: {}", proxy.stderr());
    }
}
