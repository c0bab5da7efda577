//! The two ends of `fsbroker proxy --url` tests: a real remote MCP server written with the
//! official TypeScript SDK (`tests/interop/remote_server.mjs`) on loopback, or a misbehaving
//! one (`tests/interop/remote_evil.py`), and the host, which drives the proxy over its stdin
//! and stdout.
//!
//! A test binary using this declares, in its `main.rs` and by path, `mod common;`, `mod
//! interop;`, `mod sidecar;` and `mod remote;`.

use crate::common::Fixture;
use crate::sidecar::{Sidecar, WAIT};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The protocol revision the host asks for (the SDK lets streams be closed and resumed only
/// from this revision on).
pub const VERSION: &str = "2025-11-25";

/// A running `remote_server.mjs`.
pub struct RemoteServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl RemoteServer {
    /// Starts the server with `args` (`--legacy`, `--json`, `--retry-ms N`) and waits for its
    /// port.
    pub fn start(args: &[&str]) -> RemoteServer {
        RemoteServer::script("remote_server.mjs", args)
    }

    /// Starts `tests/interop/SCRIPT` with `args` and waits for the port it prints first.
    pub fn script(script: &str, args: &[&str]) -> RemoteServer {
        let dir = crate::interop::node_dir();
        let mut cmd = Command::new("node");
        cmd.arg(dir.join(script)).args(args).current_dir(dir);
        RemoteServer::launch(cmd)
    }

    /// Starts the misbehaving server `tests/interop/remote_evil.py` in `mode` (with `arg`
    /// when the mode takes one); it needs nothing but Python's standard library.
    pub fn evil(mode: &str, arg: &str) -> RemoteServer {
        let mut cmd = Command::new("python3");
        cmd.arg(crate::interop::sources().join("remote_evil.py"))
            .arg(mode)
            .arg(arg);
        RemoteServer::launch(cmd)
    }

    /// Starts `tests/interop/SCRIPT` (standard library only) with `python3` and `args`,
    /// and waits for the port it prints first.
    pub fn stdlib(script: &str, args: &[&str]) -> RemoteServer {
        let mut cmd = Command::new("python3");
        cmd.arg(crate::interop::sources().join(script)).args(args);
        RemoteServer::launch(cmd)
    }

    /// Starts `tests/interop/SCRIPT` with the Python of the SDK tests (`mcp` 2.x, installed on
    /// first use) and waits for the port it prints first.
    pub fn python(script: &str) -> RemoteServer {
        let mut cmd = Command::new(crate::interop::python());
        cmd.arg(crate::interop::sources().join(script));
        RemoteServer::launch(cmd)
    }

    fn launch(mut cmd: Command) -> RemoteServer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let first = match lines.recv_timeout(WAIT * 3) {
            Ok(v) => v,
            Err(e) => panic!("the remote server did not start: {e}"),
        };
        let port = first["port"].as_u64().expect("port") as u16;
        RemoteServer {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            port,
        }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Reads the events that have arrived, without waiting.
    pub fn poll(&mut self) -> &[Value] {
        while let Ok(v) = self.lines.try_recv() {
            self.seen.push(v);
        }
        &self.seen
    }

    /// The events named `name` seen so far.
    pub fn named(&mut self, name: &str) -> Vec<Value> {
        self.poll()
            .iter()
            .filter(|e| e["event"] == name)
            .cloned()
            .collect()
    }

    /// Waits (within [`WAIT`]) for an event for which `want` holds, among those seen
    /// already and those to come.
    pub fn wait_for(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        if let Some(e) = self.poll().iter().find(|e| want(e)) {
            return e.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if want(&v) {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    panic!("no {what} event; seen: {:#?}", self.seen)
                }
            }
        }
    }

    /// Ends the server by closing its input and returns every event it wrote, once its
    /// output has ended: what it saw in full, not what happened to have arrived.
    pub fn stop(&mut self) -> &[Value] {
        self.stdin = None;
        crate::sidecar::wait_child(&mut self.child, WAIT, "the remote server");
        loop {
            match self.lines.recv_timeout(WAIT) {
                Ok(v) => self.seen.push(v),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("the remote server's output did not end"),
            }
        }
        &self.seen
    }

    /// Reads events for `window`: for counting what a misbehaving server provokes over a
    /// stretch of time (a storm of reconnections shows within a second or two).
    pub fn observe(&mut self, window: Duration) -> &[Value] {
        let deadline = Instant::now() + window;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => break,
            }
        }
        &self.seen
    }

    /// The HTTP requests seen so far whose JSON-RPC method is `rpc`.
    pub fn posts(&mut self, rpc: &str) -> Vec<Value> {
        self.named("http")
            .into_iter()
            .filter(|e| e["method"] == "POST" && e["rpc"] == rpc)
            .collect()
    }

    /// Waits (within [`WAIT`]) until `n` events for which `want` holds have been read, and
    /// returns those read by then: the server's log trails the answers the proxy relays, so
    /// counting what was seen so far right after an answer races the log.
    pub fn wait_count(
        &mut self,
        what: &str,
        n: usize,
        want: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        loop {
            let got: Vec<Value> = self.poll().iter().filter(|e| want(e)).cloned().collect();
            if got.len() >= n {
                return got;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("{n} x {what} never came: {:#?}", self.seen),
            }
        }
    }

    /// Waits (within [`WAIT`]) for the POST of `rpc` and returns it: the server's log of a
    /// request may come after the answer the proxy relayed, so a test that just got an
    /// answer waits for the log rather than reading what was seen so far.
    pub fn wait_post(&mut self, rpc: &str) -> Value {
        self.wait_for(&format!("a POST of {rpc}"), |e| {
            e["event"] == "http" && e["method"] == "POST" && e["rpc"] == rpc
        })
    }

    /// The GET requests seen so far.
    pub fn gets(&mut self) -> Vec<Value> {
        self.named("http")
            .into_iter()
            .filter(|e| e["method"] == "GET")
            .collect()
    }

    /// Waits until the proxy has opened its GET stream (the server's own stream).
    pub fn wait_for_get_stream(&mut self) -> Value {
        self.wait_for("GET stream", |e| {
            e["event"] == "http" && e["method"] == "GET"
        })
    }

    /// Ends the server as [`RemoteServer::stop`] does and returns the HTTP requests it
    /// received, all of them.
    pub fn stop_http(&mut self) -> Vec<Value> {
        self.stop()
            .iter()
            .filter(|e| e["event"] == "http")
            .cloned()
            .collect()
    }

    /// Kills the server at once (its connections drop).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        self.stdin = None;
        self.kill();
    }
}

