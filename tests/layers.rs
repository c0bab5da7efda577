//! The modules of `src/` stand in layers, and a module names only modules below it: no import
//! runs upward and no two modules import each other. The order is the table below, bottom
//! first; a module added to `src/` must be placed in it, and a new import that runs upward
//! fails here, with the file and the line.
//!
//! A binary of its own: it reads `src/` as text and needs none of the test helpers, so it
//! builds and answers quickly on its own (`cargo test --test layers`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every top-level module of the crate, from the ground up. A module may use the modules
/// before it in this list, never those after it.
const LAYERS: &[&str] = &[
    // Leaves: types and text, no I/O beyond their own.
    "error",
    "lines",
    "visible",
    "framing",
    "access",
    "deadline",
    "method",
    "path",
    "json",
    "jsonrpc",
    "wire",
    "locks",
    "turn",
    "lane",
    "atomic",
    // Who a server is, from the kernel and the filesystem.
    "identity",
    // The policy and what is opened from it.
    "policy",
    "limits",
    "watchdog",
    "audit",
    "consent",
    "root",
    "recovery",
    "upload",
    "config",
    "session",
    // Watching, the shared state, and the operations over it.
    "watch",
    "state",
    "ops",
    // The broker and its faces.
    "broker",
    "order",
    "serve",
    "reload",
    // The attaching end of a broker's session, the one road from every face to a broker.
    "attaching",
    // The faces. The proxy stands below the daemon: it reaches every broker through
    // `attaching`, and never names the daemon (the command line hands it the door).
    "proxy",
    // One broker for a user: the daemon's socket and console, and its sessions served in
    // process for a proxy of its own.
    "daemon",
    "fuzzing",
    "rmcp_adapter",
    // The MCP configurations of the hosts on this machine, read and rewritten for `hosts`,
    // `wrap` and `unwrap`: a face of the command line only.
    "hosts",
    // The command line, which runs the faces.
    "cli",
];

/// Names the crate root re-exports (`pub use module::{A, B};` in `src/lib.rs`), and the
/// module each comes from: a name the root re-exports stands for that module.
fn reexports() -> Vec<(String, String)> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("read lib.rs");
    let mut out = Vec::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.trim_end_matches(';').split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            // `run as serve` is re-exported as `serve`.
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            if !name.is_empty() {
                out.push((name.to_owned(), module.to_owned()));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
}

/// The top-level module a file of `src/` belongs to; `None` for the crate root and the binary.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    if first == "lib.rs" || first == "bin" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_owned())
}

/// The modules a line of code names through `crate::`, with `crate::{A, b::C}` opened and a
/// re-exported name taken for the module it comes from.
fn named(line: &str, reexports: &[(String, String)]) -> Vec<String> {
    named_after(line, "crate::")
        .into_iter()
        .map(
            |word| match reexports.iter().find(|(name, _)| *name == word) {
                Some((_, module)) => module.clone(),
                None => word,
            },
        )
        .collect()
}

/// What is wrong with `module` (ranked `mine`) naming `other` at `at`: nothing when `other`
/// stands below it; `unplaced` says why a name the table does not rank is wrong.
fn upward(
    rank: &BTreeMap<&str, usize>,
    mine: usize,
    at: &str,
    module: &str,
    other: &str,
    unplaced: &str,
) -> Option<String> {
    match rank.get(other) {
        Some(&theirs) if theirs < mine => None,
        Some(_) => Some(format!(
            "{at}: `{module}` uses `{other}`, which stands above it"
        )),
        None => Some(format!("{at}: `{module}` uses `{other}`: {unplaced}")),
    }
}

