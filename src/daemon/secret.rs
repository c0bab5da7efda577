//! The daemon's secret: 32 random bytes, written in hex to a 0600 file beside the socket at
//! start, which every connection must prove it holds before anything is served. A process
//! that can reach the socket but not that file (a sandboxed server, whose profile never opens
//! the socket's directory) gets nothing.

use std::io::{ErrorKind as IoKind, Write};
use std::path::Path;

/// The secret's length in bytes (its hex form is twice as long).
const SECRET_BYTES: usize = 32;

/// A daemon's secret, in its hex form.
pub(crate) struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A fresh secret, written to `path` (mode 0600, created new after a stale one is
    /// removed, never through a link).
    pub(crate) fn create(path: &Path) -> Result<Secret, String> {
        let Secret(hex) = Secret::fresh()?;
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == IoKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove the old key {}: {e}", path.display())),
        }
        let mut file = super::socket::private_file(path)
            .map_err(|e| format!("cannot create the key {}: {e}", path.display()))?;
        file.write_all(format!("{hex}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("cannot write the key {}: {e}", path.display()))?;
        Ok(Secret(hex))
    }

    /// A fresh secret, kept in memory only (the console's tokens and cookie).
    pub(crate) fn fresh() -> Result<Secret, String> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| format!("no random bytes for a secret: {e}"))?;
        Ok(Secret(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The secret a client of `uid` reads from `path`: a regular file, not a link, owned by
    /// `uid` and closed to group and others, as the daemon writes it. A key others could have
    /// written or read proves nothing and is not sent.
    pub(crate) fn read(path: &Path, uid: u32) -> Result<Secret, String> {
        use std::io::Read;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let cannot =
            |e: std::io::Error| format!("cannot read the daemon's key {}: {e}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        if !meta.file_type().is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(format!(
                "refusing the daemon's key {}: it is owned by uid {} with mode {:04o}; \
                 expected a file owned by uid {uid} (this user) with mode 0600",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        let mut text = String::new();
        // A key is 65 bytes: a longer file is not one.
        (&mut file)
            .take(1024)
            .read_to_string(&mut text)
            .map_err(cannot)?;
        Ok(Secret(text.trim().to_owned()))
    }

    /// The hex form, for a hello.
    pub(crate) fn hex(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is this secret, compared in time that does not depend on where they
    /// differ.
    pub(crate) fn matches(&self, offered: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), offered.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
        std::hint::black_box(diff) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_fresh_secret_is_private_and_matches_only_itself() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("broker.key");
        std::fs::write(&path, "stale").unwrap_or_else(|e| panic!("{e}"));
        let s = Secret::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
        assert_eq!(s.hex().len(), 2 * SECRET_BYTES);
        let uid = rustix::process::getuid().as_raw();
        let read = Secret::read(&path, uid).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.matches(read.hex()));
        assert!(!s.matches(""));
        let mut wrong = s.hex().to_owned();
        wrong.replace_range(0..1, if wrong.starts_with('0') { "1" } else { "0" });
        assert!(!s.matches(&wrong));
    }
}
