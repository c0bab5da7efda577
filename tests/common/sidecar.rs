//! Drives a real `fsbroker` process over its stdin/stdout: spawn, send JSON lines, read
//! response lines (matched by id) with a reading thread, and wait for exit, every wait bounded.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long any single wait (a response, an exit) may take before the test fails: generous,
/// as it bounds a wait for what must happen and never asserts a speed.
pub const WAIT: Duration = Duration::from_secs(60);

/// A running `fsbroker` process.
pub struct Sidecar {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    pending: VecDeque<Value>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    next_id: i64,
}

impl Sidecar {
    /// `fsbroker serve --root ROOT --consent CONSENT --server-id t EXTRA...`.
    pub fn serve(root: &Path, consent: &str, extra: &[&str]) -> Sidecar {
        let mut args: Vec<OsString> = vec!["serve".into(), "--root".into(), root.into()];
        args.extend(["--consent", consent, "--server-id", "t"].map(OsString::from));
        args.extend(extra.iter().map(OsString::from));
        Sidecar::spawn(&args, None)
    }

    /// `fsbroker ARGS...`, in `cwd` when given.
    pub fn spawn(args: &[OsString], cwd: Option<&Path>) -> Sidecar {
        Sidecar::spawn_with(args, cwd, &[])
    }

    /// `fsbroker ARGS...` with extra environment variables.
    pub fn spawn_env(args: &[OsString], env: &[(&str, &str)]) -> Sidecar {
        Sidecar::spawn_with(args, None, env)
    }

    /// `fsbroker serve --root ROOT --consent auto --server-id t --writable`, with write
    /// consent on the whole `project` root granted.
    pub fn serve_writable(root: &Path) -> Sidecar {
        let mut s = Sidecar::serve(root, "auto", &["--writable"]);
        let r = s.request(
            "files/consent",
            json!({"requestedPaths": ["project"], "access": "write"}),
        );
        assert_eq!(r["result"]["granted"], true, "consent refused: {r}");
        assert_eq!(r["result"]["access"], "write", "{r}");
        s
    }

    /// `WRAPPER... fsbroker ARGS...`: the binary started through a wrapper command (such as
    /// `prlimit ...` or `setpriv ...`; none when `wrapper` is empty).
    pub fn spawn_wrapped(wrapper: &[&str], args: &[OsString]) -> Sidecar {
        let mut cmd = match wrapper {
            [] => Command::new(crate::common::bin()),
            [program, rest @ ..] => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(crate::common::bin());
                cmd
            }
        };
        cmd.args(args);
        Sidecar::start(cmd)
    }

    pub fn spawn_with(args: &[OsString], cwd: Option<&Path>, env: &[(&str, &str)]) -> Sidecar {
        let mut cmd = Command::new(crate::common::bin());
        cmd.args(args).envs(env.iter().copied());
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        Sidecar::start(cmd)
    }

    /// Starts `cmd` with piped stdio, and threads that read its stdout lines and its stderr.
    /// Any program that speaks JSON lines can be driven this way (the SDK hosts of the
    /// interop tests are).
    pub fn start(mut cmd: Command) -> Sidecar {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                        }
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().expect("stderr");
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Sidecar {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            pending: VecDeque::new(),
            stderr,
            stderr_reader: Some(stderr_reader),
            next_id: 1000,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Sends raw bytes followed by a newline.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).expect("write to fsbroker");
        stdin.write_all(b"\n").expect("write to fsbroker");
        stdin.flush().expect("flush");
    }

    /// Sends one JSON value as a line.
    pub fn send(&mut self, v: &Value) {
        self.send_raw(&serde_json::to_vec(v).unwrap());
    }

    /// Sends a request with a fresh id and returns its response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&rpc(id.clone(), method, params));
        self.wait_id(&id)
    }

    /// Takes the process's stdin (to write from another thread, or to close it).
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin still open")
    }

    /// Closes stdin: end of input.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout line as raw bytes, within `wait`; `None` at end of output.
    pub fn next_raw(&mut self, wait: Duration) -> Option<Vec<u8>> {
        match self.lines.recv_timeout(wait) {
            Ok(l) => Some(l),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                panic!("no output line within {wait:?}; stderr: {}", self.stderr())
            }
        }
    }

    /// The next response line (already buffered ones first), parsed, within `wait`.
    pub fn next_within(&mut self, wait: Duration) -> Value {
        if let Some(v) = self.pending.pop_front() {
            return v;
        }
        let line = self
            .next_raw(wait)
            .unwrap_or_else(|| panic!("output ended; stderr: {}", self.stderr()));
        serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!(
                "stdout line is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&line)
            )
        })
    }

    /// The next response line, within [`WAIT`].
    pub fn next(&mut self) -> Value {
        self.next_within(WAIT)
    }

    /// The response whose id is `id`, buffering others, each line within [`WAIT`].
    pub fn wait_id(&mut self, id: &Value) -> Value {
        if let Some(i) = self.pending.iter().position(|v| v.get("id") == Some(id)) {
            return self.pending.remove(i).unwrap();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.next_raw(left).unwrap_or_else(|| {
                panic!("output ended before id {id}; stderr: {}", self.stderr())
            });
            let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                panic!(
                    "stdout line is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&line)
                )
            });
            if v.get("id") == Some(id) {
                return v;
            }
            self.pending.push_back(v);
        }
    }

    /// Waits for the process to exit within `wait`; kills it and fails the test otherwise.
    pub fn wait_exit(&mut self, wait: Duration) -> ExitStatus {
        wait_child(&mut self.child, wait, "fsbroker")
    }

    /// Closes stdin, waits for exit, and returns the status with every stdout line not yet
    /// read (raw); afterwards [`Sidecar::stderr`] holds all of stderr.
    pub fn finish(&mut self) -> (ExitStatus, Vec<Vec<u8>>) {
        self.close_stdin();
        let status = self.wait_exit(WAIT);
        let mut rest: Vec<Vec<u8>> = self
            .pending
            .drain(..)
            .map(|v| serde_json::to_vec(&v).unwrap())
            .collect();
        while let Some(l) = self.next_raw(WAIT) {
            rest.push(l);
        }
        // The process has exited: its stderr is complete once the reader sees the end.
        if let Some(h) = self.stderr_reader.take() {
            let _ = h.join();
        }
        (status, rest)
    }

    /// A field of `/proc/PID/status` in kB (such as `VmHWM`), where the system has it.
    pub fn proc_status_kb(&self, field: &str) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = text.lines().find(|l| l.starts_with(&format!("{field}:")))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Waits for `child` (named `what` in the failure) to exit within `wait`; kills it and fails
