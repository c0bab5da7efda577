//! The configuration in force: the policy, its opened roots, the rate limiter and the consent
//! provider. A reload builds a new [`Config`] and swaps it in whole; each request works on the
//! snapshot it started with.

use crate::consent::{ConsentProvider, ConsentSource};
use crate::limits::RateLimits;
use crate::policy::ConsentMode;
use crate::policy::{Overrides, Policy, PolicyError};
use crate::root::{self, Root, RootSpec, Roots};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One consistent configuration.
pub(crate) struct Config {
    /// The policy, with the host's settings in code over its values.
    pub policy: Policy,
    /// The policy as it was given, before the host's settings: what an edit of the
    /// settings is laid over anew.
    pub base: Policy,
    /// The host's settings in code, laid over every policy a reload brings as well.
    pub overrides: Overrides,
    /// Its roots, opened.
    pub roots: Roots,
    /// The rate limiter (kept across reloads that leave the limits alone).
    pub rate: Arc<RateLimits>,
    /// Who decides consent requests no rule decides.
    pub consent: Arc<dyn ConsentProvider>,
    /// Every writable root's directory this process has put in force, this policy's and every
    /// earlier one's: a server wrote there, and what it made stays its own after the root is
    /// narrowed, renamed or removed, so no later reload follows a link beneath one.
    zones: Vec<root::Zone>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Opens `policy`'s roots, with `overrides` over its values, and makes its consent
    /// provider from `consent`; `previous` lends its rate limiter when the limits did not
    /// change.
    pub(crate) fn open(
        policy: Policy,
        consent: &ConsentSource,
        overrides: &Overrides,
        previous: Option<&Config>,
    ) -> Result<Config, PolicyError> {
        // The host's values win over every policy's, and the limits are checked together
        // once they are in: a reloaded policy's may not fit with the host's.
        let base = policy.clone();
        let policy = overrides.apply(policy)?;
        policy
            .validate_limits("<policy>")
            .map_err(|e| overrides.blame(e))?;
        let earlier = previous.map_or(&[][..], |p| p.zones.as_slice());
        let Settled {
            policy,
            list,
            zones,
        } = settle(policy, earlier, previous.is_some())?;
        for (i, root) in list.iter().enumerate() {
            let dir = root.host_path_of(&crate::path::RelPath::root());
            if let Some(kept) = overrides.holds_kept_out(&dir) {
                return Err(PolicyError {
                    file: "<policy>".into(),
                    line: None,
                    key: format!("roots[{i}]"),
                    message: format!(
                        "the root {} ({}) holds the daemon's socket directory {}: servers could \
                         read its key; choose a narrower root, or another --socket",
                        root.mount(),
                        dir.display(),
                        kept.display()
                    ),
                });
            }
            if let Some(store) = overrides.meets_store(&dir) {
                return Err(PolicyError {
                    file: "<policy>".into(),
                    line: None,
                    key: format!("roots[{i}]"),
                    message: format!(
                        "the root {} ({}) holds or lies within the recovery store {}: servers \
                         could read or replace what is kept for the user; choose another root, \
                         or move the store with recovery.dir",
                        root.mount(),
                        dir.display(),
                        store.display()
                    ),
                });
            }
        }
        // Files beside the policy that decide what servers may do, judged as the policy file
        // is (every writable root this process has put in force, links followed).
        for file in overrides.steering() {
            root::outside_zones(file, &zones).map_err(|message| PolicyError {
                file: "<policy>".into(),
                line: None,
                key: "roots".into(),
                message,
            })?;
        }
        let rate = match previous {
            Some(p) if p.policy.limits == policy.limits => p.rate.clone(),
            _ => Arc::new(RateLimits::new(&policy.limits)),
        };
        let consent = consent.provider(&policy.consent);
        Ok(Config {
            roots: Roots::new(list),
            policy,
            base,
            overrides: overrides.clone(),
            rate,
            consent,
            zones,
        })
    }
}

/// Checks `policy` against the disk as a start would, putting nothing in force: its roots are
/// opened and read, its other paths judged, its consent program found. What `fsbroker
/// check-policy` adds to loading the file, so that it refuses what `serve` would.
#[cfg(feature = "cli")]
pub(crate) fn check(policy: Policy) -> Result<(), PolicyError> {
    settle(policy, &[], false).map(drop)
}

/// A policy settled against the disk: its roots opened, its consent programs found.
struct Settled {
    policy: Policy,
    list: Vec<Arc<Root>>,
    zones: Vec<root::Zone>,
}

