//! What `/proc` says about other processes, read as untrusted input: every read is bounded,
//! every field is parsed without trusting its bytes, and a process that is gone or cannot be
//! read gives nothing rather than an error. A process can change its own command line and
//! name, so nothing here is taken as proof; the identity's proof is the files it digests.

use super::files::read_bounded;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The largest command line read: far more than any launcher's, and bounded so that a
/// process cannot make the broker read without end.
const MAX_CMDLINE: u64 = 128 << 10;
/// The most arguments kept of one command line.
const MAX_ARGS: usize = 4096;
/// The most processes one scan of `/proc` looks at.
pub(super) const MAX_PROCESSES: usize = 65_536;
/// The most parents followed up from a process.
const MAX_HOPS: usize = 16;
/// The most bytes of a process name shown.
const MAX_NAME: u64 = 64;

/// The parent of process `pid`, from the fourth field of `/proc/PID/stat` (read past the
/// last `)`, since the command name between parentheses may hold any byte).
pub(super) fn parent_of(pid: u32) -> Option<u32> {
    let stat = read_bounded(&PathBuf::from(format!("/proc/{pid}/stat")), 4096)?;
    let after = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(after + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// The argument vector of process `pid`, as its command line holds it (NUL-separated);
/// empty when it cannot be read (a kernel thread, a process gone).
pub(super) fn cmdline(pid: u32) -> Vec<OsString> {
    let Some(bytes) = read_bounded(&PathBuf::from(format!("/proc/{pid}/cmdline")), MAX_CMDLINE)
    else {
        return Vec::new();
    };
    // Each argument ends with a NUL; a process that rewrote its command line may have left
    // the last one without.
    let body = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    if body.is_empty() {
        return Vec::new();
    }
    body.split(|b| *b == 0)
        .take(MAX_ARGS)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// The working directory of process `pid`.
pub(super) fn cwd(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// The value of `name` in the environment process `pid` started with (bounded read).
pub(super) fn env_var(pid: u32, name: &str) -> Option<OsString> {
    let bytes = read_bounded(&PathBuf::from(format!("/proc/{pid}/environ")), MAX_CMDLINE)?;
    let prefix = format!("{name}=");
    bytes
        .split(|b| *b == 0)
        .find_map(|e| e.strip_prefix(prefix.as_bytes()))
        .map(|v| OsString::from_vec(v.to_vec()))
}

/// The name of process `pid` as a person is shown it: its `comm`, with control characters
/// left out (the process chooses it).
pub(super) fn name_of(pid: u32) -> Option<String> {
    let bytes = read_bounded(&PathBuf::from(format!("/proc/{pid}/comm")), MAX_NAME)?;
    let name: String = String::from_utf8_lossy(&bytes)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The names of the processes `pid` was started from, its parent first, up to and with
/// process 1, at most [`MAX_HOPS`] of them.
pub(crate) fn launched_by(pid: u32) -> Vec<String> {
    let mut names = Vec::new();
    let mut at = pid;
    for _ in 0..MAX_HOPS {
        let Some(parent) = parent_of(at).filter(|p| *p != 0 && *p != at) else {
            break;
        };
        names.push(name_of(parent).unwrap_or_else(|| format!("process {parent}")));
        if parent == 1 {
            break;
        }
        at = parent;
    }
    names
}

/// Every process's id, as `/proc` lists them now (at most [`MAX_PROCESSES`]).
pub(super) fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .take(MAX_PROCESSES)
        .collect()
}

/// The descendants of `pid`, nearest first: one scan of `/proc` for every process's parent
/// (no list of children is complete on every kernel), then a breadth-first walk from `pid`,
/// at most `depth` generations and `most` processes.
pub(super) fn descendants(pid: u32, depth: usize, most: usize) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in pids() {
        if let Some(parent) = parent_of(p) {
            children.entry(parent).or_default().push(p);
        }
    }
    let mut found = Vec::new();
    let mut generation = vec![pid];
    for _ in 0..depth {
        let mut next = Vec::new();
        for p in generation {
            for c in children.get(&p).into_iter().flatten() {
                if found.len() >= most {
                    return found;
                }
                found.push(*c);
                next.push(*c);
            }
        }
        if next.is_empty() {
            break;
        }
        generation = next;
    }
    found
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_child_and_its_child_are_found_below_their_launcher() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let me = std::process::id();
        // The shell starts its `sleep` when it gets to it: wait for it to be there (other
        // tests run processes of their own below this one).
        let child_of_sh = |below: &[u32]| {
            below
                .iter()
                .copied()
                .find(|p| parent_of(*p) == Some(sh.id()))
        };
        let mut below = Vec::new();
        for _ in 0..1000 {
            below = descendants(me, 4, 256);
            if child_of_sh(&below).is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(below.contains(&sh.id()), "{below:?}");
        let sleep =
            child_of_sh(&below).unwrap_or_else(|| panic!("no child of the shell in {below:?}"));
        assert_eq!(cmdline(sleep), vec![OsString::from("sleep"), "30".into()]);
        assert_eq!(name_of(sleep).as_deref(), Some("sleep"));
        let chain = launched_by(sleep);
        assert_eq!(chain.first().map(String::as_str), Some("sh"), "{chain:?}");
        assert!(
            chain.len() >= 2,
            "the test runner is above the shell: {chain:?}"
        );
        if chain.len() < MAX_HOPS {
            assert_eq!(
                chain.last(),
                name_of(1).as_ref(),
                "up to process 1: {chain:?}"
            );
        }
        assert!(
            !descendants(me, 1, 64).contains(&sleep),
            "one generation only"
        );
        kill(sleep);
        let _ = sh.kill();
        let _ = sh.wait();
    }

    /// Ends a test's own process `pid`, which is not its child.
    pub(crate) fn kill(pid: u32) {
        if let Some(p) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}
