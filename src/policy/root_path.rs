//! Where a policy's paths lead, and what to say when a root's leads nowhere.
//!
//! A relative path in a policy file is taken against the file's directory, so that a policy
//! means the same whichever directory fsbroker is started from; one on the command line or
//! in a policy built in code is taken against the working directory, as a shell user
//! expects. A root that cannot be opened is named as given and as resolved, with what it
//! looks like when it is a mistake a host configuration makes often (a `~` or a `${...}`
//! nobody expanded, a relative path taken against another directory).

use super::{ConsentMode, Policy, RootEntry};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

impl Policy {
    /// Takes the relative paths of a policy read from a file in `dir` against `dir`: each
    /// root's, the audit file's, and a `command:` consent program's when it is named by a
    /// path (a bare name is still looked up on `PATH`). An empty path is left alone, so that
    /// it is refused rather than read as the file's own directory.
    pub(super) fn rebase(&mut self, dir: &Path) {
        let relative = |p: &Path| p.is_relative() && !p.as_os_str().is_empty();
        for r in &mut self.roots {
            if relative(&r.path) {
                let given = std::mem::take(&mut r.path);
                r.path = dir.join(&given);
                r.rebased = Some((given, dir.to_path_buf()));
            }
        }
        for file in [&mut self.audit.file, &mut self.recovery.dir]
            .into_iter()
            .flatten()
        {
            if relative(file) {
                *file = dir.join(&*file);
            }
        }
        for mode in [&mut self.consent.mode, &mut self.consent.fallback] {
            if let Some(ConsentMode::Command(program)) = mode
                && relative(program)
                && program.as_os_str().as_bytes().contains(&b'/')
            {
                *program = dir.join(&*program);
            }
        }
    }
}

impl RootEntry {
    /// Why this root's directory could not be opened, `e`, said so that the user can fix it.
    pub(crate) fn cannot_open(&self, e: &std::io::Error) -> String {
        match &self.rebased {
            Some((given, dir)) => cannot_open_root(given, Some(dir), e),
            None => cannot_open_root(&self.path, None, e),
        }
    }
}

/// Why the root at `path` (as given; relative to `dir` when one is given, else to the working
/// directory) could not be opened, `e`.
fn cannot_open_root(path: &Path, dir: Option<&PathBuf>, e: &std::io::Error) -> String {
    let given = path.display().to_string();
    let mut message = format!("cannot open root directory {given:?}");
    if path.is_relative() {
        match (dir, std::env::current_dir()) {
            (Some(dir), _) => message.push_str(&format!(
                " (resolved to {:?}: a relative path in a policy file is taken against the \
                 file's directory, {:?})",
                dir.join(path).display().to_string(),
                dir.display().to_string()
            )),
            (None, Ok(cwd)) => message.push_str(&format!(
                " (resolved to {:?}: a relative path is taken against the working directory, {:?})",
                cwd.join(path).display().to_string(),
                cwd.display().to_string()
            )),
            (None, Err(_)) => {
                message.push_str(" (a relative path, and the working directory is gone)")
            }
        }
    }
    message.push_str(&format!(": {e}"));
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        message.push_str(&format!(
            "; a root must be a directory the user fsbroker runs as (uid {}) can search and \
             read, as must every directory above it be searchable",
            rustix::process::getuid().as_raw()
        ));
    } else if given.starts_with('~') {
        message.push_str(
            "; it begins with a literal `~`, which nothing expanded (a shell does, a host's JSON \
             configuration does not): write the full path, such as /home/NAME/...",
        );
    } else if given.contains("${") {
        message.push_str(
            "; it holds a literal `${...}`, which the host did not substitute: write the \
             directory itself, or use a host that fills in that variable",
        );
    } else if path.is_relative() && dir.is_some() {
        message.push_str("; give an absolute path, or one relative to the policy file");
    } else if path.is_relative() {
        message.push_str("; give an absolute path, or run from the directory it is relative to");
    }
    message
}
