//! What a launcher runs: the package `npx`, `npm exec`, `uvx`, `uv tool run` or `pipx run`
//! installed and started. The launcher's command line names a package, perhaps without a
//! version; which package and version run is known only once the launcher has installed it,
//! so it is read from the package manager's own files on disk, found through the process
//! the launcher started: a descendant of the launcher that runs a file inside a
//! `node_modules/` tree, or a file in a virtual environment's `bin/`.

use super::digests::Digests;
use super::{Runs, files, procfs};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The generations below a launcher looked at.
const DEPTH: usize = 8;
/// The most processes below a launcher looked at.
const MOST: usize = 256;
/// The arguments of each process looked at for a file it runs.
const ARGS: usize = 8;
/// The directories climbed from a file to its package.
const CLIMB: usize = 64;
/// The largest manifest read (`package.json`, `METADATA`, `RECORD`).
const MAX_MANIFEST: u64 = 4 << 20;
/// The most entries of a directory looked at for a package.
const MAX_ENTRIES: usize = 4096;

/// A launcher, and the package its command line asks for (without a version) when it can
/// be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Launcher {
    /// `npx`, `npm exec`: a Node package.
    Node(Option<String>),
    /// `uvx`, `uv tool run`, `pipx run`: a Python distribution.
    Python(Option<String>),
}

/// The launcher the program named `name` is, given its arguments (its own name left out),
/// with the package its arguments ask for: the name and the version the specification
/// gives, known before anything runs (a `file:` or URL specification names none; its file
/// is among the identity's argument files).
pub(super) fn launcher(name: &str, args: &[OsString]) -> Option<(Launcher, Runs)> {
    let word = |i: usize| args.get(i).map(|a| a.as_bytes());
    let rest = |from: usize| args.get(from..).unwrap_or_default();
    let (node, spec) = match (name, word(0), word(1)) {
        ("npx", _, _) => (true, asked(rest(0), NPX)),
        ("npm", Some(b"exec" | b"x"), _) => (true, asked(rest(1), NPX)),
        ("uvx", _, _) => (false, asked(rest(0), UVX)),
        ("uv", Some(b"tool"), Some(b"run")) => (false, asked(rest(2), UVX)),
        ("pipx", Some(b"run"), _) => (false, asked(rest(1), PIPX)),
        _ => return None,
    };
    let name = spec.as_deref().and_then(bare);
    let requested = Runs {
        kind: "package".into(),
        path: None,
        version: spec
            .as_deref()
            .and_then(|s| version_of(s, name.as_deref()?)),
        name: name.clone(),
        digest: String::new(),
    };
    let launcher = if node {
        Launcher::Node(name)
    } else {
        Launcher::Python(name)
    };
    Some((launcher, requested))
}

/// The version a specification `spec` of package `name` pins, exactly: `name@1.2.3`,
/// `name==1.2.3`; none for a range, a tag or no version.
fn version_of(spec: &str, name: &str) -> Option<String> {
    let rest = spec.get(name.len()..)?;
    let v = rest.strip_prefix("==").or_else(|| rest.strip_prefix('@'))?;
    let exact = !v.is_empty()
        && v.chars().next().is_some_and(|c| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'));
    exact.then(|| v.to_owned())
}

/// A launcher's options: those that name the package, and those that take another value.
struct Options {
    package: &'static [&'static str],
    valued: &'static [&'static str],
}

const NPX: Options = Options {
    package: &["--package", "-p"],
    valued: &[
        "-c",
        "--call",
        "--workspace",
        "-w",
        "--cache",
        "--registry",
        "--userconfig",
    ],
};
const UVX: Options = Options {
    package: &["--from"],
    valued: &[
        "--with",
        "-w",
        "--with-editable",
        "--with-requirements",
        "--python",
        "-p",
        "--index",
        "--index-url",
        "-i",
        "--default-index",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--constraints",
        "-c",
        "--directory",
        "--project",
        "--cache-dir",
        "--config-file",
    ],
};
const PIPX: Options = Options {
    package: &["--spec"],
    valued: &["--python", "--index-url", "-i", "--pip-args", "--backend"],
};

/// The package specification a launcher's arguments ask for: the value of its package
/// option, else its first operand (`pkg@1.2`, `@scope/pkg@1`, `pkg==1.2`, `pkg[cli]`).
fn asked(args: &[OsString], opts: Options) -> Option<String> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let a = arg.to_string_lossy();
        let next = args.get(i + 1).map(|n| n.to_string_lossy().into_owned());
        if let Some((name, value)) = a.split_once('=')
            && opts.package.contains(&name)
        {
            return Some(value.to_owned());
        }
        if opts.package.contains(&a.as_ref()) {
            return next;
        }
        if !a.starts_with('-') {
            return Some(a.into_owned());
        }
        i += if opts.valued.contains(&a.as_ref()) {
            2
        } else {
            1
        };
    }
    None
}

/// A package specification's name; `None` for a specification that names no package of a
/// registry (a tarball, a directory, a URL, a git remote): the package is then whichever
/// the launcher installed.
fn bare(spec: &str) -> Option<String> {
    let (scope, rest) = match spec.strip_prefix('@') {
        Some(r) => ("@", r),
        None => ("", spec),
    };
    let slashes = rest.matches('/').count();
    if rest.contains(':') || spec.starts_with('.') || slashes > usize::from(!scope.is_empty()) {
        return None;
    }
    let end = rest
        .find(['@', '=', '<', '>', '!', '~', '[', ';', ' '])
        .unwrap_or(rest.len());
    let name = format!("{scope}{}", rest.get(..end).unwrap_or(rest));
    (name.len() > scope.len()).then_some(name)
}

