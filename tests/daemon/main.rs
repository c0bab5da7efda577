//! The `fsbroker daemon` face, through real processes: where its socket lives and what
//! guards it (the private directory, one daemon per socket, a stale socket cleaned up, the
//! peer's uid, the secret), the control verbs `status`, `revoke`, `log` and `reload`, the
//! recovery store's ops `history`, `restore` and `undo`, a clean stop, the starts in the
//! background (`--idle-exit`, `--ensure`, `--init`), and the sessions `serve --daemon` and
//! `proxy --daemon` attach.
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

mod abuse;
mod access;
mod attach;
mod background;
#[allow(dead_code)] // `send` serves the console tests, which share this file.
mod control;
mod impostor;
mod init;
mod intruder;
mod library;
mod place;
mod printing;
mod questions;
mod recovery;
mod sandboxed;
mod start;
mod stream;
mod verbs;
