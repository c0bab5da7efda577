//! The one error type of the broker and its one table of wire codes.
//!
//! Every failure an operation can report is an [`Error`]: a [`ErrorKind`] plus the optional
//! `data` fields of the wire contract (`reason`, `path`, `limit`, `retryAfterMs`, `waitedMs`).
//! The mapping from kind to JSON-RPC integer code and `data.code` string lives in
//! [`ErrorKind::wire`], a `match` without a catch-all arm, so that adding a kind forces a
//! decision about its code.

use serde_json::{Map, Value, json};
use std::fmt;

mod reason;
pub use reason::{Reason, UnknownReason};

/// What went wrong, in the vocabulary of the wire contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The message was not valid JSON (-32700).
    ParseError,
    /// The message was JSON but not a valid JSON-RPC request (-32600).
    InvalidRequest,
    /// The method does not exist or is not offered by this broker (-32601).
    MethodNotFound,
    /// The params did not match the method's schema (-32602).
    InvalidParams,
    /// A fault inside the broker itself (-32603).
    Internal,
    /// The path does not exist.
    FileNotFound,
    /// The path is outside every root, or not covered by a grant, or the grant is read-only.
    PermissionDenied,
    /// The path is malformed or names something that cannot be used this way.
    InvalidPath,
    /// The filesystem operation failed.
    Io,
    /// The operation passed its time limit.
    Timeout,
    /// Another writer got there first, or the file is locked.
    ConcurrencyConflict,
    /// A size or count limit was exceeded.
    QuotaExceeded,
    /// The target exists and replacing it was not allowed.
    AlreadyExists,
    /// A directory was required.
    NotADirectory,
    /// A file was required.
    IsADirectory,
    /// A non-recursive delete met a directory that is not empty.
    DirectoryNotEmpty,
    /// Too many requests; retry later.
    RateLimited,
    /// The protocol revision asked for is not one this side speaks (-32022, the code of
    /// revision 2026-07-28); `data.supported` lists those it does. Only the proxy sends it.
    UnsupportedVersion,
}

/// The wire representation of an [`ErrorKind`]: integer code and, for filesystem errors, the
/// string code carried in `error.data.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireCode {
    /// The JSON-RPC `error.code`.
    pub code: i64,
    /// The seed's string code for `error.data.code`; `None` for JSON-RPC protocol faults.
    pub data_code: Option<&'static str>,
}

impl ErrorKind {
    /// Every kind, in the order of the wire contract's tables.
    pub const ALL: [ErrorKind; 18] = [
        ErrorKind::ParseError,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::InvalidParams,
        ErrorKind::Internal,
        ErrorKind::FileNotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::InvalidPath,
        ErrorKind::Io,
        ErrorKind::Timeout,
        ErrorKind::ConcurrencyConflict,
        ErrorKind::QuotaExceeded,
        ErrorKind::AlreadyExists,
        ErrorKind::NotADirectory,
        ErrorKind::IsADirectory,
        ErrorKind::DirectoryNotEmpty,
        ErrorKind::RateLimited,
        ErrorKind::UnsupportedVersion,
    ];

    /// The one table from kind to wire code.
    pub const fn wire(self) -> WireCode {
        const fn rpc(code: i64) -> WireCode {
            WireCode {
                code,
                data_code: None,
            }
        }
        const fn fs(code: i64, data_code: &'static str) -> WireCode {
            WireCode {
                code,
                data_code: Some(data_code),
            }
        }
        match self {
            ErrorKind::ParseError => rpc(-32700),
            ErrorKind::InvalidRequest => rpc(-32600),
            ErrorKind::MethodNotFound => rpc(-32601),
            ErrorKind::InvalidParams => rpc(-32602),
            ErrorKind::Internal => rpc(-32603),
            ErrorKind::FileNotFound => fs(-31001, "FILE_NOT_FOUND"),
            ErrorKind::PermissionDenied => fs(-31002, "PERMISSION_DENIED"),
            ErrorKind::InvalidPath => fs(-31003, "INVALID_PATH"),
            ErrorKind::Io => fs(-31004, "IO_ERROR"),
            ErrorKind::Timeout => fs(-31005, "TIMEOUT"),
            ErrorKind::ConcurrencyConflict => fs(-31006, "CONCURRENCY_CONFLICT"),
            ErrorKind::QuotaExceeded => fs(-31007, "QUOTA_EXCEEDED"),
            ErrorKind::AlreadyExists => fs(-31008, "ALREADY_EXISTS"),
            ErrorKind::NotADirectory => fs(-31009, "NOT_A_DIRECTORY"),
            ErrorKind::IsADirectory => fs(-31010, "IS_A_DIRECTORY"),
            ErrorKind::DirectoryNotEmpty => fs(-31011, "DIRECTORY_NOT_EMPTY"),
            ErrorKind::RateLimited => fs(-31012, "RATE_LIMITED"),
            ErrorKind::UnsupportedVersion => rpc(-32022),
        }
    }

