//! Finding a root's directory at start and at reload: the one place that reaches the ambient
//! filesystem.
//!
//! The configured path is walked from `/` one component at a time, with `O_PATH | O_NOFOLLOW`
//! descriptors, and every symlink is expanded here rather than by the kernel. That lets the
//! walk tell when it enters the directory of a writable root (by device and inode, however the
//! path got there): below that point the server may have shaped every name, so a link there is
//! never followed and the policy is refused with a message naming both roots. Links outside
//! every writable root are the user's own and are followed as the kernel would.

use super::MAX_SYMLINK_HOPS;
use super::dirs::FileId;
use crate::path::MountName;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// The directory of a writable root: beneath it, the server may shape every name.
#[derive(Debug, Clone)]
pub(crate) struct Zone {
    /// The directory's device and inode.
    pub(crate) id: FileId,
    /// The root's mount name, for messages.
    pub(crate) mount: MountName,
    /// The root's configured path, for messages.
    pub(crate) path: PathBuf,
}

/// Where a walk ended: the directory and its real path.
pub(crate) struct Found {
    /// The directory, held for its identity only (`O_PATH`): a directory the user may search
    /// but not read is still judged; [`Found::open`] opens it for reading.
    pub(crate) fd: OwnedFd,
    /// Its real path, as components below `/`.
    pub(crate) real: Vec<String>,
}

impl Found {
    /// The directory, opened for reading.
    pub(crate) fn open(&self) -> std::io::Result<Dir> {
        let dir = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Dir::from_std_file(std::fs::File::from(dir)))
    }
}

/// The program `execve` would run for `program` in `cwd`: the path itself (against `cwd`) when
/// it has a `/`, else the first executable file of that name on `PATH`. The one place a
/// program is looked up, for the consent program and the sandboxed server alike.
pub(crate) fn find_program(program: &Path, cwd: &Path) -> Option<PathBuf> {
    // One reader of `PATH` for the broker: what the sandbox holds and what an identity names
    // are found alike.
    let path = std::env::var_os("PATH");
    crate::identity::resolve(program.as_os_str(), cwd, path.as_deref())
}

/// `path` made absolute against the working directory.
pub(crate) fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(path))
    }
}

/// Walks absolute `path` from `/` to the directory it names (see the module's docs). Errors:
/// a link met beneath one of `zones`, more than [`MAX_SYMLINK_HOPS`] links, a component that
/// is not a directory, a name that is not UTF-8, and the I/O error of any step.
pub(crate) fn walk(path: &Path, zones: &[Zone]) -> std::io::Result<Found> {
    walk_noting(path, zones, &mut None)
}

