//! Writing a rewritten configuration: a backup of what was there beside it first, then the
//! new text through a temporary file renamed over the old one (`crate::atomic`), and only
//! when the file still holds what the rewrite was computed from. A host, an editor or the
//! user may write the file meanwhile: their change is never overwritten.
//!
//! The comparison happens twice. The bytes are compared when the file is opened for the
//! write, and its etag (device, inode, size, modification time) taken then; the rename waits
//! for the advisory lock on the old file and compares that etag again on the locked file, so
//! a change between the two (a rename over it, a write) makes the commit fail.

use crate::atomic::{Preconditions, TempFile, etag};
use crate::deadline::Deadline;
use crate::error::ErrorKind;
use crate::locks::Wait;
use cap_std::fs::{Dir, Metadata};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The suffix of the backup written beside a rewritten file.
pub(crate) const BACKUP_SUFFIX: &str = ".fsbroker-backup";

/// How long a write waits for another program's lock on the file.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// A file rewritten.
#[derive(Debug)]
pub(crate) struct Written {
    /// The file written (a link's target when the configuration was a link).
    pub file: PathBuf,
    /// The backup of what it held before.
    pub backup: PathBuf,
}

/// Replaces the file at `path` (through a link, its target) with `after`, when it still
/// holds `before`; a backup of `before` is written beside it first, with its permissions.
pub(crate) fn replace(path: &Path, before: &[u8], after: &[u8]) -> Result<Written, String> {
    let real = std::fs::canonicalize(path).map_err(|e| format!("cannot resolve: {e}"))?;
    let (Some(parent), Some(name)) = (real.parent(), real.file_name().and_then(|n| n.to_str()))
    else {
        return Err("not a file with a name of UTF-8".into());
    };
    let dir = Dir::open_ambient_dir(parent, cap_std::ambient_authority())
        .map_err(|e| format!("cannot open its directory: {e}"))?;
    let (now, meta) = read_at(&dir, name)?;
    if now != before {
        return Err(changed());
    }
    let mode = {
        use cap_std::fs::MetadataExt;
        meta.mode() & 0o777
    };
    let backup = format!("{name}{BACKUP_SUFFIX}");
    commit(&dir, &backup, before, Some(mode), None)?;
    commit(&dir, name, after, None, Some((etag(&meta), before)))?;
    Ok(Written {
        backup: parent.join(&backup),
        file: real,
    })
}

/// The message of a file changed by someone else.
fn changed() -> String {
    "changed by another program since it was read: not overwritten (run the command again)".into()
}

/// The bytes of `name` in `dir`, with the metadata of the file they were read from.
fn read_at(dir: &Dir, name: &str) -> Result<(Vec<u8>, Metadata), String> {
    let file = dir.open(name).map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    let mut bytes = Vec::new();
    file.take(super::MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    Ok((bytes, meta))
}

/// Writes `bytes` to `name` in `dir` through a temporary file: a new file takes `mode`; with
/// `expect`, only over the file of that etag, and only while it still holds those bytes.
fn commit(
    dir: &Dir,
    name: &str,
    bytes: &[u8],
    mode: Option<u32>,
    expect: Option<(String, &[u8])>,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write {name}: {e}");
    let temp = TempFile::create(dir).map_err(io)?;
    if let Some(mode) = mode {
        temp.file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
    }
    let mut file = temp.file();
    file.write_all(bytes).map_err(io)?;
    let pre = Preconditions {
        create: expect.is_none(),
        overwrite: true,
        if_match: expect.as_ref().map(|(tag, _)| tag.clone()),
    };
    let mut wait = Wait::new(LOCK_WAIT, Deadline::at(Instant::now() + LOCK_WAIT * 2));
    let staged = temp.lock(dir, name, &pre, &mut wait).map_err(|e| {
        if e.kind() == ErrorKind::ConcurrencyConflict {
            changed()
        } else {
            format!("cannot replace {name}: {e}")
        }
    })?;
    if let Some((_, before)) = expect {
        // The lock is held: what the name holds now is what the rename replaces.
        let (now, _) = read_at(dir, name)?;
        if now != before {
            return Err(changed());
        }
    }
    staged
        .commit()
        .map_err(|e| format!("cannot replace {name}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_no_longer_holds_what_was_read_is_not_overwritten() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = tmp.path().join("mcp.json");
        std::fs::write(&path, "{\"theirs\": 1}").unwrap_or_else(|e| panic!("write: {e}"));
        let err = replace(&path, b"{}", b"{\"ours\": 1}").unwrap_err();
        assert!(err.contains("changed by another program"), "{err}");
        let now = std::fs::read(&path).unwrap_or_else(|e| panic!("read: {e}"));
        assert_eq!(now, b"{\"theirs\": 1}");
        assert!(!tmp.path().join("mcp.json.fsbroker-backup").exists());
    }

    #[test]
    fn the_backup_holds_the_old_bytes_with_the_old_permissions() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = tmp.path().join("config.toml");
        std::fs::write(&path, "old").unwrap_or_else(|e| panic!("write: {e}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("chmod: {e}"));
        let w = replace(&path, b"old", b"new").unwrap_or_else(|e| panic!("replace: {e}"));
        assert_eq!(std::fs::read(&path).unwrap_or_default(), b"new");
        assert_eq!(std::fs::read(&w.backup).unwrap_or_default(), b"old");
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode(&w.backup).ok(), Some(0o600));
        assert_eq!(mode(&path).ok(), Some(0o600));
    }

    #[test]
    fn a_link_keeps_pointing_at_the_rewritten_target() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let target = tmp.path().join("dotfiles-settings.json");
        let link = tmp.path().join("settings.json");
        std::fs::write(&target, "a").unwrap_or_else(|e| panic!("write: {e}"));
        std::os::unix::fs::symlink(&target, &link).unwrap_or_else(|e| panic!("link: {e}"));
        replace(&link, b"a", b"b").unwrap_or_else(|e| panic!("replace: {e}"));
        assert!(std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()));
        assert_eq!(std::fs::read(&target).unwrap_or_default(), b"b");
    }
}