    /// The kind whose JSON-RPC `error.code` is `code` (each kind has its own), or `None` for
    /// a code the broker never sends: what turns a JSON error back into its kind.
    pub fn from_code(code: i64) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.wire().code == code)
    }

    /// The outcome string used in audit lines: `data.code`, or a short name for protocol faults.
    pub const fn outcome(self) -> &'static str {
        match self.wire().data_code {
            Some(code) => code,
            None => match self {
                ErrorKind::ParseError => "PARSE_ERROR",
                ErrorKind::InvalidRequest => "INVALID_REQUEST",
                ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
                ErrorKind::InvalidParams => "INVALID_PARAMS",
                ErrorKind::UnsupportedVersion => "UNSUPPORTED_VERSION",
                _ => "INTERNAL_ERROR",
            },
        }
    }
}

impl fmt::Display for ErrorKind {
    /// The `data.code` (`PERMISSION_DENIED`), or the protocol fault's name (`INVALID_PARAMS`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.outcome())
    }
}

/// An error as the broker reports it: a kind, a short lower-case message, and the `data`
/// fields that apply.
///
/// The message and `path` never carry a host absolute path: `path` is always in mount form.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    reason: Option<Reason>,
    path: Option<String>,
    limit: Option<u64>,
    retry_after_ms: Option<u64>,
    /// In 32 bits, which keep the error under the 128 bytes past which every `Result` of it
    /// is costly to move (clippy's `result_large_err`); a wait is at most a day (the cap of
    /// `lock_wait_ms`), far below the 49 days they hold.
    waited_ms: Option<u32>,
    supported: Option<Vec<String>>,
}

