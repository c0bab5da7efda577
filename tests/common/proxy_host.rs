//! The host's side of `fsbroker proxy` tests: the scripted server, `initialize`, and the
//! server's `ask` tool, which sends requests to the proxy and returns the answers it got.

use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `tests/proxy/scripted_server.py`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/scripted_server.py")
}

/// `proxy ARGS... -- python3 scripted_server.py`, as argument list for the binary.
pub fn proxy_args(args: &[OsString]) -> Vec<OsString> {
    let mut all: Vec<OsString> = vec!["proxy".into()];
    all.extend(args.iter().cloned());
    all.extend(["--".into(), "python3".into(), script().into()]);
    all
}

/// The host's `initialize` at `version` with `capabilities`, then `initialized`; returns the
/// server's result.
pub fn initialize(p: &mut Sidecar, version: &str, capabilities: Value) -> Value {
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion": version, "capabilities": capabilities,
        "clientInfo": {"name": "test-host", "version": "1"}}}),
    );
    let r = p.wait_id(&json!("init"));
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    r["result"].clone()
}

/// Starts the server's `ask` tool (tool call id `id`) without waiting for its result.
pub fn start_ask(p: &mut Sidecar, id: i64, requests: Value) {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"ask","arguments":{"requests":requests}}}));
}

/// The answers of the `ask` call `id`.
pub fn answers(p: &mut Sidecar, id: i64) -> Vec<Value> {
    let r = p.wait_id(&json!(id));
    r["result"]["structuredContent"]["answers"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no answers: {r}"))
}

/// Calls `ask` and returns the answers.
pub fn ask(p: &mut Sidecar, id: i64, requests: Value) -> Vec<Value> {
    start_ask(p, id, requests);
    answers(p, id)
}

// ---- Helpers of the adversarial proxy tests (the scripted server's `raw` tool, `emit`). ----

/// `fsbroker proxy --root ROOT OPTS... -- python3 scripted_server.py` with `env` (without the
/// `--root` when OPTS name a policy).
pub fn spawn_proxy(root: &Path, opts: &[&str], env: &[(&str, &str)]) -> Sidecar {
    let mut args: Vec<OsString> = Vec::new();
    if !opts.contains(&"--policy") {
        args.extend(["--root".into(), root.into()]);
    }
    args.extend(opts.iter().map(OsString::from));
    Sidecar::spawn_env(&proxy_args(&args), env)
}

/// Base64 of `bytes`.
pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A `raw` line spec: exactly these bytes.
pub fn line(bytes: impl AsRef<[u8]>) -> Value {
    json!(b64(bytes.as_ref()))
}

/// A `raw` line spec: `count` copies of `template`, `@PAD@` replaced by `pad` bytes of `x`
/// and `@N@` by the copy's number (0, 1, ...).
pub fn padded(template: &str, pad: usize, count: usize) -> Value {
    json!({"b64": b64(template.as_bytes()), "pad": pad, "count": count})
}

/// A brokered request the server can end a `raw` batch of lines with (`until: id`): its
/// answer comes from the proxy's broker, so the host never sees it.
pub fn sentinel(id: &str) -> Value {
    line(json!({"jsonrpc":"2.0","id":id,"method":"roots/list"}).to_string())
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A raw line, leniently shown.
pub fn show(line: &[u8]) -> String {
    String::from_utf8_lossy(line).chars().take(400).collect()
}

/// The host's raw lines up to and including the first one (parsed as JSON) that satisfies
/// `stop`, all within `wait`. Reads only new lines: use it before anything was buffered by
/// [`Sidecar::wait_id`] (after [`initialize`], nothing is).
pub fn host_lines_until(
    p: &mut Sidecar,
    wait: std::time::Duration,
    mut stop: impl FnMut(&Value) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = std::time::Instant::now() + wait;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Some(l) = p.next_raw(left) else {
            panic!(
                "the proxy's output ended; lines so far: {:?}; stderr: {}",
                seen.iter().map(|l: &Vec<u8>| show(l)).collect::<Vec<_>>(),
                p.stderr()
            )
        };
        let done = serde_json::from_slice::<Value>(&l)
            .ok()
            .is_some_and(|v| stop(&v));
        seen.push(l);
        if done {
            return seen;
        }
    }
}

/// What one call of the server's `raw` tool saw.
#[derive(Debug)]
pub struct Raw {
    /// The lines the host got before the tool's result, raw.
    pub host_lines: Vec<Vec<u8>>,
    /// What the server received (undecodable lines as strings).
    pub received: Vec<Value>,
    /// Whether the server stopped waiting at its timeout.
    pub timed_out: bool,
    /// The answer to the `until` request, or null.
    pub until_answer: Value,
}

/// Starts the server's `raw` tool (tool call id `id`) with `args`, without waiting.
pub fn start_raw(p: &mut Sidecar, id: i64, args: Value) {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"raw","arguments":args}}));
}

/// Waits (within `wait`) for the result of the `raw` call `id`, keeping the host's lines
/// before it.
pub fn finish_raw(p: &mut Sidecar, id: i64, wait: std::time::Duration) -> Raw {
    let mut host_lines = host_lines_until(p, wait, |v| {
        v["id"] == json!(id) && v.get("method").is_none()
    });
    let result: Value = serde_json::from_slice(&host_lines.pop().unwrap_or_default()).unwrap();
    let s = &result["result"]["structuredContent"];
    Raw {
        host_lines,
        received: s["received"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("no raw result: {result}")),
        timed_out: s["timedOut"] == json!(true),
        until_answer: s["untilAnswer"].clone(),
    }
}

/// Calls the server's `raw` tool and waits for its result (`timeout` in `args`, default 5 s,
/// plus ten seconds).
pub fn raw(p: &mut Sidecar, id: i64, args: Value) -> Raw {
    let secs = args["timeout"].as_f64().unwrap_or(5.0);
    start_raw(p, id, args);
    finish_raw(p, id, std::time::Duration::from_secs_f64(secs + 10.0))
}

/// Has the server write `lines` (raw specs) as soon as it reads this notification.
pub fn emit(p: &mut Sidecar, lines: &[Value]) {
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/test/emit",
        "params":{"lines":lines}}));
}

/// Whether `v` is an error response with `code` and `id: null` (present).
pub fn is_null_id_error(v: &Value, code: i64) -> bool {
    v.get("id") == Some(&Value::Null) && v["error"]["code"] == json!(code)
}
