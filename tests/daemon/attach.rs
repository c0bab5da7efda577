//! Sessions attached to the daemon: `serve --daemon` and `proxy --daemon` hold no broker of
//! their own, so grants, locks and revocation are the daemon's, shared by every session.

use crate::place::Place;
use crate::proxy_host;
use crate::sidecar::{Sidecar, rpc};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// `fsbroker serve --server-id ID`, attached by `FSBROKER_DAEMON=SOCKET`.
fn attach_by_env(p: &Place, id: &str) -> Sidecar {
    let args: Vec<OsString> = ["serve", "--server-id", id]
        .iter()
        .map(OsString::from)
        .collect();
    let socket = p.socket().display().to_string();
    Sidecar::spawn_env(&args, &[("FSBROKER_DAEMON", socket.as_str())])
}

/// `fsbroker serve --daemon=SOCKET --server-id ID`.
pub(crate) fn attach(p: &Place, id: &str) -> Sidecar {
    let daemon = format!("--daemon={}", p.socket().display());
    let args: Vec<OsString> = ["serve", &daemon, "--server-id", id]
        .iter()
        .map(OsString::from)
        .collect();
    Sidecar::spawn(&args, None)
}

/// A daemon whose root (`root`) is writable and whose consent approves everything.
fn writable_daemon(p: &Place) -> crate::place::Daemon {
    p.start_with(&["--writable", "--consent", "auto"])
}

fn consent(s: &mut Sidecar, access: &str) {
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["root"], "access": access}),
    );
    assert_eq!(r["result"]["granted"], true, "{r}");
}

fn status(p: &Place) -> Vec<Value> {
    let ran = p.verb(&["status", "--json", "--daemon", p.socket().to_str().unwrap()]);
    assert_eq!(ran.code(), Some(0), "{}", ran.err());
    let v: Value = serde_json::from_str(&ran.out()).unwrap();
    v["sessions"].as_array().cloned().unwrap()
}

fn session<'a>(sessions: &'a [Value], id: &str) -> &'a Value {
    sessions
        .iter()
        .find(|s| s["server"] == id)
        .unwrap_or_else(|| panic!("no session {id}: {sessions:?}"))
}

#[test]
fn two_sidecars_are_two_sessions_of_one_broker_and_status_shows_both() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "shared").unwrap();
    let _d = writable_daemon(&p);
    let mut a = attach(&p, "alpha");
    let mut b = attach(&p, "beta");
    consent(&mut a, "write");
    consent(&mut b, "read");
    for s in [&mut a, &mut b] {
        let r = s.request("files/read", json!({"path": "root/a.txt"}));
        assert_eq!(r["result"]["content"], "shared", "{r}");
    }
    let sessions = status(&p);
    let alpha = session(&sessions, "alpha");
    assert_eq!(alpha["attached"], true, "{alpha}");
    assert_eq!(alpha["roots"], json!(["root"]), "{alpha}");
    assert_eq!(alpha["pid"], a.pid(), "{alpha}");
    assert_eq!(alpha["grants"][0]["access"], "write", "{alpha}");
    assert_eq!(alpha["counters"]["requests"], 2, "{alpha}");
    assert_eq!(alpha["counters"]["bytesRead"], 6, "{alpha}");
    let beta = session(&sessions, "beta");
    assert_eq!(beta["pid"], b.pid(), "{beta}");
    assert_eq!(beta["grants"][0]["access"], "read", "{beta}");
    // The same, as a person reads it.
    let ran = p.verb(&["status", "--daemon", p.socket().to_str().unwrap()]);
    let out = ran.out();
    let line = format!("attached   pid {}, era legacy, not sandboxed", a.pid());
    assert!(out.contains(&line), "{out}");
}

#[test]
fn a_policy_reload_reaches_every_attached_session() {
    let p = Place::new();
    let two = p.tmp.path().join("two");
    std::fs::create_dir(&two).unwrap();
    let file = p.tmp.path().join("policy.toml");
    let root = |mount: &str, dir: &std::path::Path| {
        format!("[[roots]]\npath = {dir:?}\nmount = \"{mount}\"\n")
    };
    std::fs::write(&file, root("one", &p.root)).unwrap();
    let mut cmd = p.command(&["daemon", "--foreground", "--consent", "auto", "--policy"]);
    cmd.arg(&file);
    let _d = p.start_command(cmd);
    let mut a = attach(&p, "alpha");
    let mut b = attach_by_env(&p, "beta");
    for s in [&mut a, &mut b] {
        let r = s.request("roots/list", json!({}));
        assert_eq!(r["result"]["roots"].as_array().unwrap().len(), 1, "{r}");
    }
    std::fs::write(&file, root("one", &p.root) + &root("two", &two)).unwrap();
    let ran = p.verb(&["reload"]);
    assert!(ran.success(), "{}", ran.log());
    for s in [&mut a, &mut b] {
        let n = s.next_within(crate::sidecar::WAIT);
        assert_eq!(n["method"], "notifications/roots/list_changed", "{n}");
        let r = s.request("roots/list", json!({}));
        assert_eq!(r["result"]["roots"].as_array().unwrap().len(), 2, "{r}");
    }
}

