use super::*;
use crate::identity::procfs::tests::kill;
use std::time::Duration;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

fn launch(argv: &[&str], cwd: &Path) -> Launch {
    Launch {
        argv: argv.iter().map(OsString::from).collect(),
        cwd: cwd.to_path_buf(),
        path_var: Some("/usr/bin:/bin".into()),
        pin: None,
    }
}

fn of(argv: &[&str], cwd: &Path, d: &mut Digests) -> Identity {
    of_launch(&launch(argv, cwd), None, d)
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn scripts_are_told_apart_by_content_and_an_edit_is_named() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    write(&t.path().join("a.py"), "print('a')\n");
    write(&t.path().join("b.py"), "print('b')\n");
    let a = of(&["python3", "a.py"], t.path(), &mut d);
    let b = of(&["python3", "b.py"], t.path(), &mut d);
    let runs = a
        .runs
        .clone()
        .unwrap_or_else(|| panic!("no script in {a:?}"));
    assert_eq!(runs.kind, "script");
    assert_eq!(runs.path, Some(real(&t.path().join("a.py"))));
    assert_eq!(
        runs.digest,
        blake3::hash(b"print('a')\n").to_hex().to_string()
    );
    let program = a.program.clone().unwrap_or_else(|| panic!("no program"));
    assert_eq!(program.path, PathBuf::from("/usr/bin/python3"));
    assert_eq!(program.real, real(Path::new("/usr/bin/python3")));
    assert_eq!(program.digest.len(), 64);
    assert_eq!(a.argv, ["python3", "a.py"]);
    assert_ne!(a.digest, b.digest, "two scripts");
    assert_eq!(
        a,
        of(&["python3", "a.py"], t.path(), &mut d),
        "the same script twice"
    );

    let was = a.record(1_796_083_200);
    write(&t.path().join("a.py"), "print('edited')\n");
    let edited = of(&["python3", "a.py"], t.path(), &mut d);
    assert_ne!(edited.digest, a.digest);
    let why = edited.changed_since(&was, "notes");
    let place = real(&t.path().join("a.py"));
    assert!(
        why.starts_with(&format!("the program at {} changed", place.display())),
        "{why}"
    );
    assert!(
        b.changed_since(&was, "notes")
            .starts_with("a different program now calls itself notes")
    );
}

#[test]
fn a_venvs_interpreter_is_not_the_systems() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    write(&t.path().join("s.py"), "print(1)\n");
    let bin = t.path().join("venv").join("bin");
    std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("/usr/bin/python3", bin.join("python3"))
        .unwrap_or_else(|e| panic!("{e}"));
    let system = of(&["/usr/bin/python3", "s.py"], t.path(), &mut d);
    let venv = of(&["./venv/bin/python3", "s.py"], t.path(), &mut d);
    let (sp, vp) = (system.program.clone(), venv.program.clone());
    let (sp, vp) = (
        sp.unwrap_or_else(|| panic!("no program")),
        vp.unwrap_or_else(|| panic!("no program")),
    );
    assert_eq!(
        vp.path,
        t.path().join("venv/bin/python3"),
        "the path as found, not followed"
    );
    assert_eq!(vp.real, sp.real, "one file");
    assert_eq!(vp.digest, sp.digest);
    assert_eq!(venv.runs, system.runs, "one script");
    assert_ne!(venv.digest, system.digest);
}

#[test]
fn a_hashbang_script_is_run_by_the_interpreter_its_first_line_names() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    let script = t.path().join("run");
    write(&script, "#!/usr/bin/env sh\nsleep 1\n");
    let id = of(&["./run", "x"], t.path(), &mut d);
    let program = id.program.clone().unwrap_or_else(|| panic!("no program"));
    assert_eq!(
        program.path,
        PathBuf::from("/usr/bin/sh"),
        "sh found on PATH"
    );
    assert_eq!(program.real, real(Path::new("/usr/bin/sh")));
    assert_eq!(program.digest.len(), 64);
    let runs = id.runs.unwrap_or_else(|| panic!("no script"));
    assert_eq!(
        (runs.kind.as_str(), runs.path),
        ("script", Some(real(&script)))
    );
    assert_eq!(
        runs.digest,
        blake3::hash(b"#!/usr/bin/env sh\nsleep 1\n")
            .to_hex()
            .to_string()
    );

    write(&script, "#!/bin/sh -e\nsleep 1\n");
    let direct = of(&["./run"], t.path(), &mut d);
    assert_eq!(
        direct.program.map(|p| p.path),
        Some(PathBuf::from("/bin/sh"))
    );
    write(&script, "#!/usr/bin/env -S sh -e\nsleep 1\n");
    let split = of(&["./run"], t.path(), &mut d);
    assert_eq!(
        split.program.map(|p| p.path),
        Some(PathBuf::from("/usr/bin/sh"))
    );
}

