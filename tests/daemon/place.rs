//! A temporary place for a daemon: `run/` (its `XDG_RUNTIME_DIR`), `home/`, `config/` and
//! `state/` (its `HOME`, `XDG_CONFIG_HOME` and `XDG_STATE_HOME`) and `root/` (the root it
//! offers), the daemon started there, and the verbs run against it.

use crate::sidecar::{Ran, WAIT, run_within, wait_child};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

pub struct Place {
    pub tmp: tempfile::TempDir,
    pub run: PathBuf,
    pub root: PathBuf,
}

/// A running daemon, killed when dropped; its stderr goes to a file.
pub struct Daemon {
    child: Child,
    stderr: PathBuf,
}

impl Place {
    pub fn new() -> Place {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        let root = tmp.path().join("root");
        std::fs::create_dir(&run).unwrap();
        std::fs::create_dir(&root).unwrap();
        Place { tmp, run, root }
    }

    /// The socket directory the daemon uses by default here.
    pub fn dir(&self) -> PathBuf {
        self.run.join("fsbroker")
    }

    pub fn socket(&self) -> PathBuf {
        self.dir().join("broker.sock")
    }

    pub fn key(&self) -> PathBuf {
        self.dir().join("broker.key")
    }

    /// The user's policy file here, as `--init` writes it and `--ensure` reads it.
    pub fn user_policy(&self) -> PathBuf {
        self.tmp.path().join("config/fsbroker/policy.toml")
    }

    /// The log of daemons started in the background here.
    pub fn daemon_log(&self) -> PathBuf {
        self.tmp.path().join("state/fsbroker/daemon.log")
    }

    /// What the background log holds so far.
    pub fn daemon_log_text(&self) -> String {
        std::fs::read_to_string(self.daemon_log()).unwrap_or_default()
    }

    /// The pids of the daemons that said in the background log that they listen.
    pub fn logged_pids(&self) -> Vec<i32> {
        self.daemon_log_text()
            .lines()
            .filter(|l| l.contains("daemon listening on"))
            .filter_map(|l| l.rsplit_once("(pid ")?.1.strip_suffix(')')?.parse().ok())
            .collect()
    }

    /// `fsbroker ARGS...` with this place's `XDG_RUNTIME_DIR`, `HOME`, `XDG_CONFIG_HOME` and
    /// `XDG_STATE_HOME`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(crate::common::bin());
        cmd.args(args)
            .env("XDG_RUNTIME_DIR", &self.run)
            .env("HOME", self.tmp.path().join("home"))
            .env("XDG_CONFIG_HOME", self.tmp.path().join("config"))
            .env("XDG_STATE_HOME", self.tmp.path().join("state"))
            .env_remove("FSBROKER_LOG")
            // Never the user's own desktop: a test that wants notifications gives its own bus.
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        cmd
    }

    /// `fsbroker daemon --foreground --root ROOT EXTRA...`.
    pub fn daemon_command(&self, extra: &[&str]) -> Command {
        let mut cmd = self.command(&["daemon", "--foreground", "--root"]);
        cmd.arg(&self.root).args(extra);
        cmd
    }

    /// Starts the daemon and waits until it says it listens.
    pub fn start(&self) -> Daemon {
        self.start_with(&[])
    }

    pub fn start_with(&self, extra: &[&str]) -> Daemon {
        self.start_command(self.daemon_command(extra))
    }

    /// Starts `cmd` (a daemon in the foreground) and waits until it says it listens.
    pub fn start_command(&self, mut cmd: Command) -> Daemon {
        let stderr = self.tmp.path().join(format!(
            "daemon-{}.err",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut d = Daemon { child, stderr };
        let deadline = Instant::now() + WAIT;
        while !d.stderr().contains("daemon listening on") {
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("the daemon exited ({status}): {}", d.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not listen within {WAIT:?}: {}",
                d.stderr()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        d
    }

    /// Runs a daemon that must not start: its exit status and output.
    pub fn refused_daemon(&self, extra: &[&str]) -> Ran {
        let ran = run_within(self.daemon_command(extra), WAIT);
        assert!(
            ran.status.is_some(),
            "the daemon did not exit: {}",
            ran.log()
        );
        assert!(!ran.success(), "the daemon started: {}", ran.log());
        ran
    }

    /// Runs a verb (`status`, `revoke` ...) to its end.
    pub fn verb(&self, args: &[&str]) -> Ran {
        let ran = run_within(self.command(args), WAIT);
        assert!(ran.status.is_some(), "{args:?} did not exit: {}", ran.log());
        ran
    }
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Kills the daemon at once (SIGKILL), as a crash would, and waits for it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the daemon to exit by itself.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        wait_child(&mut self.child, WAIT, "the daemon")
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        wait_child(&mut self.child, WAIT, "the daemon")
    }
}

/// A daemon that is no child of the test's (started in the background): stopped with
/// SIGTERM when dropped, so that a failed test leaves none behind.
pub struct Detached(pub i32);

impl Detached {
    /// Whether the process is still there and has not exited (a zombie that nobody reaped
    /// yet has: its parent is not the test).
    pub fn alive(&self) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", self.0)) {
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z')),
            Err(_) => false,
        }
    }

    /// The id of its session, from `/proc` (Linux).
    pub fn session(&self) -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).ok()?;
        // After the command's closing parenthesis: state, ppid, pgrp, session.
        stat.rsplit_once(") ")?.1.split(' ').nth(3)?.parse().ok()
    }

    /// Its command line, from `/proc` (Linux).
    pub fn args(&self) -> Vec<String> {
        std::fs::read(format!("/proc/{}/cmdline", self.0))
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn terminate(&self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Polls `done` every 20 ms until it holds; fails the test with `what` after [`WAIT`].
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The permission bits of `p`.
pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Whether this runs as root (the tests that change owners or users need it).
pub fn root() -> bool {
    rustix::process::getuid().is_root()
}

impl Ran {
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}