#[test]
fn a_second_live_session_of_one_name_is_numbered() {
    let p = Place::new();
    let _d = writable_daemon(&p);
    let mut first = attach(&p, "twin");
    let mut second = attach(&p, "twin");
    // A request makes each attach (the name is fixed at the first one).
    for s in [&mut first, &mut second] {
        let r = s.request("roots/list", json!({}));
        assert!(r["result"]["roots"].is_array(), "{r}");
    }
    let sessions = status(&p);
    let mut ids: Vec<&str> = sessions
        .iter()
        .map(|s| s["server"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["twin", "twin#2"]);
}

/// Sends `count` writes of one file without waiting, then returns every answer.
fn pipelined(s: &mut Sidecar, first_id: i64, count: i64, params: impl Fn(i64) -> Value) {
    for i in 0..count {
        s.send(&rpc(first_id + i, "files/write", params(i)));
    }
}

fn collect(s: &mut Sidecar, first_id: i64, count: i64) -> Vec<Value> {
    (0..count)
        .map(|i| s.wait_id(&json!(first_id + i)))
        .collect()
}

#[test]
fn writers_of_one_file_in_two_sessions_take_turns() {
    let p = Place::new();
    let _d = writable_daemon(&p);
    let mut a = attach(&p, "alpha");
    let mut b = attach(&p, "beta");
    consent(&mut a, "write");
    consent(&mut b, "write");
    let write = |who: &'static str| move |i: i64| json!({"path": "root/shared.txt", "content": format!("{who} {i}\n")});
    pipelined(&mut a, 1, 60, write("a"));
    pipelined(&mut b, 1, 60, write("b"));
    for (who, s) in [("a", &mut a), ("b", &mut b)] {
        for r in collect(s, 1, 60) {
            assert!(r["result"]["etag"].is_string(), "{who}: {r}");
        }
    }
    // Whole content from one writer or the other, never a mix.
    let last = std::fs::read_to_string(p.root.join("shared.txt")).unwrap();
    assert!(last == "a 59\n" || last == "b 59\n", "{last:?}");
}

#[test]
fn racing_if_match_writers_in_two_sessions_have_one_winner() {
    let p = Place::new();
    std::fs::write(p.root.join("doc.txt"), "v0").unwrap();
    let _d = writable_daemon(&p);
    let mut a = attach(&p, "alpha");
    let mut b = attach(&p, "beta");
    consent(&mut a, "write");
    consent(&mut b, "write");
    let r = a.request("files/stat", json!({"path": "root/doc.txt"}));
    let etag = r["result"]["etag"].as_str().unwrap().to_owned();
    let guarded = |who: &'static str, etag: String| move |i: i64| json!({"path": "root/doc.txt", "content": format!("{who}{i}"), "ifMatch": etag});
    pipelined(&mut a, 1, 10, guarded("a", etag.clone()));
    pipelined(&mut b, 1, 10, guarded("b", etag));
    let mut won = 0;
    for s in [&mut a, &mut b] {
        for r in collect(s, 1, 10) {
            if r["result"]["etag"].is_string() {
                won += 1;
            } else {
                assert_eq!(r["error"]["data"]["reason"], "etag_mismatch", "{r}");
            }
        }
    }
    assert_eq!(won, 1);
}

#[test]
fn revoking_one_server_stops_it_and_ends_its_watches_while_the_other_works() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "x").unwrap();
    let _d = writable_daemon(&p);
    let mut a = attach(&p, "alpha");
    let mut b = attach(&p, "beta");
    for s in [&mut a, &mut b] {
        consent(s, "read");
        let w = s.request("files/watch", json!({"path": "root", "recursive": true}));
        assert!(w["result"]["watchId"].is_string(), "{w}");
    }
    let ran = p.verb(&[
        "revoke",
        "--server",
        "alpha",
        "--daemon",
        p.socket().to_str().unwrap(),
    ]);
    assert_eq!(ran.code(), Some(0), "{}", ran.err());
    let ended = a.next_within(crate::sidecar::WAIT);
    assert_eq!(ended["method"], "notifications/files/changed", "{ended}");
    assert_eq!(ended["params"]["event"], "unwatched", "{ended}");
    let r = a.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["error"]["data"]["reason"], "revoked", "{r}");
    let r = b.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["result"]["content"], "x", "{r}");
    let sessions = status(&p);
    assert_eq!(
        session(&sessions, "beta")["watches"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(session(&sessions, "alpha")["watches"], json!([]));
}

#[test]
fn a_lost_daemon_fails_requests_clearly_and_a_new_one_is_reattached() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "x").unwrap();
    let mut d = writable_daemon(&p);
    let mut a = attach(&p, "alpha");
    consent(&mut a, "read");
    d.kill();
    let r = a.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "broker_unavailable", "{r}");
    let _d2 = writable_daemon(&p);
    // The sidecar tries again after its backoff (at most 5 s): poll until it has.
    let deadline = Instant::now() + crate::sidecar::WAIT;
    let answer = loop {
        let r = a.request("files/read", json!({"path": "root/a.txt"}));
        if r["error"]["data"]["reason"] != "broker_unavailable" {
            break r;
        }
        assert!(Instant::now() < deadline, "never reattached: {r}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // A new session: the grant given by consent was not carried over.
    assert_eq!(answer["error"]["data"]["reason"], "no_consent", "{answer}");
    consent(&mut a, "read");
    let r = a.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["result"]["content"], "x", "{r}");
}

