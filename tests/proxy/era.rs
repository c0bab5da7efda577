//! `fsbroker proxy` and the protocol's eras (revision 2026-07-28 against 2025-11-25 and
//! earlier), through the real binary with a scripted server (`tests/proxy/era_server.py`)
//! and this test as the host: the host's `server/discover` probe is answered by the proxy,
//! `--era` is honoured (`era_auto.rs` has what `auto` does with a host that sends modern
//! requests first), and a server's
//! `roots/list` input request is answered by the broker and never reaches the host.

use crate::common::Fixture;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";

fn era_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/era_server.py")
}

/// `fsbroker proxy --root ROOT OPTS... -- python3 era_server.py` with `ERA=era` and the
/// server's received lines logged to the returned file.
fn proxy(f: &Fixture, era: &str, opts: &[&str]) -> (Sidecar, PathBuf) {
    let log = f.outside.join(format!("recv-{era}.log"));
    let mut args: Vec<OsString> = vec!["proxy".into(), "--root".into(), f.root.clone().into()];
    args.extend(opts.iter().map(OsString::from));
    args.extend(["--".into(), "python3".into(), era_server().into()]);
    let p = Sidecar::spawn_env(
        &args,
        &[
            ("ERA", era),
            ("RECV_LOG", log.to_str().unwrap()),
            ("FSBROKER_LOG", "info"),
        ],
    );
    (p, log)
}

fn received(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// A 2026-07-28 request's `_meta`, with the host's own roots capability.
fn modern_meta() -> Value {
    json!({META_VERSION: "2026-07-28", META_CAPS: {"roots": {}, "sampling": {}}})
}

fn discover(p: &mut Sidecar, id: &str) -> Value {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"server/discover",
        "params":{"_meta": modern_meta()}}));
    p.wait_id(&json!(id))
}

fn call(p: &mut Sidecar, id: i64, tool: &str, args: Value) -> Value {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":tool,"arguments":args,"_meta": modern_meta()}}));
    p.wait_id(&json!(id))
}

fn initialize(p: &mut Sidecar) -> Value {
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{"roots":{}},
        "clientInfo":{"name":"t","version":"1"}}}),
    );
    p.wait_id(&json!("init"))
}

/// Everything the host received after `r`, to check nothing mentions `roots/list`.
fn rest(p: &mut Sidecar) -> Vec<String> {
    let (_, lines) = p.finish();
    lines
        .into_iter()
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .collect()
}

#[test]
fn auto_answers_the_discover_probe_itself_so_the_host_falls_back_to_initialize() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    let r = discover(&mut p, "probe");
    assert_eq!(r["error"]["code"], -32022, "{r}");
    let init = initialize(&mut p);
    assert_eq!(init["result"]["serverInfo"]["name"], "era-dual", "{init}");
    let (status, _) = p.finish();
    assert!(status.success());
    assert!(
        !received(&log).contains("server/discover"),
        "the probe reached the server: {}",
        received(&log)
    );
    assert!(p.stderr().contains("legacy"), "{}", p.stderr());
}

#[test]
fn a_modern_request_before_initialize_is_refused_in_legacy() {
    let f = Fixture::new();
    {
        let (mut p, log) = proxy(&f, "dual", &["--era", "legacy"]);
        let r = call(&mut p, 1, "meta", json!({}));
        assert_eq!(r["error"]["code"], -32022, "{r}");
        let supported = r["error"]["data"]["supported"].as_array().unwrap();
        assert!(supported.contains(&json!("2025-11-25")), "{r}");
        assert!(!supported.contains(&json!("2026-07-28")), "{r}");
        p.finish();
        assert!(!received(&log).contains("tools/call"), "{}", received(&log));
    }
}

