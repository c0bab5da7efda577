//! Roots: the only ambient authority in the crate.
//!
//! A [`Root`] holds an open cap-std [`Dir`] for an approved directory. Every request path
//! reaches the filesystem through [`Root::resolve`], which walks the path one component at a
//! time through directory handles opened with `O_NOFOLLOW`, expanding symlinks itself. That
//! way the kernel never follows a link on our behalf, a `..` or a link that climbs above the
//! root is refused before any further I/O, and a directory swapped for a symlink in the middle
//! of an operation makes the next `openat` fail instead of leading outside.

use crate::error::{Error, ErrorKind, Reason, Result};
use crate::limits::Deadline;
use crate::path::{MountName, MountPath, RelPath, RequestPath};
use cap_fs_ext::DirExt;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Most symlinks expanded while resolving one path, as Linux's `MAXSYMLINKS`.
pub const MAX_SYMLINK_HOPS: usize = 40;

/// What a root or a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Reading, listing, stat and watching.
    Read,
    /// Everything `Read` allows, plus changes.
    Write,
}

impl Access {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// An approved directory, opened once.
#[derive(Debug)]
pub struct Root {
    mount: MountName,
    name: String,
    access: Access,
    servers: Vec<String>,
    canonical: Vec<String>,
    configured: Vec<String>,
    dir: Dir,
}

/// How to open a root: the parts of a policy's `[[roots]]` entry.
#[derive(Debug, Clone)]
pub struct RootSpec {
    /// The host directory.
    pub path: PathBuf,
    /// The mount name.
    pub mount: MountName,
    /// The display name for `roots/list`.
    pub name: String,
    /// What the root allows at most.
    pub access: Access,
    /// Server ids that see this root; `*` means every server.
    pub servers: Vec<String>,
}

impl Root {
    /// Opens the directory of `spec`. This is the one use of ambient authority: afterwards the
    /// root is reached only through its handle.
    pub fn open(spec: RootSpec) -> std::io::Result<Root> {
        let absolute = if spec.path.is_absolute() {
            spec.path.clone()
        } else {
            std::env::current_dir()?.join(&spec.path)
        };
        let canonical_path = std::fs::canonicalize(&absolute)?;
        let dir = Dir::open_ambient_dir(&canonical_path, ambient_authority())?;
        let to_components = |p: &Path| -> std::io::Result<Vec<String>> {
            let cleaned = path_clean::clean(p);
            cleaned
                .components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_str().map(str::to_owned).ok_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidInput,
                            "root path is not valid utf-8",
                        )
                    })),
                    _ => None,
                })
                .collect()
        };
        Ok(Root {
            canonical: to_components(&canonical_path)?,
            // A configured path with `..` may not mean, lexically cleaned, what it meant to the
            // kernel (`/a/link/..`): then only the canonical path counts.
            configured: if absolute.components().any(|c| c == Component::ParentDir) {
                to_components(&canonical_path)?
            } else {
                to_components(&absolute)?
            },
            mount: spec.mount,
            name: spec.name,
            access: spec.access,
            servers: spec.servers,
            dir,
        })
    }

    /// The mount name.
    pub fn mount(&self) -> &MountName {
        &self.mount
    }

    /// The display name.
    pub fn display_name(&self) -> &str {
        &self.name
    }

    /// The most this root allows.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether the server `server_id` sees this root.
    pub fn visible_to(&self, server_id: &str) -> bool {
        crate::policy::matches_server(&self.servers, server_id)
    }

    /// The server ids or `*` patterns that see this root.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The host path of `rel` beneath this root, for the kernel watcher, which can only watch
    /// by path. Callers resolve `rel` through the handle first, so it is a real path.
    pub fn host_path_of(&self, rel: &RelPath) -> PathBuf {
        let mut p = PathBuf::from("/");
        p.extend(&self.canonical);
        p.extend(rel.components());
        p
    }

    /// The root as a `file://` URI, percent-encoded.
    pub fn uri(&self) -> String {
        let mut out = String::from("file://");
        for c in &self.canonical {
            out.push('/');
            for b in c.bytes() {
                if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
                    out.push(b as char);
                } else {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
        }
        if self.canonical.is_empty() {
            out.push('/');
        }
        out
    }

    /// The part of absolute `components` beneath this root, if it lies beneath it (compared
    /// component by component against the canonical and the configured path).
    fn strip<'a>(&self, components: &'a [String]) -> Option<&'a [String]> {
        [&self.canonical, &self.configured]
            .into_iter()
            .find_map(|prefix| {
                (components.len() >= prefix.len() && components[..prefix.len()] == prefix[..])
                    .then(|| &components[prefix.len()..])
            })
    }

    /// Resolves `rel` beneath this root through directory handles.
    ///
    /// Symlinks in the middle of the path are expanded while they stay beneath the root; the
    /// final component is expanded only when `follow_final` is set. The result names the
    /// final entry by its parent's handle and name, which need not exist.
    ///
    /// Errors: `PERMISSION_DENIED` `outside_root` when a `..` or a symlink leads above the root,
    /// `IO_ERROR` `symlink_loop` after [`MAX_SYMLINK_HOPS`] links, `NOT_A_DIRECTORY` when a
    /// middle component is a file, and the classified I/O error of any step.
    pub fn resolve(&self, rel: &RelPath, follow_final: bool) -> Result<Resolved> {
        self.resolve_traced(rel, follow_final, false, None)
            .map_err(|(e, _)| e)
    }

    /// As [`Root::resolve`] with `follow_final` unset, creating missing directories on the way
    /// (each with `mkdirat` on the parent's handle, then opened without following links).
    pub fn resolve_creating_parents(&self, rel: &RelPath) -> Result<Resolved> {
        self.resolve_traced(rel, false, true, None)
            .map_err(|(e, _)| e)
    }

    /// The resolver itself. On failure it also returns where the walk was: the real path it
    /// had reached, followed by the components it had not resolved yet. Callers check grants
    /// on that path before they report the error, so that a symlink into a place without a
    /// grant cannot reveal what exists there. The deadline is checked at every step.
    // The error travels once per operation; boxing it would only add an allocation.
    #[allow(clippy::result_large_err)]
    pub fn resolve_traced(
        &self,
        rel: &RelPath,
        follow_final: bool,
        create: bool,
        deadline: Option<Deadline>,
    ) -> std::result::Result<Resolved, (Error, MountPath)> {
        let mut pending: VecDeque<String> = rel.components().iter().cloned().collect();
        let mut stack: Vec<String> = Vec::new();
        match self.walk(&mut stack, &mut pending, follow_final, create, deadline) {
            Ok(r) => Ok(r),
            Err(e) => {
                stack.extend(pending);
                let reached = MountPath {
                    mount: self.mount.clone(),
                    rel: RelPath::from_components(stack),
                };
                Err((e, reached))
            }
        }
    }

    fn walk(
        &self,
        stack: &mut Vec<String>,
        pending: &mut VecDeque<String>,
        follow_final: bool,
        create: bool,
        deadline: Option<Deadline>,
    ) -> Result<Resolved> {
        let display = |stack: &[String]| {
            MountPath {
                mount: self.mount.clone(),
                rel: RelPath::from_components(stack.to_vec()),
            }
            .to_string()
        };
        let io_err = |e: std::io::Error, stack: &[String]| Error::from_io(&e, &display(stack));
        // `None` is the root's own handle, borrowed: it is duplicated only if the walk ends
        // in the root itself, since a result owns its directory handle.
        let mut cur: Option<Dir> = None;
        let owned = |cur: Option<Dir>, stack: &[String]| match cur {
            Some(d) => Ok(d),
            None => self.dir.try_clone().map_err(|e| io_err(e, stack)),
        };
        let mut hops = 0usize;
        while let Some(name) = pending.pop_front() {
            if let Some(d) = deadline {
                d.check()?;
            }
            if name.is_empty() || name == "." {
                continue;
            }
            if name == ".." {
                if stack.pop().is_none() {
                    return Err(Error::denied(Reason::OutsideRoot).with_path(display(&[])));
                }
                cur = Some(self.reopen(stack)?);
                continue;
            }
            let here = cur.as_ref().unwrap_or(&self.dir);
            let is_last = pending.is_empty();
            if is_last && !follow_final {
                let dir = owned(cur, stack)?;
                return Ok(self.resolved(dir, Some(name), None, std::mem::take(stack)));
            }
            // A middle component is nearly always a plain directory: opening it without
            // following links, and as a directory, proves that in one call. Anything else (a
            // symlink, a file, a missing entry) fails here and takes the full path below,
            // which decides exactly as before.
            if !is_last && let Ok(next) = here.open_dir_nofollow(&name) {
                stack.push(name);
                cur = Some(next);
                continue;
            }
            let meta = match here.symlink_metadata(&name) {
                Ok(m) => m,
                Err(e) if is_last && e.kind() == std::io::ErrorKind::NotFound => {
                    let dir = owned(cur, stack)?;
                    return Ok(self.resolved(dir, Some(name), None, std::mem::take(stack)));
                }
                Err(e) if create && e.kind() == std::io::ErrorKind::NotFound => {
                    match here.create_dir(&name) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                        Err(e) => {
                            stack.push(name);
                            return Err(io_err(e, stack));
                        }
                    }
                    // Look again: whatever is there now is walked like any other entry.
                    pending.push_front(name);
                    continue;
                }
                Err(e) => {
                    stack.push(name);
                    return Err(io_err(e, stack));
                }
            };
            if meta.file_type().is_symlink() {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    stack.push(name);
                    return Err(
                        Error::new(ErrorKind::Io, "too many levels of symbolic links")
                            .with_reason(Reason::SymlinkLoop)
                            .with_path(display(stack)),
                    );
                }
                let target = match here.read_link_contents(&name) {
                    Ok(t) => t,
                    Err(e) => {
                        stack.push(name);
                        return Err(io_err(e, stack));
                    }
                };
                let (absolute, parts) = split_target(&target).ok_or_else(|| {
                    Error::new(ErrorKind::Io, "symlink target is not valid utf-8")
                        .with_reason(Reason::NotUtf8)
                })?;
                if absolute {
                    let inside = self.strip(&parts).ok_or_else(|| {
                        Error::denied(Reason::OutsideRoot).with_path(display(stack))
                    })?;
                    stack.clear();
                    cur = None;
                    for p in inside.iter().rev() {
                        pending.push_front(p.clone());
                    }
                } else {
                    for p in parts.into_iter().rev() {
                        pending.push_front(p);
                    }
                }
                continue;
            }
            if is_last {
                let dir = owned(cur, stack)?;
                return Ok(self.resolved(dir, Some(name), Some(meta), std::mem::take(stack)));
            }
            if !meta.is_dir() {
                stack.push(name);
                return Err(Error::new(ErrorKind::NotADirectory, "not a directory")
                    .with_path(display(stack)));
            }
            let next = here.open_dir_nofollow(&name);
            stack.push(name);
            cur = match next {
                Ok(d) => Some(d),
                Err(e) => return Err(io_err(e, stack)),
            };
        }
        let dir = owned(cur, stack)?;
        Ok(self.resolved(dir, None, None, std::mem::take(stack)))
    }

    fn resolved(
        &self,
        dir: Dir,
        name: Option<String>,
        meta: Option<Metadata>,
        mut stack: Vec<String>,
    ) -> Resolved {
        if let Some(n) = &name {
            stack.push(n.clone());
        }
        Resolved {
            dir,
            name,
            meta,
            real: MountPath {
                mount: self.mount.clone(),
                rel: RelPath::from_components(stack),
            },
        }
    }

    /// Opens the directory at `stack` again from the root, without following any link.
    fn reopen(&self, stack: &[String]) -> Result<Dir> {
        let mut cur = self.dir.try_clone();
        for name in stack {
            cur = cur.and_then(|d| d.open_dir_nofollow(name));
        }
        cur.map_err(|e| {
            Error::from_io(
                &e,
                &MountPath {
                    mount: self.mount.clone(),
                    rel: RelPath::from_components(stack.to_vec()),
                }
                .to_string(),
            )
        })
    }
}

