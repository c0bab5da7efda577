//! What the server behind an attached proxy costs: the CPU time and memory of the processes
//! beneath the attached process, read from `/proc`.
//!
//! The attached process is the one the kernel names for the connection (its pid from the
//! socket's peer credentials), never one a peer claims, so a session cannot point `status`
//! at another process's figures. The processes beneath it are the server the proxy started
//! and whatever that server started in turn.

use serde_json::{Value, json};
use std::collections::HashMap;

/// Processes looked at in one reading, at most: `/proc` is as large as the system's process
/// table, and `status` must answer at once whatever runs beside it.
const MAX_PROCESSES: usize = 65_536;

/// The process table as `/proc` gave it at one moment: each process's children and CPU
/// ticks. Read once for a `status`, whatever the number of attached sessions in it.
pub(crate) struct Procs {
    children: HashMap<u32, Vec<u32>>,
    ticks: HashMap<u32, u64>,
}

impl Procs {
    /// The table now; `None` when `/proc` cannot be read.
    pub(crate) fn read() -> Option<Procs> {
        let mut procs = Procs {
            children: HashMap::new(),
            ticks: HashMap::new(),
        };
        for entry in std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .take(MAX_PROCESSES)
        {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            // A process may end between the listing and the reading: it is simply left out.
            let Some((ppid, cpu)) = std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .as_deref()
                .and_then(parse_stat)
            else {
                continue;
            };
            procs.children.entry(ppid).or_default().push(p);
            procs.ticks.insert(p, cpu);
        }
        Some(procs)
    }

    /// The processes beneath `pid` (not `pid` itself): how many, their CPU time (user and
    /// system, in milliseconds) and their resident memory (bytes) now.
    pub(crate) fn tree(&self, pid: u32) -> Value {
        // A walk with a stack and a seen set: a pid reused while the table was read cannot
        // make it loop.
        let mut stack: Vec<u32> = self.children.get(&pid).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::from([pid]);
        let (mut count, mut cpu_ticks, mut rss) = (0u64, 0u64, 0u64);
        while let Some(p) = stack.pop() {
            if !seen.insert(p) {
                continue;
            }
            count += 1;
            cpu_ticks = cpu_ticks.saturating_add(self.ticks.get(&p).copied().unwrap_or(0));
            rss = rss.saturating_add(resident(p).unwrap_or(0));
            if let Some(c) = self.children.get(&p) {
                stack.extend(c);
            }
        }
        let per_second = rustix::param::clock_ticks_per_second().max(1);
        json!({
            "processes": count,
            "cpuMs": cpu_ticks.saturating_mul(1000) / per_second,
            "rssBytes": rss,
        })
    }
}

/// The parent and the CPU ticks of a `/proc/PID/stat` line: its own (user and system) and
/// those of the children it has waited for, which are gone from the table but were the
/// server's all the same. The command name comes second, in parentheses, and may hold
/// anything, spaces and parentheses included: the fields are counted from the last `)`.
fn parse_stat(line: &str) -> Option<(u32, u64)> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().take(15).collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let mut ticks = 0u64;
    for i in 11..15 {
        ticks = ticks.saturating_add(fields.get(i)?.parse::<u64>().ok()?);
    }
    Some((ppid, ticks))
}

/// The resident memory of `pid`, in bytes (`/proc/PID/statm`, in pages).
fn resident(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(pages.saturating_mul(rustix::param::page_size() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_from_the_last_parenthesis() {
        let line = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 1 0";
        assert_eq!(parse_stat(line), Some((17, 290)));
        assert_eq!(parse_stat("1 (x) S"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_child_of_this_process_is_counted() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let t = Procs::read().unwrap().tree(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(t["processes"].as_u64().unwrap() >= 1, "{t}");
        assert!(t["rssBytes"].as_u64().unwrap() > 0, "{t}");
    }
}
