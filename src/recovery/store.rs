//! The store's directory: where kept content lives, each change's under its own id in
//! `objects/`. It is the user's alone: made 0700, owned by the user, never a link, and opened
//! once; everything after goes through its handle.

use super::copy::{self, Copied, CopyFail};
use crate::deadline::Deadline;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The directory of kept content inside the store.
const OBJECTS: &str = "objects";

/// Where pruned content waits to be removed, off the path of the request that pruned it.
const PRUNED: &str = "pruned";

/// The store, opened.
#[derive(Debug)]
pub(super) struct Store {
    /// Where it is, for messages and the journal's `place`.
    pub(super) path: PathBuf,
    /// `objects/`.
    objects: Dir,
    /// `pruned/`, emptied by a thread of its own.
    pruned: std::sync::Arc<Dir>,
    /// Whether that thread is running.
    sweeping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Store {
    /// Makes (0700) or opens the store at `path`. Refused when it is a link, not a directory,
    /// or someone else's: then the user's kept content could be read or replaced by another.
    pub(super) fn open(path: &Path) -> std::io::Result<Store> {
        let path = crate::root::absolute(path)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)?;
        let fd = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        let st = rustix::fs::fstat(&fd)?;
        if st.st_uid != rustix::process::geteuid().as_raw() {
            return Err(std::io::Error::other(format!(
                "{} belongs to another user: the recovery store must be the user's own",
                path.display()
            )));
        }
        if st.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
        }
        let dir = Dir::from_std_file(std::fs::File::from(fd));
        let sub = |name: &str| -> std::io::Result<Dir> {
            match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            let fd = rustix::fs::openat(
                &dir,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            Ok(Dir::from_std_file(std::fs::File::from(fd)))
        };
        let store = Store {
            path,
            objects: sub(OBJECTS)?,
            pruned: std::sync::Arc::new(sub(PRUNED)?),
            sweeping: std::sync::Arc::default(),
        };
        // What an earlier process pruned and did not get to remove.
        store.sweep();
        Ok(store)
    }

    /// Where object `id` is, for the user.
    pub(super) fn place(&self, id: &str) -> PathBuf {
        self.path.join(OBJECTS).join(id)
    }

    /// Keeps the file or link `name` in `parent` as `id` by a hard link (never following it):
    /// constant time, and the content stays whatever replaces the name.
    pub(super) fn link_in(&self, parent: &Dir, name: &str, id: &str) -> std::io::Result<()> {
        Ok(rustix::fs::linkat(
            parent,
            name,
            &self.objects,
            id,
            AtFlags::empty(),
        )?)
    }

    /// Moves `name` in `parent` (anything, a whole tree too) into the store as `id`.
    pub(super) fn move_in(&self, parent: &Dir, name: &str, id: &str) -> std::io::Result<()> {
        crate::atomic::rename_noreplace(parent, name, &self.objects, id)
    }

    /// Copies `name` in `parent` into the store as `id`, within `limit`; what a failed copy
    /// made is removed.
    pub(super) fn copy_in(
        &self,
        parent: &Dir,
        name: &str,
        id: &str,
        limit: u64,
        deadline: Option<Deadline>,
    ) -> Result<Copied, CopyFail> {
        let done = copy::copy_tree(
            parent,
            OsStr::new(name),
            &self.objects,
            OsStr::new(id),
            limit,
            deadline,
        );
        if done.is_err() {
            self.remove(id);
        }
        done
    }

