//! Another user's program at the socket path: after `su` without `-`, which keeps the
//! caller's `XDG_RUNTIME_DIR`, the path a client finds leads to a directory another user owns,
//! or the socket there is another user's. Every client proves the other end before it sends
//! anything: the socket's directory and those above it are the user's or root's and nobody
//! else may change them, and the process that answers runs as the user. An impostor that
//! answers every line with a success gets nothing: no key, no request, no file content, and
//! no command reports success on its word. The daemon judges its own place by the same rule.

use crate::place::{Place, root};
use crate::sidecar::{WAIT, run_within};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Binds `SOCK` (writing a key beside it), then, when `DROP_TO` is set, becomes that uid
/// before it listens, so that the kernel names it as the socket's peer; answers every line
/// with a success and records every line it is sent in `LOG`.
const IMPOSTOR: &str = r#"
import json, os, socket, threading
sock, log = os.environ["SOCK"], os.environ["LOG"]
out = open(log, "a", buffering=1)
key = os.path.splitext(sock)[0] + ".key"
fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"0" * 64 + b"\n"); os.close(fd)
s = socket.socket(socket.AF_UNIX)
s.bind(sock)
if os.environ.get("DROP_TO"):
    uid = int(os.environ["DROP_TO"])
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
s.listen(64)
out.write("listening\n")
def serve(c):
    f = c.makefile("rwb")
    for line in f:
        out.write(line.decode(errors="replace"))
        try:
            op = json.loads(line).get("op")
        except Exception:
            op = None
        if op == "describe":
            a = {"ok": True, "maxLine": 1048576, "era": "auto", "capabilities": {},
                 "roots": [{"mount": "home", "path": "/", "access": "write",
                            "servers": [], "pin": None}]}
        else:
            a = {"ok": True, "daemon": "fsbroker", "version": "0.1.0", "sessions": [],
                 "revoked": [], "session": "impostor"}
        f.write((json.dumps(a) + "\n").encode()); f.flush()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// An impostor process, killed when dropped.
struct Impostor {
    child: Child,
    log: PathBuf,
}

impl Impostor {
    /// Starts the impostor on `socket`: as uid 65534 when `as_other` (it binds in a directory
    /// of that user's), else as root dropping to 65534 once bound (a directory that passes,
    /// a peer that does not).
    fn start(socket: &Path, log: PathBuf, as_other: bool) -> Impostor {
        let mut cmd = if as_other {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
            ]);
            c
        } else {
            let mut c = Command::new("python3");
            c.env("DROP_TO", "65534");
            c
        };
        let child = cmd
            .args(["-c", IMPOSTOR])
            .env("SOCK", socket)
            .env("LOG", &log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let imp = Impostor { child, log };
        crate::place::wait_for("the impostor to listen", || {
            imp.heard().starts_with("listening")
        });
        imp
    }

    /// Every line it was sent, after its own "listening".
    fn heard(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs every client of the daemon against `p`'s place (whose socket the impostor holds) and
/// checks that each refuses with `because` and that the impostor heard nothing.
fn every_client_refuses(p: &Place, imp: &Impostor, because: &[&str]) {
    let daemon = format!("--daemon={}", p.socket().display());
    let clients: [&[&str]; 7] = [
        &["status", "--json"],
        &["revoke", "--all"],
        &["log"],
        &["reload"],
        &["daemon", "--ensure"],
        &["serve", &daemon, "--server-id", "alpha"],
        &["proxy", &daemon, "--sandbox", "--", "true"],
    ];
    for args in clients {
        let ran = run_within(p.command(args), WAIT);
        assert!(ran.status.is_some(), "{args:?} did not exit: {}", ran.log());
        assert!(
            !ran.success(),
            "{args:?} believed the impostor: {}",
            ran.log()
        );
        for b in because {
            assert!(ran.err().contains(b), "{args:?}: {}", ran.log());
        }
    }
    assert_eq!(
        imp.heard(),
        "listening\n",
        "the impostor was sent something"
    );
}

#[test]
fn a_socket_directory_another_user_owns_is_refused_by_every_client_before_it_sends() {
    if !root() {
        eprintln!("skipped: another user's impostor needs root to start");
        return;
    }
    let p = Place::new();
    // The impostor's user may pass the place's directories, as it may /run/user.
    std::fs::set_permissions(p.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(p.dir()).unwrap();
    for d in [&p.run, &p.dir()] {
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let imp = Impostor::start(&p.socket(), p.dir().join("heard"), true);
    every_client_refuses(
        &p,
        &imp,
        &["refusing the socket directory", "owned by uid 65534"],
    );
}

#[test]
fn a_socket_another_user_listens_on_is_refused_by_every_client_before_it_sends() {
    if !root() {
        eprintln!("skipped: another user's impostor needs root to start");
        return;
    }
    let p = Place::new();
    std::fs::create_dir(p.dir()).unwrap();
    std::fs::set_permissions(p.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let imp = Impostor::start(&p.socket(), p.tmp.path().join("heard"), false);
    every_client_refuses(&p, &imp, &["runs as uid 65534", "nothing was sent"]);
}

#[test]
fn a_daemon_refuses_a_socket_below_a_directory_another_user_may_change() {
    if !root() {
        eprintln!("skipped: changing a directory's owner needs root");
        return;
    }
    let p = Place::new();
    // The daemon's directory is its own, but the one above it is another user's, who could
    // rename it away and put another in its place.
    std::os::unix::fs::chown(&p.run, Some(65534), Some(65534)).unwrap();
    let ran = p.refused_daemon(&[]);
    let run = p.run.display().to_string();
    assert!(
        ran.err().contains(&run) && ran.err().contains("owned by uid 65534"),
        "{}",
        ran.log()
    );
    assert!(!p.socket().exists() && !p.key().exists());
    // Open to everyone's writes is refused too, unless sticky, as /tmp is.
    std::os::unix::fs::chown(&p.run, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&p.run, std::fs::Permissions::from_mode(0o777)).unwrap();
    let ran = p.refused_daemon(&[]);
    assert!(ran.err().contains("0777"), "{}", ran.log());
    std::fs::set_permissions(&p.run, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let _d = p.start();
    let ran = p.verb(&["status", "--json"]);
    assert!(ran.success(), "{}", ran.log());
}