#[test]
fn modern_roots_input_requests_are_answered_by_the_broker_over_rounds() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern"]);
    let d = discover(&mut p, "probe");
    assert_eq!(d["result"]["supportedVersions"][0], "2026-07-28", "{d}");
    let r = call(&mut p, 7, "roots", json!({"rounds": 3}));
    let got = &r["result"]["structuredContent"];
    assert_eq!(got["rounds"], 3, "{r}");
    assert_eq!(
        got["states"],
        json!(["round-1", "round-2", "round-3"]),
        "{r}"
    );
    let roots = got["roots"].as_array().unwrap();
    assert_eq!(roots.len(), 1, "{r}");
    assert_eq!(roots[0]["name"], "project");
    assert_eq!(
        roots[0]["uri"],
        format!("file://{}", f.root.canonicalize().unwrap().display())
    );
    // The broker's capabilities are declared in every modern request.
    let caps = &got["meta"][META_CAPS];
    assert_eq!(caps["roots"], json!({}), "{r}");
    assert!(caps["extensions"].is_object(), "{r}");
    assert_eq!(caps["sampling"], json!({}), "the host's own are kept: {r}");
    let m = call(&mut p, 8, "meta", json!({}));
    assert!(m["result"]["structuredContent"]["meta"][META_CAPS]["extensions"].is_object());
    let rest = rest(&mut p);
    assert!(rest.iter().all(|l| !l.contains("roots/list")), "{rest:?}");
    // Three retries reached the server, none under the host's id.
    assert_eq!(received(&log).matches("inputResponses").count(), 3);
    assert!(p.stderr().contains("modern"), "{}", p.stderr());
    // The session is named by the server/discover answer, as by initialize's: the audit
    // lines of the broker's roots say so.
    assert!(
        p.stderr()
            .contains(r#""method":"roots/list","outcome":"ok","path":null,"server":"era-dual""#),
        "{}",
        p.stderr()
    );
}

#[test]
fn files_input_requests_are_refused() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 2, "files", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    assert!(!r.to_string().contains("files/read\""), "{r}");
    let rest = rest(&mut p);
    assert!(rest.iter().all(|l| !l.contains("roots/list")), "{rest:?}");
}

#[test]
fn roots_mixed_with_elicitation_round_trip_and_the_handle_is_single_use() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 1, "mixed", json!({}));
    let result = &r["result"];
    assert_eq!(result["resultType"], "input_required", "{r}");
    let requests = result["inputRequests"].as_object().unwrap();
    // The host sees the elicitation only, and a state of the proxy's, not the server's.
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["e"], "{r}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state, "mixed-state");
    let retry = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
        "name":"mixed","arguments":{},"_meta": modern_meta(),
        "inputResponses":{"e":{"action":"accept","content":{}}},"requestState": state}});
    p.send(&retry);
    let done = p.wait_id(&json!(2));
    let responses = &done["result"]["structuredContent"]["responses"];
    assert_eq!(responses["e"]["action"], "accept", "{done}");
    assert_eq!(responses["r"]["roots"][0]["name"], "project", "{done}");
    // The same handle again is refused, and never reaches the server.
    let mut again = retry.clone();
    again["id"] = json!(3);
    p.send(&again);
    let refused = p.wait_id(&json!(3));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let rest = rest(&mut p);
    assert!(rest.iter().all(|l| !l.contains("roots/list")), "{rest:?}");
    assert_eq!(received(&log).matches("\"mixed-state\"").count(), 1);
}

#[test]
fn a_roots_input_request_in_a_legacy_session_never_reaches_the_host() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &[]);
    initialize(&mut p);
    p.send(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
        "params":{"name":"roots","arguments":{}}}));
    let r = p.wait_id(&json!(3));
    assert!(r.get("error").is_some(), "{r}");
    assert!(!r.to_string().contains("roots/list"), "{r}");
}

#[test]
fn era_legacy_with_a_modern_only_server_fails_with_a_clear_message() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "modern-only", &["--era", "legacy"]);
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"t","version":"1"}}}),
    );
    let status = p.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(p.stderr().contains("--era legacy"), "{}", p.stderr());
}

#[test]
fn auto_goes_modern_only_with_a_modern_only_server() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "modern-only", &[]);
    // The probing host: discover (answered by the proxy), initialize (refused by the
    // server with only modern versions), discover again (now forwarded).
    assert_eq!(discover(&mut p, "p1")["error"]["code"], -32022);
    let init = initialize(&mut p);
    assert_eq!(init["error"]["code"], -32022, "{init}");
    let d = discover(&mut p, "p2");
    assert_eq!(d["result"]["supportedVersions"][0], "2026-07-28", "{d}");
    let r = call(&mut p, 4, "roots", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["roots"][0]["name"], "project",
        "{r}"
    );
}

#[test]
fn era_modern_refuses_the_hosts_initialize() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern"]);
    let init = initialize(&mut p);
    assert_eq!(init["error"]["code"], -32022, "{init}");
    assert_eq!(init["error"]["data"]["supported"], json!(["2026-07-28"]));
    p.finish();
    assert!(!received(&log).contains("initialize"));
}

