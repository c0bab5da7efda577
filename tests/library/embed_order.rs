//! The broker orders a host's concurrent calls itself: a host that starts a `files/consent`
//! and, without awaiting it, the read that depends on it, gets the read answered after the
//! consent, whatever face (or none) sent them. The consent provider here holds its answer
//! until the read has been started, so a read that did not wait would find no grant: nothing
//! waits for time to pass.

use crate::common::Fixture;
use mcp_fsbroker::consent::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest};
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Approves everything, once `release` has been sent.
struct Held {
    release: Mutex<Option<oneshot::Receiver<()>>>,
}

impl ConsentProvider for Held {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        let rx = self.release.lock().unwrap().take();
        Box::pin(async move {
            if let Some(rx) = rx {
                let _ = rx.await;
            }
            ConsentDecision::approve_all(request)
        })
    }
}

/// A broker over a root holding `notes.txt`, whose consent provider approves once the
/// returned sender is used.
fn held_broker(f: &Fixture) -> (Broker, oneshot::Sender<()>) {
    f.file("notes.txt", "hello");
    let (tx, rx) = oneshot::channel();
    let policy = Policy::parse(&f.policy_text("read", ""), "test").unwrap();
    let (broker, _outbound) = Broker::builder(policy)
        .consent_provider(Arc::new(Held {
            release: Mutex::new(Some(rx)),
        }))
        .build()
        .unwrap();
    (broker, tx)
}

/// A `files/consent` for the root, and the read that depends on it.
fn consent_then_read() -> (serde_json::Value, serde_json::Value) {
    let consent = json!({"jsonrpc": "2.0", "id": 1, "method": "files/consent",
        "params": {"requestedPaths": ["project"]}});
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "files/read",
        "params": {"path": "project/notes.txt"}});
    (consent, read)
}

#[tokio::test]
async fn a_read_started_after_a_consent_waits_for_it() {
    let f = Fixture::new();
    let (broker, tx) = held_broker(&f);
    let (consent, read) = consent_then_read();
    // `join!` polls in order: the consent starts (and waits for its provider), then the read
    // starts, then the provider is let go.
    let (consented, read, ()) = tokio::join!(
        broker.handle_message("host-task", consent),
        broker.handle_message("host-task", read),
        async {
            let _ = tx.send(());
        }
    );
    let consented = consented.unwrap();
    assert_eq!(consented["result"]["granted"], true, "{consented}");
    let read = read.unwrap();
    assert_eq!(read["result"]["content"], "hello", "{read}");
}

/// A message takes its place in the session's order when it is handed over, not when its
/// future is first polled: a host that hands over a consent, then a read, and polls the
/// read first (as a host that spawns a task per message may) still gets the read answered
/// after the consent. The same for typed calls.
#[tokio::test]
async fn the_order_is_the_order_of_handing_over_not_of_polling() {
    let f = Fixture::new();
    let (broker, tx) = held_broker(&f);
    let (consent, read) = consent_then_read();
    let consented = broker.handle_message("host", consent);
    let read = broker.handle_message("host", read);
    let typed = broker.call(
        "host",
        mcp_fsbroker::wire::ReadParams::new("project/notes.txt"),
    );
    // `join!` polls in the order written: the read and the typed read first, then the
    // consent, then the provider is let go.
    let (read, typed, consented, ()) = tokio::join!(read, typed, consented, async {
        let _ = tx.send(());
    });
    let consented = consented.unwrap();
    assert_eq!(consented["result"]["granted"], true, "{consented}");
    let read = read.unwrap();
    assert_eq!(read["result"]["content"], "hello", "{read}");
    assert_eq!(typed.unwrap().content, "hello");
}
