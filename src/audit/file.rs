//! An audit file that several processes append to (several `fsbroker serve` sharing one
//! policy), each line chained to the one before it whoever wrote it, and rotated by size.
//!
//! Each append holds an exclusive advisory lock on the file. When the file's length is not
//! where this process's last write left it (another process wrote, or this is the first
//! write), the chain continues from the last line of the file's tail, read under the lock.
//! A tail that holds no whole chained line (an old unchained log, a torn line, a line longer
//! than the tail read) starts a new chain rather than stopping the log: verifying the file
//! then names the line the chain does not cover.

use super::chain::Head;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// How much of a file's end is read first to find its last line.
const TAIL: u64 = 64 << 10;

/// How much of a file's end is read at most to find its last line, in steps from [`TAIL`]:
/// more than the longest line the broker writes (a consent line naming every path it may
/// ask for, each escaped), and the bound on what a file's content can make the log read or
/// hold.
const MAX_TAIL: u64 = 8 << 20;

/// How many times in a row the file may be found replaced (rotated by another process)
/// between opening and locking it before an append gives up.
const REOPENS: usize = 8;

/// The audit file and this process's place on its chain.
pub(super) struct AuditFile {
    path: PathBuf,
    file: File,
    /// The file's length after this process's last write; `None` before the first, or after
    /// a failure, so that the next append reads the chain from the file.
    end: Option<u64>,
    /// Where the next line goes on the chain, once `end` matches the file.
    head: Head,
    /// Rotate before a line that would take the file past this size.
    rotate_bytes: Option<u64>,
    /// How many rotated files to keep.
    keep: u32,
}

impl AuditFile {
    /// Opens (creating if need be) the file at `path` for appending. The chain is read from
    /// the file under its lock at the first append, not here: another process may append
    /// before this one does, and the chain must continue from the file as it then is.
    pub(super) fn open(path: &Path, rotate_bytes: Option<u64>, keep: u32) -> std::io::Result<Self> {
        Ok(AuditFile {
            path: path.to_path_buf(),
            file: open_append(path)?,
            end: None,
            head: Head::new_chain(),
            rotate_bytes,
            keep: keep.max(1),
        })
    }