/// As [`walk`], noting in `entered` the first writable root the walk entered, whether it ends
/// with the directory or with an error, and even if it left that root again (by `..`): a
/// route that went where the server may shape names can be shaped by it (a directory there
/// made a link later changes where `..` leads).
fn walk_noting<'z>(
    path: &Path,
    zones: &'z [Zone],
    entered: &mut Option<&'z Zone>,
) -> std::io::Result<Found> {
    let start = Dir::open_ambient_dir("/", ambient_authority())?;
    let step = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fds: Vec<OwnedFd> = vec![rustix::fs::openat(&start, ".", step, Mode::empty())?];
    let mut real: Vec<String> = Vec::new();
    // The writable root entered, with the depth at which it was entered.
    let mut within: Option<(usize, &Zone)> = zone_of(&fds[0], zones)?.map(|z| (0, z));
    if entered.is_none() {
        *entered = within.map(|(_, z)| z);
    }
    let mut todo = pending(path)?;
    let mut hops = 0usize;
    while let Some(name) = todo.pop() {
        if name == ".." {
            if fds.len() > 1 {
                fds.pop();
                real.pop();
            }
            if within.is_some_and(|(depth, _)| real.len() < depth) {
                within = None;
            }
            continue;
        }
        let top = fds
            .last()
            .ok_or_else(|| std::io::Error::other("empty walk"))?;
        let fd = rustix::fs::openat(top, name.as_str(), step, Mode::empty())?;
        let st = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                real.push(name);
                if within.is_none() {
                    within = zone_of(&fd, zones)?.map(|z| (real.len(), z));
                    if entered.is_none() {
                        *entered = within.map(|(_, z)| z);
                    }
                }
                fds.push(fd);
            }
            FileType::Symlink => {
                if let Some((_, zone)) = within {
                    return Err(link_beneath(zone, &real, &name));
                }
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(std::io::Error::from_raw_os_error(
                        rustix::io::Errno::LOOP.raw_os_error(),
                    ));
                }
                let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if target.has_root() {
                    fds.truncate(1);
                    real.clear();
                    within = zone_of(&fds[0], zones)?.map(|z| (0, z));
                    if entered.is_none() {
                        *entered = within.map(|(_, z)| z);
                    }
                }
                todo.extend(pending(&target)?);
            }
            _ => {
                return Err(std::io::Error::from_raw_os_error(
                    rustix::io::Errno::NOTDIR.raw_os_error(),
                ));
            }
        }
    }
    let fd = fds
        .pop()
        .ok_or_else(|| std::io::Error::other("empty walk"))?;
    Ok(Found { fd, real })
}

/// The components of `path` still to walk, as a stack (the next one last).
fn pending(path: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => out.push(s.to_str().map(str::to_owned).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "root path is not valid utf-8",
                )
            })?),
            Component::ParentDir => out.push("..".to_owned()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out.reverse();
    Ok(out)
}

/// The writable root whose directory `fd` is, if any.
fn zone_of<'z>(fd: &OwnedFd, zones: &'z [Zone]) -> std::io::Result<Option<&'z Zone>> {
    let st = rustix::fs::fstat(fd)?;
    Ok(zones.iter().find(|z| z.id == (st.st_dev, st.st_ino)))
}

/// The refusal of a link beneath a writable root.
fn link_beneath(zone: &Zone, real: &[String], name: &str) -> std::io::Error {
    let mut at = PathBuf::from("/");
    at.extend(real);
    at.push(name);
    std::io::Error::other(format!(
        "it lies beneath the writable root `{}` ({}), where {} is a symbolic link: a path \
             beneath a writable root is never followed through a link, since the server may \
             have made it; name the real directory, or see SECURITY.md on nested roots",
        zone.mount,
        zone.path.display(),
        at.display()
    ))
}

/// Why `zone`'s pin is stale, if it is: its path no longer names the directory pinned (the
/// root was deleted, or replaced, and the inode it had may now be another directory's, such
/// as the one holding the file judged). The check still refuses (what cannot be judged is
/// refused) but says so, rather than claim the file lies beneath that root.
fn stale(zone: &Zone) -> Option<String> {
    let now = walk(&absolute(&zone.path).ok()?, &[])
        .and_then(|found| rustix::fs::fstat(&found.fd).map_err(std::io::Error::from))
        .map(|st| (st.st_dev, st.st_ino));
    match now {
        Ok(id) if id == zone.id => None,
        Ok(_) | Err(_) => Some(format!(
            "the writable root `{}` ({}) is pinned to a directory that its path no longer \
             names (it was deleted or replaced since it was opened): the pin is stale, and \
             the place it matched here may be another directory that took its inode; \
             nothing beneath the path is trusted until the root is opened again (a reload \
             that finds it there, or a restart)",
            zone.mount,
            zone.path.display()
        )),
    }
}

/// The zone of a writable root's spec, found without regard to other roots: a first pass, so
/// that the second can walk every root knowing where the server may shape names. A writable
/// root that cannot be found here must not be opened in the second pass either: left out of
/// the zones, it would let that pass follow a link beneath it (a root the server made
/// unsearchable for a moment).
pub(crate) fn zone(spec: &super::RootSpec) -> std::io::Result<Zone> {
    let found = walk(&absolute(&spec.path)?, &[])?;
    let st = rustix::fs::fstat(&found.fd)?;
    Ok(Zone {
        id: (st.st_dev, st.st_ino),
        mount: spec.mount.clone(),
        path: spec.path.clone(),
    })
}

