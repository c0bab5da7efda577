//! The protocol era of a proxied session, and the brokering of roots in the modern one.
//!
//! Protocol revision 2026-07-28 has no `initialize` handshake: every request carries its
//! version and the client's capabilities in `_meta`, clients probe with `server/discover`,
//! and a server that needs roots no longer asks the client with a request of its own but
//! returns a result with `resultType: "input_required"` whose `inputRequests` the client
//! answers in a retry. `files/*` exists only in the legacy era (2025-11-25 and earlier),
//! so this module keeps sessions legacy whenever the server allows it, and never lets a
//! server's `roots/list` reach the host in either era:
//!
//! - the era of a connection is the first evidence seen: `initialize` means legacy,
//!   `server/discover` or a request with the modern `_meta` means modern;
//! - under `--era auto` and `--era legacy`, the proxy answers the host's `server/discover`
//!   itself, with the error a legacy-only server gives (`-32601`), so that probing clients
//!   fall back to `initialize`; a request carrying the modern `_meta` before any
//!   `initialize` is refused with `-32022` and the legacy versions;
//! - under `--era auto`, a server that answers `initialize` with `-32022` and only modern
//!   versions is modern-only: the host's next probe is forwarded and the session goes modern;
//!   under `--era legacy` that ends the proxy with exit code 1;
//! - under `--era modern`, the host's `initialize` is refused (the proxy never downgrades);
//! - in any session, an `input_required` result whose `inputRequests` hold `roots/list` is
//!   answered by the broker: the proxy retries upstream itself, at most [`MAX_ROUNDS`] times,
//!   and the host sees only the final result. Roots mixed with sampling or elicitation are
//!   answered by the broker too, and the rest goes to the host with a `requestState` that is
//!   a single-use handle to those answers and the server's own state; the host's retry gets
//!   them back. `files/*` input requests (not allowed in that revision) are refused.

use super::State;
use crate::broker::Broker;
use crate::lines::LineSender;
use crate::locks::lock;
use crate::policy::EraMode;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{Notify, oneshot};

/// The `_meta` key of a 2026-07-28 request's protocol version.
pub(crate) const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of a 2026-07-28 request's client capabilities.
pub(crate) const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// The revision without a handshake.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// The revisions with the `initialize` handshake, newest first: the only ones where
/// consent and `files/*` are brokered.
pub(crate) const LEGACY_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// JSON-RPC error code of 2026-07-28 for an unsupported protocol version.
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;
/// Rounds of `input_required` the proxy answers for one request before giving up.
pub(crate) const MAX_ROUNDS: usize = 10;
/// Host requests whose params are kept for a retry at once; beyond that an
/// `input_required` answer is refused rather than relayed.
const MAX_ORIGINALS: usize = 1024;
/// The proxy's own requests to the server that may wait at once.
const MAX_UPSTREAM: usize = 1024;
/// The extension under which the proxy declares filesystem brokering in a modern session.
const BROKERING_EXTENSION: &str = "io.github.fsbroker/filesystemBrokering";

/// The methods whose result may be `input_required` (2026-07-28, the tasks extension
/// included): their params are kept, so the proxy can retry them.
const INTERACTIVE: [&str; 4] = ["tools/call", "prompts/get", "resources/read", "tasks/get"];

/// The era a connection settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize` was seen: 2025-11-25 or earlier.
    Legacy,
    /// `server/discover` or the modern `_meta` was relayed: 2026-07-28.
    Modern,
}

/// What the proxy knows of the session's era, shared by both readers.
#[derive(Debug)]
pub(crate) struct EraState {
    mode: Mutex<EraMode>,
    era: Mutex<Option<Era>>,
    /// The server refused `initialize` with only modern versions.
    modern_only: AtomicBool,
    /// Why the session cannot go on (`--era legacy` with a modern-only server).
    failure: OnceLock<String>,
    failed: Notify,
    /// The host's interactive requests in a modern session, by id: their method and params.
    originals: Mutex<HashMap<String, (String, Value)>>,
    upstream: Upstream,
    resolver: OnceLock<Resolver>,
    /// Mixed results waiting for the host's retry, by handle.
    parked: Mutex<HashMap<String, Parked>>,
    /// The proxy's retry under way for a host request, by the host's id.
    retrying: Mutex<HashMap<String, String>>,
    /// Host requests cancelled while the proxy retried them.
    cancelled: Mutex<std::collections::HashSet<String>>,
}

