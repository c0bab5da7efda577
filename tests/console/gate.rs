//! The gate: sign-in by a one-time link, the cookie, the `Host` and `Origin` checks, the
//! headers every answer carries, and loopback only. Forged and malformed requests change
//! nothing.

use crate::site::Site;
use serde_json::json;

#[test]
fn a_link_works_once_and_nothing_answers_without_its_cookie_and_key() {
    let site = Site::start();
    let path = site.link.split_once(&site.authority).unwrap().1.to_owned();
    let first = site.http("GET", &path, &[], "");
    assert_eq!(first.status, 200, "{first:?}");
    let cookie = first.header("set-cookie").unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    let signed = crate::site::Auth::of(&first).unwrap();
    let key = signed.key.as_str();
    assert_eq!(key.len(), 64, "{first:?}");
    let again = site.http("GET", &path, &[], "");
    assert_eq!(again.status, 403, "a used link signed in again: {again:?}");
    let forged = site.http("GET", "/login?token=00", &[], "");
    assert_eq!(forged.status, 403);
    let cookie = cookie.split(';').next().unwrap();
    for p in ["/", "/api/state", "/api/events"] {
        let a = site.http("GET", p, &[], "");
        assert_eq!(a.status, 401, "{p} without the cookie: {a:?}");
        let a = site.http("GET", p, &[("Cookie", "fsbroker_console=ab")], "");
        assert_eq!(a.status, 401, "{p} with a forged cookie: {a:?}");
    }
    // The API needs the sign-in's key beside its cookie: a cookie is sent to every port of
    // 127.0.0.1, so whoever listens on another may have it.
    let a = site.http("GET", "/api/state", &[("Cookie", cookie)], "");
    assert_eq!(a.status, 401, "the cookie alone opened the API: {a:?}");
    let a = site.http("GET", "/api/events", &[("Cookie", cookie)], "");
    assert_eq!(a.status, 401, "the cookie alone opened the stream: {a:?}");
    let a = site.http("GET", "/api/state", &[("X-Fsbroker-Key", key)], "");
    assert_eq!(a.status, 401, "the key alone opened the API: {a:?}");
    let other = site.signin();
    let mixed = [("Cookie", cookie), ("X-Fsbroker-Key", other.key.as_str())];
    let a = site.http("GET", "/api/state", &mixed, "");
    assert_eq!(a.status, 401, "another sign-in's key was taken: {a:?}");
    assert_eq!(site.http("GET", "/", &[("Cookie", cookie)], "").status, 200);
    let mine = [("Cookie", cookie), ("X-Fsbroker-Key", key)];
    let a = site.http("GET", "/api/state", &mine, "");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(site.state(&other)["roots"][0]["mount"], "root");
}

#[test]
fn a_foreign_host_or_origin_is_refused_and_changes_nothing() {
    let site = Site::start();
    let auth = site.signin();
    let port = site.authority.rsplit_once(':').unwrap().1.to_owned();
    // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
    let rebound = format!("evil.example:{port}");
    for host in [rebound.as_str(), "127.0.0.1", "127.0.0.1:1"] {
        let a = site.http(
            "GET",
            "/api/state",
            &[
                ("Host", host),
                ("Cookie", &auth.cookie),
                ("X-Fsbroker-Key", &auth.key),
            ],
            "",
        );
        assert_eq!(a.status, 421, "Host {host}: {a:?}");
    }
    let add = json!({"op": "add", "path": site.extra(), "access": "write"}).to_string();
    let own = format!("http://{}", site.authority);
    let cases: [(&[(&str, &str)], u16); 4] = [
        (
            &[
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/json"),
            ],
            403,
        ),
        (
            &[("Origin", "null"), ("Content-Type", "application/json")],
            403,
        ),
        (&[("Content-Type", "application/json")], 403),
        (
            &[("Origin", own.as_str()), ("Content-Type", "text/plain")],
            415,
        ),
    ];
    for (headers, want) in cases {
        let mut h = auth.headers();
        h.extend_from_slice(headers);
        let a = site.http("POST", "/api/roots", &h, &add);
        assert_eq!(a.status, want, "{headers:?}: {a:?}");
    }
    let roots = site.state(&auth)["roots"].as_array().unwrap().len();
    assert_eq!(roots, 1, "a refused request added a root");
    assert!(
        !site.state_file().exists(),
        "a refused request wrote the state file"
    );
    // The same request from the page itself is taken.
    let a = site.post(&auth, "/api/roots", &serde_json::from_str(&add).unwrap());
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(site.state(&auth)["roots"].as_array().unwrap().len(), 2);
}

