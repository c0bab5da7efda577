//! A server's own installation: the directory of its executable (and the prefix above a
//! `bin` directory), the interpreter its script names, its script's package, and the caches
//! of the common launchers (`npx`, `node`, `uvx`, `uv`, `python` with a virtual environment).
//!
//! Everything found here is inferred from the command line and the environment, so it is
//! held to a [`Guard`]: no inferred directory may be `/`, the home directory or one of its
//! ancestors, or contain a root; such a directory is left out (the single file is allowed
//! instead where there is one).

use super::profile::Right;
use std::path::{Path, PathBuf};

/// One inferred path.
pub(super) struct Found {
    pub path: PathBuf,
    pub right: Right,
    pub why: String,
}

/// What an inferred directory must not be.
pub(super) struct Guard {
    home: Option<PathBuf>,
    roots: Vec<PathBuf>,
}

impl Guard {
    pub(super) fn new(home: Option<PathBuf>, roots: Vec<PathBuf>) -> Guard {
        Guard { home, roots }
    }

    /// Whether `dir` may be opened to the server whole.
    fn allows(&self, dir: &Path) -> bool {
        dir.is_absolute()
            && dir.parent().is_some()
            && !self.home.as_deref().is_some_and(|h| h.starts_with(dir))
            && !self.roots.iter().any(|r| r.starts_with(dir))
    }
}

/// Collects what the launcher of `command` needs.
struct Finder<'a> {
    guard: &'a Guard,
    found: Vec<Found>,
}

impl Finder<'_> {
    fn dir(&mut self, dir: &Path, right: Right, why: &str) {
        if !self.guard.allows(dir) {
            tracing::info!(dir = %dir.display(), "sandbox: {why}: too wide to allow whole, left out");
            return;
        }
        self.found.push(Found {
            path: dir.to_path_buf(),
            right,
            why: why.to_owned(),
        });
    }

    /// A file's directory, or the file alone when its directory is too wide.
    fn file_or_dir(&mut self, file: &Path, why: &str) {
        match file.parent() {
            Some(d) if self.guard.allows(d) => self.dir(d, Right::Exec, why),
            _ => self.found.push(Found {
                path: file.to_path_buf(),
                right: Right::Exec,
                why: why.to_owned(),
            }),
        }
    }

    /// A cache the launcher writes, created if missing so the server can use it.
    fn cache(&mut self, dir: PathBuf, why: &str) {
        if !self.guard.allows(&dir) {
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::info!(dir = %dir.display(), error = %e, "sandbox: cannot create a launcher cache");
        }
        self.dir(&dir, Right::Write, why);
    }

    /// An executable: its directory, its real directory, and the prefix above a `bin`.
    fn executable(&mut self, named: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(named).ok()?;
        for p in [named, real.as_path()] {
            if let Some(d) = p.parent() {
                self.dir(d, Right::Exec, "the server's executable");
                if d.file_name().is_some_and(|n| n == "bin")
                    && let Some(prefix) = d.parent()
                {
                    self.dir(prefix, Right::Exec, "the executable's installation");
                }
            }
        }
        Some(real)
    }
}

