//! A sandboxed server runs as the user, and Landlock below ABI 9 does not stop it from
//! connecting to the daemon's socket: the key beside the socket is what keeps it out. Such
//! a server cannot read the key, and without it gets nothing: no attach under another
//! server's name, no status, no log, no revoke. A sandboxed server attached to the daemon is
//! refused at once, by where the kernel says it runs, and its flood keeps nobody out.

use crate::place::Place;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;

/// Tries the key, then every control request with a made-up key, and reports.
const INTRUDER: &str = r#"
import json, os, socket, sys
report = {}
try:
    report["key"] = open(os.environ["KEY"]).read()
except Exception as e:
    report["key"] = type(e).__name__
answers = []
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["SOCK"])
    f = s.makefile("rwb")
    for line in [{"hello": "0" * 64}, {"op": "status"}, {"op": "log"},
                 {"op": "attach", "server": "alpha"}, {"op": "revoke", "all": True}]:
        f.write((json.dumps(line) + "\n").encode())
    f.flush()
    s.shutdown(socket.SHUT_WR)
    answers = [l.decode() for l in f.readlines()]
    report["connected"] = True
except Exception as e:
    report["connected"] = type(e).__name__
report["answers"] = answers
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": report}}), flush=True)
sys.stdin.read()
"#;

#[test]
fn a_sandboxed_server_cannot_read_the_key_and_gets_nothing_from_the_socket() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "x").unwrap();
    let _d = p.start_with(&["--consent", "auto"]);
    // A session whose grant the intruder would like to take away.
    let daemon = format!("--daemon={}", p.socket().display());
    let args: Vec<OsString> = ["serve", &daemon, "--server-id", "alpha"]
        .iter()
        .map(OsString::from)
        .collect();
    let mut alpha = Sidecar::spawn(&args, None);
    let r = alpha.request("files/consent", json!({"requestedPaths": ["root"]}));
    assert_eq!(r["result"]["granted"], true, "{r}");

    let proj = p.tmp.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    let mut cmd = std::process::Command::new(crate::common::bin());
    cmd.args(["proxy", "--sandbox", "--root"])
        .arg(&proj)
        .args(["--", "python3", "-c", INTRUDER])
        .env("KEY", p.key())
        .env("SOCK", p.socket());
    let mut intruder = Sidecar::start(cmd);
    let n = intruder.next_within(std::time::Duration::from_secs(60));
    let report = &n["params"]["data"];
    assert_eq!(
        report["key"],
        "PermissionError",
        "{n}\n{}",
        intruder.stderr()
    );
    // Connected or not (a later kernel may refuse the connection), nothing was served: one
    // refusal of the hello, then the connection closed.
    let answers: Vec<Value> = report["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| serde_json::from_str(a.as_str().unwrap()).unwrap())
        .collect();
    assert!(answers.len() <= 1, "{answers:?}");
    for a in &answers {
        assert_eq!(a["ok"], false, "{a}");
        assert!(a["error"].as_str().unwrap().contains("key"), "{a}");
    }
    // alpha keeps its grant and its name; nobody else attached.
    let ran = p.verb(&["status", "--json", "--daemon", p.socket().to_str().unwrap()]);
    let status: Value = serde_json::from_str(&ran.out()).unwrap();
    let sessions = status["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{status}");
    assert_eq!(sessions[0]["server"], "alpha");
    assert_eq!(sessions[0]["grants"][0]["path"], "root", "{status}");
}

/// Asks for its roots (so that its proxy is attached: the daemon answers), connects once and
/// reports the first line it is sent; then floods the socket with
/// connections that never say hello (holding up to 200, reconnecting as they are closed)
/// until its input ends.
const FLOODER: &str = r#"
import json, os, socket, sys, threading
print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}), flush=True)
sys.stdin.readline()
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["SOCK"])
    return s
first = connect()
first.settimeout(30)
try:
    said = first.makefile().readline()
except Exception as e:
    said = type(e).__name__
held = []
def flood():
    while True:
        try:
            held.append(connect())
        except Exception:
            pass
        if len(held) >= 200:
            held.pop(0).close()
threading.Thread(target=flood, daemon=True).start()
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": said}}), flush=True)
sys.stdin.read()
"#;

#[test]
fn a_sandboxed_attached_server_is_refused_at_once_and_its_flood_keeps_nobody_out() {
    let p = Place::new();
    let started = std::time::Instant::now();
    let d = p.start_with(&["--consent", "auto"]);
    let mut cmd = std::process::Command::new(crate::common::bin());
    cmd.arg("proxy")
        .arg(format!("--daemon={}", p.socket().display()))
        .args(["--sandbox", "--", "python3", "-c", FLOODER])
        .env("SOCK", p.socket());
    let mut flooder = Sidecar::start(cmd);
    let n = flooder.next_within(std::time::Duration::from_secs(60));
    // Refused before any wait for a hello, by where it is in the process tree: not by the
    // timeout that every connection without the key meets.
    let said: Value = serde_json::from_str(n["params"]["data"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {n}\n{}", flooder.stderr()));
    assert_eq!(said["ok"], false, "{said}");
    assert!(
        said["error"]
            .as_str()
            .unwrap()
            .contains("a proxy that sandboxes its server"),
        "{said}"
    );
    // While it floods, the user's commands are served, every one.
    let socket = p.socket();
    for _ in 0..30 {
        let ran = p.verb(&["status", "--json", "--daemon", socket.to_str().unwrap()]);
        assert!(ran.success(), "{}", ran.log());
    }
    // Thousands of refused connections, yet the log says so at most once a second: a flood
    // that never stops cannot grow the log (beside the recovery store) by a line each.
    let elapsed = started.elapsed().as_secs();
    let log = d.stderr();
    let said = log
        .lines()
        .filter(|l| l.contains("a proxy that sandboxes its server"))
        .count() as u64;
    assert!(
        said <= elapsed + 1,
        "{said} refusal lines in {elapsed} s, more than one a second"
    );
}
