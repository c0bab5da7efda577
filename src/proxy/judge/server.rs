//! What becomes of what the server sends.
//!
//! This direction fails closed. The host may parse more leniently than we do (replacing
//! invalid UTF-8, taking lone surrogates or out-of-range numbers), so a message we cannot
//! read exactly is never relayed: otherwise a server could dress a `roots/list` so that we
//! pass it on and the host answers it with its own roots, or hide a request under the
//! proxy's ids. What is refused is answered to the server, so it never waits for an answer
//! that will not come.

use super::{
    Batch, append, close, encode, no_batches, read_batch, refusal, refuse_batch, unreadable,
};
use crate::error::{Error, ErrorKind};
use crate::jsonrpc::loosely_same;
use crate::method::is_brokered;
use crate::proxy::era;
use crate::proxy::host_channel::HostChannel;
use crate::proxy::names::{CANCELLED, ROOTS_LIST, cancelled_id_in};
use crate::proxy::peek::{self, Kind};
use crate::proxy::relay::Relay;
use serde_json::Value;

/// What becomes of one message of the server (a line, or an item of a batch).
#[derive(Debug)]
pub(in crate::proxy) enum Verdict {
    /// To the host, as written.
    Host,
    /// To the host, as written, with what the proxy says of it first (in the log).
    HostNoting(Notice),
    /// To the broker; the request's id.
    Broker(Value),
    /// Answered to the server with the proxy's error (to the request's id, if it has one).
    Refuse(Option<Value>, Error),
    /// Goes no further: dropped, or taken by the proxy (a cancellation of a request the
    /// broker answers, an answer to the proxy's own retry).
    Drop,
    /// To the broker, answered by nothing: a cancellation of a brokered request, when the
    /// broker is the daemon's (which acts on it, as `serve` does).
    BrokerNote,
    /// An answer to the host that the proxy looks into before the host may see it: a result
    /// that asks for input, or the refusal that stands in for an answer hiding a roots
    /// question.
    Input(Value),
}

/// What the proxy says of a server, once, when one of its messages shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::proxy) enum Notice {
    /// The server answered the host after its handshake without asking for its roots.
    RootsUnasked,
    /// The same, of a remote server (`--url`).
    RemoteRootsUnasked,
}

impl Notice {
    /// What is said, at warn.
    pub(in crate::proxy) fn text(self) -> &'static str {
        match self {
            Notice::RootsUnasked => {
                "the server ended its handshake without asking for its roots (roots/list): it \
                 works from what its own command line names, not from the broker's roots, so \
                 --root does not confine it (consent and the audit log cover only what it asks \
                 for with files/*); only --sandbox confines what it opens itself"
            }
            Notice::RemoteRootsUnasked => {
                "the remote server ended its handshake without asking for its roots \
                 (roots/list): it works from its own data on its own machine, which --root \
                 does not reach; the broker's roots, consent and audit log cover only what it \
                 asks for with files/*"
            }
        }
    }
}

/// Judges one message of the server, `item`, which is `kind`. The rules, in order:
/// a brokered request goes to the broker in an era that has it and is refused in one that
/// does not; an id in the proxy's own space is refused; a brokered method sent as a
/// notification is dropped; a cancellation of the proxy's retry or of a brokered request is
/// taken; an answer to the proxy's retry is taken; an answer to the host is looked into for
/// questions for input and hidden roots questions, and the first after the handshake says
/// whether the server asked for its roots (a `roots/list` is noted whenever it comes); a request or notification hiding a roots
/// question is refused or dropped; the rest goes to the host; what we cannot read exactly is
/// refused.
pub(in crate::proxy) fn judge(
    state: &Relay,
    host: &HostChannel,
    item: &[u8],
    kind: Kind,
) -> Verdict {
    match kind {
        Kind::Request { method, id } if is_brokered(&method) => {
            if method == ROOTS_LIST {
                state.roots_asked.note_asked();
            }
            if state.serves(&method) {
                Verdict::Broker(id)
            } else {
                Verdict::Refuse(Some(id), not_in_era(&method))
            }
        }
        Kind::Request { id, .. } if host.is_reserved(&id) => {
            Verdict::Refuse(Some(id), reserved_id())
        }
        Kind::Request { id, .. } if era::hides_roots(item) => {
            Verdict::Refuse(Some(id), hidden_roots())
        }
        Kind::Request { .. } => Verdict::Host,
        Kind::Notification { method } if is_brokered(&method) => {
            tracing::debug!(%method, "dropped a brokered method sent as a notification");
            Verdict::Drop
        }
        Kind::Notification { method } if method == CANCELLED => match takes_cancel(state, item) {
            Cancel::Brokered => Verdict::BrokerNote,
            Cancel::Retry => Verdict::Drop,
            Cancel::Host if era::hides_roots(item) => {
                tracing::warn!("dropped a server notification carrying a roots/list input request");
                Verdict::Drop
            }
            Cancel::Host => Verdict::Host,
        },
        Kind::Notification { .. } if era::hides_roots(item) => {
            tracing::warn!("dropped a server notification carrying a roots/list input request");
            Verdict::Drop
        }
        Kind::Notification { .. } => Verdict::Host,
        Kind::Response { id } => answer(state, item, id),
        Kind::Batch | Kind::Other => Verdict::Refuse(peek::refusal_id(item), unreadable(item)),
    }
}