/// What the server started by `command` (in `cwd`) needs of its installation.
pub(super) fn installation(command: &[String], cwd: &Path, guard: &Guard) -> Vec<Found> {
    let mut f = Finder {
        guard,
        found: Vec::new(),
    };
    let Some((program, args)) = command.split_first() else {
        return f.found;
    };
    let Some(named) = resolve(program, cwd) else {
        return f.found;
    };
    let Some(real) = f.executable(&named) else {
        return f.found;
    };
    let mut names = vec![base(&named), base(&real)];
    // A script names its interpreter; one level is followed.
    if let Some(interpreter) = shebang(&real).and_then(|i| resolve(&i, cwd)) {
        names.push(base(&interpreter));
        if let Some(r) = f.executable(&interpreter) {
            names.push(base(&r));
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let script = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(|a| cwd.join(a))
        .filter(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok());
    if let Some(s) = &script {
        f.file_or_dir(s, "the server's script");
    }
    let is = |pred: &dyn Fn(&str) -> bool| names.iter().any(|n| pred(n));
    if is(&|n| matches!(n, "node" | "nodejs" | "npx" | "npm")) {
        if let Some(s) = &script {
            node_package(&mut f, s);
        }
        let cache = var("npm_config_cache").or_else(|| home.as_ref().map(|h| h.join(".npm")));
        if is(&|n| matches!(n, "npx" | "npm"))
            && let Some(c) = cache
        {
            f.cache(c, "npm's cache");
        }
        if let Some(rc) = home
            .as_ref()
            .map(|h| h.join(".npmrc"))
            .filter(|p| p.is_file())
        {
            f.found.push(Found {
                path: rc,
                right: Right::Read,
                why: "npm's configuration".to_owned(),
            });
        }
    }
    if is(&|n| n.starts_with("python")) {
        python(&mut f, &named, &real, home.as_deref());
    }
    if is(&|n| matches!(n, "uv" | "uvx")) {
        let cache = var("UV_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("uv")))
            .or_else(|| home.as_ref().map(|h| h.join(".cache/uv")));
        let data = var("XDG_DATA_HOME")
            .map(|d| d.join("uv"))
            .or_else(|| home.as_ref().map(|h| h.join(".local/share/uv")));
        for (dir, why) in [(cache, "uv's cache"), (data, "uv's tools and Pythons")] {
            if let Some(d) = dir {
                f.cache(d, why);
            }
        }
        if let Some(c) = home
            .as_ref()
            .map(|h| h.join(".config/uv"))
            .filter(|p| p.is_dir())
        {
            f.dir(&c, Right::Read, "uv's configuration");
        }
    }
    f.found
}

/// A Node script's package (the nearest directory above it with a `package.json`) and every
/// `node_modules` above that, where Node looks for the packages it imports.
fn node_package(f: &mut Finder<'_>, script: &Path) {
    let mut package = None;
    let mut at = script.parent();
    while let Some(d) = at {
        if d.join("package.json").is_file() {
            package = Some(d.to_path_buf());
            break;
        }
        at = d.parent();
    }
    if let Some(p) = &package {
        f.dir(p, Right::Exec, "the script's package");
    }
    let mut at = package.as_deref().or(script.parent());
    while let Some(d) = at {
        let modules = d.join("node_modules");
        if modules.is_dir() {
            f.dir(&modules, Right::Exec, "Node packages");
        }
        at = d.parent();
    }
}

/// A Python's virtual environment (a `pyvenv.cfg` above its `bin`) with the installation it
/// was made from, and pyenv's root when the command goes through its shims.
fn python(f: &mut Finder<'_>, named: &Path, real: &Path, home: Option<&Path>) {
    if let Some(venv) = named.parent().and_then(Path::parent)
        && let Ok(cfg) = std::fs::read_to_string(venv.join("pyvenv.cfg"))
    {
        f.dir(venv, Right::Exec, "the virtual environment");
        let base = cfg.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "home").then(|| PathBuf::from(v.trim()))
        });
        if let Some(b) = base.and_then(|b| std::fs::canonicalize(b).ok()) {
            f.dir(&b, Right::Exec, "the environment's Python");
            if b.file_name().is_some_and(|n| n == "bin")
                && let Some(prefix) = b.parent()
            {
                f.dir(prefix, Right::Exec, "the environment's Python");
            }
        }
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".pyenv")));
    if let Some(root) = pyenv
        && (named.starts_with(&root) || real.starts_with(&root))
    {
        f.dir(&root, Right::Exec, "pyenv");
    }
}

/// The program's path: as given when it has a `/`, else the first executable of that name on
/// `PATH`.
fn resolve(program: &str, cwd: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(cwd.join(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| cwd.join(d).join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program a `#!` line runs: its interpreter, or with `env`, the program `env` runs.
fn shebang(file: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head.get(..n)?.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if base(Path::new(interpreter)) == "env" {
        words.find(|w| !w.starts_with('-')).map(str::to_owned)
    } else {
        Some(interpreter.to_owned())
    }
}

fn base(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
