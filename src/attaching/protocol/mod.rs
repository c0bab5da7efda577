//! The daemon's control protocol, as both ends know it: newline-delimited JSON, the hello
//! first, then one request a line, each answered by one line (`{"ok": true, ...}` or
//! `{"ok": false, "error": MESSAGE}`), or turned into a stream or an attached session.
//!
//! A request is one [`Request`], tagged by its `op`; each op's fields are a struct that
//! refuses fields it does not know, so that a misspelt field is an error rather than a
//! default. The daemon reads a line into a `Request` once and answers it in one `match`
//! (`crate::daemon`'s `dispatch.rs`); a client builds the same `Request` and sends it (the
//! daemon's `Client` for the command line's verbs, `crate::attaching` for a session), and
//! reads the typed answers of `answer.rs`. The types live here, below both ends, so that the
//! attaching end needs nothing of the daemon's.
//!
//! Adding an op: a line in the list below (its name, its variant, its fields' struct, its
//! answer), and its arm in the daemon's `dispatch.rs`, which the compiler asks for.

mod answer;

pub(crate) use answer::{
    Attached, ConsoleLink, Events, Reloaded, Resumed, Revoked, RevokedGrant, Sessions,
};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The first line of every connection.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Hello {
    /// The daemon's secret, in hex, as its key file holds it.
    pub(crate) hello: String,
}

/// What an op's fields are sent as, and what its successful answer is read as: a client's
/// typed call is `Client::request(fields)`, and gets `Answer` back.
pub(crate) trait Op: Into<Request> {
    /// The op's successful answer.
    type Answer: DeserializeOwned;
}

/// Declares [`Request`], the list of its ops' names, and each op's answer, from one list, so
/// that the op a line names, the variant it is read into, the answer a client reads and the
/// names an unknown op is told cannot disagree.
macro_rules! requests {
    ($( $(#[$doc:meta])* $name:literal => $variant:ident($fields:ty) -> $answer:ty, )*) => {
        /// One control request: a line after the hello, tagged by its `op`.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "op")]
        pub(crate) enum Request {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($fields), )*
        }

        impl Request {
            /// Every op's name, in the order the protocol lists them.
            pub(crate) const OPS: &'static [&'static str] = &[$($name),*];

            /// This request's op, as a line spells it.
            pub(crate) fn op(&self) -> &'static str {
                match self {
                    $( Request::$variant(_) => $name, )*
                }
            }
        }

        $(
            impl From<$fields> for Request {
                fn from(fields: $fields) -> Request {
                    Request::$variant(fields)
                }
            }

            impl Op for $fields {
                type Answer = $answer;
            }
        )*
    };
}

requests! {
    /// `{"op": "status"}` → `{"ok": true, "sessions": [...]}`: every live session.
    "status" => Status(Status) -> Sessions,
    /// `{"op": "revoke", "server": ID?, "path": MOUNTPATH?, "all": BOOL?}` →
    /// `{"ok": true, "revoked": [...], "carved": [...]}`.
    "revoke" => Revoke(Revoke) -> Revoked,
    /// `{"op": "resume", "server": ID}` → `{"ok": true, "resumed": BOOL}`.
    "resume" => Resume(Resume) -> Resumed,
    /// `{"op": "describe", "follow": BOOL?}` → the daemon's description, once or after every
    /// policy change.
    "describe" => Describe(Describe) -> Value,
    /// `{"op": "attach", "server": NAME, ...}` → `{"ok": true, "session": ID}`, then the
    /// session's JSON-RPC.
    "attach" => Attach(AttachRequest) -> Attached,
    /// `{"op": "log", "server": ID?, "follow": BOOL?}` → `{"ok": true, "events": [...]}`,
    /// then with `follow` one line per new event.
    "log" => Log(Log) -> Events,
    /// `{"op": "reload"}` → what the policy's reload changed.
    "reload" => Reload(Reload) -> Reloaded,
    /// `{"op": "console"}` → `{"ok": true, "url": LINK}`, a fresh one-time sign-in link.
    "console" => Console(Console) -> ConsoleLink,
    /// `{"op": "history", "server": ID?, "since": MS?}` → `{"ok": true, "changes": [...]}`.
    "history" => History(History) -> Value,
    /// `{"op": "restore", "id": ID, "to": MOUNTPATH?}` → `{"ok": true, "restored": {...}}`.
    "restore" => Restore(Restore) -> Value,
    /// `{"op": "undo", "server": ID, "since": MS?}` → `{"ok": true, "restored": [...],
    /// "conflicts": [...]}`.
    "undo" => Undo(Undo) -> Value,
}