/// Opens `policy`'s roots, judges its other paths against the writable roots (its own and
/// `earlier`, those of every policy in force before) and finds its consent programs. With
/// `lenient` (a reload), a root that cannot be opened is left out rather than refusing it.
fn settle(policy: Policy, earlier: &[root::Zone], lenient: bool) -> Result<Settled, PolicyError> {
    let specs = specs_of(&policy)?;
    let (zones, left_out) = zones_of(&specs, &policy, earlier, lenient)?;
    let list = open_roots(specs, &policy, &zones, &left_out, lenient)?;
    narrower_nested(&list).map_err(|(i, m)| err(format!("roots[{i}]"), m))?;
    let policy = other_paths(policy, &zones)?;
    Ok(Settled {
        policy,
        list,
        zones,
    })
}

/// The refusal of a settled policy, naming the key at fault.
fn err(key: String, message: String) -> PolicyError {
    PolicyError {
        file: "<policy>".into(),
        line: None,
        key,
        message,
    }
}

/// What `policy`'s roots are, their mount names decided.
fn specs_of(policy: &Policy) -> Result<Vec<RootSpec>, PolicyError> {
    let mut specs = Vec::new();
    for (i, r) in policy.roots.iter().enumerate() {
        let mount = Policy::mount_of(r).map_err(|m| err(format!("roots[{i}].mount"), m))?;
        if let Some(dir) = Policy::mount_derived_from(r) {
            // Servers must use the derived name in paths: say which it is.
            tracing::info!(%mount, directory = %dir, "mount name derived from the directory name");
        }
        specs.push(RootSpec {
            path: r.path.clone(),
            name: r.name.clone().unwrap_or_else(|| mount.to_string()),
            mount,
            access: r.access,
            servers: r.servers.clone(),
        });
    }
    Ok(specs)
}

/// Where the server may have shaped names: the new policy's writable roots (`specs`), and
/// the ones in force until now (`earlier`: a reload must not follow what the server made
/// there). At start a root that cannot be opened refuses the policy. At a reload it is left
/// out, and so is every root beneath a writable one left out, so that a server which moved a
/// root's directory away cannot hold the user's narrowing reload back: the second answer is
/// the places of those left out.
fn zones_of(
    specs: &[RootSpec],
    policy: &Policy,
    earlier: &[root::Zone],
    lenient: bool,
) -> Result<(Vec<root::Zone>, Vec<PathBuf>), PolicyError> {
    let mut zones = Vec::new();
    let mut left_out: Vec<PathBuf> = Vec::new();
    for (i, (spec, entry)) in specs.iter().zip(&policy.roots).enumerate() {
        if spec.access != crate::access::Access::Write {
            continue;
        }
        match root::zone(spec) {
            Ok(z) => zones.push(z),
            Err(e) if lenient => {
                tracing::warn!(mount = %spec.mount, error = %e, "reload: writable root cannot be found; it and every root beneath it are left out until a reload finds it");
                left_out.push(root::absolute(&spec.path).unwrap_or(spec.path.clone()));
            }
            Err(e) => {
                return Err(err(format!("roots[{i}].path"), entry.cannot_open(&e)));
            }
        }
    }
    for z in earlier {
        // A root that came back (its path found again, as the same mount) is pinned anew:
        // the earlier pin is the deleted directory's, whose inode another directory may have
        // taken (the configuration directory, say), which it would then be taken for.
        let back = zones.iter().any(|n| n.mount == z.mount && n.path == z.path);
        if !back && !zones.iter().any(|n| n.id == z.id) {
            zones.push(z.clone());
        }
    }
    Ok((zones, left_out))
}

/// Opens the roots `specs` (those of `policy`) against `zones`, but none beneath a writable
/// root `left_out`; with `lenient`, one that cannot be opened is left out too.
fn open_roots(
    specs: Vec<RootSpec>,
    policy: &Policy,
    zones: &[root::Zone],
    left_out: &[PathBuf],
    lenient: bool,
) -> Result<Vec<Arc<Root>>, PolicyError> {
    let mut list: Vec<Arc<Root>> = Vec::new();
    for (i, (spec, entry)) in specs.into_iter().zip(&policy.roots).enumerate() {
        let beneath_lost =
            root::absolute(&spec.path).is_ok_and(|p| left_out.iter().any(|l| p.starts_with(l)));
        if beneath_lost {
            continue;
        }
        let mount = spec.mount.clone();
        let root = match Root::open(spec, zones) {
            Ok(r) => r,
            Err(e) if lenient => {
                tracing::warn!(%mount, error = %entry.cannot_open(&e), "reload: root cannot be opened; left out until a reload opens it");
                continue;
            }
            Err(e) => {
                return Err(err(format!("roots[{i}].path"), entry.cannot_open(&e)));
            }
        };
        if list.iter().any(|x| x.mount() == root.mount()) {
            return Err(err(
                format!("roots[{i}].mount"),
                format!("mount name {} is used by another root", root.mount()),
            ));
        }
        list.push(Arc::new(root));
    }
    Ok(list)
}

