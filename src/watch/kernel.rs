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

use super::{Shared, Watch};
use crate::locks::lock;
use crate::path::RelPath;
use crate::root::Root;
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use std::collections::{HashMap, HashSet, VecDeque};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::mpsc;

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
pub struct Place {
    /// The host path the directory had when it was verified.
    pub host: PathBuf,
    /// Its device.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
}

/// What happened to one name in a watched directory.
#[derive(Debug, Clone)]
pub enum RawKind {
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
pub struct RawEvent {
    /// The directory.
    pub dir: Arc<Place>,
    /// The entry's name in it.
    pub name: String,
    /// What happened.
    pub kind: RawKind,
}

#[derive(Debug)]
struct Node {
    place: Arc<Place>,
    /// The root it was verified through, and its path there.
    root: Arc<Root>,
    rel: RelPath,
    parent: Option<i32>,
    children: HashMap<String, i32>,
    /// How many watches use this kernel watch.
    refs: usize,
}

/// What one watch holds of the kernel watches.
#[derive(Debug)]
struct Use {
    watch: Arc<Watch>,
    top: i32,
    dirs: HashSet<i32>,
}

/// Why a directory could not be given a kernel watch.
#[derive(Debug)]
pub enum PlaceError {
    /// `max_kernel_watches` is reached.
    Limit,
    /// The system's inotify limit is reached.
    SystemLimit(String),
    /// The inode is watched already under another path (a bind mount), or another error.
    Other(String),
}

pub(super) struct Kernel {
    fd: Arc<OwnedFd>,
    nodes: HashMap<i32, Node>,
    uses: HashMap<String, Use>,
    /// The limit on kernel watches, as last given by a new watch.
    pub(super) max: usize,
    scanned: HashMap<i32, HashSet<String>>,
    scanned_count: usize,
    tx: mpsc::Sender<RawEvent>,
    shared: Arc<Shared>,
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

impl Kernel {
    /// A new inotify instance and the thread that reads it.
    pub(super) fn start(
        me: &Arc<Mutex<Option<Kernel>>>,
        tx: mpsc::Sender<RawEvent>,
        shared: Arc<Shared>,
        max: usize,
    ) -> std::io::Result<Kernel> {
        let fd = Arc::new(inotify::init(
            inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK,
        )?);
        let (weak, thread_fd) = (Arc::downgrade(me), fd.clone());
        std::thread::Builder::new()
            .name("fsbroker-watch".into())
            .spawn(move || read_loop(&weak, &thread_fd))?;
        Ok(Kernel {
            fd,
            nodes: HashMap::new(),
            uses: HashMap::new(),
            max,
            scanned: HashMap::new(),
            scanned_count: 0,
            tx,
            shared,
        })
    }

    /// Kernel watches in use.
    pub(super) fn used(&self) -> usize {
        self.nodes.len()
    }

    /// Places a kernel watch on the directory behind `dir`, found at `rel` of `root` (host
    /// path `host`). An inode watched already at the same place shares its kernel watch.
    fn place(
        &mut self,
        dir: &Dir,
        root: &Arc<Root>,
        rel: RelPath,
        host: PathBuf,
    ) -> Result<i32, PlaceError> {
        let (dev, ino) = identity(dir).map_err(|e| PlaceError::Other(e.to_string()))?;
        let proc_path = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
        let wd = inotify::add_watch(&*self.fd, proc_path.as_str(), mask()).map_err(|e| {
            if e == rustix::io::Errno::NOSPC {
                PlaceError::SystemLimit(e.to_string())
            } else {
                PlaceError::Other(e.to_string())
            }
        })?;
        if let Some(n) = self.nodes.get(&wd) {
            return if n.place.host == host && (n.place.dev, n.place.ino) == (dev, ino) {
                Ok(wd)
            } else {
                Err(PlaceError::Other(
                    "directory watched under another path".into(),
                ))
            };
        }
        if self.nodes.len() >= self.max {
            let _ = inotify::remove_watch(&*self.fd, wd);
            return Err(PlaceError::Limit);
        }
        self.nodes.insert(
            wd,
            Node {
                place: Arc::new(Place { host, dev, ino }),
                root: root.clone(),
                rel,
                parent: None,
                children: HashMap::new(),
                refs: 0,
            },
        );
        Ok(wd)
    }

