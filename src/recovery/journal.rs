//! The journal: one JSON line per change, and a line each when a change is restored or
//! pruned, in `journal.jsonl` beside the kept content. Every process that shares the store
//! (a daemon, `serve` processes, the command line restoring) appends under one advisory lock
//! on the store's `lock` file, and first reads what the others appended since its last look,
//! so that each keeps an index of what the store holds and what it costs.

use super::Change;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The journal's file name in the store.
pub(super) const JOURNAL: &str = "journal.jsonl";

/// One line of the journal.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum Line {
    /// A change.
    Change(Box<Change>),
    /// A change was restored; `by` are the changes the restore made (what it displaced).
    Restored {
        /// The restored change.
        restored: String,
        /// The changes the restore itself made.
        by: Vec<String>,
        /// When, in milliseconds since the epoch.
        at: u64,
    },
    /// A change's kept content was removed, for its age or for space.
    Pruned {
        /// The pruned change.
        pruned: String,
        /// `age` or `space`.
        why: String,
        /// When, in milliseconds since the epoch.
        at: u64,
    },
}

/// A change the index follows: its id, time and what its kept content costs the store (0
/// once restored, or when nothing was kept).
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) id: String,
    pub(super) at: u64,
    pub(super) bytes: u64,
}

/// The journal of one process: its file, how far it has read it, and the index.
pub(super) struct Journal {
    path: PathBuf,
    lock: File,
    file: File,
    /// The journal file's device and inode, to notice a compaction by another process.
    id: (u64, u64),
    read_to: u64,
    /// Every change not yet pruned whose kept content costs the store, oldest first (the
    /// changes that kept nothing are only lines, dropped when the journal is rewritten).
    pub(super) held: VecDeque<Held>,
    /// What the held changes' kept content costs, in bytes.
    pub(super) used: u64,
    /// Lines of pruned changes since the journal was last rewritten.
    pub(super) dead: usize,
    /// The size past which the journal is rewritten without the lines of changes too old to
    /// keep, however few were pruned.
    rewrite_at: u64,
}

/// The least size at which the journal is rewritten for its age alone.
const REWRITE_AT: u64 = 32 << 20;

impl Journal {
    /// Opens (creating, 0600) the journal in the store at `dir`, and reads it.
    pub(super) fn open(dir: &std::path::Path) -> std::io::Result<Journal> {
        let path = dir.join(JOURNAL);
        let lock = crate::atomic::open_private(&dir.join("lock"))?;
        let file = crate::atomic::open_private(&path)?;
        let meta = file.metadata()?;
        let mut j = Journal {
            path,
            lock,
            file,
            id: (meta.dev(), meta.ino()),
            read_to: 0,
            held: VecDeque::new(),
            used: 0,
            dead: 0,
            rewrite_at: REWRITE_AT,
        };
        j.locked(|j| j.catch_up())?;
        // The mark as if this process had written the journal as it is: it used to start at
        // the least, so that every new process (each `serve`, each command) rewrote a large
        // journal whole at its first change, with nothing to drop.
        j.rewrite_at = REWRITE_AT.max(j.read_to.saturating_mul(2));
        Ok(j)
    }

    /// Runs `f` under the store's lock, after reading what others appended.
    pub(super) fn locked<T>(
        &mut self,
        f: impl FnOnce(&mut Journal) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        fs4::FileExt::lock(&self.lock)?;
        let result = self.catch_up().and_then(|()| f(self));
        let _ = fs4::FileExt::unlock(&self.lock);
        result
    }

