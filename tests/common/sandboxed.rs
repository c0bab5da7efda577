//! What the `proxy --sandbox` tests share: the real Python interpreter to start servers
//! with, and the one report a probing server sends.

use crate::sidecar::Sidecar;
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Generous: the servers are Python or Node, started on a shared machine.
pub const LONG: Duration = Duration::from_secs(60);

/// The installation of [`python`] (the directory above its `bin`), which a server run through
/// a link the server may write needs allowed by hand.
pub fn python_prefix() -> PathBuf {
    python().parent().unwrap().parent().unwrap().to_path_buf()
}

/// The real Python interpreter (not a shim), so the profile names its installation.
pub fn python() -> PathBuf {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The probing server's report: the `data` of its one `notifications/message`.
pub fn report(p: &mut Sidecar) -> Value {
    let n = p.next_within(LONG);
    assert_eq!(n["method"], "notifications/message", "{n}\n{}", p.stderr());
    n["params"]["data"].clone()
}

/// A server that reads each path of `$CHECK` (`:`-separated), writes each of `$WRITE`, may
/// detach a daemon (`$DAEMON`), and reports as one notification, then waits for its input to
/// end.
pub const CHECKER: &str = r#"
import json, os, sys
def read(p):
    try:
        return open(p).read()
    except Exception as e:
        return type(e).__name__
def write(p):
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").write("x")
        return "ok"
    except Exception as e:
        return type(e).__name__
report = {"read": {}, "write": {}, "env": dict(os.environ)}
for p in filter(None, os.environ.get("CHECK", "").split(":")):
    report["read"][p] = read(p)
for p in filter(None, os.environ.get("WRITE", "").split(":")):
    report["write"][p] = write(p)
report["stderr"] = os.readlink("/proc/self/fd/2")
fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.pread(int(name), 64, 0).decode(errors="replace") if int(name) > 2 else ""
    except Exception as e:
        fds[name] = type(e).__name__
report["fds"] = fds
status = open("/proc/self/status").read()
report["cap_eff"] = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")][0]
if os.environ.get("DAEMON"):
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            import time
            time.sleep(1000)
        os._exit(0)
    os.close(w)
    report["daemon"] = int(os.read(r, 32))
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": report}}), flush=True)
sys.stdin.read()
"#;

/// A fresh layout: `proj` (the root), a fake `home`, and the checker script beside them.
pub struct Layout {
    _t: tempfile::TempDir,
    pub base: PathBuf,
}

impl Layout {
    pub fn new() -> Layout {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        for d in ["proj", "home"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("checker.py"), CHECKER).unwrap();
        Layout { _t: t, base }
    }

    pub fn home(&self) -> PathBuf {
        self.base.join("home")
    }

    /// `fsbroker proxy --sandbox --root proj EXTRA... COMMAND...` with HOME at the fake home
    /// and `env`.
    pub fn run(&self, extra: &[&str], command: &[OsString], env: &[(&str, String)]) -> Sidecar {
        let mut args: Vec<OsString> = vec!["proxy".into(), "--sandbox".into()];
        args.extend(extra.iter().map(OsString::from));
        args.push("--root".into());
        args.push(self.base.join("proj").into());
        args.extend(command.iter().cloned());
        let home = self.home();
        let mut all: Vec<(&str, &str)> = vec![("HOME", home.to_str().unwrap())];
        all.extend(env.iter().map(|(k, v)| (*k, v.as_str())));
        Sidecar::spawn_env(&args, &all)
    }

    /// As [`Layout::run`], in `cwd` and with HOME at `home`.
    pub fn run_in(
        &self,
        cwd: &Path,
        home: &Path,
        extra: &[&str],
        command: &[OsString],
        env: &[(&str, String)],
    ) -> Sidecar {
        let mut args: Vec<OsString> = vec!["proxy".into(), "--sandbox".into()];
        args.extend(extra.iter().map(OsString::from));
        args.push("--root".into());
        args.push(self.base.join("proj").into());
        args.extend(command.iter().cloned());
        let mut all: Vec<(&str, &str)> = vec![("HOME", home.to_str().unwrap())];
        all.extend(env.iter().map(|(k, v)| (*k, v.as_str())));
        Sidecar::spawn_with(&args, Some(cwd), &all)
    }

    /// `fsbroker proxy --sandbox EXTRA... --root proj COMMAND...` as a command to adjust
    /// (its environment is the test's own).
    pub fn command(&self, extra: &[&str], command: &[OsString]) -> std::process::Command {
        let mut cmd = std::process::Command::new(crate::common::bin());
        cmd.args(["proxy", "--sandbox"])
            .args(extra)
            .arg("--root")
            .arg(self.base.join("proj"))
            .args(command);
        cmd
    }

    pub fn checker(&self) -> Vec<OsString> {
        vec![python().into(), self.base.join("checker.py").into()]
    }
}

pub fn canary(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A virtual environment at `proj/.venv` of `l` whose `python` links to the real one and whose
/// `pyvenv.cfg` names `outside` (a canary there): the command that runs the checker with it,
/// and the canary's path for `CHECK`.
pub fn venv_pointing_outside(l: &Layout) -> (Vec<OsString>, String) {
    let outside = l.base.join("outside");
    canary(&outside.join("secret.txt"), "CANARY");
    let venv = l.base.join("proj/.venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::os::unix::fs::symlink(python(), venv.join("bin/python")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!("home = {}\n", outside.display()),
    )
    .unwrap();
    let command: Vec<OsString> = vec![
        venv.join("bin/python").into(),
        l.base.join("checker.py").into(),
    ];
    let check = outside.join("secret.txt").to_str().unwrap().to_owned();
    (command, check)
}
