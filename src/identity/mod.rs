//! Who a session's server is, worked out on the broker's side from the kernel and the
//! filesystem, never from anything the server says.
//!
//! A server names itself (`serverInfo.name`), and a host names its session (`--server-id`);
//! either name can be claimed by any program. What the user decides (a remembered grant, a
//! suspension, an offer, a policy's pin) is therefore bound to an [`Identity`] as well as to
//! a name: the program that was executed (its path and a BLAKE3 digest of its content), its
//! arguments, and what it runs where it is a launcher or an interpreter (the script of
//! `python3 server.py`, the package and version `npx` installed). Two programs that give the
//! same name have two identities; a program edited since the user decided has another.
//!
//! What an identity proves, and what it does not, is in `SECURITY.md`: it names the code that
//! was started, not code the program loads later from a place it can write.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

mod arguments;
mod digests;
mod files;
mod interpreters;
mod launch;
mod launchers;
mod process;
mod procfs;

pub(crate) use digests::{Digests, FileDigest};
pub(crate) use launch::{Launch, of_launch, resolve};
pub(crate) use process::{of_process, stdin_peer};

/// How many hex digits of a digest a person is shown.
const SHORT: usize = 12;

/// Who a session's server is: see the module's documentation. Build one with
/// [`Identity::of_host`] in a library host; the faces of the command line compute theirs.
///
/// Two identities are the same server when their [`digest`](Identity::digest)s are equal:
/// the digest covers every field but [`launched_by`](Identity::launched_by), which says where
/// the server was started from and may change from one start to the next, and
/// [`installed`](Identity::installed), which the server itself could have shaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Identity {
    /// The key: hex BLAKE3 over the fields that decide, as [`Identity::sealed`] computes it.
    pub digest: String,
    /// The program that was executed, when the server is a local process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Program>,
    /// Its argument vector, the program's name first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// What the program runs, when it is an interpreter or a launcher; for a launcher, the
    /// package its arguments ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Runs>,
    /// The files its arguments name, each digested: a script found however its options read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arg_files: Vec<ArgFile>,
    /// What a launcher installed and runs, as read after the server started: shown, never
    /// compared (the package could have shaped it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<Runs>,
    /// The origin (`scheme://host:port`) of a remote server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// A remote server's public key, as its TLS certificate gave it: `sha256//BASE64` of the
    /// SubjectPublicKeyInfo (as `curl --pinnedpubkey` writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<String>,
    /// What a library host says its server is (see [`Identity::of_host`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The processes the server was started from, nearest first (`["code", "systemd"]`), as
    /// far as they can be read. Shown, never compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launched_by: Vec<String>,
}

/// An executed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Program {
    /// The path it was executed by (found on `PATH` where the command had no `/`), before
    /// links are followed: a virtual environment's `bin/python` is not the system's.
    pub path: PathBuf,
    /// The file that path leads to.
    pub real: PathBuf,
    /// Hex BLAKE3 of its content; empty when it could not be read (an execute-only file).
    pub digest: String,
}

/// A file an argument names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ArgFile {
    /// Its real path.
    pub path: PathBuf,
    /// Hex BLAKE3 of its content (`size:N:ctime:T` for one too large to read at each start).
    pub digest: String,
}

/// What an interpreter or a launcher runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Runs {
    /// `script` (a file an interpreter reads), `module` (`python3 -m NAME`), `inline` (the
    /// code of `python3 -c`, `node -e`, `sh -c`), or `package` (what `npx`, `uvx` or `pipx run` installed).
    pub kind: String,
    /// The script, or the package's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// A package's or module's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A package's version, as its manifest gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Hex BLAKE3 of the script, or of a package's manifest and entry file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
}

impl Identity {
    /// An identity a library host gives its server: `what` names it (e.g. `plugin:notes@1.4.2`
    /// with the digest of what the host loaded). The host is trusted to say it; the broker
    /// compares it as it compares its own.
    pub fn of_host(what: impl Into<String>) -> Identity {
        Identity {
            host: Some(what.into()),
            ..Identity::blank()
        }
        .sealed()
    }

