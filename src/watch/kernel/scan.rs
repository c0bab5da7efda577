//! The directories beneath a new recursive watch, watched level by level; new directories
//! under a recursive watch: watched first, then scanned, so that what was created in them
//! before their watch existed is reported too; and the scan of every watched directory after
//! the kernel's queue overflowed.

use super::{Kernel, PlaceError, RawKind, SCAN_ENTRIES, SCANNED_MEMORY, to_watch_error};
use crate::path::RelPath;
use crate::root::Root;
use crate::watch::WatchError;
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use std::collections::VecDeque;
use std::sync::Arc;

/// A directory still to be watched and scanned: the entry `name` of the watched directory
/// `parent`, at `rel` of its root.
pub(super) struct Pending {
    pub(super) parent: i32,
    pub(super) name: String,
    pub(super) rel: RelPath,
}

impl Kernel {
    /// Watches every directory beneath `top` (the directory `dir`) for the watch `id` on
    /// `root`, level by level. Every directory beneath is opened through its parent's
    /// verified handle when its turn comes, never held in the queue: any breadth costs a few
    /// descriptors. One that cannot be watched fails the watch, rather than leave changes
    /// unreported.
    pub(super) fn watch_beneath(
        &mut self,
        id: &str,
        root: &Arc<Root>,
        top: i32,
        dir: Dir,
        deadline: crate::deadline::Deadline,
    ) -> Result<(), WatchError> {
        let incomplete = || WatchError::Os("cannot watch every directory beneath this path".into());
        let mut queue: VecDeque<Pending> = VecDeque::new();
        let mut cache = Some((top, dir));
        let mut next = Some(top);
        loop {
            if let Some(wd) = next.take() {
                let Some((_, d)) = cache.as_ref() else {
                    return Err(incomplete());
                };
                let here = self
                    .nodes
                    .get(&wd)
                    .map(|n| n.rel.clone())
                    .ok_or_else(incomplete)?;
                queue_subdirectories(d, wd, &here, &mut queue).map_err(|()| incomplete())?;
            }
            let Some(p) = queue.pop_front() else {
                break;
            };
            deadline
                .check()
                .map_err(|_| WatchError::Os("timed out".into()))?;
            let sub = match self.open_child(&mut cache, p.parent, &p.name) {
                Ok(Some(d)) => d,
                // Opened without following: a name swapped for a link is not entered.
                Ok(None) => continue,
                Err(()) => return Err(incomplete()),
            };
            let sub_host = root.host_path_of(&p.rel);
            match self.place(&sub, root, p.rel.clone(), sub_host) {
                Ok(child) => {
                    self.link(p.parent, &p.name, child);
                    self.take(id, child);
                    cache = Some((child, sub));
                    next = Some(child);
                }
                Err(PlaceError::Other(_)) => return Err(incomplete()),
                Err(e) => return Err(to_watch_error(e, self.max)),
            }
        }
        Ok(())
    }

    /// A directory `name` appeared in `parent`: under a recursive watch it gets its own
    /// kernel watch first, then it is scanned (its subdirectories likewise), and what the
    /// scan finds is reported as created. A scan that cannot complete owes an `overflow`.
    pub(super) fn grow(&mut self, parent: i32, name: &str) {
        let growing: Vec<String> = self
            .uses
            .iter()
            .filter(|(_, u)| u.watch.recursive && u.dirs.contains(&parent))
            .map(|(id, _)| id.clone())
            .collect();
        if growing.is_empty() {
            return;
        }
        let Some(parent_node) = self.nodes.get(&parent) else {
            return;
        };
        let (root, parent_rel) = (parent_node.root.clone(), parent_node.rel.clone());
        let mut complete = true;
        let mut budget = SCAN_ENTRIES;
        let mut cache = None;
        let mut queue: VecDeque<Pending> = VecDeque::from([Pending {
            parent,
            rel: parent_rel.join(name),
            name: name.to_owned(),
        }]);
        while let Some(p) = queue.pop_front() {
            let d = match self.open_child(&mut cache, p.parent, &p.name) {
                Ok(Some(d)) => d,
                // Gone or not a directory (a link swapped in): nothing to watch.
                Ok(None) => continue,
                Err(()) => {
                    complete = false;
                    continue;
                }
            };
            let host = root.host_path_of(&p.rel);
            let wd = match self.place(&d, &root, p.rel.clone(), host) {
                Ok(wd) => wd,
                Err(_) => {
                    complete = false;
                    continue;
                }
            };
            self.link(p.parent, &p.name, wd);
            for id in &growing {
                self.take(id, wd);
            }
            complete &= self.report_scanned(&d, wd, &p.rel, &mut budget, &mut queue);
        }
        if !complete {
            for id in &growing {
                if let Some(u) = self.uses.get(id) {
                    u.watch.owe_overflow();
                }
            }
        }
    }

