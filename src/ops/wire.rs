//! The wire shape of every method: its params as read and its result as sent, in one place.
//!
//! Keys are camelCase. A result key marked `skip_serializing_if` is left out when it does not
//! apply; every other key is always sent, `null` included where the value may be missing (an
//! `mtime` the filesystem cannot give, the `etag` of an upload not yet committed). The
//! operations build these values and `ops::dispatch` turns them into JSON, so nothing else
//! decides what a method sends. `docs/protocol.md` documents the same keys, and
//! `tests/wire_contract.rs` holds the two together.
//!
//! Params refuse a key they do not know (`-32602` naming it), so a misspelt option
//! (`ifmatch` for `ifMatch`) is an error rather than a request without it; `_meta`, which
//! any MCP request may carry, is taken out before (see `ops::params`).
//!
//! This module is below the operations: it imports only leaves.

use crate::access::Access;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How file content travels in `files/read` and `files/write`.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// The bytes as UTF-8 text.
    #[serde(rename = "utf-8")]
    Utf8,
    /// The bytes in standard base64 with padding.
    #[serde(rename = "base64")]
    Base64,
}

/// What kind of entry a path names, never following a final link.
#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (as listed; `files/stat` reports what it leads to).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// `ping` and `files/unwatch` answer an empty object.
#[derive(Debug, Serialize)]
pub(crate) struct Empty {}

/// `roots/list` result.
#[derive(Debug, Serialize)]
pub(crate) struct RootsListResult {
    /// The roots this server sees.
    pub(crate) roots: Vec<RootInfo>,
}

/// One root in `roots/list`.
#[derive(Debug, Serialize)]
pub(crate) struct RootInfo {
    /// The root's `file://` URI.
    pub(crate) uri: String,
    /// The root's display name.
    pub(crate) name: String,
}

/// `files/consent` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub(crate) struct ConsentParams {
    /// The server's reason, shown to the user.
    pub(crate) message: Option<String>,
    /// The paths asked for.
    pub(crate) requested_paths: Vec<String>,
    /// The access asked for; absent, the most each root allows.
    pub(crate) access: Option<Access>,
}

/// `files/consent` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConsentResult {
    /// Whether any path was approved.
    pub(crate) granted: bool,
    /// The approved paths, each the string the server sent.
    pub(crate) approved_paths: Vec<String>,
    /// The other requested paths (outside every root included), each as the server sent it.
    pub(crate) denied_paths: Vec<String>,
    /// Each requested path that lies inside a root, as sent, to its mount form.
    pub(crate) mount_paths: BTreeMap<String, String>,
    /// Each requested path the user narrowed to a place inside it, as sent, to the mount
    /// form of that place (the path itself is then in `denied_paths`); sent only when some
    /// path was narrowed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) narrowed_paths: BTreeMap<String, String>,
    /// The highest access granted (or asked for, when nothing was).
    pub(crate) access: Access,
}

/// `files/read` params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadParams {
    /// The file.
    pub(crate) path: String,
    /// The encoding asked for; absent, UTF-8 when valid, else base64.
    pub(crate) encoding: Option<Encoding>,
    /// The first byte to read.
    #[serde(default)]
    pub(crate) offset: u64,
    /// The most bytes to read; absent, the policy's chunk.
    pub(crate) length: Option<u64>,
}

/// `files/read` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadResult {
    /// The chunk, in `encoding`.
    pub(crate) content: String,
    /// How `content` is encoded.
    pub(crate) encoding: Encoding,
    /// The file's size.
    pub(crate) size: u64,
    /// Where the chunk starts.
    pub(crate) offset: u64,
    /// The file bytes the chunk holds.
    pub(crate) length: u64,
    /// Whether the chunk reaches the end of the file.
    pub(crate) eof: bool,
    /// The MIME type guessed from the name.
    pub(crate) mime_type: String,
    /// The file's etag.
    pub(crate) etag: String,
    /// The modification time, RFC 3339 (`null` when unknown).
    pub(crate) mtime: Option<String>,
}

/// `files/list` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    /// The directory.
    pub(crate) path: String,
    /// Whether to descend.
    #[serde(default)]
    pub(crate) recursive: bool,
    /// Whether names starting with `.` are listed.
    #[serde(default)]
    pub(crate) include_hidden: bool,
    /// How deep a recursive listing goes.
    pub(crate) max_depth: Option<usize>,
    /// The most entries in the page.
    pub(crate) limit: Option<usize>,
    /// Where the page starts: a previous page's `nextCursor`.
    pub(crate) cursor: Option<String>,
}

/// `files/list` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListResult {
    /// The page's entries.
    pub(crate) entries: Vec<ListEntry>,
    /// Where the next page starts; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

/// One entry of `files/list`.
#[derive(Debug, Serialize)]
pub(crate) struct ListEntry {
    /// The entry's name.
    pub(crate) name: String,
    /// The entry's path in mount form, under the listed path as requested.
    pub(crate) path: String,
    /// The entry's own type (a link is a link).
    #[serde(rename = "type")]
    pub(crate) kind: EntryType,
    /// The entry's own size; 0 for a symlink, whose own length is its target's name.
    pub(crate) size: u64,
    /// The modification time, RFC 3339 (`null` when unknown).
    pub(crate) mtime: Option<String>,
}

/// `files/stat` params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatParams {
    /// The path.
    pub(crate) path: String,
}