/// Checks a file the policy names (the policy file, the audit log, a consent program) against
/// the writable roots: a file there, or reached through a link or a directory there (even one
/// left again by `..`), is the server's to change, so it is refused with a message naming the
/// root. Returns the file's real path (its directory's links resolved, and its own), which
/// is what a consent program runs as.
pub(crate) fn outside_zones(file: &Path, zones: &[Zone]) -> Result<PathBuf, String> {
    let beneath = |zone: &Zone| {
        // `root/dir/../file` leaves the root only if `dir` is still a directory when the file
        // is opened: the server could make it a link. Said, since such a path looks outside.
        let through = if file
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            " (its path passes through that root on the way, where the server could put a \
             link: give the file's path without `..`)"
        } else {
            ""
        };
        format!(
            "{} lies beneath the writable root `{}` ({}), so the server could replace it{through}; \
             put it outside every writable root",
            file.display(),
            zone.mount,
            zone.path.display()
        )
    };
    let mut at = absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
    // The file itself may be a link (the user's, outside every writable root): where it
    // leads is checked too, one link at a time.
    for _ in 0..=MAX_SYMLINK_HOPS {
        let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
            return Ok(at);
        };
        let mut entered = None;
        let walked = walk_noting(parent, zones, &mut entered);
        if let Some(zone) = entered {
            return Err(match stale(zone) {
                Some(why) => why,
                None => beneath(zone),
            });
        }
        let real = match walked {
            Ok(found) => {
                let mut real = PathBuf::from("/");
                real.extend(&found.real);
                real.join(name)
            }
            // Missing outside every writable root: no server can make it appear, and whoever
            // opens the file reports it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(at),
            // Anything else cannot be judged, and what cannot be judged is refused.
            Err(e) => {
                return Err(format!(
                    "cannot tell whether {} lies beneath a writable root: {e}",
                    file.display()
                ));
            }
        };
        match std::fs::read_link(&real) {
            Ok(target) => at = real.parent().unwrap_or(Path::new("/")).join(target),
            // Not a link (or not there yet): the walk above judged its place.
            Err(_) => return Ok(real),
        }
    }
    Err(format!("{}: too many levels of links", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(dir: &Path) -> FileId {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(dir).unwrap();
        (m.dev(), m.ino())
    }

    /// A zone whose root was deleted and whose inode another directory took: a file there is
    /// refused saying the pin is stale, never that it lies beneath the root.
    #[test]
    fn a_stale_pin_fails_saying_so() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let config = tmp.path().join("config");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&config).unwrap();
        let zone = |id| Zone {
            id,
            mount: crate::path::MountName::new("root").unwrap(),
            path: root.clone(),
        };
        let file = config.join("console.json");
        // Its pin is the other directory's: as when the inode was reused.
        let stale_zone = zone(id_of(&config));
        let e = outside_zones(&file, std::slice::from_ref(&stale_zone)).unwrap_err();
        assert!(e.contains("stale"), "{e}");
        assert!(!e.contains("lies beneath"), "{e}");
        // The same when the root is gone altogether.
        std::fs::remove_dir(&root).unwrap();
        let e = outside_zones(&file, &[stale_zone]).unwrap_err();
        assert!(e.contains("stale"), "{e}");
        // A current pin judges as before.
        std::fs::create_dir(&root).unwrap();
        let current = zone(id_of(&root));
        assert!(outside_zones(&file, std::slice::from_ref(&current)).is_ok());
        let e = outside_zones(&root.join("f"), &[current]).unwrap_err();
        assert!(e.contains("lies beneath"), "{e}");
    }
}
