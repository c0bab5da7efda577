//! Who gets served: only a peer of the daemon's own uid, and only after its first line proves
//! it holds the key; garbage after that gets an error line, and the daemon serves on.

use crate::place::{Place, root};
use crate::sidecar::WAIT;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;

/// A raw connection to the daemon.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    fn open(p: &Place) -> Conn {
        let s = UnixStream::connect(p.socket()).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    fn line(&mut self) -> Value {
        let mut l = String::new();
        self.reader.read_line(&mut l).unwrap();
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l:?}"))
    }

    /// Everything the daemon sends until it closes the connection.
    fn rest(&mut self) -> String {
        let mut all = Vec::new();
        // A reset after the last line counts as the end.
        let _ = self.reader.read_to_end(&mut all);
        String::from_utf8_lossy(&all).into_owned()
    }
}

fn key(p: &Place) -> String {
    std::fs::read_to_string(p.key()).unwrap().trim().to_owned()
}

#[test]
fn a_client_without_the_key_gets_nothing_and_the_daemon_serves_on() {
    let p = Place::new();
    let _d = p.start();
    let status = br#"{"op":"status"}"#;
    // A wrong key: the right length, one digit off.
    let mut wrong = key(&p);
    let first = if wrong.starts_with('0') { "1" } else { "0" };
    wrong.replace_range(0..1, first);
    let hellos: Vec<Option<Vec<u8>>> = vec![
        Some(serde_json::to_vec(&json!({"hello": wrong})).unwrap()),
        Some(br#"{"hello":""}"#.to_vec()),
        // No hello: a request straight away.
        Some(status.to_vec()),
        Some(b"\x00\xff garbage".to_vec()),
        // Nothing at all, the writing side closed.
        None,
    ];
    for hello in hellos {
        let mut c = Conn::open(&p);
        match &hello {
            Some(h) => {
                c.send(h);
                // The daemon may have refused the hello and closed already: a request that
                // meets a closed connection is no failure here.
                let _ = c.writer.write_all(&[&status[..], b"\n"].concat());
            }
            None => c.writer.shutdown(std::net::Shutdown::Write).unwrap(),
        }
        let all = c.rest();
        assert!(all.contains("refused") && all.contains("hello"), "{all}");
        assert!(!all.contains("sessions"), "served without the key: {all}");
        assert_eq!(all.lines().count(), 1, "{all}");
    }
    let ran = p.verb(&["status", "--json"]);
    assert!(ran.success(), "{}", ran.log());
}

#[test]
fn garbage_after_the_hello_gets_an_error_line_and_the_connection_serves_on() {
    let p = Place::new();
    let _d = p.start();
    let mut c = Conn::open(&p);
    c.send(&serde_json::to_vec(&json!({"hello": key(&p)})).unwrap());
    assert_eq!(c.line()["ok"], true);
    let long = vec![b'x'; 70 * 1024];
    let bad: [&[u8]; 5] = [
        b"not json",
        b"\xff\xfe",
        br#"{"op":"grant","path":"root"}"#,
        br#"{"op":"status","extra":1}"#,
        &long,
    ];
    for line in bad {
        c.send(line);
        let a = c.line();
        assert_eq!(a["ok"], false, "{a}");
        assert!(a["error"].as_str().is_some_and(|m| !m.is_empty()), "{a}");
    }
    c.send(br#"{"op":"status"}"#);
    assert_eq!(c.line(), json!({"ok": true, "sessions": []}));
    // Another client meanwhile is served too.
    let ran = p.verb(&["status", "--json"]);
    assert!(ran.success(), "{}", ran.log());
}

#[test]
fn a_peer_of_another_uid_is_refused_even_with_the_key() {
    if !root() {
        eprintln!("skipped: running a client as another user needs root");
        return;
    }
    let p = Place::new();
    let d = p.start();
    // Uid 65534 with the power to pass the 0700 directory and read the key: what refuses it
    // is the daemon's uid check, not the directory or the secret. (`fsbroker` run as that
    // user would refuse the root's directory itself, before connecting: a raw client.)
    let client = "import os, socket\n\
        s = socket.socket(socket.AF_UNIX); s.connect(os.environ['SOCK'])\n\
        key = open(os.environ['KEY']).read().strip()\n\
        s.sendall(('{\"hello\": \"%s\"}\\n{\"op\": \"status\"}\\n' % key).encode())\n\
        s.shutdown(socket.SHUT_WR)\n\
        print(s.makefile().read())";
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=+dac_override",
        "--ambient-caps=+dac_override",
        // Not a shim in root's home, which that user could not run.
        "/usr/bin/python3",
        "-c",
        client,
    ])
    .env("SOCK", p.socket())
    .env("KEY", p.key());
    let ran = crate::sidecar::run_within(cmd, WAIT);
    assert!(ran.success(), "{}", ran.log());
    assert!(
        ran.out()
            .contains("peer uid 65534 is not the daemon's uid 0"),
        "{}",
        ran.log()
    );
    assert!(!ran.out().contains("sessions"), "{}", ran.log());
    assert!(d.stderr().contains("peer uid 65534"), "{}", d.stderr());
    // The daemon's own user is still served.
    let ran = p.verb(&["status", "--json"]);
    assert!(ran.success(), "{}", ran.log());
}

#[test]
fn connections_that_never_say_hello_cannot_keep_a_peer_with_the_key_out() {
    let p = Place::new();
    let _d = p.start();
    // More than every slot, each silent, as a process without the key could hold them.
    let silent: Vec<std::os::unix::net::UnixStream> = (0..100)
        .map(|_| std::os::unix::net::UnixStream::connect(p.socket()).unwrap())
        .collect();
    let ran = p.verb(&["status", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    let v: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    drop(silent);
}

#[test]
fn followers_of_the_description_that_leave_give_their_slots_back() {
    let p = Place::new();
    let _d = p.start();
    // Every control slot taken by a follower of the description, as a sandboxing proxy
    // holds one for its life; then every one of them gone, as proxies end.
    let followers: Vec<crate::control::Control> = (0..64)
        .map(|_| {
            let mut c = crate::control::Control::open(&p);
            let first = c.ask(&json!({"op": "describe", "follow": true}));
            assert_eq!(first["ok"], true, "{first}");
            c
        })
        .collect();
    // This process now counts as a sandboxing proxy, so the 65th connection is its own (a
    // child of it would be refused as beneath one).
    let mut c = UnixStream::connect(p.socket()).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    let key = std::fs::read_to_string(p.key()).unwrap();
    writeln!(c, "{}", json!({"hello": key.trim()})).unwrap();
    let mut answer = String::new();
    BufReader::new(&c).read_line(&mut answer).unwrap();
    assert!(answer.contains("too many connections"), "{answer}");
    drop(followers);
    // Their ends are seen as they come, with no change of policy to write: their slots and
    // their standing as sandboxing proxies go with them, and the user's commands (a child
    // of this process among them) are served again. The wait only bounds a daemon that
    // never notices.
    crate::place::wait_for("the followers' slots to come back", || {
        p.verb(&["status", "--json"]).success()
    });
}