/// What the host's request becomes.
pub(crate) enum HostAction {
    /// Relayed (maybe rewritten).
    Relay(Vec<u8>),
    /// Answered by the proxy itself with this response.
    Answer(Value),
}

impl EraState {
    pub(crate) fn new() -> EraState {
        EraState {
            mode: Mutex::new(EraMode::Auto),
            era: Mutex::new(None),
            modern_only: AtomicBool::new(false),
            failure: OnceLock::new(),
            failed: Notify::new(),
            originals: Mutex::new(HashMap::new()),
            upstream: Upstream::new(),
            resolver: OnceLock::new(),
            parked: Mutex::new(HashMap::new()),
            retrying: Mutex::new(HashMap::new()),
            cancelled: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Sets the `--era` rule and what the roots are answered with.
    pub(crate) fn configure(&self, mode: EraMode, resolver: Resolver) {
        *lock(&self.mode) = mode;
        let _ = self.resolver.set(resolver);
    }

    fn mode(&self) -> EraMode {
        *lock(&self.mode)
    }

    /// The era settled on, if any.
    pub(crate) fn era(&self) -> Option<Era> {
        *lock(&self.era)
    }

    fn settle(&self, era: Era) {
        let before = lock(&self.era).replace(era);
        if before != Some(era) {
            match era {
                Era::Legacy => tracing::info!(
                    era = "legacy",
                    "session settled on the legacy era (initialize): roots, consent and files/* are brokered"
                ),
                Era::Modern => tracing::info!(
                    era = "modern",
                    version = MODERN_VERSION,
                    "session settled on the modern era (no initialize): the server's roots are brokered; consent and files/* are not available in this era"
                ),
            }
        }
    }

    /// Why the session must end, once it must.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }

    /// Completes once the session must end (see [`EraState::failure`]).
    pub(crate) async fn failed(&self) {
        loop {
            let notified = self.failed.notified();
            if self.failure.get().is_some() {
                return;
            }
            notified.await;
        }
    }

    fn fail(&self, why: String) {
        tracing::error!("{why}");
        let _ = self.failure.set(why);
        self.failed.notify_waiters();
    }

    /// Judges one request of the host (`method`, `id`, the whole `line`); `capabilities` are
    /// the broker's, declared in every modern request.
    pub(crate) fn judge_request(
        &self,
        method: &str,
        id: &Value,
        line: Vec<u8>,
        capabilities: &Value,
    ) -> HostAction {
        let line = strip_host_roots(line);
        let mode = self.mode();
        if method == "initialize" {
            if mode == EraMode::Modern {
                return HostAction::Answer(unsupported(id, &[MODERN_VERSION], "--era modern"));
            }
            // A session that went modern stays modern: a later `initialize` would hand the
            // era back to whatever the server answers it.
            if self.era() == Some(Era::Modern) {
                return HostAction::Answer(unsupported(
                    id,
                    &[MODERN_VERSION],
                    "a session that is already 2026-07-28",
                ));
            }
            self.settle(Era::Legacy);
            return HostAction::Relay(line);
        }
        let discover = method == "server/discover";
        let modern_meta = mentions(&line, VERSION_KEY.as_bytes());
        if !discover && !modern_meta {
            return HostAction::Relay(line);
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(&line) else {
            // The server judges what the proxy cannot read, as it would without it.
            return HostAction::Relay(line);
        };
        let carries_meta = message
            .pointer("/params/_meta")
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(VERSION_KEY));
        if !discover && !carries_meta {
            return HostAction::Relay(line);
        }
        let go_modern = match mode {
            EraMode::Modern => true,
            EraMode::Legacy => false,
            EraMode::Auto => self.modern_only.load(Ordering::Relaxed),
        };
        if self.era() == Some(Era::Legacy) {
            if discover {
                return HostAction::Answer(no_discover(id));
            }
            // The connection is legacy: a server ignores the modern `_meta` there.
            return HostAction::Relay(line);
        }
        if !go_modern {
            if discover {
                return HostAction::Answer(no_discover(id));
            }
            return HostAction::Answer(unsupported(id, &LEGACY_VERSIONS, "the legacy era"));
        }
        self.settle(Era::Modern);
        declare(&mut message, capabilities);
        if let Err(why) = self.redeem(&mut message) {
            return HostAction::Answer(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32602, "message": why}}));
        }
        if INTERACTIVE.contains(&method) {
            self.remember(id, method, &message);
        }
        match serde_json::to_vec(&message) {
            Ok(l) => HostAction::Relay(l),
            Err(_) => HostAction::Relay(line),
        }
    }

    /// A host batch carrying `server/discover` or a 2026-07-28 request: revision 2026-07-28
    /// has no batches, and such an item must be judged alone (answered by the proxy, or given
    /// the broker's capabilities), so the whole batch is refused, each request in it answered
    /// `-32600`. `None` for any other batch, which is relayed as before.
    pub(crate) fn refuse_batch(&self, line: &[u8]) -> Option<Value> {
        let mut ids = Vec::new();
        let mut modern = false;
        for item in super::strict::BatchItems::new(line) {
            let Ok(item) = item else {
                return None;
            };
            if let super::peek::Kind::Request { method, id } = super::peek::peek(item) {
                modern |= method == "server/discover" || carries_modern_meta(item);
                ids.push(id);
            }
        }
        if !modern {
            return None;
        }
        tracing::warn!("refused a host batch carrying server/discover or a 2026-07-28 request");
        let refusals = ids
            .into_iter()
            .map(|id| {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600,
                "message": "server/discover and 2026-07-28 requests cannot come in a batch through fsbroker proxy"}})
            })
            .collect();
        Some(Value::Array(refusals))
    }

    fn remember(&self, id: &Value, method: &str, message: &Value) {
        let mut originals = lock(&self.originals);
        if originals.len() >= MAX_ORIGINALS {
            tracing::warn!(
                "too many requests wait for their result; a roots question for this one will be refused"
            );
            return;
        }
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        originals.insert(key(id), (method.to_owned(), params));
    }

    /// Notes the server's answer to the host's `initialize`: a `-32022` naming only modern
    /// versions means the server is modern-only.
    pub(crate) fn note_init_answer(&self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        if v.pointer("/error/code").and_then(Value::as_i64) != Some(UNSUPPORTED_VERSION) {
            return;
        }
        let supported: Vec<String> = v
            .pointer("/error/data/supported")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if supported
            .iter()
            .any(|s| LEGACY_VERSIONS.contains(&s.as_str()))
        {
            return;
        }
        match self.mode() {
            EraMode::Legacy => self.fail(format!(
                "the server speaks only protocol revision 2026-07-28 (it supports {supported:?}), and --era legacy needs a server that speaks 2025-11-25 or earlier, where files/* and consent are brokered; run with --era auto or --era modern to broker its roots only"
            )),
            EraMode::Auto => {
                tracing::info!(?supported, "the server is modern-only; the host's next server/discover is forwarded");
                self.modern_only.store(true, Ordering::Relaxed);
                // The handshake failed, so the connection has no era yet; a modern era,
                // settled by a probe, is not the handshake's to undo.
                let mut era = lock(&self.era);
                if *era == Some(Era::Legacy) {
                    era.take();
                }
            }
            EraMode::Modern => {}
        }
    }

    /// Whether `id` is one of the proxy's own requests to the server; if so, its answer is
    /// taken.
    pub(crate) fn take_upstream_answer(&self, id: &Value, line: &[u8]) -> bool {
        self.upstream.complete(id, line)
    }

    /// The host's `notifications/cancelled` (`line`) for a request the proxy is retrying:
    /// the same cancellation for the proxy's retry, to send to the server as well. The
    /// retry's waiter is let go, and the host gets no answer.
    pub(crate) fn cancel(&self, line: &[u8]) -> Option<Vec<u8>> {
        if lock(&self.retrying).is_empty() {
            return None;
        }
        let v = serde_json::from_slice::<Value>(line).ok()?;
        let host_key = key(v.pointer("/params/requestId")?);
        let upstream = lock(&self.retrying).remove(&host_key)?;
        lock(&self.cancelled).insert(host_key);
        lock(&self.upstream.pending).remove(&upstream);
        let mut params = v.get("params").cloned().unwrap_or_else(|| json!({}));
        params["requestId"] = Value::String(upstream);
        let cancel =
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
        tracing::info!(
            "the host cancelled a request the proxy was retrying; the retry is cancelled too"
        );
        serde_json::to_vec(&cancel).ok()
    }

    /// Takes the server's `notifications/cancelled` (`line`) of one of the proxy's own retries:
    /// the retry's waiter is let go (the host then gets an error), and the cancellation,
    /// which names an id the host never saw, goes no further. False for any other line.
    pub(crate) fn server_cancelled(&self, line: &[u8]) -> bool {
        if !mentions(line, self.upstream.prefix.as_bytes()) {
            return false;
        }
        let Some(id) = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.pointer("/params/requestId").cloned())
        else {
            return false;
        };
        let Some(k) = id.as_str().filter(|s| s.starts_with(&self.upstream.prefix)) else {
            return false;
        };
        lock(&self.upstream.pending).remove(k);
        tracing::info!("the server cancelled the proxy's retry; the host's request fails");
        true
    }

    /// Forgets the params kept for the host request `id`, once it has its final answer.
    pub(crate) fn forget(&self, id: &Value) {
        let mut originals = lock(&self.originals);
        if !originals.is_empty() {
            originals.remove(&key(id));
        }
    }
}

