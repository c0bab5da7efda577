//! What a sandboxed server may reach on disk, computed in the proxy and carried to the helper
//! as JSON. A profile is a list of paths, each with the rights beneath it; everything else is
//! out of reach.

use super::launcher::{self, Guard};
use super::private::PrivatePlaces;
use super::program::Program;
use super::right::Right;
use super::trace::{identity, trace};
use super::{RootSource, SandboxError, SandboxMode, SandboxNet, SandboxOptions, SandboxRoot};
use std::path::{Path, PathBuf};

/// The system's runtime directories: programs, libraries and their configuration, read and
/// execute. Those absent on this system are skipped.
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
];

/// Kernel interfaces a runtime reads (`/proc/self`, CPU counts, memory limits). Landlock
/// also stops a sandboxed process from reading another process's memory or environment
/// through `/proc`, as it denies ptrace outside the sandbox.
const KERNEL: &[&str] = &["/proc", "/sys"];

/// The character devices every program may use. Terminals are not among them: a server
/// should not read the user's keystrokes.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// One path and what the server may do beneath it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Rule {
    /// The path (absolute).
    pub(crate) path: PathBuf,
    /// The rights beneath it.
    pub(crate) right: Right,
    /// Why it is in the profile, for the log.
    pub(crate) why: String,
    /// The (device, inode) the path named when the profile was built (for a root, the
    /// directory the broker opened): the helper opens the path without following links and
    /// refuses to start the server if it names anything else by then.
    pub(crate) pin: Option<(u64, u64)>,
    /// Whether a missing path stops the server from starting (roots, the temporary directory,
    /// what the user asked for), or is skipped (system directories absent on this system).
    pub(crate) required: bool,
}

/// The whole profile.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Profile {
    pub(super) rules: Vec<Rule>,
    /// Environment the server starts with (private launcher caches), beside `TMPDIR`.
    pub(super) env: Vec<(String, String)>,
    pub(super) net: SandboxNet,
    pub(super) mode: SandboxMode,
    /// The server's program as the profile saw it; none when it was not found.
    pub(super) program: Option<Program>,
    /// The caps on its resources, set before it starts.
    pub(super) caps: super::Caps,
    tmp: PathBuf,
}

impl Rule {
    /// A rule without a pin (the helper opens it as it finds it, without following links).
    fn unpinned(path: &Path, right: Right, why: &str, required: bool) -> Rule {
        Rule {
            path: path.to_path_buf(),
            right,
            why: why.to_owned(),
            pin: None,
            required,
        }
    }
}

/// What every server runs on: the system's directories (by real path: `/bin` is a link to
/// `/usr/bin` on most systems, and every rule is opened without following links; these are
/// the system's own, which the server cannot write), the kernel's interfaces, the common
/// devices, and `tmp`, its private temporary directory.
fn runtime_rules(tmp: &Path) -> Vec<Rule> {
    let mut rules = Vec::new();
    for d in SYSTEM {
        if let Ok(real) = std::fs::canonicalize(d) {
            rules.push(Rule::unpinned(&real, Right::Exec, "system", false));
        }
    }
    for d in KERNEL {
        rules.push(Rule::unpinned(Path::new(d), Right::Read, "kernel", false));
    }
    for d in DEVICES {
        rules.push(Rule::unpinned(Path::new(d), Right::Device, "device", false));
    }
    rules.push(Rule::unpinned(
        tmp,
        Right::Write,
        "private temporary directory",
        true,
    ));
    rules
}

/// The rules of `roots`, each pinned to the directory the broker opened. Landlock's rules add
/// up: a read-only root inside a place `rules` (or a writable root) lets the server write is
/// writable to the server on disk, whatever the broker allows it through `files/*`; its
/// reason says so, and the log warns.
fn root_rules(roots: &[SandboxRoot], rules: &[Rule]) -> Vec<Rule> {
    let writable_places: Vec<(PathBuf, String)> = rules
        .iter()
        .filter(|w| w.right == Right::Write)
        .map(|w| (w.path.clone(), w.why.clone()))
        .chain(
            roots
                .iter()
                .filter(|w| w.write)
                .map(|w| (w.path.clone(), format!("root {}", w.mount))),
        )
        .collect();
    let mut out = Vec::new();
    for r in roots {
        let inside = (!r.write)
            .then(|| writable_places.iter().find(|(p, _)| r.path.starts_with(p)))
            .flatten();
        let why = match inside {
            Some((path, what)) => {
                tracing::warn!(
                    root = %r.mount,
                    "sandbox: the read-only root lies inside {} ({what}), which the server may write: the kernel lets it write this root too",
                    path.display(),
                );
                format!("root {} (read-only, but inside {what})", r.mount)
            }
            None => format!("root {}", r.mount),
        };
        out.push(Rule {
            path: r.path.clone(),
            right: if r.write { Right::Write } else { Right::Read },
            why,
            pin: Some(r.pin),
            required: true,
        });
    }
    out
}