#[test]
fn the_era_policy_key_is_honoured_and_the_flag_overrides_it() {
    let f = Fixture::new();
    let policy = f.outside.join("era.toml");
    std::fs::write(&policy, "[proxy]\nera = \"modern\"\n").unwrap();
    let (mut p, _) = proxy(&f, "dual", &["--policy", policy.to_str().unwrap()]);
    assert!(discover(&mut p, "probe").get("result").is_some());
    p.finish();
    let (mut p, _) = proxy(
        &f,
        "dual",
        &["--policy", policy.to_str().unwrap(), "--era", "auto"],
    );
    assert_eq!(discover(&mut p, "probe")["error"]["code"], -32022);
    p.finish();
}

#[test]
fn cancelling_a_request_cancels_the_proxys_retry_and_gets_no_answer() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    p.send(&json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
        "params":{"name":"roots","arguments":{"hang":true},"_meta": modern_meta()}}));
    // Wait (boundedly) for the proxy's retry to reach the server.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !received(&log).contains("inputResponses") {
        assert!(
            std::time::Instant::now() < deadline,
            "no retry: {}",
            received(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":5,"reason":"user"}}));
    // A later request is answered; the cancelled one never is.
    let m = call(&mut p, 6, "meta", json!({}));
    assert!(m.get("result").is_some(), "{m}");
    let rest = rest(&mut p);
    assert!(rest.iter().all(|l| !l.contains("\"id\":5")), "{rest:?}");
    let got = received(&log);
    let cancel = got
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| {
            m["method"] == "notifications/cancelled"
                && m["params"]["requestId"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("fsbroker-retry-"))
        });
    assert!(cancel.is_some(), "the retry was not cancelled: {got}");
}

#[test]
fn a_host_batch_carrying_a_probe_or_a_modern_request_is_refused_whole() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    p.send(&json!([
        {"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta": modern_meta()}},
        {"jsonrpc":"2.0","id":"t","method":"tools/list","params":{}},
    ]));
    let answers = p.next();
    let answers = answers.as_array().unwrap_or_else(|| panic!("{answers}"));
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers.iter().all(|a| a["error"]["code"] == -32600),
        "{answers:?}"
    );
    // An ordinary batch still passes (this server leaves batches unanswered; its log shows
    // what it got, and the line after the batch is answered, so the batch came first).
    p.send(&json!([{"jsonrpc":"2.0","id":"t2","method":"tools/list","params":{}}]));
    assert!(p.request("tools/list", json!({})).get("result").is_some());
    p.finish();
    assert!(received(&log).contains("\"t2\""), "{}", received(&log));
    assert!(
        !received(&log).contains("server/discover"),
        "{}",
        received(&log)
    );
}

#[test]
fn a_roots_input_request_hidden_outside_an_input_required_result_never_reaches_the_host() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    // A tasks-extension-like answer: the roots question sits inside a task, with no
    // resultType the proxy takes over.
    let r = call(&mut p, 9, "task", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    let rest = rest(&mut p);
    assert!(rest.iter().all(|l| !l.contains("roots/list")), "{rest:?}");
}

// What an adversarial review found, one test each (all failed before their fix).

/// Waits (boundedly) until the server's log holds `text`.
fn wait_received(log: &Path, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !received(log).contains(text) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never got {text:?}: {}",
            received(log)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_roots_question_in_the_answer_to_the_proxys_retry_never_reaches_the_host() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 1, "final_task", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    let rest = rest(&mut p);
    assert!(!r.to_string().contains("inputRequests"), "{r}");
    assert!(
        rest.iter().all(|l| !l.contains("inputRequests")),
        "{rest:?}"
    );
}

#[test]
fn a_roots_question_nested_in_an_input_required_result_never_reaches_the_host() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 2, "nested", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    assert!(!r.to_string().contains("inputRequests"), "{r}");
    p.finish();
}

#[test]
fn a_server_that_cancels_the_proxys_retry_fails_the_hosts_request_and_the_id_stays_hidden() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 3, "cancel_retry", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    let rest = rest(&mut p);
    assert!(
        rest.iter().all(|l| !l.contains("fsbroker-retry-")),
        "{rest:?}"
    );
}