    /// Records that watch `id` uses kernel watch `wd`.
    fn take(&mut self, id: &str, wd: i32) {
        if let Some(u) = self.uses.get_mut(id)
            && u.dirs.insert(wd)
            && let Some(n) = self.nodes.get_mut(&wd)
        {
            n.refs += 1;
        }
    }

    /// Links `child` as the entry `name` of `parent`.
    fn link(&mut self, parent: i32, name: &str, child: i32) {
        if parent == child {
            return;
        }
        if let Some(c) = self.nodes.get_mut(&child) {
            c.parent = Some(parent);
        }
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.children.insert(name.to_owned(), child);
        }
    }

    /// Drops one use of `wd`; the kernel watch goes with its last use.
    fn drop_ref(&mut self, wd: i32) {
        let Some(n) = self.nodes.get_mut(&wd) else {
            return;
        };
        n.refs = n.refs.saturating_sub(1);
        if n.refs > 0 {
            return;
        }
        if let Some(n) = self.nodes.remove(&wd) {
            let _ = inotify::remove_watch(&*self.fd, wd);
            if let Some(p) = n.parent.and_then(|p| self.nodes.get_mut(&p)) {
                p.children.retain(|_, c| *c != wd);
            }
            for c in n.children.values() {
                if let Some(c) = self.nodes.get_mut(c) {
                    c.parent = None;
                }
            }
        }
        self.scanned.remove(&wd);
    }

    /// Registers `watch` on the directory behind `dir` (its own directory, or a watched
    /// file's parent), found at `rel` of `root`. A recursive watch also watches every
    /// directory beneath, opened through its parent's handle, level by level.
    pub(super) fn add(
        &mut self,
        watch: &Arc<Watch>,
        dir: Dir,
        rel: RelPath,
        deadline: crate::limits::Deadline,
    ) -> Result<(), super::WatchError> {
        use super::WatchError;
        let root = watch.root.clone();
        let id = watch.id.clone();
        let host = root.host_path_of(&rel);
        let top = self
            .place(&dir, &root, rel.clone(), host.clone())
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
        let result = (|| {
            // The handle was verified by the resolver; the watch now exists, so a move from
            // here on is seen. One that came in between is caught by checking again.
            let Some(place) = self.nodes.get(&top).map(|n| n.place.clone()) else {
                return Err(WatchError::Os("watch vanished".into(), false));
            };
            if !at_place(&root, &rel, &place) {
                return Err(WatchError::Os("the directory moved".into(), false));
            }
            if !watch.recursive {
                return Ok(());
            }
            let mut queue: VecDeque<(Dir, RelPath, i32)> = VecDeque::from([(dir, rel, top)]);
            while let Some((d, rel, wd)) = queue.pop_front() {
                deadline
                    .check()
                    .map_err(|_| WatchError::Os("timed out".into(), false))?;
                let Ok(entries) = d.entries() else { continue };
                for entry in entries.flatten() {
                    if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                        continue;
                    }
                    let Ok(name) = entry.file_name().into_string() else {
                        continue;
                    };
                    // Opened without following: a name swapped for a link is skipped.
                    let Ok(sub) = d.open_dir_nofollow(&name) else {
                        continue;
                    };
                    let sub_rel = rel.join(&name);
                    let sub_host = root.host_path_of(&sub_rel);
                    match self.place(&sub, &root, sub_rel.clone(), sub_host) {
                        Ok(child) => {
                            self.link(wd, &name, child);
                            self.take(&id, child);
                            queue.push_back((sub, sub_rel, child));
                        }
                        Err(PlaceError::Other(_)) => {}
                        Err(e) => return Err(to_watch_error(e, self.max)),
                    }
                }
            }
            Ok(())
        })();
        if result.is_err() {
            self.release(&id);
        }
        result
    }