    /// Folds in the lines appended since the last look; starts over when the file was
    /// rewritten.
    fn catch_up(&mut self) -> std::io::Result<()> {
        let now = std::fs::metadata(&self.path)?;
        if (now.dev(), now.ino()) != self.id {
            self.file = crate::atomic::open_private(&self.path)?;
            self.id = (now.dev(), now.ino());
            self.read_to = 0;
            self.held.clear();
            self.used = 0;
            self.dead = 0;
        }
        if now.len() <= self.read_to {
            return Ok(());
        }
        self.file.seek(SeekFrom::Start(self.read_to))?;
        // A line at a time: the journal may be large (a month of a busy server's changes),
        // and reading it whole used to take as much memory again as the file, in every
        // process, at its start.
        let file = self.file.try_clone()?;
        let mut reader = std::io::BufReader::new((&file).take(now.len() - self.read_to));
        let mut raw = Vec::new();
        loop {
            raw.clear();
            let n = std::io::BufRead::read_until(&mut reader, b'\n', &mut raw)?;
            // Only whole lines: one cut short by a writer that died is skipped when the
            // next append ends it.
            if n == 0 || raw.last() != Some(&b'\n') {
                break;
            }
            if let Ok(line) = serde_json::from_slice::<Line>(&raw[..n - 1]) {
                self.fold(&line);
            }
            self.read_to += n as u64;
        }
        Ok(())
    }

    /// Takes one line into the index.
    fn fold(&mut self, line: &Line) {
        match line {
            Line::Change(c) => {
                // Every change that kept something is followed, whatever it costs, so that
                // its content is removed in time: one that cost nothing (a tree that could
                // not be measured) used to be left out, and stayed in the store for good.
                let Some(kept) = &c.kept else {
                    return;
                };
                let bytes = kept.bytes;
                self.used = self.used.saturating_add(bytes);
                self.held.push_back(Held {
                    id: c.id.clone(),
                    at: c.at,
                    bytes,
                });
            }
            Line::Restored { restored, .. } => {
                if let Some(h) = self.held.iter_mut().find(|h| &h.id == restored) {
                    self.used = self.used.saturating_sub(h.bytes);
                    h.bytes = 0;
                }
            }
            Line::Pruned { pruned, .. } => {
                if let Some(i) = self.held.iter().position(|h| &h.id == pruned) {
                    if let Some(h) = self.held.remove(i) {
                        self.used = self.used.saturating_sub(h.bytes);
                    }
                    self.dead += 1;
                }
            }
        }
    }

    /// Appends `lines` in one write (under the lock: call from [`Journal::locked`]).
    pub(super) fn append(&mut self, lines: &[Line]) -> std::io::Result<()> {
        let mut text = Vec::new();
        let len = self.file.metadata()?.len();
        if len > self.read_to {
            // A line cut short before ours: end it, so that ours is whole.
            text.push(b'\n');
        }
        for line in lines {
            serde_json::to_writer(&mut text, line)?;
            text.push(b'\n');
        }
        self.file.seek(SeekFrom::End(0))?;
        self.file.write_all(&text)?;
        self.read_to = len + text.len() as u64;
        for line in lines {
            self.fold(line);
        }
        Ok(())
    }

    /// Every line, in order (under the lock).
    pub(super) fn read_all(&mut self) -> std::io::Result<Vec<Line>> {
        self.file.seek(SeekFrom::Start(0))?;
        let mut text = Vec::new();
        (&self.file).take(self.read_to).read_to_end(&mut text)?;
        Ok(text
            .split(|&b| b == b'\n')
            .filter_map(|raw| serde_json::from_slice::<Line>(raw).ok())
            .collect())
    }

