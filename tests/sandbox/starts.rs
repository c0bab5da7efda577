//! The third review's ways out of `proxy --sandbox`, each across starts: a server that
//! re-points a link it may write (the program, an allowed path) between one start and the
//! next, or keeps swapping it while the next one starts; a home directory the environment does
//! not name; a descriptor the proxy inherited. Each failed before its fix. Every wait is
//! bounded.

use crate::common;
use crate::sandboxed::{
    LONG, Layout, canary, python, python_prefix, report, venv_pointing_outside,
};
use crate::sidecar::*;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Points `link` at `target` in one step (a new link renamed over the old), as a server would.
fn repoint(link: &Path, target: &Path) {
    let tmp = link.with_extension("swap");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// The proxy refused to start the server: exit 1 and a message naming `text`.
fn refused(p: &mut Sidecar, text: &str) {
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(p.stderr().contains(text), "{}", p.stderr());
}

#[test]
fn a_program_link_the_server_repointed_opens_nothing_where_it_leads() {
    // Start 1 left `.venv/bin/python` pointing at an interpreter inside a directory the server
    // wants; the next start must open neither that directory nor the one above its `bin`.
    let l = Layout::new();
    let wanted = l.base.join("wanted");
    canary(&wanted.join("secret.txt"), "CANARY");
    std::fs::create_dir_all(wanted.join("bin")).unwrap();
    std::fs::copy(python(), wanted.join("bin/python3")).unwrap();
    let venv_bin = l.base.join("proj/.venv/bin");
    std::fs::create_dir_all(&venv_bin).unwrap();
    repoint(&venv_bin.join("python"), &wanted.join("bin/python3"));
    let command: Vec<OsString> = vec![
        venv_bin.join("python").into(),
        l.base.join("checker.py").into(),
    ];
    let mut p = l.run(&["--writable"], &command, &[]);
    // The copied interpreter is in no directory the profile opens: refused, saying why.
    refused(&mut p, "which the server may write");
    assert!(
        p.stderr()
            .contains(&l.base.join("proj").display().to_string()),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_program_link_swapped_while_the_server_starts_never_runs_with_the_target_readable() {
    // One instance keeps swapping `.venv/bin/python` between the user's key and Python while
    // the next start builds its profile and runs the program: whichever it reads, the key
    // must stay closed to what runs.
    let l = Layout::new();
    let key = l.home().join(".ssh/id_ed25519");
    canary(&key, "CANARY-KEY");
    let venv_bin = l.base.join("proj/.venv/bin");
    std::fs::create_dir_all(&venv_bin).unwrap();
    let link = venv_bin.join("python");
    repoint(&link, &python());
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, link, key, py) = (stop.clone(), link.clone(), key.clone(), python());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                repoint(&link, if n.is_multiple_of(2) { &key } else { &py });
                n += 1;
            }
        })
    };
    let allow = python_prefix().to_str().unwrap().to_owned();
    let check = key.to_str().unwrap().to_owned();
    let command: Vec<OsString> = vec![link.clone().into(), l.base.join("checker.py").into()];
    let (mut ran, mut starts) = (0, 0);
    while starts < 20 {
        starts += 1;
        let mut p = l.run(
            &["--writable", "--sandbox-allow", &allow],
            &command,
            &[("CHECK", check.clone())],
        );
        let line = p.next_raw(LONG);
        let (status, _) = p.finish();
        match line {
            Some(line) => {
                let n: serde_json::Value = serde_json::from_slice(&line).unwrap();
                let r = &n["params"]["data"];
                assert_ne!(r["read"][&check], "CANARY-KEY", "start {starts}: {r}");
                ran += 1;
            }
            // Refused: the program changed between the profile and the start, or was the key.
            None => assert_ne!(status.code(), Some(0), "{}", p.stderr()),
        }
    }
    stop.store(true, Ordering::SeqCst);
    swapper.join().unwrap();
    // With the swapper stopped on Python, a start runs the server: the refusals above were
    // the swap, not a server that can never start.
    repoint(&link, &python());
    let mut p = l.run(
        &["--writable", "--sandbox-allow", &allow],
        &command,
        &[("CHECK", check.clone())],
    );
    let r = report(&mut p);
    assert_eq!(
        r["read"][&check], "PermissionError",
        "{r} (after {ran} runs)"
    );
    p.finish();
}

