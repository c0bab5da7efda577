//! The reasons of the wire contract (`error.data.reason`): a closed set, each with its one
//! wire string.

use std::fmt;

/// Why a `PERMISSION_DENIED`, `INVALID_PATH`, `IO_ERROR`, `CONCURRENCY_CONFLICT` or
/// `INTERNAL_ERROR` happened.
///
/// Reasons are part of the wire contract (`error.data.reason`), so they are a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The path, or a symlink on the way, leads outside every root.
    OutsideRoot,
    /// No consent grant covers the path.
    NoConsent,
    /// The root or the grant allows reading only.
    ReadOnly,
    /// The grant that covered the path was revoked.
    Revoked,
    /// The operating system refused access (EACCES, EPERM).
    OsDenied,
    /// The path string is not a valid request path.
    Malformed,
    /// The path names a FIFO, socket, device or other non-regular file.
    NotRegularFile,
    /// The operation cannot act on a root itself.
    RootItself,
    /// The two paths of the call are in different roots.
    CrossRoot,
    /// The target lies inside the source.
    IntoItself,
    /// The bytes are not valid UTF-8 where UTF-8 was required.
    NotUtf8,
    /// The device is full, or the user's disk quota is used up.
    NoSpace,
    /// The file would pass the process's file-size limit.
    FileTooLarge,
    /// The filesystem is mounted read-only.
    ReadOnlyFilesystem,
    /// Too many levels of symbolic links.
    SymlinkLoop,
    /// The etag precondition did not hold.
    EtagMismatch,
    /// The file is locked by someone else.
    Locked,
    /// A chunked upload arrived at the wrong offset.
    UploadOffset,
    /// The root's directory is no longer at its configured path (moved, deleted, or another
    /// directory put there).
    RootUnavailable,
    /// The daemon holding the session's broker cannot be reached (`INTERNAL_ERROR`): the
    /// request was not done, or its answer was lost with the connection.
    BrokerUnavailable,
    /// The session was suspended for its security violations (`PERMISSION_DENIED`): every
    /// request is refused until the user resumes it.
    Suspended,
    /// The change would destroy content the broker cannot keep for the user to restore
    /// (`QUOTA_EXCEEDED`): too large to copy to the recovery store, or the store is full of
    /// changes too young to prune.
    NotRecoverable,
}

impl Reason {
    /// The wire string for `error.data.reason`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::OutsideRoot => "outside_root",
            Reason::NoConsent => "no_consent",
            Reason::ReadOnly => "read_only",
            Reason::Revoked => "revoked",
            Reason::OsDenied => "os_denied",
            Reason::Malformed => "malformed",
            Reason::NotRegularFile => "not_regular_file",
            Reason::RootItself => "root_itself",
            Reason::CrossRoot => "cross_root",
            Reason::IntoItself => "into_itself",
            Reason::NotUtf8 => "not_utf8",
            Reason::NoSpace => "no_space",
            Reason::FileTooLarge => "file_too_large",
            Reason::ReadOnlyFilesystem => "read_only_filesystem",
            Reason::SymlinkLoop => "symlink_loop",
            Reason::EtagMismatch => "etag_mismatch",
            Reason::Locked => "locked",
            Reason::UploadOffset => "upload_offset",
            Reason::RootUnavailable => "root_unavailable",
            Reason::BrokerUnavailable => "broker_unavailable",
            Reason::Suspended => "suspended",
            Reason::NotRecoverable => "not_recoverable",
        }
    }
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 22] = [
        Reason::OutsideRoot,
        Reason::NoConsent,
        Reason::ReadOnly,
        Reason::Revoked,
        Reason::OsDenied,
        Reason::Malformed,
        Reason::NotRegularFile,
        Reason::RootItself,
        Reason::CrossRoot,
        Reason::IntoItself,
        Reason::NotUtf8,
        Reason::NoSpace,
        Reason::FileTooLarge,
        Reason::ReadOnlyFilesystem,
        Reason::SymlinkLoop,
        Reason::EtagMismatch,
        Reason::Locked,
        Reason::UploadOffset,
        Reason::RootUnavailable,
        Reason::BrokerUnavailable,
        Reason::Suspended,
        Reason::NotRecoverable,
    ];
}

impl fmt::Display for Reason {
    /// The wire string (`no_consent`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is no [`Reason`]'s wire string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownReason(pub String);

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown reason {:?}", self.0)
    }
}

impl std::error::Error for UnknownReason {}

impl std::str::FromStr for Reason {
    type Err = UnknownReason;

    /// The reason whose wire string (`error.data.reason`) is `s`.
    fn from_str(s: &str) -> Result<Reason, UnknownReason> {
        Reason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownReason(s.to_owned()))
    }
}
