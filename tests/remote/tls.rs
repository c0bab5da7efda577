//! TLS is verified: an HTTPS endpoint whose certificate no platform root vouches for (a
//! self-signed one, made here with `rcgen`) is refused during the handshake, so no request,
//! and no header, ever reaches it; the host gets an error and stderr says why. A certificate
//! error is certain, so it is not tried again.

use crate::common::Fixture;
use crate::remote::{RemoteServer, proxy, send_initialize, timed_exit};
use serde_json::json;
use std::time::Duration;

#[test]
fn a_certificate_no_platform_root_vouches_for_is_refused() {
    let f = Fixture::new();
    let (cert, key) = (f.tmp.path().join("cert.pem"), f.tmp.path().join("key.pem"));
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let mut server = RemoteServer::script(
        "remote_tls.mjs",
        &[cert.to_str().unwrap(), key.to_str().unwrap()],
    );
    let url = format!("https://localhost:{}/mcp", server.port);
    let mut p = proxy(
        &url,
        &f,
        &["--bearer-env", "FSBROKER_TEST_TOKEN"],
        &[("FSBROKER_TEST_TOKEN", "tls-test-token")],
    );
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["data"]["reason"], "unreachable", "{r}");
    let (status, _) = timed_exit(&mut p, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1));
    let err = p.stderr();
    assert!(err.contains("certificate"), "{err}");
    assert!(!err.contains("tls-test-token"), "{err}");
    assert!(
        !err.contains("trying again"),
        "a certificate error was retried: {err}"
    );
    // Everything the server logged, up to its end: no request got past the handshake.
    let seen = server.stop();
    assert!(!seen.iter().any(|e| e["event"] == "http"), "{seen:?}");
}