/// the test otherwise.
pub fn wait_child(child: &mut Child, wait: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {wait:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A JSON-RPC request object.
pub fn rpc(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

/// A JSON-RPC request as a line (with its newline), ready to write to the process.
pub fn rpc_line(id: impl Into<Value>, method: &str, params: Value) -> Vec<u8> {
    let mut v = serde_json::to_vec(&rpc(id, method, params)).unwrap();
    v.push(b'\n');
    v
}

/// Runs `fsbroker ARGS...` to completion with stdin closed, within [`WAIT`].
pub fn run_bounded(args: &[OsString]) -> Output {
    let mut cmd = Command::new(crate::common::bin());
    cmd.args(args);
    let ran = run_within(cmd, WAIT);
    let Some(status) = ran.status else {
        panic!(
            "fsbroker {args:?} did not exit within {WAIT:?}\n{}",
            ran.log()
        );
    };
    Output {
        status,
        stdout: ran.stdout,
        stderr: ran.stderr,
    }
}

/// The `file://` URI of a directory as `roots/list` shows it (canonical path; the temporary
/// directories used here contain only characters that need no escaping).
pub fn file_uri(dir: &Path) -> String {
    let canon = std::fs::canonicalize(dir).unwrap();
    let s = canon.to_str().unwrap();
    assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b)),
        "test directory needs escaping: {s}"
    );
    format!("file://{s}")
}

impl Sidecar {
    /// The notifications (lines with a `method` and no `id`) that arrive until one satisfies
    /// `until` (it is the last one returned) or `wait` passes, buffered ones first; responses
    /// stay buffered for [`Sidecar::wait_id`]. Never panics on a timeout: the caller asserts.
    pub fn notifications_until(
        &mut self,
        wait: Duration,
        mut until: impl FnMut(&Value) -> bool,
    ) -> Vec<Value> {
        let is_note = |v: &Value| v.get("method").is_some() && v.get("id").is_none();
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            if is_note(&self.pending[i]) {
                let v = self.pending.remove(i).unwrap();
                let done = until(&v);
                out.push(v);
                if done {
                    return out;
                }
            } else {
                i += 1;
            }
        }
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(_) => return out,
            };
            let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                panic!(
                    "stdout line is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&line)
                )
            });
            if !is_note(&v) {
                self.pending.push_back(v);
                continue;
            }
            let done = until(&v);
            out.push(v);
            if done {
                return out;
            }
        }
    }
}

/// What a command run by [`run_within`] did: its exit status (`None` when it was killed at
/// the limit) and everything it wrote.
pub struct Ran {
    pub status: Option<std::process::ExitStatus>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Ran {
    /// Whether it exited by itself, successfully.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Both outputs, as text, for a failure message.
    pub fn log(&self) -> String {
        format!(
            "{}\n--- stderr ---\n{}",
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }
}

/// Runs `cmd` with its input closed to completion within `limit`, collecting its output on
/// threads (so a chatty command never blocks on a full pipe); kills it at the limit.
pub fn run_within(mut cmd: std::process::Command, limit: std::time::Duration) -> Ran {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let collect = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = collect(Box::new(child.stdout.take().unwrap()));
    let err = collect(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Ran {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}