#[test]
fn every_answer_forbids_framing_and_foreign_scripts_and_sets_no_cors() {
    let site = Site::start();
    let auth = site.signin();
    for (path, cookie) in [
        ("/", auth.cookie.as_str()),
        ("/console.js", ""),
        ("/nope", ""),
    ] {
        let a = site.http(
            "GET",
            path,
            &[("Cookie", cookie), ("Origin", "http://evil.example")],
            "",
        );
        let csp = a.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'self'"), "{path}: {a:?}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {a:?}");
        assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
        assert!(
            a.header("access-control-allow-origin").is_none(),
            "{path}: {a:?}"
        );
    }
}

#[test]
fn malformed_or_unknown_requests_are_4xx_and_change_nothing() {
    let site = Site::start();
    let auth = site.signin();
    let bad = [
        ("/api/questions/q1", json!({"answers": []}), 404),
        ("/api/questions/zz", json!({"answers": []}), 404),
        ("/api/offers/o9", json!({"allow": true}), 404),
        ("/api/revoke", json!({}), 400),
        ("/api/revoke", json!({"server": "nobody"}), 400),
        (
            "/api/roots",
            json!({"op": "add", "path": "relative", "access": "read"}),
            400,
        ),
        (
            "/api/roots",
            json!({"op": "add", "path": "/nonexistent/x", "access": "read"}),
            400,
        ),
        (
            "/api/roots",
            json!({"op": "add", "path": site.extra(), "access": "all"}),
            400,
        ),
        (
            "/api/roots",
            json!({"op": "add", "path": site.extra(), "access": "read", "mount": "root"}),
            400,
        ),
        ("/api/roots", json!({"op": "remove", "mount": "nope"}), 404),
        ("/api/roots", json!({"op": "chmod", "mount": "root"}), 400),
        (
            "/api/remembered/forget",
            json!({"server": "s", "path": "root"}),
            404,
        ),
    ];
    for (path, body, want) in bad {
        let a = site.post(&auth, path, &body);
        assert_eq!(a.status, want, "{path} {body}: {a:?}");
        let e: serde_json::Value = serde_json::from_str(a.json_body()).unwrap();
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()), "{a:?}");
    }
    let a = site.http(
        "POST",
        "/api/roots",
        &[
            ("Cookie", &auth.cookie),
            ("X-Fsbroker-Key", &auth.key),
            ("Origin", &format!("http://{}", site.authority)),
            ("Content-Type", "application/json"),
        ],
        "{not json",
    );
    assert_eq!(a.status, 400, "{a:?}");
    let state = site.state(&auth);
    assert_eq!(state["roots"].as_array().unwrap().len(), 1, "{state}");
    assert!(!site.state_file().exists());
}

#[test]
fn the_console_serves_loopback_only() {
    let site = Site::start();
    for addr in ["0.0.0.0:0", "192.0.2.1", "[::]:8080", "example.com:80"] {
        let ran = site.place.verb(&["daemon", "--foreground", "--ui", addr]);
        assert_eq!(
            ran.status.and_then(|s| s.code()),
            Some(2),
            "{addr}: {}",
            ran.log()
        );
        assert!(
            ran.log().contains("loopback") || ran.log().contains("not an address"),
            "{}",
            ran.log()
        );
    }
}

/// The state file decides what servers are granted at the next start: no writable root may
/// hold it, whether added on the page or given to the daemon; a read-only one may.
#[test]
fn a_writable_root_may_not_hold_the_state_file() {
    let site = Site::start();
    let auth = site.signin();
    let config = site.place.tmp.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    // A daemon of its own, given it as a writable root: refused at start.
    let mut cmd = site
        .place
        .command(&["daemon", "--foreground", "--writable", "--socket"]);
    cmd.arg(site.place.tmp.path().join("run2/x.sock"))
        .arg("--root")
        .arg(&config);
    std::fs::create_dir_all(site.place.tmp.path().join("run2")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        site.place.tmp.path().join("run2"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let ran = crate::sidecar::run_within(cmd, crate::sidecar::WAIT);
    assert!(!ran.success(), "{}", ran.log());
    assert!(ran.log().contains("console.json"), "{}", ran.log());
    let add = |access: &str| json!({"op": "add", "path": config, "access": access, "mount": "cfg"});
    let a = site.post(&auth, "/api/roots", &add("write"));
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.body.contains("console.json"), "{a:?}");
    assert_eq!(site.state(&auth)["roots"].as_array().unwrap().len(), 1);
    let a = site.post(&auth, "/api/roots", &add("read"));
    assert_eq!(a.status, 200, "{a:?}");
    // Switched to writable on the page: refused the same way, and it stays read-only.
    let a = site.post(
        &auth,
        "/api/roots",
        &json!({"op": "access", "mount": "cfg", "access": "write"}),
    );
    assert_eq!(a.status, 400, "{a:?}");
    let roots = site.state(&auth)["roots"].clone();
    assert!(
        roots
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["mount"] == "cfg" && r["access"] == "read"),
        "{roots}"
    );
}