    /// Writes the journal anew without the lines of pruned changes and of changes made
    /// before `old` (milliseconds since the epoch), when the pruned have come to outnumber
    /// the others or the file has grown past its mark (under the lock). The mark doubles
    /// with what is left, so that a journal of young changes is not rewritten at every line.
    pub(super) fn compact_if_worth_it(&mut self, old: u64) -> std::io::Result<()> {
        if self.dead < 1024.max(self.held.len()) && self.read_to < self.rewrite_at {
            return Ok(());
        }
        let lines = self.read_all()?;
        let gone: std::collections::HashSet<&str> = lines
            .iter()
            .filter_map(|l| match l {
                Line::Pruned { pruned, .. } => Some(pruned.as_str()),
                Line::Change(c) if c.at < old => Some(c.id.as_str()),
                _ => None,
            })
            .collect();
        let keep = |l: &&Line| match l {
            Line::Change(c) => !gone.contains(c.id.as_str()),
            Line::Restored { restored, .. } => !gone.contains(restored.as_str()),
            Line::Pruned { .. } => false,
        };
        let mut text = Vec::new();
        for line in lines.iter().filter(keep) {
            serde_json::to_writer(&mut text, line)?;
            text.push(b'\n');
        }
        let temp = self.path.with_extension("jsonl.new");
        let mut out = crate::atomic::open_private(&temp)?;
        out.set_len(0)?;
        out.write_all(&text)?;
        out.sync_all()?;
        std::fs::rename(&temp, &self.path)?;
        // Read again from the start: the index is rebuilt from the rewritten file.
        self.id = (0, 0);
        self.catch_up()?;
        self.rewrite_at = REWRITE_AT.max(self.read_to.saturating_mul(2));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::{Change, Kept};

    fn change(id: &str, at: u64, bytes: u64) -> Line {
        Line::Change(Box::new(Change {
            id: id.into(),
            time: String::new(),
            at,
            by: crate::recovery::By::Server,
            server: "s".into(),
            session: "s@1#0".into(),
            identity: None,
            method: "files/delete".into(),
            path: "m/x".into(),
            to: None,
            root: "/r".into(),
            kept: (bytes > 0).then(|| Kept {
                how: "move".into(),
                kind: "file".into(),
                bytes,
            }),
            not_kept: None,
            etag_before: None,
            etag_after: None,
            restored_by: None,
            pruned: None,
        }))
    }

    fn pruned(id: &str) -> Line {
        Line::Pruned {
            pruned: id.into(),
            why: "space".into(),
            at: 0,
        }
    }

    #[test]
    fn two_journals_on_one_store_share_the_count_and_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Journal::open(dir.path()).unwrap();
        let mut b = Journal::open(dir.path()).unwrap();
        a.locked(|j| j.append(&[change("a1", 10, 100), change("c1", 10, 0)]))
            .unwrap();
        b.locked(|j| j.append(&[change("b1", 20, 50)])).unwrap();
        // Each sees the other's lines at its next look; changes that kept nothing cost nothing.
        assert_eq!(a.locked(|j| Ok(j.used)).unwrap(), 150);
        assert_eq!(b.locked(|j| Ok(j.held.len())).unwrap(), 2);
        // Enough pruned lines make a rewrite, without them and without changes before `old`.
        let mut lines = Vec::new();
        for i in 0..1100 {
            lines.push(change(&format!("p{i}"), 30, 1));
            lines.push(pruned(&format!("p{i}")));
        }
        a.locked(|j| j.append(&lines)).unwrap();
        let before = std::fs::metadata(dir.path().join(JOURNAL)).unwrap().len();
        a.locked(|j| j.compact_if_worth_it(15)).unwrap();
        let after = std::fs::metadata(dir.path().join(JOURNAL)).unwrap().len();
        assert!(after < before / 100, "{before} -> {after}");
        let left: Vec<String> = a
            .locked(|j| j.read_all())
            .unwrap()
            .into_iter()
            .filter_map(|l| match l {
                Line::Change(c) => Some(c.id),
                _ => None,
            })
            .collect();
        assert_eq!(left, ["b1"]);
        // The other journal notices the rewrite and counts from the new file.
        assert_eq!(b.locked(|j| Ok((j.used, j.held.len()))).unwrap(), (50, 1));
        b.locked(|j| j.append(&[change("b2", 40, 7)])).unwrap();
        assert_eq!(a.locked(|j| Ok(j.used)).unwrap(), 57);
    }

    #[test]
    fn a_line_cut_short_is_skipped_and_the_next_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Journal::open(dir.path()).unwrap();
        a.locked(|j| j.append(&[change("x", 1, 5)])).unwrap();
        // A writer that died mid-line.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL))
            .unwrap();
        f.write_all(b"{\"id\":\"half").unwrap();
        let mut b = Journal::open(dir.path()).unwrap();
        b.locked(|j| j.append(&[change("y", 2, 6)])).unwrap();
        let ids: Vec<String> = a
            .locked(|j| j.read_all())
            .unwrap()
            .into_iter()
            .filter_map(|l| match l {
                Line::Change(c) => Some(c.id),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["x", "y"]);
        assert_eq!(a.locked(|j| Ok(j.used)).unwrap(), 11);
    }
}