    /// The identity of a remote server at `origin` (`scheme://host:port`, as a URL's origin
    /// is written), with the public key its TLS certificate gave, when it gave one.
    pub(crate) fn of_origin(origin: String, tls_key: Option<String>) -> Identity {
        Identity {
            origin: Some(origin),
            tls_key,
            ..Identity::blank()
        }
        .sealed()
    }

    /// An identity with nothing in it, to be filled and then [`sealed`](Identity::sealed).
    pub(crate) fn blank() -> Identity {
        Identity {
            digest: String::new(),
            program: None,
            argv: Vec::new(),
            runs: None,
            arg_files: Vec::new(),
            installed: None,
            origin: None,
            tls_key: None,
            host: None,
            launched_by: Vec::new(),
        }
    }

    /// The identity with its [`digest`](Identity::digest) computed from its fields: every
    /// field but `launched_by` and `installed`, each length-prefixed so that no two identities encode alike.
    /// A digest received from elsewhere is never kept: this is what compares.
    pub fn sealed(mut self) -> Identity {
        let mut h = blake3::Hasher::new();
        let mut put = |tag: &str, value: &str| {
            for part in [tag, value] {
                h.update(&(part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
        };
        if let Some(p) = &self.program {
            put("program", &p.path.to_string_lossy());
            put("real", &p.real.to_string_lossy());
            put("digest", &p.digest);
        }
        for a in &self.argv {
            put("arg", a);
        }
        if let Some(r) = &self.runs {
            put("runs", &r.kind);
            if let Some(p) = &r.path {
                put("runs.path", &p.to_string_lossy());
            }
            put("runs.name", r.name.as_deref().unwrap_or(""));
            put("runs.version", r.version.as_deref().unwrap_or(""));
            put("runs.digest", &r.digest);
        }
        for f in &self.arg_files {
            put("argFile", &f.path.to_string_lossy());
            put("argFile.digest", &f.digest);
        }
        put("origin", self.origin.as_deref().unwrap_or(""));
        put("tlsKey", self.tls_key.as_deref().unwrap_or(""));
        put("host", self.host.as_deref().unwrap_or(""));
        self.digest = h.finalize().to_hex().to_string();
        self
    }

    /// The first digits of the digest, as a person is shown them.
    pub fn short(&self) -> &str {
        self.digest.get(..SHORT).unwrap_or(&self.digest)
    }

    /// What the server is, in a few words: the script or package it runs (with the version a
    /// launcher installed, said to be as installed), else its program, else its origin or
    /// the host's word.
    pub fn what(&self) -> String {
        let installed = self.installed.as_ref().and_then(|i| {
            let name = i.name.as_deref()?;
            Some(match &i.version {
                Some(v) => format!("{name}@{v}"),
                None => name.to_owned(),
            })
        });
        if let Some(r) = &self.runs {
            match (&r.name, &r.version, &installed) {
                (Some(n), Some(v), _) => return format!("{n}@{v}"),
                (Some(n), None, Some(i)) if i.starts_with(&format!("{n}@")) => {
                    return format!("{i} (as installed)");
                }
                (Some(n), None, _) => return n.clone(),
                _ => {}
            }
            if let Some(p) = &r.path {
                return p.display().to_string();
            }
        }
        if let Some(i) = installed {
            return format!("{i} (as installed)");
        }
        if let Some(p) = &self.program {
            return p.path.display().to_string();
        }
        self.origin
            .clone()
            .or_else(|| self.host.clone())
            .unwrap_or_else(|| "an unknown program".to_owned())
    }

    /// What a decision made for this identity keeps of it, made at `since` (seconds since
    /// the Unix epoch).
    pub(crate) fn record(&self, since: u64) -> Recorded {
        Recorded {
            digest: self.digest.clone(),
            what: self.what(),
            place: self.place(),
            since,
        }
    }

    /// The file a person would say the server is: the script or package, else the program.
    fn place(&self) -> Option<PathBuf> {
        self.runs
            .as_ref()
            .and_then(|r| r.path.clone())
            .or_else(|| self.arg_files.first().map(|f| f.path.clone()))
            .or_else(|| self.program.as_ref().map(|p| p.path.clone()))
    }

    /// Why a decision recorded as `was` does not hold for this identity, for the question
    /// that asks again: the same file with another content, or another program under the
    /// name `name`.
    pub(crate) fn changed_since(&self, was: &Recorded, name: &str) -> String {
        let when = crate::identity::date(was.since);
        match (&was.place, self.place()) {
            (Some(old), Some(new)) if *old == new => format!(
                "the program at {} changed since you allowed it on {when}",
                new.display()
            ),
            _ => format!(
                "a different program now calls itself {name}: {} (allowed on {when}: {})",
                self.what(),
                was.what
            ),
        }
    }
}

/// What a decision keeps of the identity it was made for: enough to compare, and to say
/// what changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Recorded {
    /// The identity's digest.
    pub(crate) digest: String,
    /// [`Identity::what`] then.
    pub(crate) what: String,
    /// The script, package or program's path then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) place: Option<PathBuf>,
    /// When the decision was made, in seconds since the Unix epoch.
    pub(crate) since: u64,
}

/// `secs` since the Unix epoch as a UTC date, `2026-11-29` (the epoch's for a time the
/// calendar cannot hold).
pub(crate) fn date(secs: u64) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let d = t.date();
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(path: &str, digest: &str) -> Identity {
        Identity {
            program: Some(Program {
                path: "/usr/bin/python3".into(),
                real: "/usr/bin/python3.13".into(),
                digest: "p".repeat(64),
            }),
            argv: vec!["python3".into(), path.into()],
            runs: Some(Runs {
                kind: "script".into(),
                path: Some(path.into()),
                name: None,
                version: None,
                digest: digest.into(),
            }),
            ..Identity::blank()
        }
        .sealed()
    }

    #[test]
    fn the_digest_covers_what_decides_and_not_where_it_was_launched_from() {
        let a = script("/srv/a.py", "1");
        assert_eq!(a.digest.len(), 64);
        assert_eq!(a, script("/srv/a.py", "1"));
        assert_ne!(a.digest, script("/srv/a.py", "2").digest, "content");
        assert_ne!(a.digest, script("/srv/b.py", "1").digest, "place");
        let mut launched = a.clone();
        launched.launched_by = vec!["code".into()];
        assert_eq!(launched.sealed().digest, a.digest);
        let mut venv = a.clone();
        if let Some(p) = venv.program.as_mut() {
            p.path = "/srv/venv/bin/python3".into();
        }
        assert_ne!(venv.sealed().digest, a.digest, "a venv's interpreter");
        // Fields cannot run into each other: an argument that holds what two would.
        let mut two = Identity::blank();
        two.argv = vec!["ab".into(), "c".into()];
        let mut one = Identity::blank();
        one.argv = vec!["a".into(), "bc".into()];
        assert_ne!(two.sealed().digest, one.sealed().digest);
        assert_ne!(
            Identity::of_host("x").digest,
            Identity::blank().sealed().digest
        );
    }

    #[test]
    fn a_change_is_told_as_an_edit_or_as_another_program() {
        let was = script("/srv/a.py", "1").record(1_796_083_200);
        let edited = script("/srv/a.py", "2").changed_since(&was, "notes");
        assert_eq!(
            edited,
            "the program at /srv/a.py changed since you allowed it on 2026-12-01"
        );
        let other = script("/srv/b.py", "1").changed_since(&was, "notes");
        assert!(
            other.starts_with("a different program now calls itself notes: /srv/b.py"),
            "{other}"
        );
        assert!(other.contains("/srv/a.py"), "{other}");
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_796_083_200), "2026-12-01");
    }
}
