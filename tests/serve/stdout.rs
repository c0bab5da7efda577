//! `fsbroker serve` writes a pipe on its standard output without tokio's stdout (the pipe is
//! made non-blocking while it runs): the pipe is in blocking mode again when it exits, and a
//! standard output that is not a pipe (a file) still gets every response.

use crate::common;
use crate::common::Fixture;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::Duration;

const REQUESTS: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"roots/list"}"#,
    "\n"
);

fn serve(f: &Fixture) -> Command {
    let mut cmd = Command::new(common::bin());
    cmd.arg("serve")
        .arg("--root")
        .arg(&f.root)
        .args(["--consent", "deny"]);
    cmd
}

fn input(f: &Fixture) -> std::fs::File {
    let path = f.tmp.path().join("requests.jsonl");
    std::fs::write(&path, REQUESTS).unwrap();
    std::fs::File::open(path).unwrap()
}

#[test]
fn the_stdout_pipe_is_blocking_again_after_the_session() {
    let f = Fixture::new();
    let (read_end, write_end) = rustix::pipe::pipe().unwrap();
    // The test keeps a duplicate of the write end: the same open file description, whose
    // flags the sidecar changes and must restore.
    let kept = write_end.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(read_end), &mut out).unwrap();
        out
    });
    let mut cmd = serve(&f);
    cmd.stdin(input(&f))
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    // The command holds its copy of the write end until dropped: the reader's end of file
    // needs every copy gone.
    drop(cmd);
    let status = wait(&mut child, Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let flags = rustix::fs::fcntl_getfl(kept.as_fd()).unwrap();
    assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK), "{flags:?}");
    drop(kept);
    let out = reader.join().unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains(r#""id":2"#), "{out}");
}

#[test]
fn a_stdout_pipe_the_host_made_non_blocking_is_left_non_blocking() {
    let f = Fixture::new();
    let (read_end, write_end) = rustix::pipe::pipe().unwrap();
    // The host's own choice, on the open file description it shares with the sidecar: what
    // the sidecar restores is what it found, not a blocking pipe.
    let flags = rustix::fs::fcntl_getfl(&write_end).unwrap();
    rustix::fs::fcntl_setfl(&write_end, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let kept = write_end.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(read_end), &mut out).unwrap();
        out
    });
    let mut cmd = serve(&f);
    cmd.stdin(input(&f))
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let status = wait(&mut child, Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let flags = rustix::fs::fcntl_getfl(kept.as_fd()).unwrap();
    assert!(flags.contains(rustix::fs::OFlags::NONBLOCK), "{flags:?}");
    drop(kept);
    let out = reader.join().unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[test]
fn a_file_as_stdout_gets_every_response() {
    let f = Fixture::new();
    let out_path = f.tmp.path().join("out.jsonl");
    let mut cmd = serve(&f);
    cmd.stdin(input(&f))
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let status = wait(&mut child, Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let out = std::fs::read_to_string(&out_path).unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains(r#""result":{}"#), "{out}");
}

/// Waits for `child` within `limit`, killing it and failing the test after.
fn wait(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the sidecar did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