#[test]
fn every_import_in_src_runs_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let reexports = reexports();
    assert!(
        reexports.iter().any(|(n, m)| n == "serve" && m == "serve")
            && reexports
                .iter()
                .any(|(n, m)| n == "Broker" && m == "broker"),
        "the re-exports of lib.rs were not read: {reexports:?}"
    );
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(&mine) = rank.get(module.as_str()) else {
            wrong.push(format!(
                "{}: module `{module}` is not placed in LAYERS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read file");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // Doc links and comments name modules without importing them.
            if code.starts_with("//") {
                continue;
            }
            for other in named(code, &reexports) {
                seen += 1;
                if other == module {
                    continue;
                }
                let at = format!("{}:{}", file.display(), n + 1);
                wrong.extend(upward(
                    &rank,
                    mine,
                    &at,
                    &module,
                    &other,
                    "LAYERS does not place it",
                ));
            }
        }
    }
    assert!(seen > 50, "too few imports found ({seen}): is src/ read?");
    assert!(
        wrong.is_empty(),
        "imports that run upward:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_module_in_lib_rs_is_placed() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("read lib.rs");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    assert!(
        declared.len() > 10,
        "modules of lib.rs not found: {declared:?}"
    );
    for m in declared {
        assert!(
            LAYERS.contains(&m),
            "`{m}` is declared in lib.rs but not placed in LAYERS"
        );
    }
}

/// The modules of `src/proxy/`, from the ground up, as [`LAYERS`] is for `src/`: a module
/// uses only those before it, and none uses the proxy's root (`proxy/mod.rs`, which wires
/// them together): what the readers and the judge share lives in `relay`, below them.
const PROXY_LAYERS: &[&str] = &[
    // The vocabulary and the exact reader of a message.
    "names",
    "strict",
    "peek",
    // The connection to a local server, and the proxy's own requests to the host.
    "link",
    "host_channel",
    "cancel",
    "elicit",
    // What the server's own command line names, which the sandbox checks too.
    "own_dirs",
    "sandbox",
    // What the session knows, and the judge that decides with it.
    "era",
    "relay",
    "judge",
    // The tasks: the lane to the broker and the two readers; the remote transport.
    "backend",
    "from_server",
    "from_host",
    "remote",
];

/// The names a line of code reaches through `prefix` (`crate::proxy::`, `super::`), with
/// `prefix{A, b::C}` opened.
fn named_after(line: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(prefix) {
        // `super::super::x` is read once, for its last `super::`.
        let before = &rest[..i];
        rest = &rest[i + prefix.len()..];
        if prefix == "super::" && (before.ends_with("super::") || rest.starts_with("super::")) {
            continue;
        }
        let group = rest
            .strip_prefix('{')
            .map(|g| g.split('}').next().unwrap_or(""));
        let items: Vec<&str> = match group {
            Some(g) => g.split(',').collect(),
            None => vec![rest],
        };
        for item in items {
            let word: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !word.is_empty() && word != "self" {
                out.push(word);
            }
        }
    }
    out
}

/// The imports of the modules under `src/{dir}` (named `crate::{path}::` or through
/// `super::`) that break `table`: a module that uses one after it, or one the table does not
/// place. With `root_shared`, names the directory's `mod.rs` defines for its modules (shared
/// types) may be used; otherwise using the root is wrong too. Returns how many names were
/// read, and what is wrong.
fn layered(dir: &str, table: &[&str], root_shared: bool) -> (usize, Vec<String>) {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut files = Vec::new();
    rust_files(&base, &mut files);
    files.sort();
    let rank: BTreeMap<&str, usize> = table.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let by_crate = format!("crate::{}::", dir.replace('/', "::"));
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in &files {
        let rel = file.strip_prefix(&base).expect("under the directory");
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        if parts == ["mod.rs"] {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs");
        let Some(&mine) = rank.get(module) else {
            wrong.push(format!(
                "{}: module `{module}` is not placed in the table of src/{dir}",
                file.display()
            ));
            continue;
        };
        // How a file names its siblings: `super::` from a file directly in the directory
        // (or a subdirectory's `mod.rs`), `super::super::` one level down.
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
        let up = "super::".repeat(depth);
        let text = std::fs::read_to_string(file).expect("read file");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // A file's own test module comes last; its `super::` is the file, not the root.
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            let mut names = named_after(code, &by_crate);
            if depth == 1 {
                names.extend(named_after(code, "super::"));
            } else if code.contains(&up) {
                names.extend(named_after(&code.replace(&up, "ROOT::"), "ROOT::"));
            }
            for other in names {
                seen += 1;
                if other == module || (root_shared && !rank.contains_key(other.as_str())) {
                    continue;
                }
                let at = format!("{}:{}", file.display(), n + 1);
                wrong.extend(upward(
                    &rank,
                    mine,
                    &at,
                    module,
                    &other,
                    "it is the directory's root",
                ));
            }
        }
    }
    (seen, wrong)
}

