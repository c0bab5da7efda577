//! A private desktop for the notification tests: an X display of its own (Xvfb), a session
//! bus of its own (dbus-daemon), and a real notification server on it (Debian's dunst),
//! all ended with the test. Its context menu (what dunst shows to pick an action) is a
//! script that records the menu and picks the action the test chose, so that dunst itself
//! sends `ActionInvoked`, as it does when a person picks it.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const DUNST: &str = "/usr/bin/dunst";
const XVFB: &str = "/usr/bin/Xvfb";

pub struct Desktop {
    /// The session bus's address, for the daemon's `DBUS_SESSION_BUS_ADDRESS`.
    pub bus: String,
    /// The X display, for the daemon's `DISPLAY`.
    pub display: String,
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

/// Installs dunst and Xvfb with apt-get unless both are there; a failed install fails the
/// test with the installer's output.
fn ensure_installed() {
    static ONCE: Mutex<bool> = Mutex::new(false);
    let mut done = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    if *done || (Path::new(DUNST).exists() && Path::new(XVFB).exists()) {
        *done = true;
        return;
    }
    let lock =
        std::fs::File::create(Path::new(env!("CARGO_TARGET_TMPDIR")).join("apt.lock")).unwrap();
    <std::fs::File as fs4::FileExt>::lock(&lock).unwrap();
    if !Path::new(DUNST).exists() || !Path::new(XVFB).exists() {
        for args in [
            &["update", "-qq"][..],
            &["install", "-y", "-qq", "dunst", "xvfb"],
        ] {
            let out = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output()
                .expect("apt-get, to install dunst and xvfb");
            assert!(
                out.status.success(),
                "apt-get {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    *done = true;
}

/// The first line `child` writes on its standard output.
fn first_line(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().to_owned()
}

impl Desktop {
    /// A display, a bus and dunst on them, ready.
    pub fn start() -> Desktop {
        ensure_installed();
        let dir = tempfile::tempdir().unwrap();
        let mut children = Vec::new();
        // Xvfb takes a free display and writes its number on the descriptor given.
        let mut xvfb = Command::new(XVFB)
            .args(["-displayfd", "1", "-nolisten", "tcp", "-screen", "0"])
            .arg("800x600x24")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let number = first_line(&mut xvfb);
        children.push(xvfb);
        assert!(!number.is_empty(), "Xvfb gave no display");
        let display = format!(":{number}");
        let mut dbus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!(
                "--address=unix:path={}",
                dir.path().join("bus").display()
            ))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let bus = first_line(&mut dbus);
        children.push(dbus);
        assert!(
            bus.starts_with("unix:"),
            "dbus-daemon gave no address: {bus:?}"
        );
        let pick = dir.path().join("pick");
        std::fs::write(
            &pick,
            format!(
                "#!/bin/sh\ncat > {d}/menu.part && mv {d}/menu.part {d}/menu\n\
                 grep -m1 \",$(cat {d}/choice)]$\" {d}/menu\n",
                d = dir.path().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pick, std::fs::Permissions::from_mode(0o755)).unwrap();
        let rc = dir.path().join("dunstrc");
        std::fs::write(&rc, format!("[global]\n    dmenu = {}\n", pick.display())).unwrap();
        let dunst = Command::new(DUNST)
            .arg("-config")
            .arg(&rc)
            .env("DISPLAY", &display)
            .env("DBUS_SESSION_BUS_ADDRESS", &bus)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("dunst.log")).unwrap())
            .spawn()
            .unwrap();
        children.push(dunst);
        let desktop = Desktop {
            bus,
            display,
            dir,
            children,
        };
        desktop.until("dunst on the bus", || desktop.try_ctl(&["is-paused"]));
        desktop
    }

    /// `dunstctl ARGS` on this desktop: its output, `None` when it failed.
    fn try_ctl(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("dunstctl")
            .args(args)
            .env("DISPLAY", &self.display)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn ctl(&self, args: &[&str]) -> String {
        self.try_ctl(args).unwrap_or_else(|| {
            panic!(
                "dunstctl {args:?} failed; dunst said: {}",
                std::fs::read_to_string(self.dir.path().join("dunst.log")).unwrap_or_default()
            )
        })
    }

    /// How many notifications dunst shows now.
    pub fn displayed(&self) -> usize {
        self.ctl(&["count", "displayed"]).trim().parse().unwrap()
    }

    /// The notifications dunst closed, newest first: each one's summary and body as sent.
    pub fn history(&self) -> Vec<(String, String)> {
        let h: Value = serde_json::from_str(&self.ctl(&["history"])).unwrap();
        let field = |n: &Value, k: &str| n[k]["data"].as_str().unwrap_or_default().to_owned();
        h["data"][0]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|n| (field(n, "summary"), field(n, "body")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Does what a click on the first notification does: dunst invokes its `default` action.
    pub fn click(&self) {
        self.ctl(&["action", "0"]);
    }

    /// Picks action `key` in dunst's context menu (as a person would pick it there): dunst
    /// sends `ActionInvoked` for it. The menu dunst offered.
    pub fn choose(&self, key: &str) -> String {
        let menu = self.dir.path().join("menu");
        let _ = std::fs::remove_file(&menu);
        std::fs::write(self.dir.path().join("choice"), key).unwrap();
        self.ctl(&["context"]);
        self.until("the context menu", || std::fs::read_to_string(&menu).ok())
    }

    /// What `done` gives once it gives something, polled (a hang guard bounds the wait).
    pub fn until<T>(&self, what: &str, mut done: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + crate::sidecar::WAIT;
        loop {
            if let Some(t) = done() {
                return t;
            }
            assert!(Instant::now() < deadline, "never came: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
