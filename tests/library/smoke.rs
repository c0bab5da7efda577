//! The smallest end-to-end check through the library handle.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn consent_then_read() {
    let f = Fixture::new();
    f.file("hello.txt", "hello");
    let b = f.broker();
    let r = call(&b, "s", "files/read", json!({"path": "project/hello.txt"})).await;
    assert_eq!(err(&r).2, "no_consent");
    consent_all(&b, "s").await;
    let r = call(&b, "s", "files/read", json!({"path": "project/hello.txt"})).await;
    assert_eq!(ok(&r)["content"], "hello");
}