#[test]
fn every_import_in_the_proxy_runs_downward() {
    let (seen, wrong) = layered("proxy", PROXY_LAYERS, false);
    assert!(
        seen > 30,
        "too few imports found ({seen}): is src/proxy read?"
    );
    assert!(
        wrong.is_empty(),
        "imports in the proxy that run upward:\n{}",
        wrong.join("\n")
    );
}

/// The modules of `src/proxy/sandbox/`, from the ground up. Its `mod.rs` holds the types
/// they share (the options, the error, the roots), which they may use.
const SANDBOX_LAYERS: &[&str] = &[
    // Facts of the kernel and the system, each on its own.
    "caps",
    "home",
    "privileges",
    "reaper",
    "right",
    "trace",
    // Where the roots come from, the places kept closed, the program run.
    "roots",
    "private",
    "launcher",
    "program",
    // The profile built from them, enforced in the child, and the helper that does it.
    "profile",
    "enforce",
    "helper",
];

/// The modules of `src/proxy/era/`, from the ground up; its `mod.rs` holds the session's
/// era state, which they share.
const ERA_LAYERS: &[&str] = &["park", "rule", "scan", "upstream", "rounds"];

/// The modules of `src/proxy/remote/`, from the ground up; none uses the root.
const REMOTE_LAYERS: &[&str] = &[
    // The configuration and what fails.
    "config", "error",
    // The wire: events, what waits for an answer, descriptors, parameters.
    "sse", "pending", "fds", "params", // The server's key, read from an answer's certificate.
    "pin",    // The session and its HTTP exchanges.
    "session", "http", "answer", "deliver", "listen",
    // The two transports, the requests over them, and the driver of it all.
    "modern", "legacy", "requests", "renew", "driver",
];

/// The modules of `src/daemon/`, from the ground up. Its `mod.rs` only re-exports what the
/// command line takes (the front door, the attached sessions, the listener).
const DAEMON_LAYERS: &[&str] = &[
    // The socket's place, the key, the proven connection; lines and small helpers.
    "socket",
    "secret",
    "proof",
    "line",
    "hush",
    "idle",
    "lineage",
    "greeting",
    "usage",
    // The attached sessions' questions, the protocol and its clients.
    "questions",
    "protocol",
    // What the requests are answered from: the audit ring, the store, the broker, the console.
    "log",
    "recovery",
    "control",
    "console",
    "background",
    // Sessions served (over the socket, or in process), the services, the one dispatch.
    "attach",
    "in_process",
    "services",
    "dispatch",
    // The server, its front door, a library host's session, the start for attaching commands.
    "server",
    "front",
    "session",
    "autostart",
];

#[test]
fn every_import_in_the_daemon_and_the_proxys_sandbox_era_and_remote_runs_downward() {
    for (dir, table, root_shared) in [
        ("proxy/sandbox", SANDBOX_LAYERS, true),
        ("proxy/era", ERA_LAYERS, true),
        ("proxy/remote", REMOTE_LAYERS, false),
        ("daemon", DAEMON_LAYERS, true),
    ] {
        let (seen, wrong) = layered(dir, table, root_shared);
        assert!(
            seen > 5,
            "too few imports found ({seen}): is src/{dir} read?"
        );
        assert!(
            wrong.is_empty(),
            "imports in src/{dir} that run upward:\n{}",
            wrong.join("\n")
        );
    }
}
