//! The identity of a process that already runs: the peer of `fsbroker serve`, which is
//! whoever writes its standard input. The program is the file the kernel executed
//! (`/proc/PID/exe`, which reaches it even when its name was since removed or replaced), and
//! what it runs is read as for a command the proxy starts ([`super::launch::identify`]).

use super::digests::Digests;
use super::launch::{View, identify, resolve};
use super::{Identity, procfs};
use std::path::PathBuf;

/// The most descriptors of one process looked at for the other end of a pipe.
const MAX_FDS: usize = 4096;
/// The most descriptors looked at in all, over every process.
const MAX_LOOKS: usize = 262_144;

/// The process on the other end of our standard input, found through the kernel:
/// - a pipe (`pipe:[INODE]`): the one other process that holds it (see [`pipe_peer`]);
///   none when two do;
/// - a Unix socket: the peer's credentials as the kernel recorded them at `connect` (or at
///   `socketpair`), `SO_PEERCRED`;
/// - else, or when neither answers, our parent process.
pub(crate) fn stdin_peer() -> Option<u32> {
    let me = std::process::id();
    let link = std::fs::read_link("/proc/self/fd/0").ok();
    let link = link
        .as_ref()
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default();
    let found = if let Some(inode) = inode_of(&link, "pipe:[") {
        pipe_peer(inode, me)
    } else if link.starts_with("socket:[") {
        rustix::net::sockopt::socket_peercred(std::io::stdin())
            .ok()
            .and_then(|c| u32::try_from(c.pid.as_raw_pid()).ok())
            .filter(|p| *p != me && *p != 0)
    } else {
        None
    };
    // A parent that is init or a subreaper's stand-in says nothing of who writes: an orphan
    // is no identity.
    found.or_else(|| Some(std::os::unix::process::parent_id()).filter(|p| *p > 1))
}

/// The `N` of a descriptor link `PREFIXN]`.
fn inode_of(link: &str, prefix: &str) -> Option<u64> {
    link.strip_prefix(prefix)?.strip_suffix(']')?.parse().ok()
}

/// The one process other than `except` that holds the pipe `inode` open for writing (or,
/// when none does, the one that holds it at all); `None` when it is held by more than one,
/// or the descriptors could not all be looked at. Processes whose descriptors cannot be read
/// (another user's) are passed over.
///
/// A pipe's writer can hand its end to another program (a child started with it), and then
/// either could be writing: which one is not something the kernel says, so a pipe held by
/// two is no identity at all rather than the likelier of the two.
pub(super) fn pipe_peer(inode: u64, except: u32) -> Option<u32> {
    let want = format!("pipe:[{inode}]");
    let (mut writers, mut holders) = (Vec::new(), Vec::new());
    let mut looks = 0usize;
    for pid in procfs::pids() {
        if pid == except {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.take(MAX_FDS).filter_map(Result::ok) {
            looks += 1;
            if looks > MAX_LOOKS {
                return None;
            }
            if std::fs::read_link(fd.path())
                .ok()
                .is_none_or(|l| l.as_os_str() != want.as_str())
            {
                continue;
            }
            let list = if writes(pid, &fd.file_name().to_string_lossy()) {
                &mut writers
            } else {
                &mut holders
            };
            if !list.contains(&pid) {
                list.push(pid);
            }
        }
    }
    let one = |l: Vec<u32>| (l.len() == 1).then(|| l[0]);
    match writers.len() {
        0 => one(holders),
        _ => one(writers),
    }
}

/// Whether descriptor `fd` of process `pid` is open for writing, from the `flags:` line (in
/// octal) of `/proc/PID/fdinfo/FD`.
fn writes(pid: u32, fd: &str) -> bool {
    let path = PathBuf::from(format!("/proc/{pid}/fdinfo/{fd}"));
    let Some(info) = super::files::read_bounded(&path, 4096) else {
        return false;
    };
    let flags = String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("flags:").map(|v| v.trim().to_owned()))
        .and_then(|v| u32::from_str_radix(&v, 8).ok());
    // O_ACCMODE: 1 is write-only, 2 read and write.
    flags.is_some_and(|f| matches!(f & 3, 1 | 2))
}