    /// Reports every entry of the newly watched directory `d` (kernel watch `wd`, at `rel`)
    /// as created, within `budget` entries, remembers what it reported, and queues its
    /// subdirectories. False when the scan could not read everything.
    fn report_scanned(
        &mut self,
        d: &Dir,
        wd: i32,
        rel: &RelPath,
        budget: &mut usize,
        queue: &mut VecDeque<Pending>,
    ) -> bool {
        let Some(place) = self.nodes.get(&wd).map(|n| n.place.clone()) else {
            return true;
        };
        let Ok(entries) = d.entries() else {
            return false;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                return false;
            };
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let Ok(child) = entry.file_name().into_string() else {
                continue;
            };
            self.emit(&place, child.clone(), RawKind::Created);
            if self.scanned_count < SCANNED_MEMORY {
                self.scanned.entry(wd).or_default().insert(child.clone());
                self.scanned_count += 1;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                queue.push_back(Pending {
                    parent: wd,
                    rel: rel.join(&child),
                    name: child,
                });
            }
        }
        true
    }

    /// Opens the entry `name` of the watched directory `parent` without following it, through
    /// the parent's handle opened again through the root and shown to be the same inode at
    /// the same place. `cache` keeps the last parent's handle, since siblings come one after
    /// another in a queue; nothing else is held, so a tree of any breadth costs a few
    /// descriptors. `Ok(None)`: no directory there any more (gone, a link, a file), nothing to
    /// watch. `Err`: the question could not be answered (out of descriptors, no permission,
    /// the parent moved), so whatever scan asked is incomplete.
    pub(super) fn open_child(
        &self,
        cache: &mut Option<(i32, Dir)>,
        parent: i32,
        name: &str,
    ) -> Result<Option<Dir>, ()> {
        if cache.as_ref().is_none_or(|(wd, _)| *wd != parent) {
            *cache = None;
            let d = self.reopen(parent).ok_or(())?;
            *cache = Some((parent, d));
        }
        let Some((_, d)) = cache.as_ref() else {
            return Err(());
        };
        match d.open_dir_nofollow(name) {
            Ok(sub) => Ok(Some(sub)),
            Err(e) => {
                let gone = [
                    rustix::io::Errno::NOENT,
                    rustix::io::Errno::NOTDIR,
                    rustix::io::Errno::LOOP,
                ];
                if gone
                    .iter()
                    .any(|g| e.raw_os_error() == Some(g.raw_os_error()))
                {
                    Ok(None)
                } else {
                    Err(())
                }
            }
        }
    }

    /// After the kernel queue overflowed, directories may have appeared unseen: every
    /// directory under a recursive watch is read again, and each subdirectory without a kernel
    /// watch gets one (and its scan), as if it had just appeared. Watches are owed an
    /// `overflow` already, so what the scans report twice does no harm.
    pub(super) fn resync(&mut self) {
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
}

/// Queues the subdirectories of `d` (kernel watch `wd`, at `here`) to be watched in turn.
/// `Err` when its entries cannot all be read.
fn queue_subdirectories(
    d: &Dir,
    wd: i32,
    here: &RelPath,
    queue: &mut VecDeque<Pending>,
) -> Result<(), ()> {
    let entries = d.entries().map_err(|_| ())?;
    for entry in entries {
        let entry = entry.map_err(|_| ())?;
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        queue.push_back(Pending {
            parent: wd,
            rel: here.join(&name),
            name,
        });
    }
    Ok(())
}