#[test]
fn modules_and_inline_code_are_what_an_interpreter_runs() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    let module = of(&["python3", "-m", "http.server", "8000"], t.path(), &mut d);
    let runs = module.runs.unwrap_or_else(|| panic!("no module"));
    assert_eq!(
        (runs.kind.as_str(), runs.name.as_deref()),
        ("module", Some("http.server"))
    );
    let one = of(&["sh", "-c", "echo 1"], t.path(), &mut d);
    let two = of(&["sh", "-c", "echo 2"], t.path(), &mut d);
    assert_eq!(one.runs.as_ref().map(|r| r.kind.as_str()), Some("inline"));
    assert_eq!(
        one.runs.as_ref().map(|r| r.digest.clone()),
        Some(blake3::hash(b"echo 1").to_hex().to_string())
    );
    assert_ne!(one.digest, two.digest);
}

#[test]
fn a_program_not_found_or_not_the_held_one_has_no_digest() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    let missing = of(&["no-such-program-here", "x"], t.path(), &mut d);
    let p = missing.program.unwrap_or_else(|| panic!("no program"));
    assert_eq!(
        (p.path.as_os_str(), p.digest.as_str()),
        (OsStr::new("no-such-program-here"), "")
    );
    assert_eq!(missing.digest.len(), 64, "sealed all the same");

    let mut held = launch(&["sh", "-c", "true"], t.path());
    held.pin = Some((0, 0));
    let swapped = of_launch(&held, None, &mut d);
    let p = swapped.program.unwrap_or_else(|| panic!("no program"));
    assert_eq!(
        (p.real, p.digest),
        (real(Path::new("/usr/bin/sh")), String::new())
    );
    let sh = d
        .of(Path::new("/usr/bin/sh"))
        .unwrap_or_else(|| panic!("no sh"));
    held.pin = Some(sh.id);
    let kept = of_launch(&held, None, &mut d);
    assert_eq!(kept.program.map(|p| p.digest), Some(sh.digest));
}

