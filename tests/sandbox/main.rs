//! The `fsbroker proxy --sandbox` face: a local server under the kernel's Landlock rules and
//! the sandbox helper, and the ways out of it that reviews found, within one start and across
//! starts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

// Shared helpers, under tests/common/; `dead_code` is allowed on those this face uses only
// part of.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../common/interop.rs"]
mod interop;
#[path = "../common/sandboxed.rs"]
mod sandboxed;
#[allow(dead_code)]
#[path = "../common/sidecar.rs"]
mod sidecar;

mod basics;
mod caps;
mod escapes;
mod private;
mod starts;
