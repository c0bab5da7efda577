//! The library face: the embedded broker through its public handle (`Broker`, `Policy`,
//! consent providers, `handle_line`), in-process. Each module is one concern that used to be a
//! test binary of its own: confinement, each method, consent, limits, policy, races, watches
//! seen through the handle, the error table and the documents checked against the broker.
//! Everything here runs in the test process with no `fsbroker` child, except where a module
//! says otherwise (the policy examples' `check-policy`, `embed_audit`'s child host, the
//! README's host configurations run by `readme`, and `trailing_slash`'s child runs of this
//! same binary under a seccomp filter).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

// Shared helpers, under tests/common/.
#[path = "../common/mod.rs"]
mod common;

mod adversarial;
mod confinement;
mod confinement_race;
mod confinement_symlinks;
mod confinement_write;
mod consent;
mod consent_probing;
mod consent_refusals;
mod consent_tty;
mod coordination;
mod create_delete;
mod embed_audit;
mod embed_consent;
mod embed_identity;
mod embed_order;
mod embed_policy;
mod embed_sessions;
mod embed_settings;
mod embed_typed;
mod errors;
mod fuzz_corpus;
mod grant_lifetimes;
mod grants_in_walk;
mod limits;
mod list;
mod list_links;
mod mime;
mod monitoring;
mod nested_roots;
mod policy;
mod races;
mod races_grants;
mod rate_defaults;
mod read;
mod readme;
mod recovery;
mod rename;
mod review_regressions;
mod root_moves;
mod roots_consent;
mod seed_examples;
mod smoke;
mod stat_roots;
mod trailing_slash;
mod watch_escape;
mod wire_contract;
mod write;
mod write_concurrency;
mod write_upload;
