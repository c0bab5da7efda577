//! Watching: one inotify instance shared by every session, one kernel watch per verified
//! directory, events coalesced and fanned out as `notifications/files/changed`.
//!
//! The flow runs the other way from requests: the reader thread (`kernel.rs`) turns kernel
//! events into raw events (a name in a verified directory) and hands them to a bounded
//! channel; a dispatcher task collects them for the coalescing window, checks that each
//! change's directory is still the inode it was at the place it was (`map.rs`), maps it to
//! the mount-form paths of the watches that cover it, drops what is hidden or no longer
//! granted, and sends each session its notifications. A session's notifications in flight are
//! bounded by permits; when they run out, or raw events are lost, the watch owes the server
//! one `overflow` event, so it rescans. A watch whose own directory leaves its place ends with
//! `unwatched` (`moved_out`).

mod fanout;
mod kernel;
mod map;

pub use fanout::CHANGED;
pub(crate) use fanout::{Sink, start as start_fanout};

pub(crate) use kernel::{Place, RawEvent, RawKind};

use crate::deadline::Deadline;
use crate::locks::lock;
use crate::path::MountPath;
use crate::root::Root;
use crate::session::Session;
use cap_std::fs::Dir;
use kernel::Kernel;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// Raw events buffered between the reader thread and the dispatcher; more are counted as lost.
pub(crate) const RAW_CAPACITY: usize = 8192;
/// How long a creation by the broker's own write is remembered for its notification.
const CREATED_MEMORY: Duration = Duration::from_secs(10);

/// An event kind a watch can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Change {
    /// Content or metadata changed.
    Modified,
    /// An entry appeared (also the new name of a rename).
    Created,
    /// An entry went away (also the old name of a rename).
    Deleted,
}

impl Change {
    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Change::Modified => "modified",
            Change::Created => "created",
            Change::Deleted => "deleted",
        }
    }

    /// Parses a wire name.
    pub(crate) fn parse(s: &str) -> Option<Change> {
        match s {
            "modified" => Some(Change::Modified),
            "created" => Some(Change::Created),
            "deleted" => Some(Change::Deleted),
            _ => None,
        }
    }
}

/// One watch of one session.
#[derive(Debug)]
pub(crate) struct Watch {
    /// The id given to the server.
    pub id: String,
    /// The real path watched (after symlinks), in mount form.
    pub path: MountPath,
    /// The root it lies in.
    pub root: Arc<Root>,
    /// Whether changes at any depth are reported (else the entry and its direct children).
    pub recursive: bool,
    /// The kinds reported.
    pub events: HashSet<Change>,
    /// The session it belongs to.
    pub session: Weak<Session>,
    /// The directory whose kernel watch serves this watch (the parent, for a file).
    kernel_dir: PathBuf,
    /// For a watched file: its name in `kernel_dir`.
    only: Option<String>,
    /// Whether the server is owed an `overflow` event.
    owed_overflow: AtomicBool,
    /// Whether the watch has ended (its directory moved): nothing more is delivered.
    ended: AtomicBool,
}

/// What the reader thread shares with the hub.
#[derive(Debug, Default)]
pub(crate) struct ReaderFindings {
    /// Whether raw events were lost since the dispatcher last looked.
    lost: AtomicBool,
    /// Watches whose directory moved, to be ended and told.
    moved_out: Mutex<Vec<String>>,
}

/// The registry of watches and the shared kernel watcher.
pub(crate) struct WatchHub {
    watches: Mutex<HashMap<String, Arc<Watch>>>,
    kernel: Arc<Mutex<Option<Kernel>>>,
    created: Mutex<HashMap<PathBuf, std::time::Instant>>,
    shared: Arc<ReaderFindings>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHub").finish_non_exhaustive()
    }
}

/// What a new watch is to watch: the place the resolver found, and what the server asked for.
#[derive(Debug)]
pub(crate) struct NewWatch {
    /// The root it lies in.
    pub root: Arc<Root>,
    /// The real path (after symlinks), in mount form.
    pub path: MountPath,
    /// Whether the path is a directory.
    pub is_dir: bool,
    /// Whether changes at any depth are reported (for a directory only).
    pub recursive: bool,
    /// The kinds reported.
    pub events: HashSet<Change>,
    /// The handle the resolver opened: the watched directory itself, or a watched file's
    /// parent.
    pub dir: Dir,
}

/// Why a watch could not be added.
#[derive(Debug)]
pub(crate) enum WatchError {
    /// The kernel watches it needs would pass the limit (the value of the limit).
    KernelLimit(usize),
    /// The operating system's own limit on watches is reached (inotify's per-user limit); the
    /// system's message.
    SystemLimit(String),
    /// The operating system refused for another reason; its message.
    Os(String),
}

/// A notification for a session, ready to send.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// The watch.
    pub watch: Arc<Watch>,
    /// `params` of `notifications/files/changed`.
    pub params: Value,
}

impl Drop for WatchHub {
    /// Lets the kernel state go here, outside its lock, so that it stops and joins its
    /// reading thread from this thread; never from the reader, which may hold the last
    /// reference while it reads and could not wait for itself.
    fn drop(&mut self) {
        let kernel = lock(&self.kernel).take();
        drop(kernel);
    }
}

