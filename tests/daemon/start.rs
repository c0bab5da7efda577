//! Where the daemon listens and what it refuses at start: the private directory, a second
//! daemon, a stale socket, a path too long; and a clean stop on SIGTERM, or when idle.

use crate::place::{Place, mode, root};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;

#[test]
fn the_socket_directory_is_private_and_the_key_is_0600() {
    let p = Place::new();
    let _d = p.start();
    assert_eq!(mode(&p.dir()), 0o700);
    assert_eq!(mode(&p.key()), 0o600);
    assert_eq!(mode(&p.socket()), 0o600);
    let key = std::fs::read_to_string(p.key()).unwrap();
    let key = key.trim();
    assert_eq!(key.len(), 64, "{key:?}");
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key:?}");
}

#[test]
fn a_second_daemon_on_a_live_socket_is_refused() {
    let p = Place::new();
    let _d = p.start();
    let key = std::fs::read_to_string(p.key()).unwrap();
    let ran = p.refused_daemon(&[]);
    assert!(
        ran.err().contains("a daemon already answers on") && ran.err().contains("broker.sock"),
        "{}",
        ran.log()
    );
    // The first one still serves, with the key it wrote.
    assert_eq!(std::fs::read_to_string(p.key()).unwrap(), key);
    let status = p.verb(&["status", "--json"]);
    assert!(status.success(), "{}", status.log());
}

#[test]
fn a_stale_socket_and_key_are_replaced() {
    let p = Place::new();
    std::fs::create_dir(p.dir()).unwrap();
    std::fs::set_permissions(p.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // A socket nobody listens on any more, and the key of a daemon long gone.
    drop(std::os::unix::net::UnixListener::bind(p.socket()).unwrap());
    assert!(p.socket().exists());
    std::fs::write(p.key(), "stale").unwrap();
    let _d = p.start();
    assert_ne!(std::fs::read_to_string(p.key()).unwrap(), "stale");
    let status = p.verb(&["status", "--json"]);
    assert!(status.success(), "{}", status.log());
}

#[test]
fn a_socket_directory_open_to_others_is_refused() {
    let p = Place::new();
    std::fs::create_dir(p.dir()).unwrap();
    std::fs::set_permissions(p.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ran = p.refused_daemon(&[]);
    let dir = p.dir().display().to_string();
    assert!(
        ran.err().contains(&dir) && ran.err().contains("0755") && ran.err().contains("0700"),
        "{}",
        ran.log()
    );
    assert!(!p.socket().exists() && !p.key().exists());
}

#[test]
fn a_socket_directory_of_another_user_is_refused() {
    if !root() {
        eprintln!("skipped: changing a directory's owner needs root");
        return;
    }
    let p = Place::new();
    std::fs::create_dir(p.dir()).unwrap();
    std::fs::set_permissions(p.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(p.dir(), Some(65534), Some(65534)).unwrap();
    let ran = p.refused_daemon(&[]);
    assert!(
        ran.err().contains("owned by uid 65534") && ran.err().contains("uid 0"),
        "{}",
        ran.log()
    );
    assert!(!p.socket().exists());
}

#[test]
fn a_socket_path_longer_than_sun_path_is_refused() {
    let p = Place::new();
    let long = p.tmp.path().join("s".repeat(110));
    let ran = p.refused_daemon(&["--socket", long.to_str().unwrap()]);
    assert!(ran.err().contains("at most 107"), "{}", ran.log());
    let ran = p.verb(&["status", "--daemon", long.to_str().unwrap()]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(ran.err().contains("at most 107"), "{}", ran.log());
}

#[test]
fn sigterm_stops_the_daemon_and_removes_its_socket_and_key() {
    let p = Place::new();
    let mut d = p.start();
    assert!(p.socket().exists() && p.key().exists());
    let status = d.terminate();
    assert!(status.success(), "{status}: {}", d.stderr());
    assert!(!p.socket().exists(), "the socket is left");
    assert!(!p.key().exists(), "the key is left");
    let ran = p.verb(&["status"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    let expected = format!("no daemon answers on {}", p.socket().display());
    assert!(ran.err().contains(&expected), "{}", ran.log());
    // The next daemon starts in the same place.
    let _again = p.start();
    let ran = p.verb(&["status", "--json"]);
    let v: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(v["ok"], true, "{}", ran.log());
}

#[test]
fn a_root_that_holds_the_socket_directory_is_refused() {
    let p = Place::new();
    // The place's own directory holds both `run/` (the socket's) and `root/`.
    let mut cmd = p.command(&["daemon", "--foreground", "--root"]);
    cmd.arg(p.tmp.path());
    let ran = crate::sidecar::run_within(cmd, crate::sidecar::WAIT);
    assert_eq!(ran.code(), Some(2), "{}", ran.log());
    assert!(
        ran.err().contains("holds the daemon's socket directory"),
        "{}",
        ran.err()
    );
    assert!(!p.socket().exists());
}

#[test]
fn an_idle_daemon_exits_by_itself_and_removes_its_socket() {
    let p = Place::new();
    let mut d = p.start_with(&["--idle-exit", "1"]);
    let status = d.wait_exit();
    assert!(status.success(), "{status}: {}", d.stderr());
    assert!(!p.socket().exists(), "the socket is left");
    assert!(!p.key().exists(), "the key is left");
}