/// Whose request a server's cancellation names.
enum Cancel {
    /// The proxy's own retry (the host's request then fails).
    Retry,
    /// A brokered request (which stops; the host never saw that id).
    Brokered,
    /// The host's.
    Host,
}

/// Takes a server's cancellation of the proxy's retry or of a brokered request.
fn takes_cancel(state: &Relay, item: &[u8]) -> Cancel {
    if state.era.server_cancelled(item) {
        return Cancel::Retry;
    }
    if cancelled_id_in(item).is_some_and(|id| state.brokered.cancel(&id)) {
        tracing::debug!("the server cancelled a brokered request; passed to the broker");
        return Cancel::Brokered;
    }
    Cancel::Host
}

/// An answer of the server: to the proxy's retry (taken), or to the host.
fn answer(state: &Relay, item: &[u8], id: Value) -> Verdict {
    if state.era.take_upstream_answer(&id, item) {
        return Verdict::Drop;
    }
    // The first answer to `initialize` (or a forwarded probe) settles it: a later one with
    // the same id cannot change the session's era.
    let answers_init = {
        let mut facts = state.era.facts();
        // Loosely: a host that reads ids loosely takes `"0"` for its `0`.
        let hit = facts.init_id.as_ref().is_some_and(|i| loosely_same(i, &id));
        if hit {
            facts.init_id = None;
        }
        hit
    };
    if answers_init {
        // Read once, for the name, the revision and the era.
        if let Ok(v) = serde_json::from_slice::<Value>(item) {
            state.note_server_name(&v);
            state.era.note_init_answer(&v);
        }
    } else {
        state.learn_modern_name(item);
    }
    match era::input_required(item) {
        Some(response) => Verdict::Input(response),
        None if era::hides_roots(item) => Verdict::Input(era::roots_refused(&id)),
        None => {
            state.era.forget(&id);
            if !answers_init && state.roots_asked.unasked_at_answer() {
                return Verdict::HostNoting(if state.remote {
                    Notice::RemoteRootsUnasked
                } else {
                    Notice::RootsUnasked
                });
            }
            Verdict::Host
        }
    }
}

/// Brokered requests of one line, for the lane.
pub(in crate::proxy) struct ForLane {
    pub(in crate::proxy) line: Vec<u8>,
    /// Their ids, to refuse them if the lane is full.
    pub(in crate::proxy) ids: Vec<Value>,
    /// Whether they came as a batch (and so are answered as one).
    pub(in crate::proxy) batch: bool,
}

/// Where the parts of one server line go.
#[derive(Default)]
pub(in crate::proxy) struct Routed {
    pub(in crate::proxy) lane: Option<ForLane>,
    /// Lines for the host: the server's line, or the proxy's errors for the host's requests
    /// whose answers came in a refused batch.
    pub(in crate::proxy) host: Vec<Vec<u8>>,
    /// The proxy's answers to the server.
    pub(in crate::proxy) refusals: Vec<Value>,
    /// Whether they answer a batch (and so go as one array).
    pub(in crate::proxy) batch: bool,
    /// Answers to the host that the proxy looks into first.
    pub(in crate::proxy) input: Vec<Value>,
    /// What the proxy says of the server before the line goes on.
    pub(in crate::proxy) notices: Vec<Notice>,
}

impl Routed {
    fn refused(id: Option<&Value>, error: Error) -> Routed {
        Routed {
            refusals: vec![refusal(id, error)],
            ..Routed::default()
        }
    }

    /// The lines that answer the server.
    pub(in crate::proxy) fn refusal_lines(&mut self) -> Vec<Vec<u8>> {
        encode(std::mem::take(&mut self.refusals), self.batch)
    }
}

/// Routes one line of the server: a single message by its verdict, a batch item by item.
pub(in crate::proxy) fn route(line: Vec<u8>, host: &HostChannel, state: &Relay) -> Routed {
    // JSON is UTF-8; a host that decodes leniently must never see a line we did not read.
    if std::str::from_utf8(&line).is_err() {
        let e = Error::new(ErrorKind::ParseError, "message is not valid utf-8");
        return Routed::refused(None, e);
    }
    let kind = peek::peek(&line);
    if kind == Kind::Batch {
        return route_batch(line, host, state);
    }
    match judge(state, host, &line, kind) {
        Verdict::Host => Routed {
            host: vec![line],
            ..Routed::default()
        },
        Verdict::HostNoting(notice) => Routed {
            host: vec![line],
            notices: vec![notice],
            ..Routed::default()
        },
        Verdict::Broker(id) => {
            state.brokered.start(&id);
            Routed {
                lane: Some(ForLane {
                    line,
                    ids: vec![id],
                    batch: false,
                }),
                ..Routed::default()
            }
        }
        Verdict::Refuse(id, e) => Routed::refused(id.as_ref(), e),
        Verdict::Drop => Routed::default(),
        Verdict::BrokerNote => Routed {
            lane: Some(ForLane {
                line,
                ids: Vec::new(),
                batch: false,
            }),
            ..Routed::default()
        },
        Verdict::Input(v) => Routed {
            input: vec![v],
            ..Routed::default()
        },
    }
}

