//! A server name, command or path that carries escape sequences is printed escaped: the
//! terminal never receives them raw, from `hosts`, `hosts --json` or `wrap`.

use crate::layout::Layout;

/// A name that would retitle the terminal and turn its text red.
const NAME: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[31m";

fn hostile_layout() -> Layout {
    let layout = Layout::new();
    let entry = serde_json::json!({
        "mcpServers": { NAME: { "command": "npx\u{1b}[2J", "args": ["-y", "pkg\u{202e}txt"] } }
    });
    std::fs::write(
        layout.path("home/.cursor/mcp.json"),
        serde_json::to_string_pretty(&entry).unwrap(),
    )
    .unwrap();
    layout
}

#[test]
fn hosts_prints_a_hostile_name_and_command_escaped() {
    let layout = hostile_layout();
    let human = layout.ok(&["hosts", "cursor"]);
    assert!(!human.contains('\u{1b}') && !human.contains('\u{7}') && !human.contains('\u{202e}'));
    assert!(
        human.contains("evil\\u{1b}]0;pwned\\u{7}\\u{1b}[31m: not through fsbroker"),
        "{human}"
    );
    assert!(
        human.contains("npx\\u{1b}[2J -y pkg\\u{202e}txt"),
        "{human}"
    );
    let json = layout.ok(&["hosts", "cursor", "--json"]);
    assert!(!json.contains('\u{1b}') && !json.contains('\u{202e}'));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["hosts"][0]["servers"][0]["name"], NAME);
}

#[test]
fn wrap_prints_a_hostile_name_escaped_and_keeps_it_in_the_file() {
    let layout = hostile_layout();
    let before = std::fs::read_to_string(layout.path("home/.cursor/mcp.json")).unwrap();
    let out = layout.ok(&["wrap", "cursor"]);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(
        out.contains("evil\\u{1b}]0;pwned\\u{7}\\u{1b}[31m (user): wrapped"),
        "{out}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&layout.ok(&["hosts", "cursor", "--json"])).unwrap();
    let s = &report["hosts"][0]["servers"][0];
    assert_eq!(
        s["server_command"],
        serde_json::json!(["npx\u{1b}[2J", "-y", "pkg\u{202e}txt"])
    );
    layout.ok(&["unwrap", "cursor"]);
    assert_eq!(
        std::fs::read_to_string(layout.path("home/.cursor/mcp.json")).unwrap(),
        before
    );
}

#[test]
fn a_file_nested_a_hundred_thousand_deep_is_named_as_unreadable_and_nothing_crashes() {
    let layout = Layout::new();
    let deep =
        |open: &str, close: &str| format!("{}{}", open.repeat(100_000), close.repeat(100_000));
    std::fs::write(
        layout.path("home/.cursor/mcp.json"),
        format!("{{\"mcpServers\": {}}}", deep("[", "]")),
    )
    .unwrap();
    std::fs::write(
        layout.path("home/.codex/config.toml"),
        format!("a = {}", deep("[", "]")),
    )
    .unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&layout.ok(&["hosts", "cursor", "codex", "--json"])).unwrap();
    let errors: Vec<&str> = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["error"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(errors.len(), 2, "{report}");
    assert!(errors[0].contains("nesting depth"), "{}", errors[0]);
    assert!(
        errors[1].contains("recursion depth") && errors[1].len() < 200,
        "{}",
        errors[1]
    );
    let out = layout.run(&["wrap", "cursor", "codex"]);
    assert_eq!(out.status.code(), Some(1));
}
