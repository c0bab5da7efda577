//! The kernel watches as a tree: each verified directory's kernel watch, its parent and
//! children, how many watches use it, and what goes when a use ends or a directory moves.

use super::{Kernel, Place, PlaceError, Watch, at_place, identity, locate, mask};
use crate::locks::lock;
use crate::path::RelPath;
use crate::root::Root;
use cap_std::fs::Dir;
use rustix::fd::{AsFd, AsRawFd};
use rustix::fs::inotify;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

#[derive(Debug)]
pub(super) struct Node {
    pub(super) place: Arc<Place>,
    /// The root it was verified through, and its path there.
    pub(super) root: Arc<Root>,
    pub(super) rel: RelPath,
    pub(super) parent: Option<i32>,
    pub(super) children: HashMap<String, i32>,
    /// How many watches use this kernel watch.
    pub(super) refs: usize,
}

/// What one watch holds of the kernel watches.
#[derive(Debug)]
pub(super) struct Use {
    pub(super) watch: Arc<Watch>,
    pub(super) top: i32,
    pub(super) dirs: HashSet<i32>,
}

impl Kernel {
    /// Places a kernel watch on the directory behind `dir`, found at `rel` of `root` (host
    /// path `host`). An inode watched already at the same place shares its kernel watch.
    pub(super) fn place(
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
    pub(super) fn take(&mut self, id: &str, wd: i32) {
        if let Some(u) = self.uses.get_mut(id)
            && u.dirs.insert(wd)
            && let Some(n) = self.nodes.get_mut(&wd)
        {
            n.refs += 1;
        }
    }

    /// Links `child` as the entry `name` of `parent`.
    pub(super) fn link(&mut self, parent: i32, name: &str, child: i32) {
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
    pub(super) fn drop_ref(&mut self, wd: i32) {
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

    /// Releases what watch `id` holds.
    pub(in crate::watch) fn release(&mut self, id: &str) {
        if let Some(u) = self.uses.remove(id) {
            for wd in u.dirs {
                self.drop_ref(wd);
            }
        }
    }

    /// Whether the directory `wd` is, right now, the inode at its recorded place.
    pub(super) fn still_there(&self, wd: i32) -> bool {
        self.nodes
            .get(&wd)
            .is_some_and(|n| at_place(&n.root, &n.rel, &n.place))
    }

    /// The directory `wd` opened again through its root, if it is still the inode it was,
    /// at the place it was.
    pub(super) fn reopen(&self, wd: i32) -> Option<Dir> {
        let n = self.nodes.get(&wd)?;
        if !at_place(&n.root, &n.rel, &n.place) {
            return None;
        }
        let d = locate(&n.root, &n.rel).ok()?.open_dir().ok()?;
        (identity(&d).ok()? == (n.place.dev, n.place.ino)).then_some(d)
    }

    /// The directory `wd` (with everything beneath it) is no longer where it was: its kernel
    /// watches go, and every watch whose own directory was among them ends (`moved_out`).
    pub(super) fn detach(&mut self, wd: i32) {
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
}
