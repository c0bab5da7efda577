//! `wrap` rewrites every host's file to the expected bytes, `unwrap` gives the originals back
//! byte for byte, and a second `wrap` changes nothing.

use crate::layout::{FILES, Layout, exe, fixtures};

/// What `wrap` must leave in the file laid out from `fixture`: the file of
/// tests/fixtures/hosts/wrapped/ with the binary's path in place of `@FSBROKER@`, or the
/// fixture itself where nothing is wrapped.
fn expected(fixture: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(&exe().display().to_string()).unwrap();
    match std::fs::read_to_string(fixtures().join("wrapped").join(fixture)) {
        Ok(text) => text.replace("@FSBROKER@", &quoted).into_bytes(),
        Err(_) => std::fs::read(fixtures().join(fixture)).unwrap(),
    }
}

#[test]
fn wrap_rewrites_every_host_file_to_the_expected_bytes_with_a_backup_of_the_original() {
    let layout = Layout::new();
    layout.ok(&["wrap"]);
    for (fixture, place) in FILES {
        let now = std::fs::read(layout.path(place)).unwrap();
        assert!(
            now == expected(fixture),
            "{place} after wrap:\n{}",
            String::from_utf8_lossy(&now)
        );
        let original = std::fs::read(fixtures().join(fixture)).unwrap();
        let backup = layout.path(&format!("{place}.fsbroker-backup"));
        if now != original {
            assert_eq!(std::fs::read(&backup).unwrap(), original, "{place}: backup");
        } else {
            assert!(
                !backup.exists(),
                "{place}: a backup of a file left as it was"
            );
        }
    }
}

#[test]
fn unwrap_gives_every_original_back_byte_for_byte() {
    let layout = Layout::new();
    let originals = layout.snapshot();
    layout.ok(&["wrap"]);
    assert_ne!(layout.snapshot(), originals);
    let out = layout.ok(&["unwrap"]);
    assert!(out.contains("filesystem (user): unwrapped"), "{out}");
    for ((_, place), original) in FILES.iter().zip(&originals) {
        let now = std::fs::read(layout.path(place)).unwrap();
        assert!(
            &now == original,
            "{place} after unwrap:\n{}",
            String::from_utf8_lossy(&now)
        );
    }
}

#[test]
fn a_second_wrap_changes_nothing_and_says_so() {
    let layout = Layout::new();
    layout.ok(&["wrap"]);
    let once = layout.snapshot();
    let backups: Vec<_> = layout.tree();
    let out = layout.ok(&["wrap", "--sandbox"]);
    assert_eq!(layout.snapshot(), once);
    assert_eq!(layout.tree(), backups);
    assert!(
        out.contains("context7 (user): unchanged, wrapped already"),
        "{out}"
    );
    assert!(!out.contains("written to"), "{out}");
}

#[test]
fn a_sandboxed_wrap_adds_the_flag_and_unwraps_the_same() {
    let layout = Layout::new();
    let originals = layout.snapshot();
    layout.ok(&["wrap", "--sandbox", "codex"]);
    let toml = std::fs::read_to_string(layout.path("home/.codex/config.toml")).unwrap();
    assert!(
        toml.contains(r#"args = ["proxy", "--daemon", "--sandbox", "--", "npx", "-y", "@upstash/context7-mcp"]"#),
        "{toml}"
    );
    layout.ok(&["unwrap"]);
    assert_eq!(layout.snapshot(), originals);
}

#[test]
fn an_entry_wrapped_by_hand_with_flags_of_its_own_unwraps_to_its_server() {
    let layout = Layout::new();
    let file = layout.path("project/.cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        r#"{"mcpServers": {"db": {"command": "/opt/bin/fsbroker", "args": ["proxy", "--root", "/w", "--daemon=/run/s", "python3", "-m", "db"], "env": {"A": "1"}}}}"#,
    )
    .unwrap();
    layout.ok(&["unwrap", "cursor"]);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"mcpServers": {"db": {"command": "python3", "args": ["-m", "db"], "env": {"A": "1"}}}}"#
    );
}
