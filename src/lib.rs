//! # mcp-fsbroker
//!
//! Client-brokered filesystem access for the Model Context Protocol: untrusted MCP servers
//! use the user's files only through the client, only inside the directories the user
//! approved, and only after the user consented.
//!
//! The threat: a server sends `files/*` requests with paths of its choosing (CWE-22 path
//! traversal, symlink escapes, special files, resource exhaustion). Every request path is
//! parsed once into a [`path::MountPath`] and reaches the filesystem only through its root's
//! capability handle ([`root::Root`]); see `README.md` for the full threat model.
//!
//! ## Layout
//!
//! - [`error`]: the one error type and its table of wire codes.
//! - [`jsonrpc`]: JSON-RPC wire types and decoding; no I/O.
//! - [`path`]: the request-path grammar; the only string-to-path parser.
//! - [`root`]: roots, their cap-std directory handles, and the symlink-aware resolver; the
//!   only ambient authority.
//! - [`policy`]: policy file types, loading and validation; [`config`]: the policy in force,
//!   opened, swapped whole by a reload ([`reload`]).
//! - [`consent`]: grants per session, the [`consent::ConsentProvider`] trait and providers.
//! - [`limits`]: rate limits (governor) and operation deadlines.
//! - [`audit`]: the JSON-lines audit log.
//! - [`atomic`]: atomic replacement of a file (temporary, fsync, rename, fsync directory).
//! - [`locks`]: in-process per-path locks for writers.
//! - [`upload`]: staged chunked uploads of a session.
//! - [`watch`]: the shared notify watcher, kernel-watch accounting, coalescing and fan-out.
//! - [`Method`]: the methods, named once: wire name, ordered or not, brokered or not.
//! - `ops`: one file per method.
//! - [`broker`]: the [`Broker`] that dispatches messages for server sessions.
//! - `order`: the order of a session's requests (changes alone and in order), the same for
//!   every face.
//! - [`serve`]: the `fsbroker serve` stdio transport; [`framing`]: bounded line reading;
//!   [`lines`]: queues of lines bounded in bytes.
//! - [`proxy`]: the `fsbroker proxy` transport between a host and a server it starts.
//! - `rmcp_adapter` (feature `rmcp`): answers for a host written with the official Rust SDK.
//! - [`cli`]: the command line, shared by the binary and its tests.
//! - [`fuzzing`]: fuzz oracles, replayed by `cargo test` over the committed corpora.
//!
//! ## Embedding
//!
//! See [`Broker`] for a runnable example.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod atomic;
pub mod audit;
pub mod broker;
pub mod cli;
pub mod config;
pub mod consent;
pub mod deadline;
pub mod error;
pub mod framing;
pub mod fuzzing;
pub mod jsonrpc;
pub mod limits;
pub mod lines;
pub mod locks;
mod method;
mod ops;
mod order;
pub mod path;
pub mod policy;
pub mod proxy;
pub mod reload;
#[cfg(feature = "rmcp")]
pub mod rmcp_adapter;
pub mod root;
pub mod serve;
pub mod session;
mod state;
pub mod upload;
pub mod watch;

pub use broker::{Broker, BrokerBuilder, Outbound, OutboundReceiver};
pub use error::{Error, ErrorKind, Reason};
pub use method::Method;

/// Limits of the operations that are fixed rather than configured.
pub mod ops_limits {
    pub use crate::ops::MAX_LIST_DEPTH;
}
pub use access::Access;
pub use policy::Policy;

/// The README's code blocks, compiled by `cargo test` so that they match the API.
#[cfg(all(doctest, feature = "rmcp"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