/// Whether `line` may contain `needle` once decoded: it does as written, or it has an escape
/// that could spell it otherwise. Cheap, so only such lines are parsed.
pub(crate) fn mentions(line: &[u8], needle: &[u8]) -> bool {
    line.windows(needle.len()).any(|w| w == needle)
        || line.windows(2).any(|w| w == b"\\u" || w == b"\\/")
}

/// Whether a request (`item`) names a 2026-07-28 protocol version in `params._meta`.
fn carries_modern_meta(item: &[u8]) -> bool {
    mentions(item, VERSION_KEY.as_bytes())
        && serde_json::from_slice::<Value>(item).is_ok_and(|v| {
            v.pointer("/params/_meta")
                .and_then(Value::as_object)
                .is_some_and(|m| m.contains_key(VERSION_KEY))
        })
}

/// Whether a server line may be an `input_required` result (to be parsed and judged).
pub(crate) fn may_need_input(line: &[u8]) -> bool {
    mentions(line, b"input_required")
}

/// The response in `line` when it asks for input, parsed; `None` for any other line.
pub(crate) fn input_required(line: &[u8]) -> Option<Value> {
    if !may_need_input(line) {
        return None;
    }
    serde_json::from_slice::<Value>(line)
        .ok()
        .filter(needs_input)
}

