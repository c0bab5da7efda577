//! Loading a policy: TOML text to a [`Policy`], with every error naming the file, the line
//! and the key, and the checks that types alone cannot make.

use super::{DEFAULT_POLICY, Policy, RootEntry};
use crate::path::{MountName, RequestPath};
use serde::Deserialize;
use std::fmt;
use std::path::Path;
use toml::Spanned;

/// The final component of root entry `root`'s absolute, lexically cleaned path, as text
/// (bytes that are not UTF-8 become U+FFFD, which the mount derivation replaces anyway).
fn dir_name(root: &RootEntry) -> Result<String, String> {
    let path = &root.path;
    let abs = std::path::absolute(path)
        .map_err(|e| format!("cannot make the root path absolute: {e}"))?;
    let cleaned = path_clean::clean(&abs);
    cleaned
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            let shown = if cleaned == *path {
                path.display().to_string()
            } else {
                format!("{} ({})", path.display(), cleaned.display())
            };
            format!("the root {shown} has no final component to name its mount after")
        })
}

/// A policy that could not be loaded: the file, the line, the key and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file (or `<command line>`, `<default>`).
    pub file: String,
    /// The 1-based line, where known.
    pub line: Option<usize>,
    /// The dotted key, such as `limits.timeout_ms` or `roots[1].mount`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PolicyError {}

