//! The kernel side of watching: one inotify instance, one non-recursive kernel watch per
//! verified directory, and the thread that reads its events.
//!
//! A kernel watch is only ever placed on a directory handle the broker holds: the handle is
//! opened through the root's capability handle (or through its verified parent's handle)
//! without following links, and the watch is added on `/proc/self/fd/N`, which the kernel
//! resolves to the very inode behind the descriptor. Recursive watching is ours: a new
//! directory under a recursive watch is opened through its parent's handle, watched, and then
//! scanned once with an explicit, bounded queue, so that what was created in it before its
//! watch existed is reported as well. Nothing here follows a path the filesystem could have
//! changed; what a change's directory is, is decided again at delivery (see `map.rs`).

use super::{ReaderFindings, Watch};
use crate::locks::lock;
use crate::path::RelPath;
use crate::root::Root;
use cap_std::fs::Dir;
use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, WatchFlags};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

mod events;
mod scan;
mod tree;

use tree::{Node, Use};

/// Entries a scan of newly appeared directories reads at most; past it, the watches that
/// needed the scan are owed an `overflow`.
const SCAN_ENTRIES: usize = 1 << 16;
/// Names remembered from scans until the kernel queue has been read empty, so that a kernel
/// event for an entry a scan already reported is not reported again.
const SCANNED_MEMORY: usize = 1 << 16;

/// The events every kernel watch asks for. `ONLYDIR` makes the kernel refuse anything that is
/// not a directory; `DONT_FOLLOW` is absent on purpose: the path is `/proc/self/fd/N`, a magic
/// link that must be followed to reach the inode we hold.
fn mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// A watched directory as it was verified: its host path (for mapping to mount form) and its
/// inode, which must still be found at that path when one of its changes is delivered.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Place {
    /// The host path the directory had when it was verified.
    pub host: PathBuf,
    /// Its device.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
}

/// What happened to one name in a watched directory.
#[derive(Debug, Clone)]
pub(crate) enum RawKind {
    /// The name appeared.
    Created,
    /// The name went away.
    Deleted,
    /// Content or metadata of the entry changed.
    Modified,
    /// The name appeared by a rename from `from` (a name in `from_dir`).
    MovedFrom {
        /// The directory the entry left.
        from_dir: Arc<Place>,
        /// Its old name there.
        from: String,
    },
    /// Nothing changed: the dispatcher is woken to end watches whose directory moved.
    Wake,
}

/// One change as the kernel (or a scan) reported it: a name in a verified directory.
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    /// The directory.
    pub dir: Arc<Place>,
    /// The entry's name in it.
    pub name: String,
    /// What happened.
    pub kind: RawKind,
}

/// Why a directory could not be given a kernel watch.
#[derive(Debug)]
pub(super) enum PlaceError {
    /// `max_kernel_watches` is reached.
    Limit,
    /// The system's inotify limit is reached.
    SystemLimit(String),
    /// The inode is watched already under another path (a bind mount), or another error.
    Other(String),
}

pub(super) struct Kernel {
    fd: Arc<OwnedFd>,
    /// Written once when this state goes: the reading thread ends.
    stop: Arc<OwnedFd>,
    /// The reading thread, joined when this state goes.
    reader: Option<std::thread::JoinHandle<()>>,
    nodes: HashMap<i32, Node>,
    uses: HashMap<String, Use>,
    /// The limit on kernel watches, as last given by a new watch.
    pub(super) max: usize,
    scanned: HashMap<i32, HashSet<String>>,
    scanned_count: usize,
    tx: mpsc::Sender<RawEvent>,
    shared: Arc<ReaderFindings>,
}

/// The identity of an open directory.
fn identity(dir: &Dir) -> std::io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(dir)?;
    Ok((st.st_dev, st.st_ino))
}

/// Whether the directory `rel` of `root` is, right now, the inode `place` recorded: the
/// path resolves to itself (no symlink on the way) and names that very directory. Every
/// error answers no.
pub(super) fn at_place(root: &Root, rel: &RelPath, place: &Place) -> bool {
    use cap_std::fs::MetadataExt;
    let Ok(r) = locate(root, rel) else {
        return false;
    };
    if r.real().rel != *rel {
        return false;
    }
    r.metadata()
        .is_ok_and(|m| m.is_dir() && m.dev() == place.dev && m.ino() == place.ino)
}

/// The directory `rel` of `root` through the resolver, without following a final link. The
/// watcher asks where a directory is, not what a session may see: grants are checked on every
/// change before it is delivered.
fn locate(root: &Root, rel: &RelPath) -> crate::error::Result<crate::root::Granted> {
    root.resolve(
        rel,
        &crate::root::Gate::whole(),
        crate::root::FollowFinal::No,
        crate::root::Parents::Existing,
        None,
    )
}

