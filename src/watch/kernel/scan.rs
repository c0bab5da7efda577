//! New directories under a recursive watch: watched first, then scanned, so that what was
//! created in them before their watch existed is reported too; and the scan of every watched
//! directory after the kernel's queue overflowed.

use super::{Kernel, RawKind, SCAN_ENTRIES, SCANNED_MEMORY};
use crate::path::RelPath;

/// A directory still to be watched and scanned: the entry `name` of the watched directory
/// `parent`, at `rel` of its root.
pub(super) struct Pending {
    pub(super) parent: i32,
    pub(super) name: String,
    pub(super) rel: RelPath,
}
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use std::collections::VecDeque;

impl Kernel {
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
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    queue.push_back(Pending {
                        parent: wd,
                        rel: p.rel.join(&child),
                        name: child,
                    });
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
