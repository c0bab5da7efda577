//! Helpers for the rmcp adapter's tests (`tests/interop/rmcp_*.rs`): the example server
//! `rmcp_files_server`, written with rmcp's server side, runs in a child process and asks our
//! rmcp client for roots and files through its tools; the example host `rmcp_host` runs the
//! same way from its command line.
//!
//! The example binaries are built by the tests themselves (one `cargo build --examples` per
//! test binary, a no-op when they are fresh), so `cargo test --features rmcp --test interop
//! rmcp_` works on its own. Every child process and every request has a time limit.
//!
//! `tests/interop/main.rs` includes this module by path (`mod rmcp_common`), beside `mod
//! common;`, so that `common/mod.rs` need not know about it.

use crate::common::Fixture;
use mcp_fsbroker::rmcp_adapter::{BrokerClientHandler, NotificationRouter};
use mcp_fsbroker::{Broker, Notifications, Policy};
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
pub const STEP: Duration = Duration::from_secs(30);
/// The longest the examples' build may take (it may wait for another build's lock).
const BUILD: Duration = Duration::from_secs(1200);
/// The method of the broker's change notifications.
pub const CHANGED: &str = "notifications/files/changed";

/// The directory of the example binaries, built (once per test binary) for this profile.
pub fn examples() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The test runs as target/<profile>/deps/rmcp_...-HASH.
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

/// Runs `cmd` to completion within `limit` (killed after), returning success and its output.
pub fn run_bounded(cmd: Command, limit: Duration) -> (bool, String) {
    let ran = crate::sidecar::run_within(cmd, limit);
    (ran.success(), ran.log())
}

pub fn server_exe() -> PathBuf {
    examples().join("rmcp_files_server")
}

/// A broker over the fixture's root (`project`) with consent `mode`, and `extra` policy TOML.
pub fn broker_with(f: &Fixture, mode: &str, extra: &str) -> (Broker, Notifications) {
    let text = f.policy_text("read", &format!("[consent]\nmode = \"{mode}\"\n{extra}"));
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
}

/// A router over a new broker with consent `mode`, routing its notifications.
pub fn router_with(f: &Fixture, mode: &str, extra: &str) -> (NotificationRouter, Broker) {
    let (broker, outbound) = broker_with(f, mode, extra);
    let router = NotificationRouter::new(broker.clone());
    tokio::spawn(router.clone().run(outbound));
    (router, broker)
}

pub type Client = RunningService<RoleClient, BrokerClientHandler>;

/// Starts the example server as a child with `handler` answering its requests.
pub async fn connect(handler: BrokerClientHandler) -> Client {
    connect_as(handler, None).await
}

/// Starts the example server, reporting `name` as its `serverInfo.name` when given.
pub async fn connect_as(handler: BrokerClientHandler, name: Option<&str>) -> Client {
    let mut command = tokio::process::Command::new(server_exe());
    if let Some(name) = name {
        command.env("RMCP_FILES_SERVER_NAME", name);
    }
    let transport = TokioChildProcess::new(command).unwrap();
    tokio::time::timeout(STEP, handler.serve(transport))
        .await
        .expect("the server starts in time")
        .expect("the handshake succeeds")
}

/// A connected server whose notifications are routed, with its handler and broker.
pub async fn start(f: &Fixture, mode: &str) -> (Client, BrokerClientHandler, Broker) {
    let (router, broker) = router_with(f, mode, "");
    let handler = BrokerClientHandler::new(&router);
    (connect(handler.clone()).await, handler, broker)
}

/// Calls a tool of the example server: (structured result, is_error).
pub async fn tool(client: &Client, name: &str, args: Value) -> (Value, bool) {
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
pub async fn ask(client: &Client, method: &str, params: Value) -> Value {
    tool(
        client,
        "request",
        json!({"method": method, "params": params}),
    )
    .await
    .0
}

/// The server's consent for `paths`, asserted granted.
pub async fn consent(client: &Client, paths: &[&str]) {
    let granted = ask(client, "files/consent", json!({"requestedPaths": paths})).await;
    assert_eq!(granted["result"]["granted"], true, "{granted}");
}

/// A watch of `path` by the server; returns its id.
pub async fn watch(client: &Client, path: &str) -> String {
    let watch = ask(client, "files/watch", json!({"path": path})).await;
    watch["result"]["watchId"]
        .as_str()
        .unwrap_or_else(|| panic!("a watch id: {watch}"))
        .to_owned()
}

/// The notifications the server has received so far.
pub async fn notifications(client: &Client) -> Vec<Value> {
    let (got, _) = tool(client, "notifications", json!({})).await;
    got["notifications"].as_array().unwrap().clone()
}

/// Polls the server's received notifications until one satisfies `pred`.
pub async fn wait_notification(client: &Client, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + STEP;
    loop {
        let got = notifications(client).await;
        if let Some(n) = got.iter().find(|n| pred(n)) {
            return n.clone();
        }
        assert!(Instant::now() < deadline, "no such notification: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn stop(client: Client) {
    tokio::time::timeout(STEP, client.cancel())
        .await
        .expect("the client stops in time")
        .unwrap();
}

/// Runs the example host with `args`, returning (success, stdout and stderr).
pub fn host(args: &[&str]) -> (bool, String) {
    host_with_env(args, &[])
}

/// Runs the example host with `args` and environment `env` (which its server inherits).
pub fn host_with_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(examples().join("rmcp_host"));
    cmd.envs(env.iter().copied())
        .args(args)
        .arg("--timeout")
        .arg("30")
        .arg("--")
        .arg(server_exe());
    run_bounded(cmd, STEP * 2)
}
