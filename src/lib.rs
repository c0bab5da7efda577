//! # mcp-fsbroker
//!
//! Client-brokered filesystem access for the Model Context Protocol: untrusted MCP servers
//! use the user's files only through the client, only inside the directories the user
//! approved, and only after the user consented.
//!
//! The threat: a server sends `files/*` requests with paths of its choosing (CWE-22 path
//! traversal, symlink escapes, special files, resource exhaustion). Every request path is
//! parsed once into a [`path::MountPath`] and reaches the filesystem only through its root's
//! capability handle ([`Root`]); see `README.md` for the full threat model.
//!
//! ## Embedding
//!
//! A host builds a [`Policy`] in code ([`Policy::new`] with [`policy::RootEntry`] and
//! [`policy::GrantEntry`]) or loads one ([`Policy::load`]), builds a [`Broker`] from it with
//! [`Broker::builder`] (which validates it; limits and timeouts set in code go there too),
//! merges [`Broker::capabilities`] into its `initialize` request, and opens a session per
//! server ([`Broker::open_session`]: a [`broker::ServerSession`] whose drop ends it, with its
//! own [`Notifications`]). It hands each message a server sends to
//! [`broker::ServerSession::handle_message`] (or raw lines to `handle_line`), or calls
//! methods typed ([`broker::ServerSession::call`] with the params of [`wire`]), and relays
//! the notifications to their server. The broker orders each session's calls itself: a
//! change runs after the calls handed over before it, a read after the changes handed over
//! before it. A host shows its own consent dialog with a closure ([`consent::from_fn`]) or
//! by implementing [`ConsentProvider`]; errors are [`Error`] with their [`ErrorKind`],
//! [`Reason`] and wire code. What every session holds and did is [`Broker::snapshot`];
//! grants are taken back with [`Broker::revoke`] and its kin; the audit goes where the host
//! says ([`AuditLog`]), never to its stderr by default, and to any number of subscribers as
//! typed events ([`Broker::audit_events`]). `examples/embed.rs` is a complete host.
//!
//! ## Features
//!
//! The library itself needs none of them; each adds a face:
//!
//! - `cli` (default): the module `cli`, the command line of `fsbroker` (clap), and the
//!   binary's logging (tracing-subscriber); with `proxy`, `cli::main` is the whole binary.
//! - `proxy` (default): the module `proxy`, `fsbroker proxy` between a host and a server,
//!   started as a child or reached over Streamable HTTP (reqwest, rustls).
//! - `rmcp`: the module `rmcp_adapter`, answers for a host written with the official Rust
//!   SDK.
//! - `fuzzing`: the module `fuzzing`, the fuzz oracles (for the fuzz crate and the corpus
//!   replay test).
//!
//! The binary needs `cli` and `proxy`, hence the defaults: `cargo install mcp-fsbroker` and
//! `cargo run -- serve` work as they are. A host embedding the library depends on it with
//! `default-features = false` (adding `features = ["rmcp"]` for the adapter) and compiles
//! neither clap nor reqwest nor rustls.
//!
//! ## Layout
//!
//! Public, for embedders: [`broker`] (the [`Broker`] that dispatches messages for server
//! sessions, its builder, session handles, snapshots, audit events, the outbound stream),
//! [`wire`] (every method's params and result, the typed calls and notifications),
//! [`daemon`] (a session on the user's `fsbroker daemon`, shared with its proxies),
//! [`policy`] (policy file types, loading and
//! validation), [`error`] (the one error type and its table of wire codes), [`consent`] (the
//! [`consent::ConsentProvider`] trait and its providers), [`path`] (the request-path grammar,
//! the only string-to-path parser; consent requests carry its paths), and the faces behind
//! features above. The crate root re-exports what else a host touches: [`Access`], [`Root`]
//! and [`Roots`], [`AuditLog`], [`Method`] (the methods, named once: wire name, whether a concurrent host
//! keeps it in order, whether the broker answers it),
//! [`serve()`] (the stdio loop of `fsbroker serve`, over any pair of streams) and
//! [`watch_policy`] (reloads on SIGHUP and on a change of the policy file).
//!
//! Private to the crate, from the bottom up:
//!
//! - `error`, `lines` (queues of lines bounded in bytes), `framing` (bounded line reading),
//!   `access` (read or write, and server matching), `deadline`, `method`, `path`, `jsonrpc` (wire
//!   types and decoding; no I/O), `atomic` (atomic replacement of a file: temporary, fsync,
//!   rename, fsync directory), `locks` (in-process per-path locks for writers, taken in turn,
//!   and the bounded wait for them and for advisory locks), `turn` (the order of a session's
//!   requests: changes alone and in order): the leaves.
//! - `policy`, `limits` (rate limits, governor), `audit` (the JSON-lines audit log),
//!   `consent` (grants per session), `root` (roots, their cap-std directory handles and the
//!   symlink-aware resolver; the only ambient authority), `upload` (staged chunked uploads),
//!   `config` (the policy in force, opened, swapped whole by a reload), `session`.
//! - `watch` (the shared inotify watcher, kernel-watch accounting, coalescing and fan-out),
//!   `state` (the broker's shared state, below the operations, which take it handed down),
//!   `ops` (one file per method, each taking its params from `wire`).
//! - `broker`; `order` (the order of a session's requests: changes alone and in order, the
//!   same for every face); then the faces: `serve` (the stdio transport), `reload`, `proxy`,
//!   `fuzzing`, `rmcp_adapter`, `daemon` (one broker for a user on a private Unix socket:
//!   the directory check, the peer check, the secret, the control protocol and its client,
//!   the audit ring, the idle exit, the start in the background);
//!   and on top `cli`, the command line that runs them (the binary is one call to
//!   `cli::main`).
//!
//! `tests/layers.rs` holds this order: every import in `src/` runs downward.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
// Only what this file makes public is public: an item marked `pub` that no embedder can
// reach is refused, so the visibility written on an item is the visibility it has. (Set
// here, not in Cargo.toml's `[lints]`, which would reach the tests' and benches' own crates.)
#![deny(unreachable_pub)]
// Dead code is judged on the build with every feature (CI's clippy): what only a face uses
// (the proxy's queue operations, the rmcp adapter's session naming, the control protocol's
// answers only the command line reads) is not dead, nor its import unused, when that face is
// left out.
#![cfg_attr(
    not(all(
        feature = "cli",
        feature = "proxy",
        feature = "fuzzing",
        feature = "rmcp"
    )),
    allow(dead_code, unused_imports)
)]

