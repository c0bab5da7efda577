//! What becomes of what the host sends: its `initialize` gains the broker's capabilities, its
//! requests are judged by the era rule, its answers to the proxy's own questions stay here,
//! its roots notices and its answers to brokered requests are dropped, and the rest goes to
//! the server. Unlike the server's direction, what the proxy cannot read is relayed (the
//! server judges it, as it would without the proxy), unless it may carry something the
//! proxy must act on.

use super::{
    Batch, Fault, RefusedBatch, append, close, encode, no_batches, read_batch, refusal,
    refuse_batch,
};
use crate::error::{Error, ErrorKind};
use crate::proxy::era::{self, Era, HostAction};
use crate::proxy::host_channel::{HostChannel, add_capabilities};
use crate::proxy::link::Wire;
use crate::proxy::names::{
    CANCELLED, DISCOVER, INITIALIZE, INITIALIZED, INPUT_RESPONSES, ROOTS_CHANGED, VERSION_KEY,
};
use crate::proxy::peek::{self, Kind};
use crate::proxy::relay::Relay;
use crate::proxy::strict;
use serde_json::Value;

/// What becomes of one message of the host (a line, or an item of a batch).
#[derive(Debug)]
pub(in crate::proxy) enum Verdict {
    /// To the server: as written (`None`), or rewritten.
    Server(Option<Vec<u8>>),
    /// To the server as written, after a line of the proxy's own (the cancellation of its
    /// retry of the same request).
    ServerAfter(Vec<u8>),
    /// Answered by the proxy to the host with this response.
    Answer(Value),
    /// Goes no further: dropped, or taken (an answer to the proxy's own question).
    Drop,
}

/// Judges one message of the host, `item`, which is `kind`; `capabilities` are the broker's,
/// added to `initialize` and declared in every modern request. The rules, in order: a request
/// is judged by the era rule (answered by the proxy, or relayed, maybe rewritten); an answer
/// to the proxy's question is taken, one to a request the broker answers dropped; a
/// cancellation also cancels the proxy's retry of that request; `notifications/initialized`
/// is noted (the handshake is over) and relayed; roots notices are dropped; a
/// message we cannot read exactly is dropped when it may answer the proxy, and refused when it
/// may carry the modern era or answer a brokered request; the rest goes to the server.
pub(in crate::proxy) fn judge(
    state: &Relay,
    host: &HostChannel,
    capabilities: &Value,
    item: &[u8],
    kind: Kind,
) -> Verdict {
    match kind {
        Kind::Request { method, id } => {
            match state.era.judge_request(&method, &id, item, capabilities) {
                HostAction::Answer(answer) => Verdict::Answer(answer),
                HostAction::Relay(line) if method == INITIALIZE => {
                    let bytes = line.as_deref().unwrap_or(item);
                    let Ok(message) = serde_json::from_slice::<Value>(bytes) else {
                        return Verdict::Server(line);
                    };
                    host.note_capabilities(message.pointer("/params/capabilities"));
                    state.era.facts().init_id = Some(id);
                    match serde_json::to_vec(&add_capabilities(message, capabilities)) {
                        Ok(extended) => Verdict::Server(Some(extended)),
                        Err(_) => Verdict::Server(line),
                    }
                }
                HostAction::Relay(line) => {
                    // A forwarded probe's answer names the server, as `initialize`'s does.
                    if method == DISCOVER {
                        state.era.facts().init_id = Some(id);
                    }
                    Verdict::Server(line)
                }
            }
        }
        Kind::Response { id } if host.is_reserved(&id) => {
            host.complete(&id, serde_json::from_slice(item).unwrap_or(Value::Null));
            Verdict::Drop
        }
        Kind::Response { id } if state.brokered.knows(&id) => {
            tracing::warn!(
                "dropped the host's answer to a request the broker answers (roots/list or files/*)"
            );
            Verdict::Drop
        }
        Kind::Notification { method } if method == CANCELLED => match state.era.cancel(item) {
            Some(ours) => Verdict::ServerAfter(ours),
            None => Verdict::Server(None),
        },
        Kind::Notification { method } if method == INITIALIZED => {
            state.roots_asked.note_handshake_over();
            Verdict::Server(None)
        }
        Kind::Notification { method } if method == ROOTS_CHANGED => {
            tracing::debug!("dropped the host's roots/list_changed: the broker owns the roots");
            Verdict::Drop
        }
        Kind::Other
            if host.may_be_named_in(item)
                || ambiguous_and_names(item, |id| host.is_reserved(id)) =>
        {
            // A message the proxy cannot read that may name one of its ids (the prefix is in
            // it, or an escape that could spell it): taken as the answer it might be, it
            // could be read differently; relayed, it could hand the server an answer meant
            // for the proxy (what the user typed in a consent form). The proxy's question
            // then goes unanswered, which is a refusal.
            tracing::warn!(
                "dropped a host message the proxy cannot read that may answer its own request"
            );
            Verdict::Drop
        }
        // What the proxy cannot read exactly must not carry a probe or a 2026-07-28 request
        // past the era rules, answers of its own for the server, nor an answer to a request
        // the broker answers.
        Kind::Other
            if era::mentions(item, DISCOVER.as_bytes())
                || era::mentions(item, VERSION_KEY.as_bytes())
                || era::mentions(item, INPUT_RESPONSES.as_bytes())
                || ambiguous_and_names(item, |id| state.brokered.knows(id)) =>
        {
            tracing::warn!(
                "refused a host message the proxy cannot read that names the 2026-07-28 era"
            );
            let e = Error::new(
                ErrorKind::InvalidRequest,
                "a message fsbroker proxy cannot read exactly may not carry server/discover or a 2026-07-28 request",
            );
            Verdict::Answer(refusal(peek::refusal_id(item).as_ref(), e))
        }
        Kind::Notification { .. } | Kind::Response { .. } | Kind::Batch | Kind::Other => {
            Verdict::Server(None)
        }
    }
}

