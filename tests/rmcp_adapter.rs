//! The rmcp adapter against a real server in a child process: the example server
//! `rmcp_files_server`, written with rmcp's server side, asks our rmcp client for roots and
//! files, and the example host `rmcp_host` runs the same way from its command line.
//!
//! The example binaries are built by this test itself (one `cargo build --examples` per test
//! run, a no-op when they are fresh), so `cargo test --features rmcp --test rmcp_adapter` works
//! on its own. Every child process and every request has a time limit.
#![cfg(feature = "rmcp")]

mod common;

use common::{Fixture, SECRET};
use mcp_fsbroker::rmcp_adapter::{BrokerClientHandler, NotificationRouter};
use mcp_fsbroker::{Broker, Policy};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest any one step (a start, a tool call) may take.
const STEP: Duration = Duration::from_secs(30);
/// The longest the examples' build may take (it may wait for another build's lock).
const BUILD: Duration = Duration::from_secs(1200);

/// The directory of the example binaries, built (once per test run) for this profile.
fn examples() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The test runs as target/<profile>/deps/rmcp_adapter-HASH.
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_owned();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--features", "rmcp"])
            .args(["--example", "rmcp_files_server", "--example", "rmcp_host"])
            .arg("--manifest-path")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        cmd.stdout(Stdio::null());
        let (ok, log) = run_bounded(cmd, BUILD);
        assert!(ok, "building the rmcp examples failed:\n{log}");
        profile_dir.join("examples")
    })
}

/// Runs `cmd` to completion within `limit` (killed after), returning success and its stderr.
fn run_bounded(mut cmd: Command, limit: Duration) -> (bool, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
    (status.is_some_and(|s| s.success()), text)
}

fn server_exe() -> PathBuf {
    examples().join("rmcp_files_server")
}

/// A broker over the fixture's root (`project`) with consent `mode`.
fn broker(f: &Fixture, mode: &str) -> (Broker, mcp_fsbroker::OutboundReceiver) {
    let text = f.policy_text("read", &format!("[consent]\nmode = \"{mode}\"\n"));
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
}

type Client = RunningService<RoleClient, BrokerClientHandler>;

/// Starts the example server as a child with `handler` answering its requests.
async fn connect(handler: BrokerClientHandler) -> Client {
    let transport = TokioChildProcess::new(tokio::process::Command::new(server_exe())).unwrap();
    tokio::time::timeout(STEP, handler.serve(transport))
        .await
        .expect("the server starts in time")
        .expect("the handshake succeeds")
}

/// A connected server whose notifications are routed, with its handler and broker.
async fn start(f: &Fixture, mode: &str) -> (Client, BrokerClientHandler, Broker) {
    let (broker, outbound) = broker(f, mode);
    let router = NotificationRouter::new();
    tokio::spawn(router.clone().run(outbound));
    let handler = BrokerClientHandler::new(broker.clone()).with_router(router);
    (connect(handler.clone()).await, handler, broker)
}

