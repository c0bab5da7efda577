//! Where each host keeps its MCP servers on Linux, as each host's documentation gives it
//! (docs/hosts.md cites the pages, and names the macOS and Windows places too): a user file
//! under the home or configuration directory, and a project file looked for in the project
//! directory. `HOME`, `XDG_CONFIG_HOME` and `CODEX_HOME` are honoured as the hosts honour
//! them.

use super::Format;
use std::path::{Path, PathBuf};

/// A host this command knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
    /// Claude Desktop.
    ClaudeDesktop,
    /// Claude Code.
    ClaudeCode,
    /// Visual Studio Code.
    VsCode,
    /// Cursor.
    Cursor,
    /// Windsurf.
    Windsurf,
    /// Zed.
    Zed,
    /// Gemini CLI.
    Gemini,
    /// Codex CLI.
    Codex,
    /// Continue.
    Continue,
}

impl Host {
    /// Every host, in the order they are listed.
    pub(crate) const ALL: [Host; 9] = [
        Host::ClaudeDesktop,
        Host::ClaudeCode,
        Host::VsCode,
        Host::Cursor,
        Host::Windsurf,
        Host::Zed,
        Host::Gemini,
        Host::Codex,
        Host::Continue,
    ];

    /// The name the command line takes and prints.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Host::ClaudeDesktop => "claude-desktop",
            Host::ClaudeCode => "claude-code",
            Host::VsCode => "vscode",
            Host::Cursor => "cursor",
            Host::Windsurf => "windsurf",
            Host::Zed => "zed",
            Host::Gemini => "gemini",
            Host::Codex => "codex",
            Host::Continue => "continue",
        }
    }

    /// The host called `name`.
    pub(crate) fn parse(name: &str) -> Option<Host> {
        Host::ALL.into_iter().find(|h| h.name() == name)
    }
}

/// Which of a host's configurations a section is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The user's, for every project.
    User,
    /// The project's (a file in the project directory).
    Project,
    /// The user's for one project, kept in the user's file (Claude Code's `local` scope),
    /// with that project's directory.
    Local(String),
}

impl Scope {
    /// The name printed.
    pub(crate) fn label(&self) -> String {
        match self {
            Scope::User => "user".into(),
            Scope::Project => "project".into(),
            Scope::Local(dir) => format!("local {dir}"),
        }
    }
}

/// One configuration file of a host, and where in it the servers are.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// The host.
    pub host: Host,
    /// The file.
    pub file: PathBuf,
    /// Its syntax.
    pub format: Format,
    /// The key paths of its server tables, each with its scope; `*` stands for every key
    /// (Claude Code's projects, each a `Local` scope).
    pub keys: Vec<(Scope, Vec<&'static str>)>,
}

/// The directories the places are found from.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// `HOME`.
    pub home: PathBuf,
    /// `XDG_CONFIG_HOME`, else `HOME/.config`.
    pub config: PathBuf,
    /// `CODEX_HOME`, else `HOME/.codex`.
    pub codex: PathBuf,
    /// The project directory (`--project`, else the current directory).
    pub project: PathBuf,
}

impl Env {
    /// The directories from the environment; an error without `HOME`.
    pub(crate) fn from_env(project: Option<PathBuf>) -> Result<Env, String> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let home = var("HOME").ok_or("HOME is not set to an absolute path")?;
        let project = match project {
            Some(p) => p,
            None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
        };
        Ok(Env {
            config: var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            codex: var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
            home,
            project,
        })
    }
}

/// Every place of the `hosts` (all when empty) that exists as a file, in the order of
/// [`Host::ALL`], user files before project ones.
pub(crate) fn discover(env: &Env, hosts: &[Host]) -> Vec<Place> {
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for host in Host::ALL {
        if !hosts.is_empty() && !hosts.contains(&host) {
            continue;
        }
        for place in places(env, host) {
            // A link is followed (dotfiles are often links); the write replaces its target.
            // Run from the home directory, a project file is the user's file (Gemini's,
            // Cursor's): it is listed, and rewritten, once.
            let Ok(real) = std::fs::canonicalize(&place.file) else {
                continue;
            };
            if real.is_file() && !seen.contains(&real) {
                seen.push(real);
                out.push(place);
            }
        }
    }
    out
}

