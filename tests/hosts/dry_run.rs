//! `wrap --dry-run` shows the change as a unified diff and writes nothing.

use crate::layout::Layout;

#[test]
fn a_dry_run_prints_the_diff_and_leaves_every_file_and_directory_as_it_was() {
    let layout = Layout::new();
    let (files, tree) = (layout.snapshot(), layout.tree());
    let out = layout.ok(&["wrap", "--dry-run"]);
    assert_eq!(layout.snapshot(), files);
    assert_eq!(layout.tree(), tree, "a dry run left a file behind");
    let codex = layout.path("home/.codex/config.toml").display().to_string();
    assert!(
        out.contains(&format!("--- {codex}\n+++ {codex} (rewritten)\n")),
        "{out}"
    );
    assert!(out.contains("\n-command = \"npx\"\n"), "{out}");
    assert!(
        out.contains("\n+args = [\"proxy\", \"--daemon\", \"--\", \"npx\", \"-y\", \"@upstash/context7-mcp\"]\n"),
        "{out}"
    );
    assert!(!out.contains("written to"), "{out}");
}
