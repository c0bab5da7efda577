//! A server's own installation: the directory of its executable (and the prefix above a
//! `bin` directory), the interpreter its script names, its script's package, and what the
//! common launchers (`npx`, `node`, `uvx`, `uv`, `python` with a virtual environment) need.
//!
//! Everything found here is inferred from the command line, the environment and files on
//! disk, so it is held to a [`Guard`]:
//! - no inferred directory may be `/`, the home directory, one of its ancestors or one of
//!   its direct children (`~/.local`, `~/.cargo`, `~/.ssh`), a directory anyone may write
//!   (`/tmp`, `/var/tmp`, `/dev/shm`), or a directory that contains a root, the private
//!   temporary directory or a path the user allowed for writing, nor one that holds or lies
//!   within a private place of the broker (the daemon's socket directory with its key, the
//!   state directory, the store, the console's grants, the logs); such a directory is left
//!   out (the single file is allowed instead where there is one);
//! - nothing whose route passes through a place the server may write (a writable root, the
//!   private temporary directory, a writable allowed path) is inferred from or followed: not
//!   a link there nor its target, not a `#!` line or a `pyvenv.cfg` there, not the directory
//!   above such a program's `bin`; a server could have written it, and its next start would
//!   be wider;
//! - the launchers' shared caches are never opened for writing: code the user later runs
//!   outside the sandbox lives there. The server gets private caches in its temporary
//!   directory instead (the profile's environment points the launcher at them).

use super::private::PrivatePlaces;
use super::right::Right;
use super::trace::trace;
use std::path::{Path, PathBuf};

/// One inferred path.
pub(super) struct Found {
    pub(crate) path: PathBuf,
    pub(crate) right: Right,
    pub(crate) why: String,
}

/// What an inferred directory must not be, and which paths may not steer the profile.
pub(super) struct Guard {
    /// Every name of the home directory (`HOME` and the password database's, as given and as
    /// real paths); the first is the one launchers use.
    homes: Vec<PathBuf>,
    /// Directories the profile opens anyway (roots, the temporary directory, allowed paths):
    /// an inferred directory must not contain one.
    opened: Vec<PathBuf>,
    /// Directories the server may write, by real path: nothing whose route passes through one
    /// is inferred from or followed.
    writable: Vec<PathBuf>,
    /// The broker's private places: an inferred directory that holds one, or lies within
    /// one, is not opened whole (a script's directory falls back to the script alone).
    private: PrivatePlaces,
    /// Where relative paths start.
    cwd: PathBuf,
}

impl Guard {
    pub(super) fn new(
        homes: Vec<PathBuf>,
        opened: Vec<PathBuf>,
        writable: Vec<PathBuf>,
        private: PrivatePlaces,
        cwd: PathBuf,
    ) -> Guard {
        Guard {
            homes,
            opened,
            writable,
            private,
            cwd,
        }
    }

    /// The home directory launchers use (`HOME`, else the password database's).
    fn home(&self) -> Option<&Path> {
        self.homes.first().map(PathBuf::as_path)
    }

    /// The real path of `path` when its whole route (every link and every place on the way)
    /// stays out of the places the server may write; none otherwise. A link there, or a file
    /// there, could have been written by the server, and its next start would be wider.
    pub(super) fn trusted(&self, path: &Path, why: &str) -> Option<PathBuf> {
        let route = trace(path, &self.cwd).ok()?;
        if let Some(w) = route.through(&self.writable) {
            tracing::info!(
                path = %path.display(),
                writable = %w.display(),
                "sandbox: {why}: leads through a place the server may write, so nothing is inferred from it"
            );
            return None;
        }
        Some(route.real)
    }

    /// The place the server may write that `path`'s route passes through, if any.
    pub(super) fn writable_on_route(&self, path: &Path) -> Option<PathBuf> {
        let route = trace(path, &self.cwd).ok()?;
        route.through(&self.writable).map(Path::to_path_buf)
    }

    /// Whether `dir` may be opened to the server whole.
    fn allows(&self, dir: &Path) -> bool {
        self.allows_tool_root(dir) && !self.homes.iter().any(|h| dir.parent() == Some(h.as_path()))
    }

