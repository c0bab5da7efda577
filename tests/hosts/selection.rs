//! Only the hosts and servers named are rewritten; a server named that no host has is an
//! error, and so is a host this command does not know.

use crate::layout::{FILES, Layout};

#[test]
fn only_the_named_server_of_the_named_host_is_wrapped() {
    let layout = Layout::new();
    let before = layout.snapshot();
    layout.ok(&["wrap", "codex", "--server", "context7"]);
    let after = layout.snapshot();
    for (((_, place), b), a) in FILES.iter().zip(&before).zip(&after) {
        assert_eq!(a != b, *place == "home/.codex/config.toml", "{place}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&layout.ok(&["hosts", "codex", "--json"])).unwrap();
    let proxied: Vec<bool> = report["hosts"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["proxied"].as_bool().unwrap())
        .collect();
    assert_eq!(proxied, [true, false, false, false]);
}

#[test]
fn a_server_no_host_has_is_named_and_nothing_is_written() {
    let layout = Layout::new();
    let before = layout.snapshot();
    let out = layout.run(&["wrap", "--server", "no-such-server"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no server called no-such-server"),
        "{stderr}"
    );
    assert_eq!(layout.snapshot(), before);
}

#[test]
fn an_unknown_host_is_a_usage_error() {
    let layout = Layout::new();
    let out = layout.run(&["wrap", "emacs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"emacs\" is not a host"));
}

#[test]
fn run_from_the_home_directory_a_project_file_that_is_the_users_is_listed_once() {
    let layout = Layout::new();
    let out = std::process::Command::new(crate::layout::exe())
        .args(["hosts", "gemini", "cursor", "--json"])
        .env("HOME", layout.home())
        .current_dir(layout.home())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let places: Vec<(&str, &str)> = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["host"].as_str().unwrap(), p["scope"].as_str().unwrap()))
        .collect();
    assert_eq!(places, [("cursor", "user"), ("gemini", "user")]);
}

#[test]
fn project_files_are_looked_for_in_the_directory_given_with_project() {
    let layout = Layout::new();
    let out = std::process::Command::new(crate::layout::exe())
        .args(["hosts", "claude-code", "--json", "--project"])
        .arg(layout.project())
        .env("HOME", layout.home())
        .current_dir(layout.home())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let project = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["scope"] == "project")
        .unwrap();
    assert_eq!(
        project["file"].as_str().unwrap(),
        layout.project().join(".mcp.json").display().to_string()
    );
}