#[test]
fn flags_that_set_the_daemons_own_things_are_refused_when_attaching() {
    let p = Place::new();
    let daemon = format!("--daemon={}", p.socket().display());
    for extra in [
        &["--root", "/tmp"][..],
        &["--policy", "/nonexistent.toml"],
        &["--consent", "auto"],
        &["--writable"],
    ] {
        let mut args = vec!["serve", daemon.as_str()];
        args.extend_from_slice(extra);
        let ran = p.verb(&args);
        assert_eq!(ran.code(), Some(2), "{extra:?}: {}", ran.err());
        assert!(
            ran.err().contains("cannot be given when attaching"),
            "{extra:?}: {}",
            ran.err()
        );
    }
}

#[test]
fn without_a_daemon_or_a_policy_file_attaching_says_how_to_write_one() {
    let p = Place::new();
    let daemon = format!("--daemon={}", p.socket().display());
    let ran = p.verb(&["serve", &daemon]);
    assert_eq!(ran.code(), Some(1), "{}", ran.err());
    assert!(ran.err().contains("no daemon answers"), "{}", ran.err());
    assert!(
        ran.err().contains("fsbroker daemon --init"),
        "{}",
        ran.err()
    );
}

#[test]
fn ten_proxies_started_at_once_make_one_daemon_on_the_users_policy() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "x").unwrap();
    let mut init = p.command(&["daemon", "--init", "--root"]);
    init.arg(&p.root);
    let ran = crate::sidecar::run_within(init, crate::sidecar::WAIT);
    assert!(ran.success(), "{}", ran.log());
    let proxies: Vec<Sidecar> = (0..10)
        .map(|i| {
            let mut cmd = p.command(&["proxy", "--daemon", "--server-id"]);
            cmd.arg(format!("p{i}"))
                .args(["--", "python3"])
                .arg(proxy_host::script());
            Sidecar::start(cmd)
        })
        .collect();
    // Each server asks for its roots through its proxy, which attaches.
    let mut proxies = proxies;
    for (i, proxy) in proxies.iter_mut().enumerate() {
        proxy_host::initialize(proxy, "2025-06-18", json!({}));
        let a = proxy_host::ask(proxy, 1, json!([["roots/list", {}]]));
        assert!(a[0]["result"]["roots"].is_array(), "p{i}: {}", a[0]);
    }
    // One daemon, and every session in it.
    let pids = p.logged_pids();
    assert_eq!(pids.len(), 1, "{}", p.daemon_log_text());
    let _daemon = crate::place::Detached(pids[0]);
    let sessions = status(&p);
    assert_eq!(sessions.len(), 10, "{sessions:?}");
    drop(proxies);
}

/// The proxy in front of the scripted server, attached to the daemon, in a session of its
/// own (`setsid`) so that it has no terminal.
pub(crate) fn attached_proxy(p: &Place, name: &str) -> Sidecar {
    let daemon = format!("--daemon={}", p.socket().display());
    let args = proxy_host::proxy_args(&[daemon.into()]);
    let mut cmd = std::process::Command::new("setsid");
    cmd.arg("-w")
        .arg(crate::common::bin())
        .args(args)
        .env("SERVER_NAME", name);
    Sidecar::start(cmd)
}