/// A server's batch: refused whole in a revision without batches; otherwise split into
/// brokered requests, the rest, and refusals, each item judged as a single line is and kept
/// as the bytes the server wrote (what goes on is never a re-encoding of what we read). The
/// broker's answers come back as a batch of their own. A batch with nothing to take out is
/// relayed as the server wrote it, byte for byte.
fn route_batch(line: Vec<u8>, host: &HostChannel, state: &Relay) -> Routed {
    let Batch { items, fault } = read_batch(&line);
    if let Some(version) = state.without_batches() {
        let refused = refuse_batch(&items, &no_batches(&version), &|id| {
            state.era.is_upstream(id)
        });
        // The proxy's retries answered in the batch fail, so the host's requests they stand
        // for get an error instead of waiting for ever.
        for id in &refused.ours {
            let e = Error::new(
                ErrorKind::InvalidRequest,
                "the server answered the proxy's retry in a batch, which this protocol revision does not have",
            );
            if let Ok(l) = serde_json::to_vec(&refusal(Some(id), e)) {
                state.era.take_upstream_answer(id, &l);
            }
        }
        return Routed {
            host: refused.for_other_side,
            refusals: refused.for_sender,
            ..Routed::default()
        };
    }
    if let Some(fault) = fault {
        return Routed::refused(None, fault.error(&line));
    }
    // The answer to the host's `initialize` settles the revision, and so whether the session
    // has batches at all: it must come alone, never in a batch whose other items would be
    // judged before the revision was known.
    let init = state.era.facts().init_id.clone();
    let answers_init = |kind: &Kind| matches!(kind, Kind::Response { id } if init.as_ref().is_some_and(|i| loosely_same(i, id)));
    if items.iter().any(|(_, kind)| answers_init(kind)) {
        let e = Error::new(
            ErrorKind::InvalidRequest,
            "the answer to initialize cannot come in a batch",
        );
        tracing::warn!("refused a server batch carrying the answer to initialize");
        let refused = refuse_batch(&items, &e, &|id| state.era.is_upstream(id));
        return Routed {
            host: refused.for_other_side,
            refusals: refused.for_sender,
            ..Routed::default()
        };
    }
    if items.is_empty() {
        return Routed::refused(None, Error::new(ErrorKind::InvalidRequest, "empty batch"));
    }
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    let mut ids = Vec::new();
    let mut routed = Routed {
        batch: true,
        ..Routed::default()
    };
    let mut changed = false;
    for (item, kind) in items {
        match judge(state, host, item, kind) {
            Verdict::Host => {
                append(&mut theirs, item);
                continue;
            }
            Verdict::HostNoting(notice) => {
                routed.notices.push(notice);
                append(&mut theirs, item);
                continue;
            }
            Verdict::Broker(id) => {
                // Noted at once, so that a cancellation of it later in the same batch is
                // taken too. The broker answers a batch as a whole, so its items are not
                // stopped one by one; a cancellation of one of them is still not the host's.
                state.brokered.note_batch(std::slice::from_ref(&id));
                ids.push(id);
                append(&mut ours, item);
            }
            Verdict::Refuse(id, e) => routed.refusals.push(refusal(id.as_ref(), e)),
            Verdict::Drop => {}
            Verdict::BrokerNote => append(&mut ours, item),
            Verdict::Input(v) => routed.input.push(v),
        }
        changed = true;
    }
    let host_line = if changed { close(theirs) } else { Some(line) };
    routed.host = host_line.into_iter().collect();
    routed.lane = close(ours).map(|line| ForLane {
        line,
        ids,
        batch: true,
    });
    routed
}

fn reserved_id() -> Error {
    Error::new(
        ErrorKind::InvalidRequest,
        "request id is reserved by the proxy",
    )
}

fn not_in_era(method: &str) -> Error {
    Error::new(
        ErrorKind::MethodNotFound,
        format!(
            "{method} is brokered only in a session that began with initialize (protocol revision 2025-11-25 or earlier)"
        ),
    )
}

fn hidden_roots() -> Error {
    Error::new(
        ErrorKind::InvalidRequest,
        "a roots/list input request is answered by the proxy, never relayed to the host",
    )
}
