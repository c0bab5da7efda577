//! The official MCP SDKs, for tests that run them as real peers: the TypeScript SDK
//! (`tests/interop/package.json`, locked by `package-lock.json`) and the Python SDK
//! (`tests/interop/requirements.txt`, every package pinned).
//!
//! They are installed from the registries on first use into `target/tmp/interop` (`npm ci`
//! and a virtual environment), and again only when the pinned set changes, so `cargo test` on
//! a fresh machine needs nothing but Node.js, npm and Python 3 beside the Rust toolchain. A
//! failed install fails the test that needed it, with the installer's output; nothing is
//! skipped. An exclusive file lock keeps concurrent test processes from installing at once.

use fs4::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The longest an install may take (a cold npm and pip install takes well under a minute).
const INSTALL: Duration = Duration::from_secs(900);

/// `tests/interop`: the scripts and the pinned package lists.
pub fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn base() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop")
}

/// The directory holding the TypeScript SDK's `node_modules` and a fresh copy of every
/// `.mjs` script of `tests/interop` (Node resolves packages from the script's own directory).
pub fn node_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = base().join("node");
        with_lock(|| {
            let src = sources();
            npm_ci(&src, &dir, "npm ci (the MCP TypeScript SDK)");
            for entry in std::fs::read_dir(&src).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "mjs") {
                    std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
                }
            }
        });
        dir
    })
}

/// The official filesystem server (`tests/interop/fs-server`, locked), installed like the
/// SDK: the path of its entry script, run with `node`.
pub fn fs_server() -> &'static Path {
    static SCRIPT: OnceLock<PathBuf> = OnceLock::new();
    SCRIPT.get_or_init(|| {
        let dir = base().join("fs-server");
        with_lock(|| {
            npm_ci(
                &sources().join("fs-server"),
                &dir,
                "npm ci (the official filesystem server)",
            )
        });
        dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    })
}

/// The hosts' own command lines (`tests/interop/host-clis`, locked): Claude Code, Gemini CLI
/// and Codex CLI, installed like the SDK; the directory whose `node_modules/.bin` holds
/// `claude`, `gemini` and `codex`.
pub fn host_clis() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = base().join("host-clis");
        with_lock(|| {
            npm_ci(
                &sources().join("host-clis"),
                &dir,
                "npm ci (the hosts' command lines)",
            )
        });
        dir
    })
}

/// Installs the locked npm packages of `src` into `dir` with `npm ci`, unless `dir` already
/// holds that exact set. Called holding the install lock.
fn npm_ci(src: &Path, dir: &Path, what: &str) {
    let stamp = stamp(&[src.join("package.json"), src.join("package-lock.json")]);
    if fresh(dir, &stamp) {
        return;
    }
    reset(dir);
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir);
    install(npm, what);
    std::fs::write(dir.join(".stamp"), &stamp).unwrap();
}

/// The Python interpreter of a virtual environment holding the Python SDK (`mcp`).
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = base().join("venv");
        with_lock(|| {
            let requirements = sources().join("requirements.txt");
            let stamp = stamp(std::slice::from_ref(&requirements));
            if !fresh(&venv, &stamp) {
                reset(&venv);
                let mut make = Command::new("python3");
                make.args(["-m", "venv"]).arg(&venv);
                install(make, "python3 -m venv");
                let mut pip = Command::new(venv.join("bin/python"));
                pip.args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
                    .arg("-r")
                    .arg(&requirements);
                install(pip, "pip install (the MCP Python SDK)");
                std::fs::write(venv.join(".stamp"), &stamp).unwrap();
            }
        });
        venv.join("bin/python")
    })
}

/// Runs `f` holding the install lock, shared by every test process of this target directory.
fn with_lock(f: impl FnOnce()) {
    std::fs::create_dir_all(base()).unwrap();
    let lock = std::fs::File::create(base().join(".lock")).unwrap();
    FileExt::lock(&lock).unwrap();
    f();
    FileExt::unlock(&lock).unwrap();
}

/// What an install was made from: the concatenated pinned lists.
fn stamp(files: &[PathBuf]) -> Vec<u8> {
    let mut all = Vec::new();
    for f in files {
        all.extend(std::fs::read(f).unwrap());
    }
    all
}

fn fresh(dir: &Path, stamp: &[u8]) -> bool {
    std::fs::read(dir.join(".stamp")).is_ok_and(|s| s == stamp)
}

fn reset(dir: &Path) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(dir).unwrap();
}

/// Runs an installer to completion within [`INSTALL`]; a failure or a timeout fails the test
/// with the installer's output.
fn install(cmd: Command, what: &str) {
    run(cmd, INSTALL, what);
}

/// Runs `cmd` to completion within `limit`, failing the test with its output if it fails or
/// takes longer. Returns its standard output.
pub fn run(cmd: Command, limit: Duration, what: &str) -> String {
    let ran = crate::sidecar::run_within(cmd, limit);
    match ran.status {
        Some(s) if s.success() => String::from_utf8_lossy(&ran.stdout).into_owned(),
        Some(s) => panic!("{what} failed ({s}):\n{}", ran.log()),
        None => panic!("{what} took longer than {limit:?}:\n{}", ran.log()),
    }
}

