//! The message for a root directory that cannot be opened: the path as given and as
//! resolved, and what it looks like when it is a mistake a host configuration makes often
//! (a `~` or a `${...}` nobody expanded, a relative path taken against another directory).

use std::path::Path;

/// Why the root at `path` (as given) could not be opened, `e`, said so that the user can fix
/// it.
pub(crate) fn cannot_open_root(path: &Path, e: &std::io::Error) -> String {
    let given = path.display().to_string();
    let mut message = format!("cannot open root directory {given:?}");
    if path.is_relative() {
        match std::env::current_dir() {
            Ok(dir) => message.push_str(&format!(
                " (resolved to {:?}: a relative path is taken against the working directory, {:?})",
                dir.join(path).display().to_string(),
                dir.display().to_string()
            )),
            Err(_) => message.push_str(" (a relative path, and the working directory is gone)"),
        }
    }
    message.push_str(&format!(": {e}"));
    if given.starts_with('~') {
        message.push_str(
            "; it begins with a literal `~`, which nothing expanded (a shell does, a host's JSON \
             configuration does not): write the full path, such as /home/NAME/...",
        );
    } else if given.contains("${") {
        message.push_str(
            "; it holds a literal `${...}`, which the host did not substitute: write the \
             directory itself, or use a host that fills in that variable",
        );
    } else if path.is_relative() {
        message.push_str("; give an absolute path, or run from the directory it is relative to");
    }
    message
}
