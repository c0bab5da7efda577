//! Writes that fail in the filesystem: a full disk (a small tmpfs), a file-size limit
//! (RLIMIT_FSIZE through `prlimit`), a directory without write permission (run as another
//! user when the tests run as root), and a broker killed in the middle of an upload. Each
//! failure is reported with its documented code, leaves the old file whole and leaves no
//! temporary file behind.

use crate::common::fs::{assert_no_temporaries, temporaries};
use crate::common::write::consent_write;
use crate::common::*;
use crate::sidecar::{Sidecar, WAIT, rpc};
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

const IO_NO_SPACE: (i64, &str, &str) = (-31004, "IO_ERROR", "no_space");

/// Whether `r` is the error (code, data.code, data.reason) `want`.
fn is(r: &Value, want: (i64, &str, &str)) -> bool {
    let (c, d, reason) = err(r);
    (c, d.as_str(), reason.as_str()) == want
}

/// `fsbroker serve --writable` started through a wrapper command (`prlimit ...`,
/// `setpriv ...`) with write consent granted, driven one request at a time: each answer must
/// be the next line.
struct Wrapped {
    s: Sidecar,
    next_id: i64,
}

impl Wrapped {
    fn serve(wrapper: &[&str], root: &Path) -> Wrapped {
        let mut args: Vec<OsString> = vec!["serve".into(), "--root".into(), root.into()];
        args.extend(["--writable", "--consent", "auto", "--server-id", "t"].map(OsString::from));
        let mut w = Wrapped {
            s: Sidecar::spawn_wrapped(wrapper, &args),
            next_id: 0,
        };
        let r = w.request(
            "files/consent",
            json!({"requestedPaths": ["project"], "access": "write"}),
        );
        assert_eq!(ok(&r)["granted"], true, "consent refused: {r}");
        w
    }

    fn stderr(&self) -> String {
        self.s.stderr()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.s.send(&rpc(id, method, params));
        let v = self.s.next();
        assert_eq!(v["id"], id, "{v}");
        v
    }

    /// Closes stdin and waits (bounded) for a clean exit.
    fn finish(mut self) {
        let (status, _) = self.s.finish();
        assert!(status.success(), "{status:?}; stderr: {}", self.stderr());
    }
}

/// A tmpfs mounted on a directory, unmounted on drop (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(Tmpfs(dir.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "))
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let done = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !done {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

fn write_broker(root: &Path) -> Broker {
    let text = format!(
        "[[roots]]\npath = {root:?}\nmount = \"project\"\naccess = \"write\"\n\n[audit]\nenabled = false\n\n[consent]\nmode = \"auto\"\n"
    );
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
        .0
}

/// `files/write` by session `s`.
async fn write(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/write", params).await
}

#[tokio::test]
async fn disk_full_write_fails_no_space_and_leaves_old_file_and_no_temporary() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    let _mount = match Tmpfs::mount(&root, "1m") {
        Ok(m) => m,
        Err(e) => {
            println!("disk-full test: cannot mount tmpfs here ({e}); ENOSPC path not exercised");
            return;
        }
    };
    // Declared after the mount, so dropped (closing its handles) before the unmount.
    let b = write_broker(&root);
    consent_write(&b, "s").await;

    let old = "o".repeat(64 << 10);
    std::fs::write(root.join("old.txt"), &old).unwrap();
    let st = rustix::fs::statvfs(&root).unwrap();
    let free = st.f_bavail * st.f_frsize;
    assert!(free > 64 << 10, "tmpfs has only {free} bytes free");
    std::fs::write(
        root.join("filler"),
        vec![b'f'; (free - (32 << 10)) as usize],
    )
    .unwrap();
    let big = "n".repeat(256 << 10);

    // Replacing an existing file.
    let r = write(&b, json!({"path": "project/old.txt", "content": big})).await;
    assert!(is(&r, IO_NO_SPACE), "{r}");
    assert_eq!(std::fs::read_to_string(root.join("old.txt")).unwrap(), old);
    assert_no_temporaries(&root);

    // Creating a new one: nothing appears.
    let r = write(&b, json!({"path": "project/new.txt", "content": big})).await;
    assert!(is(&r, IO_NO_SPACE), "{r}");
    assert!(!root.join("new.txt").exists());
    assert_no_temporaries(&root);

    // A chunked upload that runs out of space part-way.
    let r = write(
        &b,
        json!({"path": "project/old.txt", "content": "u".repeat(8 << 10), "final": false}),
    )
    .await;
    ok(&r);
    let r = write(
        &b,
        json!({"path": "project/old.txt", "content": big, "offset": 8 << 10, "final": true}),
    )
    .await;
    assert!(is(&r, IO_NO_SPACE), "{r}");
    assert_eq!(std::fs::read_to_string(root.join("old.txt")).unwrap(), old);
    b.end_session("s");
    assert_no_temporaries(&root);

    // With the space back, the same write succeeds: the failure was the full disk.
    std::fs::remove_file(root.join("filler")).unwrap();
    consent_write(&b, "s").await;
    let r = write(&b, json!({"path": "project/old.txt", "content": big})).await;
    ok(&r);
    assert_eq!(std::fs::read_to_string(root.join("old.txt")).unwrap(), big);
    assert_no_temporaries(&root);
    drop(b);
}

