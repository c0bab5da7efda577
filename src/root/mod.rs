//! Roots: the only ambient authority in the crate.
//!
//! A [`Root`] holds an open cap-std [`Dir`] for an approved directory. Every request path
//! reaches the filesystem through [`Root::resolve`], which walks the path one component at a
//! time through directory handles opened with `O_NOFOLLOW`, expanding symlinks itself. That
//! way the kernel never follows a link on our behalf, a `..` or a link that climbs above the
//! root is refused before any further I/O, and a directory swapped for a symlink in the middle
//! of an operation makes the next `openat` fail instead of leading outside.

use crate::access::Access;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::{MountName, MountPath, RelPath, RequestPath};
use cap_std::fs::Dir;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

mod dirs;
mod granted;
mod open;
mod tree;
mod walk;

pub(crate) use granted::{Gate, Granted, Said};
pub(crate) use open::{Zone, absolute, find_program, outside_zones, zone};
pub(crate) use walk::{FollowFinal, Parents};
use walk::{Plan, Stopped};

/// Most symlinks expanded while resolving one path, as Linux's `MAXSYMLINKS`.
pub(crate) const MAX_SYMLINK_HOPS: usize = 40;

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
    /// The directory's device and inode when it was opened.
    id: dirs::FileId,
}

/// How to open a root: the parts of a policy's `[[roots]]` entry.
#[derive(Debug, Clone)]
pub(crate) struct RootSpec {
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
    /// Opens the directory of `spec` (see [`open`]): beneath any of `zones`, the writable
    /// roots, nothing is followed through a link. Afterwards the root is reached only through
    /// its handle.
    pub(crate) fn open(spec: RootSpec, zones: &[Zone]) -> std::io::Result<Root> {
        let absolute = open::absolute(&spec.path)?;
        // Every zone counts, the root's own too (whatever its mount is called now: a reload
        // that narrows `repo` from P to P/sub must not follow a link the server made at
        // P/sub); a walk that ends at a zone's directory has nothing beneath it to follow.
        let found = open::walk(&absolute, zones).map_err(|e| {
            if e.kind() == std::io::ErrorKind::Other {
                std::io::Error::other(format!(
                    "the root `{}` ({}): {e}",
                    spec.mount,
                    spec.path.display()
                ))
            } else {
                e
            }
        })?;
        let mut canonical_path = PathBuf::from("/");
        canonical_path.extend(&found.real);
        let dir = found.open()?;
        // A root must be listable, not only openable (a network or FUSE filesystem may refuse
        // the listing itself): else it is offered, consented, and fails at its first use.
        dir.entries()?.next().transpose()?;
        let id = {
            use dirs::FileIdOf;
            dir.file_id()?
        };
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
            id,
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

    /// Whether this root's directory lies beneath `outer`'s or is the same (by real path).
    pub(crate) fn nested_in(&self, outer: &Root) -> bool {
        self.canonical.starts_with(&outer.canonical)
    }

    /// Whether the server `server_id` sees this root.
    pub fn visible_to(&self, server_id: &str) -> bool {
        crate::access::matches_server(&self.servers, server_id)
    }

    /// The server ids or `*` patterns that see this root.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The host path of `rel` beneath this root, for the kernel watcher, which can only watch
    /// by path. Callers resolve `rel` through the handle first, so it is a real path.
    pub(crate) fn host_path_of(&self, rel: &RelPath) -> PathBuf {
        let mut p = PathBuf::from("/");
        p.extend(&self.canonical);
        p.extend(rel.components());
        p
    }

    /// Whether the configured path still names the directory this root opened: one `stat`
    /// of the path (following the user's links, as opening it did). A root that moved, was
    /// deleted, or has another directory in its place is not followed there.
    pub(crate) fn in_place(&self) -> bool {
        rustix::fs::stat(self.configured_path()).is_ok_and(|st| (st.st_dev, st.st_ino) == self.id)
    }

    /// The configured path, absolute, for messages.
    fn configured_path(&self) -> PathBuf {
        let mut p = PathBuf::from("/");
        p.extend(&self.configured);
        p
    }

    /// The directory's device and inode, from its handle: what the proxy's sandbox pins a
    /// root's path to, so that the kernel's rule names the directory the broker opened.
    pub(crate) fn pin(&self) -> std::io::Result<(u64, u64)> {
        use dirs::FileIdOf;
        self.dir.file_id()
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
}

impl Root {
    /// Resolves `rel` beneath this root through directory handles, under `gate`.
    ///
    /// Middle symlinks are expanded while they stay beneath the root; the final one when
    /// `follow` says so. Nothing is looked at that the gate does not let the session see,
    /// nothing is created that it does not let the session write, and the handle is made only
    /// after the gate checked the real path.
    ///
    /// Errors: `PERMISSION_DENIED` `outside_root` when a `..` or a symlink leads above the
    /// root, `no_consent`, `read_only` or `revoked` from the gate (on the place the walk
    /// reached when the walk itself fails, so an error never tells what exists where no grant
    /// reaches), `IO_ERROR` `symlink_loop` after [`super::MAX_SYMLINK_HOPS`] links,
    /// `NOT_A_DIRECTORY` when a middle component is a file, and the classified I/O error of
    /// any step.
    pub(crate) fn resolve(
        &self,
        rel: &RelPath,
        gate: &Gate,
        follow: FollowFinal,
        parents: Parents,
        deadline: Option<Deadline>,
    ) -> Result<Granted> {
        let plan = Plan {
            gate,
            follow,
            parents,
            deadline,
        };
        match walk::walk(self, rel, &plan) {
            Ok(g) => Ok(g),
            Err(s) if s.error.kind() == ErrorKind::PermissionDenied => Err(s.error),
            Err(s) => {
                gate.check_final(&s.reached.path)?;
                Err(s.error)
            }
        }
    }

    /// The real path `rel` leads to and whether it is a directory, for a consent request
    /// about it, never giving a handle. The walk looks only where `gate` (see
    /// [`Gate::asking`]) lets it; a link that leads anywhere else stops it with `no_consent`,
    /// whatever is there.
    ///
    /// On failure, the error and, when it is known, the place the path would name (see
    /// [`Unresolved`]), boxed so that the result stays small to move.
    pub(crate) fn real_path(
        &self,
        rel: &RelPath,
        gate: &Gate,
        deadline: Option<Deadline>,
    ) -> std::result::Result<(MountPath, bool), Box<Unresolved>> {
        let plan = Plan {
            gate,
            follow: FollowFinal::Yes,
            parents: Parents::Existing,
            deadline,
        };
        let g = walk::walk(self, rel, &plan).map_err(|s| {
            let Stopped { error, reached } = *s;
            Box::new(Unresolved {
                error,
                place: reached.exact.then_some(reached.path),
            })
        })?;
        let folder = g.metadata().is_ok_and(|m| m.is_dir());
        Ok((g.real().clone(), folder))
    }
}

/// Why [`Root::real_path`] found no real path.
pub(crate) struct Unresolved {
    /// What stopped the walk.
    pub(crate) error: Error,
    /// The place the path would name, when it is known: where the walk got to and the rest of
    /// the path (`None` when a `..` was still to come).
    pub(crate) place: Option<MountPath>,
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

/// Removes `name` in `parent` and everything beneath it, as a recursive delete does, with no
/// deadline: for the user's own recovery store, which no request waits for.
pub(crate) fn remove_tree(parent: &Dir, name: &str) -> Result<()> {
    let year = std::time::Duration::from_secs(365 * 24 * 3600);
    tree::remove_tree(parent, name, Deadline::at(std::time::Instant::now() + year))
}

/// The roots of a policy, in declaration order.
#[derive(Debug, Default, Clone)]
pub struct Roots {
    list: Vec<Arc<Root>>,
}

impl Roots {
    /// A set of opened roots. Mount names are unique (checked by the policy loader).
    pub(crate) fn new(list: Vec<Arc<Root>>) -> Self {
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
    pub(crate) fn locate(
        &self,
        path: &RequestPath,
        server_id: &str,
    ) -> Result<(Arc<Root>, MountPath)> {
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
