//! One server session: its grants, its cap on operations in flight and the order of its
//! requests.

use crate::consent::{Grant, Grants};
use crate::locks::lock;
use crate::turn::Orderer;
use crate::upload::Uploads;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Semaphore;

/// Longest session id taken from a server's self-reported name, in characters.
pub(crate) const MAX_SERVER_NAME_CHARS: usize = 128;

/// The session id used when neither the host nor the server's `serverInfo.name` gave one
/// (the proxy before the server's first brokered request, the rmcp adapter).
pub(crate) const DEFAULT_SERVER_ID: &str = "default";

/// The session id that a server's self-reported name (its `serverInfo.name`) gives: the name
/// with control characters removed, cut to [`MAX_SERVER_NAME_CHARS`] characters, or `None`
/// when nothing is left.
///
/// The name comes from the server, so it is cleaned before it names a session: it shows up
/// in logs and audit records, where control characters could forge lines or terminal
/// escapes, and a bounded length keeps one server from bloating every record.
pub(crate) fn server_name(raw: &str) -> Option<String> {
    let name: String = raw
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_SERVER_NAME_CHARS)
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The state the broker keeps for one server id.
#[derive(Debug)]
pub(crate) struct Session {
    server_id: String,
    grants: Mutex<Grants>,
    uploads: Mutex<Uploads>,
    pub(crate) in_flight: Arc<Semaphore>,
    /// Change notifications in flight; a permit travels with each one until the host drops it.
    pub(crate) notify_slots: Arc<Semaphore>,
    /// The order of the session's requests, whichever face or host task sends them.
    pub(crate) order: Arc<Orderer>,
}

impl Session {
    /// A new session holding the given standing grants.
    pub(crate) fn new(
        server_id: &str,
        standing: Vec<Grant>,
        max_in_flight: usize,
        watch_queue: usize,
    ) -> Self {
        let mut grants = Grants::default();
        for g in standing {
            grants.add(g);
        }
        Session {
            server_id: server_id.to_owned(),
            grants: Mutex::new(grants),
            uploads: Mutex::new(Uploads::default()),
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
            notify_slots: Arc::new(Semaphore::new(watch_queue)),
            order: Orderer::new(),
        }
    }

    /// The server id.
    pub(crate) fn server_id(&self) -> &str {
        &self.server_id
    }

    /// The grants, locked. A poisoned lock still holds consistent data (every change is a
    /// single push or retain), so it is used as is.
    pub(crate) fn grants(&self) -> MutexGuard<'_, Grants> {
        lock(&self.grants)
    }

    /// The staged uploads, locked.
    pub(crate) fn uploads(&self) -> MutexGuard<'_, Uploads> {
        lock(&self.uploads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_lose_control_characters_and_length() {
        assert_eq!(server_name("files").as_deref(), Some("files"));
        assert_eq!(server_name("notes\n\u{1b}[2J").as_deref(), Some("notes[2J"));
        assert_eq!(server_name("\u{7}"), None);
        assert_eq!(
            server_name("a\u{0}b\tc\r\n\u{1b}d\u{7f}e\u{85}f").as_deref(),
            Some("abcdef")
        );
        assert_eq!(server_name(""), None);
        assert_eq!(server_name("\n\t\u{1b}"), None);
        // The limit counts characters, not bytes, so a multi-byte name is never cut mid-char.
        let long = "é".repeat(MAX_SERVER_NAME_CHARS + 5);
        let cut = server_name(&long).unwrap_or_default();
        assert_eq!(cut.chars().count(), MAX_SERVER_NAME_CHARS);
        assert!(cut.chars().all(|c| c == 'é'));
        // Spaces are kept: they are printable, and the proxy has always kept them.
        assert_eq!(server_name(" my server ").as_deref(), Some(" my server "));
    }
}