/// `node ts_host.mjs fsbroker proxy PROXY_ARGS... -- node ts_server.mjs`, in a new session
/// (`setsid`), so the proxy has no controlling terminal even when the tests run in one and its
/// consent fallback is `deny`. `capabilities` are the SDK client's; `elicit` its answer to any
/// `elicitation/create`. The host takes tool calls as JSON-RPC lines (see `ts_host.mjs`).
pub fn ts_host(
    proxy_args: &[std::ffi::OsString],
    capabilities: &serde_json::Value,
    elicit: Option<&serde_json::Value>,
) -> crate::sidecar::Sidecar {
    ts_host_of("ts_server.mjs", proxy_args, capabilities, elicit)
}

/// [`ts_host`] with more of the host's environment (such as `HOST_ELICIT_LATE`).
pub fn ts_host_with(
    proxy_args: &[std::ffi::OsString],
    capabilities: &serde_json::Value,
    elicit: Option<&serde_json::Value>,
    env: &[(&str, &str)],
) -> crate::sidecar::Sidecar {
    ts_host_full("ts_server.mjs", proxy_args, capabilities, elicit, env)
}

/// As [`ts_host`], with the server script `server` of `tests/interop` (such as
/// `ts2_server.mjs`, the TypeScript SDK 2.x server) behind the proxy.
pub fn ts_host_of(
    server: &str,
    proxy_args: &[std::ffi::OsString],
    capabilities: &serde_json::Value,
    elicit: Option<&serde_json::Value>,
) -> crate::sidecar::Sidecar {
    ts_host_full(server, proxy_args, capabilities, elicit, &[])
}

fn ts_host_full(
    server: &str,
    proxy_args: &[std::ffi::OsString],
    capabilities: &serde_json::Value,
    elicit: Option<&serde_json::Value>,
    env: &[(&str, &str)],
) -> crate::sidecar::Sidecar {
    let dir = node_dir();
    let mut cmd = Command::new("setsid");
    cmd.arg("-w")
        .arg("node")
        .arg(dir.join("ts_host.mjs"))
        .arg(crate::common::bin())
        .arg("proxy")
        .args(proxy_args)
        .args(["--", "node"])
        .arg(dir.join(server))
        .env("HOST_CAPABILITIES", capabilities.to_string());
    if let Some(answer) = elicit {
        cmd.env("HOST_ELICIT", answer.to_string());
    }
    cmd.envs(env.iter().copied());
    crate::sidecar::Sidecar::start(cmd)
}

/// `python py_host.py TOOL COMMAND...` with the Python SDK: calls the server's tool once and
/// returns the host's JSON line (`protocolVersion`, `serverInfo`, `result`).
pub fn py_host(tool: &str, command: &[std::ffi::OsString]) -> serde_json::Value {
    let mut cmd = Command::new(python());
    cmd.arg(sources().join("py_host.py"))
        .arg(tool)
        .args(command);
    let out = run(cmd, Duration::from_secs(60), "the Python SDK host");
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("the Python SDK host printed no JSON ({e}): {out}"))
}

/// The Python SDK server's command line: `python py_server.py`.
pub fn py_server() -> Vec<std::ffi::OsString> {
    vec![python().into(), sources().join("py_server.py").into()]
}

/// `python py_era_host.py MODE TOOL COMMAND...` with the Python SDK's `mcp.Client` in `mode`
/// (`auto` probes `server/discover` first): calls the tool once and returns the host's JSON
/// line (`protocolVersion`, `result` or `error`, `hostRootsCalls`).
pub fn py_era_host(mode: &str, tool: &str, command: &[std::ffi::OsString]) -> serde_json::Value {
    let mut cmd = Command::new(python());
    cmd.arg(sources().join("py_era_host.py"))
        .arg(mode)
        .arg(tool)
        .args(command);
    let out = run(cmd, Duration::from_secs(60), "the Python SDK era host");
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("the Python SDK era host printed no JSON ({e}): {out}"))
}

/// `node ts2_host.mjs MODE COMMAND...` with the TypeScript SDK 2.x `Client` in `mode`
/// (`legacy`, its default; `auto`, which probes `server/discover` on a sibling process first;
/// `modern`, pinned to 2026-07-28), in a new session (`setsid`, so a proxy's consent fallback
/// is `deny`), with `env` added to its environment (and so to the proxy's and the server's).
/// The host lists the tools, calls those of `HOST_CALLS` (see `ts2_host.mjs`), and its JSON
/// report is returned (`protocolVersion`, `tools`, `calls`, `hostRootsCalls`,
/// `hostElicitations`, `stderr`: the proxy's log; or `connectError`).
pub fn ts2_host(
    mode: &str,
    command: &[std::ffi::OsString],
    env: &[(&str, &str)],
) -> serde_json::Value {
    let mut cmd = Command::new("setsid");
    cmd.arg("-w")
        .arg("node")
        .arg(node_dir().join("ts2_host.mjs"))
        .arg(mode)
        .args(command)
        .envs(env.iter().copied());
    let out = run(cmd, Duration::from_secs(120), "the TypeScript SDK 2.x host");
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("the TypeScript SDK 2.x host printed no JSON ({e}): {out}"))
}
