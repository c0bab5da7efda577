//! Revision 2026-07-28 over `proxy --url` with the TypeScript SDK 2.x
//! (`@modelcontextprotocol/server` 2.4.0) as the remote server
//! (`tests/interop/ts2_http_server.mjs`: its modern-only Streamable HTTP handler), and a raw
//! JSON-RPC host on the proxy's stdio. The SDK refuses a `tools/call` whose `Mcp-Param-*`
//! headers do not mirror the arguments its tool declares with `x-mcp-header` (400,
//! `-32020`), so the call goes through only when the proxy adds them; a tool that asks for
//! roots with `input_required` gets the broker's roots.

use crate::common::Fixture;
use crate::remote::{RemoteServer, proxy};
use crate::sidecar::{Sidecar, file_uri};
use serde_json::{Value, json};

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "raw-host", "version": "1"}})
}

fn request(p: &mut Sidecar, id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
    p.wait_id(&json!(id))
}

/// The JSON a tool result's text carries.
fn text_json(r: &Value) -> Value {
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no tool result: {r}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {r}"))
}

/// The proxy in a modern session with the SDK's server, past the host's probe and list.
fn session(server: &RemoteServer, f: &Fixture) -> Sidecar {
    let mut p = proxy(&server.url(), f, &["--era", "modern"], &[]);
    let d = request(&mut p, 1, "server/discover", json!({}));
    assert!(
        d["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{d}"
    );
    let list = request(&mut p, 2, "tools/list", json!({}));
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(tools.iter().any(|t| t["name"] == "region"), "{list}");
    p
}

#[test]
fn the_sdk_server_takes_a_call_whose_x_mcp_header_argument_the_proxy_mirrors() {
    let f = Fixture::new();
    let mut server = RemoteServer::script("ts2_http_server.mjs", &[]);
    let mut p = session(&server, &f);
    let r = request(
        &mut p,
        3,
        "tools/call",
        json!({"name": "region", "arguments": {"region": "us-west1", "query": "SELECT 1"}}),
    );
    assert_eq!(
        text_json(&r),
        json!({"region": "us-west1", "query": "SELECT 1"}),
        "{r}"
    );
    // A value outside plain ASCII goes in the Base64 sentinel, which the SDK decodes.
    let r = request(
        &mut p,
        4,
        "tools/call",
        json!({"name": "region", "arguments": {"region": " Zürich\r\n", "query": "q"}}),
    );
    assert_eq!(
        text_json(&r),
        json!({"region": " Zürich\r\n", "query": "q"}),
        "{r}"
    );
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    let of = |id: i64| {
        http.iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("no POST of {id}: {http:#?}"))["params"]
            .clone()
    };
    assert_eq!(of(3), json!({"mcp-param-region": "us-west1"}));
    assert_eq!(
        of(4),
        json!({"mcp-param-region": "=?base64?IFrDvHJpY2gNCg==?="})
    );
}

#[test]
fn over_url_the_sdk_servers_input_required_roots_come_from_the_broker() {
    let f = Fixture::new();
    let mut server = RemoteServer::script("ts2_http_server.mjs", &[]);
    let mut p = session(&server, &f);
    let r = request(
        &mut p,
        3,
        "tools/call",
        json!({"name": "roots", "arguments": {}}),
    );
    assert_eq!(
        text_json(&r),
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{r}"
    );
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    server.stop();
}
