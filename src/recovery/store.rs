//! The store's directory: where kept content lives, each change's under its own id in
//! `objects/`. It is the user's alone: made 0700, owned by the user, never a link, and opened
//! once; everything after goes through its handle.

use super::copy::{self, Copied, CopyFail};
use super::walk::{self, Unmeasured};
use crate::deadline::Deadline;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The directory of kept content inside the store.
const OBJECTS: &str = "objects";

/// The store, opened.
#[derive(Debug)]
pub(super) struct Store {
    /// Where it is, for messages and the journal's `place`.
    pub(super) path: PathBuf,
    /// `objects/`, shared with the thread that removes what was pruned.
    objects: std::sync::Arc<Dir>,
    /// Whether that thread is running.
    sweeping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// What [`Store::take`] names content taken out of the way: no id begins so (ids are hex).
const TRASH: &str = "trash.";

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
        match rustix::fs::mkdirat(&dir, OBJECTS, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let objects = rustix::fs::openat(
            &dir,
            OBJECTS,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let store = Store {
            path,
            objects: std::sync::Arc::new(Dir::from_std_file(std::fs::File::from(objects))),
            sweeping: std::sync::Arc::default(),
        };
        // What an earlier process took out of the way and did not get to remove.
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
        let fd = copy::open_dir(&self.objects, OsStr::new(id))?;
        Ok(rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))?)
    }

    /// Puts object `id` back as `name` in `parent`, which must not exist: by a rename, else
    /// (across filesystems) by a copy, after which the object is removed.
    pub(super) fn put_back(&self, id: &str, parent: &Dir, name: &str) -> std::io::Result<()> {
        match crate::atomic::rename_noreplace(&self.objects, id, parent, name) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {}
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ACCESS.raw_os_error()) => {
                return self.put_back_read_only(id, parent, name).map_err(|_| e);
            }
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

    /// Puts object `id` back beside `name` in `parent`, under a free name made of `name`, a
    /// mark, and a random part (never replacing anything), and returns that name: where a
    /// refused delete's entry goes when a process took its name meanwhile. The random part
    /// keeps a process from taking every such name ahead; the attempts are bounded.
    pub(super) fn put_back_beside(
        &self,
        id: &str,
        parent: &Dir,
        name: &str,
    ) -> std::io::Result<String> {
        let mut last = std::io::Error::from(rustix::io::Errno::EXIST);
        for _ in 0..8 {
            let beside = beside_name(name, &new_id());
            match self.put_back(id, parent, &beside) {
                Ok(()) => return Ok(beside),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) => {
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Puts back a directory of the user's without write permission of its own, which a
    /// rename to another directory needs (for its `..`): it is made writable for the
    /// rename, and gets its mode back after. A deleted read-only directory used to be
    /// beyond `restore` and `undo` for anyone but root.
    fn put_back_read_only(&self, id: &str, parent: &Dir, name: &str) -> std::io::Result<()> {
        let fd = copy::open_dir(&self.objects, OsStr::new(id))?;
        let st = rustix::fs::fstat(&fd)?;
        if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o200 != 0 {
            return Err(rustix::io::Errno::ACCESS.into());
        }
        let mode = Mode::from_raw_mode(st.st_mode & 0o7777);
        rustix::fs::fchmod(&fd, mode | Mode::WUSR)?;
        let moved = crate::atomic::rename_noreplace(&self.objects, id, parent, name);
        rustix::fs::fchmod(&fd, mode)?;
        moved
    }

    /// The bytes object `id` costs the store, at any depth; once past `limit`, some number
    /// past it (see [`walk::measure`]).
    pub(super) fn measure(
        &self,
        id: &str,
        limit: u64,
        deadline: Option<Deadline>,
    ) -> Result<u64, Unmeasured> {
        walk::measure(&self.objects, OsStr::new(id), limit, deadline)
    }

    /// Whether object `id` is there.
    pub(super) fn has(&self, id: &str) -> bool {
        rustix::fs::statat(&self.objects, id, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Removes object `id`, whatever it is; a failure is logged, not fatal: the journal no
    /// longer counts it either way.
    pub(super) fn remove(&self, id: &str) {
        if let Some(taken) = self.take(id) {
            self.purge(&taken);
        }
    }

    /// Takes object `id` out of the way, in one rename within `objects/` (so that no write
    /// permission on a kept directory is needed), to a name no change has (`trash.` and a
    /// random part; ids are hex digits), and names it; `None` when it is not there (restored
    /// meanwhile, or never made). A restore renaming the object into a root at the same
    /// moment either gets it whole or finds it gone: it never receives a tree that a removal
    /// is still emptying. Cheap, so that it is what the journal's lock is held for, while
    /// [`Store::purge`] runs after that lock is let go.
    pub(super) fn take(&self, id: &str) -> Option<String> {
        for _ in 0..8 {
            let name = format!("{TRASH}{id}.{}", new_id());
            match crate::atomic::rename_noreplace(&self.objects, id, &self.objects, &name) {
                Ok(()) => return Some(name),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {
                    return None;
                }
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) => {}
                Err(e) => {
                    tracing::warn!(store = %self.path.display(), id, "cannot take kept content out: {e}");
                    return None;
                }
            }
        }
        None
    }

    /// Removes `name` (one [`Store::take`] named) from `objects/`, whatever it is.
    pub(super) fn purge(&self, name: &str) {
        purge(&self.objects, &self.path, name);
    }

    /// Starts the thread that removes what [`Store::take`] took out of the way, unless it
    /// runs already: so that no request waits for a large tree to go.
    pub(super) fn sweep(&self) {
        use std::sync::atomic::Ordering;
        if self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let (objects, sweeping) = (self.objects.clone(), self.sweeping.clone());
        let place = self.path.clone();
        let taken = move |objects: &Dir| -> Vec<String> {
            objects.entries().map_or_else(
                |_| Vec::new(),
                |e| {
                    e.filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .filter(|n| n.starts_with(TRASH))
                        .collect()
                },
            )
        };
        let spawned = std::thread::Builder::new()
            .name("fsbroker-prune".into())
            .spawn(move || {
                // What this thread could not remove (logged): not tried again in a busy loop,
                // but by the next thread, which the next take starts.
                let mut failed = std::collections::HashSet::new();
                loop {
                    for name in taken(&objects) {
                        if !failed.contains(&name) && !purge(&objects, &place, &name) {
                            failed.insert(name);
                        }
                    }
                    sweeping.store(false, Ordering::Release);
                    // Taken while the last pass ran: go on, unless another thread took over.
                    let new = taken(&objects).iter().any(|n| !failed.contains(n));
                    if !new || sweeping.swap(true, Ordering::AcqRel) {
                        return;
                    }
                }
            });
        if spawned.is_err() {
            self.sweeping.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// What a test does between a delete's move into the store and its put-back (take the
    /// entry's name, remove its directory): the race made deterministic.
    pub(super) static BETWEEN: std::cell::RefCell<Option<Box<dyn Fn()>>> = std::cell::RefCell::new(None);
}

/// The point between a delete's move into the store and its put-back, where a test takes
/// the name; nothing happens here outside tests.
pub(super) fn between_measure_and_put_back() {
    #[cfg(test)]
    BETWEEN.with(|b| {
        if let Some(f) = b.borrow().as_ref() {
            f();
        }
    });
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

/// Removes `name` from `objects/`, whatever it is, a read-only tree too, at any depth;
/// answers whether it is gone. A failure is logged: the journal no longer counts it either way.
fn purge(objects: &Dir, place: &Path, name: &str) -> bool {
    match walk::remove(objects, OsStr::new(name)) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            tracing::warn!(store = %place.display(), name, "cannot remove kept content: {e}");
            false
        }
    }
}

/// The mark of a name a refused delete's entry was put back under, beside its own.
pub(super) const BESIDE: &str = ".fsbroker-putback-";

/// `name`, the mark and `random`, within the 255 bytes a name may have: a long `name` is cut
/// (at a character's boundary) rather than the put-back failing for the length.
pub(super) fn beside_name(name: &str, random: &str) -> String {
    let room = 255usize.saturating_sub(BESIDE.len() + random.len());
    let mut cut = name.len().min(room);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{BESIDE}{random}", &name[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(dir: &Path) -> usize {
        let mut n = 0;
        let mut todo = vec![dir.to_owned()];
        while let Some(d) = todo.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(e.path());
                } else {
                    n += 1;
                }
            }
        }
        n
    }

    /// A prune (another process's, or another thread's) removing a kept tree while a restore
    /// renames that tree back into a root: the restore gets it whole or not at all. The
    /// removal used to go on inside the restored tree, through the handles it held, so that
    /// the restore succeeded and the root received a tree being emptied.
    #[test]
    fn a_prune_racing_a_restore_never_empties_what_was_put_back() {
        const FILES: usize = 4000;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let store = Store::open(&dir.path().join("store")).unwrap();
        let handle = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
        let mut lost = Vec::new();
        for round in 0..3 {
            let tree = store.place("x");
            for d in 0..40 {
                std::fs::create_dir_all(tree.join(format!("d{d}"))).unwrap();
                for f in 0..FILES / 40 {
                    std::fs::write(tree.join(format!("d{d}/f{f}")), "k").unwrap();
                }
            }
            let first = tree.join("d0");
            let (_, back) = std::thread::scope(|s| {
                let pruning = s.spawn(|| store.remove("x"));
                // The restore comes while the removal is under way (or just before it).
                let restoring = s.spawn(|| {
                    let t0 = std::time::Instant::now();
                    while count(&first) == FILES / 40
                        && t0.elapsed() < std::time::Duration::from_secs(5)
                    {
                        std::thread::yield_now();
                    }
                    store.put_back("x", &handle, "x")
                });
                (pruning.join().unwrap(), restoring.join().unwrap())
            });
            if back.is_ok() {
                let n = count(&root.join("x"));
                if n != FILES {
                    lost.push(format!(
                        "round {round}: restored, with {n} of {FILES} files"
                    ));
                }
                std::fs::remove_dir_all(root.join("x")).unwrap();
            }
        }
        assert!(lost.is_empty(), "{lost:?}");
    }
}
