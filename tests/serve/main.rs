//! The `fsbroker serve` face: the real binary as a stdio sidecar (`tests/common/sidecar.rs`)
//! and its command line: every method through the process, writes and their faults, watches
//! and their limits, live policy reloads, the audit log, malformed input, crash safety,
//! recovery (`fsbroker history`, `restore` and `undo`, across filesystems, and servers against
//! the store: the `recovery*` modules) and what a new user trips over (`cli_usability`, which
//! also starts a proxy for one case).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

// Shared helpers, under tests/common/; `dead_code` is allowed on those this face uses only
// part of.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../common/proxy_host.rs"]
mod proxy_host;
#[allow(dead_code)]
#[path = "../common/sidecar.rs"]
mod sidecar;

mod audit_chain;
mod audit_truth;
mod basics;
mod cli_usability;
mod crash_safety;
mod etag_exclusive;
mod malformed;
mod policy_paths;
mod recovery;
mod recovery_attacks;
mod recovery_deep;
mod recovery_history;
mod recovery_other_fs;
mod recovery_putback;
mod recovery_reach;
mod recovery_unprivileged;
mod reload;
mod root_paths;
mod setuid;
mod stdout;
mod watch;
mod watch_limits;
mod write;
mod write_faults;
