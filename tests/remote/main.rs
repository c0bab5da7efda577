//! The `fsbroker proxy --url` face: the proxy in front of a remote Streamable HTTP (or legacy
//! HTTP+SSE) server, mostly the official TypeScript SDK's (`tests/interop/remote_server.mjs`)
//! and a hostile Python one (`tests/interop/remote_evil.py`): sessions, headers, limits,
//! resumption, stalls, TLS, unreachable and unreadable servers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

// Shared helpers, under tests/common/; `dead_code` is allowed on those this face uses only
// part of.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../common/interop.rs"]
mod interop;
#[allow(dead_code)]
#[path = "../common/remote.rs"]
mod remote;
#[allow(dead_code)]
#[path = "../common/sidecar.rs"]
mod sidecar;

mod cancel;
mod consent;
mod descriptors;
mod era;
mod escape;
mod files;
mod headers;
mod legacy;
mod limits;
mod modern;
mod params;
mod resume;
mod server_errors;
mod session;
mod stalls;
mod tls;
mod unreachable;
mod unreadable;
mod unrooted;