/// Whether a server message carries, anywhere in it, an `inputRequests` map with a
/// `roots/list` entry, outside an `input_required` result the proxy takes over (the tasks
/// extension, or a shape not foreseen): such a message is never relayed to the host.
pub(crate) fn hides_roots(line: &[u8]) -> bool {
    if !mentions(line, b"inputRequests") {
        return false;
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(v) => asks_roots(&v),
        // What the proxy cannot read never reaches the host anyway (`from_server`).
        Err(_) => false,
    }
}

/// Whether `v` holds, anywhere, an `inputRequests` map with a `roots/list` entry. Walked
/// with a stack of its own: no recursion on what a server shaped.
pub(crate) fn asks_roots(v: &Value) -> bool {
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(o) => {
                for (k, inner) in o {
                    let asks =
                        |r: &Value| r.get("method").and_then(Value::as_str) == Some("roots/list");
                    // The specification's shape is a map; a list is looked into as well.
                    let found = k == "inputRequests"
                        && match inner {
                            Value::Object(m) => m.values().any(asks),
                            Value::Array(a) => a.iter().any(asks),
                            _ => false,
                        };
                    if found {
                        return true;
                    }
                    todo.push(inner);
                }
            }
            Value::Array(a) => todo.extend(a),
            _ => {}
        }
    }
    false
}

