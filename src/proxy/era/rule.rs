//! The host's side of the era: its `initialize`, probes and modern requests judged by the
//! `--era` rule, its own roots answers dropped, and the server's answer to its `initialize`
//! read for a modern-only server.

use super::{
    BROKERING_EXTENSION, CAPABILITIES_KEY, Era, EraState, INTERACTIVE, LEGACY_VERSIONS,
    MAX_ORIGINALS, MODERN_VERSION, UNSUPPORTED_VERSION, VERSION_KEY, mentions,
};
use crate::error::{Error, ErrorKind};
use crate::jsonrpc::id_key;
use crate::jsonrpc::refusal;
use crate::policy::EraMode;
use crate::proxy::names::{DISCOVER, INITIALIZE, INPUT_RESPONSES};
use serde_json::{Value, json};

/// What the host's request becomes.
pub(crate) enum HostAction {
    /// Relayed: as written (`None`), or rewritten.
    Relay(Option<Vec<u8>>),
    /// Answered by the proxy itself with this response.
    Answer(Value),
}

impl EraState {
    /// Judges one request of the host (`method`, `id`, the whole message `line`);
    /// `capabilities` are the broker's, declared in every modern request.
    pub(crate) fn judge_request(
        &self,
        method: &str,
        id: &Value,
        line: &[u8],
        capabilities: &Value,
    ) -> HostAction {
        let stripped = strip_host_roots(line);
        let relay = || HostAction::Relay(stripped.clone());
        let line = stripped.as_deref().unwrap_or(line);
        let mode = self.mode();
        if method == INITIALIZE {
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
            return relay();
        }
        let discover = method == DISCOVER;
        if !discover && !mentions(line, VERSION_KEY.as_bytes()) {
            return relay();
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
            // The server judges what the proxy cannot read, as it would without it.
            return relay();
        };
        if !discover && !carries_version(&message) {
            return relay();
        }
        let go_modern = match mode {
            EraMode::Modern => true,
            EraMode::Legacy => false,
            // A probe is answered here, so that a host that can fall back to `initialize`
            // does, and files are brokered; it cannot be told from a probe of a host that
            // will not (one pinned to 2026-07-28), whose refusal names `--era modern`. A
            // request already in the 2026-07-28 envelope comes from a host that settled on
            // that era without asking (a pinned version, a remembered verdict) and falls back
            // to nothing: it gets the modern session, its roots brokered, as with `--era
            // modern`.
            EraMode::Auto => !discover || self.facts().modern_only,
        };
        if self.era() == Some(Era::Legacy) {
            if discover {
                return HostAction::Answer(legacy_only(id, mode));
            }
            // The connection is legacy: a server ignores the modern `_meta` there.
            return relay();
        }
        if !go_modern {
            return HostAction::Answer(legacy_only(id, mode));
        }
        self.settle(Era::Modern);
        declare(&mut message, capabilities);
        if let Err(why) = self.redeem(&mut message) {
            return HostAction::Answer(refusal(Some(id), Error::invalid_params(why)));
        }
        if INTERACTIVE.contains(&method) {
            self.remember(id, method, &message);
        }
        match serde_json::to_vec(&message) {
            Ok(l) => HostAction::Relay(Some(l)),
            Err(_) => relay(),
        }
    }

    fn remember(&self, id: &Value, method: &str, message: &Value) {
        let mut facts = self.facts();
        if facts.originals.len() >= MAX_ORIGINALS {
            tracing::warn!(
                "too many requests wait for their result; a roots question for this one will be refused"
            );
            return;
        }
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        facts
            .originals
            .insert(id_key(id), (method.to_owned(), params));
    }

