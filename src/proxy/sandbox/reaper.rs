//! Every process a sandboxed server started ends with it. The proxy is the children's
//! subreaper, so a process whose parent exits (a daemon that double-forks and calls `setsid`
//! to leave the server's process group) becomes the proxy's child rather than init's; when
//! the server has exited, by itself or because it was ended, the proxy kills its children
//! until none are left. A process that outlived the server would keep the sandbox's access
//! (to a root just taken away, say) with nobody watching it.

use rustix::process::{Pid, Signal, WaitOptions, getpid, kill_process, waitpid};
use std::time::{Duration, Instant};

/// How many rounds of killing and reaping are tried: each round takes the children the
/// previous one orphaned.
const ROUNDS: usize = 64;

/// How long the killed children are waited for, in all.
const REAP: Duration = Duration::from_secs(5);

/// Makes this process the subreaper of what it starts from now on.
pub(super) fn adopt_orphans() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(getpid()))?;
    Ok(())
}

/// Kills and reaps every child of this process, round after round, until none is left.
/// Called once the server has exited, when the proxy's only children are what it left.
pub(super) fn end_descendants() {
    let me = getpid();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        let children = children_of(me);
        if children.is_empty() {
            return;
        }
        tracing::info!(
            count = children.len(),
            "sandbox: ending what the server left running"
        );
        for &c in &children {
            let _ = kill_process(c, Signal::KILL);
        }
        for &c in &children {
            while start.elapsed() < REAP {
                match waitpid(Some(c), WaitOptions::NOHANG) {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
    }
    tracing::warn!("sandbox: processes the server started are still running");
}

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // `pid (comm) state ppid ...`: the command may hold spaces and parentheses, so the
        // fields are counted after the last `)`.
        let rest = stat.get(stat.rfind(')')? + 1..)?;
        let ppid: i32 = rest.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent.as_raw_nonzero().get())
            .then(|| Pid::from_raw(pid))
            .flatten()
    })
    .collect()
}