/// The host's answer in place of a server answer that hides a roots question.
pub(crate) fn roots_refused(id: &Value) -> Value {
    error_for(
        id,
        "the server's answer carries a roots/list input request that fsbroker cannot take over; refused rather than let the host answer roots".into(),
    )
}

/// A host request's `inputResponses` without the entries that answer roots: the proxy never
/// passes a roots question to the host, so such an answer is the host's own, and the
/// server's roots come from the broker alone (the broker's answers are merged in later, for
/// the questions the proxy parked).
pub(crate) fn strip_host_roots(line: Vec<u8>) -> Vec<u8> {
    if !mentions(&line, b"inputResponses") {
        return line;
    }
    let Ok(mut message) = serde_json::from_slice::<Value>(&line) else {
        return line;
    };
    let Some(responses) = message
        .pointer_mut("/params/inputResponses")
        .and_then(Value::as_object_mut)
    else {
        return line;
    };
    let before = responses.len();
    responses.retain(|_, r| r.get("roots").is_none());
    if responses.len() == before {
        return line;
    }
    tracing::warn!(
        "dropped roots the host sent the server itself; the server's roots are the broker's"
    );
    serde_json::to_vec(&message).unwrap_or(line)
}

/// Whether a response asks for input (`result.resultType` is `input_required`).
pub(crate) fn needs_input(response: &Value) -> bool {
    response
        .pointer("/result/resultType")
        .and_then(Value::as_str)
        == Some("input_required")
}

fn key(id: &Value) -> String {
    id.to_string()
}

/// The answer of a legacy-only server to `server/discover`: method not found. Probing
/// clients fall back to `initialize` on it (the Python SDK on every error except a
/// `-32022` naming only modern versions).
fn no_discover(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601,
        "message": "Method not found: server/discover (fsbroker proxy keeps this session on the legacy era, where files are brokered; use initialize)"}})
}

fn unsupported(id: &Value, supported: &[&str], rule: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": UNSUPPORTED_VERSION,
        "message": format!("Unsupported protocol version: fsbroker proxy runs this session in {rule}"),
        "data": {"supported": supported}}})
}

/// Declares the broker's capabilities in a modern request's `_meta`: `roots`, and the
/// brokering flag under `extensions` (and `experimental`, as in `initialize`).
fn declare(message: &mut Value, broker: &Value) {
    let Some(obj) = message.as_object_mut() else {
        return;
    };
    let params = obj.entry("params").or_insert_with(|| json!({}));
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let caps = meta.entry(CAPABILITIES_KEY).or_insert_with(|| json!({}));
    if !caps.is_object() {
        *caps = json!({});
    }
    let Some(caps) = caps.as_object_mut() else {
        return;
    };
    caps.entry("roots").or_insert_with(|| json!({}));
    if let Some(exp) = broker.get("experimental").and_then(Value::as_object) {
        let slot = caps.entry("experimental").or_insert_with(|| json!({}));
        if let Some(slot) = slot.as_object_mut() {
            for (k, v) in exp {
                slot.insert(k.clone(), v.clone());
            }
        }
    }
    let ext = caps.entry("extensions").or_insert_with(|| json!({}));
    if let Some(ext) = ext.as_object_mut() {
        ext.insert(BROKERING_EXTENSION.to_owned(), json!({}));
    }
}