impl Policy {
    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        Policy::read(path, true)
    }

    /// As [`Policy::load`], for a reload: a root whose directory is missing is no error here,
    /// since [`Broker::reload`](crate::Broker::reload) leaves out a root it cannot open (and
    /// every root beneath a writable one it cannot find). A server that moved a root's
    /// directory away must not hold back the user's reload, which may take access away.
    pub fn load_for_reload(path: &Path) -> Result<Policy, PolicyError> {
        Policy::read(path, false)
    }

    /// Reads and validates a policy file; `roots_exist` as in [`Policy::parse_checked`].
    fn read(path: &Path, roots_exist: bool) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            file: path.display().to_string(),
            line: None,
            key: String::new(),
            message: format!("cannot read policy: {e}"),
        })?;
        // The directory the file is named in (a link to the file is not followed): what its
        // relative paths are taken against.
        let dir = std::path::absolute(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .ok_or_else(|| PolicyError {
                file: path.display().to_string(),
                line: None,
                key: String::new(),
                message: "cannot tell the policy file's directory, which its relative paths \
                          are taken against"
                    .into(),
            })?;
        let mut policy =
            Policy::parse_checked(&text, &path.display().to_string(), roots_exist, Some(&dir))?;
        policy.source = Some(path.to_path_buf());
        Ok(policy)
    }

    /// The embedded default policy.
    pub fn from_default_file() -> Result<Policy, PolicyError> {
        Policy::parse(DEFAULT_POLICY, "<default>")
    }

    /// Parses and validates policy text; `file` names it in errors.
    /// Relative paths in it are taken against the working directory, as in code; a file's
    /// ([`Policy::load`]) against the file's directory.
    pub fn parse(text: &str, file: &str) -> Result<Policy, PolicyError> {
        Policy::parse_checked(text, file, true, None)
    }

    /// As [`Policy::parse`]; `roots_exist` says whether a missing root directory is an error,
    /// and `dir` is the directory relative paths are taken against, when it is not the
    /// working directory.
    fn parse_checked(
        text: &str,
        file: &str,
        roots_exist: bool,
        dir: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        let line_of = |offset: usize| text.get(..offset).map(|t| t.matches('\n').count() + 1);
        let de = toml::Deserializer::parse(text).map_err(|e| PolicyError {
            file: file.to_owned(),
            line: e.span().and_then(|s| line_of(s.start)),
            key: String::new(),
            message: e.message().to_owned(),
        })?;
        let mut policy: Policy = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            PolicyError {
                file: file.to_owned(),
                line: inner.span().and_then(|s| line_of(s.start)),
                key: if key == "." { String::new() } else { key },
                message: inner.message().to_owned(),
            }
        })?;
        if let Some(dir) = dir {
            policy.rebase(dir);
        }
        policy
            .check(roots_exist)
            .map_err(|Invalid { key, span, message }| PolicyError {
                file: file.to_owned(),
                line: span
                    .or_else(|| key_span(text, &key))
                    .and_then(|s| line_of(s.start)),
                key,
                message,
            })?;
        Ok(policy)
    }

    /// Validates a policy built or changed in memory (in code, or by command-line flags) with
    /// the checks and messages of loading a file; `origin` names it in errors (in place of a
    /// file name). [`Broker::builder`](crate::Broker::builder)'s `build` calls it.
    pub fn validate(&self, origin: &str) -> Result<(), PolicyError> {
        self.validate_with(origin, true)
    }

    /// As [`Policy::validate`]; `roots_exist` says whether a missing root directory is an
    /// error (not for a reload: see [`Policy::load_for_reload`]).
    pub(crate) fn validate_with(&self, origin: &str, roots_exist: bool) -> Result<(), PolicyError> {
        self.check(roots_exist)
            .map_err(|Invalid { key, message, .. }| PolicyError {
                file: origin.to_owned(),
                line: None,
                key,
                message,
            })
    }

    /// As [`Policy::validate`], the `[limits]` section alone: what a reload checks once the
    /// host's settings in code are laid over the new policy's, since they may not fit with
    /// its other limits.
    pub(crate) fn validate_limits(&self, origin: &str) -> Result<(), PolicyError> {
        self.limits
            .validate()
            .map_err(|Invalid { key, message, .. }| PolicyError {
                file: origin.to_owned(),
                line: None,
                key,
                message,
            })
    }

    /// The mount name of root entry `root`: its `mount`, or one derived from the directory's
    /// final component (that name itself when it is a valid mount name; see
    /// `policy/README.md`). The only error for a root without `mount` is a path with no final
    /// component (`/`).
    pub fn mount_of(root: &RootEntry) -> Result<MountName, String> {
        match &root.mount {
            Some(m) => MountName::new(m),
            None => Ok(MountName::from_dir_name(&dir_name(root)?)),
        }
    }

    /// The directory name root entry `root`'s mount was derived from, when it has no `mount`
    /// and that name is not itself a valid mount name: what the log says was changed.
    pub(crate) fn mount_derived_from(root: &RootEntry) -> Option<String> {
        if root.mount.is_some() {
            return None;
        }
        let name = dir_name(root).ok()?;
        MountName::new(&name).is_err().then_some(name)
    }

    /// Checks what types alone cannot: root directories exist, mounts are unique, rule and
    /// grant paths are mount-form paths of declared roots, limits are consistent.
    fn check(&self, roots_exist: bool) -> Result<(), Invalid> {
        let mounts = self.validate_roots(roots_exist)?;
        self.validate_paths(&mounts)?;
        self.limits.validate()?;
        self.validate_servers()?;
        self.validate_audit()
    }

    /// Each `[[servers]]` entry pins something, and a name once; no entry names a session the
    /// broker itself names (`unpinned-NAME`, the session of a program that claimed a pinned
    /// name): what the policy gives the name must not go to the program it was pinned against.
    fn validate_servers(&self) -> Result<(), Invalid> {
        let roots = self.roots.iter().enumerate().flat_map(|(i, r)| {
            r.servers
                .iter()
                .map(move |s| (format!("roots[{}].servers", i + 1), s))
        });
        let grants = self.grants.iter().enumerate().flat_map(|(i, g)| {
            g.servers
                .iter()
                .map(move |s| (format!("grants[{}].servers", i + 1), s))
        });
        let pins = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("servers[{}].name", i + 1), &p.name));
        for (key, name) in roots.chain(grants).chain(pins) {
            if super::unpinned(name) {
                return Err(Invalid::unplaced(
                    &key,
                    format!(
                        "{name:?}: names beginning with {:?} are the broker's, for sessions that \
                         claimed a pinned name with another program; the policy cannot give them \
                         anything",
                        super::UNPINNED
                    ),
                ));
            }
        }
        for (i, pin) in self.servers.iter().enumerate() {
            if let Some(fault) = pin.fault() {
                return Err(Invalid::unplaced(&format!("servers[{}]", i + 1), fault));
            }
            if self.servers[..i].iter().any(|p| p.name == pin.name) {
                return Err(Invalid::unplaced(
                    &format!("servers[{}].name", i + 1),
                    format!("{:?} is pinned twice", pin.name),
                ));
            }
        }
        Ok(())
    }

    /// Each root's mount is valid and its own, and its directory exists; returns the mounts.
    fn validate_roots(&self, roots_exist: bool) -> Result<Vec<MountName>, Invalid> {
        let mut mounts: Vec<MountName> = Vec::new();
        for (i, r) in self.roots.iter().enumerate() {
            let mount = Policy::mount_of(r).map_err(|m| {
                let hint = if r.mount.is_none() {
                    "; give it a mount name (`mount = \"NAME\"`)"
                } else {
                    ""
                };
                Invalid::at(
                    format!("roots[{i}].mount"),
                    r.mount_span(),
                    format!("{m}{hint}"),
                )
            })?;
            match std::fs::metadata(&r.path) {
                Ok(m) if m.is_dir() => {}
                Err(e) if !roots_exist && e.kind() == std::io::ErrorKind::NotFound => {}
                Ok(_) => {
                    return Err(Invalid::at(
                        format!("roots[{i}].path"),
                        r.path_span(),
                        "not a directory".into(),
                    ));
                }
                Err(e) => {
                    return Err(Invalid::at(
                        format!("roots[{i}].path"),
                        r.path_span(),
                        r.cannot_open(&e),
                    ));
                }
            }
            if let Some(j) = mounts.iter().position(|m| *m == mount) {
                // Name both directories: with derived names, neither may read like the mount.
                return Err(Invalid::at(
                    format!("roots[{i}].mount"),
                    r.mount_span(),
                    format!(
                        "mount name {mount} is used by another root ({} and {}); give one of \
                         them its own mount name (`mount = \"NAME\"` in a policy, \
                         `--root NAME=PATH` on the command line)",
                        self.roots[j].path.display(),
                        r.path.display(),
                    ),
                ));
            }
            mounts.push(mount);
        }
        Ok(mounts)
    }

    /// Every consent rule path and grant path is a mount-form path of one of `mounts`.
    fn validate_paths(&self, mounts: &[MountName]) -> Result<(), Invalid> {
        let check_path = |key: String, p: &str, span: Option<std::ops::Range<usize>>| {
            match RequestPath::parse(p) {
                Ok(RequestPath::Mount { mount, .. })
                    if mounts.iter().any(|m| m.as_str() == mount) =>
                {
                    Ok(())
                }
                Ok(_) => Err(Invalid::at(
                    key,
                    span,
                    "must be a mount-form path (MOUNT/REL) of a root declared in this policy"
                        .into(),
                )),
                Err(e) => Err(Invalid::at(key, span, e.message().to_owned())),
            }
        };
        for (i, rule) in self.consent.rules.iter().enumerate() {
            for (j, p) in rule.paths.iter().enumerate() {
                check_path(
                    format!("consent.rules[{i}].paths[{j}]"),
                    p,
                    rule.path_span(j),
                )?;
            }
        }
        for (i, g) in self.grants.iter().enumerate() {
            check_path(format!("grants[{i}].path"), &g.path, g.path_span())?;
        }
        Ok(())
    }

    /// The redaction key, when there is one, is 64 hex digits; rotation's sizes make sense.
    fn validate_audit(&self) -> Result<(), Invalid> {
        if let Some(k) = &self.audit.redact_key
            && (k.len() != 64 || !k.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Invalid::unplaced(
                "audit.redact_key",
                "must be 64 hex digits".into(),
            ));
        }
        if self.audit.rotate_bytes == Some(0) {
            return Err(Invalid::unplaced(
                "audit.rotate_bytes",
                "must be at least 1 (leave it out to never rotate)".into(),
            ));
        }
        if !(1..=1000).contains(&self.audit.keep) {
            return Err(Invalid::unplaced(
                "audit.keep",
                "must be between 1 and 1000".into(),
            ));
        }
        Ok(())
    }
}