/// Splits a symlink target into (is absolute, components), keeping `..` for the walk to apply
/// with the real parent. `None` when the target is not UTF-8.
fn split_target(target: &Path) -> Option<(bool, Vec<String>)> {
    let mut parts = Vec::new();
    for c in target.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => parts.push("..".to_owned()),
            Component::Normal(s) => parts.push(s.to_str()?.to_owned()),
        }
    }
    Some((target.has_root(), parts))
}

/// The result of [`Root::resolve`]: the parent directory's handle, the final name in it
/// (`None` when the path is a directory reached as the handle itself, such as the root), and
/// the real mount-form path after symlinks.
#[derive(Debug)]
pub struct Resolved {
    /// The handle of the directory that holds `name`, or of the target itself.
    pub dir: Dir,
    /// The final component, which need not exist.
    pub name: Option<String>,
    /// The final component's own metadata (not following it), when the walk looked at it:
    /// an operation can use it instead of asking again.
    pub meta: Option<Metadata>,
    /// The path after expanding symlinks, for consent checks and messages.
    pub real: MountPath,
}

impl Resolved {
    /// The final name as an `OsStr`, or `.` for the handle itself.
    pub fn name_os(&self) -> &OsStr {
        OsStr::new(self.name.as_deref().unwrap_or("."))
    }
}

