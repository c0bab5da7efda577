//! Staged chunked uploads of one session: a temporary file per target, filled chunk by chunk
//! at increasing offsets and committed atomically by the final chunk. Nothing appears at the
//! target before the commit; an upload that is abandoned, idle too long, or whose session ends
//! is dropped with its temporary file.

use crate::atomic::{Preconditions, TempFile};
use crate::path::MountPath;
use crate::root::Granted;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One upload in progress.
#[derive(Debug)]
pub(crate) struct Upload {
    /// The target as resolved for the first chunk: its directory, name and real path. The
    /// final chunk resolves the target again and commits only if it is the same place.
    pub target: Granted,
    /// The staged bytes.
    pub temp: TempFile,
    /// How many bytes are staged.
    pub staged: u64,
    /// The preconditions given with the first chunk, checked again at commit.
    pub pre: Preconditions,
    /// When a chunk last arrived.
    pub last: Instant,
}

/// The uploads of one session, keyed by the target path as requested.
#[derive(Debug, Default)]
pub(crate) struct Uploads {
    map: HashMap<MountPath, Upload>,
}

impl Uploads {
    /// Drops uploads idle for longer than `idle`; returns how many.
    pub(crate) fn purge_idle(&mut self, idle: Duration) -> usize {
        let before = self.map.len();
        self.map.retain(|_, u| u.last.elapsed() <= idle);
        before - self.map.len()
    }

    /// Takes the upload for `path` out of the table (a chunk works on it unlocked).
    pub(crate) fn take(&mut self, path: &MountPath) -> Option<Upload> {
        self.map.remove(path)
    }

    /// Puts an upload (back) into the table.
    pub(crate) fn put(&mut self, path: MountPath, upload: Upload) {
        self.map.insert(path, upload);
    }

    /// How many uploads are open.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Each open upload's target and the bytes staged so far.
    pub(crate) fn staged(&self) -> Vec<(MountPath, u64)> {
        self.map
            .iter()
            .map(|(p, u)| (p.clone(), u.staged))
            .collect()
    }

    /// Drops every upload.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }
}
