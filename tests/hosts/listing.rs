//! `fsbroker hosts --json`: every host's file, every server, and how each runs.

use crate::layout::{Layout, exe};
use serde_json::Value;

/// (host, scope, server, transport, proxied) of every server `hosts --json` reports.
fn servers(report: &Value) -> Vec<(String, String, String, String, bool)> {
    let mut out = Vec::new();
    for place in report["hosts"].as_array().unwrap() {
        for s in place["servers"].as_array().unwrap() {
            out.push((
                place["host"].as_str().unwrap().to_owned(),
                place["scope"].as_str().unwrap().to_owned(),
                s["name"].as_str().unwrap().to_owned(),
                s["transport"].as_str().unwrap().to_owned(),
                s["proxied"].as_bool().unwrap(),
            ));
        }
    }
    out
}

fn json(layout: &Layout, args: &[&str]) -> Value {
    serde_json::from_str(&layout.ok(args)).unwrap()
}

#[test]
fn hosts_reports_every_host_file_and_server_with_its_transport() {
    let layout = Layout::new();
    let report = json(&layout, &["hosts", "--json"]);
    let got = servers(&report);
    let want = [
        ("claude-desktop", "user", "filesystem", "stdio"),
        ("claude-desktop", "user", "sqlite", "stdio"),
        ("claude-code", "user", "airtable", "stdio"),
        ("claude-code", "user", "notion", "remote"),
        (
            "claude-code",
            "local /home/user/dev/my-app",
            "chrome-devtools",
            "stdio",
        ),
        ("claude-code", "project", "sentry", "stdio"),
        ("claude-code", "project", "shared-server", "stdio"),
        ("claude-code", "project", "api-server", "remote"),
        ("vscode", "user", "Perplexity", "stdio"),
        ("vscode", "user", "memory", "stdio"),
        ("vscode", "user", "fetch", "stdio"),
        ("vscode", "user", "github", "remote"),
        ("cursor", "user", "server-name", "stdio"),
        ("cursor", "user", "remote-server", "remote"),
        ("windsurf", "user", "github", "stdio"),
        ("windsurf", "user", "figma", "remote"),
        ("zed", "user", "local-mcp-server", "stdio"),
        ("zed", "user", "remote-mcp-server", "remote"),
        ("zed", "user", "mcp-server-github", "unknown"),
        ("gemini", "user", "pythonTools", "stdio"),
        ("gemini", "user", "nodeServer", "stdio"),
        ("gemini", "user", "httpServer", "remote"),
        ("codex", "user", "context7", "stdio"),
        ("codex", "user", "figma", "remote"),
        ("codex", "user", "chrome_devtools", "stdio"),
        ("codex", "user", "local", "stdio"),
        ("continue", "project", "memory", "stdio"),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(h, s, n, t)| {
            (
                h.to_string(),
                s.to_string(),
                n.to_string(),
                t.to_string(),
                false,
            )
        })
        .collect();
    assert_eq!(got, want);
    // Continue's YAML file is named, with why it is not read.
    let yaml = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["file"].as_str().unwrap().ends_with("playwright-mcp.yaml"))
        .unwrap();
    assert!(yaml["error"].as_str().unwrap().contains("YAML"), "{yaml}");
    let codex = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host"] == "codex")
        .unwrap();
    let codex = &codex["servers"][0];
    assert_eq!(
        codex["command"],
        serde_json::json!(["npx", "-y", "@upstash/context7-mcp"])
    );
}

#[test]
fn after_a_wrap_each_server_runs_through_the_daemon_with_its_own_command_behind() {
    let layout = Layout::new();
    layout.ok(&["wrap", "--sandbox", "gemini"]);
    let report = json(&layout, &["hosts", "gemini", "--json"]);
    assert_eq!(report["hosts"].as_array().unwrap().len(), 1);
    let s = &report["hosts"][0]["servers"][0];
    assert_eq!(s["name"], "pythonTools");
    assert_eq!(s["proxied"], true);
    assert_eq!(s["daemon"], true);
    assert_eq!(s["sandbox"], "strict");
    assert_eq!(
        s["server_command"],
        serde_json::json!(["python", "-m", "my_mcp_server", "--port", "8080"])
    );
    assert_eq!(s["command"][0], exe().display().to_string());
    let human = layout.ok(&["hosts", "gemini"]);
    assert!(
        human.contains(
            "pythonTools: through fsbroker proxy, attached to the daemon, sandboxed (strict)"
        ),
        "{human}"
    );
    assert!(
        human.contains("httpServer: remote, not through fsbroker"),
        "{human}"
    );
}

#[test]
fn an_entry_running_its_own_broker_is_told_apart_from_one_on_the_daemon() {
    let layout = Layout::new();
    let file = layout.path("home/.cursor/mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"own": {"command": "fsbroker", "args": ["proxy", "--root", "/w", "--", "node", "s.js"]}}}"#,
    )
    .unwrap();
    let report = json(&layout, &["hosts", "cursor", "--json"]);
    let s = &report["hosts"][0]["servers"][0];
    assert_eq!(
        (s["proxied"].as_bool(), s["daemon"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(s["sandbox"], Value::Null);
    assert_eq!(s["server_command"], serde_json::json!(["node", "s.js"]));
}