    /// Why `dir` is not opened whole, for the log.
    fn too_wide(&self, dir: &Path) -> &'static str {
        if self.private.meets(dir) {
            "holds or lies within a private place of the broker (its socket's key, state, grants or logs)"
        } else {
            "is too wide to allow whole"
        }
    }

    /// As [`Guard::allows`], for a tool's own root directly in the home directory (pyenv's).
    fn allows_tool_root(&self, dir: &Path) -> bool {
        dir.is_absolute()
            && dir.parent().is_some()
            && !self.homes.iter().any(|h| h.starts_with(dir))
            && !self.opened.iter().any(|r| r.starts_with(dir))
            && !shared(dir)
            && !self.private.meets(dir)
    }
}

/// The system's shared directories, shared whatever their mode says now: Landlock does not
/// control `chmod`, so a server run as root could clear their sticky bit in one start to have
/// the next one open them.
const SHARED: &[&str] = &["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock"];

/// A directory anyone may write, or one with the sticky bit, or one of the system's shared
/// directories: shared with other users and other sandboxes.
fn shared(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    SHARED.iter().any(|s| dir == Path::new(s))
        || std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o1002 != 0)
}

/// Collects what the launcher of `command` needs.
struct Finder<'a> {
    guard: &'a Guard,
    found: Vec<Found>,
}

impl Finder<'_> {
    /// Adds `real`, a path already judged by its route.
    fn add(&mut self, real: PathBuf, right: Right, why: &str) {
        self.found.push(Found {
            path: real,
            right,
            why: why.to_owned(),
        });
    }

    /// A directory, judged by its real path.
    fn dir(&mut self, dir: &Path, right: Right, why: &str) {
        let Some(real) = self.guard.trusted(dir, why) else {
            return;
        };
        if self.guard.allows(&real) {
            self.add(real, right, why);
        } else {
            tracing::info!(dir = %real.display(), "sandbox: {why}: {}, left out", self.guard.too_wide(&real));
        }
    }

    /// A file's directory, or the file alone when its directory is too wide (judged by the
    /// file's real path).
    fn file_or_dir(&mut self, file: &Path, why: &str) {
        let Some(real) = self.guard.trusted(file, why) else {
            return;
        };
        match real.parent() {
            Some(d) if self.guard.allows(d) => self.add(d.to_path_buf(), Right::Exec, why),
            parent => {
                if let Some(d) = parent {
                    tracing::info!(dir = %d.display(), "sandbox: {why}: its directory {}, so the file alone is opened", self.guard.too_wide(d));
                }
                self.add(real, Right::Exec, why)
            }
        }
    }

    /// An executable: itself (or its directory), its real path's, and the prefix above a
    /// `bin`. Nothing, and no real path, when its route passes through a place the server
    /// may write: then neither the link's target nor anything near it is opened.
    fn executable(&mut self, named: &Path) -> Option<PathBuf> {
        let real = self.guard.trusted(named, "the server's executable")?;
        for p in [named, real.as_path()] {
            self.file_or_dir(p, "the server's executable");
            if let Some(d) = p.parent()
                && d.file_name().is_some_and(|n| n == "bin")
                && let Some(prefix) = d.parent()
            {
                self.dir(prefix, Right::Exec, "the executable's installation");
            }
        }
        Some(real)
    }

    /// The program `named` and the interpreter its `#!` line names: each executable found,
    /// and the base names of both as named and as real paths. The real path is none when the
    /// program's route passes through a place the server may write: then only its name is
    /// known, and nothing about it (its target, its `#!` line, its environment) steers the
    /// profile.
    fn programs(&mut self, named: &Path, cwd: &Path) -> (Option<PathBuf>, Vec<String>) {
        let real = self.executable(named);
        let mut names = vec![base(named)];
        names.extend(real.as_deref().map(base));
        // A script names its interpreter; one level is followed, and only in a file the server
        // cannot have written (`real` is trusted).
        let interpreter = real
            .as_deref()
            .and_then(shebang)
            .and_then(|i| resolve(&i, cwd));
        if let Some(interpreter) = interpreter {
            names.push(base(&interpreter));
            if let Some(r) = self.executable(&interpreter) {
                names.push(base(&r));
            }
        }
        (real, names)
    }
}

