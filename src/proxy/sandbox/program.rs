//! The server's program, held: what the profile judged is what the helper runs.
//!
//! The proxy builds the profile from one reading of the program's path and the helper
//! `exec`s it later; a server that keeps re-pointing a link between the two could have its
//! profile built from one file and another file run. So the proxy records the file it read
//! (device and inode), the helper opens the same path and refuses to go on if it finds
//! another file, and it runs the very descriptor it checked.

use super::SandboxError;
use rustix::fs::{Mode, OFlags};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The program of a sandboxed server, as the profile saw it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Program {
    /// The path `execve` is given: the command's first word, found on `PATH` when it has no
    /// `/`.
    pub(crate) path: PathBuf,
    /// The real path of the file the proxy opened (from its descriptor, not from the name).
    pub(crate) real: PathBuf,
    /// That file's device and inode.
    pub(crate) pin: (u64, u64),
    /// Whether it is a `#!` script, which the kernel hands to its interpreter by name.
    pub(crate) script: bool,
}

impl Program {
    /// Opens the program of `command` (found as `execve` would find it) and records which
    /// file it is. None when there is no such program: the helper's `exec` then fails as
    /// without the sandbox.
    pub(super) fn hold(program: &str, cwd: &Path) -> Result<Option<Program>, SandboxError> {
        let Some(path) = super::launcher::resolve(program, cwd) else {
            return Ok(None);
        };
        // Non-blocking: a FIFO planted under the program's name must not hold the proxy.
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = match rustix::fs::open(&path, flags, Mode::empty()) {
            Ok(fd) => fd,
            // Execute-only programs cannot be read: held as a path, taken for a binary.
            Err(rustix::io::Errno::ACCESS) => open_path(&path)?,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(cannot(&path, e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| cannot(&path, e))?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(SandboxError::Profile(format!(
                "the server's program {} is not a regular file",
                path.display()
            )));
        }
        let real =
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|e| {
                SandboxError::Profile(format!("cannot tell what {} is: {e}", path.display()))
            })?;
        let mut head = [0u8; 2];
        let script = rustix::io::read(&fd, &mut head).is_ok_and(|n| n == 2 && head == *b"#!");
        Ok(Some(Program {
            path,
            real,
            pin: (st.st_dev, st.st_ino),
            script,
        }))
    }

    /// In the helper: opens the program again and checks it is the file the profile was
    /// built for. An error means it changed in between; the server must not start.
    pub(super) fn reopen(&self) -> Result<OwnedFd, SandboxError> {
        let fd = open_path(&self.path)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| cannot(&self.path, e))?;
        if (st.st_dev, st.st_ino) != self.pin {
            return Err(SandboxError::Profile(format!(
                "{} changed between building the profile and starting the server (something is swapping it); not started",
                self.path.display()
            )));
        }
        Ok(fd)
    }

    /// The command that runs the checked file `fd`, with `arg0` as its name. A binary is run
    /// through its descriptor, so nothing can swap it any more. A `#!` script is run by its
    /// path, as the kernel gives its interpreter the script's name to open (through a
    /// descriptor its `$0` would be `/dev/fd/N`); what a script runs is decided inside the
    /// sandbox, and the profile took nothing from a script the server could change.
    pub(super) fn command(&self, fd: &OwnedFd, arg0: &str) -> std::process::Command {
        let mut cmd = if self.script {
            std::process::Command::new(&self.path)
        } else {
            std::process::Command::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        };
        cmd.arg0(arg0);
        cmd
    }
}

/// Opens `path` following links, as `execve` would, for its identity only.
fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| cannot(path, e))
}

fn cannot(path: &Path, e: rustix::io::Errno) -> SandboxError {
    SandboxError::Profile(format!(
        "cannot open the server's program {}: {e}",
        path.display()
    ))
}
