//! Warnings a peer can cause, said at most once a second: a process that connects by the
//! thousand (a sandboxed server without the key, say) must not grow the daemon's log, which
//! shares the state directory with the recovery store, without bound.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The least time between two warnings of one kind.
const EVERY: Duration = Duration::from_secs(1);

/// One kind of warning, with when it was last said and how many were held back since.
#[derive(Debug, Default)]
pub(crate) struct Hush {
    state: Mutex<(Option<Instant>, u64)>,
}

impl Hush {
    /// Says `message` at `warn` unless this kind was said less than a second ago; then counts
    /// it, and the next one said names how many were held back.
    pub(crate) fn warn(&self, message: &str) {
        let held = {
            let mut state = crate::locks::lock(&self.state);
            let now = Instant::now();
            match state.0 {
                Some(last) if now.duration_since(last) < EVERY => {
                    state.1 += 1;
                    return;
                }
                _ => {
                    state.0 = Some(now);
                    std::mem::take(&mut state.1)
                }
            }
        };
        if held == 0 {
            tracing::warn!("{message}");
        } else {
            tracing::warn!("{message} (and {held} more like it in the last second, not logged)");
        }
    }
}
