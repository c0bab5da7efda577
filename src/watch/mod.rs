//! Watching: one notify watcher shared by every session, kernel watches counted and shared,
//! events coalesced and fanned out as `notifications/files/changed`.
//!
//! The flow runs the other way from requests: the notify thread hands raw events to a bounded
//! channel; a dispatcher task collects them for the coalescing window, maps each host path back
//! to the mount-form paths of the watches that cover it, drops what is hidden, reached through
//! a symlink, or no longer granted, and sends each session its notifications. A session's
//! notifications in flight are bounded by permits; when they run out, or raw events are lost,
//! the watch owes the server one `overflow` event, so it rescans.

mod map;

use crate::locks::lock;
use crate::path::MountPath;
use crate::root::Root;
use crate::session::Session;
use notify::event::EventKind;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// Raw events buffered between the notify thread and the dispatcher; more are counted as lost.
pub const RAW_CAPACITY: usize = 8192;
/// How long a creation by the broker's own write is remembered for its notification.
const CREATED_MEMORY: Duration = Duration::from_secs(10);

/// An event kind a watch can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// Content or metadata changed.
    Modified,
    /// An entry appeared (also the new name of a rename).
    Created,
    /// An entry went away (also the old name of a rename).
    Deleted,
}

impl Change {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Modified => "modified",
            Change::Created => "created",
            Change::Deleted => "deleted",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Change> {
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
pub struct Watch {
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
}

#[derive(Debug, Default)]
struct KernelWatch {
    recursive: usize,
    flat: usize,
    cost: usize,
}

#[derive(Default)]
struct HubState {
    watcher: Option<RecommendedWatcher>,
    watches: HashMap<String, Arc<Watch>>,
    kernel: HashMap<PathBuf, KernelWatch>,
    kernel_used: usize,
}

/// The registry of watches and the shared kernel watcher.
pub struct WatchHub {
    state: Mutex<HubState>,
    created: Mutex<HashMap<PathBuf, std::time::Instant>>,
    lost: Arc<AtomicBool>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHub").finish_non_exhaustive()
    }
}

/// Why a watch could not be added.
#[derive(Debug)]
pub enum WatchError {
    /// The kernel watches it needs would pass the limit (the value of the limit).
    KernelLimit(usize),
    /// The operating system refused (inotify's per-user limit, or another error).
    Os(String, bool),
}

/// A notification for a session, ready to send.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The watch.
    pub watch: Arc<Watch>,
    /// `params` of `notifications/files/changed`.
    pub params: Value,
}

impl Default for WatchHub {
    fn default() -> Self {
        WatchHub {
            state: Mutex::new(HubState::default()),
            created: Mutex::new(HashMap::new()),
            lost: Arc::new(AtomicBool::new(false)),
            next_id: AtomicU64::new(1),
        }
    }
}