/// `files/stat` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatResult {
    /// The path as requested, in mount form.
    pub(crate) path: String,
    /// The type of what the path leads to.
    #[serde(rename = "type")]
    pub(crate) kind: EntryType,
    /// Its size.
    pub(crate) size: u64,
    /// The modification time, RFC 3339 (`null` when unknown).
    pub(crate) mtime: Option<String>,
    /// Its etag.
    pub(crate) etag: String,
    /// Whether this session may not write it.
    pub(crate) readonly: bool,
    /// The MIME type guessed from the name; only for a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mime_type: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// `files/write` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteParams {
    /// The file.
    pub(crate) path: String,
    /// The bytes (of this chunk), in `encoding`.
    pub(crate) content: String,
    /// How `content` is encoded; absent, UTF-8.
    pub(crate) encoding: Option<Encoding>,
    /// Whether a missing file may be created.
    #[serde(default = "yes")]
    pub(crate) create: bool,
    /// Whether an existing file may be replaced.
    #[serde(default = "yes")]
    pub(crate) overwrite: bool,
    /// The etag the file must have at commit.
    pub(crate) if_match: Option<String>,
    /// Where this chunk goes.
    #[serde(default)]
    pub(crate) offset: u64,
    /// Whether this chunk commits the write.
    #[serde(default = "yes", rename = "final")]
    pub(crate) last: bool,
}

/// `files/write` result.
#[derive(Debug, Serialize)]
pub(crate) struct WriteResult {
    /// The path as requested, in mount form.
    pub(crate) path: String,
    /// The file's size after the commit, or the bytes staged so far.
    pub(crate) size: u64,
    /// The new etag; `null` before the commit.
    pub(crate) etag: Option<String>,
    /// Whether the commit created the file.
    pub(crate) created: bool,
    /// Whether the write is committed; sent only as `false`, for an upload still open.
    #[serde(rename = "final", skip_serializing_if = "is_true")]
    pub(crate) committed: bool,
}

/// What `files/create` makes.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CreateKind {
    /// An empty file.
    File,
    /// An empty directory.
    Directory,
}

/// `files/create` params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateParams {
    /// The new entry.
    pub(crate) path: String,
    /// What to make.
    #[serde(rename = "type")]
    pub(crate) kind: CreateKind,
    /// Whether missing parents are made too.
    #[serde(default)]
    pub(crate) parents: bool,
}

/// `files/create` result.
#[derive(Debug, Serialize)]
pub(crate) struct CreateResult {
    /// The path as requested, in mount form.
    pub(crate) path: String,
    /// What was made.
    #[serde(rename = "type")]
    pub(crate) kind: CreateKind,
}

/// `files/delete` params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteParams {
    /// The entry.
    pub(crate) path: String,
    /// Whether a directory goes with everything in it.
    #[serde(default)]
    pub(crate) recursive: bool,
}

/// `files/delete` result.
#[derive(Debug, Serialize)]
pub(crate) struct DeleteResult {
    /// The path as requested, in mount form.
    pub(crate) path: String,
}

/// `files/rename` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub(crate) struct RenameParams {
    /// The entry to move.
    pub(crate) old_path: String,
    /// Where it goes.
    pub(crate) new_path: String,
    /// Whether an existing target may be replaced.
    #[serde(default)]
    pub(crate) overwrite: bool,
}

/// `files/rename` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RenameResult {
    /// The old path as requested, in mount form.
    pub(crate) old_path: String,
    /// The new path as requested, in mount form.
    pub(crate) new_path: String,
}

/// `files/watch` params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WatchParams {
    /// The file or directory.
    pub(crate) path: String,
    /// Whether changes beneath a directory's children are reported.
    #[serde(default)]
    pub(crate) recursive: bool,
    /// The kinds of change reported; absent, all three.
    pub(crate) events: Option<Vec<String>>,
}

/// `files/watch` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WatchResult {
    /// The new watch's id.
    pub(crate) watch_id: String,
}

/// `files/unwatch` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub(crate) struct UnwatchParams {
    /// The watch to end.
    pub(crate) watch_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The keys that are left out when absent, and those sent as `null`, are what the
    /// operations sent before these types existed.
    #[test]
    fn optional_keys_are_left_out_or_null_as_before() -> serde_json::Result<()> {
        assert_eq!(serde_json::to_value(Empty {})?, json!({}));
        let pending = WriteResult {
            path: "p/f".into(),
            size: 3,
            etag: None,
            created: false,
            committed: false,
        };
        assert_eq!(
            serde_json::to_value(pending)?,
            json!({"path": "p/f", "size": 3, "etag": null, "created": false, "final": false})
        );
        let done = WriteResult {
            path: "p/f".into(),
            size: 3,
            etag: Some("\"e\"".into()),
            created: true,
            committed: true,
        };
        assert_eq!(
            serde_json::to_value(done)?,
            json!({"path": "p/f", "size": 3, "etag": "\"e\"", "created": true})
        );
        let last = ListResult {
            entries: Vec::new(),
            next_cursor: None,
        };
        assert_eq!(serde_json::to_value(last)?, json!({"entries": []}));
        let dir = StatResult {
            path: "p".into(),
            kind: EntryType::Directory,
            size: 0,
            mtime: None,
            etag: "\"e\"".into(),
            readonly: true,
            mime_type: None,
        };
        assert_eq!(
            serde_json::to_value(dir)?,
            json!({"path": "p", "type": "directory", "size": 0, "mtime": null,
                   "etag": "\"e\"", "readonly": true})
        );
        Ok(())
    }
}
