//! The resolver: a request path walked one component at a time through directory handles.
//!
//! Three rules make it safe against a server that shapes both the path and the tree:
//!
//! - **Nothing is looked at without a grant.** Before the walk looks up a name (a stat, an
//!   open, reading a link) the [`Gate`] is asked whether the session may see that place, and
//!   before it creates a directory whether it may write there. So a symlink into an ungranted
//!   directory stops the walk before anything there is touched, whatever exists there, and a
//!   missing parent is created only where a write grant already covers it.
//! - **The kernel follows no link.** Directories are opened `O_NOFOLLOW`; symlinks are read
//!   and expanded here, and one that climbs above the root is refused before any further I/O.
//! - **`..` is linear.** The walk keeps the directories it went through; `..` steps back to
//!   the one below. The last [`HELD`] levels keep their handles; deeper ones keep their
//!   identity, and stepping back to one opens `..` from its child and checks that it is the
//!   same directory (a directory moved away in the meantime fails the walk). A path costs at
//!   most one step per component, and at most `HELD` descriptors.

use super::dirs::{FileId, FileIdOf, open_parent};
use super::granted::{Gate, Granted};
use super::{MAX_SYMLINK_HOPS, Root, split_target};
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::{MountPath, RelPath};
use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, Metadata};
use std::collections::VecDeque;
use std::ops::ControlFlow;

/// Whether the final component is followed when it is a symlink (as cap-std's
/// `FollowSymlinks`, for the last step only: middle symlinks are always expanded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FollowFinal {
    /// Expand a final symlink (while it stays beneath the root).
    Yes,
    /// Name the final entry itself, whatever it is.
    No,
}

/// Whether missing directories on the way are created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parents {
    /// A missing middle component is an error.
    Existing,
    /// A missing middle component is created (with `mkdirat` on its parent's handle), where
    /// the gate allows writing.
    Create,
}

/// Directory handles one walk keeps open; deeper levels keep only their identity.
const HELD: usize = 32;

/// Most times one walk creates a directory that is gone again when it looks: a server racing
/// creation against removal cannot keep a walk busy.
const MAX_CHURN: usize = 16;

/// One directory the walk went through, beneath the root (its name is in the walk's path).
struct Level {
    /// Its handle, while it is among the last [`HELD`] levels.
    dir: Option<Dir>,
    /// Its identity, recorded when its handle was let go.
    id: Option<FileId>,
}

/// Where a walk is: the root's handle, the levels beneath it, and their real path.
struct Walk<'r> {
    root: &'r Root,
    levels: Vec<Level>,
    /// Levels from this index on hold their handles.
    held_from: usize,
    /// The real path of the current directory.
    real: MountPath,
}

impl<'r> Walk<'r> {
    fn new(root: &'r Root) -> Self {
        Walk {
            root,
            levels: Vec::new(),
            held_from: 0,
            real: MountPath {
                mount: root.mount.clone(),
                rel: RelPath::root(),
            },
        }
    }

    /// The current directory's handle. The last level always holds one: anything else is a
    /// fault of the walk, and it stops rather than guess.
    fn here(&self) -> Result<&Dir> {
        match self.levels.last() {
            None => Ok(&self.root.dir),
            Some(Level { dir: Some(d), .. }) => Ok(d),
            Some(_) => Err(Error::new(ErrorKind::Internal, "resolver lost its place")),
        }
    }

    fn io(&self, e: &std::io::Error, at: &MountPath) -> Error {
        Error::from_io(e, &at.to_string())
    }

    /// Enters `dir`, the directory whose name the walk's path already ends with.
    fn descend(&mut self, dir: Dir) -> Result<()> {
        self.levels.push(Level {
            dir: Some(dir),
            id: None,
        });
        if self.levels.len() - self.held_from > HELD {
            let oldest = &mut self.levels[self.held_from];
            if let Some(d) = oldest.dir.take() {
                oldest.id = Some(d.file_id().map_err(|e| Error::from_io(&e, ""))?);
            }
            self.held_from += 1;
        }
        Ok(())
    }

    /// Steps back to the parent directory (`..`). Above the root is `outside_root`.
    fn ascend(&mut self) -> Result<()> {
        let Some(child) = self.levels.pop() else {
            return Err(Error::denied(Reason::OutsideRoot).with_path(self.real.to_string()));
        };
        self.real.rel.pop();
        let Some(parent) = self.levels.last_mut() else {
            self.held_from = 0;
            return Ok(());
        };
        if parent.dir.is_some() {
            return Ok(());
        }
        let moved = || {
            Error::new(
                ErrorKind::Io,
                "a directory on the path moved while the path was resolved",
            )
        };
        let from = child.dir.ok_or_else(moved)?;
        counted();
        let up = open_parent(&from).map_err(|e| Error::from_io(&e, ""))?;
        let id = up.file_id().map_err(|e| Error::from_io(&e, ""))?;
        if Some(id) != parent.id {
            return Err(moved().with_path(self.real.to_string()));
        }
        parent.dir = Some(up);
        self.held_from = self.levels.len() - 1;
        Ok(())
    }

