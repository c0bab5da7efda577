//! The era rule over `proxy --url`, exactly as for a local server: the host's
//! `server/discover` probe is answered by the proxy and never reaches the remote server (which
//! would otherwise settle the session on 2026-07-28 with no capability injected), so the host
//! falls back to `initialize`. The remote server is the TypeScript SDK's Streamable HTTP
//! server of the other remote tests.

use crate::common::Fixture;
use crate::remote::{RemoteServer, ask, initialize, proxy};
use serde_json::json;

#[test]
fn the_probe_is_answered_by_the_proxy_and_the_session_is_legacy_and_brokered() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = proxy(&server.url(), &f, &[], &[]);
    p.send(
        &json!({"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities":{}}}}),
    );
    let r = p.wait_id(&json!("probe"));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    initialize(&mut p, json!({}));
    let answers = ask(&mut p, 1, json!([["roots/list", {}]]));
    assert_eq!(
        answers[0]["result"]["roots"][0]["name"], "project",
        "{answers:?}"
    );
    p.finish();
    server.stop();
    assert!(server.posts("server/discover").is_empty());
}