#[test]
fn file_size_limit_write_fails_file_too_large_and_broker_keeps_answering() {
    if !have("prlimit") {
        println!("file-size test: prlimit is not installed; EFBIG path not exercised");
        return;
    }
    let f = Fixture::new();
    let old = "o".repeat(50_000);
    let target = f.file("big.txt", &old);
    let mut w = Wrapped::serve(&["prlimit", "--fsize=100000", "--"], &f.root);

    let r = w.request(
        "files/write",
        json!({"path": "project/big.txt", "content": "n".repeat(200_000)}),
    );
    assert!(
        is(&r, (-31004, "IO_ERROR", "file_too_large")),
        "{r}; stderr: {}",
        w.stderr()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), old);
    assert_no_temporaries(&f.root);

    // The process survived the signal the limit raises.
    let r = w.request("ping", json!({}));
    assert_eq!(ok(&r), &json!({}));

    // An upload that crosses the limit in its second chunk fails the same way.
    let r = w.request(
        "files/write",
        json!({"path": "project/big.txt", "content": "u".repeat(60_000), "final": false}),
    );
    ok(&r);
    let r = w.request(
        "files/write",
        json!({"path": "project/big.txt", "content": "u".repeat(60_000), "offset": 60_000}),
    );
    assert!(is(&r, (-31004, "IO_ERROR", "file_too_large")), "{r}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), old);

    // Writes under the limit still work.
    let small = "s".repeat(1000);
    let r = w.request(
        "files/write",
        json!({"path": "project/big.txt", "content": small}),
    );
    ok(&r);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), small);
    w.finish();
    assert_no_temporaries(&f.root);
    f.assert_canary_intact();
}

#[test]
fn write_into_read_only_directory_fails_os_denied_and_leaves_nothing_behind() {
    let f = Fixture::new();
    let ro = f.dir("ro");
    let old_path = f.file("ro/old.txt", "old content");
    let root_user = rustix::process::geteuid().is_root();
    // The recovery store of the user the broker runs as: one it may make.
    let state = f.kept.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let state_env = format!("XDG_STATE_HOME={}", state.display());
    let wrapper: &[&str] = if root_user {
        if !have("setpriv") {
            println!("permission test: running as root without setpriv; EACCES path not exercised");
            return;
        }
        // Root ignores mode bits: run the broker as nobody, owning the tree but for the mode.
        let nobody = Some(65534);
        std::fs::set_permissions(f.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(f.kept.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for p in [&f.root, &ro, &old_path, &state] {
            std::os::unix::fs::chown(p, nobody, nobody).unwrap();
        }
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            "env",
            &state_env,
        ]
    } else {
        &["env", &state_env]
    };
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut w = Wrapped::serve(wrapper, &f.root);

    let denied = |r: &Value| {
        let (c, d, reason) = err(r);
        println!("answer: {r}");
        assert!(
            (c, d.as_str(), reason.as_str()) == (-31002, "PERMISSION_DENIED", "os_denied")
                || (c, d.as_str()) == (-31004, "IO_ERROR"),
            "{r}"
        );
    };
    let r = w.request(
        "files/write",
        json!({"path": "project/ro/old.txt", "content": "new content"}),
    );
    denied(&r);
    assert_eq!(std::fs::read_to_string(&old_path).unwrap(), "old content");
    let r = w.request(
        "files/write",
        json!({"path": "project/ro/new.txt", "content": "new"}),
    );
    denied(&r);
    let names: Vec<_> = std::fs::read_dir(&ro)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![OsString::from("old.txt")]);

    // The same broker writes where the mode allows: the refusal came from the mode bits.
    let r = w.request(
        "files/write",
        json!({"path": "project/ok.txt", "content": "fine"}),
    );
    ok(&r);
    assert_eq!(f.text_of("ok.txt"), "fine");
    w.finish();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_no_temporaries(&f.root);
    f.assert_canary_intact();
}

#[test]
fn broker_killed_mid_upload_leaves_no_target_and_next_write_sweeps_its_temporary() {
    let f = Fixture::new();
    let mut s = Sidecar::serve_writable(&f.root);
    let chunk = "c".repeat(100_000);
    let r = s.request(
        "files/write",
        json!({"path": "project/upload.bin", "content": chunk, "final": false}),
    );
    ok(&r);
    let r = s.request(
        "files/write",
        json!({"path": "project/upload.bin", "content": chunk, "offset": 100_000, "final": false}),
    );
    ok(&r);
    assert!(
        !f.root.join("upload.bin").exists(),
        "an upload appeared before its commit"
    );
    let pid = s.pid();
    let staged: Vec<_> = temporaries(&f.root)
        .into_iter()
        .filter(|n| n.starts_with(&format!(".fsbroker-{pid}-")))
        .collect();
    assert_eq!(staged.len(), 1, "the staged upload's temporary: {staged:?}");

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let status = s.wait_exit(WAIT);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(!f.root.join("upload.bin").exists());
    // The killed broker could not clean up.
    assert_eq!(temporaries(&f.root), staged);

    let mut next = Sidecar::serve_writable(&f.root);
    let r = next.request(
        "files/write",
        json!({"path": "project/other.txt", "content": "after the crash"}),
    );
    ok(&r);
    assert_no_temporaries(&f.root);
    assert!(!f.root.join("upload.bin").exists());
    assert_eq!(f.text_of("other.txt"), "after the crash");
    let (status, _) = next.finish();
    assert!(status.success());
    f.assert_canary_intact();
}