#[test]
fn an_attached_proxy_asks_its_hosts_user_and_the_grant_is_the_daemons() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "original").unwrap();
    // No consent mode: elicit; the fallback would deny.
    let _d = p.start_with(&["--writable", "--consent-fallback", "deny"]);
    let mut proxy = attached_proxy(&p, "editor");
    proxy_host::initialize(&mut proxy, "2025-06-18", json!({"elicitation": {}}));
    proxy_host::start_ask(
        &mut proxy,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["root/a.txt"], "access": "write"}],
            ["files/read", {"path": "root/a.txt"}],
        ]),
    );
    let e = proxy.next();
    assert_eq!(e["method"], "elicitation/create", "{e}");
    let text = e["params"]["message"].as_str().unwrap();
    assert!(
        text.contains("root/a.txt") && text.contains("editor"),
        "{text}"
    );
    proxy.send(&json!({"jsonrpc": "2.0", "id": e["id"],
        "result": {"action": "accept", "content": {"decision": "read"}}}));
    let a = proxy_host::answers(&mut proxy, 1);
    assert_eq!(a[0]["result"]["access"], "read", "{}", a[0]);
    assert_eq!(a[1]["result"]["content"], "original", "{}", a[1]);
    let sessions = status(&p);
    let editor = session(&sessions, "editor");
    assert_eq!(editor["grants"][0]["path"], "root/a.txt", "{editor}");
    assert_eq!(editor["grants"][0]["origin"], "consented", "{editor}");
    assert_eq!(editor["era"], "legacy", "{editor}");
    assert!(editor["serverPid"].as_u64().is_some(), "{editor}");
}

#[test]
fn a_sidecar_has_no_host_to_ask_so_the_daemons_fallback_decides() {
    let p = Place::new();
    // Elicit by default, and a sidecar cannot show a form: the fallback answers.
    let _d = p.start_with(&["--writable", "--consent-fallback", "deny"]);
    let mut a = attach(&p, "alpha");
    let r = a.request("files/consent", json!({"requestedPaths": ["root"]}));
    assert_eq!(r["result"]["granted"], false, "{r}");
}

#[test]
fn a_daemon_that_answers_but_refuses_is_reported_and_never_replaced() {
    let p = Place::new();
    let mut init = p.command(&["daemon", "--init", "--root"]);
    init.arg(&p.root);
    assert!(crate::sidecar::run_within(init, crate::sidecar::WAIT).success());
    // Something listens on the socket and turns everyone away, as a busy daemon does.
    std::fs::create_dir(p.dir()).unwrap();
    std::fs::set_permissions(p.dir(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(p.socket()).unwrap();
    // A daemon always has its key beside its socket; a client sends nothing without one.
    std::fs::write(p.key(), format!("{}\n", "0".repeat(64))).unwrap();
    std::fs::set_permissions(p.key(), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            use std::io::Write;
            let _ = conn.write_all(
                b"{\"ok\":false,\"error\":\"too many connections (at most 64); try again\"}\n",
            );
        }
    });
    let daemon = format!("--daemon={}", p.socket().display());
    let ran = p.verb(&["serve", &daemon]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(ran.err().contains("too many connections"), "{}", ran.log());
    assert!(
        p.logged_pids().is_empty(),
        "a daemon was started: {}",
        p.daemon_log_text()
    );
}

#[test]
fn status_names_the_program_of_each_session_not_only_the_name_it_gave() {
    let p = Place::new();
    let _d = writable_daemon(&p);
    // A proxy's server: the script the interpreter runs.
    let mut proxy = attached_proxy(&p, "notes");
    proxy_host::initialize(&mut proxy, "2025-06-18", json!({}));
    proxy_host::ask(&mut proxy, 1, json!([["roots/list", {}]]));
    // A `serve --daemon` sidecar's server: whoever writes its input, here this very test.
    let mut sidecar = attach(&p, "sidecar");
    consent(&mut sidecar, "read");
    let sessions = status(&p);
    let notes = &session(&sessions, "notes")["identity"];
    assert_eq!(notes["runs"]["kind"], "script", "{notes}");
    let script = proxy_host::script();
    assert_eq!(
        notes["runs"]["path"],
        std::fs::canonicalize(&script)
            .unwrap()
            .display()
            .to_string(),
        "{notes}"
    );
    assert_eq!(notes["digest"].as_str().map(str::len), Some(64), "{notes}");
    let me = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
    let side = &session(&sessions, "sidecar")["identity"];
    assert_eq!(
        side["program"]["real"],
        me.display().to_string(),
        "the sidecar's server is the test that writes its input: {side}"
    );
    let text = p
        .verb(&["status", "--daemon", p.socket().to_str().unwrap()])
        .out();
    let short = &notes["digest"].as_str().unwrap()[..12];
    assert!(
        text.contains(&format!(
            "  program    {} (digest {short})",
            std::fs::canonicalize(&script).unwrap().display()
        )),
        "{text}"
    );
}