/// The proxy's own requests to the server (retries with the broker's roots). Their ids
/// carry a random prefix that the host never sees.
#[derive(Debug)]
struct Upstream {
    prefix: String,
    next: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

impl Upstream {
    fn new() -> Upstream {
        let mut random = [0u8; 16];
        let _ = getrandom::fill(&mut random);
        Upstream {
            prefix: format!("fsbroker-retry-{:032x}-", u128::from_le_bytes(random)),
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn complete(&self, id: &Value, line: &[u8]) -> bool {
        let Some(k) = id.as_str().filter(|s| s.starts_with(&self.prefix)) else {
            return false;
        };
        if let Some(waiter) = lock(&self.pending).remove(k) {
            let _ = waiter.send(serde_json::from_slice(line).unwrap_or(Value::Null));
        }
        true
    }

    /// Sends `method` with `params` to the server and waits for its answer; `on_sent` learns
    /// the id first, so a cancellation can follow the request.
    async fn request(
        &self,
        to_server: &LineSender,
        method: &str,
        params: Value,
        on_sent: impl FnOnce(&str),
    ) -> Option<Value> {
        let id = format!(
            "{}{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        on_sent(&id);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_UPSTREAM {
                return None;
            }
            pending.insert(id.clone(), tx);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let sent = match serde_json::to_vec(&message) {
            Ok(line) => to_server.send(line).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            lock(&self.pending).remove(&id);
            return None;
        }
        rx.await.ok()
    }
}

/// What the proxy answers a server's roots questions with.
#[derive(Debug, Clone)]
pub(crate) struct Resolver {
    broker: Broker,
    configured: Option<String>,
}

impl Resolver {
    pub(crate) fn new(broker: Broker, configured: Option<String>) -> Resolver {
        Resolver { broker, configured }
    }
}

/// Takes over a server's `input_required` answer to the host's request: it is resolved on a
/// task of its own (the server's reader must never wait for the server), and the host gets
/// the final result or an error, never a `roots/list`.
pub(crate) fn intercept(
    state: &Arc<State>,
    response: Value,
    to_host: LineSender,
    to_server: LineSender,
) {
    let state = state.clone();
    tokio::spawn(async move {
        let id = response.get("id").cloned().unwrap_or(Value::Null);
        let mut out = resolve(&state, &id, response, &to_server).await;
        // The one check before the host: whatever the rounds ended with (the final result,
        // an answer for the host to complete, what a split left), a roots question anywhere
        // in it is refused, never relayed.
        if asks_roots(&out) {
            out = roots_refused(&id);
        }
        state.era.forget(&id);
        // A request the host cancelled gets no answer.
        if lock(&state.era.cancelled).remove(&key(&id)) {
            return;
        }
        if let Ok(line) = serde_json::to_vec(&out) {
            let _ = to_host.send(line).await;
        }
    });
}

/// What one `input_required` result asks for.
enum Asked {
    /// Only roots: the proxy answers and retries.
    Roots(Vec<(String, Value)>),
    /// Roots and sampling or elicitation: the proxy answers the roots, the host the rest.
    Mixed(Vec<(String, Value)>),
    /// Nothing the proxy answers (sampling, elicitation, or only `requestState`): for the
    /// host.
    Host,
    /// Something the proxy must refuse, and why.
    Refused(String),
}

fn judge(result: &Value) -> Asked {
    let Some(requests) = result.get("inputRequests") else {
        return Asked::Host;
    };
    let Some(requests) = requests.as_object() else {
        return Asked::Refused("inputRequests is not an object".into());
    };
    let mut roots = Vec::new();
    let mut other = 0;
    for (k, r) in requests {
        match r.get("method").and_then(Value::as_str) {
            Some("roots/list") => {
                roots.push((k.clone(), r.get("params").cloned().unwrap_or(Value::Null)))
            }
            Some("sampling/createMessage" | "elicitation/create") => other += 1,
            Some(m) if m.starts_with("files/") => {
                return Asked::Refused(format!(
                    "the server asked for {m} as an input request, which protocol revision 2026-07-28 does not allow; files/* is brokered only in the legacy era"
                ));
            }
            Some(m) => {
                return Asked::Refused(format!(
                    "the server asked for {m:?} as an input request, which fsbroker does not relay"
                ));
            }
            None => return Asked::Refused("an input request has no method".into()),
        }
    }
    match (roots.is_empty(), other) {
        (true, _) => Asked::Host,
        (false, 0) => Asked::Roots(roots),
        (false, _) => Asked::Mixed(roots),
    }
}

fn error_for(id: &Value, message: String) -> Value {
    tracing::warn!("{message}");
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
}

async fn resolve(state: &State, host_id: &Value, first: Value, to_server: &LineSender) -> Value {
    let Some(resolver) = state.era.resolver.get() else {
        return error_for(
            host_id,
            "the server asked for input that fsbroker cannot broker here".into(),
        );
    };
    let original = lock(&state.era.originals).get(&key(host_id)).cloned();
    let mut current = first;
    for _ in 0..MAX_ROUNDS {
        if !needs_input(&current) {
            if let Some(obj) = current.as_object_mut() {
                obj.insert("id".into(), host_id.clone());
            }
            return current;
        }
        let result = current.get("result").cloned().unwrap_or(Value::Null);
        let (roots, mixed) = match judge(&result) {
            Asked::Host => {
                if let Some(obj) = current.as_object_mut() {
                    obj.insert("id".into(), host_id.clone());
                }
                return current;
            }
            Asked::Refused(why) => return error_for(host_id, why),
            Asked::Roots(r) => (r, false),
            Asked::Mixed(r) => (r, true),
        };
        let Some((method, params)) = original.clone() else {
            return error_for(
                host_id,
                "the server asked for roots in answer to a request fsbroker did not keep for a retry; refused rather than let the host answer roots".into(),
            );
        };
        let session = state.session_id(resolver.configured.as_deref());
        let responses = match broker_roots(resolver, &session, roots.clone()).await {
            Ok(r) => r,
            Err(why) => return error_for(host_id, why),
        };
        if mixed {
            return split(&state.era, host_id, current, &roots, responses);
        }
        tracing::info!(
            keys = responses.len(),
            "answered the server's roots input request from the broker"
        );
        let mut retry = if params.is_object() {
            params
        } else {
            json!({})
        };
        if let Some(obj) = retry.as_object_mut() {
            // The retry answers this round: what the host sent in an earlier one is not
            // carried on.
            obj.insert("inputResponses".into(), Value::Object(responses));
            match result.get("requestState") {
                Some(s) => {
                    obj.insert("requestState".into(), s.clone());
                }
                None => {
                    obj.remove("requestState");
                }
            }
        }
        let host_key = key(host_id);
        let asked = state
            .era
            .upstream
            .request(to_server, &method, retry, |id| {
                lock(&state.era.retrying).insert(host_key.clone(), id.to_owned());
            })
            .await;
        lock(&state.era.retrying).remove(&host_key);
        match asked {
            Some(next) => current = next,
            None => {
                return error_for(
                    host_id,
                    "the server did not answer the retry with the broker's roots".into(),
                );
            }
        }
    }
    error_for(
        host_id,
        format!("the server asked for input more than {MAX_ROUNDS} times"),
    )
}

/// The broker's answers to the server's `roots/list` input requests, by key.
async fn broker_roots(
    resolver: &Resolver,
    session: &str,
    roots: Vec<(String, Value)>,
) -> Result<Map<String, Value>, String> {
    let mut responses = Map::new();
    for (k, p) in roots {
        let mut request = json!({"jsonrpc": "2.0", "id": 0, "method": "roots/list"});
        if !p.is_null() {
            request["params"] = p;
        }
        let answer = resolver.broker.handle_message(session, request).await;
        match answer.as_ref().and_then(|a| a.get("result")) {
            Some(r) => {
                responses.insert(k, r.clone());
            }
            None => {
                let why = answer
                    .as_ref()
                    .and_then(|a| a.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("no answer")
                    .to_owned();
                return Err(format!("the broker refused the server's roots/list: {why}"));
            }
        }
    }
    Ok(responses)
}

/// Roots mixed with sampling or elicitation: the host gets the result without the roots
/// entries, and a `requestState` that is a single-use handle to the broker's answers and
/// the server's own state; its retry gets them back (see [`EraState::redeem`]).
fn split(
    era: &EraState,
    host_id: &Value,
    mut response: Value,
    roots: &[(String, Value)],
    answers: Map<String, Value>,
) -> Value {
    let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) else {
        return error_for(host_id, "an input_required answer without a result".into());
    };
    if let Some(requests) = result
        .get_mut("inputRequests")
        .and_then(Value::as_object_mut)
    {
        for (k, _) in roots {
            requests.remove(k);
        }
    }
    let server_state = result.remove("requestState");
    let handle = match era.park(Parked {
        answers,
        server_state,
    }) {
        Some(h) => h,
        None => {
            return error_for(
                host_id,
                "too many input requests wait for the host; refused rather than let the host answer roots".into(),
            );
        }
    };
    result.insert("requestState".into(), Value::String(handle));
    if let Some(obj) = response.as_object_mut() {
        obj.insert("id".into(), host_id.clone());
    }
    tracing::info!(
        "answered the server's roots from the broker; the rest of its input requests go to the host"
    );
    response
}

/// What the proxy keeps while the host answers the rest of a mixed `input_required`.
#[derive(Debug)]
struct Parked {
    answers: Map<String, Value>,
    server_state: Option<Value>,
}

/// The prefix of the proxy's `requestState` handles.
const HANDLE_PREFIX: &str = "fsbroker-state-";
/// Mixed results waiting for the host's retry at once.
const MAX_PARKED: usize = 256;

impl EraState {
    fn park(&self, parked: Parked) -> Option<String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).ok()?;
        let handle = format!("{HANDLE_PREFIX}{:032x}", u128::from_le_bytes(random));
        let mut all = lock(&self.parked);
        if all.len() >= MAX_PARKED {
            return None;
        }
        all.insert(handle.clone(), parked);
        Some(handle)
    }