/// The roots of a policy, in declaration order.
#[derive(Debug, Default, Clone)]
pub struct Roots {
    list: Vec<Arc<Root>>,
}

impl Roots {
    /// A set of opened roots. Mount names are unique (checked by the policy loader).
    pub fn new(list: Vec<Arc<Root>>) -> Self {
        Roots { list }
    }

    /// Every root.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Root>> {
        self.list.iter()
    }

    /// Matches a parsed request path to a root that `server_id` sees.
    ///
    /// A mount-form path names its root directly; an absolute path belongs to the root whose
    /// directory is its longest component-wise prefix. Anything else is `PERMISSION_DENIED`
    /// `outside_root`.
    pub fn locate(&self, path: &RequestPath, server_id: &str) -> Result<(Arc<Root>, MountPath)> {
        let visible = |r: &&Arc<Root>| r.visible_to(server_id);
        let found = match path {
            RequestPath::Mount { mount, rel } => self
                .list
                .iter()
                .filter(visible)
                .find(|r| r.mount.as_str() == mount)
                .map(|r| (r.clone(), rel.clone())),
            RequestPath::Absolute(components) => self
                .list
                .iter()
                .filter(visible)
                .filter_map(|r| r.strip(components).map(|rest| (r, rest)))
                .min_by_key(|(_, rest)| rest.len())
                .map(|(r, rest)| (r.clone(), RelPath::from_components(rest.to_vec()))),
        };
        let (root, rel) = found.ok_or_else(|| Error::denied(Reason::OutsideRoot))?;
        let mount_path = MountPath {
            mount: root.mount.clone(),
            rel,
        };
        Ok((root, mount_path))
    }
}
