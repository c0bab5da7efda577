//! What a profile's rule allows beneath its path: the one vocabulary of the profile, the
//! launcher inference and the kernel rules.

/// What a rule allows beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(super) enum Right {
    /// Read files and list directories.
    Read,
    /// Read, list and execute.
    Exec,
    /// Everything: read, execute, write, create, remove, rename, truncate.
    Write,
    /// Read and write an existing device, as `/dev/null` needs.
    Device,
}

impl Right {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Exec => "read+exec",
            Right::Write => "read+write",
            Right::Device => "device",
        }
    }
}