impl Drop for Kernel {
    /// Stops the reading thread and waits for it, so that nothing of a broker outlives it.
    /// The thread itself may be the one letting the state go (it holds it while it reads);
    /// then it ends by itself right after.
    fn drop(&mut self) {
        let _ = rustix::io::write(&*self.stop, &1u64.to_ne_bytes());
        if let Some(reader) = self.reader.take()
            && reader.thread().id() != std::thread::current().id()
        {
            let _ = reader.join();
        }
    }
}

impl Kernel {
    /// A new inotify instance and the thread that reads it.
    pub(super) fn start(
        me: &Arc<Mutex<Option<Kernel>>>,
        tx: mpsc::Sender<RawEvent>,
        shared: Arc<ReaderFindings>,
        max: usize,
    ) -> std::io::Result<Kernel> {
        let fd = Arc::new(inotify::init(
            inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK,
        )?);
        // Written when the kernel state goes, so that its thread ends at once rather than at
        // its next poll timeout.
        let stop = Arc::new(rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?);
        let (weak, thread_fd, thread_stop) = (Arc::downgrade(me), fd.clone(), stop.clone());
        let reader = std::thread::Builder::new()
            .name("fsbroker-watch".into())
            .spawn(move || events::read_loop(&weak, &thread_fd, &thread_stop))?;
        Ok(Kernel {
            fd,
            stop,
            reader: Some(reader),
            nodes: HashMap::new(),
            uses: HashMap::new(),
            max,
            scanned: HashMap::new(),
            scanned_count: 0,
            tx,
            shared,
        })
    }

    /// Registers `watch` on the directory behind `dir` (its own directory, or a watched
    /// file's parent), found at `rel` of `root`. A recursive watch also watches every
    /// directory beneath, opened through its parent's handle, level by level.
    pub(super) fn add(
        &mut self,
        watch: &Arc<Watch>,
        dir: Dir,
        rel: RelPath,
        deadline: crate::deadline::Deadline,
    ) -> Result<(), super::WatchError> {
        let root = watch.root.clone();
        let id = watch.id.clone();
        let host = root.host_path_of(&rel);
        let top = self
            .place(&dir, &root, rel.clone(), host)
            .map_err(|e| to_watch_error(e, self.max))?;
        self.uses.insert(
            id.clone(),
            Use {
                watch: watch.clone(),
                top,
                dirs: HashSet::new(),
            },
        );
        self.take(&id, top);
        let result = self.complete(watch, top, dir, &rel, deadline);
        if result.is_err() {
            self.release(&id);
        }
        result
    }

    /// Completes the watch `watch` placed on `top` (the directory `dir` at `rel`): checks
    /// that the directory is still at its place, and, for a recursive watch, watches every
    /// directory beneath.
    fn complete(
        &mut self,
        watch: &Watch,
        top: i32,
        dir: Dir,
        rel: &RelPath,
        deadline: crate::deadline::Deadline,
    ) -> Result<(), super::WatchError> {
        use super::WatchError;
        // The handle was verified by the resolver; the watch now exists, so a move from
        // here on is seen. One that came in between is caught by checking again.
        let Some(place) = self.nodes.get(&top).map(|n| n.place.clone()) else {
            return Err(WatchError::Os("watch vanished".into()));
        };
        if !at_place(&watch.root, rel, &place) {
            return Err(WatchError::Os("the directory moved".into()));
        }
        if !watch.recursive {
            return Ok(());
        }
        self.watch_beneath(&watch.id, &watch.root, top, dir, deadline)
    }

    /// Sends one raw event, or records that events were lost.
    fn emit(&self, dir: &Arc<Place>, name: String, kind: RawKind) {
        let ev = RawEvent {
            dir: dir.clone(),
            name,
            kind,
        };
        if self.tx.try_send(ev).is_err() {
            self.shared.lost.store(true, Ordering::Relaxed);
        }
    }

    /// Wakes the dispatcher, so that ended watches are told at once.
    fn wake(&self) {
        let place = Arc::new(Place {
            host: PathBuf::new(),
            dev: 0,
            ino: 0,
        });
        let _ = self.tx.try_send(RawEvent {
            dir: place,
            name: String::new(),
            kind: RawKind::Wake,
        });
    }
}

fn to_watch_error(e: PlaceError, max: usize) -> super::WatchError {
    match e {
        PlaceError::Limit => super::WatchError::KernelLimit(max),
        PlaceError::SystemLimit(m) => super::WatchError::SystemLimit(m),
        PlaceError::Other(m) => super::WatchError::Os(m),
    }
}