/// The places `host` may keep servers in, whether they exist or not.
fn places(env: &Env, host: Host) -> Vec<Place> {
    let (home, config, project) = (&env.home, &env.config, &env.project);
    let json = |file: PathBuf, scope: Scope, key: &'static str| Place {
        host,
        file,
        format: Format::Json,
        keys: vec![(scope, vec![key])],
    };
    match host {
        Host::ClaudeDesktop => vec![json(
            config.join("Claude/claude_desktop_config.json"),
            Scope::User,
            "mcpServers",
        )],
        Host::ClaudeCode => vec![
            Place {
                host,
                file: home.join(".claude.json"),
                format: Format::Json,
                keys: vec![
                    (Scope::User, vec!["mcpServers"]),
                    (
                        Scope::Local(String::new()),
                        vec!["projects", "*", "mcpServers"],
                    ),
                ],
            },
            json(project.join(".mcp.json"), Scope::Project, "mcpServers"),
        ],
        Host::VsCode => vec![
            json(config.join("Code/User/mcp.json"), Scope::User, "servers"),
            json(project.join(".vscode/mcp.json"), Scope::Project, "servers"),
        ],
        Host::Cursor => vec![
            json(home.join(".cursor/mcp.json"), Scope::User, "mcpServers"),
            json(
                project.join(".cursor/mcp.json"),
                Scope::Project,
                "mcpServers",
            ),
        ],
        Host::Windsurf => vec![json(
            home.join(".codeium/windsurf/mcp_config.json"),
            Scope::User,
            "mcpServers",
        )],
        Host::Zed => vec![
            json(
                config.join("zed/settings.json"),
                Scope::User,
                "context_servers",
            ),
            json(
                project.join(".zed/settings.json"),
                Scope::Project,
                "context_servers",
            ),
        ],
        Host::Gemini => vec![
            json(
                home.join(".gemini/settings.json"),
                Scope::User,
                "mcpServers",
            ),
            json(
                project.join(".gemini/settings.json"),
                Scope::Project,
                "mcpServers",
            ),
        ],
        Host::Codex => [
            (env.codex.join("config.toml"), Scope::User),
            (project.join(".codex/config.toml"), Scope::Project),
        ]
        .into_iter()
        .map(|(file, scope)| Place {
            host,
            file,
            format: Format::Toml,
            keys: vec![(scope, vec!["mcp_servers"])],
        })
        .collect(),
        Host::Continue => continue_places(host, home, project),
    }
}

/// Continue's places: `~/.continue/config.yaml` (YAML, named only), and the block files of
/// `.continue/mcpServers/` in the home and the project, whose JSON ones have the
/// `mcpServers` map of Claude Desktop's file.
fn continue_places(host: Host, home: &Path, project: &Path) -> Vec<Place> {
    let mut out = vec![Place {
        host,
        file: home.join(".continue/config.yaml"),
        format: Format::Yaml,
        keys: vec![(Scope::User, vec!["mcpServers"])],
    }];
    for (dir, scope) in [
        (home.join(".continue/mcpServers"), Scope::User),
        (project.join(".continue/mcpServers"), Scope::Project),
    ] {
        out.extend(block_files(&dir).into_iter().map(|file| {
            let format = if file.extension().is_some_and(|e| e == "json") {
                Format::Json
            } else {
                Format::Yaml
            };
            Place {
                host,
                file,
                format,
                keys: vec![(scope.clone(), vec!["mcpServers"])],
            }
        }));
    }
    out
}

/// Most block files read from one directory: a directory of thousands is not a configuration.
const MAX_BLOCK_FILES: usize = 256;

/// The `.json`, `.yaml` and `.yml` files of `dir`, sorted, at most [`MAX_BLOCK_FILES`].
fn block_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
        })
        .take(MAX_BLOCK_FILES)
        .collect();
    files.sort();
    files
}
