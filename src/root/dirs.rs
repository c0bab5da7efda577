//! What the resolver and the tree remover both do with a directory handle: tell its identity
//! and step to its parent without following anything.

use cap_std::fs::Dir;

/// A directory's identity: device and inode.
pub(super) type FileId = (u64, u64);

/// The identity of an open directory.
pub(super) trait FileIdOf {
    /// Device and inode, from the descriptor itself.
    fn file_id(&self) -> std::io::Result<FileId>;
}

impl FileIdOf for Dir {
    fn file_id(&self) -> std::io::Result<FileId> {
        let st = rustix::fs::fstat(self)?;
        Ok((st.st_dev, st.st_ino))
    }
}

/// Opens the parent of `dir` as a path handle, without following a final link (`..` is none).
pub(super) fn open_parent(dir: &Dir) -> std::io::Result<Dir> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        "..",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}
