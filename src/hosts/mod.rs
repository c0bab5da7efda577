//! The MCP configurations of the hosts on this machine (Claude Desktop, Claude Code, VS Code,
//! Cursor, Windsurf, Zed, Gemini CLI, Codex CLI, Continue): where each keeps its servers
//! (`places.rs`), what each server entry says (`jsonc.rs` for the JSON files, `codex.rs` for
//! Codex's TOML), whether it already runs through `fsbroker proxy` (`argv.rs`), and the
//! rewrite of an entry to run through it and back (`wrap.rs`), written beside a backup and
//! never over a change another program made meanwhile (`write.rs`), or shown as a diff
//! (`diff.rs`). `fsbroker hosts`, `wrap` and `unwrap` are its only users.
//!
//! A rewrite touches only the bytes of an entry's `command` value and of its `args` array:
//! every comment, space, key order and unknown key of the file stays as it was, and so do
//! the entry's `env` and `cwd`. The original command moves, as the text it was written
//! with, behind the `--` of the proxy's arguments, which is what `unwrap` puts back: nothing
//! else needs remembering, and an entry wrapped by hand unwraps the same way.
//!
//! Everything here reads files a host, the user or a cloned project wrote: the reads are
//! bounded, the parsers' nesting is bounded, and an entry that does not have the expected
//! shape is named and left alone.

mod argv;
mod codex;
mod diff;
mod jsonc;
mod places;
mod wrap;
mod write;

pub(crate) use argv::proxied;
pub(crate) use diff::unified;
pub(crate) use places::{Env, Host, Place, Scope, discover};
pub(crate) use wrap::{Change, Options, plan};
pub(crate) use write::replace;

use std::ops::Range;

/// Largest configuration file read, in bytes: `~/.claude.json` keeps history and grows, but
/// a file past this is not a configuration this command should parse.
pub(crate) const MAX_FILE: u64 = 32 * 1024 * 1024;

/// The syntax of a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// JSON, with the comments and trailing commas JSONC allows (VS Code, Zed): read with
    /// comments allowed everywhere, since a stray comment is no reason to refuse a listing.
    Json,
    /// TOML (Codex CLI).
    Toml,
    /// YAML (Continue's `config.yaml`): named, not read.
    Yaml,
}

/// A string literal of the file: where its text is, and the string it stands for.
#[derive(Debug, Clone)]
pub(crate) struct Lit {
    /// The bytes of the literal, quotes included.
    pub span: Range<usize>,
    /// The string.
    pub value: String,
}

/// An entry's `args` array.
#[derive(Debug, Clone)]
pub(crate) struct ArgList {
    /// The byte just after the opening bracket.
    pub open: usize,
    /// The elements, each a string literal.
    pub items: Vec<Lit>,
    /// The byte just after the closing bracket.
    pub end: usize,
}

/// How a server entry reaches its server.
#[derive(Debug, Clone)]
pub(crate) enum Transport {
    /// A command the host starts.
    Stdio {
        /// The `command` value.
        command: Lit,
        /// The `args` array, when there is one.
        args: Option<ArgList>,
        /// What an added `args` member is written as, around its array: the text before the
        /// array (`, "args": ` in JSON, a line break and `args = ` in a TOML table) and after
        /// it. It goes just after the command's value.
        add_args: (&'static str, &'static str),
    },
    /// A server reached over HTTP.
    Remote {
        /// Its address.
        url: String,
        /// Whether the entry sends headers of its own.
        headers: bool,
    },
    /// An entry this command does not understand, and why.
    Unknown(String),
}

/// One server entry of a configuration file.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Its name (the key of its table or object).
    pub name: String,
    /// Its transport.
    pub transport: Transport,
}

/// The server entries found at one place of a file.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    /// What the place is called (`user`, `project`, `local /path`).
    pub scope: Scope,
    /// The entries, in the file's order.
    pub entries: Vec<Entry>,
}

/// Reads the sections of `text`, written in `format`, at the key paths of `keys` (each path
/// from the root; a `*` component stands for every key of that object). An error when the
/// file does not parse.
pub(crate) fn sections(
    format: Format,
    text: &str,
    keys: &[(Scope, Vec<&str>)],
) -> Result<Vec<Section>, String> {
    match format {
        Format::Json => jsonc::sections(text, keys),
        Format::Toml => codex::sections(text, keys),
        Format::Yaml => Err("a YAML file: not read (its servers are listed by the host)".into()),
    }
}

/// Reads `path` whole, at most [`MAX_FILE`] bytes; `None` when it does not exist.
pub(crate) fn read(path: &std::path::Path) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open: {e}")),
    };
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("larger than {MAX_FILE} bytes: not read"));
    }
    Ok(Some(bytes))
}