/// The package `launcher`, started as process `pid`, runs, as read from the processes below
/// it once the server speaks; `None` (logged at debug) when no process below it runs one
/// yet, or its files cannot be read. What it says was shaped by whatever runs there, the
/// package included: it is shown, never compared (see [`super::Identity::installed`]).
pub(super) fn package(launcher: &Launcher, pid: u32, digests: &mut Digests) -> Option<Runs> {
    let mut below = procfs::descendants(pid, DEPTH, MOST);
    if let Launcher::Python(_) = launcher {
        // `uvx` may run the tool in its own process.
        below.insert(0, pid);
    }
    for p in below {
        let Some(cwd) = procfs::cwd(p) else {
            continue;
        };
        for arg in procfs::cmdline(p).iter().take(ARGS) {
            if !arg.as_bytes().contains(&b'/') {
                continue;
            }
            let file = cwd.join(arg);
            let found = match launcher {
                Launcher::Node(asked) => node_package(&file, asked.as_deref(), digests),
                Launcher::Python(Some(asked)) => python_package(&file, asked),
                Launcher::Python(None) => None,
            };
            if found.is_some() {
                return found;
            }
        }
    }
    tracing::debug!(
        pid,
        ?launcher,
        "no package found below the launcher (not installed yet, or unreadable)"
    );
    None
}

/// The Node package the file `file` belongs to: the nearest `package.json` above it in a
/// directory directly under `node_modules/` (or `node_modules/@scope/`), named `asked` when
/// that is known (npm's own package runs `npx` itself, and is never the answer). Its digest
/// covers the manifest and the file's digest.
fn node_package(file: &Path, asked: Option<&str>, digests: &mut Digests) -> Option<Runs> {
    let real = std::fs::canonicalize(file).ok()?;
    let mut dir = real.parent();
    for _ in 0..CLIMB {
        let d = dir?;
        let parent = d.parent()?;
        let in_modules = |p: &Path| p.file_name().is_some_and(|n| n == "node_modules");
        let scoped = parent
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"@"));
        if in_modules(parent) || (scoped && parent.parent().is_some_and(in_modules)) {
            let manifest = files::read_bounded(&d.join("package.json"), MAX_MANIFEST)?;
            let json: serde_json::Value = serde_json::from_slice(&manifest).ok()?;
            let field = |k: &str| json.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            let name = field("name")?;
            if asked.is_some_and(|a| a != name) || (asked.is_none() && name == "npm") {
                return None;
            }
            let entry = super::arguments::digested(&real, digests)
                .map(|f| f.digest)
                .unwrap_or_default();
            return Some(package_runs(
                d,
                name,
                field("version"),
                &[&manifest, entry.as_bytes()],
            ));
        }
        dir = Some(parent);
    }
    None
}

/// The Python distribution named `asked` in the virtual environment whose `bin/` holds
/// `file`: its `*.dist-info` in `lib/python*/site-packages/`. Its digest covers `METADATA`
/// and `RECORD` (which lists every installed file with its own hash).
fn python_package(file: &Path, asked: &str) -> Option<Runs> {
    // Not canonical: a virtual environment's `bin/python` is a link out of it.
    let bin = file
        .parent()
        .filter(|b| b.file_name().is_some_and(|n| n == "bin"))?;
    let venv = bin.parent()?;
    if !venv.join("pyvenv.cfg").is_file() {
        return None;
    }
    let want = normalized(asked);
    for lib in entries(&venv.join("lib")) {
        if !lib
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"python"))
        {
            continue;
        }
        for info in entries(&lib.join("site-packages")) {
            if info.extension().is_none_or(|e| e != "dist-info") {
                continue;
            }
            let Some(metadata) = files::read_bounded(&info.join("METADATA"), MAX_MANIFEST) else {
                continue;
            };
            let text = String::from_utf8_lossy(&metadata);
            let header = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .map(|v| v.trim().to_owned())
            };
            if header("Name:").is_none_or(|n| normalized(&n) != want) {
                continue;
            }
            let record =
                files::read_bounded(&info.join("RECORD"), MAX_MANIFEST).unwrap_or_default();
            let name = header("Name:").unwrap_or_default();
            return Some(package_runs(
                &info,
                name,
                header("Version:"),
                &[&metadata, &record],
            ));
        }
    }
    None
}

/// A Python distribution's name as the packaging rules compare them.
fn normalized(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if matches!(c, '-' | '_' | '.') {
            '-'
        } else {
            c.to_ascii_lowercase()
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// The entries of directory `dir`, at most [`MAX_ENTRIES`], sorted so that the answer does
/// not depend on the directory's order.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut all: Vec<PathBuf> = read
        .take(MAX_ENTRIES)
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    all.sort();
    all
}

/// A package's [`Runs`], its digest over `parts`, each length-prefixed.
fn package_runs(dir: &Path, name: String, version: Option<String>, parts: &[&[u8]]) -> Runs {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    Runs {
        kind: "package".into(),
        path: Some(dir.to_path_buf()),
        name: Some(name),
        version,
        digest: h.finalize().to_hex().to_string(),
    }
}
