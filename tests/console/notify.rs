//! A question without an open page: the daemon shows it as a desktop notification through
//! a real notification server (dunst, on a private display and session bus), whose actions
//! answer it as the page would; a page that is open keeps notifications away; without a
//! session bus the question waits on the page, and the log says so once.

use crate::desktop::Desktop;
use crate::site::{Auth, Site, ask, refused};
use serde_json::json;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// A server name and a path with characters markup gives meaning to.
const ODD_SERVER: &str = "notes<b>&co";
const ODD_PATH: &str = "root/notes/<i>&.md";

/// A daemon whose session bus is `desktop`'s, logging at `info`.
fn site_on(bus: &str) -> Site {
    Site::start_env(
        "",
        &[("DBUS_SESSION_BUS_ADDRESS", bus), ("FSBROKER_LOG", "info")],
    )
}

#[test]
fn with_no_page_open_a_question_is_notified_and_allow_answers_it() {
    let desk = Desktop::start();
    // The daemon's desktop: this display, and an opener that writes down what it is given.
    let opener = tempfile::tempdir().unwrap();
    let seen = opener.path().join("seen");
    let script = opener.path().join("xdg-open");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > {}\n", seen.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        opener.path().display(),
        std::env::var("PATH").unwrap()
    );
    let site = Site::start_env(
        "",
        &[
            ("DBUS_SESSION_BUS_ADDRESS", &desk.bus),
            ("FSBROKER_LOG", "info"),
            ("DISPLAY", &desk.display),
            ("PATH", &path),
        ],
    );
    let mut s = site.server(ODD_SERVER);
    ask(&mut s, 1, &["root/docs", ODD_PATH], "read");
    desk.until("a notification", || (desk.displayed() == 1).then_some(()));

    // A click opens the console, signed in (a private page that goes on to a fresh sign-in
    // link), and answers nothing: the notification stays.
    desk.click();
    let page = desk.until("the opener", || {
        std::fs::read_to_string(&seen)
            .ok()
            .filter(|p| p.ends_with(".html"))
    });
    let html = std::fs::read_to_string(page.trim()).unwrap();
    let link = html
        .split("url=")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let login = link.split_once(&site.authority).unwrap().1;
    let signed = site.http("GET", login, &[], "");
    assert!(crate::site::Auth::of(&signed).is_some(), "{signed:?}");
    assert_eq!(desk.displayed(), 1);

    let menu = desk.choose("allow");
    assert!(
        menu.contains("#Allow (") && menu.contains("#Deny ("),
        "{menu}"
    );
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], true, "{r}");
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "not granted: {r}");

    // Answered, its notification is closed; what it said is in dunst's history.
    let shown = desk.until("the notification closed", || {
        let h = desk.history();
        (desk.displayed() == 0 && !h.is_empty()).then_some(h)
    });
    assert_eq!(shown.len(), 1, "{shown:?}");
    let (summary, body) = &shown[0];
    assert!(summary.contains("notes&lt;b&gt;&amp;co"), "{summary}");
    assert!(body.contains("root/notes/&lt;i&gt;&amp;.md"), "{body}");
    assert!(body.contains("root/docs"), "{body}");
    assert!(
        body.contains(&format!("http://{}/", site.authority)),
        "{body}"
    );
    assert!(!body.contains("token") && !body.contains("key="), "{body}");
    // Allowed for this session only: nothing remembered.
    let auth = site.signin();
    assert_eq!(site.state(&auth)["remembered"], json!([]));
}

#[test]
fn deny_from_the_notification_refuses_and_grants_nothing() {
    let desk = Desktop::start();
    let site = site_on(&desk.bus);
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    desk.until("a notification", || (desk.displayed() == 1).then_some(()));
    desk.choose("deny");
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], false, "{r}");
    refused(&mut s, "root/docs/a.md");
    desk.until("the notification closed", || {
        (desk.displayed() == 0).then_some(())
    });
}

#[test]
fn an_open_page_keeps_notifications_away_and_closes_them() {
    let desk = Desktop::start();
    let site = site_on(&desk.bus);
    let auth = site.signin();

    // A page open: its question is answered there, never notified.
    let page = Feed::open(&site, &auth);
    let mut paged = site.server("paged");
    ask(&mut paged, 1, &["root/docs"], "read");
    let id = question(&site, &auth, "paged");
    deny(&site, &auth, &id);
    assert_eq!(paged.wait_id(&json!(1))["result"]["granted"], false);
    drop(page);

    // No page: the next question is notified; a page that opens closes it, and the
    // question still waits for the page's answer.
    let mut later = site.server("later");
    ask(&mut later, 1, &["root/docs"], "read");
    desk.until("a notification", || (desk.displayed() == 1).then_some(()));
    let page = Feed::open(&site, &auth);
    desk.until("the notification closed", || {
        (desk.displayed() == 0).then_some(())
    });
    let id = question(&site, &auth, "later");
    deny(&site, &auth, &id);
    assert_eq!(later.wait_id(&json!(1))["result"]["granted"], false);
    drop(page);

    let shown = desk.history();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].0.contains("later"), "{shown:?}");
}

#[test]
fn without_a_session_bus_the_question_waits_for_the_page_and_the_log_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("unix:path={}", dir.path().join("no-bus").display());
    let site = site_on(&nowhere);
    let auth = site.signin();
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    let said = "desktop notifications are unavailable";
    let deadline = Instant::now() + crate::sidecar::WAIT;
    while !site.daemon.stderr().contains(said) {
        assert!(Instant::now() < deadline, "{}", site.daemon.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    ask(&mut s, 2, &["root/notes"], "read");
    for (n, path) in [(1, "root/docs"), (2, "root/notes")] {
        let id = question(&site, &auth, path);
        let answer = json!({"answers": [{"path": path, "approve": true}]});
        let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(s.wait_id(&json!(n))["result"]["granted"], true);
    }
    let log = site.daemon.stderr();
    assert_eq!(log.matches(said).count(), 1, "{log}");
}

/// The id of the open question whose server or first path is `of`, once it waits.
fn question(site: &Site, auth: &Auth, of: &str) -> String {
    let open = |q: &serde_json::Value| {
        q["withdrawn"].is_null() && (q["server"] == of || q["paths"][0]["path"] == of)
    };
    let state = site.state_when(auth, |st| {
        st["questions"]
            .as_array()
            .is_some_and(|qs| qs.iter().any(open))
    });
    let found = state["questions"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| open(q)));
    found.and_then(|q| q["id"].as_str()).unwrap().to_owned()
}

/// Denies question `id` as the page does.
fn deny(site: &Site, auth: &Auth, id: &str) {
    let a = site.post(
        auth,
        &format!("/api/questions/{id}"),
        &json!({"answers": []}),
    );
    assert_eq!(a.status, 200, "{a:?}");
}

/// A page's live feed, open while it lives.
struct Feed {
    _open: std::net::TcpStream,
}

impl Feed {
    /// Opens the feed as the page does, and waits for its first picture: the daemon counts
    /// the page as open from then on.
    fn open(site: &Site, auth: &Auth) -> Feed {
        let mut s = std::net::TcpStream::connect(&site.authority).unwrap();
        s.set_read_timeout(Some(crate::sidecar::WAIT)).unwrap();
        let head = format!(
            "GET /api/events?key={} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\r\n",
            auth.key, site.authority, auth.cookie
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("event: state") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the feed ended: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
        Feed { _open: s }
    }
}
