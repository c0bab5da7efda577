//! `[[grants]]`: standing grants, each for the servers it names and, when it says so, for
//! one program only.

use super::{Span, all_servers, default_access};
use crate::access::Access;
use serde::Deserialize;
use toml::Spanned;

/// A `[[grants]]` entry: a standing grant, in force from the start of every matching session
/// and kept when the session ends. Build one with [`GrantEntry::new`].
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "RawGrantEntry")]
pub struct GrantEntry {
    /// Server ids the grant is for; `["*"]` (default) means every server.
    pub servers: Vec<String>,
    /// The mount-form path granted, with everything beneath it.
    pub path: String,
    /// `read` (default) or `write`.
    pub access: Access,
    /// The [`Identity`](crate::Identity) digest the grant is for: a session of another
    /// identity (or of none) does not hold it, whatever its name. `None`: every session the
    /// `servers` name.
    pub identity: Option<String>,
    /// What the identity was when the user gave the grant (a remembered answer), to say
    /// what changed when it is held back.
    pub(crate) made_for: Option<crate::identity::Recorded>,
    /// Where `path` stood in the file.
    span: Span,
}

impl GrantEntry {
    /// A grant of `access` on the mount-form `path` (`MOUNT` or `MOUNT/REL`) and everything
    /// beneath it, for every server.
    pub fn new(path: impl Into<String>, access: Access) -> GrantEntry {
        GrantEntry {
            servers: all_servers(),
            path: path.into(),
            access,
            identity: None,
            made_for: None,
            span: None,
        }
    }

    /// Only for a session whose identity has the digest `digest`.
    pub fn identity(mut self, digest: impl Into<String>) -> GrantEntry {
        self.identity = Some(digest.into());
        self
    }

    /// Whether a session of `identity` holds the grant: any, when the grant names none;
    /// else only one of that digest. A session of no identity holds no pinned grant.
    pub(crate) fn holds_for(&self, identity: Option<&crate::Identity>) -> bool {
        match &self.identity {
            None => true,
            Some(pin) => identity.is_some_and(|i| !pin.is_empty() && i.digest == *pin),
        }
    }

    /// Why a session of `identity` named `name` does not hold the grant, for the question
    /// that asks again.
    pub(crate) fn held_back_why(&self, identity: Option<&crate::Identity>, name: &str) -> String {
        match (identity, &self.made_for) {
            (Some(i), Some(was)) => i.changed_since(was, name),
            (None, _) => "this session's program could not be told, and the grant is for one \
                          program only"
                .to_owned(),
            (Some(_), None) => {
                format!("a different program now calls itself {name} than the one the grant is for")
            }
        }
    }

    /// Only for the servers `ids`.
    pub fn servers<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> GrantEntry {
        self.servers = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The span of `path` in the file it was loaded from.
    pub(crate) fn path_span(&self) -> Span {
        self.span.clone()
    }
}

/// A `[[grants]]` entry as written, with the place of its path.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrantEntry {
    #[serde(default = "all_servers")]
    servers: Vec<String>,
    path: Spanned<String>,
    #[serde(default = "default_access")]
    access: Access,
    #[serde(default)]
    identity: Option<String>,
}

impl From<RawGrantEntry> for GrantEntry {
    fn from(g: RawGrantEntry) -> GrantEntry {
        GrantEntry {
            servers: g.servers,
            span: Some(g.path.span()),
            path: g.path.into_inner(),
            access: g.access,
            identity: g.identity,
            made_for: None,
        }
    }
}
