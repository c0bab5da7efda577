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
    // One broker for a user: the daemon's socket, and the attaching end every face uses.
    "daemon",
    "proxy",
    "fuzzing",
    "rmcp_adapter",
    // The command line, which runs the faces.
    "cli",
];

/// Names the crate root re-exports, and the module each comes from.
const REEXPORTS: &[(&str, &str)] = &[
    ("Access", "access"),
    ("AuditLog", "audit"),
    ("AuditVerdict", "audit"),
    ("Broker", "broker"),
    ("BrokerBuilder", "broker"),
    ("Notification", "broker"),
    ("Notifications", "broker"),
    ("ConsentAnswer", "consent"),
    ("ConsentDecision", "consent"),
    ("ConsentProvider", "consent"),
    ("ConsentRequest", "consent"),
    ("MountPath", "path"),
    ("Error", "error"),
    ("ErrorKind", "error"),
    ("Reason", "error"),
    ("UnknownReason", "error"),
    ("Policy", "policy"),
    ("ReloadReport", "reload"),
    ("watch_policy", "reload"),
    ("Root", "root"),
    ("Roots", "root"),
    ("serve", "serve"),
];

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
fn named(line: &str) -> Vec<String> {
    named_after(line, "crate::")
        .into_iter()
        .map(
            |word| match REEXPORTS.iter().find(|(name, _)| *name == word) {
                Some((_, module)) => (*module).to_owned(),
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
            for other in named(code) {
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
    // The tasks: the broker's lane and the two readers; the remote transport.
    "lane",
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

#[test]
fn every_import_in_the_proxy_runs_downward() {
    let proxy = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/proxy");
    let mut files = Vec::new();
    rust_files(&proxy, &mut files);
    files.sort();
    let rank: BTreeMap<&str, usize> = PROXY_LAYERS
        .iter()
        .enumerate()
        .map(|(i, m)| (*m, i))
        .collect();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in &files {
        let rel = file.strip_prefix(&proxy).expect("under src/proxy");
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        if parts == ["mod.rs"] {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs");
        let Some(&mine) = rank.get(module) else {
            wrong.push(format!(
                "{}: module `{module}` is not placed in PROXY_LAYERS",
                file.display()
            ));
            continue;
        };
        // How a file names the proxy's own modules: `super::` from a file directly in
        // `src/proxy/` (or a directory's `mod.rs`), `super::super::` one level down.
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
        let up = "super::".repeat(depth);
        let text = std::fs::read_to_string(file).expect("read file");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // A file's own test module comes last; its `super::` is the file, not the proxy.
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            let mut names = named_after(code, "crate::proxy::");
            if depth == 1 {
                names.extend(named_after(code, "super::"));
            } else if code.contains(&up) {
                names.extend(named_after(&code.replace(&up, "PROXY::"), "PROXY::"));
            }
            for other in names {
                seen += 1;
                if other == module {
                    continue;
                }
                let at = format!("{}:{}", file.display(), n + 1);
                wrong.extend(upward(
                    &rank,
                    mine,
                    &at,
                    module,
                    &other,
                    "it is the proxy's root",
                ));
            }
        }
    }
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