    /// Releases what watch `id` holds.
    pub(super) fn release(&mut self, id: &str) {
        if let Some(u) = self.uses.remove(id) {
            for wd in u.dirs {
                self.drop_ref(wd);
            }
        }
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

    /// Whether the directory `wd` is, right now, the inode at its recorded place.
    fn still_there(&self, wd: i32) -> bool {
        self.nodes
            .get(&wd)
            .is_some_and(|n| at_place(&n.root, &n.rel, &n.place))
    }

    /// The directory `wd` opened again through its root, if it is still the inode it was,
    /// at the place it was.
    fn reopen(&self, wd: i32) -> Option<Dir> {
        let n = self.nodes.get(&wd)?;
        if !at_place(&n.root, &n.rel, &n.place) {
            return None;
        }
        let d = locate(&n.root, &n.rel).ok()?.open_dir().ok()?;
        (identity(&d).ok()? == (n.place.dev, n.place.ino)).then_some(d)
    }

    /// A directory `name` appeared in `parent`: under a recursive watch it gets its own
    /// kernel watch first, then it is scanned (its subdirectories likewise), and what the
    /// scan finds is reported as created. A scan that cannot complete owes an `overflow`.
    fn grow(&mut self, parent: i32, name: &str) {
        let growing: Vec<String> = self
            .uses
            .iter()
            .filter(|(_, u)| u.watch.recursive && u.dirs.contains(&parent))
            .map(|(id, _)| id.clone())
            .collect();
        if growing.is_empty() {
            return;
        }
        let mut complete = true;
        let mut budget = SCAN_ENTRIES;
        let start = self
            .reopen(parent)
            .and_then(|p| p.open_dir_nofollow(name).ok());
        let Some(parent_node) = self.nodes.get(&parent) else {
            return;
        };
        let (root, parent_rel) = (parent_node.root.clone(), parent_node.rel.clone());
        let Some(start) = start else {
            // Gone or not a directory (a link swapped in): nothing to watch.
            return;
        };
        let mut queue: VecDeque<(Dir, RelPath, i32, String)> =
            VecDeque::from([(start, parent_rel.join(name), parent, name.to_owned())]);
        while let Some((d, rel, parent, name)) = queue.pop_front() {
            let host = root.host_path_of(&rel);
            let wd = match self.place(&d, &root, rel.clone(), host) {
                Ok(wd) => wd,
                Err(_) => {
                    complete = false;
                    continue;
                }
            };
            self.link(parent, &name, wd);
            for id in &growing {
                self.take(id, wd);
            }
            let Some(place) = self.nodes.get(&wd).map(|n| n.place.clone()) else {
                continue;
            };
            let Ok(entries) = d.entries() else {
                complete = false;
                continue;
            };
            for entry in entries {
                let Ok(entry) = entry else {
                    complete = false;
                    break;
                };
                if budget == 0 {
                    complete = false;
                    break;
                }
                budget -= 1;
                let Ok(child) = entry.file_name().into_string() else {
                    continue;
                };
                self.emit(&place, child.clone(), RawKind::Created);
                if self.scanned_count < SCANNED_MEMORY {
                    self.scanned.entry(wd).or_default().insert(child.clone());
                    self.scanned_count += 1;
                }
                if entry.file_type().is_ok_and(|t| t.is_dir())
                    && let Ok(sub) = d.open_dir_nofollow(&child)
                {
                    queue.push_back((sub, rel.join(&child), wd, child));
                }
            }
        }
        if !complete {
            for id in &growing {
                if let Some(u) = self.uses.get(id) {
                    u.watch.owe_overflow();
                }
            }
        }
    }

    /// After the kernel queue overflowed, directories may have appeared unseen: every
    /// directory under a recursive watch is read again, and each subdirectory without a kernel
    /// watch gets one (and its scan), as if it had just appeared. Watches are owed an
    /// `overflow` already, so what the scans report twice does no harm.
    fn resync(&mut self) {
        let wds: Vec<i32> = self
            .nodes
            .keys()
            .copied()
            .filter(|wd| {
                self.uses
                    .values()
                    .any(|u| u.watch.recursive && u.dirs.contains(wd))
            })
            .collect();
        for wd in wds {
            // A directory that is not at its place any more is left alone: its changes are
            // dropped at delivery.
            let Some(d) = self.reopen(wd) else { continue };
            let Ok(entries) = d.entries() else { continue };
            let missing: Vec<String> = entries
                .flatten()
                .take(SCAN_ENTRIES)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    self.nodes
                        .get(&wd)
                        .is_some_and(|node| !node.children.contains_key(n))
                })
                .collect();
            for name in missing {
                self.grow(wd, &name);
            }
        }
    }

    /// The directory `wd` (with everything beneath it) is no longer where it was: its kernel
    /// watches go, and every watch whose own directory was among them ends (`moved_out`).
    fn detach(&mut self, wd: i32) {
        let mut gone: HashSet<i32> = HashSet::new();
        let mut queue = vec![wd];
        while let Some(w) = queue.pop() {
            if gone.insert(w)
                && let Some(n) = self.nodes.get(&w)
            {
                queue.extend(n.children.values().copied());
            }
        }
        let ended: Vec<String> = self
            .uses
            .iter()
            .filter(|(_, u)| gone.contains(&u.top))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            let first = self
                .uses
                .get(&id)
                .is_some_and(|u| !u.watch.ended.swap(true, Ordering::Relaxed));
            self.release(&id);
            if first {
                lock(&self.shared.moved_out).push(id);
            }
        }
        let ids: Vec<String> = self.uses.keys().cloned().collect();
        for id in ids {
            let drop: Vec<i32> = match self.uses.get_mut(&id) {
                Some(u) => {
                    let d: Vec<i32> = u.dirs.intersection(&gone).copied().collect();
                    for w in &d {
                        u.dirs.remove(w);
                    }
                    d
                }
                None => Vec::new(),
            };
            for w in drop {
                self.drop_ref(w);
            }
        }
        self.wake();
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

    /// Handles one kernel event. `pending` holds the old name of a rename until its new name
    /// (the next event, with the same cookie) arrives.
    fn handle(&mut self, ev: Event, pending: &mut Option<(Arc<Place>, String, u32)>) {
        let is_to = ev.mask.contains(ReadFlags::MOVED_TO);
        if !is_to {
            self.flush(pending);
        }
        if ev.mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.shared.lost.store(true, Ordering::Relaxed);
            self.resync();
            return;
        }
        let Some(node) = self.nodes.get(&ev.wd) else {
            return;
        };
        let place = node.place.clone();
        let child = ev.name.as_ref().and_then(|n| node.children.get(n).copied());
        // The directory itself was renamed or deleted, or the kernel dropped its watch: it
        // left its place at least for a moment (even if it is back), so whatever it reports
        // from now on could come from anywhere. Its watches end.
        if ev.mask.intersects(
            ReadFlags::IGNORED | ReadFlags::MOVE_SELF | ReadFlags::DELETE_SELF | ReadFlags::UNMOUNT,
        ) {
            self.detach(ev.wd);
            return;
        }
        let Some(name) = ev.name else {
            return;
        };
        let is_dir = ev.mask.contains(ReadFlags::ISDIR);
        if ev
            .mask
            .intersects(ReadFlags::MOVED_FROM | ReadFlags::DELETE)
        {
            if let Some(set) = self.scanned.get_mut(&ev.wd) {
                set.remove(&name);
            }
            // The directory that had the name left it, unless it is back already (the second
            // half of an exchange reports the name it has now).
            if let Some(c) = child
                && !self.still_there(c)
            {
                self.detach(c);
            }
            if ev.mask.contains(ReadFlags::MOVED_FROM) {
                *pending = Some((place, name, ev.cookie));
            } else {
                self.emit(&place, name, RawKind::Deleted);
            }
            return;
        }
        if is_to || ev.mask.contains(ReadFlags::CREATE) {
            let seen = self
                .scanned
                .get_mut(&ev.wd)
                .is_some_and(|set| set.remove(&name));
            match pending.take() {
                Some((from_dir, from, cookie)) if is_to && cookie == ev.cookie => {
                    self.emit(&place, name.clone(), RawKind::MovedFrom { from_dir, from });
                }
                other => {
                    *pending = other;
                    self.flush(pending);
                    if !seen {
                        self.emit(&place, name.clone(), RawKind::Created);
                    }
                }
            }
            if let Some(c) = child
                && !self.still_there(c)
            {
                // The name now holds another entry: the old directory is not there.
                self.detach(c);
            }
            if is_dir && !seen {
                self.grow(ev.wd, &name);
            }
            return;
        }
        if ev.mask.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB) {
            self.emit(&place, name, RawKind::Modified);
        }
    }

    /// Reports a rename's old name whose new name never came (it left the watched tree).
    fn flush(&self, pending: &mut Option<(Arc<Place>, String, u32)>) {
        if let Some((dir, name, _)) = pending.take() {
            self.emit(&dir, name, RawKind::Deleted);
        }
    }

    /// The kernel queue was read empty: every event from before the last scan is handled.
    fn drained(&mut self, pending: &mut Option<(Arc<Place>, String, u32)>) {
        self.flush(pending);
        self.scanned.clear();
        self.scanned_count = 0;
    }
}