impl Default for WatchHub {
    fn default() -> Self {
        WatchHub {
            watches: Mutex::new(HashMap::new()),
            kernel: Arc::new(Mutex::new(None)),
            created: Mutex::new(HashMap::new()),
            shared: Arc::new(ReaderFindings::default()),
            next_id: AtomicU64::new(1),
        }
    }
}

impl WatchHub {
    /// Registers a watch of `new.path` (a real path of `new.root`, as the resolver found it).
    /// `new.dir` is the directory handle the resolver opened: the watched directory itself, or
    /// a watched file's parent. The kernel watch is placed on that very inode; a recursive
    /// watch also watches every directory beneath, each opened through its parent's handle
    /// without following links. Kernel watches are shared between watches of the same directory, and
    /// together they may not pass `max_kernel`. `raw` is where the reader thread sends events,
    /// used when it is first started.
    pub(crate) fn add(
        &self,
        session: &Arc<Session>,
        new: NewWatch,
        max_kernel: usize,
        deadline: Deadline,
        raw: impl FnOnce() -> mpsc::Sender<RawEvent>,
    ) -> Result<Arc<Watch>, WatchError> {
        let NewWatch {
            root,
            path,
            is_dir,
            recursive,
            events,
            dir,
        } = new;
        let (dir_rel, only, recursive) = match (is_dir, path.rel.file_name()) {
            (false, Some(name)) => {
                let parent = path.rel.components();
                let parent = parent[..parent.len().saturating_sub(1)].to_vec();
                (
                    crate::path::RelPath::from_components(parent),
                    Some(name.to_owned()),
                    false,
                )
            }
            _ => (path.rel.clone(), None, recursive && is_dir),
        };
        let id = format!("w{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let watch = Arc::new(Watch {
            id: id.clone(),
            kernel_dir: root.host_path_of(&dir_rel),
            path,
            root,
            recursive,
            events,
            session: Arc::downgrade(session),
            only,
            owed_overflow: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        });
        let mut guard = lock(&self.kernel);
        if guard.is_none() {
            let k = Kernel::start(&self.kernel, raw(), self.shared.clone(), max_kernel)
                .map_err(|e| WatchError::Os(e.to_string()))?;
            *guard = Some(k);
        }
        let Some(k) = guard.as_mut() else {
            return Err(WatchError::Os("no watcher".into()));
        };
        k.max = max_kernel;
        k.add(&watch, dir, dir_rel, deadline)?;
        lock(&self.watches).insert(id, watch.clone());
        Ok(watch)
    }

    /// Removes a watch, releasing its kernel watches when no other watch needs them.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Watch>> {
        let watch = lock(&self.watches).remove(id)?;
        watch.end();
        if let Some(k) = lock(&self.kernel).as_mut() {
            k.release(id);
        }
        Some(watch)
    }

    /// The watches of one session.
    pub(crate) fn of_session(&self, session: &Session) -> Vec<Arc<Watch>> {
        lock(&self.watches)
            .values()
            .filter(|w| {
                w.session
                    .upgrade()
                    .is_some_and(|s| std::ptr::eq(&*s, session))
            })
            .cloned()
            .collect()
    }

    /// Every watch.
    pub(crate) fn all(&self) -> Vec<Arc<Watch>> {
        lock(&self.watches).values().cloned().collect()
    }

    /// Records that raw events were lost, so every watch is owed an `overflow`.
    pub(crate) fn mark_lost(&self) {
        self.shared.lost.store(true, Ordering::Relaxed);
    }

    /// Records that the broker's own write created `host` (a new file), so its commit, which
    /// looks like a rename over the target, is reported as `created` rather than `modified`.
    pub(crate) fn note_created(&self, host: PathBuf) {
        let mut created = lock(&self.created);
        created.retain(|_, at| at.elapsed() < CREATED_MEMORY);
        if created.len() < RAW_CAPACITY {
            created.insert(host, std::time::Instant::now());
        }
    }

    /// Whether raw events were lost since the last call.
    pub(crate) fn take_lost(&self) -> bool {
        self.shared.lost.swap(false, Ordering::Relaxed)
    }

    /// The ids of watches whose directory left its place since the last call: each is to be
    /// ended with `unwatched` (`moved_out`).
    pub(crate) fn take_moved_out(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.shared.moved_out))
    }

    /// Records that watch `w` ended because its directory left its place.
    fn moved_out(&self, w: &Watch) {
        if !w.ended.swap(true, Ordering::Relaxed) {
            lock(&self.shared.moved_out).push(w.id.clone());
        }
    }
}

impl Watch {
    /// Marks the watch as ended: nothing more is delivered for it.
    fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
    }

    /// Whether the watch has ended.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// Whether the server is owed an `overflow` event; clears the debt.
    pub(crate) fn take_owed_overflow(&self) -> bool {
        self.owed_overflow.swap(false, Ordering::Relaxed)
    }

    /// Records that a notification for this watch was dropped.
    pub(crate) fn owe_overflow(&self) {
        self.owed_overflow.store(true, Ordering::Relaxed);
    }

    /// The `overflow` notification params for this watch.
    pub(crate) fn overflow_params(&self) -> Value {
        json!({"watchId": self.id, "path": self.path.to_string(), "event": "overflow", "timestamp": now()})
    }
}

/// The current time in RFC 3339, UTC.
pub(crate) fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
