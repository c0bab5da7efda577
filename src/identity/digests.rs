//! Content digests of files, cached so that a start pays for hashing only when something
//! changed.
//!
//! A digest is BLAKE3 over a file's whole content, read from one opened descriptor: the
//! descriptor is `fstat`ed and hashed, so the metadata and the content are of the same file
//! whatever happens to its name meanwhile. The cache maps what the kernel says of that file
//! (real path, device, inode, size, modification and change times to the nanosecond) to the
//! digest; a write to the file changes its change time, which no program can set back, so an
//! entry never outlives the content it was made from. The kernel's clock for file times is
//! coarse (a few milliseconds), so a file changed within the last [`SETTLE`] is hashed but not
//! cached: a second write of the same size in the same tick would otherwise keep its key.
//!
//! The cache is `$XDG_STATE_HOME/fsbroker/digests.json` (else `~/.local/state/fsbroker/`),
//! the user's own (0600 in a 0700 directory). An entry vouches for a file's content, so the
//! cache lives in the broker's state directory, which no sandbox profile may open (a server
//! allowed to write `~/.cache`, as package managers' caches often are, could otherwise write
//! an entry that passes its edited script for the one the user allowed); and it is read only
//! when it is the user's and nobody else may write it. A cache that cannot be read or
//! understood is ignored and everything is hashed anew, and one that cannot be written is
//! left as it was.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::files::Held;

/// The most entries the cache keeps; the least recently used go first.
const MAX_ENTRIES: usize = 4096;
/// The largest cache file read: [`MAX_ENTRIES`] entries take well under this.
const MAX_CACHE_BYTES: u64 = 8 << 20;
/// The bytes read at a time while hashing.
const CHUNK: usize = 64 << 10;
/// How long after its last change a file's digest is first cached: see the module's
/// documentation.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);
/// The bytes of a file's beginning kept for its `#!` line.
pub(super) const HEAD: usize = 256;

/// What the kernel says of a file: when any of it changes, the content may have.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    path: String,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

/// One cached digest.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    key: Key,
    digest: String,
    /// When it was last used, in the cache's own ticks, as of the last write of the cache:
    /// the oldest goes first.
    used: u64,
}

/// The cache file's content.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    entries: Vec<Entry>,
}

/// A file digested: the file the path led to, and its content's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDigest {
    /// The file's real path (from its descriptor, links followed).
    pub(crate) real: PathBuf,
    /// Its device and inode.
    pub(crate) id: (u64, u64),
    /// Hex BLAKE3 of its content; empty when it could not be read (an execute-only file).
    pub(crate) digest: String,
    /// Its first bytes (at most [`HEAD`]), read from the same descriptor: where a `#!` line
    /// is.
    pub(crate) head: Vec<u8>,
}

/// The digest cache: see the module's documentation.
#[derive(Debug)]
pub(crate) struct Digests {
    /// The cache file; `None` keeps the cache in memory only.
    file: Option<PathBuf>,
    entries: HashMap<Key, (String, u64)>,
    tick: u64,
    dirty: bool,
    /// How many files were hashed (not found in the cache), for tests and benches.
    pub(crate) hashed: u64,
    /// See [`SETTLE`]; tests that need a file cached at once set it to zero.
    settle: std::time::Duration,
}

