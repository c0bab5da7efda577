//! What the proxy learns of one relayed session and shares between the readers, the lane
//! and the rounds: the server's name and the session's id, the brokered requests a server
//! may cancel, whether the server asked for its roots, and the era's facts.

use super::cancel;
use super::era::{self, EraState};
use super::names::{FIRST_WITHOUT_BATCHES, SERVER_INFO_KEY};
use crate::session::DEFAULT_SERVER_ID;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// What the proxy learns of one relayed session (see the module documentation).
pub(super) struct Relay {
    /// The session id given on the command line, if any.
    configured: Option<String>,
    /// The server's `serverInfo.name`.
    server_name: OnceLock<String>,
    /// The session id, fixed when first asked for, so a session never splits in two.
    session: OnceLock<String>,
    /// The server's brokered requests, which it may cancel.
    pub(super) brokered: Arc<cancel::Brokered>,
    /// The protocol era, and the roots questions of a modern session.
    pub(super) era: Arc<EraState>,
    /// Whether the server asked for its roots by the end of its handshake.
    pub(super) roots_asked: RootsAsked,
    /// Whether the server is a remote one (`--url`): what it opens on its own is on its own
    /// machine, which no flag here confines.
    pub(super) remote: bool,
}

/// Whether the server asked for its roots (`roots/list`) by the time its handshake was over.
/// A server that has not, by its first answer to the host after the host's
/// `notifications/initialized`, serves what its own command line names, which `--root` does
/// not reach: that is said once. Every step is noted by the judge as it passes; the first
/// answer after the handshake settles it either way.
#[derive(Default)]
pub(super) struct RootsAsked {
    /// The host sent `notifications/initialized`.
    handshake_over: AtomicBool,
    /// The server asked for its roots.
    asked: AtomicBool,
    /// The first answer after the handshake has come.
    settled: AtomicBool,
}

impl RootsAsked {
    /// The host sent `notifications/initialized`.
    pub(super) fn note_handshake_over(&self) {
        self.handshake_over.store(true, Ordering::SeqCst);
    }

    /// The server asked for its roots. One that was said not to have, and asks now, is said
    /// to, once: from here on it is told the broker's roots.
    pub(super) fn note_asked(&self) {
        let first = !self.asked.swap(true, Ordering::SeqCst);
        if first
            && self.settled.load(Ordering::SeqCst)
            && self.handshake_over.load(Ordering::SeqCst)
        {
            tracing::info!(
                "the server asked for its roots after all: from here on it works from the broker's roots, and what it did before came from its own command line"
            );
        }
    }

    /// The server answers the host, other than the answer to `initialize` (which a host that
    /// sends its first lines at once may get after its `notifications/initialized` passed):
    /// whether this is the first answer after the handshake and the server has not asked for
    /// its roots (true at most once per session).
    pub(super) fn unasked_at_answer(&self) -> bool {
        self.handshake_over.load(Ordering::SeqCst)
            && !self.settled.swap(true, Ordering::SeqCst)
            && !self.asked.load(Ordering::SeqCst)
    }
}

impl Relay {
    /// A session whose id is `configured`, or the server's name once it is known.
    pub(super) fn new(configured: Option<String>) -> Relay {
        Relay {
            configured,
            server_name: OnceLock::new(),
            session: OnceLock::new(),
            brokered: Arc::default(),
            era: Arc::new(EraState::new()),
            roots_asked: RootsAsked::default(),
            remote: false,
        }
    }

    /// This relay, for a remote server.
    pub(super) fn remote(mut self, remote: bool) -> Relay {
        self.remote = remote;
        self
    }

    /// The session's id: the one configured, else the server's name, else the default;
    /// fixed when first asked for, so a session never splits in two.
    pub(super) fn session_id(&self) -> String {
        self.session
            .get_or_init(|| {
                self.configured
                    .clone()
                    .or_else(|| self.server_name.get().cloned())
                    .unwrap_or_else(|| DEFAULT_SERVER_ID.to_owned())
            })
            .clone()
    }

    /// Takes the session's name, and the agreed revision, from the server's answer `v` to
    /// `initialize` (or to a forwarded `server/discover`), read once by the caller.
    pub(super) fn note_server_name(&self, v: &Value) {
        if let Some(name) = server_name_in(v) {
            tracing::info!(server = %name, "server initialized");
            let _ = self.server_name.set(name);
        }
        let version = v
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(v) = version {
            self.era.facts().version = Some(v);
        }
    }

    /// Whether the broker answers a server's request for `method` in this session: `roots/list`
    /// always (the host is never asked), `files/*` and consent only once the host's
    /// `initialize` made the session legacy. Revision 2026-07-28 has neither, and a server
    /// that asks before the handshake has no era yet: the answer is no.
    pub(super) fn serves(&self, method: &str) -> bool {
        method == super::names::ROOTS_LIST || self.era.era() == Some(era::Era::Legacy)
    }

    /// Takes the session's name from any answer of the server in a modern session, until it
    /// is known: a 2026-07-28 server names itself in every result's `_meta`, and a host may
    /// never send the probe on this connection (the TypeScript SDK 2.x probes on a copy of
    /// the command, or not at all with a remembered verdict). The first name holds, and only
    /// until the session's name is fixed by the first brokered request.
    pub(super) fn learn_modern_name(&self, line: &[u8]) {
        if self.server_name.get().is_some()
            || self.session.get().is_some()
            || self.era.era() != Some(era::Era::Modern)
            || !era::mentions(line, SERVER_INFO_KEY.as_bytes())
        {
            return;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(line) {
            self.note_server_name(&v);
        }
    }

    /// The agreed protocol revision when it has no JSON-RPC batches (2025-06-18 and later,
    /// which removed them); `None` before `initialize` was answered or in an older one.
    pub(super) fn without_batches(&self) -> Option<String> {
        // A modern session may have no `initialize` answer to read a version from.
        if self.era.era() == Some(era::Era::Modern) {
            return Some(era::MODERN_VERSION.to_owned());
        }
        self.era
            .facts()
            .version
            .clone()
            .filter(|v| v.as_str() >= FIRST_WITHOUT_BATCHES)
    }
}

/// The server's name in its answer `v`: `serverInfo.name` in an `initialize` result, or
/// the name under [`SERVER_INFO_KEY`] in a result's `_meta`; cleaned for a session id.
fn server_name_in(v: &Value) -> Option<String> {
    let result = v.get("result")?;
    result
        .pointer("/serverInfo/name")
        .or_else(|| result.get("_meta")?.get(SERVER_INFO_KEY)?.get("name"))
        .and_then(Value::as_str)
        .and_then(crate::session::server_name)
}