fn to_watch_error(e: PlaceError, max: usize) -> super::WatchError {
    match e {
        PlaceError::Limit => super::WatchError::KernelLimit(max),
        PlaceError::SystemLimit(m) => super::WatchError::Os(m, true),
        PlaceError::Other(m) => super::WatchError::Os(m, false),
    }
}

/// One kernel event, copied out of the read buffer.
struct Event {
    wd: i32,
    mask: ReadFlags,
    cookie: u32,
    /// The entry's name; events for names that are not UTF-8 are never reported.
    name: Option<String>,
}

/// The thread: waits for the instance to become readable, then handles what it holds, one
/// buffer per hold of the lock, so that adding and removing watches never waits long. It
/// ends when the hub is gone.
fn read_loop(kernel: &Weak<Mutex<Option<Kernel>>>, fd: &OwnedFd) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut pending: Option<(Arc<Place>, String, u32)> = None;
    let timeout = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 500_000_000,
    };
    loop {
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
        loop {
            let Some(k) = kernel.upgrade() else {
                return;
            };
            let mut guard = lock(&k);
            let Some(state) = guard.as_mut() else {
                return;
            };
            let mut reader = inotify::Reader::new(fd, &mut buf);
            let mut drained = false;
            loop {
                let ev = match reader.next() {
                    Ok(ev) => Event {
                        wd: ev.wd(),
                        mask: ev.events(),
                        cookie: ev.cookie(),
                        name: ev
                            .file_name()
                            .and_then(|n| n.to_str().ok())
                            .map(str::to_owned),
                    },
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(rustix::io::Errno::WOULDBLOCK) => {
                        drained = true;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "reading watch events failed; reporting overflow");
                        state.shared.lost.store(true, Ordering::Relaxed);
                        drained = true;
                        break;
                    }
                };
                let unnamed_but_named = ev.name.is_none()
                    && ev.mask.intersects(
                        ReadFlags::CREATE
                            | ReadFlags::DELETE
                            | ReadFlags::MOVED_FROM
                            | ReadFlags::MOVED_TO,
                    );
                if !unnamed_but_named {
                    state.handle(ev, &mut pending);
                }
                if reader.is_buffer_empty() {
                    break;
                }
            }
            if drained {
                state.drained(&mut pending);
                break;
            }
        }
    }
}
