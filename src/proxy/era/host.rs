//! The host's side of the era: its `initialize`, probes and modern requests judged by the
//! `--era` rule, its batches, its own roots answers dropped, and the server's answer to its
//! `initialize` read for a modern-only server.

use super::{
    BROKERING_EXTENSION, CAPABILITIES_KEY, Era, EraState, INTERACTIVE, LEGACY_VERSIONS,
    MAX_ORIGINALS, MODERN_VERSION, UNSUPPORTED_VERSION, VERSION_KEY, key, mentions,
};
use crate::locks::lock;
use crate::policy::EraMode;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

/// What the host's request becomes.
pub(crate) enum HostAction {
    /// Relayed (maybe rewritten).
    Relay(Vec<u8>),
    /// Answered by the proxy itself with this response.
    Answer(Value),
}

impl EraState {
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
        for item in crate::proxy::strict::BatchItems::new(line) {
            let Ok(item) = item else {
                return None;
            };
            if let crate::proxy::peek::Kind::Request { method, id } = crate::proxy::peek::peek(item)
            {
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
        if v.get("result").is_some() && self.era() == Some(Era::Legacy) {
            self.announce(Era::Legacy);
        }
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
