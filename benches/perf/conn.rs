//! One newline-delimited JSON-RPC connection to a child process over its pipes: our sidecar
//! (`fsbroker serve`) or the official MCP filesystem server (through `tools/call`).
//!
//! The client is single-threaded on purpose: it writes requests and reads responses on the
//! bench's own thread, so a sequential latency is one write and one read with no thread
//! hand-off in between. Pipelining is safe without a writer thread because requests are small
//! (except upload chunks, which are sent one at a time after the previous answer is read).

use crate::Res;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The mount name every root is offered under.
pub const MOUNT: &str = "bench";

/// A running child speaking JSON-RPC on stdin/stdout.
pub struct Conn {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    stdout: Lines,
    next_id: u64,
    /// Messages read that answered nothing we asked (notifications, log lines).
    pub other: usize,
}

/// The envelope of a response; `R` is the result's shape.
#[derive(Deserialize)]
pub struct Envelope<R> {
    /// The id answered (absent in notifications).
    pub id: Option<u64>,
    /// The result, when it succeeded.
    pub result: Option<R>,
    /// The error, when it failed.
    pub error: Option<Value>,
}

impl Conn {
    /// Starts `cmd` with piped stdin/stdout and its stderr in `stderr_log`.
    pub fn spawn(mut cmd: Command, stderr_log: &Path) -> Res<Conn> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr_log)?);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        Ok(Conn {
            child,
            stdin: Some(BufWriter::with_capacity(1 << 16, stdin)),
            stdout: Lines::new(stdout),
            next_id: 1,
            other: 0,
        })
    }

    /// `fsbroker serve` on `root` under the mount [`MOUNT`], consent approved automatically.
    pub fn sidecar(
        bin: &Path,
        root: &Path,
        policy: &Path,
        writable: bool,
        log: &Path,
    ) -> Res<Conn> {
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--policy")
            .arg(policy)
            .arg("--root")
            .arg(format!("{MOUNT}={}", root.display()))
            .args(["--consent", "auto"]);
        if writable {
            cmd.arg("--writable");
        }
        let mut c = Conn::spawn(cmd, log)?;
        let access = if writable { "write" } else { "read" };
        let r = c.call(
            "files/consent",
            &json!({"requestedPaths": [MOUNT], "access": access}),
        )?;
        if r.pointer("/result/granted") != Some(&Value::Bool(true)) {
            return Err(format!("consent refused: {r}").into());
        }
        Ok(c)
    }

    /// The official filesystem server on `root`, after the `initialize` handshake. The client
    /// declares no `roots` capability, so the server keeps the directory it was started with.
    pub fn peer(node: &str, script: &Path, root: &Path, log: &Path) -> Res<Conn> {
        let mut cmd = Command::new(node);
        cmd.arg(script).arg(root);
        let mut c = Conn::spawn(cmd, log)?;
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fsbroker-bench", "version": "1"}});
        let r = c.call("initialize", &init)?;
        if r.get("result").is_none() {
            return Err(format!("initialize failed: {r}").into());
        }
        c.notify("notifications/initialized")?;
        Ok(c)
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one request and returns its id; `flush` sends it now.
    pub fn send(&mut self, method: &str, params: &Value, flush: bool) -> Res<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let w = self.stdin.as_mut().ok_or("stdin closed")?;
        write!(
            w,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":"#
        )?;
        serde_json::to_writer(&mut *w, params)?;
        w.write_all(b"}\n")?;
        if flush {
            w.flush()?;
        }
        Ok(id)
    }

    /// Sends what [`Conn::send`] buffered.
    pub fn flush(&mut self) -> Res<()> {
        self.stdin.as_mut().ok_or("stdin closed")?.flush()?;
        Ok(())
    }

    fn notify(&mut self, method: &str) -> Res<()> {
        let w = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(w, r#"{{"jsonrpc":"2.0","method":"{method}"}}"#)?;
        w.flush()?;
        Ok(())
    }

    /// The next line the child wrote, without its newline.
    pub fn recv_line(&mut self) -> Res<&[u8]> {
        self.stdout.next_line()
    }

    /// The next response, parsed as an envelope with result `R`; notifications are counted
    /// in [`Conn::other`] and skipped.
    pub fn recv<R: for<'de> Deserialize<'de>>(&mut self) -> Res<(u64, Result<R, Value>)> {
        loop {
            let line = self.recv_line()?;
            let env: Envelope<R> = serde_json::from_slice(line)?;
            match (env.id, env.result, env.error) {
                (Some(id), Some(r), _) => return Ok((id, Ok(r))),
                (Some(id), None, Some(e)) => return Ok((id, Err(e))),
                _ => self.other += 1,
            }
        }
    }

    /// The next response whose result is ignored; an error response is an error.
    pub fn recv_ok(&mut self) -> Res<u64> {
        match self.recv::<IgnoredAny>()? {
            (id, Ok(_)) => Ok(id),
            (_, Err(e)) => Err(format!("request failed: {e}").into()),
        }
    }

    /// One request and its whole response.
    pub fn call(&mut self, method: &str, params: &Value) -> Res<Value> {
        let id = self.send(method, params, true)?;
        loop {
            let v: Value = serde_json::from_slice(self.recv_line()?)?;
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(v);
            }
            self.other += 1;
        }
    }

    /// Runs `n` requests with up to `window` in flight: `make(i)` gives request `i`, `check`
    /// reads and validates one response. Requests are topped up in bursts, once half the
    /// window has been answered, so the client spends one write per burst rather than one per
    /// request. Returns the elapsed time, first send to last answer.
    pub fn pipelined(
        &mut self,
        n: usize,
        window: usize,
        mut make: impl FnMut(usize) -> (&'static str, Value),
        mut check: impl FnMut(&mut Conn) -> Res<()>,
    ) -> Res<Duration> {
        let start = Instant::now();
        let (mut sent, mut done) = (0, 0);
        while done < n {
            if sent - done <= window / 2 {
                while sent < n && sent - done < window {
                    let (method, params) = make(sent);
                    self.send(method, &params, false)?;
                    sent += 1;
                }
                self.flush()?;
            }
            check(self)?;
            done += 1;
        }
        Ok(start.elapsed())
    }

    /// Closes stdin and waits up to `grace` for the child to exit, then kills it.
    pub fn close(mut self, grace: Duration) -> Res<()> {
        self.shut(grace);
        Ok(())
    }

    fn shut(&mut self, grace: Duration) {
        drop(self.stdin.take());
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shut(Duration::from_secs(5));
    }
}