/// Where the parts of one host line go.
#[derive(Debug, Default)]
pub(in crate::proxy) struct Routed {
    /// Lines for the server, in order.
    pub(in crate::proxy) server: Vec<Vec<u8>>,
    /// The transport they go by: the era the line was judged in, decided here once and
    /// carried with each line to the transport, which never decides it again.
    pub(in crate::proxy) wire: Wire,
    /// The proxy's answers to the host.
    pub(in crate::proxy) host: Vec<Vec<u8>>,
}

/// Routes one line of the host: a single message by its verdict, a batch item by item.
pub(in crate::proxy) fn route(
    line: Vec<u8>,
    host: &HostChannel,
    state: &Relay,
    capabilities: &Value,
) -> Routed {
    let mut routed = route_line(line, host, state, capabilities);
    routed.wire = match state.era.era() {
        Some(Era::Modern) => Wire::Modern,
        Some(Era::Legacy) | None => Wire::Legacy,
    };
    routed
}

/// [`route`], before the line's transport is known.
fn route_line(line: Vec<u8>, host: &HostChannel, state: &Relay, capabilities: &Value) -> Routed {
    let kind = peek::peek(&line);
    if kind == Kind::Batch {
        return route_batch(line, host, state, capabilities);
    }
    let mut routed = Routed::default();
    match judge(state, host, capabilities, &line, kind) {
        Verdict::Server(None) => routed.server.push(line),
        Verdict::Server(Some(rewritten)) => routed.server.push(rewritten),
        Verdict::ServerAfter(ours) => routed.server.extend([ours, line]),
        Verdict::Answer(answer) => routed.host = encode(vec![answer], false),
        Verdict::Drop => {}
    }
    routed
}

