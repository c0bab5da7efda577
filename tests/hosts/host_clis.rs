//! The hosts' own command lines read what `wrap` wrote, and what `unwrap` gave back: `claude
//! mcp list`, `gemini mcp list` and `codex mcp list` (none needs an account to list), with
//! `HOME` at a temporary directory holding each host's file. The server is `/bin/false`, so
//! that Claude Code's health check starts nothing that reaches the network.

use crate::interop;
use crate::layout::exe;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// What each host's `mcp list` prints for the server `tool`, once the files are written.
fn listed(home: &Path, project: &Path) -> [(&'static str, String); 3] {
    let bin = interop::host_clis().join("node_modules/.bin");
    ["claude", "gemini", "codex"].map(|host| {
        let mut cmd = Command::new(bin.join(host));
        cmd.args(["mcp", "list"])
            .env("HOME", home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .current_dir(project);
        // Gemini CLI prints its list on stderr, the others on stdout.
        let ran = crate::sidecar::run_within(cmd, Duration::from_secs(120));
        assert!(
            ran.status.is_some_and(|s| s.success()),
            "{host} mcp list:\n{}",
            ran.log()
        );
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr)
        );
        let line = out
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .any(|w| w.trim_end_matches(':') == "tool")
            })
            .unwrap_or_else(|| panic!("{host} mcp list shows no `tool`:\n{out}"))
            .to_owned();
        (host, line)
    })
}

#[test]
fn claude_gemini_and_codex_list_the_wrapped_server_and_then_the_unwrapped_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, project) = (tmp.path().join("home"), tmp.path().join("project"));
    for d in [home.join(".gemini"), home.join(".codex"), project.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    let json = "{\n  \"mcpServers\": {\n    \"tool\": {\n      \"command\": \"/bin/false\",\n      \"args\": [\"--x\"]\n    }\n  }\n}\n";
    std::fs::write(home.join(".claude.json"), json).unwrap();
    std::fs::write(home.join(".gemini/settings.json"), json).unwrap();
    let toml = "[mcp_servers.tool]\ncommand = \"/bin/false\"\nargs = [\"--x\"]\n";
    std::fs::write(home.join(".codex/config.toml"), toml).unwrap();

    let wrap = |verb: &str| {
        let out = Command::new(exe())
            .args([verb, "claude-code", "gemini", "codex"])
            .env("HOME", &home)
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    wrap("wrap");
    let fsbroker = exe().display().to_string();
    for (host, line) in listed(&home, &project) {
        let shown = line.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            shown.contains(&fsbroker) && shown.contains("proxy --daemon -- /bin/false --x"),
            "{host} after wrap: {line}"
        );
    }
    wrap("unwrap");
    for (host, line) in listed(&home, &project) {
        assert!(
            !line.contains("fsbroker") && !line.contains("proxy"),
            "{host}: {line}"
        );
        assert!(line.contains("/bin/false"), "{host} after unwrap: {line}");
    }
    // Claude Code writes `~/.claude.json` itself (reformatted, with keys of its own), so
    // only the other two files are compared: `unwrap` read Claude's rewrite all the same.
    assert_eq!(
        std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap(),
        json
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".codex/config.toml")).unwrap(),
        toml
    );
}
