//! The ways out of `proxy --sandbox` a review found, one test each, every one failing before
//! its fix: a process the server detaches outliving it; the server holding the proxy's stderr
//! (a terminal takes injected keystrokes) or root's capabilities; launcher caches the user
//! later runs code from, writable inside; files the server may write steering the profile of
//! its next start; inferred directories wider than the server's installation (a shared
//! directory, a dot-directory of the home). Every wait is bounded.

use crate::sandboxed::{
    CHECKER, LONG, Layout, canary, python, python_prefix, report, venv_pointing_outside,
};
use crate::sidecar::*;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[test]
fn a_process_the_server_detaches_ends_with_the_server() {
    let l = Layout::new();
    let mut p = l.run(&["--writable"], &l.checker(), &[("DAEMON", "1".into())]);
    let r = report(&mut p);
    let daemon = r["daemon"].as_i64().unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{daemon}"));
    assert!(proc_dir.exists(), "the daemon never ran: {r}");
    p.finish();
    let start = Instant::now();
    while proc_dir.exists() {
        assert!(
            start.elapsed() < LONG,
            "the server's detached daemon {daemon} outlived it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_server_holds_neither_the_proxys_stderr_nor_any_capability() {
    let l = Layout::new();
    let mut p = l.run(&[], &l.checker(), &[]);
    let r = report(&mut p);
    let proxy_stderr = std::fs::read_link(format!("/proc/{}/fd/2", p.pid())).unwrap();
    assert_ne!(
        r["stderr"].as_str().unwrap(),
        proxy_stderr.to_str().unwrap(),
        "the server writes to the proxy's own stderr (a terminal, for a user)"
    );
    assert_eq!(r["cap_eff"], "0000000000000000", "{r}");
    p.finish();
}

#[test]
fn a_launchers_shared_caches_are_not_writable_and_it_gets_private_ones() {
    let l = Layout::new();
    // A program named `uvx` is what the profile recognises: this one is the checker.
    let bin = l.base.join("tools/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let uvx = bin.join("uvx");
    std::fs::write(&uvx, format!("#!{}\n{}", python().display(), CHECKER)).unwrap();
    std::fs::set_permissions(&uvx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let data = l.home().join(".local/share/uv/python/cpython/bin/python3");
    let cache = l.home().join(".cache/uv/planted");
    canary(&data, "the user's Python");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let write = format!("{}:{}", data.display(), cache.display());
    let mut p = l.run(&[], &["uvx".into()], &[("PATH", path), ("WRITE", write)]);
    let r = report(&mut p);
    assert_eq!(r["write"][data.to_str().unwrap()], "PermissionError", "{r}");
    assert_eq!(
        r["write"][cache.to_str().unwrap()],
        "PermissionError",
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "the user's Python");
    let private = r["env"]["UV_CACHE_DIR"].as_str().unwrap();
    let tmp = r["env"]["TMPDIR"].as_str().unwrap();
    assert!(private.starts_with(tmp), "{r}");
    p.finish();
}

#[test]
fn a_file_the_server_may_write_does_not_steer_the_profile() {
    let l = Layout::new();
    // A virtual environment inside the writable root, its pyvenv.cfg pointing outside.
    let (command, check) = venv_pointing_outside(&l);
    let outside = l.base.join("outside");
    // The environment's Python lives outside the root: the user allows it by hand, since the
    // link to it is the server's to change.
    let allow = python_prefix().to_str().unwrap().to_owned();
    let mut p = l.run(
        &["--writable", "--sandbox-allow", &allow],
        &command,
        &[("CHECK", check.clone()), ("FSBROKER_LOG", "info".into())],
    );
    let r = report(&mut p);
    assert_ne!(r["read"][&check], "CANARY", "{r}");
    p.finish();
    assert!(
        !p.stderr()
            .contains(&format!("{} (the environment", outside.display())),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_script_in_a_shared_directory_opens_the_script_not_the_directory() {
    let l = Layout::new();
    let shared = l.base.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    std::fs::copy(l.base.join("checker.py"), shared.join("checker.py")).unwrap();
    let neighbour = shared.join("someone-elses.txt");
    canary(&neighbour, "CANARY");
    let command: Vec<OsString> = vec![python().into(), shared.join("checker.py").into()];
    let check = neighbour.to_str().unwrap().to_owned();
    let mut p = l.run(&[], &command, &[("CHECK", check.clone())]);
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn an_executable_in_a_dot_directory_of_home_does_not_open_that_directory() {
    let l = Layout::new();
    let cargo_bin = l.home().join(".cargo/bin");
    std::fs::create_dir_all(&cargo_bin).unwrap();
    std::os::unix::fs::symlink(python(), cargo_bin.join("server")).unwrap();
    let token = l.home().join(".cargo/credentials.toml");
    canary(&token, "CANARY-TOKEN");
    let command: Vec<OsString> = vec![
        cargo_bin.join("server").into(),
        l.base.join("checker.py").into(),
    ];
    let check = token.to_str().unwrap().to_owned();
    let mut p = l.run(&[], &command, &[("CHECK", check.clone())]);
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn a_file_named_like_an_option_value_does_not_steer_the_profile() {
    // A previous run of the server left `dev` in the writable root, its working directory,
    // pointing at the user's key; `python -X dev` must not take it for the script.
    let l = Layout::new();
    let key = l.home().join(".ssh/id_rsa");
    canary(&key, "CANARY-KEY");
    let proj = l.base.join("proj");
    std::os::unix::fs::symlink(&key, proj.join("dev")).unwrap();
    let command: Vec<OsString> = vec![
        python().into(),
        "-X".into(),
        "dev".into(),
        l.base.join("checker.py").into(),
    ];
    let check = key.to_str().unwrap().to_owned();
    let mut p = l.run_in(
        &proj,
        &l.home(),
        &["--writable"],
        &command,
        &[("CHECK", check.clone())],
    );
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn a_link_where_node_looks_for_packages_opens_nothing_beyond_its_target_rules() {
    // A `node_modules` beside the script that is a link to the home directory.
    let l = Layout::new();
    let key = l.home().join(".ssh/id_rsa");
    canary(&key, "CANARY-KEY");
    let app = l.base.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(app.join("package.json"), "{}").unwrap();
    std::os::unix::fs::symlink(l.home(), app.join("node_modules")).unwrap();
    std::fs::write(
        app.join("server.js"),
        r#"const fs = require("fs");
let read = {};
for (const p of (process.env.CHECK || "").split(":").filter(Boolean)) {
  try { read[p] = fs.readFileSync(p, "utf8"); } catch (e) { read[p] = e.code; }
}
console.log(JSON.stringify({jsonrpc: "2.0", method: "notifications/message",
  params: {level: "info", data: {read}}}));
process.stdin.resume();
"#,
    )
    .unwrap();
    let command: Vec<OsString> = vec!["node".into(), app.join("server.js").into()];
    let check = key.to_str().unwrap().to_owned();
    let mut p = l.run(&[], &command, &[("CHECK", check.clone())]);
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "EACCES", "{r}");
    p.finish();
}

#[test]
fn a_home_reached_through_a_link_is_still_the_home() {
    // `/home` is a link on some systems: the limits hold for the real path too.
    let l = Layout::new();
    let link = l.base.join("homelink");
    std::os::unix::fs::symlink(l.home(), &link).unwrap();
    let key = l.home().join(".ssh/id_rsa");
    canary(&key, "CANARY-KEY");
    std::fs::create_dir_all(l.home().join("bin")).unwrap();
    std::os::unix::fs::symlink(python(), l.home().join("bin/server")).unwrap();
    let command: Vec<OsString> = vec![
        link.join("bin/server").into(),
        l.base.join("checker.py").into(),
    ];
    let check = key.to_str().unwrap().to_owned();
    let mut p = l.run_in(&l.base, &link, &[], &command, &[("CHECK", check.clone())]);
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn an_allowed_link_counts_as_writable_where_it_leads() {
    let l = Layout::new();
    let outside = l.base.join("outside");
    canary(&outside.join("secret.txt"), "CANARY");
    let adir = l.base.join("adir");
    let venv = adir.join(".venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::os::unix::fs::symlink(python(), venv.join("bin/python")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!("home = {}\n", outside.display()),
    )
    .unwrap();
    let alink = l.base.join("alink");
    std::os::unix::fs::symlink(&adir, &alink).unwrap();
    let allow = format!("{}:rw", alink.display());
    let prefix = python_prefix().to_str().unwrap().to_owned();
    let command: Vec<OsString> = vec![
        venv.join("bin/python").into(),
        l.base.join("checker.py").into(),
    ];
    let check = outside.join("secret.txt").to_str().unwrap().to_owned();
    let mut p = l.run(
        &["--sandbox-allow", &allow, "--sandbox-allow", &prefix],
        &command,
        &[("CHECK", check.clone())],
    );
    let r = report(&mut p);
    assert_ne!(r["read"][&check], "CANARY", "{r}");
    p.finish();
}

#[test]
fn a_deep_chain_of_processes_ends_with_the_server() {
    let l = Layout::new();
    let chain = l.base.join("chain.py");
    std::fs::write(
        &chain,
        r#"import json, os, sys, time
r, w = os.pipe()
depth = 80
if os.fork() == 0:
    for _ in range(depth):
        if os.fork() != 0:
            time.sleep(1000)
    os.write(w, str(os.getpid()).encode())
    time.sleep(1000)
os.close(w)
leaf = int(os.read(r, 32))
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": {"leaf": leaf}}}), flush=True)
sys.stdin.read()
"#,
    )
    .unwrap();
    let mut p = l.run(&[], &[python().into(), chain.into()], &[]);
    let r = report(&mut p);
    let leaf = PathBuf::from(format!("/proc/{}", r["leaf"]));
    assert!(leaf.exists(), "{r}");
    p.finish();
    let start = Instant::now();
    while leaf.exists() {
        assert!(
            start.elapsed() < LONG,
            "the end of an 80-deep chain outlived the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_private_temporary_directory_goes_even_when_the_server_locks_it() {
    let l = Layout::new();
    let locker = l.base.join("locker.py");
    std::fs::write(
        &locker,
        r#"import json, os, sys
tmp = os.environ["TMPDIR"]
os.makedirs(os.path.join(tmp, "locked/inner"))
open(os.path.join(tmp, "locked/inner/f"), "w").write("x")
os.chmod(os.path.join(tmp, "locked"), 0)
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": {"tmp": tmp}}}), flush=True)
sys.stdin.read()
"#,
    )
    .unwrap();
    // As an ordinary user (root could remove a locked directory anyway), with the system's
    // Python, which that user can run.
    use std::os::unix::fs::PermissionsExt;
    for d in [l.base.clone(), l.base.join("proj")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let args: Vec<OsString> = vec![
        "proxy".into(),
        "--sandbox".into(),
        "--root".into(),
        l.base.join("proj").into(),
        "/usr/bin/python3".into(),
        locker.into(),
    ];
    // A recovery store that user may make.
    let state = l.base.join("state");
    std::fs::create_dir(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
    let state_env = format!("XDG_STATE_HOME={}", state.display());
    let mut p = Sidecar::spawn_wrapped(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            &state_env,
        ],
        &args,
    );
    let r = report(&mut p);
    let tmp = PathBuf::from(r["tmp"].as_str().unwrap());
    p.finish();
    assert!(!tmp.exists(), "{} outlived the server", tmp.display());
}