/// Judges the policy's other paths against `zones`: a file the server could replace is
/// refused, and a consent program is found now (see [`consent_program`]).
fn other_paths(mut policy: Policy, zones: &[root::Zone]) -> Result<Policy, PolicyError> {
    if let Some(file) = &policy.source {
        root::outside_zones(file, zones).map_err(|m| err("policy".into(), m))?;
    }
    if let Some(file) = &policy.audit.file {
        root::outside_zones(file, zones).map_err(|m| err("audit.file".into(), m))?;
    }
    for (key, mode) in [
        ("consent.mode", &mut policy.consent.mode),
        ("consent.fallback", &mut policy.consent.fallback),
    ] {
        if let Some(ConsentMode::Command(program)) = mode {
            *program = consent_program(program, zones).map_err(|m| err(key.into(), m))?;
        }
    }
    Ok(policy)
}

/// The consent program to run: a bare name found on `PATH` now, once, so that what is run is
/// what was judged (a directory on `PATH` inside a writable root could otherwise receive a
/// program of the server's under that name later), and refused beneath a writable root.
fn consent_program(program: &Path, zones: &[root::Zone]) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("{}: {e}", program.display()))?;
    let found = root::find_program(program, &cwd).ok_or_else(|| {
        format!(
            "consent program {} is not on PATH; name it by its full path",
            program.display()
        )
    })?;
    // The real path, absolute: the program found now is the one every consent runs, however
    // `PATH` or the working directory's name resolve later.
    let real = root::outside_zones(&found, zones)?;
    // Found now, not at the first consent: a program that is not there denies every request.
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(&real) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(real),
        Ok(_) => Err(format!(
            "consent program {} is not an executable file",
            program.display()
        )),
        Err(e) => {
            let text = program.to_string_lossy();
            let first = text.split_whitespace().next().unwrap_or_default();
            if first != text && root::find_program(Path::new(first), &cwd).is_some() {
                return Err(format!(
                    "consent program {text:?} names a program with arguments, which `command:` \
                     does not take (no shell runs it): put the command in a script and name the \
                     script"
                ));
            }
            Err(format!("consent program {}: {e}", program.display()))
        }
    }
}

/// A root nested in another is a second name for part of it: a server that sees the outer
/// root reaches the inner one's files through the outer name with the outer root's access.
/// So an inner root narrower than the one it lies in (less access, or seen by fewer servers)
/// would promise what does not hold, and is refused, naming both, with the index of the inner.
fn narrower_nested(list: &[Arc<Root>]) -> Result<(), (usize, String)> {
    for (i, inner) in list.iter().enumerate() {
        // The same directory named twice counts as nested both ways.
        let others = list.iter().enumerate().filter(|(j, _)| *j != i);
        for (_, outer) in others.filter(|(_, o)| inner.nested_in(o)) {
            let seen_by_all = inner.servers().iter().any(|s| s == "*")
                || outer
                    .servers()
                    .iter()
                    .all(|s| s != "*" && inner.servers().contains(s));
            let why = if inner.access() < outer.access() {
                format!(
                    "is {} but lies inside the {} root `{}`",
                    inner.access().as_str(),
                    outer.access().as_str(),
                    outer.mount()
                )
            } else if !seen_by_all {
                format!(
                    "is seen by fewer servers than the root `{}` it lies inside",
                    outer.mount()
                )
            } else {
                continue;
            };
            return Err((
                i,
                format!(
                    "the root `{}` {why}: every server that sees `{}` reaches it as `{}/...` with that root's access, so it would not hold; nest only roots that allow as much as the root they lie in and are seen by every server that sees it, or do not nest",
                    inner.mount(),
                    outer.mount(),
                    outer.mount()
                ),
            ));
        }
    }
    Ok(())
}
