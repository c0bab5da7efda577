//! Typed answers for a host: `Broker::call` gives a result or the crate's `Error` with its
//! kind and reason, and a JSON error turns back into the same `Error` (`ErrorKind::from_code`,
//! `Reason: FromStr`, `Error::from_json`).

use crate::common;
use crate::common::Fixture;
use mcp_fsbroker::wire::{ConsentParams, ReadParams};
use mcp_fsbroker::{Error, ErrorKind, Reason};
use serde_json::json;

#[tokio::test]
async fn call_answers_with_typed_errors_and_results() {
    let f = Fixture::new();
    f.file("a.txt", "typed");
    let broker = f.broker();
    let read = ReadParams::new("project/a.txt");
    let e = broker.call("s", read.clone()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert_eq!(e.reason(), Some(Reason::NoConsent));
    assert_eq!(e.path(), Some("project/a.txt"));
    // The same refusal through the JSON face turns back into the same error.
    let answer = common::call(&broker, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(Error::from_json(&answer["error"]), Some(e));

    let granted = broker
        .call("s", ConsentParams::new(["project"]))
        .await
        .unwrap();
    assert!(granted.granted);
    let content = broker.call("s", read).await.unwrap();
    assert_eq!(content.content, "typed");

    let e = broker
        .call("s", ReadParams::new("../outside/secret.txt"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert_eq!(e.reason(), Some(Reason::OutsideRoot));
}

#[test]
fn codes_and_reasons_parse_back() {
    for kind in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_code(kind.wire().code), Some(kind));
    }
    assert_eq!(ErrorKind::from_code(-31999), None);
    for reason in Reason::ALL {
        assert_eq!(reason.as_str().parse::<Reason>(), Ok(reason));
        assert_eq!(reason.to_string(), reason.as_str());
    }
    assert!("no-consent".parse::<Reason>().is_err());
    let e = Error::quota("too big", 16).with_path("m/x");
    assert_eq!(Error::from_json(&e.to_json()), Some(e));
}
