//! The TypeScript SDK 2.x client (`@modelcontextprotocol/client` 2.4.0) as the host in front
//! of `fsbroker proxy`, in the three version negotiation modes it offers: `legacy` (its
//! default: `initialize`, never a probe), `auto` (probes `server/discover` on a short-lived
//! sibling process spawned from the same command, then falls back to `initialize`), pinned
//! to 2026-07-28 (`modern` here: the probe must offer it, no fallback), and with a cached
//! modern verdict (`prior` here: no probe, no `initialize`). Behind the
//! proxy, three servers: the TypeScript SDK 2.x dual-era server (`ts2_server.mjs`), the same
//! server made modern-only (`serveStdio`'s `legacy: 'reject'`), and the 1.x SDK's legacy-only
//! server (`ts_server.mjs`). In every session that runs, the server's roots are the broker's,
//! the host's own roots handler (which answers a root no broker offers) is never called,
//! roots asked together with a form round-trip with the host answering the form, and where
//! the session is legacy `files/*` works. Where a combination cannot run brokered, it fails
//! at connect, with the host never asked for roots.
//!
//! The SDKs (pinned in `tests/interop/package.json`) are installed on first use; see
//! `tests/common/interop.rs`.

use crate::common::Fixture;
use crate::sidecar::file_uri;
use crate::{common, interop};
use serde_json::{Value, json};
use std::ffi::OsString;

/// The server behind the proxy.
#[derive(Clone, Copy)]
enum Server {
    /// `ts2_server.mjs`: `serveStdio`, which lets the opening exchange choose the era.
    DualEra,
    /// `ts2_server.mjs` with `TS2_SERVER_LEGACY=reject`: `initialize` is answered `-32022`.
    ModernOnly,
    /// `ts_server.mjs`: the 1.x SDK's `Server`, which knows nothing of 2026-07-28.
    LegacyOnly,
}

/// The tools the host calls on the 2.x server: roots alone, then roots mixed with a form.
fn roots_and_mixed() -> Value {
    json!([["roots", {}], ["mixed", {}]])
}

/// The tools the host calls on the 1.x server: its SDK's `listRoots()`, then consent and a
/// read through `files/*`.
fn roots_and_files() -> Value {
    json!([
        ["roots", {}],
        ["request", {"method": "files/consent", "params": {"requestedPaths": ["project"], "access": "read"}}],
        ["request", {"method": "files/read", "params": {"path": "project/notes.txt"}}]
    ])
}

/// Runs the 2.x host in `mode` over `fsbroker proxy --root ROOT PROXY_ARGS... -- SERVER`,
/// calling `calls`, with the proxy logging at info; returns the host's report.
fn host(mode: &str, f: &Fixture, server: Server, proxy_args: &[&str], calls: Value) -> Value {
    let mut args: Vec<OsString> = vec!["--root".into(), f.root.clone().into_os_string()];
    args.extend(proxy_args.iter().map(OsString::from));
    host_over(mode, server, args, calls, &[])
}

/// Runs the 2.x host in `mode` over `fsbroker proxy PROXY_ARGS... -- SERVER`, calling
/// `calls`, with the proxy logging at info and `extra` in the environment (such as
/// `HOST_FORM`); returns the host's report.
fn host_over(
    mode: &str,
    server: Server,
    proxy_args: Vec<OsString>,
    calls: Value,
    extra: &[(&str, &str)],
) -> Value {
    let node = interop::node_dir();
    let mut command: Vec<OsString> = vec![common::bin().into(), "proxy".into()];
    command.extend(proxy_args);
    command.extend(["--".into(), "node".into()]);
    let script = match server {
        Server::DualEra | Server::ModernOnly => "ts2_server.mjs",
        Server::LegacyOnly => "ts_server.mjs",
    };
    command.push(node.join(script).into());
    let calls = calls.to_string();
    let legacy = match server {
        Server::ModernOnly => "reject",
        Server::DualEra | Server::LegacyOnly => "serve",
    };
    let mut env = vec![
        ("HOST_CALLS", calls.as_str()),
        ("FSBROKER_LOG", "info"),
        ("TS2_SERVER_LEGACY", legacy),
    ];
    env.extend_from_slice(extra);
    let out = interop::ts2_host(mode, &command, &env);
    // In no combination, run or refused, is the host ever asked for its roots.
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
    out
}