impl Profile {
    /// The profile of `command` with `roots`, the options' additions, and `tmp` as the
    /// private temporary directory. `policy_roots` are the directories of every root of the
    /// policy: other servers may write them, or this one may have in an earlier start, and
    /// none may be opened through an inferred directory. `source` is the broker the server
    /// talks to: its private places (and every daemon's of this user) are kept closed.
    pub(super) fn build(
        command: &[String],
        roots: &[SandboxRoot],
        policy_roots: &[PathBuf],
        options: &SandboxOptions,
        tmp: &Path,
        source: &RootSource,
    ) -> Result<Profile, SandboxError> {
        let mut rules = runtime_rules(tmp);
        let cwd = std::env::current_dir().map_err(|e| {
            SandboxError::Profile(format!("cannot read the current directory: {e}"))
        })?;
        let homes = super::home::homes().map_err(SandboxError::Profile)?;
        let private = PrivatePlaces::gather(source, &cwd);
        // Every root of the policy, read-only ones too, counts as a place a server may write:
        // another server may write it, and so may this one have, in an earlier start when the
        // root was writable. What a server left there must not steer a later profile.
        let mut writable: Vec<PathBuf> = roots
            .iter()
            .map(|r| r.path.clone())
            .chain(policy_roots.iter().cloned())
            .collect();
        writable.push(tmp.to_path_buf());
        let allowed = allowed_paths(options, &cwd, &writable)?;
        for (path, write) in &allowed {
            let right = if *write { Right::Write } else { Right::Exec };
            rules.push(Rule::unpinned(path, right, "--sandbox-allow", true));
        }
        writable.extend(allowed.iter().filter(|(_, w)| *w).map(|(p, _)| p.clone()));
        let mut opened: Vec<PathBuf> = roots
            .iter()
            .map(|r| r.path.clone())
            .chain(policy_roots.iter().cloned())
            .collect();
        opened.push(tmp.to_path_buf());
        opened.extend(allowed.iter().map(|(p, _)| p.clone()));
        let guard = Guard::new(homes, opened, writable, private.clone(), cwd.clone());
        let (found, env) = launcher::installation(command, &cwd, tmp, &guard);
        for f in found {
            rules.push(Rule::unpinned(&f.path, f.right, &f.why, false));
        }
        let roots = root_rules(roots, &rules);
        rules.extend(roots);
        // The broker's private places (the socket's key, the store and its journal, the
        // grants, the logs): no rule may open one, a place that holds one, or a place within
        // one, whoever asked for the rule. An inferred directory that would has already been
        // narrowed to its file or left out (`Guard`); what is left here was asked for, or is
        // a root, a system directory or a file that itself lies within such a place.
        for r in &rules {
            if let Some(why) = private.refusal(&r.path, &r.why) {
                return Err(SandboxError::Profile(why));
            }
        }
        // A path found twice with the same right is one rule; the first reason stays.
        let mut seen = std::collections::HashSet::new();
        rules.retain(|r| seen.insert((r.path.clone(), r.right)));
        let rules = pin(rules)?;
        let program = match command.first() {
            Some(p) => Program::hold(p, &cwd)?,
            None => None,
        };
        if let Some(p) = &program {
            runnable(p, &rules, &guard)?;
        }
        Ok(Profile {
            rules,
            env,
            net: options.net,
            mode: options.mode,
            program,
            caps: options.caps,
            tmp: tmp.to_path_buf(),
        })
    }

    /// Whether the server may reach `path` (a real path) on disk at all.
    pub(super) fn reaches(&self, path: &Path) -> bool {
        self.rules.iter().any(|r| path.starts_with(&r.path))
    }