#[test]
fn batches_are_refused_both_ways_in_a_modern_session() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    // The server's batch: the host never gets an array, and its request an error.
    let r = call(&mut p, 4, "batch", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    // The host's batch: refused, and never the server's.
    p.send(&json!([{"jsonrpc":"2.0","id":"b1","method":"tools/list","params":{}}]));
    let m = call(&mut p, 5, "meta", json!({}));
    assert!(m.get("result").is_some(), "{m}");
    let rest = rest(&mut p);
    assert!(rest.iter().all(|l| !l.starts_with('[')), "{rest:?}");
    assert!(!received(&log).contains("\"b1\""), "{}", received(&log));
}

#[test]
fn roots_the_host_sends_the_server_itself_are_dropped_in_a_modern_session() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    p.send(
        &json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{
        "name":"responses","arguments":{},"_meta": modern_meta(),
        "inputResponses":{"r":{"roots":[{"uri":"file:///home/user","name":"HOSTROOT"}]},
                          "e":{"action":"accept"}}}}),
    );
    let r = p.wait_id(&json!(6));
    let responses = &r["result"]["structuredContent"]["responses"];
    assert!(responses.get("r").is_none(), "{r}");
    assert_eq!(responses["e"]["action"], "accept", "{r}");
    p.finish();
}

#[test]
fn the_hosts_answer_to_a_brokered_roots_request_never_reaches_the_server() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    initialize(&mut p);
    p.send(&json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"ask_roots","arguments":{}}}));
    p.wait_id(&json!(7));
    // The broker's answer reaches the server; the host's, sent after, must not.
    wait_received(&log, "\"rl\"");
    p.send(&json!({"jsonrpc":"2.0","id":"rl","result":{"roots":[
        {"uri":"file:///home/user","name":"HOSTROOT"}]}}));
    let m = p.request("tools/list", json!({}));
    assert!(m.get("result").is_some(), "{m}");
    p.finish();
    assert!(!received(&log).contains("HOSTROOT"), "{}", received(&log));
}

#[test]
fn a_second_answer_to_initialize_cannot_change_the_era() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    initialize(&mut p);
    p.send(&json!({"jsonrpc":"2.0","id":8,"method":"tools/call",
        "params":{"name":"reinit","arguments":{}}}));
    p.wait_id(&json!(8));
    let d = discover(&mut p, "probe-after");
    assert_eq!(d["error"]["code"], -32022, "{d}");
    p.finish();
    assert!(
        !received(&log).contains("server/discover"),
        "{}",
        received(&log)
    );
}

#[test]
fn a_host_line_the_proxy_cannot_read_may_not_carry_a_probe() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    p.send_raw(
        br#"{"jsonrpc":"2.0","id":"p","method":"server/discover","method":"server/discover"}"#,
    );
    let r = p.next();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    p.finish();
    assert!(
        !received(&log).contains("server/discover"),
        "{}",
        received(&log)
    );
}

// The second review's findings, one test each.

/// A legacy session in 2025-03-26, the last revision with batches.
fn initialize_2025_03_26(p: &mut Sidecar) {
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-03-26","capabilities":{"roots":{}},
        "clientInfo":{"name":"t","version":"1"}}}),
    );
    p.wait_id(&json!("init"));
}

fn host_roots() -> Value {
    json!({"roots":[{"uri":"file:///etc","name":"HOSTROOT"}]})
}

