//! How the flags of `serve` and `proxy` build a policy: the same [`Policy`] a file would,
//! `--root` adding roots to the embedded default (or the `--policy` file) and `--consent`
//! setting the consent mode.

use super::CommonArgs;
use crate::path::MountName;
use crate::policy::{Policy, PolicyError, RootEntry};
use std::path::PathBuf;

/// Splits `[MOUNT=]PATH`: the part before the first `=` is a mount only when it is a valid
/// mount name, so paths containing `=` still work (write `./a=b`).
pub fn split_root_arg(arg: &str) -> (Option<String>, PathBuf) {
    if let Some((m, p)) = arg.split_once('=')
        && MountName::new(m).is_ok()
        && !p.is_empty()
    {
        return (Some(m.to_owned()), PathBuf::from(p));
    }
    (None, PathBuf::from(arg))
}

impl CommonArgs {
    /// The shared options given, by their flags.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        let c = self;
        [
            (c.policy.is_some(), "--policy"),
            (!c.roots.is_empty(), "--root"),
            (c.writable, "--writable"),
            (c.consent.is_some(), "--consent"),
            (c.consent_fallback.is_some(), "--consent-fallback"),
            (c.server_id.is_some(), "--server-id"),
            (c.audit_file.is_some(), "--audit-file"),
            (c.no_audit, "--no-audit"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect()
    }

    /// The policy these options describe. With neither `--policy` nor `--root`, and when
    /// `cwd_default` is set, the current directory is offered read-only.
    pub fn build_policy(&self, cwd_default: bool) -> Result<Policy, PolicyError> {
        self.build_policy_with(cwd_default, true)
    }

    /// As [`CommonArgs::build_policy`], for a reload (see [`Policy::load_for_reload`]).
    pub(crate) fn build_policy_for_reload(&self, cwd_default: bool) -> Result<Policy, PolicyError> {
        self.build_policy_with(cwd_default, false)
    }

    /// `roots_exist`: whether a missing root directory is an error (at start) or is left out
    /// by the broker (at a reload).
    fn build_policy_with(
        &self,
        cwd_default: bool,
        roots_exist: bool,
    ) -> Result<Policy, PolicyError> {
        let mut policy = match &self.policy {
            Some(p) if roots_exist => Policy::load(p)?,
            Some(p) => Policy::load_for_reload(p)?,
            None => Policy::from_default_file()?,
        };
        let mut roots = self.roots.clone();
        if roots.is_empty() && self.policy.is_none() && cwd_default {
            roots.push(".".to_owned());
        }
        for arg in &roots {
            let (mount, path) = split_root_arg(arg);
            let entry = match mount {
                Some(m) => RootEntry::new(m, path),
                None => RootEntry::unnamed(path),
            };
            let entry = if self.writable {
                entry.writable()
            } else {
                entry
            };
            if entry.mount.is_none() {
                check_unnamed_root(arg, &entry)?;
            }
            policy.roots.push(entry);
        }
        if let Some(mode) = &self.consent {
            policy.consent.mode = Some(mode.clone());
        }
        if let Some(mode) = &self.consent_fallback {
            policy.consent.fallback = Some(mode.clone());
        }
        if let Some(file) = &self.audit_file {
            policy.audit.enabled = true;
            policy.audit.file = Some(file.clone());
        }
        if self.no_audit {
            policy.audit.enabled = false;
        }
        policy.validate_with("<command line>", roots_exist)?;
        Ok(policy)
    }
}

/// Errors in a `--root` argument without a valid mount, reported in the command line's own
/// terms before the combined policy is checked: a `NAME=PATH` whose NAME breaks the mount rule
/// (rather than "no such file" for the whole string read as a path), and a path with no final
/// component to name a mount after (`/`).
fn check_unnamed_root(arg: &str, entry: &RootEntry) -> Result<(), PolicyError> {
    let usage = |message: String| PolicyError {
        file: "<command line>".into(),
        line: None,
        key: "--root".into(),
        message,
    };
    // A NAME with no `/` before the first `=`, when the whole argument is no existing path,
    // was meant as a mount.
    if let Some((m, p)) = arg.split_once('=')
        && !m.is_empty()
        && !m.contains('/')
        && !p.is_empty()
        && !std::path::Path::new(arg).exists()
        && let Err(rule) = MountName::new(m)
    {
        return Err(usage(format!(
            "{arg:?}: {rule} (such as --root {}={p})",
            MountName::from_dir_name(m)
        )));
    }
    Policy::mount_of(entry).map(drop).map_err(|e| {
        usage(format!(
            "{e}; name the mount: --root NAME={}",
            entry.path.display()
        ))
    })
}