#[test]
fn an_allowed_path_through_a_writable_root_is_refused() {
    // A shared virtual environment linked into the project: start 1 could re-point the link,
    // and start 2 would open whatever it names.
    let l = Layout::new();
    let shared = l.base.join("shared-venv");
    std::fs::create_dir_all(&shared).unwrap();
    let link = l.base.join("proj/.venv");
    std::os::unix::fs::symlink(&shared, &link).unwrap();
    let allow = link.to_str().unwrap().to_owned();
    let mut p = l.run(
        &["--writable", "--sandbox-allow", &allow],
        &l.checker(),
        &[],
    );
    refused(&mut p, "--sandbox-allow");
    assert!(
        p.stderr().contains("which the server may write"),
        "{}",
        p.stderr()
    );
    // The same place allowed by its own path starts the server.
    let allow = shared.to_str().unwrap().to_owned();
    let mut p = l.run(
        &["--writable", "--sandbox-allow", &allow],
        &l.checker(),
        &[],
    );
    let r = report(&mut p);
    assert!(r["read"].is_object(), "{r}");
    p.finish();
}

#[test]
fn without_home_a_script_in_the_home_directory_does_not_open_it() {
    // Service managers start processes without HOME; the password database still names the
    // home, and a script kept there opens only itself.
    // The password database's home, as the proxy will find it without HOME.
    let uid = rustix::process::geteuid().as_raw().to_string();
    let home = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&uid.as_str()))
        .and_then(|f| f.get(5).map(std::path::PathBuf::from))
        .filter(|h| h.is_dir())
        .expect("the test needs the user's home directory in /etc/passwd");
    let l = Layout::new();
    let tag = l.base.file_name().unwrap().to_string_lossy().into_owned();
    let script = home.join(format!("fsbroker-test-{tag}.py"));
    let secret_dir = home.join(format!("fsbroker-test-{tag}"));
    struct Cleanup(Vec<std::path::PathBuf>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = std::fs::remove_file(p);
                let _ = std::fs::remove_dir_all(p);
            }
        }
    }
    let _cleanup = Cleanup(vec![script.clone(), secret_dir.clone()]);
    std::fs::copy(l.base.join("checker.py"), &script).unwrap();
    let secret = secret_dir.join("id_ed25519");
    canary(&secret, "CANARY-HOME");
    let command: Vec<OsString> = vec![python().into(), script.clone().into()];
    let mut cmd = l.command(&[], &command);
    cmd.env_remove("HOME")
        .env("CHECK", &secret)
        .env("FSBROKER_LOG", "info");
    let mut p = Sidecar::start(cmd);
    let r = report(&mut p);
    let check = secret.to_str().unwrap();
    assert_eq!(r["read"][check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn a_descriptor_the_proxy_inherited_does_not_reach_the_server() {
    // The host left a descriptor open on a file outside the roots when it started the proxy.
    let l = Layout::new();
    let outside = l.base.join("outside/secret.txt");
    canary(&outside, "CANARY-FD");
    let mut args: Vec<String> = vec![
        "proxy".into(),
        "--sandbox".into(),
        "--root".into(),
        l.base.join("proj").to_str().unwrap().into(),
    ];
    args.extend(l.checker().iter().map(|a| a.to_str().unwrap().to_owned()));
    let script = "exec 7<\"$SECRET\"; exec \"$FSBROKER\" \"$@\"";
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg("sh")
        .args(&args)
        .env("SECRET", &outside)
        .env("FSBROKER", common::bin())
        .env("HOME", l.home());
    let mut p = Sidecar::start(cmd);
    let r = report(&mut p);
    let fds = r["fds"].as_object().unwrap();
    assert!(!fds.contains_key("7"), "{r}");
    assert!(
        fds.values()
            .all(|v| !v.as_str().unwrap_or("").contains("CANARY-FD")),
        "{r}"
    );
    p.finish();
}

#[test]
fn a_link_in_another_servers_writable_root_steers_nothing() {
    // The policy gives another server a writable root; that server planted a link there to
    // an interpreter inside a directory it wants. This server's program goes through it.
    let l = Layout::new();
    let theirs = l.base.join("theirs");
    let wanted = l.base.join("wanted");
    canary(&wanted.join("secret.txt"), "CANARY");
    std::fs::create_dir_all(wanted.join("bin")).unwrap();
    std::fs::copy(python(), wanted.join("bin/python3")).unwrap();
    std::fs::create_dir_all(theirs.join("bin")).unwrap();
    repoint(&theirs.join("bin/python"), &wanted.join("bin/python3"));
    let policy = l.base.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[roots]]\npath = {:?}\nmount = \"proj\"\n\n[[roots]]\npath = {:?}\nmount = \"theirs\"\naccess = \"write\"\nservers = [\"other\"]\n",
            l.base.join("proj"),
            theirs
        ),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["proxy", "--sandbox", "--server-id", "me", "--policy"])
        .arg(&policy)
        .arg(theirs.join("bin/python"))
        .arg(l.base.join("checker.py"))
        .env("HOME", l.home());
    let mut p = Sidecar::start(cmd);
    refused(&mut p, "which the server may write");
}

