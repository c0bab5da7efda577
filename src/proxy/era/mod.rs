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
//!   itself, with `-32022` naming the legacy versions and `--era modern`, so that probing
//!   clients fall back to `initialize` and one that cannot (pinned to 2026-07-28) says what
//!   would serve it; a request carrying the modern `_meta` before any `initialize` comes from
//!   a host that settled on 2026-07-28 without probing: `--era auto` relays it and the
//!   session goes modern, `--era legacy` refuses it with the same `-32022`;
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
//!
//! The host's requests are judged by the era rule in `rule`; what a server line says is
//! found in `scan`; the rounds with the broker's roots run in `rounds`, over the proxy's own
//! requests in `upstream`; mixed questions wait for the host in `park`.

mod park;
mod rounds;
mod rule;
mod scan;
mod upstream;

pub(crate) use rounds::{Resolver, intercept, roots_refused};
pub(crate) use rule::{HostAction, carries_version, only_modern};
pub(crate) use scan::{hides_roots, input_required, mentions};

use crate::jsonrpc::id_key;
use crate::locks::lock;
use crate::policy::EraMode;
pub(crate) use crate::proxy::names::MODERN_VERSION;
use crate::proxy::names::{
    BROKERING_EXTENSION, CAPABILITIES_KEY, INTERACTIVE, LEGACY_VERSIONS, VERSION_KEY,
};
use park::Shelf;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;
use upstream::Upstream;

/// JSON-RPC error code of 2026-07-28 for an unsupported protocol version.
pub(crate) const UNSUPPORTED_VERSION: i64 = crate::error::ErrorKind::UnsupportedVersion.wire().code;
/// Rounds of `input_required` the proxy answers for one request before giving up.
pub(crate) const MAX_ROUNDS: usize = 10;
/// Host requests whose params are kept for a retry at once; beyond that an
/// `input_required` answer is refused rather than relayed.
const MAX_ORIGINALS: usize = 1024;
/// The proxy's own requests to the server that may wait at once.
const MAX_UPSTREAM: usize = 1024;
/// The era a connection settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize` was seen: 2025-11-25 or earlier.
    Legacy,
    /// `server/discover` or the modern `_meta` was relayed: 2026-07-28.
    Modern,
}

/// What the proxy knows of the session, shared by both readers and the rounds: the facts
/// under one lock, so that a judgement sees them all at one moment, and the signals beside
/// them.
#[derive(Debug)]
pub(crate) struct EraState {
    facts: Mutex<Facts>,
    /// Why the session cannot go on (`--era legacy` with a modern-only server).
    failure: OnceLock<String>,
    failed: Notify,
    upstream: Upstream,
    resolver: OnceLock<Resolver>,
}

/// The session's facts (see [`EraState`]).
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// The `--era` rule.
    mode: EraMode,
    /// The era the connection settled on, if any.
    era: Option<Era>,
    /// The server refused `initialize` with only modern versions.
    modern_only: bool,
    /// The host's interactive requests in a modern session, by id: their method and params.
    originals: HashMap<String, (String, Value)>,
    /// Mixed results waiting for the host's retry, by handle.
    parked: Shelf,
    /// The proxy's retry under way for a host request, by the host's id.
    retrying: HashMap<String, String>,
    /// Host requests whose rounds the proxy runs (taken from `originals`, so at most as many).
    claimed: HashSet<String>,
    /// Host requests cancelled while the proxy retried them.
    cancelled: HashSet<String>,
    /// The id of the host's `initialize` request (or forwarded probe), to find the server's
    /// answer to it.
    pub(crate) init_id: Option<Value>,
    /// The protocol revision the server's `initialize` result agreed.
    pub(crate) version: Option<String>,
}

impl EraState {
    pub(crate) fn new() -> EraState {
        EraState {
            facts: Mutex::new(Facts::default()),
            failure: OnceLock::new(),
            failed: Notify::new(),
            upstream: Upstream::new(),
            resolver: OnceLock::new(),
        }
    }

    /// The session's facts, locked. Never held across an await, nor while calling anything
    /// that locks them again.
    pub(crate) fn facts(&self) -> MutexGuard<'_, Facts> {
        lock(&self.facts)
    }

    /// Sets the `--era` rule and what the roots are answered with.
    pub(crate) fn configure(&self, mode: EraMode, resolver: Resolver) {
        self.facts().mode = mode;
        let _ = self.resolver.set(resolver);
    }

    fn mode(&self) -> EraMode {
        self.facts().mode
    }

    /// The era settled on, if any.
    pub(crate) fn era(&self) -> Option<Era> {
        self.facts().era
    }

    /// Settles the era; a modern one is announced at once, a legacy one once the server has
    /// accepted the host's `initialize` (a modern-only server refuses it).
    fn settle(&self, era: Era) {
        let before = self.facts().era.replace(era);
        if before != Some(era) && era == Era::Modern {
            self.announce(era);
        }
    }

    fn announce(&self, era: Era) {
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

    /// Takes the params kept for the host request `id` for the rounds the proxy runs on it,
    /// and marks the request as under way; `None` when none were kept.
    pub(crate) fn claim(&self, id: &Value) -> Option<(String, Value)> {
        let mut facts = self.facts();
        let original = facts.originals.remove(&id_key(id))?;
        facts.claimed.insert(id_key(id));
        Some(original)
    }

    /// Whether the rounds for the host request `id` are under way.
    pub(crate) fn is_claimed(&self, id: &Value) -> bool {
        let facts = self.facts();
        !facts.claimed.is_empty() && facts.claimed.contains(&id_key(id))
    }

    /// Ends the claim on the host request `id`, once its rounds are over.
    pub(crate) fn release(&self, id: &Value) {
        self.facts().claimed.remove(&id_key(id));
    }

    /// Forgets the params kept for the host request `id`, once it has its final answer.
    pub(crate) fn forget(&self, id: &Value) {
        let mut facts = self.facts();
        if !facts.originals.is_empty() {
            facts.originals.remove(&id_key(id));
        }
    }
}

/// The host's `-32603` for its request `id`, saying (and logging) `message`.
pub(super) fn error_for(id: &Value, message: String) -> Value {
    tracing::warn!("{message}");
    let error = crate::error::Error::new(crate::error::ErrorKind::Internal, message);
    crate::jsonrpc::refusal(Some(id), error)
}
