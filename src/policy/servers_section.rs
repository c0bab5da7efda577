//! `[[servers]]`: a server's name pinned to the program that may use it.
//!
//! The name a session goes by is the server's or the host's to choose, so a grant or a root
//! the policy gives a name would go to any program that takes it. A pin says which program
//! the name belongs to (its path, the script or package it runs, or its identity's digest),
//! and what becomes of a session that claims the name with another identity: refused, or
//! treated as an unknown server, which holds nothing the policy gives the name.

use crate::Identity;
use serde::Deserialize;
use std::path::PathBuf;

/// The least digits of a digest a pin may give: fewer could match another program.
const MIN_DIGEST_DIGITS: usize = 12;

/// One `[[servers]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerPin {
    /// The server name it pins (a session's name, without its `#N`).
    pub name: String,
    /// The program's path: what it was executed by, or the file that leads to.
    #[serde(default)]
    pub program: Option<PathBuf>,
    /// The script an interpreter runs.
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// The package a launcher runs: `NAME` or `NAME@VERSION`.
    #[serde(default)]
    pub package: Option<String>,
    /// The identity's digest, or its first digits (at least twelve).
    #[serde(default)]
    pub digest: Option<String>,
    /// What becomes of a session that claims the name with another identity.
    #[serde(default)]
    pub otherwise: Otherwise,
}

/// What becomes of a session that claims a pinned name with another identity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Otherwise {
    /// It does not open.
    #[default]
    Refuse,
    /// It opens as `unpinned-NAME`: a server none of the policy's roots and grants name.
    Unknown,
}

impl ServerPin {
    /// Why the entry cannot pin anything, if it cannot.
    pub(super) fn fault(&self) -> Option<String> {
        if self.program.is_none()
            && self.script.is_none()
            && self.package.is_none()
            && self.digest.is_none()
        {
            return Some("pins nothing: give program, script, package or digest".into());
        }
        if let Some(d) = &self.digest
            && (d.len() < MIN_DIGEST_DIGITS || !d.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Some(format!(
                "digest must be at least {MIN_DIGEST_DIGITS} hex digits (fsbroker status \
                 --json shows a session's)"
            ));
        }
        None
    }

    /// Whether `identity` is the program the name is pinned to: every field the entry gives
    /// matches. No identity matches nothing.
    pub(crate) fn admits(&self, identity: Option<&Identity>) -> bool {
        let Some(i) = identity else {
            return false;
        };
        let program = self.program.as_ref().is_none_or(|want| {
            i.program
                .as_ref()
                .is_some_and(|p| p.path == *want || p.real == *want)
        });
        let script = self.script.as_ref().is_none_or(|want| {
            i.runs
                .as_ref()
                .is_some_and(|r| r.kind == "script" && r.path.as_ref() == Some(want))
        });
        let package = self.package.as_ref().is_none_or(|want| {
            i.runs.as_ref().is_some_and(|r| {
                let (name, version) = match want.rsplit_once('@').filter(|(n, _)| !n.is_empty()) {
                    Some((n, v)) => (n, Some(v)),
                    None => (want.as_str(), None),
                };
                r.kind == "package"
                    && r.name.as_deref() == Some(name)
                    && version.is_none_or(|v| r.version.as_deref() == Some(v))
            })
        });
        let digest = self.digest.as_ref().is_none_or(|want| {
            want.len() >= MIN_DIGEST_DIGITS && i.digest.starts_with(&want.to_ascii_lowercase())
        });
        program && script && package && digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Program, Runs};

    fn pin(toml: &str) -> ServerPin {
        toml::from_str(toml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn npx(version: &str) -> Identity {
        let mut i = Identity::of_host("x");
        i.host = None;
        i.program = Some(Program {
            path: "/usr/bin/npx".into(),
            real: "/usr/lib/node_modules/npm/bin/npx-cli.js".into(),
            digest: "d".into(),
        });
        i.runs = Some(Runs {
            kind: "package".into(),
            path: Some("/c/node_modules/@s/notes".into()),
            name: Some("@s/notes".into()),
            version: Some(version.into()),
            digest: "r".into(),
        });
        i.sealed()
    }

    #[test]
    fn a_pin_admits_only_what_every_field_it_gives_matches() {
        let one = npx("1.0.0");
        assert!(pin("name = 'n'\npackage = '@s/notes'").admits(Some(&one)));
        assert!(pin("name = 'n'\npackage = '@s/notes@1.0.0'").admits(Some(&one)));
        assert!(!pin("name = 'n'\npackage = '@s/notes@1.0.1'").admits(Some(&one)));
        assert!(!pin("name = 'n'\npackage = '@s/other'").admits(Some(&one)));
        assert!(pin("name = 'n'\nprogram = '/usr/bin/npx'").admits(Some(&one)));
        assert!(
            !pin("name = 'n'\nprogram = '/usr/bin/npx'\nscript = '/a.js'").admits(Some(&one)),
            "a package is no script"
        );
        let digest = format!("name = 'n'\ndigest = '{}'", &one.digest[..12]);
        assert!(pin(&digest).admits(Some(&one)));
        assert!(!pin(&digest).admits(Some(&npx("2"))));
        assert!(!pin("name = 'n'\npackage = '@s/notes'").admits(None));
        assert_eq!(pin("name = 'n'\ndigest = 'abc'").fault().is_some(), true);
        assert!(pin("name = 'n'").fault().is_some());
        assert_eq!(
            pin("name = 'n'\notherwise = 'unknown'").otherwise,
            Otherwise::Unknown
        );
    }
}