    /// Makes an empty directory `id` with `mode`: what an empty directory a rename replaced
    /// leaves to restore.
    pub(super) fn empty_dir(&self, id: &str, mode: u32) -> std::io::Result<()> {
        rustix::fs::mkdirat(&self.objects, id, Mode::from_raw_mode(0o700))?;
        let fd = rustix::fs::openat(
            &self.objects,
            id,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))?)
    }

    /// Puts object `id` back as `name` in `parent`, which must not exist: by a rename, else
    /// (across filesystems) by a copy, after which the object is removed.
    pub(super) fn put_back(&self, id: &str, parent: &Dir, name: &str) -> std::io::Result<()> {
        match crate::atomic::rename_noreplace(&self.objects, id, parent, name) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {}
            other => return other,
        }
        let name = OsStr::new(name);
        match copy::copy_tree(&self.objects, OsStr::new(id), parent, name, u64::MAX, None) {
            Ok(_) => {
                self.remove(id);
                Ok(())
            }
            Err(CopyFail::Io(e)) => Err(e),
            Err(_) => Err(std::io::Error::other("the copy back stopped")),
        }
    }

    /// The bytes object `id` costs the store.
    pub(super) fn measure(&self, id: &str) -> std::io::Result<u64> {
        copy::measure(&self.objects, OsStr::new(id))
    }

    /// Whether object `id` is there.
    pub(super) fn has(&self, id: &str) -> bool {
        rustix::fs::statat(&self.objects, id, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Prunes object `id`: moved aside at once (one rename), removed by the sweeping thread,
    /// so that the request whose keep made room never waits for a large tree to go.
    pub(super) fn prune(&self, id: &str) {
        match rustix::fs::renameat(&self.objects, id, &*self.pruned, id) {
            Ok(()) => self.sweep(),
            Err(rustix::io::Errno::NOENT) => {}
            Err(_) => self.remove(id),
        }
    }

    /// Starts the thread that empties `pruned/`, unless it runs already.
    fn sweep(&self) {
        use std::sync::atomic::Ordering;
        if self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let (pruned, sweeping, place) = (
            self.pruned.clone(),
            self.sweeping.clone(),
            self.path.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("fsbroker-prune".into())
            .spawn(move || {
                loop {
                    let names: Vec<_> = match pruned.entries() {
                        Ok(e) => e.filter_map(|e| e.ok()).map(|e| e.file_name()).collect(),
                        Err(_) => Vec::new(),
                    };
                    for name in &names {
                        let Some(name) = name.to_str() else { continue };
                        if let Err(e) = remove_entry(&pruned, name) {
                            tracing::warn!(store = %place.display(), "cannot remove pruned content: {e}");
                        }
                    }
                    sweeping.store(false, Ordering::Release);
                    // Pruned while the last pass ran: go on, unless another thread took over.
                    let more = pruned.entries().is_ok_and(|mut e| e.next().is_some());
                    if !more || sweeping.swap(true, Ordering::AcqRel) {
                        return;
                    }
                }
            });
        if spawned.is_err() {
            self.sweeping.store(false, Ordering::Release);
        }
    }

    /// Removes object `id`, whatever it is; a failure is logged, not fatal: the journal no
    /// longer counts it either way.
    pub(super) fn remove(&self, id: &str) {
        if let Err(e) = remove_entry(&self.objects, id) {
            tracing::warn!(store = %self.path.display(), id, "cannot remove kept content: {e}");
        }
    }
}

/// Removes `name` in `dir`, a tree too, never following a link; gone already is no error
/// (another process sharing the store may have removed it).
fn remove_entry(dir: &Dir, name: &str) -> Result<(), String> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(_) => Ok(()),
        Ok(st) if rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() => {
            match crate::root::remove_tree(dir, name) {
                Err(e) if e.kind() == crate::error::ErrorKind::FileNotFound => Ok(()),
                other => other.map_err(|e| e.to_string()),
            }
        }
        Ok(_) => match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
    }
}

/// A new id for a change: 12 random hex digits. Collisions are refused by the store (every
/// object is made new), and are about one in 2^48 anyway.
pub(super) fn new_id() -> String {
    let mut b = [0u8; 6];
    if getrandom::fill(&mut b).is_err() {
        // No randomness: the clock and the process, which the store still makes unique.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mixed = (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 40);
        b.copy_from_slice(&mixed.to_le_bytes()[..6]);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}