/// Calls a tool of the example server: (structured result, is_error).
async fn tool(client: &Client, name: &str, args: Value) -> (Value, bool) {
    let params = CallToolRequestParams::new(name.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let result = tokio::time::timeout(STEP, client.call_tool(params))
        .await
        .expect("the tool answers in time")
        .expect("the tool call succeeds");
    (
        result.structured_content.expect("structured content"),
        result.is_error == Some(true),
    )
}

/// Has the server send `method` to our client; returns what it got back (`{result}` or
/// `{error}`).
async fn ask(client: &Client, method: &str, params: Value) -> Value {
    tool(
        client,
        "request",
        json!({"method": method, "params": params}),
    )
    .await
    .0
}

/// Polls the server's received notifications until one satisfies `pred`.
async fn wait_notification(client: &Client, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + STEP;
    loop {
        let (got, _) = tool(client, "notifications", json!({})).await;
        if let Some(n) = got["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| pred(n))
        {
            return n.clone();
        }
        assert!(Instant::now() < deadline, "no such notification: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn stop(client: Client) {
    tokio::time::timeout(STEP, client.cancel())
        .await
        .expect("the client stops in time")
        .unwrap();
}

#[tokio::test]
async fn the_server_sees_our_capabilities_and_roots() {
    let f = Fixture::new();
    let (client, handler, broker) = start(&f, "auto").await;

    let (init, _) = tool(&client, "client", json!({})).await;
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert_eq!(init["capabilities"]["roots"], json!({"listChanged": true}));
    assert_eq!(
        init["capabilities"]["experimental"]["filesystemBrokering"],
        json!({})
    );

    // The server asks with rmcp's own `list_roots`.
    let (roots, failed) = tool(&client, "roots", json!({})).await;
    assert!(!failed, "{roots}");
    let canonical = f.root.canonicalize().unwrap();
    assert_eq!(
        roots["result"]["roots"],
        json!([{"uri": format!("file://{}", canonical.display()), "name": "project"}])
    );
    // The session is named by the server's `serverInfo.name`.
    assert_eq!(handler.session_id(), Some("rmcp-files-server"));
    assert_eq!(broker.sessions(), vec!["rmcp-files-server".to_owned()]);

    stop(client).await;
    assert!(handler.end_session());
    assert!(broker.sessions().is_empty());
}

#[tokio::test]
async fn consent_then_read_returns_the_file() {
    let f = Fixture::new();
    f.file("notes/hello.txt", "hello through rmcp\n");
    let (client, _handler, _broker) = start(&f, "auto").await;

    let (out, failed) = tool(
        &client,
        "read_file",
        json!({"path": "project/notes/hello.txt"}),
    )
    .await;
    assert!(!failed, "{out}");
    assert_eq!(out["consent"]["result"]["granted"], true);
    assert_eq!(
        out["consent"]["result"]["approvedPaths"],
        json!(["project/notes/hello.txt"])
    );
    let read = &out["read"]["result"];
    assert_eq!(read["content"], "hello through rmcp\n");
    assert_eq!(read["size"], 19);
    assert_eq!(read["eof"], true);

    // Any `files/*` request passes through whole, here under the same grant.
    let stat = ask(
        &client,
        "files/stat",
        json!({"path": "project/notes/hello.txt"}),
    )
    .await;
    assert_eq!(stat["result"]["path"], "project/notes/hello.txt", "{stat}");
    assert_eq!(stat["result"]["type"], "file");
    assert_eq!(stat["result"]["etag"], read["etag"]);
    stop(client).await;
}

#[tokio::test]
async fn escapes_are_refused_with_the_error_data_preserved() {
    let f = Fixture::new();
    f.symlink(&f.outside, "link-out");
    let (client, _handler, _broker) = start(&f, "auto").await;
    let granted = ask(
        &client,
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(granted["result"]["granted"], true, "{granted}");

    let outside = f.outside.join("secret.txt");
    for path in [
        "project/../outside/secret.txt".to_owned(),
        "project/../../../../etc/passwd".to_owned(),
        outside.display().to_string(),
        "project/link-out/secret.txt".to_owned(),
    ] {
        let (got, failed) = tool(
            &client,
            "request",
            json!({"method": "files/read", "params": {"path": path}}),
        )
        .await;
        assert!(failed, "{path}: {got}");
        let e = &got["error"];
        assert_eq!(e["code"], -31002, "{path}: {got}");
        assert_eq!(e["data"]["code"], "PERMISSION_DENIED", "{path}: {got}");
        assert_eq!(e["data"]["reason"], "outside_root", "{path}: {got}");
        assert!(!e["message"].as_str().unwrap().is_empty());
        assert!(!got.to_string().contains(SECRET));
    }
    f.assert_canary_intact();
    stop(client).await;
}

#[tokio::test]
async fn refused_consent_and_protocol_errors_pass_through() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let (client, _handler, _broker) = start(&f, "deny").await;

    let (out, failed) = tool(&client, "read_file", json!({"path": "project/a.txt"})).await;
    assert!(failed);
    assert_eq!(out["consent"]["result"]["granted"], false);
    assert_eq!(
        out["consent"]["result"]["deniedPaths"],
        json!(["project/a.txt"])
    );
    assert_eq!(
        out["read"]["error"],
        json!({"code": -31002, "message": "no consent covers this path",
            "data": {"code": "PERMISSION_DENIED", "reason": "no_consent", "path": "project/a.txt"}})
    );

    // JSON-RPC faults keep their codes: bad params, a `files/` method the broker lacks, and
    // a method outside `files/`, which rmcp's default answers.
    let bad = ask(&client, "files/read", json!({"path": 7})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let unknown = ask(&client, "files/frobnicate", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let other = ask(&client, "other/method", json!({})).await;
    assert_eq!(other["error"]["code"], -32601, "{other}");
    assert_eq!(other["error"]["message"], "other/method");
    stop(client).await;
}

#[tokio::test]
async fn broker_notifications_reach_the_server() {
    let f = Fixture::new();
    f.dir("watched");
    let (client, _handler, broker) = start(&f, "auto").await;
    ask(
        &client,
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    let watch = ask(&client, "files/watch", json!({"path": "project/watched"})).await;
    let watch_id = watch["result"]["watchId"]
        .as_str()
        .expect("a watch id")
        .to_owned();

    f.file("watched/new.txt", "x");
    let changed = wait_notification(&client, |n| {
        n["method"] == "notifications/files/changed"
            && n["params"]["path"] == "project/watched/new.txt"
    })
    .await;
    assert_eq!(changed["params"]["watchId"], watch_id.as_str());
    assert_eq!(changed["params"]["event"], "created");

    // Revocation ends the watch, and the server is told.
    broker.revoke(None, None).unwrap();
    let ended = wait_notification(&client, |n| n["params"]["event"] == "unwatched").await;
    assert_eq!(ended["params"]["watchId"], watch_id.as_str());
    assert_eq!(ended["params"]["reason"], "revoked");

    // A new root in force: rmcp's own `notifications/roots/list_changed`.
    let second = f.tmp.path().join("second");
    std::fs::create_dir(&second).unwrap();
    let text = format!(
        "{}\n[[roots]]\npath = {:?}\nmount = \"second\"\n",
        f.policy_text("read", "[consent]\nmode = \"auto\"\n"),
        second
    );
    broker
        .reload(Policy::parse(&text, "test").unwrap())
        .unwrap();
    wait_notification(&client, |n| {
        n["method"] == "notifications/roots/list_changed"
    })
    .await;
    let (roots, _) = tool(&client, "roots", json!({})).await;
    let names: Vec<&str> = roots["result"]["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["project", "second"]);
    stop(client).await;
}

#[tokio::test]
async fn an_embedder_given_id_names_the_session() {
    let f = Fixture::new();
    let (broker, _outbound) = broker(&f, "auto");
    let handler = BrokerClientHandler::new(broker.clone()).with_server_id("notes");
    let client = connect(handler.clone()).await;
    let granted = ask(
        &client,
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(granted["result"]["granted"], true);
    assert_eq!(broker.sessions(), vec!["notes".to_owned()]);
    assert_eq!(handler.session_id(), Some("notes"));
    stop(client).await;
    // Ending the session drops the grant: a new session must ask again.
    assert!(handler.end_session());
    let read = broker
        .handle_message(
            "notes",
            json!({"jsonrpc": "2.0", "id": 1, "method": "files/stat", "params": {"path": "project"}}),
        )
        .await
        .unwrap();
    assert_eq!(read["error"]["data"]["reason"], "no_consent", "{read}");
}

/// Runs the example host with `args`, returning (success, stdout).
fn host(args: &[&str]) -> (bool, String) {
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(examples().join("rmcp_host"));
    cmd.args(args)
        .arg("--timeout")
        .arg("30")
        .arg("--")
        .arg(server_exe());
    cmd.stdout(out_file.reopen().unwrap());
    let (ok, log) = run_bounded(cmd, STEP * 2);
    let out = std::fs::read_to_string(out_file.path()).unwrap();
    (ok, format!("{out}\n--- stderr ---\n{log}"))
}

#[test]
fn the_example_host_reads_a_file_only_with_consent() {
    let f = Fixture::new();
    f.file("hello.txt", "hello from the example host");
    let root = format!("project={}", f.root.display());
    let read_args = r#"{"path": "project/hello.txt"}"#;

    let (ok, out) = host(&[
        "--root",
        &root,
        "--consent",
        "auto",
        "--tool",
        "read_file",
        "--arguments",
        read_args,
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("server: rmcp-files-server"), "{out}");
    assert!(out.contains("  read_file: "), "{out}");
    assert!(
        out.contains(r#""content": "hello from the example host""#),
        "{out}"
    );

    let (ok, out) = host(&[
        "--root",
        &root,
        "--consent",
        "deny",
        "--tool",
        "read_file",
        "--arguments",
        read_args,
    ]);
    assert!(!ok, "a refused read is a failed tool call: {out}");
    assert!(out.contains(r#""reason": "no_consent""#), "{out}");
    assert!(!out.contains("hello from the example host"), "{out}");

    let escape = r#"{"method": "files/read", "params": {"path": "project/../outside/secret.txt"}}"#;
    let (ok, out) = host(&[
        "--root",
        &root,
        "--consent",
        "auto",
        "--tool",
        "request",
        "--arguments",
        escape,
    ]);
    assert!(!ok, "{out}");
    assert!(out.contains(r#""code": "PERMISSION_DENIED""#), "{out}");
    assert!(!out.contains(SECRET), "{out}");
}