    /// The server's program as the profile saw it.
    pub(super) fn program(&self) -> Option<&Program> {
        self.program.as_ref()
    }

    /// The private temporary directory.
    pub(super) fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// The profile in full, one line per rule, for the log.
    pub(super) fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.required || r.path.exists())
            .map(|r| format!("{:<10} {} ({})", r.right.as_str(), r.path.display(), r.why))
            .collect();
        for (k, v) in &self.env {
            out.push(format!("environment {k}={v}"));
        }
        out.push(match self.net {
            SandboxNet::Any => "network untouched".to_owned(),
            SandboxNet::None => "no TCP connect or bind".to_owned(),
        });
        if self.caps.any() {
            out.push(format!("caps {}", self.caps.describe()));
        }
        out
    }
}

/// The paths of `--sandbox-allow`, each by real path with whether it is writable. A path
/// whose route passes through a place the server may write (`writable`, or another writable
/// allowed path) is refused: the server could re-point it before the next start.
fn allowed_paths(
    options: &SandboxOptions,
    cwd: &Path,
    writable: &[PathBuf],
) -> Result<Vec<(PathBuf, bool)>, SandboxError> {
    let mut traced = Vec::new();
    for a in &options.allow {
        let route = trace(&a.path, cwd).map_err(|e| {
            SandboxError::Profile(format!("--sandbox-allow {}: {e}", a.path.display()))
        })?;
        traced.push((a, route));
    }
    let mut out = Vec::new();
    for (i, (a, route)) in traced.iter().enumerate() {
        let mut places = writable.to_vec();
        places.extend(
            traced
                .iter()
                .enumerate()
                .filter(|(j, (o, _))| *j != i && o.write)
                .map(|(_, (_, r))| r.real.clone()),
        );
        if let Some(w) = route.through(&places) {
            return Err(SandboxError::Profile(format!(
                "--sandbox-allow {}: the path leads through {}, which the server may write, so it could point the path anywhere before its next start; allow the place it should lead to, by a path that stays outside what the server may write",
                a.path.display(),
                w.display()
            )));
        }
        out.push((route.real.clone(), a.write));
    }
    Ok(out)
}

/// Records what each rule's path names now, opened without following links; a missing
/// optional path is dropped, a missing required one is an error, and a root must still be
/// the directory the broker opened.
fn pin(rules: Vec<Rule>) -> Result<Vec<Rule>, SandboxError> {
    let mut out = Vec::new();
    for mut rule in rules {
        match identity(&rule.path) {
            Ok(id) => {
                if rule.pin.is_some_and(|p| p != id) {
                    return Err(SandboxError::Profile(format!(
                        "{} ({}) is no longer the directory the broker opened",
                        rule.path.display(),
                        rule.why
                    )));
                }
                rule.pin = Some(id);
                out.push(rule);
            }
            Err(_) if !rule.required => {}
            Err(e) => {
                return Err(SandboxError::Profile(format!(
                    "cannot open {} ({}) without following links: {e}",
                    rule.path.display(),
                    rule.why
                )));
            }
        }
    }
    Ok(out)
}

/// The program must lie beneath a rule that lets it run; otherwise say why instead of letting
/// the kernel refuse the `exec` without a reason.
fn runnable(program: &Program, rules: &[Rule], guard: &Guard) -> Result<(), SandboxError> {
    let covered = rules.iter().any(|r| {
        program.real.starts_with(&r.path) && matches!(r.right, Right::Exec | Right::Write)
    });
    if covered {
        return Ok(());
    }
    // The installation to suggest: the prefix above a `bin`, else the program's directory.
    let dir = program.real.parent().unwrap_or(&program.real);
    let install = match dir.file_name() {
        Some(n) if n == "bin" => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    Err(SandboxError::Profile(
        match guard.writable_on_route(&program.path) {
            Some(w) => format!(
                "the server's program {} leads through {}, which the server may write, to {}: the server could point it anywhere before its next start, so its target is not opened; if you trust that installation, add --sandbox-allow {}",
                program.path.display(),
                w.display(),
                program.real.display(),
                install.display()
            ),
            None => format!(
                "the server's program {} lies in no directory the profile opens; if you trust that installation, add --sandbox-allow {}",
                program.real.display(),
                install.display()
            ),
        },
    ))
}