/// `fsbroker proxy --url URL --root ROOT --consent auto --retries 2 EXTRA...`, with `env`
/// and debug logs. `--root` is left out when EXTRA has `--policy`, `--consent auto` when it
/// has `--consent`, `--retries 2` when it has `--retries`.
pub fn proxy(url: &str, f: &Fixture, extra: &[&str], env: &[(&str, &str)]) -> Sidecar {
    let mut all = extra.to_vec();
    if !extra.contains(&"--retries") {
        all.extend(["--retries", "2"]);
    }
    proxy_defaults(url, f, &all, env)
}

/// As [`proxy`], but with the defaults of every connection option EXTRA does not give
/// (`--retries` included).
pub fn proxy_defaults(url: &str, f: &Fixture, extra: &[&str], env: &[(&str, &str)]) -> Sidecar {
    let mut args: Vec<OsString> = vec!["proxy".into(), "--url".into(), url.into()];
    if !extra.contains(&"--policy") {
        args.extend(["--root".into(), f.root.clone().into()]);
    }
    if !extra.contains(&"--consent") {
        args.extend(["--consent".into(), "auto".into()]);
    }
    args.extend(extra.iter().map(OsString::from));
    let mut env: Vec<(&str, &str)> = env.to_vec();
    env.push(("FSBROKER_LOG", "debug"));
    // No NO_PROXY here: the proxy itself must reach loopback directly whatever proxy the
    // environment names (remote_headers.rs holds it).
    Sidecar::spawn_env(&args, &env)
}

/// The proxy over `f` with `extra` options in front of `server`, past the `initialize` of a
/// host that offers no capabilities.
pub fn connected(server: &RemoteServer, f: &Fixture, extra: &[&str]) -> Sidecar {
    let mut p = proxy(&server.url(), f, extra, &[]);
    initialize(&mut p, json!({}));
    p
}

/// Sends the host's `initialize` (id `"init"`) without waiting for its answer.
pub fn send_initialize(p: &mut Sidecar, capabilities: Value) {
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion": VERSION, "capabilities": capabilities,
        "clientInfo": {"name": "test-host", "version": "1"}}}),
    );
}

/// The host's `initialize` with `capabilities`, then `initialized`; returns the result.
pub fn initialize(p: &mut Sidecar, capabilities: Value) -> Value {
    send_initialize(p, capabilities);
    let r = p.wait_id(&json!("init"));
    assert!(r.get("result").is_some(), "initialize failed: {r}");
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    r["result"].clone()
}

/// Starts tool `name` with `arguments` as call `id`, without waiting.
pub fn start_tool(p: &mut Sidecar, id: i64, name: &str, arguments: Value) {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":name,"arguments":arguments}}));
}

/// The JSON its text carries, from the result of tool call `id`.
pub fn tool_result(p: &mut Sidecar, id: i64) -> Value {
    let r = p.wait_id(&json!(id));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no tool result: {r}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("tool text is not JSON ({e}): {r}"))
}

/// Calls tool `name` and returns the JSON its text carries.
pub fn tool(p: &mut Sidecar, id: i64, name: &str, arguments: Value) -> Value {
    start_tool(p, id, name, arguments);
    tool_result(p, id)
}

/// Has the server send `requests` (`[[method, params], ...]`) to the client on the tool
/// call's stream; returns the answers (`{result}` or `{error}`).
pub fn ask(p: &mut Sidecar, id: i64, requests: Value) -> Vec<Value> {
    let a = tool(p, id, "ask", json!({"requests": requests}));
    a.as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no answers: {a}"))
}

/// The result of an answer, or a panic showing the error.
pub fn ok(answer: &Value) -> &Value {
    answer
        .get("result")
        .unwrap_or_else(|| panic!("expected a result, got {answer}"))
}

/// (code, data.code, data.reason) of an answer's error.
pub fn error_of(answer: &Value) -> (i64, String, String) {
    let e = answer
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {answer}"));
    (
        e["code"].as_i64().unwrap_or(0),
        e["data"]["code"].as_str().unwrap_or("").to_owned(),
        e["data"]["reason"].as_str().unwrap_or("").to_owned(),
    )
}

/// A port on loopback where nothing listens.
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Waits (within `wait`) for the process to exit; returns the status and how long it took.
pub fn timed_exit(p: &mut Sidecar, wait: Duration) -> (std::process::ExitStatus, Duration) {
    let start = Instant::now();
    let s = p.wait_exit(wait);
    (s, start.elapsed())
}