#[test]
fn a_nested_root_the_server_swapped_for_a_link_opens_nothing_outside() {
    // `repo` is writable and `docs`, writable too, lies inside it. In one start the server moved
    // `docs` aside and left a link to a place outside in its stead; the next start must not
    // give that place to the server as the `docs` root.
    let l = Layout::new();
    let repo = l.base.join("proj");
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    let outside = l.base.join("outside");
    canary(&outside.join("secret.txt"), "CANARY");
    let policy = l.base.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[[roots]]\npath = {:?}\nmount = \"docs\"\naccess = \"write\"\n",
            repo,
            repo.join("docs")
        ),
    )
    .unwrap();
    std::fs::rename(repo.join("docs"), repo.join("docs.old")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join("docs")).unwrap();
    let check = outside.join("secret.txt").to_str().unwrap().to_owned();
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["proxy", "--sandbox", "--policy"])
        .arg(&policy)
        .args(l.checker())
        .env("HOME", l.home())
        .env("CHECK", &check);
    let mut p = Sidecar::start(cmd);
    let line = p.next_raw(LONG);
    let (status, _) = p.finish();
    match line {
        Some(line) => {
            let n: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(
                n["params"]["data"]["read"][&check], "PermissionError",
                "{n}"
            );
        }
        None => {
            assert_ne!(status.code(), Some(0), "{}", p.stderr());
            assert!(p.stderr().contains("docs"), "{}", p.stderr());
        }
    }
}

#[test]
fn a_tool_root_named_through_a_link_is_judged_where_it_leads() {
    // PYENV_ROOT names a link to a directory that holds the home directory: judged as given
    // it looked like a tool's root, but the rule would have opened where it leads.
    let l = Layout::new();
    let key = l.home().join(".ssh/id_ed25519");
    canary(&key, "CANARY-KEY");
    std::fs::create_dir_all(l.base.join("bin")).unwrap();
    std::os::unix::fs::symlink(python(), l.base.join("bin/python")).unwrap();
    let pyenv = l.base.join("pyenv-link");
    std::os::unix::fs::symlink(&l.base, &pyenv).unwrap();
    let command: Vec<OsString> = vec![
        pyenv.join("bin/python").into(),
        l.base.join("checker.py").into(),
    ];
    let check = key.to_str().unwrap().to_owned();
    let mut p = l.run(
        &[],
        &command,
        &[
            ("CHECK", check.clone()),
            ("PYENV_ROOT", pyenv.to_str().unwrap().to_owned()),
        ],
    );
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn a_read_only_root_inside_a_path_allowed_for_writing_is_named_writable_in_the_log() {
    // Landlock's rules add up: the read-only root is writable on disk through the allowed
    // path around it, and the proxy says so.
    let l = Layout::new();
    let around = l.base.join("around");
    std::fs::create_dir_all(around.join("vendor")).unwrap();
    let root = format!("vendor={}", around.join("vendor").display());
    let allow = format!("{}:rw", around.display());
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args([
        "proxy",
        "--sandbox",
        "--root",
        &root,
        "--sandbox-allow",
        &allow,
    ])
    .args(l.checker())
    .env("HOME", l.home());
    let mut p = Sidecar::start(cmd);
    report(&mut p);
    p.finish();
    assert!(
        p.stderr()
            .contains("the kernel lets it write this root too"),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_file_in_a_read_only_root_does_not_steer_the_profile() {
    // The root was writable in an earlier start (or is writable to another server): the
    // pyvenv.cfg the server left there names a directory it wants. Now read-only, the root's
    // files still must not widen the profile.
    let l = Layout::new();
    let (command, check) = venv_pointing_outside(&l);
    let allow = python_prefix().to_str().unwrap().to_owned();
    let mut p = l.run(
        &["--sandbox-allow", &allow],
        &command,
        &[("CHECK", check.clone()), ("FSBROKER_LOG", "info".into())],
    );
    let r = report(&mut p);
    assert_eq!(r["read"][&check], "PermissionError", "{r}");
    p.finish();
}

#[test]
fn a_profile_that_would_open_the_recovery_store_is_refused() {
    // The store holds what servers' changes destroyed: no rule may open it, nor a place
    // that holds it, nor one within it. (HOME is the layout's, so the store is its own.)
    let l = Layout::new();
    let store = l.home().join(".local/state/fsbroker/recovery");
    std::fs::create_dir_all(store.join("objects")).unwrap();
    for place in [l.home().join(".local/state"), store.join("objects")] {
        let allow = place.to_str().unwrap().to_owned();
        let mut p = l.run(&["--sandbox-allow", &allow], &l.checker(), &[]);
        refused(&mut p, "recovery store");
    }
    // A place beside it starts the server.
    let beside = l.home().join(".local/share");
    std::fs::create_dir_all(&beside).unwrap();
    let allow = beside.to_str().unwrap().to_owned();
    let mut p = l.run(&["--sandbox-allow", &allow], &l.checker(), &[]);
    let r = report(&mut p);
    assert!(r["read"].is_object(), "{r}");
    p.finish();
}
