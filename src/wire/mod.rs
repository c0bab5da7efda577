//! The wire shape of every method: its params as read and its result as sent, in one place,
//! and the typed calls a host makes with them.
//!
//! Keys are camelCase. The operations build the result types and `ops::dispatch` turns them
//! into JSON, so nothing else decides what a method sends. `docs/protocol.md` documents the
//! same keys, and `tests/library/wire_contract.rs` holds the two together.
//!
//! Params refuse a key they do not know (`-32602` naming it), so a misspelt option
//! (`ifmatch` for `ifMatch`) is an error rather than a request without it; `_meta`, which
//! any MCP request may carry, is taken out before (see `ops::params`).
//!
//! A host calls a method with its params type and gets its result type back:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use mcp_fsbroker::policy::{ConsentMode, Policy, RootEntry};
//! use mcp_fsbroker::wire::{ConsentParams, ReadParams};
//! use mcp_fsbroker::{Access, Broker};
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("hello.txt"), "hi").unwrap();
//! let policy = Policy::new()
//!     .root(RootEntry::new("demo", dir.path()))
//!     .consent_mode(ConsentMode::Auto);
//! let (broker, _) = Broker::builder(policy).build().unwrap();
//! let (session, _notifications) = broker.open_session("my-server").unwrap();
//! let granted = session.call(ConsentParams::new(["demo"])).await.unwrap();
//! assert_eq!(granted.access, Access::Read);
//! let file = session.call(ReadParams::new("demo/hello.txt")).await.unwrap();
//! assert_eq!(file.bytes().unwrap(), b"hi");
//! # });
//! ```
//!
//! This module is below the operations: it imports only leaves.

use crate::method::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

mod notification;
mod params;
mod results;

pub use notification::{ChangeEvent, FileChange, NotificationKind};
pub use params::{
    ConsentParams, CreateParams, DeleteParams, ListParams, ReadParams, RenameParams, StatParams,
    UnwatchParams, WatchParams, WriteParams,
};
pub use results::{
    ConsentResult, CreateResult, DeleteResult, ListEntry, ListResult, ReadResult, RenameResult,
    RootInfo, RootsListResult, StatResult, WatchResult, WriteResult,
};

/// How file content travels in `files/read` and `files/write`.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The bytes as UTF-8 text.
    #[serde(rename = "utf-8")]
    Utf8,
    /// The bytes in standard base64 with padding.
    #[serde(rename = "base64")]
    Base64,
}

/// What kind of entry a path names, never following a final link.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (as listed; `files/stat` reports what it leads to).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl EntryType {
    /// The name the wire gives it (as its `Serialize` writes it).
    pub(crate) fn wire_name(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Directory => "directory",
            EntryType::Symlink => "symlink",
            EntryType::Other => "other",
        }
    }
}

/// `ping` and `files/unwatch` answer an empty object.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Empty {}

/// What `files/create` makes.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CreateKind {
    /// An empty file.
    File,
    /// An empty directory.
    Directory,
}

/// A request a host can make with a typed call ([`Broker::call`](crate::Broker::call)): the
/// params of one method, which names the method and the type of its result.
///
/// Implemented for each method's params in this module, and by nothing else: the broker
/// answers only these methods.
pub trait Call: Serialize + sealed::Sealed {
    /// The method these params are for.
    const METHOD: Method;
    /// What the method answers.
    type Result: DeserializeOwned;
}

mod sealed {
    // The usual seal: a public trait in a private module, so no type outside this crate
    // can be a `Call`.
    pub trait Sealed {}
}

/// Makes `$params` the call of `$method`, answered with `$result`.
macro_rules! calls {
    ($($params:ty => $method:ident, $result:ty;)*) => {$(
        impl sealed::Sealed for $params {}
        impl Call for $params {
            const METHOD: Method = Method::$method;
            type Result = $result;
        }
    )*};
}

calls! {
    ConsentParams => Consent, ConsentResult;
    ReadParams => Read, ReadResult;
    ListParams => List, ListResult;
    StatParams => Stat, StatResult;
    WriteParams => Write, WriteResult;
    CreateParams => Create, CreateResult;
    DeleteParams => Delete, DeleteResult;
    RenameParams => Rename, RenameResult;
    WatchParams => Watch, WatchResult;
    UnwatchParams => Unwatch, Empty;
}

/// `roots/list`, as a typed call.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct RootsList {}

/// `ping`, as a typed call.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ping {}

calls! {
    RootsList => RootsList, RootsListResult;
    Ping => Ping, Empty;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The listing writes an entry's type by hand: its names are serde's.
    #[test]
    fn entry_type_names_are_what_serde_writes() -> serde_json::Result<()> {
        use EntryType::*;
        for t in [File, Directory, Symlink, Other] {
            assert_eq!(serde_json::to_value(t)?, json!(t.wire_name()));
        }
        Ok(())
    }

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
