//! An MCP host written with rmcp that gives the server it launches brokered file access.
//!
//! It starts SERVER as a child process (rmcp's `TokioChildProcess`) with the broker's client
//! handler, lists the server's tools, calls one if asked, and prints the result:
//!
//! ```sh
//! cargo run --features rmcp --example rmcp_host -- --root demo=./docs --consent auto \
//!     --tool read_file --arguments '{"path": "demo/protocol.md"}' \
//!     -- target/debug/examples/rmcp_files_server
//! ```
//!
//! The options before `--` are `fsbroker serve`'s (`--policy`, `--root`, `--writable`,
//! `--consent`, `--server-id`). Consent is given automatically only with `--consent auto`;
//! otherwise the terminal prompt answers where there is a controlling terminal, else every
//! request is denied. Set `FSBROKER_LOG=debug` for logs (on stderr).

use clap::Parser;
use mcp_fsbroker::Broker;
use mcp_fsbroker::cli::CommonArgs;
use mcp_fsbroker::policy::ConsentMode;
use mcp_fsbroker::rmcp_adapter::{BrokerClientHandler, NotificationRouter};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, Implementation, JsonObject};
use rmcp::transport::TokioChildProcess;
use std::process::ExitCode;
use std::time::Duration;

/// Launch an MCP server with brokered file access, list its tools, and call one.
#[derive(Debug, Parser)]
#[command(name = "rmcp_host")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// The tool to call after listing the tools.
    #[arg(long)]
    tool: Option<String>,
    /// The tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    arguments: String,
    /// Seconds the whole session may take before the host gives up and stops the server.
    #[arg(long, value_name = "SECONDS", default_value = "60")]
    timeout: u64,
    /// The server command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    server: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FSBROKER_LOG")
                // rmcp logs every error answer at `warn`; a refused request is routine here.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=error")),
        )
        .init();
    let limit = Duration::from_secs(args.timeout);
    match tokio::time::timeout(limit, run(&args)).await {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("rmcp_host: {e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("rmcp_host: the session took longer than {limit:?}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let arguments: JsonObject = serde_json::from_str(&args.arguments)
        .map_err(|e| format!("--arguments is not a JSON object: {e}"))?;
    // Without `--consent`, the policy's mode applies; without one there either, this host,
    // a terminal program, asks on its terminal (a library broker never does unless told),
    // and everything is denied where there is none.
    let policy = args.common.build_policy(false)?;
    let (broker, outbound) = Broker::builder(policy)
        .default_consent_mode(ConsentMode::Tty)
        .build()?;
    // One router per broker; this host has one connection, but a host with several gives
    // each its own handler from the same router, so that no two share a session.
    let router = NotificationRouter::new(broker);
    tokio::spawn(router.clone().run(outbound));
    let mut handler = BrokerClientHandler::new(&router).with_client_info(Implementation::new(
        "rmcp-host-example",
        env!("CARGO_PKG_VERSION"),
    ));
    if let Some(id) = &args.common.server_id {
        handler = handler.with_server_id(id.clone());
    }

    let (program, rest) = args.server.split_first().ok_or("no server command")?;
    let mut command = tokio::process::Command::new(program);
    command.args(rest);
    let transport =
        TokioChildProcess::new(command).map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let client = handler.clone().serve(transport).await?;

    // Everything the server sends is printed through `printable`: a server must not be able
    // to write terminal escapes to the user's terminal.
    if let Some(info) = client.peer_info().and_then(|i| i.server_info.clone()) {
        println!(
            "server: {} {}",
            printable(&info.name),
            printable(&info.version)
        );
    }
    println!("tools:");
    // One page: a server that kept handing out cursors would otherwise keep the host busy.
    let tools = client.list_tools(None).await?;
    for tool in &tools.tools {
        let description = tool.description.as_deref().unwrap_or("");
        println!("  {}: {}", printable(&tool.name), printable(description));
    }
    if tools.next_cursor.is_some() {
        println!("  (more tools not listed)");
    }
    let mut code = ExitCode::SUCCESS;
    if let Some(name) = &args.tool {
        let params = CallToolRequestParams::new(name.clone()).with_arguments(arguments);
        let result = client.call_tool(params).await?;
        println!("result of {}:", printable(name));
        println!("{}", render(&result));
        if result.is_error == Some(true) {
            code = ExitCode::FAILURE;
        }
    }
    client.cancel().await?;
    handler.end_session();
    Ok(code)
}

/// The tool result for a reader: its structured content as JSON when there is some (JSON
/// escapes control characters), else its text content, made printable.
fn render(result: &CallToolResult) -> String {
    if let Some(value) = &result.structured_content {
        return serde_json::to_string_pretty(value).unwrap_or_default();
    }
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    printable(&text)
}

/// `text` without control characters other than newlines and tabs.
fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}
