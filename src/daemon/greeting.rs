//! The connections that have not said hello yet: how many may wait, and which one goes when
//! too many do.

/// Most connections waiting to say hello; past it, one is dropped.
pub(super) const MAX_GREETING: usize = 64;

/// A connection waiting to say hello: its number, its peer's process id, its task.
pub(super) type Waiting = (u64, Option<u32>, tokio::task::AbortHandle);

/// Connections that have not proven the key yet. They hold no slot, and when there are too
/// many one is dropped: the oldest of the process that has the most waiting. A process
/// without the key (a sandboxed server may still connect) can neither fill the slots nor push
/// out a peer that holds it, which says hello at once from a process of its own.
#[derive(Default)]
pub(super) struct Greeting {
    /// The connections waiting, oldest first.
    pub(super) waiting: std::sync::Mutex<std::collections::VecDeque<Waiting>>,
    /// The number the next connection gets.
    pub(super) next: std::sync::atomic::AtomicU64,
}

impl Greeting {
    /// Connection `id` said hello: it is no longer one to drop.
    pub(super) fn done(&self, id: u64) {
        crate::locks::lock(&self.waiting).retain(|(i, _, _)| *i != id);
    }
}

/// Of `waiting`, the place of the one to drop: the oldest connection of the process with the
/// most connections waiting (the oldest process's, between equals).
pub(super) fn to_drop(waiting: &std::collections::VecDeque<Waiting>) -> Option<usize> {
    let mut counts: std::collections::HashMap<Option<u32>, usize> = Default::default();
    for (_, pid, _) in waiting {
        *counts.entry(*pid).or_insert(0) += 1;
    }
    let most = counts.values().copied().max()?;
    waiting
        .iter()
        .position(|(_, pid, _)| counts.get(pid) == Some(&most))
}