/// What validation found wrong: the dotted key, its place in the text where the value kept
/// one, and the message.
pub(super) struct Invalid {
    key: String,
    span: Option<std::ops::Range<usize>>,
    message: String,
}

impl Invalid {
    /// A fault in a value whose place in the text may be known (not in a policy built in
    /// code).
    fn at(key: String, span: Option<std::ops::Range<usize>>, message: String) -> Invalid {
        Invalid { key, span, message }
    }

    /// A fault in a value whose type keeps no place (it is found from the key later).
    pub(super) fn unplaced(key: &str, message: String) -> Invalid {
        Invalid {
            key: key.to_owned(),
            span: None,
            message,
        }
    }
}

/// The position of a `section.key` in policy text, for errors found after deserialising
/// (such as two limits that contradict each other), whose types keep no spans.
fn key_span(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    #[derive(Deserialize)]
    struct Sections {
        #[serde(default)]
        limits: std::collections::BTreeMap<String, Spanned<toml::Value>>,
        #[serde(default)]
        audit: std::collections::BTreeMap<String, Spanned<toml::Value>>,
    }
    let (section, name) = key.split_once('.')?;
    if let Ok(sections) = toml::from_str::<Sections>(text) {
        let table = match section {
            "limits" => &sections.limits,
            "audit" => &sections.audit,
            _ => return None,
        };
        return table.get(name).map(Spanned::span);
    }
    // A value too large for a TOML value (an integer past i64) still has a line: find the key
    // in its section by reading the text.
    let mut in_section = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if t.starts_with('[') {
            in_section = t.trim_matches(|c| c == '[' || c == ']').trim() == section;
        } else if in_section
            && t.strip_prefix(name)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            return Some(offset..offset + line.len());
        }
        offset += line.len();
    }
    None
}
