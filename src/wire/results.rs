//! Every method's result, as sent and as a host reads it from a typed call.
//!
//! A key marked `skip_serializing_if` is left out when it does not apply; every other key is
//! always sent, `null` included where the value may be missing (an `mtime` the filesystem
//! cannot give, the `etag` of an upload not yet committed). They are `#[non_exhaustive]`: a
//! later revision may add keys.

use super::{CreateKind, Encoding, EntryType};
use crate::access::Access;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// `roots/list` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct RootsListResult {
    /// The roots this server sees.
    pub roots: Vec<RootInfo>,
}

/// One root in `roots/list`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct RootInfo {
    /// The root's `file://` URI.
    pub uri: String,
    /// The root's display name.
    pub name: String,
}

/// `files/consent` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
#[serde(rename_all = "camelCase")]
pub struct ConsentResult {
    /// Whether any path was approved.
    pub granted: bool,
    /// The approved paths, each the string the server sent.
    pub approved_paths: Vec<String>,
    /// The other requested paths (outside every root included), each as the server sent it.
    pub denied_paths: Vec<String>,
    /// Each requested path that lies inside a root, as sent, to its mount form.
    pub mount_paths: BTreeMap<String, String>,
    /// Each requested path the user narrowed to a place inside it, as sent, to the mount
    /// form of that place (the path itself is then in `denied_paths`); sent only when some
    /// path was narrowed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub narrowed_paths: BTreeMap<String, String>,
    /// The highest access granted (or asked for, when nothing was).
    pub access: Access,
}

/// `files/read` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
#[serde(rename_all = "camelCase")]
pub struct ReadResult {
    /// The chunk, in `encoding`.
    pub content: String,
    /// How `content` is encoded.
    pub encoding: Encoding,
    /// The file's size.
    pub size: u64,
    /// Where the chunk starts.
    pub offset: u64,
    /// The file bytes the chunk holds.
    pub length: u64,
    /// Whether the chunk reaches the end of the file.
    pub eof: bool,
    /// The MIME type guessed from the name.
    pub mime_type: String,
    /// The file's etag.
    pub etag: String,
    /// The modification time, RFC 3339 (`null` when unknown).
    pub mtime: Option<String>,
}

/// `files/list` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    /// The page's entries.
    pub entries: Vec<ListEntry>,
    /// Where the next page starts; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One entry of `files/list`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListEntry {
    /// The entry's name.
    pub name: String,
    /// The entry's path in mount form, under the listed path as requested.
    pub path: String,
    /// The entry's own type (a link is a link).
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// The entry's own size; 0 for a symlink, whose own length is its target's name.
    pub size: u64,
    /// The modification time, RFC 3339 (`null` when unknown).
    pub mtime: Option<String>,
}

/// `files/stat` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
#[serde(rename_all = "camelCase")]
pub struct StatResult {
    /// The path as requested, in mount form.
    pub path: String,
    /// The type of what the path leads to.
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Its size.
    pub size: u64,
    /// The modification time, RFC 3339 (`null` when unknown).
    pub mtime: Option<String>,
    /// Its etag.
    pub etag: String,
    /// Whether this session may not write it.
    pub readonly: bool,
    /// The MIME type guessed from the name; only for a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `files/write` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteResult {
    /// The path as requested, in mount form.
    pub path: String,
    /// The file's size after the commit, or the bytes staged so far.
    pub size: u64,
    /// The new etag; `null` before the commit.
    pub etag: Option<String>,
    /// Whether the commit created the file.
    pub created: bool,
    /// Whether the write is committed; sent only as `false`, for an upload still open.
    #[serde(rename = "final", default = "yes", skip_serializing_if = "is_true")]
    pub committed: bool,
}

/// `files/create` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreateResult {
    /// The path as requested, in mount form.
    pub path: String,
    /// What was made.
    #[serde(rename = "type")]
    pub kind: CreateKind,
}

/// `files/delete` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeleteResult {
    /// The path as requested, in mount form.
    pub path: String,
}

/// `files/rename` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
#[serde(rename_all = "camelCase")]
pub struct RenameResult {
    /// The old path as requested, in mount form.
    pub old_path: String,
    /// The new path as requested, in mount form.
    pub new_path: String,
}

/// `files/watch` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
#[serde(rename_all = "camelCase")]
pub struct WatchResult {
    /// The new watch's id.
    pub watch_id: String,
}

impl ReadResult {
    /// The chunk's bytes, decoded from its `encoding`.
    pub fn bytes(&self) -> crate::error::Result<Vec<u8>> {
        use base64::Engine;
        match self.encoding {
            Encoding::Utf8 => Ok(self.content.as_bytes().to_vec()),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(&self.content)
                .map_err(|_| {
                    crate::error::Error::new(
                        crate::error::ErrorKind::Internal,
                        "the chunk is not valid base64",
                    )
                }),
        }
    }
}
