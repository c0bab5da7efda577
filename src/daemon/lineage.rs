//! Who is beneath a sandboxed session: the processes a sandboxing proxy started. Below
//! Landlock ABI 9 such a process can still connect to the daemon's socket; without the key it
//! gets nothing, but its connections would wait for a hello among the user's. So the daemon
//! keeps the process ids of the peers that sandbox (an attached session with a sandbox, a
//! proxy following the daemon's description for its sandbox's roots) and refuses, at once and
//! before it waits anywhere, a connection from any process beneath one of them. "Beneath" is
//! read from the kernel's process tree (`/proc/PID/stat`), never from anything the peer says;
//! a sandboxing proxy is its server's subreaper, so a process that double-forks stays beneath
//! it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most parents followed from a peer up to init: deeper than any real process tree.
const MAX_HOPS: usize = 4096;

/// The most processes whose verdict is remembered; past it the memory starts again.
const MAX_KNOWN: usize = 16384;

/// A process as the kernel names it for as long as it lives: its id and its start time (in
/// clock ticks since boot), so that an id used again by a later process is another key.
type Process = (u32, u64);

/// The process ids of the peers that sandbox, each with how many of its connections say so,
/// and what is known of the processes already placed in the tree.
#[derive(Debug, Default)]
pub(crate) struct Sandboxers {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Sandboxing peers, each with its registrations.
    pids: HashMap<u32, usize>,
    /// Processes placed already, each beneath a sandboxer (`true`) or not. Forgotten whenever
    /// the sandboxers change, so that a verdict is always one against today's set; a process
    /// and its children cost one read of `/proc` each, however deep the tree they sit in.
    known: HashMap<Process, bool>,
}

/// A registration of a sandboxing peer, undone when dropped (its connection ended).
pub(crate) struct Sandboxing {
    of: Arc<Sandboxers>,
    pid: u32,
}

impl Drop for Sandboxing {
    fn drop(&mut self) {
        let mut state = crate::locks::lock(&self.of.state);
        if let Some(n) = state.pids.get_mut(&self.pid) {
            *n -= 1;
            if *n == 0 {
                state.pids.remove(&self.pid);
                state.known.clear();
            }
        }
    }
}

impl Sandboxers {
    /// Counts `pid` as a sandboxing peer until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, pid: u32) -> Sandboxing {
        let mut state = crate::locks::lock(&self.state);
        *state.pids.entry(pid).or_insert(0) += 1;
        state.known.clear();
        Sandboxing {
            of: self.clone(),
            pid,
        }
    }

    /// Why a connection from `peer` (its process id from `SO_PEERCRED`, `None` when the
    /// kernel did not say) is refused before its hello; `None` when it may say one. A peer
    /// whose place in the tree cannot be read while some peer sandboxes is refused: it cannot
    /// be shown not to be beneath one.
    pub(crate) fn refuse(&self, peer: Option<u32>) -> Option<String> {
        let mut state = crate::locks::lock(&self.state);
        if state.pids.is_empty() {
            return None;
        }
        let unknown = || {
            Some(
                "refused: the peer's place in the process tree cannot be read, so it cannot \
                 be shown not to be a sandboxed server's process"
                    .to_owned(),
            )
        };
        let Some(peer) = peer.filter(|p| *p != 0) else {
            return unknown();
        };
        // Walked with the lock held: a verdict and the set it was reached against are one.
        let mut path: Vec<Process> = Vec::new();
        let mut pid = peer;
        let beneath = loop {
            let Some((parent, start)) = stat_of(pid) else {
                return unknown();
            };
            if let Some(&known) = state.known.get(&(pid, start)) {
                break known;
            }
            path.push((pid, start));
            if parent <= 1 {
                break false;
            }
            if state.pids.contains_key(&parent) {
                break true;
            }
            if path.len() >= MAX_HOPS {
                return unknown();
            }
            pid = parent;
        };
        if state.known.len() + path.len() > MAX_KNOWN {
            state.known.clear();
        }
        // The peer itself is a sandboxer's own process, which holds the key: never beneath.
        for (i, p) in path.into_iter().enumerate() {
            let me = i == 0 && state.pids.contains_key(&p.0);
            state.known.insert(p, beneath && !me);
        }
        (beneath && !state.pids.contains_key(&peer)).then(|| {
            "refused: this process descends from a proxy that sandboxes its server; a \
             sandboxed server's processes may not use the daemon's socket"
                .to_owned()
        })
    }
}

/// The parent and the start time of process `pid`, from the fourth and twenty-second fields
/// of `/proc/PID/stat` (read past the last `)`, since the command name between parentheses
/// may hold any byte).
fn stat_of(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(after + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    // Fields 5 to 21 lie between; the start time is the 22nd.
    let start = fields.nth(17)?.parse().ok()?;
    Some((parent, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_of_a_sandboxer_is_refused_and_the_sandboxer_itself_is_not() {
        let me = std::process::id();
        let s = Arc::new(Sandboxers::default());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.refuse(Some(child.id())), None, "nobody sandboxes yet");
        let guard = s.register(me);
        let m = s.refuse(Some(child.id())).unwrap_or_default();
        assert!(m.contains("sandboxes its server"), "{m}");
        assert_eq!(
            s.refuse(Some(me)),
            None,
            "the sandboxer itself holds the key"
        );
        assert!(s.refuse(None).is_some());
        drop(guard);
        assert_eq!(s.refuse(Some(child.id())), None);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn the_parent_is_read_from_the_kernel() {
        let me = stat_of(std::process::id()).map(|(p, _)| p);
        assert_eq!(me, Some(std::os::unix::process::parent_id()));
    }

    #[test]
    fn a_verdict_is_forgotten_when_the_sandboxers_change() {
        let s = Arc::new(Sandboxers::default());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        // Init's registration: every walk ends there, so nothing is beneath it; remembered.
        let other = s.register(1);
        assert_eq!(s.refuse(Some(child.id())), None);
        let me = s.register(std::process::id());
        assert!(
            s.refuse(Some(child.id())).is_some(),
            "a stale verdict was used"
        );
        drop(me);
        assert_eq!(s.refuse(Some(child.id())), None, "a stale verdict was used");
        drop(other);
        let _ = child.kill();
        let _ = child.wait();
    }
}
