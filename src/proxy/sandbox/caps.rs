//! `--sandbox-limit`: caps on what the sandboxed server itself may use (CPU time, address
//! space, processes, file size), set by the helper as resource limits before it replaces
//! itself with the server, so that they hold for the server and everything it starts.
//!
//! The broker's budgets bound what a server does through it; these bound what it does on its
//! own: a loop that burns a core, an allocation that takes the machine's memory, a fork bomb,
//! a file written past reason in its private temporary directory.

use rustix::process::{Resource, Rlimit, setrlimit};
use serde::{Deserialize, Serialize};

/// The caps asked for; none by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Caps {
    /// CPU seconds (`RLIMIT_CPU`): the kernel sends SIGXCPU at the limit, and SIGKILL a
    /// second later (the hard limit is a second above the soft one, so that the server is
    /// told first).
    cpu_secs: Option<u64>,
    /// Address space in bytes (`RLIMIT_AS`): an allocation past it fails.
    memory_bytes: Option<u64>,
    /// Processes (`RLIMIT_NPROC`): counted by the kernel over all of the user's processes.
    processes: Option<u64>,
    /// Largest file it may write, in bytes (`RLIMIT_FSIZE`).
    file_bytes: Option<u64>,
}

impl Caps {
    /// Adds one `KIND=VALUE` of `--sandbox-limit`: `cpu=SECONDS`, `memory=SIZE`,
    /// `processes=N`, `file-size=SIZE`; a size may end in `K`, `M` or `G` (powers of 1024).
    pub(crate) fn add(&mut self, spec: &str) -> Result<(), String> {
        let (kind, value) = spec
            .split_once('=')
            .ok_or_else(|| format!("{spec:?}: expected KIND=VALUE"))?;
        let slot = match kind {
            "cpu" => &mut self.cpu_secs,
            "memory" => &mut self.memory_bytes,
            "processes" => &mut self.processes,
            "file-size" => &mut self.file_bytes,
            _ => {
                return Err(format!(
                    "{kind:?}: the limits are cpu, memory, processes and file-size"
                ));
            }
        };
        let sized = matches!(kind, "memory" | "file-size");
        let n = parse(value, sized).ok_or_else(|| {
            let unit = if sized { " (K, M or G may follow)" } else { "" };
            format!("{kind}={value:?}: expected a positive whole number{unit}")
        })?;
        *slot = Some(n);
        Ok(())
    }

    /// Whether `processes=` was asked for: the kernel does not hold root to it.
    pub(crate) fn caps_processes(&self) -> bool {
        self.processes.is_some()
    }

    /// Whether any cap was asked for.
    pub(crate) fn any(&self) -> bool {
        *self != Caps::default()
    }

    /// The caps as a person reads them: `cpu 10 s, memory 256 MiB`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.cpu_secs {
            parts.push(format!("cpu {n} s"));
        }
        if let Some(n) = self.memory_bytes {
            parts.push(format!("memory {}", size(n)));
        }
        if let Some(n) = self.processes {
            parts.push(format!("processes {n}"));
        }
        if let Some(n) = self.file_bytes {
            parts.push(format!("file size {}", size(n)));
        }
        parts.join(", ")
    }

    /// Sets the caps on the calling process, the hard limit with the soft one, so that the
    /// server cannot raise them past it.
    pub(crate) fn apply(&self) -> Result<(), String> {
        let caps = [
            (Resource::Cpu, self.cpu_secs, 1, "cpu"),
            (Resource::As, self.memory_bytes, 0, "memory"),
            (Resource::Nproc, self.processes, 0, "processes"),
            (Resource::Fsize, self.file_bytes, 0, "file-size"),
        ];
        for (resource, value, grace, name) in caps {
            let Some(n) = value else { continue };
            let limit = Rlimit {
                current: Some(n),
                maximum: Some(n.saturating_add(grace)),
            };
            setrlimit(resource, limit)
                .map_err(|e| format!("cannot set the sandbox limit {name}={n}: {e}"))?;
        }
        Ok(())
    }

    /// What to tell the user when the server ended with `code` (its exit code, or 128 plus
    /// the signal that ended it) under these caps; `None` when it ended well or had none.
    pub(crate) fn ending(&self, code: u8) -> Option<String> {
        const SIGKILL: u8 = 128 + 9;
        const SIGXCPU: u8 = 128 + 24;
        const SIGXFSZ: u8 = 128 + 25;
        if code == 0 || !self.any() {
            return None;
        }
        Some(match code {
            SIGXCPU => format!(
                "the server was stopped: it used its CPU time cap ({} s)",
                self.cpu_secs.unwrap_or(0)
            ),
            SIGXFSZ => format!(
                "the server was stopped: it wrote past its file size cap ({})",
                size(self.file_bytes.unwrap_or(0))
            ),
            SIGKILL if self.cpu_secs.is_some() => format!(
                "the server was killed, likely past its CPU time cap (caps: {})",
                self.describe()
            ),
            _ => format!(
                "the server ended with code {code} under the caps {}; an allocation or a \
                 start of a process refused at a cap ends many servers this way",
                self.describe()
            ),
        })
    }
}

/// A positive number, with a K, M or G suffix when `sized`.
fn parse(value: &str, sized: bool) -> Option<u64> {
    let (digits, shift) = match value.as_bytes().last() {
        Some(b'K' | b'k') if sized => (&value[..value.len() - 1], 10),
        Some(b'M' | b'm') if sized => (&value[..value.len() - 1], 20),
        Some(b'G' | b'g') if sized => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    let n: u64 = digits.parse().ok().filter(|n| *n > 0)?;
    n.checked_mul(1u64 << shift)
}

/// A size in the largest whole binary unit.
fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_with_their_units_and_bad_ones_are_named() {
        let mut c = Caps::default();
        assert!(!c.any());
        c.add("memory=256M").unwrap();
        c.add("cpu=10").unwrap();
        c.add("file-size=1g").unwrap();
        c.add("processes=64").unwrap();
        assert_eq!(
            c.describe(),
            "cpu 10 s, memory 256 MiB, processes 64, file size 1 GiB"
        );
        for bad in [
            "memory",
            "memory=",
            "memory=0",
            "cpu=10M",
            "disk=1",
            "memory=-1",
            "memory=99999999999G",
        ] {
            assert!(Caps::default().add(bad).is_err(), "{bad}");
        }
        assert_eq!(c.ending(0), None);
        assert!(c.ending(152).unwrap().contains("CPU time cap (10 s)"));
        assert!(c.ending(1).unwrap().contains("memory 256 MiB"));
        assert_eq!(Caps::default().ending(1), None);
    }
}
