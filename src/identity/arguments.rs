//! The files a command's arguments name: each is part of who the server is.
//!
//! Reading an interpreter's options to find its script can be wrong (an option this code does
//! not know takes a value, `bash -O extglob run.sh`; a wrapper stands in front, `env python3
//! server.py`, `nice`, `uv run`), and a wrong guess would leave the script that really runs
//! out of the identity, so that an edit to it went unnoticed. So every argument that names a
//! regular file (or a value after `=` in one, or a `file:` specification) is digested, whatever
//! the program: a guess can add a file, never lose one. A directory Python runs, or a module
//! `-m` names from the working directory, is its `__main__.py` (or the module's file).

use super::digests::Digests;
use super::{ArgFile, FileDigest};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most arguments looked at.
const MAX_ARGS: usize = 64;
/// The most files kept.
const MAX_FILES: usize = 16;
/// The largest file digested; a larger one is known by its size and change time, so that a
/// server cannot hold up its own start by naming a huge file, and a change still shows.
const MAX_BYTES: u64 = 256 << 20;

/// The files the arguments `args` (the program's name left out) name, against `cwd`, each
/// once, in order.
pub(super) fn arg_files(args: &[OsString], cwd: &Path, digests: &mut Digests) -> Vec<ArgFile> {
    let mut out: Vec<ArgFile> = Vec::new();
    let mut module_next = false;
    for arg in args.iter().take(MAX_ARGS) {
        let bytes = arg.as_bytes();
        let mut candidates: Vec<PathBuf> = Vec::new();
        if module_next {
            candidates.extend(module_files(bytes, cwd));
        }
        module_next = bytes == b"-m";
        let value = match bytes.iter().position(|b| *b == b'=') {
            Some(i) if bytes.starts_with(b"-") => &bytes[i + 1..],
            _ => bytes,
        };
        let value = value.strip_prefix(b"file:").unwrap_or(value);
        if !value.is_empty() {
            let path = cwd.join(std::ffi::OsStr::from_bytes(value));
            candidates.push(path.join("__main__.py"));
            candidates.push(path);
        }
        for path in candidates {
            if out.len() >= MAX_FILES {
                return out;
            }
            if let Some(file) = digested(&path, digests)
                && !out.iter().any(|f| f.path == file.path)
            {
                out.push(file);
            }
        }
    }
    out
}

/// The files `python3 -m NAME` may run from `cwd`: `NAME.py`, `NAME/__main__.py`, with the
/// dots of a dotted name as directories.
fn module_files(name: &[u8], cwd: &Path) -> Vec<PathBuf> {
    if name.is_empty() || name.starts_with(b"-") || name.contains(&b'/') {
        return Vec::new();
    }
    let rel: PathBuf = name
        .split(|b| *b == b'.')
        .map(std::ffi::OsStr::from_bytes)
        .collect();
    let dir = cwd.join(&rel);
    let mut file = dir.clone().into_os_string();
    file.push(".py");
    vec![PathBuf::from(file), dir.join("__main__.py")]
}

/// `path` as an argument file: a regular file, digested (or, past [`MAX_BYTES`], known by its
/// size and change time, so that naming a huge or sparse file holds nothing up).
pub(super) fn digested(path: &Path, digests: &mut Digests) -> Option<ArgFile> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    if meta.size() > MAX_BYTES {
        let real = std::fs::canonicalize(path).ok()?;
        return Some(ArgFile {
            path: real,
            digest: format!(
                "size:{}:ctime:{}.{}",
                meta.size(),
                meta.ctime(),
                meta.ctime_nsec()
            ),
        });
    }
    let FileDigest { real, digest, .. } = digests.of(path)?;
    Some(ArgFile { path: real, digest })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn every_argument_that_names_a_file_is_digested_however_the_options_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        for (name, text) in [("run.sh", "echo 1"), (".env", "A=1"), ("index.js", "1")] {
            std::fs::write(d.join(name), text).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::create_dir_all(d.join("app")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("app/__main__.py"), "main").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(d.join("pkg/sub")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("pkg/sub.py"), "sub").unwrap_or_else(|e| panic!("{e}"));
        let mut digests = Digests::at(d.join("cache.json"));
        let names = |list: &[&str], digests: &mut Digests| -> Vec<String> {
            arg_files(&args(list), d, digests)
                .iter()
                .filter_map(|f| f.path.strip_prefix(d).ok())
                .map(|p| p.display().to_string())
                .collect()
        };
        assert_eq!(
            names(&["-O", "extglob", "run.sh"], &mut digests),
            ["run.sh"]
        );
        assert_eq!(
            names(&["--env-file", ".env", "index.js"], &mut digests),
            [".env", "index.js"]
        );
        assert_eq!(names(&["--env-file=.env"], &mut digests), [".env"]);
        assert_eq!(names(&["app"], &mut digests), ["app/__main__.py"]);
        assert_eq!(names(&["-m", "pkg.sub"], &mut digests), ["pkg/sub.py"]);
        assert_eq!(names(&["-m", "app"], &mut digests), ["app/__main__.py"]);
        assert_eq!(names(&["run.sh", "./run.sh"], &mut digests), ["run.sh"]);
        assert_eq!(
            names(&["--flag", "nothing", "/"], &mut digests),
            Vec::<String>::new()
        );
        let tgz = d.join("p.tgz");
        std::fs::write(&tgz, "tar").unwrap_or_else(|e| panic!("{e}"));
        let spec = format!("--package=file:{}", tgz.display());
        assert_eq!(names(&[&spec], &mut digests), ["p.tgz"]);
        // An edit shows.
        let before = arg_files(&args(&["run.sh"]), d, &mut digests);
        std::fs::write(d.join("run.sh"), "echo 2").unwrap_or_else(|e| panic!("{e}"));
        let after = arg_files(&args(&["run.sh"]), d, &mut digests);
        assert_ne!(before, after);
    }
}