/// `fsbroker console` opens the link without putting it on a command line, where every
/// local process could read it and sign in first: the opener gets a private page that sends
/// the browser on.
#[test]
fn the_opener_never_sees_the_token_on_its_command_line() {
    let site = Site::start();
    let (args, printed) = site.console_through_opener();
    assert!(
        !args.contains("token="),
        "the token was on the opener's command line: {args}"
    );
    let page = std::path::Path::new(args.trim());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(page).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        printed.contains("token=") && html.contains(&printed),
        "{html}"
    );
}

/// Any local process may connect to the console's port: idle connections by the hundred
/// neither take the descriptors the daemon's sessions need nor hold the console for long.
#[test]
fn idle_connections_cannot_starve_the_daemon() {
    let grant = "[[grants]]\nservers = [\"notes\"]\npath = \"root/docs\"\naccess = \"read\"\n";
    let site = Site::start_limited(grant, 256);
    let mut s = site.server("notes");
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", site.daemon.pid()))
            .unwrap()
            .count()
    };
    let before = fds();
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(std::net::TcpStream::connect(&site.authority).unwrap());
    }
    // 32 anonymous connections at most, and a few of the daemon's own: its log, and the
    // `/proc` it reads for each attached session's processes as it draws the page's state.
    // The daemon takes the 300 off its queue as fast as the machine lets it, so the bound is
    // waited for, not sampled in passing (a loaded machine briefly holds a few more between
    // an accept and the drop it causes); the wait stays well inside the 10 seconds after which
    // even a console that kept them all would close them as idle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while fds() > before + 32 + 12 {
        assert!(
            std::time::Instant::now() < deadline,
            "the console held {} descriptors for idle connections",
            fds() - before
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Said once, not once a connection.
    let said = site.daemon.stderr();
    let warnings = said.matches("without a signed-in request").count();
    assert_eq!(warnings, 1, "{said}");
    // The session still works: a read needs descriptors.
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "{r}");
    let r = s.request("roots/list", json!({}));
    assert_eq!(r["result"]["roots"][0]["name"], "root", "{r}");
    // And the console still answers the user at once: a newcomer ends the oldest
    // connection that never signed in, and a signed-in one is out of their reach.
    let auth = site.signin();
    assert_eq!(site.state(&auth)["roots"][0]["mount"], "root");
    drop(idle);
}

/// A daemon started in the background writes its output to a log file: the link, which
/// would wait there for anyone who can read the file, goes to the starter's terminal only.
#[test]
fn a_daemon_in_the_background_logs_no_link() {
    let site = Site::start();
    let place = site.stop();
    let mut cmd = place.command(&["daemon", "--ui", "--consent", "deny", "--root"]);
    cmd.arg(&place.root);
    let ran = crate::sidecar::run_within(cmd, crate::sidecar::WAIT);
    let pids = place.logged_pids();
    let _stop = pids
        .iter()
        .map(|p| crate::place::Detached(*p))
        .collect::<Vec<_>>();
    assert!(ran.success(), "{}", ran.log());
    let log = place.daemon_log_text();
    assert!(log.contains("console served on"), "{log}");
    assert!(!log.contains("token="), "the link is in the log: {log}");
    let said = String::from_utf8_lossy(&ran.stderr).to_string();
    let link = said
        .split("console at ")
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no link for the starter: {said}"));
    let (authority, path) = link
        .strip_prefix("http://")
        .unwrap()
        .split_once('/')
        .unwrap();
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("/#key="), "{answer}");
}
