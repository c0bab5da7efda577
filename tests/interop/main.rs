//! The interop face: real MCP SDKs on either side of `fsbroker proxy` (the official Python
//! and TypeScript SDKs, both eras, local and over `--url`; scripts under `tests/interop/`),
//! and the rmcp adapter with real rmcp peers (`rmcp_*`, feature `rmcp`).
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
#[cfg(feature = "rmcp")]
#[path = "../common/rmcp.rs"]
mod rmcp_common;
#[allow(dead_code)]
#[path = "../common/sidecar.rs"]
mod sidecar;

mod elicit;
mod era_python;
mod era_remote_python;
mod era_remote_typescript;
mod era_ts2_host;
mod era_typescript;
mod python;
mod rmcp_host;
mod rmcp_notifications;
mod rmcp_requests;
mod rmcp_sessions;
mod typescript;
