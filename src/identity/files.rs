//! Files a peer may have named, opened without trusting the name: only a regular file is
//! opened for reading, through the descriptor its name was judged by, and read within a
//! bound.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Reads at most `limit` bytes of the regular file `path` (see [`open_regular`]).
pub(super) fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The regular file `path` leads to, opened for reading, with the path the kernel gives it
/// (links followed). The name is opened for its identity first, and judged before anything
/// is read: a path a process chose may name a FIFO, which would hold the broker, or a
/// device, which an open for reading could set off (a tape rewinds, a watchdog arms). The
/// same file is then opened through that descriptor, so no swap of the name comes between.
/// `None` as well when it is a regular file that cannot be read (execute-only).
pub(super) fn open_regular(path: &Path) -> Option<(std::fs::File, PathBuf)> {
    match held_regular(path)? {
        Held::Readable(file, real) => Some((file, real)),
        Held::Unreadable(..) => None,
    }
}

/// A regular file found by [`held_regular`].
pub(super) enum Held {
    /// Opened for reading; its real path.
    Readable(std::fs::File, PathBuf),
    /// Not readable by us: its real path, device and inode.
    Unreadable(PathBuf, (u64, u64)),
}

/// The regular file `path` leads to: see [`open_regular`]. `None` when there is none.
pub(super) fn held_regular(path: &Path) -> Option<Held> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::os::fd::AsRawFd;
    let held = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let st = rustix::fs::fstat(&held).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    let by_fd = format!("/proc/self/fd/{}", held.as_raw_fd());
    let real = std::fs::read_link(&by_fd).ok()?;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::open(by_fd.as_str(), flags, Mode::empty()) {
        Ok(fd) => Some(Held::Readable(std::fs::File::from(fd), real)),
        Err(rustix::io::Errno::ACCESS) => Some(Held::Unreadable(real, (st.st_dev, st.st_ino))),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_is_read_and_only_up_to_the_bound() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = t.path().join("package.json");
        std::fs::write(&file, "0123456789").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_bounded(&file, 4).as_deref(), Some(&b"0123"[..]));
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap_or_else(|e| panic!("{e}"));
        let (_, real) = open_regular(&link).unwrap_or_else(|| panic!("not opened"));
        assert_eq!(
            real,
            std::fs::canonicalize(&file).unwrap_or_else(|e| panic!("{e}"))
        );
        // A FIFO with no writer, opened for reading, would hold the reader here for good.
        let fifo = t.path().join("METADATA");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            0o600.into(),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_bounded(&fifo, 4), None);
        assert_eq!(read_bounded(t.path(), 4), None, "a directory");
        assert_eq!(read_bounded(Path::new("/dev/zero"), 4), None, "a device");
        assert!(read_bounded(Path::new("/proc/self/stat"), 4096).is_some_and(|b| !b.is_empty()));
    }
}
