//! What a sandboxed server may reach on disk, computed in the proxy and carried to the helper
//! as JSON. A profile is a list of paths, each with the rights beneath it; everything else is
//! out of reach.

use super::launcher::{self, Guard};
use super::right::Right;
use super::{SandboxError, SandboxMode, SandboxNet, SandboxOptions, SandboxRoot};
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
    pub path: PathBuf,
    /// The rights beneath it.
    pub right: Right,
    /// Why it is in the profile, for the log.
    pub why: String,
    /// The directory's (device, inode) as the broker opened it: the helper refuses to start
    /// the server if the path names anything else by then.
    pub pin: Option<(u64, u64)>,
    /// Whether a missing path stops the server from starting (roots, the temporary directory,
    /// what the user asked for), or is skipped (system directories absent on this system).
    pub required: bool,
}

/// The whole profile.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Profile {
    pub(super) rules: Vec<Rule>,
    /// Environment the server starts with (private launcher caches), beside `TMPDIR`.
    pub(super) env: Vec<(String, String)>,
    pub(super) net: SandboxNet,
    pub(super) mode: SandboxMode,
    tmp: PathBuf,
}

impl Profile {
    /// The profile of `command` with `roots`, the options' additions, and `tmp` as the
    /// private temporary directory.
    pub(super) fn build(
        command: &[String],
        roots: &[SandboxRoot],
        options: &SandboxOptions,
        tmp: &Path,
    ) -> Result<Profile, SandboxError> {
        let mut rules = Vec::new();
        let mut add = |path: &Path, right: Right, why: &str, required: bool| {
            rules.push(Rule {
                path: path.to_path_buf(),
                right,
                why: why.to_owned(),
                pin: None,
                required,
            });
        };
        for d in SYSTEM {
            add(Path::new(d), Right::Exec, "system", false);
        }
        for d in KERNEL {
            add(Path::new(d), Right::Read, "kernel", false);
        }
        for d in DEVICES {
            add(Path::new(d), Right::Device, "device", false);
        }
        add(tmp, Right::Write, "private temporary directory", true);
        let cwd = std::env::current_dir().map_err(|e| {
            SandboxError::Profile(format!("cannot read the current directory: {e}"))
        })?;
        let allowed: Vec<(PathBuf, bool)> = options
            .allow
            .iter()
            // By real path: a link named in `--sandbox-allow` must count where it leads.
            .map(|a| {
                let p = cwd.join(&a.path);
                (std::fs::canonicalize(&p).unwrap_or(p), a.write)
            })
            .collect();
        for (path, write) in &allowed {
            let right = if *write { Right::Write } else { Right::Exec };
            add(path, right, "--sandbox-allow", true);
        }
        let mut opened: Vec<PathBuf> = roots.iter().map(|r| r.path.clone()).collect();
        opened.push(tmp.to_path_buf());
        opened.extend(allowed.iter().map(|(p, _)| p.clone()));
        let mut writable: Vec<PathBuf> = roots
            .iter()
            .filter(|r| r.write)
            .map(|r| r.path.clone())
            .collect();
        writable.push(tmp.to_path_buf());
        writable.extend(allowed.iter().filter(|(_, w)| *w).map(|(p, _)| p.clone()));
        let guard = Guard::new(
            std::env::var_os("HOME").map(PathBuf::from),
            opened,
            writable,
        );
        let (found, env) = launcher::installation(command, &cwd, tmp, &guard);
        for f in found {
            add(&f.path, f.right, &f.why, false);
        }
        for r in roots {
            rules.push(Rule {
                path: r.path.clone(),
                right: if r.write { Right::Write } else { Right::Read },
                why: format!("root {}", r.mount),
                pin: Some(r.pin),
                required: true,
            });
        }
        // A path found twice with the same right is one rule; the first reason stays.
        let mut seen = std::collections::HashSet::new();
        rules.retain(|r| seen.insert((r.path.clone(), r.right)));
        Ok(Profile {
            rules,
            env,
            net: options.net,
            mode: options.mode,
            tmp: tmp.to_path_buf(),
        })
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
        out
    }
}