/// A host batch: refused whole when an item in it must be judged alone (a probe or a
/// 2026-07-28 request, which that revision never batches) or when the session's revision has
/// no batches; otherwise each item is judged as a single line is, and what remains for the
/// server is the items as the host wrote them (the batch byte for byte when nothing changed).
fn route_batch(line: Vec<u8>, host: &HostChannel, state: &Relay, capabilities: &Value) -> Routed {
    let Batch { items, fault } = read_batch(&line);
    if fault == Some(Fault::NotAnArray) {
        // Not a batch the proxy can cut into items: judged whole, as any message it cannot
        // read, so it carries nothing past the rules that a single line could not.
        let mut routed = Routed::default();
        match judge(state, host, capabilities, &line, Kind::Other) {
            Verdict::Server(_) | Verdict::ServerAfter(_) => routed.server.push(line),
            Verdict::Answer(answer) => routed.host = encode(vec![answer], false),
            Verdict::Drop => {}
        }
        return routed;
    }
    // The host's answers to the proxy's questions and to requests the broker answers are
    // not the server's, in a refused batch either.
    let ours = |id: &Value| host.is_reserved(id) || state.brokered.knows(id);
    if items.iter().any(|(item, kind)| alone(item, kind)) {
        tracing::warn!("refused a host batch carrying server/discover or a 2026-07-28 request");
        let e = Error::new(
            ErrorKind::InvalidRequest,
            "server/discover and 2026-07-28 requests cannot come in a batch through fsbroker proxy",
        );
        return refused(host, refuse_batch(&items, &e, &ours), true);
    }
    if let Some(version) = state.without_batches() {
        let e = no_batches(&version);
        return refused(host, refuse_batch(&items, &e, &ours), false);
    }
    if let Some(fault) = fault {
        return Routed {
            host: encode(vec![refusal(None, fault.error(&line))], false),
            ..Routed::default()
        };
    }
    let mut routed = Routed::default();
    let mut rest = Vec::new();
    let mut answers = Vec::new();
    let mut changed = false;
    for (item, kind) in items {
        match judge(state, host, capabilities, item, kind) {
            Verdict::Server(None) => append(&mut rest, item),
            Verdict::Server(Some(rewritten)) => {
                append(&mut rest, &rewritten);
                changed = true;
            }
            Verdict::ServerAfter(ours) => {
                routed.server.push(ours);
                append(&mut rest, item);
            }
            Verdict::Answer(answer) => {
                answers.push(answer);
                changed = true;
            }
            Verdict::Drop => changed = true,
        }
    }
    let rest = if changed { close(rest) } else { Some(line) };
    routed.server.extend(rest);
    routed.host = encode(answers, true);
    routed
}

/// Whether a host message must be judged alone, never in a batch: a probe, a request with
/// the 2026-07-28 `_meta`, or an item the proxy cannot read that may be either.
fn alone(item: &[u8], kind: &Kind) -> bool {
    let method = match kind {
        Kind::Request { method, .. } => method,
        Kind::Other | Kind::Batch => {
            return era::mentions(item, DISCOVER.as_bytes())
                || era::mentions(item, VERSION_KEY.as_bytes());
        }
        Kind::Notification { .. } | Kind::Response { .. } => return false,
    };
    method == DISCOVER
        || (era::mentions(item, VERSION_KEY.as_bytes())
            && serde_json::from_slice::<Value>(item).is_ok_and(|v| era::carries_version(&v)))
}

/// The lines of a refused host batch: errors for the host's requests (one array when
/// `as_array`, else one line each), errors for the server's requests it answered, and the
/// proxy's own questions answered in it completed as refused.
fn refused(host: &HostChannel, refused: RefusedBatch, as_array: bool) -> Routed {
    for id in &refused.ours {
        let e = Error::new(ErrorKind::InvalidRequest, "answered in a batch");
        host.complete(id, refusal(Some(id), e));
    }
    Routed {
        server: refused.for_other_side,
        host: encode(refused.for_sender, as_array),
        ..Routed::default()
    }
}

/// Whether a host message the strict reader finds ambiguous (a key named twice) names, under
/// some reading, an id for which `named` holds.
fn ambiguous_and_names(message: &[u8], named: impl Fn(&Value) -> bool) -> bool {
    strict::read(message).is_ok_and(|e| e.duplicated && e.id.iter().chain(&e.ids).any(named))
}
