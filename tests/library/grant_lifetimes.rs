//! How long a grant holds, as the user chose it: for the next request only, for the
//! session, or for a time. Expiry is a property of the grant, checked at each use: the
//! runtime's clock is moved on (tokio's paused clock), nothing sleeps.

use crate::common::Fixture;
use mcp_fsbroker::consent::{
    BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest, Lifetime,
    PathChoice,
};
use mcp_fsbroker::policy::{Policy, RootEntry};
use mcp_fsbroker::wire::{ConsentParams, ReadParams};
use mcp_fsbroker::{Access, Broker, ErrorKind, Reason};
use std::sync::Arc;
use std::time::Duration;

/// Approves every path asked, whole, read-only, for `lifetime`.
struct For(Lifetime);

impl ConsentProvider for For {
    fn decide<'a>(&'a self, _: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async { ConsentDecision::deny() })
    }

    fn decide_each<'a>(&'a self, req: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        let lifetime = self.0;
        Box::pin(async move {
            req.paths
                .iter()
                .map(|p| PathChoice::whole(p.clone(), Access::Read).lasting(lifetime))
                .collect()
        })
    }
}

/// A broker over a root holding `a.txt`, asking `For(lifetime)`, whose session `s` was
/// granted the root.
async fn granted(f: &Fixture, lifetime: Lifetime) -> Broker {
    f.file("a.txt", "alpha");
    let policy = Policy::new().root(RootEntry::new("project", &f.root));
    let (broker, _outbound) = Broker::builder(policy)
        .consent_provider(Arc::new(For(lifetime)) as Arc<dyn ConsentProvider>)
        .build()
        .unwrap();
    let answer = broker
        .call("s", ConsentParams::new(["project"]))
        .await
        .unwrap();
    assert_eq!(answer.approved_paths, ["project"], "{answer:?}");
    broker
}

async fn read(broker: &Broker) -> Result<String, mcp_fsbroker::Error> {
    broker
        .call("s", ReadParams::new("project/a.txt"))
        .await
        .map(|r| r.content)
}

fn assert_no_consent(r: Result<String, mcp_fsbroker::Error>) {
    let e = r.unwrap_err();
    assert_eq!(
        (e.kind(), e.reason()),
        (ErrorKind::PermissionDenied, Some(Reason::NoConsent)),
        "{e}"
    );
}

/// Moves the runtime's clock on by `by`, as if that long had passed.
async fn pass(by: Duration) {
    tokio::time::pause();
    tokio::time::advance(by).await;
    tokio::time::resume();
}

#[tokio::test]
async fn a_grant_for_an_hour_holds_for_the_hour_and_is_refused_after() {
    let f = Fixture::new();
    let broker = granted(&f, Lifetime::For(Duration::from_secs(3600))).await;
    assert_eq!(read(&broker).await.unwrap(), "alpha");
    let shown = broker.snapshot();
    let expires = shown[0].grants[0]
        .expires
        .expect("a timed grant says when it ends");
    let left = expires
        .duration_since(std::time::SystemTime::now())
        .unwrap();
    assert!(
        left <= Duration::from_secs(3600) && left > Duration::from_secs(3000),
        "{left:?}"
    );
    pass(Duration::from_secs(3590)).await;
    assert_eq!(
        read(&broker).await.unwrap(),
        "alpha",
        "ended before its hour"
    );
    pass(Duration::from_secs(11)).await;
    assert_no_consent(read(&broker).await);
    assert!(
        broker.snapshot()[0].grants.is_empty(),
        "an expired grant is still listed"
    );
}

#[tokio::test]
async fn a_grant_for_the_session_outlasts_an_hour() {
    let f = Fixture::new();
    let broker = granted(&f, Lifetime::Session).await;
    pass(Duration::from_secs(3601)).await;
    assert_eq!(read(&broker).await.unwrap(), "alpha");
    assert_eq!(read(&broker).await.unwrap(), "alpha");
}

#[tokio::test]
async fn a_grant_for_once_holds_for_the_next_request_only() {
    let f = Fixture::new();
    let broker = granted(&f, Lifetime::Once).await;
    // A ping uses no grant: it does not use the one for the next request up.
    let pong = broker.call("s", mcp_fsbroker::wire::Ping::default()).await;
    assert!(pong.is_ok(), "{pong:?}");
    assert!(broker.snapshot()[0].grants[0].once);
    assert_eq!(read(&broker).await.unwrap(), "alpha");
    assert_no_consent(read(&broker).await);
    assert!(broker.snapshot()[0].grants.is_empty());
}

#[tokio::test]
async fn asked_again_after_once_the_new_answer_holds_again_once() {
    let f = Fixture::new();
    let broker = granted(&f, Lifetime::Once).await;
    assert_eq!(read(&broker).await.unwrap(), "alpha");
    assert_no_consent(read(&broker).await);
    let again = broker
        .call("s", ConsentParams::new(["project"]))
        .await
        .unwrap();
    assert_eq!(again.approved_paths, ["project"]);
    assert_eq!(read(&broker).await.unwrap(), "alpha");
    assert_no_consent(read(&broker).await);
}