/// The roots the broker answers for the fixture.
fn brokered(f: &Fixture) -> Value {
    json!([{"uri": file_uri(&f.root), "name": "project"}])
}

/// The answer of the host's call to `tool`, failing the test if the call failed.
fn answer<'a>(out: &'a Value, tool: &str) -> &'a Value {
    let calls = out["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no calls in the report: {out}"));
    let call = calls
        .iter()
        .find(|c| c["tool"] == tool)
        .unwrap_or_else(|| panic!("no call of {tool}: {out}"));
    call.get("result")
        .unwrap_or_else(|| panic!("the call of {tool} failed: {out}"))
}

/// The session ran in `era` (`legacy` or `modern`), as the proxy logged it, and the host
/// negotiated the matching protocol version.
fn settled(out: &Value, era: &str) {
    let version = if era == "modern" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(out["protocolVersion"], version, "{out}");
    let log = out["stderr"].as_str().unwrap_or_default();
    assert!(
        log.contains(&format!("session settled on the {era} era")),
        "{log}"
    );
    let other = if era == "modern" { "legacy" } else { "modern" };
    assert!(
        !log.contains(&format!("session settled on the {other} era")),
        "{log}"
    );
}

/// The 2.x server's `roots` got the broker's roots, and `mixed` got them with the host's
/// answer to the form, which the host was asked exactly once.
fn roots_and_form_round_trip(out: &Value, f: &Fixture) {
    assert_eq!(answer(out, "roots"), &brokered(f), "{out}");
    assert_eq!(
        answer(out, "mixed"),
        &json!({"roots": brokered(f), "confirm": {"ok": true}}),
        "{out}"
    );
    let forms = out["hostElicitations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(forms.len(), 1, "{out}");
    assert_eq!(forms[0]["message"], "Go ahead?", "{out}");
}

/// The host could not connect; returns the error it got.
fn refused_at_connect(out: &Value) -> &Value {
    let e = &out["connectError"];
    assert!(e.is_object(), "the host connected: {out}");
    assert!(out.get("calls").is_none(), "{out}");
    e
}

// The dual-era 2.x server.

#[test]
fn the_2x_clients_default_stays_legacy_and_gets_the_brokers_roots() {
    let f = Fixture::new();
    let out = host("legacy", &f, Server::DualEra, &[], roots_and_mixed());
    settled(&out, "legacy");
    assert_eq!(out["serverInfo"]["name"], "ts2-roots-server", "{out}");
    assert_eq!(out["tools"], json!(["roots", "mixed"]), "{out}");
    roots_and_form_round_trip(&out, &f);
}

/// The probe reaches a proxy of its own (the SDK spawns the command twice), which answers it
/// as a legacy-only server would; the session then opens with `initialize`.
#[test]
fn the_probing_2x_client_falls_back_to_legacy_by_default() {
    let f = Fixture::new();
    let out = host("auto", &f, Server::DualEra, &[], roots_and_mixed());
    settled(&out, "legacy");
    assert_eq!(out["tools"], json!(["roots", "mixed"]), "{out}");
    roots_and_form_round_trip(&out, &f);
}

#[test]
fn the_probing_2x_client_goes_modern_with_era_modern_and_the_broker_answers_roots() {
    let f = Fixture::new();
    let out = host(
        "auto",
        &f,
        Server::DualEra,
        &["--era", "modern"],
        roots_and_mixed(),
    );
    settled(&out, "modern");
    assert_eq!(out["tools"], json!(["roots", "mixed"]), "{out}");
    roots_and_form_round_trip(&out, &f);
    let log = out["stderr"].as_str().unwrap_or_default();
    assert!(
        log.contains("answered the server's roots input request from the broker"),
        "{log}"
    );
}

#[test]
fn the_pinned_modern_2x_client_gets_the_brokers_roots_with_era_modern() {
    let f = Fixture::new();
    let out = host(
        "modern",
        &f,
        Server::DualEra,
        &["--era", "modern"],
        roots_and_mixed(),
    );
    settled(&out, "modern");
    roots_and_form_round_trip(&out, &f);
}

/// A host that cached a modern verdict sends no probe and no `initialize`: its first request
/// carries the 2026-07-28 `_meta`. `--era modern` serves it brokered.
#[test]
fn a_2x_client_with_a_cached_modern_verdict_gets_the_brokers_roots_with_era_modern() {
    let f = Fixture::new();
    let out = host(
        "prior",
        &f,
        Server::DualEra,
        &["--era", "modern"],
        roots_and_mixed(),
    );
    settled(&out, "modern");
    roots_and_form_round_trip(&out, &f);
}

/// In `--era auto` too: a host whose first request is already in the 2026-07-28 envelope
/// has settled on that revision and falls back to nothing, so it gets the modern session,
/// the server's roots brokered.
#[test]
fn a_2x_client_with_a_cached_modern_verdict_gets_the_brokers_roots_in_era_auto() {
    let f = Fixture::new();
    let out = host("prior", &f, Server::DualEra, &[], roots_and_mixed());
    settled(&out, "modern");
    roots_and_form_round_trip(&out, &f);
}

/// `--era auto` keeps a dual-era server legacy, where `files/*` exists, for a host that can
/// fall back: it answers the probe `-32022` with the legacy versions. A client pinned to
/// 2026-07-28 probes alike, so it refuses to connect, and what it says names `--era modern`.
#[test]
fn the_pinned_modern_2x_client_cannot_connect_in_era_auto_and_is_told_era_modern() {
    let f = Fixture::new();
    let out = host("modern", &f, Server::DualEra, &[], roots_and_mixed());
    let e = refused_at_connect(&out);
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("--era modern"),
        "{out}"
    );
}

