//! The `fsbroker proxy` face with local servers: the real binary between this test (the host)
//! and a scripted stdio server (`tests/proxy/scripted_server.py`, `tests/proxy/era_server.py`):
//! relaying, batches and bounds, consent through the host (elicitation, modified and
//! sanitised prompts), the protocol's eras, hostile hosts and servers, teardown, and the
//! ordering of a change and the read after it. `cancel_brokered` also drives an SDK peer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

// Shared helpers, under tests/common/; `dead_code` is allowed on those this face uses only
// part of.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../common/interop.rs"]
mod interop;
#[path = "../common/proxy_host.rs"]
mod proxy_host;
#[allow(dead_code)]
#[path = "../common/remote.rs"]
mod remote;
#[allow(dead_code)]
#[path = "../common/sidecar.rs"]
mod sidecar;

mod basics;
mod batch_bounds;
mod batch_keys;
mod batches_removed;
mod bounds;
mod cancel_brokered;
mod consent_form;
mod consent_invisible;
mod consent_modify;
mod elicit;
mod era;
mod era_auto;
mod hostile_host;
mod hostile_server;
mod live;
mod ordering;
mod reserved_ids;
mod teardown;
mod unrooted;