#[test]
fn a_session_that_went_modern_stays_modern() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "modern-only", &[]);
    let first = initialize(&mut p);
    assert_eq!(first["error"]["code"], -32022, "{first}");
    let d = discover(&mut p, "probe");
    assert!(d.get("result").is_some(), "{d}");
    // A second handshake is the proxy's to refuse: the server never sees it.
    p.send(
        &json!({"jsonrpc":"2.0","id":"again","method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"t","version":"1"}}}),
    );
    let again = p.wait_id(&json!("again"));
    assert_eq!(again["error"]["code"], -32022, "{again}");
    let r = call(&mut p, 1, "roots", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    p.finish();
    assert_eq!(received(&log).matches("\"initialize\"").count(), 1);
}

#[test]
fn a_host_batch_cannot_answer_a_request_the_broker_answers() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    initialize_2025_03_26(&mut p);
    p.send(&json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"ask_roots","arguments":{"rid":1}}}));
    p.wait_id(&json!(7));
    p.send(&json!([{"jsonrpc":"2.0","id":1,"result":host_roots()}]));
    p.send(&json!({"jsonrpc":"2.0","id":"1","result":host_roots()}));
    p.send_raw(br#"{"jsonrpc":"2.0","id":1.0,"result":{"roots":[{"uri":"file:///etc","name":"HOSTROOT"}]}}"#);
    p.send_raw(br#"{"jsonrpc":"2.0","id":1,"result":{"roots":[{"uri":"file:///etc","name":"HOSTROOT"}]},"x":1,"x":2}"#);
    let m = p.request("tools/list", json!({}));
    assert!(m.get("result").is_some(), "{m}");
    p.finish();
    assert!(!received(&log).contains("HOSTROOT"), "{}", received(&log));
}

#[test]
fn roots_the_host_sends_in_a_batch_or_an_unreadable_line_never_reach_the_server() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &[]);
    initialize_2025_03_26(&mut p);
    p.send(
        &json!([{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{
        "name":"responses","arguments":{},"inputResponses":{"r":host_roots()}}}]),
    );
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"responses","arguments":{{}},"inputResponses":{{"r":{}}}}},"z":1,"z":2}}"#,
        host_roots()
    );
    p.send_raw(line.as_bytes());
    let refused = p.wait_id(&json!(6));
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let m = p.request("tools/list", json!({}));
    assert!(m.get("result").is_some(), "{m}");
    p.finish();
    assert!(!received(&log).contains("HOSTROOT"), "{}", received(&log));
}

#[test]
fn a_roots_question_in_a_list_of_input_requests_never_reaches_the_host() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 9, "task_list", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    assert!(!r.to_string().contains("inputRequests"), "{r}");
    p.finish();
}

/// `files/*` and consent exist only in a session that began with `initialize`: a server in a
/// 2026-07-28 session (or before any handshake) that asks anyway is answered "method not
/// found" by the proxy, and the broker never acts on it, whatever the consent mode.
#[test]
fn a_modern_session_never_gets_files_or_consent_even_by_asking_directly() {
    let f = Fixture::new();
    std::fs::write(f.root.join("a.txt"), "TOP SECRET").unwrap();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern", "--consent", "auto"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 2, "read_files", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    // The server's answers come before the sentinel call's answer.
    call(&mut p, 3, "meta", json!({}));
    let (_, _) = p.finish();
    let got = received(&log);
    let answers: Vec<Value> = got
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["id"] == "fc" || m["id"] == "fr")
        .collect();
    assert_eq!(answers.len(), 2, "{got}");
    for a in &answers {
        assert_eq!(a["error"]["code"], -32601, "{a}");
    }
    assert!(!got.contains("TOP SECRET"), "{got}");
}

/// One host request runs at most one set of rounds, however often the server answers it:
/// the server's repeated `input_required` answers under the host's id while the proxy's
/// retry is under way are dropped, so the server sees one retry and the host one answer.
#[test]
fn repeated_input_required_answers_to_one_request_run_one_set_of_rounds() {
    let f = Fixture::new();
    let (mut p, log) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 2, "dup_roots", json!({}));
    assert!(r["result"]["structuredContent"]["roots"].is_array(), "{r}");
    call(&mut p, 3, "meta", json!({}));
    let rest = rest(&mut p);
    let twos = rest
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["id"] == 2)
        .count();
    assert_eq!(
        twos, 0,
        "one answer for the request, already taken: {rest:?}"
    );
    let retries = received(&log).matches("\"requestState\": \"dup\"").count()
        + received(&log).matches("\"requestState\":\"dup\"").count();
    assert_eq!(retries, 1, "{}", received(&log));
}

/// The server answering the proxy's retry in a batch (which 2026-07-28 does not have) fails
/// the host's request under the host's own id; the proxy's retry id never reaches the host.
#[test]
fn a_retry_answered_in_a_batch_fails_the_hosts_request_and_the_id_stays_hidden() {
    let f = Fixture::new();
    let (mut p, _) = proxy(&f, "dual", &["--era", "modern"]);
    discover(&mut p, "probe");
    let r = call(&mut p, 2, "batch_retry", json!({}));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let rest = rest(&mut p);
    assert!(
        rest.iter().all(|l| !l.contains("fsbroker-retry-")),
        "{rest:?}"
    );
}
