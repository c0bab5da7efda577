//! The deadline of one operation, a leaf that the resolver, the watcher and the operations
//! share.

use crate::error::{Error, ErrorKind, Result};
use std::time::Instant;

/// The point in time by which an operation must finish. Blocking work checks it between
/// bounded steps so that a timed-out operation stops, not only its caller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// A deadline at `at`.
    pub(crate) fn at(at: Instant) -> Self {
        Deadline(at)
    }

    /// The instant itself, for a wait that must end by it (see [`crate::locks::Wait`]).
    pub(crate) fn instant(self) -> Instant {
        self.0
    }

    /// `TIMEOUT` once the deadline has passed.
    pub(crate) fn check(self) -> Result<()> {
        if Instant::now() >= self.0 {
            Err(Error::new(ErrorKind::Timeout, "operation timed out"))
        } else {
            Ok(())
        }
    }
}
