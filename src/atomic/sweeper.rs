//! Temporaries left by broker processes that died mid-write, swept from a directory once per
//! process.

use super::{TEMP_PREFIX, TEMP_SUFFIX};
use crate::locks::lock;
use cap_std::fs::{Dir, MetadataExt};
use std::collections::HashSet;
use std::sync::Mutex;

/// Directories remembered as already swept before the set is cleared.
const SWEPT_MAX: usize = 4096;

/// Remembers which directories have had stale temporaries swept, so a directory is read for
/// that once per process rather than on every write.
#[derive(Debug, Default)]
pub(crate) struct Sweeper {
    swept: Mutex<HashSet<(u64, u64)>>,
}

impl Sweeper {
    /// Removes temporaries in `dir` left by broker processes that no longer run. Best effort:
    /// failures are logged, never reported to the peer.
    pub(crate) fn sweep_once(&self, dir: &Dir) {
        let Ok(meta) = dir.dir_metadata() else { return };
        {
            let mut swept = lock(&self.swept);
            if swept.len() >= SWEPT_MAX {
                swept.clear();
            }
            if !swept.insert((meta.dev(), meta.ino())) {
                return;
            }
        }
        let Ok(entries) = dir.entries() else { return };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(pid) = writer_pid(&name)
                && pid != std::process::id()
                && !alive(pid)
            {
                match dir.remove_file(&name) {
                    Ok(()) => tracing::info!(file = %name, "removed a stale temporary file"),
                    Err(e) => {
                        tracing::debug!(file = %name, error = %e, "cannot remove stale temporary")
                    }
                }
            }
        }
    }
}

/// The pid in a temporary file's name, if the name is one of ours.
fn writer_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TEMP_PREFIX)?.strip_suffix(TEMP_SUFFIX)?;
    rest.split('-').next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}
