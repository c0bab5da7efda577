//! A temporary home and project directory holding every fixture where its host looks for it,
//! and the binary run with `HOME` there and the project as its current directory.

use std::path::{Path, PathBuf};
use std::process::Output;

/// Each fixture of tests/fixtures/hosts/ and where it goes: under `home/` or `project/`.
pub const FILES: &[(&str, &str)] = &[
    (
        "claude_desktop_config.json",
        "home/.config/Claude/claude_desktop_config.json",
    ),
    ("claude.json", "home/.claude.json"),
    ("dot-mcp.json", "project/.mcp.json"),
    ("vscode-mcp.json", "home/.config/Code/User/mcp.json"),
    ("cursor-mcp.json", "home/.cursor/mcp.json"),
    (
        "windsurf-mcp_config.json",
        "home/.codeium/windsurf/mcp_config.json",
    ),
    ("zed-settings.json", "home/.config/zed/settings.json"),
    ("gemini-settings.json", "home/.gemini/settings.json"),
    ("codex-config.toml", "home/.codex/config.toml"),
    (
        "continue/memory.json",
        "project/.continue/mcpServers/memory.json",
    ),
    (
        "continue/playwright-mcp.yaml",
        "project/.continue/mcpServers/playwright-mcp.yaml",
    ),
];

/// The fixtures' directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts")
}

/// The binary under test.
pub fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fsbroker"))
}

/// A temporary home and project with every fixture in place.
pub struct Layout {
    pub tmp: tempfile::TempDir,
}

impl Layout {
    pub fn new() -> Layout {
        let layout = Layout {
            tmp: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(layout.project()).unwrap();
        for (fixture, place) in FILES {
            let to = layout.tmp.path().join(place);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(fixtures().join(fixture), &to).unwrap();
        }
        layout
    }

    pub fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    pub fn project(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    /// The path of a laid-out file (`home/...` or `project/...`).
    pub fn path(&self, place: &str) -> PathBuf {
        self.tmp.path().join(place)
    }

    /// Runs `fsbroker ARGS` with this home, from the project directory.
    pub fn run(&self, args: &[&str]) -> Output {
        std::process::Command::new(exe())
            .args(args)
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .current_dir(self.project())
            .output()
            .unwrap()
    }

    /// Runs `fsbroker ARGS` and checks that it exits 0; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "fsbroker {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The bytes of every laid-out file, in the order of [`FILES`].
    pub fn snapshot(&self) -> Vec<Vec<u8>> {
        FILES
            .iter()
            .map(|(_, place)| std::fs::read(self.path(place)).unwrap())
            .collect()
    }

    /// Every file under the temporary directory, sorted.
    pub fn tree(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![self.tmp.path().to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    todo.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }
}