impl Error {
    /// A new error of `kind` with a short lower-case message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            reason: None,
            path: None,
            limit: None,
            retry_after_ms: None,
            waited_ms: None,
            supported: None,
        }
    }

    /// `-32602` with a message naming what is wrong with the params.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidParams, message)
    }

    /// `PERMISSION_DENIED` with the given reason.
    pub fn denied(reason: Reason) -> Self {
        let message = match reason {
            Reason::OutsideRoot => "path is outside every root",
            Reason::NoConsent => "no consent covers this path",
            Reason::ReadOnly => "access is read-only",
            Reason::Revoked => "access was revoked",
            Reason::RootUnavailable => "the root is not at its configured path",
            Reason::Suspended => "the session is suspended for its security violations",
            _ => "permission denied",
        };
        Error::new(ErrorKind::PermissionDenied, message).with_reason(reason)
    }

    /// `INVALID_PATH` reason `malformed`, with the rule that was broken.
    pub fn malformed(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidPath, message).with_reason(Reason::Malformed)
    }

    /// `QUOTA_EXCEEDED` naming the limit's value.
    pub fn quota(message: impl Into<String>, limit: u64) -> Self {
        Error::new(ErrorKind::QuotaExceeded, message).with_limit(limit)
    }

    /// Sets `data.reason`.
    pub fn with_reason(mut self, reason: Reason) -> Self {
        self.reason = Some(reason);
        self
    }

    /// Sets `data.path`; callers pass the mount form only.
    pub fn with_path(mut self, mount_form: impl Into<String>) -> Self {
        self.path = Some(mount_form.into());
        self
    }

    /// Sets `data.path` unless a path is already recorded.
    pub fn or_path(self, mount_form: impl Into<String>) -> Self {
        if self.path.is_some() {
            self
        } else {
            self.with_path(mount_form)
        }
    }

    /// Sets `data.limit`.
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets `data.retryAfterMs`.
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// Sets `data.waitedMs`: how long the operation waited for a lock before it gave up
    /// (at most `u32::MAX`).
    pub fn with_waited_ms(mut self, ms: u64) -> Self {
        self.waited_ms = Some(u32::try_from(ms).unwrap_or(u32::MAX));
        self
    }

    /// Sets `data.supported`: the protocol revisions an `UnsupportedVersion` offers instead.
    pub fn with_supported(mut self, versions: &[&str]) -> Self {
        self.supported = Some(versions.iter().map(|v| (*v).to_owned()).collect());
        self
    }

    /// The `data.supported` of an `UnsupportedVersion`, if any.
    pub fn supported(&self) -> Option<&[String]> {
        self.supported.as_deref()
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The `data.reason`, if any.
    pub fn reason(&self) -> Option<Reason> {
        self.reason
    }

    /// The `data.path` (mount form), if any.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// The short message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `data.limit` (the limit a `QUOTA_EXCEEDED` passed), if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The `data.retryAfterMs` of a `RATE_LIMITED` or a `locked` conflict, if any.
    pub fn retry_after_ms(&self) -> Option<u64> {
        self.retry_after_ms
    }

    /// The `data.waitedMs` of a `locked` conflict (how long the lock was waited for), if any.
    pub fn waited_ms(&self) -> Option<u64> {
        self.waited_ms.map(u64::from)
    }

    /// The error a JSON-RPC error object (`{code, message, data?}`, as [`Error::to_json`]
    /// makes it) stands for; `None` when `code` is none of the broker's. A `data.reason`
    /// this version does not know is left out.
    pub fn from_json(error: &Value) -> Option<Error> {
        let kind = ErrorKind::from_code(error.get("code")?.as_i64()?)?;
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        let data = error.get("data");
        let field = |k: &str| data.and_then(|d| d.get(k));
        Some(Error {
            kind,
            message: message.to_owned(),
            reason: field("reason")
                .and_then(Value::as_str)
                .and_then(|r| r.parse().ok()),
            path: field("path").and_then(Value::as_str).map(str::to_owned),
            limit: field("limit").and_then(Value::as_u64),
            retry_after_ms: field("retryAfterMs").and_then(Value::as_u64),
            waited_ms: field("waitedMs")
                .and_then(Value::as_u64)
                .map(|ms| u32::try_from(ms).unwrap_or(u32::MAX)),
            supported: field("supported").and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            }),
        })
    }

    /// The JSON-RPC error object: `{code, message, data?}`.
    pub fn to_json(&self) -> Value {
        let wire = self.kind.wire();
        let mut data = Map::new();
        if let Some(code) = wire.data_code {
            data.insert("code".into(), json!(code));
        }
        if let Some(reason) = self.reason {
            data.insert("reason".into(), json!(reason.as_str()));
        }
        if let Some(path) = &self.path {
            data.insert("path".into(), json!(path));
        }
        if let Some(limit) = self.limit {
            data.insert("limit".into(), json!(limit));
        }
        if let Some(ms) = self.retry_after_ms {
            data.insert("retryAfterMs".into(), json!(ms));
        }
        if let Some(ms) = self.waited_ms {
            data.insert("waitedMs".into(), json!(ms));
        }
        if let Some(versions) = &self.supported {
            data.insert("supported".into(), json!(versions));
        }
        let mut obj = Map::new();
        obj.insert("code".into(), json!(wire.code));
        obj.insert("message".into(), json!(self.message));
        if !data.is_empty() {
            obj.insert("data".into(), Value::Object(data));
        }
        Value::Object(obj)
    }

    /// Classifies an I/O error from an operation on the mount-form `path`.
    ///
    /// Escapes are decided before any I/O by the resolver, so a `PermissionDenied` from the
    /// operating system here is the system's own refusal (`os_denied`).
    pub fn from_io(err: &std::io::Error, path: &str) -> Self {
        use std::io::ErrorKind as K;
        let raw = err.raw_os_error();
        let e = match err.kind() {
            K::NotFound => Error::new(ErrorKind::FileNotFound, "no such file or directory"),
            K::PermissionDenied => Error::new(ErrorKind::PermissionDenied, "permission denied")
                .with_reason(Reason::OsDenied),
            K::AlreadyExists => Error::new(ErrorKind::AlreadyExists, "already exists"),
            K::NotADirectory => Error::new(ErrorKind::NotADirectory, "not a directory"),
            K::IsADirectory => Error::new(ErrorKind::IsADirectory, "is a directory"),
            K::DirectoryNotEmpty => Error::new(ErrorKind::DirectoryNotEmpty, "directory not empty"),
            K::StorageFull => {
                Error::new(ErrorKind::Io, "no space left on device").with_reason(Reason::NoSpace)
            }
            K::TimedOut => Error::new(ErrorKind::Timeout, "operation timed out"),
            _ if raw == Some(rustix::io::Errno::DQUOT.raw_os_error()) => {
                Error::new(ErrorKind::Io, "disk quota exceeded").with_reason(Reason::NoSpace)
            }
            _ if raw == Some(rustix::io::Errno::FBIG.raw_os_error()) => {
                Error::new(ErrorKind::Io, "file too large").with_reason(Reason::FileTooLarge)
            }
            _ if raw == Some(rustix::io::Errno::ROFS.raw_os_error()) => {
                Error::new(ErrorKind::Io, "read-only filesystem")
                    .with_reason(Reason::ReadOnlyFilesystem)
            }
            _ if raw == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                Error::new(ErrorKind::Io, "too many levels of symbolic links")
                    .with_reason(Reason::SymlinkLoop)
            }
            _ => Error::new(ErrorKind::Io, "i/o error"),
        };
        e.with_path(path)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(path) = &self.path {
            write!(f, " ({path})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The result type of broker operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