#[test]
fn resolving_follows_path_as_execve_does() {
    let t = tmp();
    let empty = t.path().join("empty");
    let bin = t.path().join("bin");
    write(&bin.join("tool"), "#!/bin/sh\n");
    write(&empty.join("tool"), "not executable");
    std::fs::set_permissions(
        bin.join("tool"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let path = std::env::join_paths([&empty, &bin]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        resolve(OsStr::new("tool"), t.path(), Some(&path)),
        Some(bin.join("tool"))
    );
    assert_eq!(
        resolve(OsStr::new("./x/../y"), t.path(), None),
        Some(t.path().join("x/../y"))
    );
    assert_eq!(resolve(OsStr::new("tool"), t.path(), None), None);
    assert_eq!(resolve(OsStr::new(""), t.path(), Some(&path)), None);
}

/// Runs `node FILE` below a shell that stays its parent, as `npx` runs a package, and waits
/// until the node process is there.
fn launcher_running(file: &Path) -> (std::process::Child, u32) {
    let sh = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("node '{}'; true", file.display()))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..1000 {
        let below = procfs::descendants(sh.id(), 2, 16);
        if let Some(node) = below.iter().find(|p| procfs::cmdline(**p).len() == 2) {
            return (sh, *node);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut sh = sh;
    let _ = sh.kill();
    let _ = sh.wait();
    panic!("node did not start below the shell");
}

#[test]
fn an_npx_package_is_found_below_its_launcher_with_its_version() {
    if resolve(
        OsStr::new("node"),
        Path::new("/"),
        Some(OsStr::new("/usr/bin:/bin")),
    )
    .is_none()
    {
        panic!("this test needs node in /usr/bin");
    }
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    let mut versions = Vec::new();
    for (hash, version) in [("abc", "1.0.0"), ("def", "2.0.0")] {
        let pkg = t
            .path()
            .join("_npx")
            .join(hash)
            .join("node_modules")
            .join("pkg");
        write(
            &pkg.join("package.json"),
            &format!(r#"{{"name":"pkg","version":"{version}"}}"#),
        );
        write(&pkg.join("bin.js"), "setTimeout(() => {}, 30000);\n");
        let (mut sh, node) = launcher_running(&pkg.join("bin.js"));
        let id = of_launch(
            &launch(&["npx", "-y", "pkg"], t.path()),
            Some(sh.id()),
            &mut d,
        );
        kill(node);
        let _ = sh.kill();
        let _ = sh.wait();
        let runs = id
            .installed
            .clone()
            .unwrap_or_else(|| panic!("no package in {id:?}"));
        assert_eq!(runs.kind, "package");
        assert_eq!(runs.name.as_deref(), Some("pkg"));
        assert_eq!(runs.version.as_deref(), Some(version));
        assert_eq!(runs.path, Some(real(&pkg)));
        // What the arguments ask for is what compares: the package as it says it is, not.
        assert_eq!(
            id.runs.as_ref().and_then(|r| r.name.as_deref()),
            Some("pkg")
        );
        assert!(!id.launched_by.is_empty(), "the test runner's parents");
        versions.push(id);
    }
    assert_eq!(
        versions[0].digest, versions[1].digest,
        "what a running package says of itself is shown, never compared"
    );
    assert_eq!(versions[1].what(), "pkg@2.0.0 (as installed)");
    // Another package asked for is not taken for this one.
    let pkg = t.path().join("_npx/abc/node_modules/pkg");
    let (mut sh, node) = launcher_running(&pkg.join("bin.js"));
    let other = of_launch(
        &launch(&["npx", "other@1"], t.path()),
        Some(sh.id()),
        &mut d,
    );
    kill(node);
    let _ = sh.kill();
    let _ = sh.wait();
    assert_eq!(other.installed, None);
    assert_eq!(
        other
            .runs
            .as_ref()
            .map(|r| (r.name.as_deref(), r.version.as_deref())),
        Some((Some("other"), Some("1")))
    );
}

#[test]
fn a_uvx_tool_is_found_by_its_distribution_in_the_virtual_environment_below_it() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("cache.json"));
    let venv = t.path().join("archive-v0").join("x1");
    write(&venv.join("pyvenv.cfg"), "home = /usr/bin\n");
    write(&venv.join("bin/my-tool"), "sleep 30\n");
    let site = venv.join("lib/python3.13/site-packages");
    write(
        &site.join("dep-9.dist-info/METADATA"),
        "Name: dep\nVersion: 9\n",
    );
    let info = site.join("my_tool-1.2.dist-info");
    write(
        &info.join("METADATA"),
        "Metadata-Version: 2.1\nName: My.Tool\nVersion: 1.2\n",
    );
    write(&info.join("RECORD"), "../../../bin/my-tool,,\n");
    // The launcher runs the tool's entry in a process of its own, as `uv tool run` does.
    let sh = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("sh '{}'; true", venv.join("bin/my-tool").display()))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut sh = sh;
    let mut tool = None;
    for _ in 0..1000 {
        tool = procfs::descendants(sh.id(), 1, 8)
            .into_iter()
            .find(|p| procfs::cmdline(*p).len() == 2);
        if tool.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let ask = |argv: &[&str], d: &mut Digests| of_launch(&launch(argv, t.path()), Some(sh.id()), d);
    let by_name = ask(&["uvx", "my-tool@1.2"], &mut d);
    let by_from = ask(&["uv", "tool", "run", "--from", "my_tool", "mt"], &mut d);
    let other = ask(&["uvx", "--python", "3.13", "dep"], &mut d);
    let absent = ask(&["pipx", "run", "absent"], &mut d);
    if let Some(p) = tool {
        kill(p);
    }
    let _ = sh.kill();
    let _ = sh.wait();
    let runs = by_name.installed.unwrap_or_else(|| panic!("no package"));
    assert_eq!(runs.kind, "package");
    assert_eq!(
        (runs.name.as_deref(), runs.version.as_deref()),
        (Some("My.Tool"), Some("1.2"))
    );
    assert_eq!(runs.path, Some(info.clone()));
    assert_eq!(by_from.installed.and_then(|r| r.path), Some(info));
    assert_eq!(other.installed.and_then(|r| r.name), Some("dep".to_owned()));
    assert_eq!(absent.installed, None);
    assert_eq!(
        absent.runs.and_then(|r| r.name).as_deref(),
        Some("absent"),
        "what the arguments ask for"
    );
}