    /// Back to the root itself (an absolute symlink inside the root).
    fn reset(&mut self) {
        self.levels.clear();
        self.held_from = 0;
        self.real.rel = RelPath::root();
    }

    /// The current directory's handle, owned, for a result.
    fn take_here(&mut self) -> Result<Dir> {
        match self.levels.pop() {
            None => self
                .root
                .dir
                .try_clone()
                .map_err(|e| Error::from_io(&e, &self.real.to_string())),
            Some(Level { dir: Some(d), .. }) => Ok(d),
            Some(_) => Err(Error::new(ErrorKind::Internal, "resolver lost its place")),
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Look-ups made by walks on this thread, for the test that the walk is linear.
    static LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one look-up (a system call on a name) in tests; nothing otherwise.
#[inline]
fn counted() {
    #[cfg(test)]
    LOOKUPS.with(|c| c.set(c.get() + 1));
}

/// How one resolution goes: what it may see, what it does at the end, and its deadline.
pub(super) struct Plan<'g> {
    pub(super) gate: &'g Gate,
    pub(super) follow: FollowFinal,
    pub(super) parents: Parents,
    pub(super) deadline: Option<Deadline>,
}

/// A walk that failed: why, and where it got to.
pub(super) struct Stopped {
    /// Why it failed.
    pub(super) error: Error,
    /// Where it got to.
    pub(super) reached: Reached,
}

/// Where a failed walk got to.
pub(super) struct Reached {
    /// The real path reached, the name the walk failed on, and the plain components after it.
    pub(super) path: MountPath,
    /// False when a `..` was still to come: the place the path would name is unknown.
    pub(super) exact: bool,
}

/// Walks `rel` beneath `root`. On failure it also returns where the walk was: the real path it
/// had reached (the name it failed on included), followed by the plain components it had not
/// resolved yet, up to the first `..` (what a `..` would mean there is unknown). The failure
/// is boxed: the error and the place together would make every result of a walk too large to
/// move cheaply.
pub(super) fn walk(
    root: &Root,
    rel: &RelPath,
    plan: &Plan<'_>,
) -> std::result::Result<Granted, Box<Stopped>> {
    let mut pending: VecDeque<String> = rel.components().iter().cloned().collect();
    let mut w = Walk::new(root);
    steps(&mut w, &mut pending, plan).map_err(|error| {
        Box::new(Stopped {
            error,
            reached: reached(&w, &pending),
        })
    })
}

/// Where a walk that failed got to: its real path, then the plain components still pending,
/// up to the first `..`.
fn reached(w: &Walk<'_>, pending: &VecDeque<String>) -> Reached {
    let mut path = w.real.clone();
    let mut exact = true;
    for p in pending.iter() {
        match p.as_str() {
            "" | "." => {}
            ".." => {
                exact = false;
                break;
            }
            _ => path.rel.push(p),
        }
    }
    Reached { path, exact }
}

/// What bounds one walk's work, kept from step to step.
#[derive(Default)]
struct Effort {
    /// Symlinks expanded so far.
    hops: usize,
    /// Directories created that were gone again when the walk looked.
    churn: usize,
    /// Whether the entry looked at now is one the walk has just created.
    just_created: bool,
}

/// A symlink's target: whether it starts at the file system's root, and its components.
struct LinkTarget {
    absolute: bool,
    parts: Vec<String>,
}

/// Takes the components of `pending` one by one until the path ends or a step ends the walk.
fn steps(w: &mut Walk<'_>, pending: &mut VecDeque<String>, plan: &Plan<'_>) -> Result<Granted> {
    let mut effort = Effort::default();
    while let Some(name) = pending.pop_front() {
        if let Some(d) = plan.deadline {
            d.check()?;
        }
        if name.is_empty() || name == "." {
            continue;
        }
        if name == ".." {
            w.ascend()?;
            continue;
        }
        if let ControlFlow::Break(granted) = step(w, pending, plan, &mut effort, name)? {
            return Ok(granted);
        }
    }
    finish(w, plan, None, None)
}

/// One named component: entered (a directory), expanded (a symlink), created (missing, where
/// asked and allowed) or the end of the walk (the final one).
fn step(
    w: &mut Walk<'_>,
    pending: &mut VecDeque<String>,
    plan: &Plan<'_>,
    effort: &mut Effort,
    name: String,
) -> Result<ControlFlow<Granted>> {
    // From here on the walk's path names this entry; it is taken off again only when the
    // entry turns out to be a link. One path is kept up to date, never copied per step.
    w.real.rel.push(&name);
    let is_last = pending.is_empty();
    if is_last && plan.follow == FollowFinal::No {
        return finish(w, plan, Some(name), None).map(ControlFlow::Break);
    }
    // Asked before the name is looked up at all: a place without a grant is not probed.
    plan.gate.may_look(&w.real)?;
    let here = w.here()?;
    // A middle component is nearly always a plain directory: opening it without following
    // links, and as a directory, proves that in one call. Anything else (a symlink, a
    // file, a missing entry) fails here and takes the full path below.
    counted();
    if !is_last && let Ok(next) = here.open_dir_nofollow(&name) {
        w.descend(next)?;
        effort.just_created = false;
        return Ok(ControlFlow::Continue(()));
    }
    counted();
    let meta = match here.symlink_metadata(&name) {
        Ok(m) => m,
        Err(e) if is_last && e.kind() == std::io::ErrorKind::NotFound => {
            return finish(w, plan, Some(name), None).map(ControlFlow::Break);
        }
        Err(e) if plan.parents == Parents::Create && e.kind() == std::io::ErrorKind::NotFound => {
            create_missing(here, &name, &w.real, plan.gate, effort)?;
            // Look again: whatever is there now is walked like any other entry.
            w.real.rel.pop();
            pending.push_front(name);
            return Ok(ControlFlow::Continue(()));
        }
        Err(e) => return Err(w.io(&e, &w.real)),
    };
    effort.just_created = false;
    if meta.file_type().is_symlink() {
        let target = read_link(here, &name, &w.real, effort)?;
        // The link is not a place the walk stays in: its target continues from its
        // directory.
        w.real.rel.pop();
        redirect(w, pending, target)?;
        return Ok(ControlFlow::Continue(()));
    }
    if is_last {
        return finish(w, plan, Some(name), Some(meta)).map(ControlFlow::Break);
    }
    if !meta.is_dir() {
        return Err(
            Error::new(ErrorKind::NotADirectory, "not a directory").with_path(w.real.to_string())
        );
    }
    counted();
    let next = here
        .open_dir_nofollow(&name)
        .map_err(|e| w.io(&e, &w.real))?;
    w.descend(next)?;
    Ok(ControlFlow::Continue(()))
}

/// The end of the walk: what the gate grants of the current directory and of `name` in it
/// (`meta` when it was looked up).
fn finish(
    w: &mut Walk<'_>,
    plan: &Plan<'_>,
    name: Option<String>,
    meta: Option<Metadata>,
) -> Result<Granted> {
    let at = w.real.clone();
    let dir = w.take_here()?;
    plan.gate.grant(dir, name, meta, at)
}

/// Creates the missing directory `name` in `here`, whose real path is `real`.
fn create_missing(
    here: &Dir,
    name: &str,
    real: &MountPath,
    gate: &Gate,
    effort: &mut Effort,
) -> Result<()> {
    // Created only where a write grant covers the real place, checked first.
    gate.may_create(real)?;
    if effort.just_created {
        effort.churn += 1;
        if effort.churn > MAX_CHURN {
            return Err(Error::new(
                ErrorKind::Io,
                "the path keeps changing while its directories are created",
            )
            .with_path(real.to_string()));
        }
    }
    match here.create_dir(name) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::from_io(&e, &real.to_string())),
    }
    effort.just_created = true;
    Ok(())
}

