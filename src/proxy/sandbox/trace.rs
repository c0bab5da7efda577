//! How a path is reached: every place its resolution visits, links expanded one at a time by
//! us, so the profile can tell whether a path leads through a place the server may write.
//!
//! `canonicalize` says where a path ends, not how it got there: a link inside a writable root
//! that points at `~/.ssh` ends outside every writable place, yet the server chose where it
//! points. The profile must infer nothing from such a path, so it needs the whole route.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Most links expanded while tracing one path, as Linux's `MAXSYMLINKS`.
const MAX_HOPS: usize = 40;

/// Where a path leads and every place on the way.
#[derive(Debug)]
pub(super) struct Trace {
    /// The path with every link resolved: what the kernel would reach now.
    pub(crate) real: PathBuf,
    /// Every place visited, by real directory: each link itself and each component reached.
    visited: Vec<PathBuf>,
}

impl Trace {
    /// The first place of `places` the route passes through (any visited place at or beneath
    /// it), if any.
    pub(super) fn through<'a>(&self, places: &'a [PathBuf]) -> Option<&'a Path> {
        places
            .iter()
            .find(|p| self.visited.iter().any(|v| v.starts_with(p)))
            .map(PathBuf::as_path)
    }
}

/// Traces `path` (made absolute against `cwd`), expanding links ourselves; an error when a
/// component is missing or links loop.
pub(super) fn trace(path: &Path, cwd: &Path) -> std::io::Result<Trace> {
    let absolute = cwd.join(path);
    // Components still to walk, the next one last.
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, &absolute);
    let mut at = PathBuf::from("/");
    let mut visited = Vec::new();
    let mut hops = 0;
    while let Some(c) = todo.pop() {
        if c == "." {
            continue;
        }
        if c == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&c);
        visited.push(next.clone());
        let meta = std::fs::symlink_metadata(&next)?;
        if meta.file_type().is_symlink() {
            hops += 1;
            if hops > MAX_HOPS {
                return Err(std::io::Error::other(format!(
                    "{}: too many levels of links",
                    path.display()
                )));
            }
            let target = std::fs::read_link(&next)?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            push_components(&mut todo, &target);
        } else {
            at = next;
        }
    }
    visited.push(at.clone());
    Ok(Trace { real: at, visited })
}

/// Opens `path` (absolute, with no link in it) for its identity, refusing to follow any link
/// on the way: the profile names real paths, so a link found at one of them now means
/// something was swapped since it was judged.
pub(super) fn open_exact(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )
    .map_err(std::io::Error::from)
}

/// The device and inode of what `path` names, opened with [`open_exact`].
pub(super) fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    let fd = open_exact(path)?;
    let st = rustix::fs::fstat(&fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// Pushes `path`'s components onto `todo` so that the first is popped first.
fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    todo.extend(parts.into_iter().rev());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_link_through_a_place_is_seen_even_when_it_ends_elsewhere() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("proj/bin")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("outside/x"), "").unwrap();
        std::os::unix::fs::symlink(base.join("outside/x"), base.join("proj/bin/x")).unwrap();
        // A link outside the project into it, and on out again.
        std::os::unix::fs::symlink(base.join("proj/bin"), base.join("via")).unwrap();
        let tr = trace(Path::new("via/x"), &base).unwrap();
        assert_eq!(tr.real, base.join("outside/x"));
        let proj = [base.join("proj")];
        assert_eq!(tr.through(&proj), Some(proj[0].as_path()));
        let direct = trace(&base.join("outside/x"), &base).unwrap();
        assert_eq!(direct.through(&proj), None);
    }

    #[test]
    fn dotdot_after_a_link_climbs_from_its_target() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::os::unix::fs::symlink(base.join("a/b"), base.join("l")).unwrap();
        let tr = trace(Path::new("l/.."), &base).unwrap();
        assert_eq!(tr.real, base.join("a"));
    }

    #[test]
    fn a_loop_is_an_error_not_a_hang() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::os::unix::fs::symlink("l2", base.join("l1")).unwrap();
        std::os::unix::fs::symlink("l1", base.join("l2")).unwrap();
        assert!(trace(Path::new("l1"), &base).is_err());
    }
}
