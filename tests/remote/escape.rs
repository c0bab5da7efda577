//! A remote server is as confined as a local one: its attempts to leave the root through the
//! proxy (`..`, an absolute outside path, a `file://` URI, a sibling whose name extends the
//! root's, a symlink leading out) are refused with `PERMISSION_DENIED` `outside_root`, and the
//! secret outside never travels, neither to the server nor to the host.

use crate::common::{Fixture, SECRET};
use crate::remote::{RemoteServer, ask, connected, error_of, ok};
use serde_json::json;

#[test]
fn escapes_from_a_remote_server_are_refused_and_the_secret_never_travels() {
    let f = Fixture::new();
    f.file("inside.txt", "fine");
    f.symlink(f.outside.join("secret.txt"), "link-out");
    f.symlink("../outside", "dir-out");
    let server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &["--writable"]);
    let outside = f.outside.join("secret.txt");
    let outside = outside.to_str().unwrap();
    let sibling = f.sibling.join("secret.txt");
    let attempts = json!([
        ["files/read", {"path": "project/../outside/secret.txt"}],
        ["files/read", {"path": outside}],
        ["files/read", {"path": format!("file://{outside}")}],
        ["files/read", {"path": sibling.to_str().unwrap()}],
        ["files/read", {"path": "project/link-out"}],
        ["files/read", {"path": "project/dir-out/secret.txt"}],
        ["files/list", {"path": "project/dir-out"}],
        ["files/write", {"path": "project/../outside/secret.txt", "content": "pwned"}],
        ["files/write", {"path": "project/link-out", "content": "pwned"}],
    ]);
    let mut requests =
        vec![json!(["files/consent", {"requestedPaths": ["project"], "access": "write"}])];
    requests.extend(attempts.as_array().unwrap().iter().cloned());
    let escapes = ask(&mut p, 1, json!(requests));
    assert_eq!(ok(&escapes[0])["granted"], true, "{escapes:?}");
    for (i, answer) in escapes[1..].iter().enumerate() {
        let (code, data_code, reason) = error_of(answer);
        assert_eq!(
            (code, data_code.as_str(), reason.as_str()),
            (-31002, "PERMISSION_DENIED", "outside_root"),
            "attempt {i}: {answer}"
        );
    }
    // Consent cannot reach outside either.
    let a = ask(
        &mut p,
        2,
        json!([["files/consent", {"requestedPaths": ["project/link-out", outside]}]]),
    );
    assert_eq!(ok(&a[0])["granted"], false, "{a:?}");
    let inside = ask(
        &mut p,
        3,
        json!([["files/read", {"path": "project/inside.txt"}]]),
    );
    assert_eq!(ok(&inside[0])["content"], "fine");
    let (status, rest) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let everything = format!("{escapes:?}{a:?}{rest:?}{}", p.stderr());
    assert!(!everything.contains(SECRET), "the secret travelled");
    assert!(!p.stderr().contains(SECRET));
    f.assert_canary_intact();
}