/// What the server started by `command` (in `cwd`) needs of its installation, and the
/// environment that points its launcher at private caches beneath `tmp`.
pub(super) fn installation(
    command: &[String],
    cwd: &Path,
    tmp: &Path,
    guard: &Guard,
) -> (Vec<Found>, Vec<(String, String)>) {
    let mut f = Finder {
        guard,
        found: Vec::new(),
    };
    let mut env = Vec::new();
    let Some((program, args)) = command.split_first() else {
        return (f.found, env);
    };
    let Some(named) = resolve(program, cwd) else {
        return (f.found, env);
    };
    let (real, names) = f.programs(&named, cwd);
    let home = guard.home().map(Path::to_path_buf);
    let is = |pred: &dyn Fn(&str) -> bool| names.iter().any(|n| pred(n));
    let interpreter_runs_script =
        is(&|n| matches!(n, "node" | "nodejs") || n.starts_with("python"));
    let script = script_argument(args)
        .filter(|_| interpreter_runs_script)
        .and_then(|a| script_file(a, cwd, guard));
    if let Some(s) = &script {
        f.file_or_dir(s, "the server's script");
    }
    let private = |name: &str| tmp.join(name).to_string_lossy().into_owned();
    if is(&|n| matches!(n, "node" | "nodejs" | "npx" | "npm")) {
        if let Some(s) = &script {
            node_package(&mut f, s);
        }
        env.push(("npm_config_cache".to_owned(), private("npm-cache")));
    }
    if let Some(real) = &real
        && is(&|n| n.starts_with("python"))
    {
        python(&mut f, &named, real, home.as_deref());
    }
    if is(&|n| matches!(n, "uv" | "uvx")) {
        env.push(("UV_CACHE_DIR".to_owned(), private("uv-cache")));
        uv_installs(&mut f, home.as_deref());
    }
    (f.found, env)
}

/// The script an interpreter runs, from its script argument `arg`: only a file named by a
/// script's extension, in a place the server cannot have written. Launchers (`npx`, `uvx`,
/// `uv`) name packages, not files, and an argument such as `-m mod` or `-X dev` is no script:
/// a file a server created under such a name must not steer the profile.
fn script_file(arg: &str, cwd: &Path, guard: &Guard) -> Option<PathBuf> {
    Some(arg)
        .filter(|a| {
            [".py", ".js", ".mjs", ".cjs"]
                .iter()
                .any(|ext| a.ends_with(ext))
        })
        .map(|a| cwd.join(a))
        .filter(|p| p.is_file())
        .and_then(|p| guard.trusted(&p, "the server's script"))
}

/// The Pythons and tools uv installed, read and execute: a server must not replace what the
/// user runs later outside the sandbox.
fn uv_installs(f: &mut Finder<'_>, home: Option<&Path>) {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(|d| PathBuf::from(d).join("uv"))
        .or_else(|| home.map(|h| h.join(".local/share/uv")));
    if let Some(d) = data.filter(|d| d.is_dir()) {
        f.dir(&d, Right::Exec, "uv's Pythons and tools");
    }
}

/// The script argument of an interpreter's command line: the first argument that is neither
/// an option nor an option's value; none when the code comes from elsewhere (`-m`, `-c`, `-e`,
/// `-p`).
fn script_argument(args: &[String]) -> Option<&String> {
    let mut words = args.iter();
    while let Some(a) = words.next() {
        match a.as_str() {
            "-m" | "-c" | "-e" | "-p" | "--eval" | "--print" => return None,
            "-X" | "-W" | "-r" | "--require" | "--import" | "--loader" => {
                words.next();
            }
            "--" => return words.next(),
            _ if a.starts_with('-') => {}
            _ => return Some(a),
        }
    }
    None
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
        && let Some(cfg) = f.guard.trusted(&venv.join("pyvenv.cfg"), "pyvenv.cfg")
        && let Ok(cfg) = std::fs::read_to_string(cfg)
    {
        f.dir(venv, Right::Exec, "the virtual environment");
        // Python takes the first `home` key, in any case.
        let base = cfg.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("home")
                .then(|| PathBuf::from(v.trim()))
        });
        if let Some(b) = base.and_then(|b| f.guard.trusted(&b, "the environment's Python")) {
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
    // Judged by its real path, the one the rule will name.
    if let Some(given) = pyenv
        && let Some(root) = f.guard.trusted(&given, "pyenv")
        && (named.starts_with(&given) || named.starts_with(&root) || real.starts_with(&root))
        && f.guard.allows_tool_root(&root)
    {
        f.add(root, Right::Exec, "pyenv");
    }
}

/// The program's path, as `execve` would find it.
pub(super) fn resolve(program: &str, cwd: &Path) -> Option<PathBuf> {
    crate::root::find_program(Path::new(program), cwd)
}

/// The program a `#!` line runs: its interpreter, or with `env`, the program `env` runs. An
/// `env` given options (`-S`, `-u`) is not followed: its words are not a program name.
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
        let program = words.next()?;
        (!program.starts_with('-')).then(|| program.to_owned())
    } else {
        Some(interpreter.to_owned())
    }
}

fn base(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
