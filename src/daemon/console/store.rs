//! The console's state file, `$XDG_CONFIG_HOME/fsbroker/console.json`: the user's edits of
//! the roots and the grants they asked to be remembered (a [`Layer`]), kept across restarts
//! of the daemon. One writer (the daemon, under the console's lock); each save replaces the
//! file whole, so that a crash leaves the old state or the new, never half of one.

use crate::policy::Layer;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the state lives.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    file: PathBuf,
}

impl Store {
    /// The state file in the user's configuration directory; `None` without one (no
    /// `XDG_CONFIG_HOME` and no `HOME`).
    pub(crate) fn default_place() -> Option<Store> {
        let dir = crate::policy::xdg_dir("XDG_CONFIG_HOME", ".config")?;
        Some(Store {
            file: dir.join("fsbroker").join("console.json"),
        })
    }

    /// The state file `file`.
    #[cfg(test)]
    pub(crate) fn at(file: PathBuf) -> Store {
        Store { file }
    }

    /// The file's path.
    pub(crate) fn file(&self) -> &Path {
        &self.file
    }

    /// The state kept: no edits when there is no file yet. A file that cannot be read or
    /// understood is an error, so that the daemon neither starts without the user's
    /// remembered choices nor writes over them.
    pub(crate) fn load(&self) -> Result<Layer, String> {
        match read_own(&self.file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "the console's state file {} cannot be read: {e}; fix or remove it",
                    self.file.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Layer::default()),
            Err(e) => Err(format!(
                "cannot read the console's state file {}: {e}",
                self.file.display()
            )),
        }
    }

    /// Replaces the state kept with `layer`: written beside the file (0600), synced, then
    /// renamed over it.
    pub(crate) fn save(&self, layer: &Layer) -> Result<(), String> {
        let fail = |e: std::io::Error| {
            format!(
                "cannot save the console's state file {}: {e}",
                self.file.display()
            )
        };
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)?;
        let text = serde_json::to_vec_pretty(layer).map_err(|e| e.to_string())?;
        let temp = dir.join(format!(".console.json.{}", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let mut file = crate::daemon::socket::private_file(&temp).map_err(fail)?;
        let written = file
            .write_all(&text)
            .and_then(|()| file.write_all(b"\n"))
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&temp, &self.file));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(fail(e));
        }
        Ok(())
    }
}

/// The file at `path`, read through no link, when it is the user's own and nobody else may
/// write it: what it says is granted at the next start. Anything else is an error saying why.
fn read_own(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "it must be yours and writable by you alone (owner {}, mode {:o})",
            meta.uid(),
            meta.mode() & 0o777
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_STATE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The largest state file read: far more than any user's edits.
const MAX_STATE_BYTES: u64 = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Access;
    use crate::policy::Remembered;

    #[test]
    fn what_is_saved_is_loaded_and_a_bad_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("sub").join("console.json"));
        assert_eq!(store.load().unwrap(), Layer::default());
        let mut layer = Layer::default();
        layer.remembered.push(Remembered {
            server: "s".into(),
            path: "demo/a".into(),
            access: Access::Write,
            since: 7,
            identity: Some(crate::Identity::of_host("plugin:s@1").record(7)),
        });
        store.save(&layer).unwrap();
        assert_eq!(store.load().unwrap(), layer);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.file())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(store.file(), std::fs::Permissions::from_mode(0o622)).unwrap();
        let e = store.load().unwrap_err();
        assert!(e.contains("writable by you alone"), "{e}");
        std::fs::set_permissions(store.file(), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(store.file(), b"{\"remembered\": 3}").unwrap();
        let e = store.load().unwrap_err();
        assert!(e.contains("console.json"), "{e}");
        std::fs::remove_file(store.file()).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), store.file()).unwrap();
        std::fs::write(dir.path().join("elsewhere"), b"{}").unwrap();
        assert!(store.load().is_err(), "a link was followed");
    }
}
