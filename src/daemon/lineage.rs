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

/// The process ids of the peers that sandbox, each with how many of its connections say so.
#[derive(Debug, Default)]
pub(crate) struct Sandboxers {
    pids: Mutex<HashMap<u32, usize>>,
}

/// A registration of a sandboxing peer, undone when dropped (its connection ended).
pub(crate) struct Sandboxing {
    of: Arc<Sandboxers>,
    pid: u32,
}

impl Drop for Sandboxing {
    fn drop(&mut self) {
        let mut pids = crate::locks::lock(&self.of.pids);
        if let Some(n) = pids.get_mut(&self.pid) {
            *n -= 1;
            if *n == 0 {
                pids.remove(&self.pid);
            }
        }
    }
}

impl Sandboxers {
    /// Counts `pid` as a sandboxing peer until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, pid: u32) -> Sandboxing {
        *crate::locks::lock(&self.pids).entry(pid).or_insert(0) += 1;
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
        let sandboxers: Vec<u32> = crate::locks::lock(&self.pids).keys().copied().collect();
        if sandboxers.is_empty() {
            return None;
        }
        let unknown = || {
            Some(
                "refused: the peer's place in the process tree cannot be read, so it cannot \
                 be shown not to be a sandboxed server's process"
                    .to_owned(),
            )
        };
        let Some(mut pid) = peer.filter(|p| *p != 0) else {
            return unknown();
        };
        for _ in 0..MAX_HOPS {
            let Some(parent) = parent_of(pid) else {
                return unknown();
            };
            if parent <= 1 {
                return None;
            }
            if sandboxers.contains(&parent) {
                return Some(format!(
                    "refused: this process descends from {parent}, a proxy that sandboxes its \
                     server; a sandboxed server's processes may not use the daemon's socket"
                ));
            }
            pid = parent;
        }
        unknown()
    }
}

/// The parent of process `pid`, from the fourth field of `/proc/PID/stat` (read past the last
/// `)`, since the command name between parentheses may hold any byte).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(after + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
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
        assert!(m.contains(&me.to_string()), "{m}");
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
        assert_eq!(
            parent_of(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
    }
}
