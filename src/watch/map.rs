//! From raw notify events to the notifications a server is shown: renames and the broker's
//! own atomic replaces read as the changes a user made, coalesced per watch and path.

use super::{Change, Delivery, Watch, WatchHub, now};
use crate::locks::lock;
use crate::path::{MountPath, RelPath};
use notify::event::{EventKind, ModifyKind, RenameMode};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

impl WatchHub {
    /// Maps one batch of raw events to deliveries, coalesced: one per (watch, path, kind), in
    /// order of first appearance. `visible` decides, per watch and path, whether the change
    /// may be shown (grants, symlinks); it runs on the blocking pool.
    pub fn map(
        &self,
        raw: &[notify::Event],
        lost: bool,
        visible: impl Fn(&Watch, &MountPath) -> bool,
    ) -> Vec<Delivery> {
        let watches = self.all();
        let mut out = Vec::new();
        let mut seen: HashSet<(String, String, &'static str)> = HashSet::new();
        if lost || raw.iter().any(notify::Event::need_rescan) {
            for w in &watches {
                w.owed_overflow.store(true, Ordering::Relaxed);
            }
        }
        // Our atomic replace shows up as a rename of a temporary over the target: inotify
        // reports the new name on its own too, which must not read as a creation.
        let replaced: HashSet<&Path> = raw
            .iter()
            .filter(|ev| {
                matches!(
                    ev.kind,
                    EventKind::Modify(ModifyKind::Name(RenameMode::Both))
                )
            })
            .filter_map(|ev| match &ev.paths[..] {
                [from, to] if is_our_temp(from) => Some(to.as_path()),
                _ => None,
            })
            .collect();
        // ... unless that write created the target: then it is a creation, once.
        let fresh: HashSet<PathBuf> = {
            let mut created = lock(&self.created);
            replaced
                .iter()
                .filter_map(|p| created.remove(*p).map(|_| p.to_path_buf()))
                .collect()
        };
        let mut last: HashMap<(String, String), Change> = HashMap::new();
        for (host, change) in raw.iter().flat_map(changes) {
            let fresh_target = fresh.contains(&host);
            if change == Change::Created && replaced.contains(host.as_path()) && !fresh_target {
                continue;
            }
            if change == Change::Modified && fresh_target {
                continue;
            }
            for w in &watches {
                let Some(path) = w.covers(&host) else {
                    continue;
                };
                if !w.events.contains(&change) || !visible(w, &path) {
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
}

impl Watch {
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

/// Whether a host path names one of the broker's own temporary files.
fn is_our_temp(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.starts_with(crate::atomic::TEMP_PREFIX) && n.ends_with(crate::atomic::TEMP_SUFFIX)
    })
}

/// The changes one raw event stands for. A rename is a deletion of the old name and a creation
/// of the new one, except that our own atomic replace (a temporary renamed over the target)
/// is a modification of the target.
fn changes(ev: &notify::Event) -> Vec<(PathBuf, Change)> {
    let one = |c: Change| ev.paths.iter().map(|p| (p.clone(), c)).collect();
    match &ev.kind {
        EventKind::Create(_) => one(Change::Created),
        EventKind::Remove(_) => one(Change::Deleted),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => match &ev.paths[..] {
            [from, to] if is_our_temp(from) => vec![(to.clone(), Change::Modified)],
            [from, to] => vec![
                (from.clone(), Change::Deleted),
                (to.clone(), Change::Created),
            ],
            _ => Vec::new(),
        },
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) => one(Change::Deleted),
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => one(Change::Created),
        EventKind::Modify(_) => one(Change::Modified),
        _ => Vec::new(),
    }
}
