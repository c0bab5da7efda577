//! `fsbroker hosts`, `wrap` and `unwrap` through the real binary, against configuration files
//! of every host shaped after each host's documentation (tests/fixtures/hosts/, comments
//! kept where the format allows them), laid out in a temporary home and project directory:
//! what `hosts` reports, the rewritten files byte for byte, the originals given back byte for
//! byte, a second wrap that changes nothing, a dry run that writes nothing, and names that
//! carry escape sequences printed escaped; and the hosts' own command lines (Claude Code,
//! Gemini CLI, Codex CLI, installed from npm) reading what `wrap` and `unwrap` wrote.
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
#[path = "../common/sidecar.rs"]
mod sidecar;

mod layout;

mod dry_run;
mod host_clis;
mod hostile;
mod listing;
mod roundtrip;
mod selection;