/// `--era modern` never downgrades: the default client's `initialize` is refused.
#[test]
fn the_2x_clients_default_is_refused_in_era_modern() {
    let f = Fixture::new();
    let out = host(
        "legacy",
        &f,
        Server::DualEra,
        &["--era", "modern"],
        roots_and_mixed(),
    );
    let e = refused_at_connect(&out);
    assert_eq!(e["code"], -32022, "{out}");
    assert_eq!(e["data"]["supported"], json!(["2026-07-28"]), "{out}");
}

// The legacy-only 1.x server: `files/*` through the broker.

fn legacy_only_with_files(mode: &str) {
    let f = Fixture::new();
    f.file("notes.txt", "brokered text\n");
    let out = host(
        mode,
        &f,
        Server::LegacyOnly,
        &["--consent", "auto"],
        roots_and_files(),
    );
    settled(&out, "legacy");
    assert_eq!(out["serverInfo"]["name"], "ts-files-server", "{out}");
    assert_eq!(
        answer(&out, "roots"),
        &json!({"result": {"roots": brokered(&f)}}),
        "{out}"
    );
    let calls = out["calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), 3, "{out}");
    assert_eq!(calls[1]["result"]["result"]["granted"], true, "{out}");
    let read = &calls[2]["result"]["result"];
    assert_eq!(read["content"], "brokered text\n", "{out}");
    assert_eq!(read["eof"], true, "{out}");
}

#[test]
fn the_2x_clients_default_with_a_legacy_only_server_gets_roots_and_files() {
    legacy_only_with_files("legacy");
}

#[test]
fn the_probing_2x_client_with_a_legacy_only_server_gets_roots_and_files() {
    legacy_only_with_files("auto");
}

/// Consent by elicitation in a legacy session: the proxy asks the 2.x host with a form naming
/// the server and the path, the host's answer grants read, and the read goes through.
fn consent_through_the_2x_host(mode: &str) {
    let f = Fixture::new();
    f.file("notes.txt", "brokered text\n");
    let args = vec![
        "--root".into(),
        f.root.clone().into_os_string(),
        "--consent".into(),
        "elicit".into(),
    ];
    let calls = json!([
        ["request", {"method": "files/consent", "params": {"requestedPaths": ["project/notes.txt"], "access": "read", "message": "to read the notes"}}],
        ["request", {"method": "files/read", "params": {"path": "project/notes.txt"}}]
    ]);
    let form = [("HOST_FORM", r#"{"decision": "read"}"#)];
    let out = host_over(mode, Server::LegacyOnly, args, calls, &form);
    settled(&out, "legacy");
    let calls = out["calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), 2, "{out}");
    let granted = &calls[0]["result"]["result"];
    assert_eq!(granted["granted"], true, "{out}");
    assert_eq!(granted["access"], "read", "{out}");
    assert_eq!(
        calls[1]["result"]["result"]["content"], "brokered text\n",
        "{out}"
    );
    let forms = out["hostElicitations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(forms.len(), 1, "{out}");
    let message = forms[0]["message"].as_str().unwrap_or_default();
    for part in ["ts-files-server", "project/notes.txt", "to read the notes"] {
        assert!(message.contains(part), "{part} missing from {message}");
    }
}

#[test]
fn the_2x_clients_default_answers_the_consent_form_and_the_read_goes_through() {
    consent_through_the_2x_host("legacy");
}

#[test]
fn the_probing_2x_client_answers_the_consent_form_and_the_read_goes_through() {
    consent_through_the_2x_host("auto");
}

/// `--era modern` in front of a server that speaks no 2026-07-28: the probing client's
/// fallback `initialize` is refused by the proxy (never a downgrade), and the pinned client's
/// probe is refused by the server; neither session runs.
#[test]
fn with_era_modern_a_legacy_only_server_is_never_reached_unbrokered() {
    let f = Fixture::new();
    let out = host(
        "auto",
        &f,
        Server::LegacyOnly,
        &["--era", "modern"],
        roots_and_files(),
    );
    let e = refused_at_connect(&out);
    assert_eq!(e["code"], -32022, "{out}");
    assert_eq!(e["data"]["supported"], json!(["2026-07-28"]), "{out}");
    let out = host(
        "modern",
        &f,
        Server::LegacyOnly,
        &["--era", "modern"],
        roots_and_files(),
    );
    assert_eq!(
        refused_at_connect(&out)["code"],
        "ERA_NEGOTIATION_FAILED",
        "{out}"
    );
}

// The modern-only 2.x server.

#[test]
fn the_probing_2x_client_with_a_modern_only_server_gets_the_brokers_roots_with_era_modern() {
    let f = Fixture::new();
    let out = host(
        "auto",
        &f,
        Server::ModernOnly,
        &["--era", "modern"],
        roots_and_mixed(),
    );
    settled(&out, "modern");
    roots_and_form_round_trip(&out, &f);
}

#[test]
fn the_pinned_modern_2x_client_with_a_modern_only_server_gets_the_brokers_roots() {
    let f = Fixture::new();
    let out = host(
        "modern",
        &f,
        Server::ModernOnly,
        &["--era", "modern"],
        roots_and_mixed(),
    );
    settled(&out, "modern");
    roots_and_form_round_trip(&out, &f);
}

#[test]
fn era_legacy_with_a_modern_only_server_fails_with_a_clear_message() {
    let f = Fixture::new();
    let out = host(
        "legacy",
        &f,
        Server::ModernOnly,
        &["--era", "legacy"],
        roots_and_mixed(),
    );
    refused_at_connect(&out);
    let log = out["stderr"].as_str().unwrap_or_default();
    assert!(
        log.contains("the server speaks only protocol revision 2026-07-28")
            && log.contains("--era legacy"),
        "{log}"
    );
}

/// Not the session issue 18 asks for (`--era auto` is to go modern with a modern-only
/// server), but never an unbrokered one: the 2.x client probes on a sibling process, whose
/// proxy answers the probe as a legacy-only server would (it cannot know the server is
/// modern-only before an `initialize`), and after the server refuses the fallback
/// `initialize` with `-32022` the client gives up rather than probing again (the Python SDK
/// probes again, on the same connection, and goes modern). `--era modern` serves this host.
#[test]
fn the_probing_2x_client_with_a_modern_only_server_in_era_auto_fails_closed() {
    let f = Fixture::new();
    let out = host("auto", &f, Server::ModernOnly, &[], roots_and_mixed());
    let e = refused_at_connect(&out);
    assert_eq!(e["code"], -32022, "{out}");
    assert_eq!(e["data"]["supported"], json!(["2026-07-28"]), "{out}");
    let log = out["stderr"].as_str().unwrap_or_default();
    assert!(log.contains("the server is modern-only"), "{log}");
}

/// The control: the same probing client launching the dual-era server directly settles on
/// 2026-07-28 and its own roots handler answers the server's roots question, the bypass the
/// proxy closes; the pinned client does the same.
#[test]
fn without_the_proxy_the_2x_clients_own_roots_reach_the_server() {
    let script = interop::node_dir().join("ts2_server.mjs");
    let command: Vec<OsString> = vec!["node".into(), script.into()];
    for mode in ["auto", "modern"] {
        let out = interop::ts2_host(mode, &command, &[("HOST_CALLS", r#"[["roots", {}]]"#)]);
        assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
        assert_eq!(
            answer(&out, "roots"),
            &json!([{"uri": "file:///host-own-root", "name": "host-own"}]),
            "{out}"
        );
        assert_eq!(out["hostRootsCalls"], 1, "{out}");
    }
}

/// A policy whose only root is for the server named `ts2-roots-server`, for the tests of the
/// session's name; returns its path (inside the fixture's temporary directory).
fn named_policy(f: &Fixture) -> OsString {
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"read\"\nservers = [\"ts2-roots-server\"]\n\n[audit]\nenabled = false\n",
        f.root
    );
    let path = f.tmp.path().join("named.toml");
    std::fs::write(&path, text).unwrap();
    path.into_os_string()
}

/// A legacy session is named by the server's `serverInfo.name` from its answer to
/// `initialize`, so a root the policy gives that server by name is among its roots.
#[test]
fn a_legacy_session_through_the_2x_client_is_named_by_the_server() {
    let f = Fixture::new();
    let args = vec!["--policy".into(), named_policy(&f)];
    let out = host_over("auto", Server::DualEra, args, json!([["roots", {}]]), &[]);
    settled(&out, "legacy");
    assert_eq!(answer(&out, "roots"), &brokered(&f), "{out}");
}

/// A modern session is named by the server too: a 2026-07-28 server names itself in every
/// result's `_meta`, and the 2.x client never sends its probe on the proxied connection
/// (it probes a copy of the command, or not at all when pinned), so the name comes from the
/// first answer that carries it, before any roots are answered.
#[test]
fn a_modern_session_through_the_2x_client_is_named_by_the_server() {
    let f = Fixture::new();
    for mode in ["auto", "modern"] {
        let args = vec![
            "--policy".into(),
            named_policy(&f),
            "--era".into(),
            "modern".into(),
        ];
        let out = host_over(mode, Server::DualEra, args, json!([["roots", {}]]), &[]);
        settled(&out, "modern");
        assert_eq!(answer(&out, "roots"), &brokered(&f), "{mode}: {out}");
    }
}