impl Digests {
    /// The user's cache (`$XDG_STATE_HOME/fsbroker/digests.json`, else under
    /// `~/.local/state`); in memory only when neither `XDG_STATE_HOME` nor `HOME` is set.
    pub(crate) fn open_default() -> Digests {
        // The rule `crate::policy::xdg_dir` follows, which this layer stands below.
        let absolute = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let base =
            absolute("XDG_STATE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".local/state")));
        match base {
            Some(b) => Digests::at(b.join("fsbroker").join("digests.json")),
            None => Digests::load(None),
        }
    }

    /// The cache kept in `file`.
    pub(crate) fn at(file: PathBuf) -> Digests {
        Digests::load(Some(file))
    }

    fn load(file: Option<PathBuf>) -> Digests {
        let mut d = Digests {
            file,
            entries: HashMap::new(),
            tick: 0,
            dirty: false,
            hashed: 0,
            settle: SETTLE,
        };
        let Some(path) = &d.file else {
            return d;
        };
        let stored = match read_own(path) {
            Ok(bytes) => serde_json::from_slice::<Stored>(&bytes).map_err(|e| e.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stored::default()),
            Err(e) => Err(e.to_string()),
        };
        match stored {
            Ok(s) => {
                for e in s.entries.into_iter().take(MAX_ENTRIES) {
                    d.tick = d.tick.max(e.used);
                    d.entries.insert(e.key, (e.digest, e.used));
                }
            }
            Err(e) => tracing::debug!(file = %path.display(), error = %e, "digest cache ignored"),
        }
        d
    }

    /// The digest of the file `path` leads to (links followed, as `execve` and an interpreter
    /// follow them); `None` when there is no such regular file. Nothing but a regular file
    /// is opened for reading (see [`super::files::open_regular`]), and the file hashed is
    /// the one `fstat`ed.
    pub(crate) fn of(&mut self, path: &Path) -> Option<FileDigest> {
        let (mut file, real) = match super::files::held_regular(path)? {
            Held::Readable(file, real) => (file, real),
            // An execute-only file: its place is known, its content is not.
            Held::Unreadable(real, id) => {
                return Some(FileDigest {
                    real,
                    id,
                    digest: String::new(),
                    head: Vec::new(),
                });
            }
        };
        let meta = file.metadata().ok()?;
        let id = (meta.dev(), meta.ino());
        let key = Key {
            path: real.to_string_lossy().into_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
        };
        let head = head_of(&file);
        self.tick = self.tick.saturating_add(1);
        let digest = match self.entries.get_mut(&key) {
            Some((digest, used)) => {
                // Noted in memory, not a reason to write the file: a start that found every
                // digest writes nothing (the write is synced, and costs more than the rest).
                *used = self.tick;
                digest.clone()
            }
            None => {
                let digest = hash(&mut file, key.size).unwrap_or_default();
                self.hashed += 1;
                if !digest.is_empty() && self.settled(key.ctime_ns) {
                    self.entries.insert(key, (digest.clone(), self.tick));
                    self.dirty = true;
                    self.evict();
                }
                digest
            }
        };
        Some(FileDigest {
            real,
            id,
            digest,
            head,
        })
    }

    /// Whether a file last changed at `ctime_ns` changed long enough ago to be cached.
    fn settled(&self, ctime_ns: i64) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let settle = i64::try_from(self.settle.as_nanos()).unwrap_or(i64::MAX);
        now.saturating_sub(ctime_ns) >= settle
    }

    /// Drops the least recently used entries past [`MAX_ENTRIES`].
    fn evict(&mut self) {
        while self.entries.len() > MAX_ENTRIES {
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used);
            let Some(key) = oldest.map(|(k, _)| k.clone()) else {
                return;
            };
            self.entries.remove(&key);
        }
    }

    /// Writes the cache back when it changed; a cache that cannot be written is left as it
    /// was (the next start hashes again).
    pub(crate) fn save(&self) {
        let Some(path) = &self.file else {
            return;
        };
        if !self.dirty {
            return;
        }
        if let Err(e) = self.write(path) {
            tracing::debug!(file = %path.display(), error = %e, "digest cache not saved");
        }
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        use crate::atomic::{Preconditions, TempFile};
        let parent = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| std::io::Error::other("the cache file has no name"))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        let mut entries: Vec<Entry> = self
            .entries
            .iter()
            .map(|(k, (d, used))| Entry {
                key: k.clone(),
                digest: d.clone(),
                used: *used,
            })
            .collect();
        entries.sort_by_key(|e| e.used);
        let text = serde_json::to_vec(&Stored { entries }).map_err(std::io::Error::other)?;
        let dir = cap_std::fs::Dir::open_ambient_dir(parent, cap_std::ambient_authority())?;
        let temp = TempFile::create(&dir)?;
        temp.file()
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let mut file = temp.file();
        file.write_all(&text)?;
        let pre = Preconditions {
            create: true,
            overwrite: true,
            if_match: None,
        };
        let limit = std::time::Duration::from_millis(200);
        let deadline = crate::deadline::Deadline::at(std::time::Instant::now() + limit);
        let mut wait = crate::locks::Wait::new(limit, deadline);
        let error = |e: crate::Error| std::io::Error::other(e.to_string());
        temp.lock(&dir, name, &pre, &mut wait)
            .map_err(error)?
            .commit()
            .map_err(error)?;
        Ok(())
    }
}

/// A file time in nanoseconds since the epoch (saturating: past the year 2262 all times are
/// one, and such a file is hashed every time its entry is looked up by a changed key).
fn nanos(secs: i64, nsecs: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsecs)
}

/// The first bytes of `file`, read at its beginning without moving its offset.
fn head_of(file: &std::fs::File) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; HEAD];
    let n = file.read_at(&mut head, 0).unwrap_or(0);
    head.truncate(n);
    head
}

/// Hex BLAKE3 of the `size` bytes `file` holds (its size when it was `fstat`ed: a file that
/// grows while it is read is not read without end, and its change makes the next look hash
/// it again), streamed.
fn hash(file: &mut std::fs::File, size: u64) -> std::io::Result<String> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    let mut limited = file.take(size);
    loop {
        match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                h.update(buf.get(..n).unwrap_or_default());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(h.finalize().to_hex().to_string())
}

/// The file at `path`, read through no link, when it is the user's own and nobody else may
/// write it: an entry in it vouches for a file's content.
fn read_own(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "it must be a file of yours that only you may write (owner {}, mode {:o})",
            meta.uid(),
            meta.mode() & 0o777
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CACHE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