impl WatchHub {
    /// Registers a watch. `kernel_cost` is how many kernel watches a recursive watch of the
    /// directory needs (its directories, counted by the caller through the root's handle);
    /// `raw` is where the shared watcher sends events, used when it is first created.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &self,
        session: &Arc<Session>,
        root: Arc<Root>,
        path: MountPath,
        is_dir: bool,
        recursive: bool,
        events: HashSet<Change>,
        kernel_cost: usize,
        max_kernel: usize,
        raw: impl FnOnce() -> mpsc::Sender<notify::Event>,
    ) -> Result<Arc<Watch>, WatchError> {
        let host = root.host_path_of(&path.rel);
        let (kernel_dir, only, recursive) = match (is_dir, host.parent(), path.rel.file_name()) {
            (false, Some(parent), Some(name)) => {
                (parent.to_path_buf(), Some(name.to_owned()), false)
            }
            _ => (host, None, recursive && is_dir),
        };
        let mut st = lock(&self.state);
        if st.watcher.is_none() {
            let tx = raw();
            let lost = self.lost.clone();
            let handler = move |res: notify::Result<notify::Event>| match res {
                // Opens and closes change nothing, and notify's own walk of a new recursive
                // watch opens every directory: left in, they would flood the queue.
                Ok(ev) if matches!(ev.kind, EventKind::Access(_)) => {}
                Ok(ev) => {
                    if tx.try_send(ev).is_err() {
                        lost.store(true, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "watch error; reporting overflow");
                    lost.store(true, Ordering::Relaxed);
                }
            };
            let config = notify::Config::default().with_follow_symlinks(false);
            let watcher = RecommendedWatcher::new(handler, config)
                .map_err(|e| WatchError::Os(e.to_string(), false))?;
            st.watcher = Some(watcher);
        }
        let cost = if recursive { kernel_cost.max(1) } else { 1 };
        let entry_exists = st.kernel.contains_key(&kernel_dir);
        let needs_upgrade =
            recursive && st.kernel.get(&kernel_dir).is_none_or(|k| k.recursive == 0);
        if (!entry_exists || needs_upgrade) && st.kernel_used + cost > max_kernel {
            return Err(WatchError::KernelLimit(max_kernel));
        }
        if !entry_exists || needs_upgrade {
            let mode = if recursive {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            let st = &mut *st;
            if let Some(w) = st.watcher.as_mut() {
                if needs_upgrade && entry_exists {
                    let _ = w.unwatch(&kernel_dir);
                }
                w.watch(&kernel_dir, mode).map_err(|e| {
                    let limit = matches!(e.kind, notify::ErrorKind::MaxFilesWatch);
                    WatchError::Os(e.to_string(), limit)
                })?;
            }
            let old_cost = st.kernel.get(&kernel_dir).map_or(0, |k| k.cost);
            st.kernel_used = st.kernel_used.saturating_sub(old_cost) + cost;
        }
        let k = st.kernel.entry(kernel_dir.clone()).or_default();
        if recursive {
            k.recursive += 1;
            k.cost = k.cost.max(cost);
        } else {
            k.flat += 1;
            k.cost = k.cost.max(1);
        }
        let id = format!("w{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let watch = Arc::new(Watch {
            id: id.clone(),
            path,
            root,
            recursive,
            events,
            session: Arc::downgrade(session),
            kernel_dir,
            only,
            owed_overflow: AtomicBool::new(false),
        });
        st.watches.insert(id, watch.clone());
        Ok(watch)
    }

    /// Removes a watch, releasing its kernel watch when no other watch needs it.
    pub fn remove(&self, id: &str) -> Option<Arc<Watch>> {
        let mut st = lock(&self.state);
        let watch = st.watches.remove(id)?;
        let st = &mut *st;
        let mut drop_kernel = false;
        let mut downgrade = false;
        if let Some(k) = st.kernel.get_mut(&watch.kernel_dir) {
            if watch.recursive {
                k.recursive = k.recursive.saturating_sub(1);
                downgrade = k.recursive == 0 && k.flat > 0;
            } else {
                k.flat = k.flat.saturating_sub(1);
            }
            drop_kernel = k.recursive == 0 && k.flat == 0;
        }
        if drop_kernel || downgrade {
            if let Some(w) = st.watcher.as_mut() {
                let _ = w.unwatch(&watch.kernel_dir);
                if downgrade {
                    let _ = w.watch(&watch.kernel_dir, RecursiveMode::NonRecursive);
                }
            }
            if let Some(k) = st.kernel.get_mut(&watch.kernel_dir) {
                st.kernel_used = st.kernel_used.saturating_sub(k.cost);
                k.cost = if downgrade { 1 } else { 0 };
                st.kernel_used += k.cost;
            }
            if drop_kernel {
                st.kernel.remove(&watch.kernel_dir);
            }
            // A watch removed from inside another recursive one took that one's kernel watches
            // for the subtree with it: restore the covering ones.
            let covering: Vec<PathBuf> = st
                .kernel
                .iter()
                .filter(|(p, k)| k.recursive > 0 && watch.kernel_dir.starts_with(p))
                .map(|(p, _)| p.clone())
                .collect();
            if let Some(w) = st.watcher.as_mut() {
                for p in covering {
                    let _ = w.watch(&p, RecursiveMode::Recursive);
                }
            }
        }
        Some(watch)
    }

    /// The watches of one session.
    pub fn of_session(&self, session: &Session) -> Vec<Arc<Watch>> {
        lock(&self.state)
            .watches
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
    pub fn all(&self) -> Vec<Arc<Watch>> {
        lock(&self.state).watches.values().cloned().collect()
    }

    /// Kernel watches in use (as counted when watches were added).
    pub fn kernel_used(&self) -> usize {
        lock(&self.state).kernel_used
    }

    /// Records that raw events were lost, so every watch is owed an `overflow`.
    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// Records that the broker's own write created `host` (a new file), so its commit, which
    /// looks like a rename over the target, is reported as `created` rather than `modified`.
    pub fn note_created(&self, host: PathBuf) {
        let mut created = lock(&self.created);
        created.retain(|_, at| at.elapsed() < CREATED_MEMORY);
        if created.len() < RAW_CAPACITY {
            created.insert(host, std::time::Instant::now());
        }
    }

    /// Whether raw events were lost since the last call.
    pub fn take_lost(&self) -> bool {
        self.lost.swap(false, Ordering::Relaxed)
    }
}

impl Watch {
    /// Whether the server is owed an `overflow` event; clears the debt.
    pub fn take_owed_overflow(&self) -> bool {
        self.owed_overflow.swap(false, Ordering::Relaxed)
    }

    /// Records that a notification for this watch was dropped.
    pub fn owe_overflow(&self) {
        self.owed_overflow.store(true, Ordering::Relaxed);
    }

    /// The `overflow` notification params for this watch.
    pub fn overflow_params(&self) -> Value {
        json!({"watchId": self.id, "path": self.path.to_string(), "event": "overflow", "timestamp": now()})
    }
}

/// The current time in RFC 3339, UTC.
pub fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// How long raw events are collected before a batch is mapped and sent.
pub fn coalesce_window(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