/// Lines read from a pipe into one large buffer and handed out in place: a large read's
/// 1.4 MB responses are parsed where they landed instead of being copied into a line buffer
/// first (the client's work competes with the sidecar's for the same cores).
struct Lines {
    src: ChildStdout,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    start: usize,
    /// End of the bytes read.
    end: usize,
    /// Where the search for the next newline resumes.
    scanned: usize,
}

impl Lines {
    fn new(src: ChildStdout) -> Lines {
        Lines {
            src,
            buf: vec![0; 8 << 20],
            start: 0,
            end: 0,
            scanned: 0,
        }
    }

    fn next_line(&mut self) -> Res<&[u8]> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.scanned..self.end]) {
                let (from, to) = (self.start, self.scanned + i);
                self.start = to + 1;
                self.scanned = self.start;
                return Ok(&self.buf[from..to]);
            }
            self.scanned = self.end;
            // Make room: move the partial line to the front when the tail runs short, and
            // grow when a line fills the whole buffer.
            if self.buf.len() - self.end < (1 << 20) {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.scanned -= self.start;
                self.start = 0;
                if self.buf.len() - self.end < (1 << 20) {
                    self.buf.resize(self.buf.len() * 2, 0);
                }
            }
            let n = self.src.read(&mut self.buf[self.end..])?;
            if n == 0 {
                return Err("the child closed its output (see its stderr log)".into());
            }
            self.end += n;
        }
    }
}
