//! Every method's params, as read from the wire and as a host builds them for a typed call.
//!
//! Each has a constructor taking what the method cannot do without; the rest are public
//! fields with the wire's defaults, set after construction. They are `#[non_exhaustive]`, so
//! that a later revision's option is not a breaking change for hosts.

use super::{CreateKind, Encoding};
use crate::access::Access;
use base64::Engine;
use serde::{Deserialize, Serialize};

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `files/consent` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ConsentParams {
    /// The server's reason, shown to the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The paths asked for: mount form, `file://` URIs or absolute host paths.
    pub requested_paths: Vec<String>,
    /// The access asked for; absent, the most each root allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
}

impl ConsentParams {
    /// Asks for `paths` at the most each root allows, with no message.
    pub fn new<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> ConsentParams {
        ConsentParams {
            message: None,
            requested_paths: paths.into_iter().map(Into::into).collect(),
            access: None,
        }
    }
}

/// `files/read` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ReadParams {
    /// The file.
    pub path: String,
    /// The encoding asked for; absent, UTF-8 when valid, else base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    /// The first byte to read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
    /// The most bytes to read; absent, the policy's chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
}

impl ReadParams {
    /// Reads the first chunk of `path`.
    pub fn new(path: impl Into<String>) -> ReadParams {
        ReadParams {
            path: path.into(),
            encoding: None,
            offset: 0,
            length: None,
        }
    }
}

/// `files/list` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ListParams {
    /// The directory.
    pub path: String,
    /// Whether to descend.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recursive: bool,
    /// Whether names starting with `.` are listed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub include_hidden: bool,
    /// How deep a recursive listing goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<usize>,
    /// The most entries in the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where the page starts: a previous page's `nextCursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl ListParams {
    /// Lists the first page of `path`'s own entries.
    pub fn new(path: impl Into<String>) -> ListParams {
        ListParams {
            path: path.into(),
            recursive: false,
            include_hidden: false,
            max_depth: None,
            limit: None,
            cursor: None,
        }
    }
}

/// `files/stat` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StatParams {
    /// The path.
    pub path: String,
}

impl StatParams {
    /// Describes `path`.
    pub fn new(path: impl Into<String>) -> StatParams {
        StatParams { path: path.into() }
    }
}

/// `files/write` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WriteParams {
    /// The file.
    pub path: String,
    /// The bytes (of this chunk), in `encoding`.
    pub content: String,
    /// How `content` is encoded; absent, UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    /// Whether a missing file may be created.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub create: bool,
    /// Whether an existing file may be replaced.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub overwrite: bool,
    /// The etag the file must have at commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_match: Option<String>,
    /// Where this chunk goes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
    /// Whether this chunk commits the write.
    #[serde(default = "yes", rename = "final", skip_serializing_if = "is_true")]
    pub last: bool,
}

impl WriteParams {
    /// Writes `text` as the whole of `path`, creating or replacing it.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> WriteParams {
        WriteParams {
            path: path.into(),
            content: text.into(),
            encoding: None,
            create: true,
            overwrite: true,
            if_match: None,
            offset: 0,
            last: true,
        }
    }

    /// Writes `bytes` (sent in base64) as the whole of `path`, creating or replacing it.
    pub fn bytes(path: impl Into<String>, bytes: &[u8]) -> WriteParams {
        WriteParams {
            encoding: Some(Encoding::Base64),
            ..WriteParams::new(
                path,
                base64::engine::general_purpose::STANDARD.encode(bytes),
            )
        }
    }
}

/// `files/create` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CreateParams {
    /// The new entry.
    pub path: String,
    /// What to make.
    #[serde(rename = "type")]
    pub kind: CreateKind,
    /// Whether missing parents are made too.
    #[serde(default, skip_serializing_if = "is_false")]
    pub parents: bool,
}

impl CreateParams {
    /// Makes an empty `kind` at `path`, whose parent must exist.
    pub fn new(path: impl Into<String>, kind: CreateKind) -> CreateParams {
        CreateParams {
            path: path.into(),
            kind,
            parents: false,
        }
    }
}

/// `files/delete` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DeleteParams {
    /// The entry.
    pub path: String,
    /// Whether a directory goes with everything in it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recursive: bool,
}

impl DeleteParams {
    /// Deletes a file, a link or an empty directory at `path`.
    pub fn new(path: impl Into<String>) -> DeleteParams {
        DeleteParams {
            path: path.into(),
            recursive: false,
        }
    }
}

/// `files/rename` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RenameParams {
    /// The entry to move.
    pub old_path: String,
    /// Where it goes.
    pub new_path: String,
    /// Whether an existing target may be replaced.
    #[serde(default, skip_serializing_if = "is_false")]
    pub overwrite: bool,
}

impl RenameParams {
    /// Moves `old_path` to `new_path`, which must not exist.
    pub fn new(old_path: impl Into<String>, new_path: impl Into<String>) -> RenameParams {
        RenameParams {
            old_path: old_path.into(),
            new_path: new_path.into(),
            overwrite: false,
        }
    }
}

/// `files/watch` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WatchParams {
    /// The file or directory.
    pub path: String,
    /// Whether changes beneath a directory's children are reported.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recursive: bool,
    /// The kinds of change reported (`created`, `modified`, `deleted`); absent, all three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
}

impl WatchParams {
    /// Watches `path` (a directory's direct children) for every kind of change.
    pub fn new(path: impl Into<String>) -> WatchParams {
        WatchParams {
            path: path.into(),
            recursive: false,
            events: None,
        }
    }
}

/// `files/unwatch` params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UnwatchParams {
    /// The watch to end.
    pub watch_id: String,
}

impl UnwatchParams {
    /// Ends the watch `watch_id`.
    pub fn new(watch_id: impl Into<String>) -> UnwatchParams {
        UnwatchParams {
            watch_id: watch_id.into(),
        }
    }
}