    /// Appends `line` (one JSON object, without its newline), sealed on the chain, rotating
    /// the file first when it would pass `rotate_bytes`.
    pub(super) fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        let len = self.lock_current()?;
        let result = self.append_locked(line, len);
        if result.is_err() {
            self.end = None;
        }
        // The lock goes with the descriptor too; an unlock that fails leaves it to the next
        // append's lock, which the same process may take again.
        let _ = fs4::FileExt::unlock(&self.file);
        result
    }

    /// Appends under the lock to the file, `len` bytes long as the lock found it.
    fn append_locked(&mut self, line: &[u8], mut len: u64) -> std::io::Result<()> {
        let mut newline = false;
        if self.end != Some(len) {
            (self.head, newline) = self.resync(len);
        }
        let (mut buf, mut next) = self.sealed(line, newline);
        if let Some(max) = self.rotate_bytes
            && len > 0
            && len.saturating_add(buf.len() as u64) > max
        {
            // The new file continues this process's own place on the chain: the old file
            // was in sync with it under the lock, whatever its last line's length.
            let head = self.head.starting();
            len = self.rotate()?;
            (self.head, newline) = if len == 0 {
                (head, false)
            } else {
                self.resync(len)
            };
            (buf, next) = self.sealed(line, newline);
        }
        self.file.write_all(&buf)?;
        self.head = next;
        self.end = Some(len.saturating_add(buf.len() as u64));
        Ok(())
    }

    /// `line` sealed at the head, with its newline (and one before it, to end a torn line).
    fn sealed(&self, line: &[u8], newline: bool) -> (Vec<u8>, Head) {
        let mut buf = Vec::with_capacity(line.len() + 256);
        buf.extend_from_slice(line);
        let next = self.head.seal(&mut buf);
        buf.push(b'\n');
        if newline {
            buf.insert(0, b'\n');
        }
        (buf, next)
    }

    /// Locks the file, making sure it is still the one at `path` (another process may have
    /// rotated it away): else opens the one there now, and tries again. Returns the locked
    /// file's length.
    fn lock_current(&mut self) -> std::io::Result<u64> {
        for _ in 0..REOPENS {
            // Named through fs4: std's inherent `File::lock` would otherwise shadow it.
            fs4::FileExt::lock(&self.file)?;
            let held = self.file.metadata()?;
            // Only a log that rotates is moved aside by the processes that share it (they
            // share its policy): one that does not is kept open as it is, a look fewer a line.
            if self.rotate_bytes.is_none() {
                return Ok(held.len());
            }
            match std::fs::metadata(&self.path) {
                Ok(m) if m.dev() == held.dev() && m.ino() == held.ino() => return Ok(held.len()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let _ = fs4::FileExt::unlock(&self.file);
            self.file = open_append(&self.path)?;
            self.end = None;
        }
        Err(std::io::Error::other(
            "the audit file kept being replaced while it was being locked",
        ))
    }

    /// The head to continue from in the file, `len` bytes long, and whether a newline must
    /// end a torn last line first. An empty file of a rotated log continues the chain of the
    /// last rotated file (whichever process rotated it); an empty file otherwise starts a new
    /// chain, as does a tail that holds no whole chained line.
    fn resync(&self, len: u64) -> (Head, bool) {
        if len == 0 {
            let head = match self.rotate_bytes {
                Some(_) => {
                    last_head(&rotated(&self.path, 1)).map_or_else(Head::new_chain, Head::starting)
                }
                None => Head::new_chain(),
            };
            return (head, false);
        }
        match tail_head(&self.file, len) {
            Ok((head, torn)) => (head.unwrap_or_else(Head::new_chain), torn),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the audit file's end; starting a new chain");
                (Head::new_chain(), false)
            }
        }
    }

    /// Shifts FILE.1 to FILE.2 and so on (the last of `keep` is replaced), FILE to FILE.1,
    /// and opens and locks a new FILE, returning its length. The caller holds the lock on
    /// FILE.
    fn rotate(&mut self) -> std::io::Result<u64> {
        for i in (1..self.keep).rev() {
            match std::fs::rename(rotated(&self.path, i), rotated(&self.path, i + 1)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::rename(&self.path, rotated(&self.path, 1))?;
        // The old file's lock is released as its descriptor closes, once the new one is open.
        self.file = open_append(&self.path)?;
        self.end = None;
        self.lock_current()
    }
}

/// `path` with `.N` appended.
fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// The head after the last line of the file at `path`, if it ends with a whole chained line.
fn last_head(path: &Path) -> Option<Head> {
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    tail_head(&file, len).ok()?.0
}

/// The head after the last line of `file`, `len` bytes long, if it is a whole chained line,
/// and whether the file ends in a torn line. The end is read from [`TAIL`] bytes up, eight
/// times more each time the last line has not begun within it, to [`MAX_TAIL`].
fn tail_head(file: &File, len: u64) -> std::io::Result<(Option<Head>, bool)> {
    let mut want = TAIL;
    loop {
        let n = len.min(want);
        let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
        file.read_exact_at(&mut buf, len - n)?;
        let torn = buf.last() != Some(&b'\n');
        let head = super::chain::head_of_tail(&buf, n == len);
        // The last line began within what was read when a newline comes before it (or the
        // whole file was read): then its verdict is final.
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if head.is_some() || n == len || want >= MAX_TAIL || body.contains(&b'\n') {
            return Ok((head, torn));
        }
        want = want.saturating_mul(8).min(MAX_TAIL);
    }
}

/// Opens `path` for appending, creating it if need be.
fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::AuditLog;

    fn verdict(path: &Path) -> crate::AuditVerdict {
        AuditLog::verify(File::open(path).unwrap(), None).unwrap()
    }

    #[test]
    fn two_writers_on_one_file_keep_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut a = AuditFile::open(&path, None, 1).unwrap();
        let mut b = AuditFile::open(&path, None, 1).unwrap();
        for i in 0..5 {
            a.append(format!(r#"{{"w":"a","i":{i}}}"#).as_bytes())
                .unwrap();
            b.append(format!(r#"{{"w":"b","i":{i}}}"#).as_bytes())
                .unwrap();
        }
        let v = verdict(&path);
        assert!(v.is_whole(), "{v:?}");
        assert_eq!((v.lines, v.last_seq), (10, Some(10)));
        // A writer opened on a file that already has lines continues its chain.
        let mut c = AuditFile::open(&path, None, 1).unwrap();
        c.append(br#"{"w":"c"}"#).unwrap();
        assert_eq!(verdict(&path).last_seq, Some(11));
    }

    #[test]
    fn an_unchained_or_torn_end_starts_a_new_chain_on_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, "{\"old\":1}\n{\"torn\":").unwrap();
        let mut a = AuditFile::open(&path, None, 1).unwrap();
        a.append(br#"{"new":1}"#).unwrap();
        a.append(br#"{"new":2}"#).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[1], "{\"torn\":");
        let restart = super::super::chain::unseal(lines[2].as_bytes()).unwrap();
        assert_eq!(
            (restart.seq, restart.prev),
            (1, Some(super::super::chain::ZERO))
        );
        // The lines before the chain are named, not passed.
        assert_eq!(verdict(&path).fault_line, Some(1));
        let tail = std::fs::read(&path).unwrap();
        assert!(super::super::chain::head_of_tail(&tail, true).is_some());
    }

    #[test]
    fn rotation_keeps_the_chain_and_at_most_keep_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut a = AuditFile::open(&path, Some(300), 2).unwrap();
        for i in 0..12 {
            a.append(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        }
        let (one, two) = (rotated(&path, 1), rotated(&path, 2));
        assert!(two.exists() && !rotated(&path, 3).exists());
        let v2 = AuditLog::verify(File::open(&two).unwrap(), None).unwrap();
        let v1 = AuditLog::verify(File::open(&one).unwrap(), Some(&v2)).unwrap();
        let v = AuditLog::verify(File::open(&path).unwrap(), Some(&v1)).unwrap();
        assert!(
            v2.is_whole() && v1.is_whole() && v.is_whole(),
            "{v2:?} {v1:?} {v:?}"
        );
        assert_eq!(v.last_seq, Some(12));
        assert!(std::fs::metadata(&one).unwrap().len() <= 300);
        // A second writer whose file was rotated away follows it to the new one.
        let mut b = AuditFile::open(&path, Some(300), 2).unwrap();
        b.append(br#"{"b":0}"#).unwrap();
        for i in 0..6 {
            a.append(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        }
        b.append(br#"{"b":1}"#).unwrap();
        let v1 = AuditLog::verify(File::open(&one).unwrap(), None).unwrap();
        let v = AuditLog::verify(File::open(&path).unwrap(), Some(&v1)).unwrap();
        assert!(v1.is_whole() && v.is_whole(), "{v1:?} {v:?}");
        assert_eq!(v.last_seq, Some(20));
    }
}