/// `status`'s fields: none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Status {}

/// `reload`'s fields: none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Reload {}

/// `console`'s fields: none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Console {}

/// `revoke`'s fields: with neither a server nor a path, only `all` revokes everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Revoke {
    /// Only this session's grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<String>,
    /// Only grants on this path (mount form), carved out of wider ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// Every grant of every session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) all: bool,
}

/// `resume`'s fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Resume {
    /// The suspended session.
    pub(crate) server: String,
}

/// `describe`'s fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Describe {
    /// Send the description again after every policy change, until the peer goes (a
    /// sandboxing proxy's watch on its roots).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) follow: bool,
}

/// `attach`'s fields: who attaches.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AttachRequest {
    /// The session's name as the client knows it (`--server-id`, else the server's name).
    pub(crate) server: String,
    /// The server's process id, when the client started it.
    #[serde(default)]
    pub(crate) server_pid: Option<u32>,
    /// The protocol era of the session, when known.
    #[serde(default)]
    pub(crate) era: Option<String>,
    /// The sandbox the server runs in: `{"abi": N}`, or absent for none.
    #[serde(default)]
    pub(crate) sandbox: Option<Value>,
    /// Whether the client answers consent questions (a proxy with a host).
    #[serde(default)]
    pub(crate) asks: bool,
    /// Who the server is, as the client worked it out from the kernel and the filesystem
    /// (never from what the server says); absent when it could not. The daemon computes the
    /// digest again from the fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) identity: Option<Box<crate::Identity>>,
}

impl AttachRequest {
    /// The session's name, cleaned for a session id ([`crate::session::server_name`]), or
    /// why the request names none.
    pub(crate) fn name(&self) -> Result<String, String> {
        crate::session::server_name(&self.server)
            .ok_or_else(|| "attach needs a server name with a printable character".to_owned())
    }

    /// Whether the attaching client runs its server in a sandbox.
    pub(crate) fn sandboxed(&self) -> bool {
        self.sandbox.as_ref().is_some_and(|s| !s.is_null())
    }
}

/// `log`'s fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Log {
    /// Only this server's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<String>,
    /// After the recent events, each new one as it comes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) follow: bool,
}

/// `history`'s fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct History {
    /// Only this server's (or session's) changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<String>,
    /// Only changes at or after this time, in ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) since: Option<u64>,
}

/// `restore`'s fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Restore {
    /// The change whose replaced or removed content is put back.
    pub(crate) id: String,
    /// Where, in mount form, when not at its own path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) to: Option<String>,
}

/// `undo`'s fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Undo {
    /// The server (or session) whose changes are taken back.
    pub(crate) server: String,
    /// Only changes at or after this time, in ms since the epoch; else its latest session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) since: Option<u64>,
}

impl Request {
    /// Reads one request line. The line is parsed once, into its request; only a line that is
    /// refused is looked at again, for its op, to say what was wrong with it.
    pub(crate) fn parse(line: &[u8]) -> Result<Request, String> {
        serde_json::from_slice(line).map_err(|e| refusal(line, &e))
    }

    /// The request as one line, without its newline.
    pub(crate) fn to_line(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec(self).map_err(|e| format!("cannot write a {} request: {e}", self.op()))
    }
}

/// Why `line` is not a request, `e` being what reading it said.
fn refusal(line: &[u8], e: &serde_json::Error) -> String {
    /// Only the op, to name it in the refusal.
    #[derive(Deserialize)]
    struct Tag {
        op: String,
    }
    match serde_json::from_slice::<Tag>(line) {
        Ok(Tag { op }) if !Request::OPS.contains(&op.as_str()) => {
            format!("unknown op {op:?}: the ops are {}", ops_listed())
        }
        Ok(Tag { op }) => {
            let article = if op.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            format!("not {article} {op} request: {e}")
        }
        Err(_) => format!("not a control request: {e}"),
    }
}

/// The ops' names as a sentence lists them: `a, b and c`.
fn ops_listed() -> String {
    match Request::OPS.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests;
