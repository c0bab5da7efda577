//! One server session: its grants and its cap on operations in flight.

use crate::consent::{Grant, Grants};
use crate::upload::Uploads;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Semaphore;

/// The state the broker keeps for one server id.
#[derive(Debug)]
pub struct Session {
    server_id: String,
    grants: Mutex<Grants>,
    uploads: Mutex<Uploads>,
    pub(crate) in_flight: Arc<Semaphore>,
    /// Change notifications in flight; a permit travels with each one until the host drops it.
    pub(crate) notify_slots: Arc<Semaphore>,
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
        }
    }

    /// The server id.
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// The grants, locked. A poisoned lock still holds consistent data (every change is a
    /// single push or retain), so it is used as is.
    pub(crate) fn grants(&self) -> MutexGuard<'_, Grants> {
        match self.grants.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The staged uploads, locked.
    pub(crate) fn uploads(&self) -> MutexGuard<'_, Uploads> {
        match self.uploads.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}