/// The identity of running process `pid`, sealed: its argument vector and working directory
/// from `/proc`, its program the file the kernel executed, named by the path its first
/// argument leads to when that leads to the same file (else by the file's own path).
/// Nothing fails: what cannot be read stays empty.
pub(crate) fn of_process(pid: u32, digests: &mut Digests) -> Identity {
    let argv = procfs::cmdline(pid);
    let cwd = procfs::cwd(pid).unwrap_or_else(|| PathBuf::from("/"));
    let path_var = procfs::env_var(pid, "PATH");
    let file = digests.of(&PathBuf::from(format!("/proc/{pid}/exe")));
    let named = argv
        .first()
        .and_then(|a| resolve(a, &cwd, path_var.as_deref()))
        .filter(|p| {
            use std::os::unix::fs::MetadataExt;
            let same =
                |m: std::fs::Metadata| file.as_ref().is_some_and(|f| f.id == (m.dev(), m.ino()));
            std::fs::metadata(p).is_ok_and(same)
        });
    let path = named
        .or_else(|| file.as_ref().map(|f| f.real.clone()))
        .unwrap_or_else(|| PathBuf::from(format!("/proc/{pid}/exe")));
    let view = View {
        argv: &argv,
        cwd: &cwd,
        path_var: path_var.as_deref(),
        pid: Some(pid),
    };
    let mut id = identify(&view, path, file, digests);
    id.launched_by = procfs::launched_by(pid);
    id.sealed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::launch::{Launch, of_launch};
    use std::os::fd::OwnedFd;
    use std::process::{Command, Stdio};

    fn sleeper(stdin: Option<OwnedFd>, stdout: Option<OwnedFd>) -> std::process::Child {
        let mut c = Command::new("sleep");
        c.arg("30");
        if let Some(fd) = stdin {
            c.stdin(Stdio::from(fd));
        }
        if let Some(fd) = stdout {
            c.stdout(Stdio::from(fd));
        }
        c.spawn().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_other_end_of_a_pipe_is_the_process_that_writes_it() {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .unwrap_or_else(|e| panic!("{e}"));
        let inode = rustix::fs::fstat(&read)
            .unwrap_or_else(|e| panic!("{e}"))
            .st_ino;
        let also_read = read.try_clone().unwrap_or_else(|e| panic!("{e}"));
        // A reader started first (a lower process id, found first), then the writer.
        let mut reader = sleeper(Some(also_read), None);
        let mut writer = sleeper(None, Some(write));
        let me = std::process::id();
        assert_eq!(pipe_peer(inode, me), Some(writer.id()));
        let _ = writer.kill();
        let _ = writer.wait();
        assert_eq!(
            pipe_peer(inode, me),
            Some(reader.id()),
            "else whoever holds it"
        );
        let _ = reader.kill();
        let _ = reader.wait();
        assert_eq!(pipe_peer(inode, me), None, "we are not our own peer");
        drop(read);
    }

    #[test]
    fn a_pipe_two_processes_write_names_neither() {
        // A writer that hands its end to a trusted program (a decoy) and writes through
        // another: either could be the one writing, so neither is the peer.
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .unwrap_or_else(|e| panic!("{e}"));
        let inode = rustix::fs::fstat(&read)
            .unwrap_or_else(|e| panic!("{e}"))
            .st_ino;
        let lent = write.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let mut decoy = sleeper(None, Some(lent));
        let mut writer = sleeper(None, Some(write));
        let me = std::process::id();
        assert_eq!(
            pipe_peer(inode, me),
            None,
            "a pipe two write names one of them"
        );
        let _ = decoy.kill();
        let _ = decoy.wait();
        assert_eq!(pipe_peer(inode, me), Some(writer.id()));
        let _ = writer.kill();
        let _ = writer.wait();
        drop(read);
    }

    /// The variable under which this test binary, run again by
    /// [`the_peer_on_standard_input_is_found_through_the_kernel`], reports its stdin's peer.
    const REPORT: &str = "FSBROKER_TEST_REPORT_STDIN_PEER";

    /// Not a test of its own: the body of the child the test below starts, which prints
    /// what [`stdin_peer`] finds (and does nothing in an ordinary run).
    #[test]
    fn report_stdin_peer() {
        if std::env::var_os(REPORT).is_some() {
            println!("peer={:?}", stdin_peer());
        }
    }

    /// Runs this test binary again, `report_stdin_peer` alone, with `stdin` as its standard
    /// input, below a shell (so that its parent is not this process, nor the peer), and
    /// answers the peer it found.
    fn peer_seen_through(stdin: Stdio) -> String {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new("sh")
            .args(["-c", "\"$0\" \"$@\"; true"])
            .arg(exe)
            .args([
                "--exact",
                "identity::process::tests::report_stdin_peer",
                "--nocapture",
            ])
            .args(["--test-threads", "1"])
            .env(REPORT, "1")
            .stdin(stdin)
            .stderr(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let found = text.lines().find_map(|l| Some(l.split_once("peer=")?.1));
        found
            .unwrap_or_else(|| panic!("no report in {text}"))
            .to_owned()
    }

    #[test]
    fn the_peer_on_standard_input_is_found_through_the_kernel() {
        let me = format!("{:?}", Some(std::process::id()));
        // A pipe this process writes, and one another process writes.
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(peer_seen_through(Stdio::from(read)), me);
        drop(write);
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut writer = sleeper(None, Some(write));
        let seen = peer_seen_through(Stdio::from(read));
        let _ = writer.kill();
        let _ = writer.wait();
        assert_eq!(
            seen,
            format!("{:?}", Some(writer.id())),
            "the writer, not the parent"
        );
        // A socket pair: the kernel's record of who made it.
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(peer_seen_through(Stdio::from(OwnedFd::from(theirs))), me);
        drop(ours);
    }

    #[test]
    fn a_running_process_is_known_as_the_command_that_started_it() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let script = t.path().join("server.py");
        std::fs::write(&script, "import time\ntime.sleep(30)\n").unwrap_or_else(|e| panic!("{e}"));
        let mut child = Command::new("/usr/bin/python3")
            .arg("server.py")
            .current_dir(t.path())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        // The new program's command line is there once its `execve` has completed.
        for _ in 0..1000 {
            if procfs::cmdline(child.id()).len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut d = Digests::at(t.path().join("cache.json"));
        let running = of_process(child.id(), &mut d);
        let launch = Launch {
            argv: vec!["/usr/bin/python3".into(), "server.py".into()],
            cwd: t.path().to_path_buf(),
            path_var: None,
            pin: None,
        };
        let started = of_launch(&launch, None, &mut d);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(running.digest, started.digest, "{running:?} vs {started:?}");
        let program = running.program.unwrap_or_else(|| panic!("no program"));
        assert_eq!(program.path, PathBuf::from("/usr/bin/python3"));
        let real = std::fs::canonicalize(&script).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(running.runs.and_then(|r| r.path), Some(real));
        assert!(
            !running.launched_by.is_empty(),
            "the test runner started it"
        );
    }

    #[test]
    fn a_program_replaced_while_it_runs_is_known_by_what_was_executed() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let program = t.path().join("mysleep");
        std::fs::copy("/bin/sleep", &program).unwrap_or_else(|e| panic!("{e}"));
        let mut d = Digests::at(t.path().join("cache.json"));
        let executed = d.of(&program).unwrap_or_else(|| panic!("no digest"));
        let mut child = Command::new(&program)
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        // Another file is put in its place, as an update (or a server) would.
        let other = t.path().join("other");
        std::fs::write(&other, "#!/bin/sh\nexit 0\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(&other, &program).unwrap_or_else(|e| panic!("{e}"));
        let running = of_process(child.id(), &mut d);
        let _ = child.kill();
        let _ = child.wait();
        let p = running.program.unwrap_or_else(|| panic!("no program"));
        assert_eq!(
            p.digest, executed.digest,
            "the executed file, not the new one"
        );
        assert_ne!(p.path, program, "the name leads to another file now");
        assert_eq!(running.runs, None, "a binary runs nothing of its own");
    }
}