    /// Puts back, in the host's retry (`message`), what a handle of ours stands for: the
    /// broker's roots answers beside the host's, and the server's `requestState`. A handle
    /// is taken once; an unknown or used one is an error (returned as the message to give).
    fn redeem(&self, message: &mut Value) -> Result<(), String> {
        let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let Some(handle) = params
            .get("requestState")
            .and_then(Value::as_str)
            .filter(|s| s.starts_with(HANDLE_PREFIX))
            .map(str::to_owned)
        else {
            return Ok(());
        };
        let Some(parked) = lock(&self.parked).remove(&handle) else {
            return Err("requestState is unknown or was already used".into());
        };
        let slot = params.entry("inputResponses").or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        if let Some(slot) = slot.as_object_mut() {
            slot.extend(parked.answers);
        }
        match parked.server_state {
            Some(s) => {
                params.insert("requestState".into(), s);
            }
            None => {
                params.remove("requestState");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_hidden_anywhere_are_found() {
        let task = br#"{"jsonrpc":"2.0","id":1,"result":{"task":{"status":"input_required","inputRequests":{"k":{"method":"roots/list"}}}}}"#;
        assert!(hides_roots(task));
        let note = br#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"x":[{"inputRequests":{"k":{"method":"roots/list"}}}]}}"#;
        assert!(hides_roots(note));
        let sampling = br#"{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{"k":{"method":"sampling/createMessage"}}}}"#;
        assert!(!hides_roots(sampling));
    }

    #[test]
    fn escapes_count_as_mentions() {
        assert!(mentions(br#"{"a":"input_required"}"#, b"input_required"));
        assert!(mentions(
            br#"{"a":"input\u005frequired"}"#,
            b"input_required"
        ));
        assert!(!mentions(br#"{"a":"complete"}"#, b"input_required"));
    }

    #[test]
    fn mixed_and_files_requests_are_refused() {
        let roots = json!({"method": "roots/list"});
        let sample = json!({"method": "sampling/createMessage", "params": {}});
        assert!(matches!(
            judge(&json!({"inputRequests": {"r": roots}})),
            Asked::Roots(_)
        ));
        assert!(matches!(
            judge(&json!({"inputRequests": {"s": sample}})),
            Asked::Host
        ));
        assert!(matches!(
            judge(&json!({"inputRequests": {"r": roots, "s": sample}})),
            Asked::Mixed(_)
        ));
        assert!(matches!(
            judge(&json!({"inputRequests": {"f": {"method": "files/read"}}})),
            Asked::Refused(_)
        ));
    }
}