/// Reads the symlink `name` in `here`, whose real path is `real`: one more hop of the walk.
fn read_link(here: &Dir, name: &str, real: &MountPath, effort: &mut Effort) -> Result<LinkTarget> {
    effort.hops += 1;
    if effort.hops > MAX_SYMLINK_HOPS {
        return Err(
            Error::new(ErrorKind::Io, "too many levels of symbolic links")
                .with_reason(Reason::SymlinkLoop)
                .with_path(real.to_string()),
        );
    }
    counted();
    let target = here
        .read_link_contents(name)
        .map_err(|e| Error::from_io(&e, &real.to_string()))?;
    let (absolute, parts) = split_target(&target).ok_or_else(|| {
        Error::new(ErrorKind::Io, "symlink target is not valid utf-8").with_reason(Reason::NotUtf8)
    })?;
    Ok(LinkTarget { absolute, parts })
}

/// Puts a link's target in front of what remains of the path. An absolute target must name a
/// place beneath the root; the walk then starts again at the root.
fn redirect(w: &mut Walk<'_>, pending: &mut VecDeque<String>, target: LinkTarget) -> Result<()> {
    if target.absolute {
        let inside = w
            .root
            .strip(&target.parts)
            .ok_or_else(|| Error::denied(Reason::OutsideRoot).with_path(w.real.to_string()))?;
        w.reset();
        for p in inside.iter().rev() {
            pending.push_front(p.clone());
        }
    } else {
        for p in target.parts.into_iter().rev() {
            pending.push_front(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