// The embedder's surface: these modules are public, and so are the items re-exported below.
pub mod broker;
#[cfg(feature = "cli")]
pub mod cli;
pub mod consent;
pub mod daemon;
pub mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod identity;
pub mod path;
pub mod policy;
pub mod recovery;
#[cfg(feature = "rmcp")]
pub mod rmcp_adapter;
pub mod wire;

// `fsbroker proxy`, reached through `cli`: nothing of it is for an embedder.
#[cfg(feature = "proxy")]
pub(crate) mod proxy;

// The machinery: private to the crate, whatever its items say (`unreachable_pub` keeps their
// visibility honest).
mod access;
mod atomic;
mod attaching;
mod audit;
mod config;
mod deadline;
mod framing;
#[cfg(feature = "cli")]
mod hosts;
mod json;
mod jsonrpc;
mod lane;
mod limits;
mod lines;
mod locks;
mod method;
mod ops;
mod order;
mod reload;
mod root;
mod serve;
mod session;
mod state;
mod turn;
mod upload;
mod visible;
mod watch;
mod watchdog;

pub use access::Access;
pub use audit::{AuditLog, AuditVerdict};
pub use broker::{Broker, BrokerBuilder, Notification, Notifications};
pub use consent::{ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest};
pub use error::{Error, ErrorKind, Reason, UnknownReason};
pub use identity::Identity;
pub use method::Method;
pub use path::MountPath;
pub use policy::Policy;
pub use reload::{ReloadReport, watch_policy};
pub use root::{Root, Roots};
pub use serve::run as serve;

/// The limits that are fixed rather than configured (the configured ones are
/// [`policy::Limits`], the policy's `[limits]` section).
pub mod fixed_limits {
    pub use crate::broker::MAX_SESSIONS;
    pub use crate::consent::grants::MAX_GRANTS;
    pub use crate::ops::MAX_LIST_DEPTH;
}

/// The README's code blocks, compiled by `cargo test` so that they match the API.
#[cfg(all(doctest, feature = "rmcp"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
