//! `--era auto` and a host that insists on revision 2026-07-28. A host that sends its
//! requests in that revision straight away (a pinned version that does not probe, a
//! remembered verdict) gets a modern session with the broker's roots; a probe, which cannot
//! say whether the host would fall back, is answered `-32022` with the legacy versions, so a
//! host that can fall back does, and one that cannot is told `--era modern`. Through the
//! binary, with `tests/proxy/era_server.py` as the server and this test as the host.

use crate::common::Fixture;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;

/// A 2026-07-28 request's `_meta`.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// `fsbroker proxy --root ROOT OPTS... -- python3 era_server.py` (a dual-era server).
fn proxy(f: &Fixture, opts: &[&str]) -> Sidecar {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/era_server.py");
    let mut args: Vec<OsString> = vec!["proxy".into(), "--root".into(), f.root.clone().into()];
    args.extend(opts.iter().map(OsString::from));
    args.extend(["--".into(), "python3".into(), server.into()]);
    Sidecar::spawn_env(&args, &[("ERA", "dual"), ("FSBROKER_LOG", "info")])
}

/// The `roots` tool called in the 2026-07-28 envelope, as a host that settled on that
/// revision without probing sends its first request.
fn modern_roots(p: &mut Sidecar, id: i64) -> Value {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"roots","arguments":{},"_meta": modern_meta()}}));
    p.wait_id(&json!(id))
}

/// The refusal that keeps a host on the legacy era: `-32022`, the legacy versions, and a
/// message naming `--era modern`.
fn assert_names_era_modern(r: &Value) {
    assert_eq!(r["error"]["code"], -32022, "{r}");
    let supported = r["error"]["data"]["supported"].as_array().unwrap();
    assert!(supported.contains(&json!("2025-11-25")), "{r}");
    assert!(!supported.contains(&json!("2026-07-28")), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--era modern"), "{r}");
}

/// A host whose first request is already a 2026-07-28 one gets a modern session in `auto`,
/// its server's roots answered by the broker; `--era legacy` refuses it, naming `--era
/// modern`.
#[test]
fn auto_gives_a_host_that_sends_modern_requests_a_brokered_modern_session() {
    let f = Fixture::new();
    let mut p = proxy(&f, &[]);
    let r = modern_roots(&mut p, 1);
    assert_eq!(
        r["result"]["structuredContent"]["roots"][0]["name"], "project",
        "{r}"
    );
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    assert!(p.stderr().contains("modern era"), "{}", p.stderr());

    let mut p = proxy(&f, &["--era", "legacy"]);
    assert_names_era_modern(&modern_roots(&mut p, 1));
    p.finish();
}

/// A probe is answered by the proxy in `auto`: `-32022` with the legacy versions, which a
/// host that can fall back takes to send `initialize` (and the session is legacy, files
/// brokered), and whose message tells a host pinned to 2026-07-28 to use `--era modern`.
#[test]
fn auto_answers_a_probe_with_the_legacy_versions_and_names_era_modern() {
    let f = Fixture::new();
    let mut p = proxy(&f, &[]);
    p.send(
        &json!({"jsonrpc":"2.0","id":"probe","method":"server/discover",
        "params":{"_meta": modern_meta()}}),
    );
    assert_names_era_modern(&p.wait_id(&json!("probe")));
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"t","version":"1"}}}),
    );
    let init = p.wait_id(&json!("init"));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
}
