//! Every process a sandboxed server started ends with it. The proxy is the children's
//! subreaper, so a process whose parent exits (a daemon that double-forks and calls `setsid`
//! to leave the server's process group) becomes the proxy's child rather than init's; when
//! the server has exited, by itself or because it was ended, the proxy kills its children
//! until none are left. A process that outlived the server would keep the sandbox's access
//! (to a root just taken away, say) with nobody watching it.

use rustix::process::{Pid, Signal, WaitOptions, getpid, kill_process, wait};
use std::time::{Duration, Instant};

/// How long the proxy spends ending what the server left, in all.
const DEADLINE: Duration = Duration::from_secs(10);

/// Makes this process the subreaper of what it starts from now on.
pub(super) fn adopt_orphans() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(getpid()))?;
    Ok(())
}

/// Ends every descendant of this process: the whole tree is found from `/proc`, stopped
/// (SIGSTOP) until no new process appears in it, then killed, and the dead are reaped; again
/// until nothing is left or the deadline passes. Stopping first means a chain of processes,
/// or one that forks as fast as it can, cannot stay a step ahead. Called once the server has
/// exited, when the proxy's only descendants are what it left.
pub(super) fn end_descendants() {
    let me = getpid();
    let start = Instant::now();
    let mut told = false;
    while start.elapsed() < DEADLINE {
        let mut tree = descendants(me);
        if tree.is_empty() {
            return;
        }
        if !told {
            tracing::info!(
                count = tree.len(),
                "sandbox: ending what the server left running"
            );
            told = true;
        }
        // Freeze the tree until it stops growing.
        loop {
            for &p in &tree {
                let _ = kill_process(p, Signal::STOP);
            }
            let again = descendants(me);
            if again.iter().all(|p| tree.contains(p)) || start.elapsed() >= DEADLINE {
                break;
            }
            tree = again;
        }
        for &p in &tree {
            let _ = kill_process(p, Signal::KILL);
        }
        reap(start);
    }
    tracing::warn!("sandbox: processes the server started are still running");
}

/// Reaps the dead among this process's children, briefly waiting for the killed to die.
fn reap(start: Instant) {
    let pause = Instant::now();
    while start.elapsed() < DEADLINE && pause.elapsed() < Duration::from_millis(200) {
        match wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return,
        }
    }
}

/// Every process below `root`, from the parent ids in `/proc` (iteratively: no recursion on
/// a tree the server shaped).
fn descendants(root: Pid) -> Vec<Pid> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let pairs: Vec<(i32, i32)> = dir
        .filter_map(|e| {
            let e = e.ok()?;
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`: the command may hold spaces and parentheses, so
            // the fields are counted after the last `)`.
            let rest = stat.get(stat.rfind(')')? + 1..)?;
            let ppid: i32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root.as_raw_nonzero().get()];
    let mut i = 0;
    while let Some(&parent) = found.get(i) {
        for &(pid, ppid) in &pairs {
            if ppid == parent && !found.contains(&pid) {
                found.push(pid);
            }
        }
        i += 1;
    }
    found
        .into_iter()
        .skip(1)
        .filter_map(Pid::from_raw)
        .collect()
}