    /// Notes the server's answer to the host's `initialize`: a `-32022` naming only modern
    /// versions means the server is modern-only.
    pub(crate) fn note_init_answer(&self, v: &Value) {
        if v.get("result").is_some() && self.era() == Some(Era::Legacy) {
            self.announce(Era::Legacy);
        }
        let Some(supported) = only_modern(v) else {
            return;
        };
        match self.mode() {
            EraMode::Legacy => self.fail(format!(
                "the server speaks only protocol revision 2026-07-28 (it supports {supported:?}), and --era legacy needs a server that speaks 2025-11-25 or earlier, where files/* and consent are brokered; run with --era auto or --era modern to broker its roots only"
            )),
            EraMode::Auto => {
                tracing::info!(?supported, "the server is modern-only; the host's next server/discover is forwarded");
                let mut facts = self.facts();
                facts.modern_only = true;
                // The handshake failed, so the connection has no era yet; a modern era,
                // settled by a probe, is not the handshake's to undo.
                if facts.era == Some(Era::Legacy) {
                    facts.era = None;
                }
            }
            EraMode::Modern => {}
        }
    }
}

/// Whether a request carries a protocol version in `params._meta`: the 2026-07-28
/// envelope, which only that revision's requests have.
pub(crate) fn carries_version(message: &Value) -> bool {
    message
        .pointer("/params/_meta")
        .and_then(Value::as_object)
        .is_some_and(|m| m.contains_key(VERSION_KEY))
}

/// The versions a server's answer to `initialize` supports, when it is the `-32022` of a
/// server that speaks only 2026-07-28 (no legacy version among them); `None` for any other
/// answer.
pub(crate) fn only_modern(answer: &Value) -> Option<Vec<String>> {
    if answer.pointer("/error/code").and_then(Value::as_i64) != Some(UNSUPPORTED_VERSION) {
        return None;
    }
    let supported: Vec<String> = answer
        .pointer("/error/data/supported")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let legacy = supported
        .iter()
        .any(|s| LEGACY_VERSIONS.contains(&s.as_str()));
    (!legacy).then_some(supported)
}

/// A host request's `inputResponses` without the entries that answer roots: the proxy never
/// passes a roots question to the host, so such an answer is the host's own, and the
/// server's roots come from the broker alone (the broker's answers are merged in later, for
/// the questions the proxy parked).
/// `None` when there are none.
fn strip_host_roots(line: &[u8]) -> Option<Vec<u8>> {
    if !mentions(line, INPUT_RESPONSES.as_bytes()) {
        return None;
    }
    let mut message = serde_json::from_slice::<Value>(line).ok()?;
    let responses = message
        .get_mut("params")?
        .get_mut(INPUT_RESPONSES)?
        .as_object_mut()?;
    let before = responses.len();
    responses.retain(|_, r| r.get("roots").is_none());
    if responses.len() == before {
        return None;
    }
    tracing::warn!(
        "dropped roots the host sent the server itself; the server's roots are the broker's"
    );
    serde_json::to_vec(&message).ok()
}

/// The proxy's answer to a probe or a 2026-07-28 request it keeps from the server, under
/// `mode` (`auto` or `legacy`): `-32022` naming the legacy versions, which probing clients
/// take as a server to reach with `initialize` (the TypeScript SDK in its auto mode, the
/// Python SDK on every error except a `-32022` naming only modern versions), and whose
/// message a client that will not fall back shows: it names what serves that client.
fn legacy_only(id: &Value, mode: EraMode) -> Value {
    let why = match mode {
        EraMode::Legacy => "runs with --era legacy",
        EraMode::Auto | EraMode::Modern => {
            "keeps a host that can fall back to initialize on 2025-11-25 or earlier, where files are brokered"
        }
    };
    let e = Error::new(
        ErrorKind::UnsupportedVersion,
        format!(
            "Unsupported protocol version: fsbroker proxy {why}; for a host that needs 2026-07-28, run fsbroker proxy with --era modern"
        ),
    );
    refusal(Some(id), e.with_supported(&LEGACY_VERSIONS))
}

fn unsupported(id: &Value, supported: &[&str], rule: &str) -> Value {
    let e = Error::new(
        ErrorKind::UnsupportedVersion,
        format!("Unsupported protocol version: fsbroker proxy runs this session in {rule}"),
    );
    refusal(Some(id), e.with_supported(supported))
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
