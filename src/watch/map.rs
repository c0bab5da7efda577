//! From raw events to the notifications a server is shown: renames and the broker's own
//! atomic replaces read as the changes a user made, coalesced per watch and path, and only
//! from directories that are still the inodes they were, at the places they were.

use super::kernel::at_place;
use super::{Change, Delivery, Place, RawEvent, RawKind, Watch, WatchHub, now};
use crate::locks::lock;
use crate::path::{MountPath, RelPath};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl WatchHub {
    /// Maps one batch of raw events to deliveries, coalesced: one per (watch, path, kind), in
    /// order of first appearance. A change is shown to a watch only if its directory, resolved
    /// again through the watch's root, is still the inode the kernel watch is on (else the
    /// change is dropped, and a watch whose own directory it is ends: `moved_out`), and if
    /// `visible` (grants) allows it. It runs on the blocking pool.
    pub(crate) fn map(
        &self,
        raw: &[RawEvent],
        lost: bool,
        visible: impl Fn(&Watch, &MountPath) -> bool,
    ) -> Vec<Delivery> {
        let watches = self.all();
        let mut out = Vec::new();
        let mut seen: HashSet<(String, String, &'static str)> = HashSet::new();
        if lost {
            for w in &watches {
                w.owed_overflow.store(true, Ordering::Relaxed);
            }
        }
        let fresh = self.fresh(raw);
        let mut at_place_cache: HashMap<(usize, usize), bool> = HashMap::new();
        let mut last: HashMap<(String, String), Change> = HashMap::new();
        for (dir, name, change) in raw.iter().flat_map(|ev| changes(ev, &fresh)) {
            let host = dir.host.join(&name);
            if change == Change::Modified && fresh.contains(&host) {
                continue;
            }
            for w in &watches {
                if w.is_ended() {
                    continue;
                }
                let Some(path) = w.covers(&host) else {
                    continue;
                };
                if !w.events.contains(&change) {
                    continue;
                }
                let key = (Arc::as_ptr(&w.root) as usize, Arc::as_ptr(&dir) as usize);
                let there = *at_place_cache
                    .entry(key)
                    .or_insert_with(|| w.dir_at_place(&dir));
                if !there {
                    if dir.host == w.kernel_dir {
                        self.moved_out(w);
                    }
                    continue;
                }
                if !visible(w, &path) {
                    continue;
                }
                let shown = path.to_string();
                // Within one window, a modification right after a creation or another
                // modification of the same path adds nothing.
                let key = (w.id.clone(), shown.clone());
                let before = last.insert(key, change);
                if change == Change::Modified
                    && matches!(before, Some(Change::Created | Change::Modified))
                {
                    continue;
                }
                if seen.insert((w.id.clone(), shown.clone(), change.as_str())) {
                    out.push(Delivery {
                        watch: w.clone(),
                        params: json!({
                            "watchId": w.id,
                            "path": shown,
                            "event": change.as_str(),
                            "timestamp": now(),
                        }),
                    });
                }
            }
        }
        out
    }

    /// The targets of the broker's own atomic replaces in `raw` that created them. Our atomic
    /// replace is a rename of a temporary over the target; when that write created the
    /// target, it is a creation, once.
    fn fresh(&self, raw: &[RawEvent]) -> HashSet<PathBuf> {
        let mut created = lock(&self.created);
        raw.iter()
            .filter(|ev| matches!(&ev.kind, RawKind::MovedFrom { from, .. } if is_our_temp(from)))
            .map(|ev| ev.dir.host.join(&ev.name))
            .filter(|p| created.remove(p).is_some())
            .collect()
    }
}

impl Watch {
    /// Whether the directory `dir` is, right now, at its recorded place as seen through this
    /// watch's root. Every error, and a place outside the root, answers no.
    fn dir_at_place(&self, dir: &Place) -> bool {
        let base = self.root.host_path_of(&RelPath::root());
        let Ok(rest) = dir.host.strip_prefix(&base) else {
            return false;
        };
        let parts: Option<Vec<String>> = rest
            .components()
            .map(|c| match c {
                std::path::Component::Normal(s) => s.to_str().map(str::to_owned),
                _ => None,
            })
            .collect();
        let Some(parts) = parts else {
            return false;
        };
        at_place(&self.root, &RelPath::from_components(parts), dir)
    }

    /// The mount-form path of a changed host path if this watch covers it: beneath the watched
    /// directory (at any depth when recursive, else as a direct child), never under a hidden
    /// name below the watched path.
    fn covers(&self, host: &Path) -> Option<MountPath> {
        let rest = host.strip_prefix(&self.kernel_dir).ok()?;
        let parts: Vec<String> = rest
            .components()
            .map(|c| c.as_os_str().to_str().map(str::to_owned))
            .collect::<Option<_>>()?;
        match &self.only {
            Some(name) => {
                (parts.len() == 1 && parts[..] == [name.clone()]).then(|| self.path.clone())
            }
            None => {
                if parts.is_empty() || (!self.recursive && parts.len() > 1) {
                    return None;
                }
                if parts.iter().any(|p| p.starts_with('.')) {
                    return None;
                }
                let mut rel = self.path.rel.components().to_vec();
                rel.extend(parts);
                Some(MountPath {
                    mount: self.path.mount.clone(),
                    rel: RelPath::from_components(rel),
                })
            }
        }
    }
}

/// Whether a name is one of the broker's own temporary files.
fn is_our_temp(n: &str) -> bool {
    n.starts_with(crate::atomic::TEMP_PREFIX) && n.ends_with(crate::atomic::TEMP_SUFFIX)
}

/// The changes one raw event stands for, as (directory, name, change). A rename is a
/// deletion of the old name and a creation of the new one, except that our own atomic replace
/// (a temporary renamed over the target) is a modification of the target, or its creation when
/// our write made it (`fresh`).
fn changes(ev: &RawEvent, fresh: &HashSet<PathBuf>) -> Vec<(Arc<Place>, String, Change)> {
    let one = |c: Change| vec![(ev.dir.clone(), ev.name.clone(), c)];
    match &ev.kind {
        RawKind::Created => one(Change::Created),
        RawKind::Deleted => one(Change::Deleted),
        RawKind::Modified => one(Change::Modified),
        RawKind::MovedFrom { from, .. } if is_our_temp(from) => {
            if fresh.contains(&ev.dir.host.join(&ev.name)) {
                one(Change::Created)
            } else {
                one(Change::Modified)
            }
        }
        RawKind::MovedFrom { from_dir, from } => vec![
            (from_dir.clone(), from.clone(), Change::Deleted),
            (ev.dir.clone(), ev.name.clone(), Change::Created),
        ],
        RawKind::Wake => Vec::new(),
    }
}
