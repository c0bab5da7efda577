//! What the audit log costs on small reads: the same pipelined 1 KiB reads from a sidecar
//! whose audit log is on (every line hash-chained and appended under the file's lock, with
//! each operation's CPU time measured) and from one run with `--no-audit`, in turns, in one
//! run. The per-operation accounting (CPU time, counters, budgets) runs in both, since it is
//! no option; what it adds is two reads of the thread's CPU clock per operation, which the
//! note of issue 31 measured against the build before it.

use crate::conn::{Conn, MOUNT};
use crate::fixtures::small_rel;
use crate::stats::{Row, Samples, load1};
use crate::{Bench, Res};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

/// Pipelined reads per sidecar and round.
const READS: usize = 20_000;

/// Per round: reads per second with the audit log on, with it off, and the ratio.
#[derive(Default)]
pub struct Audit {
    pub on: Samples,
    pub off: Samples,
    pub ratio: Samples,
    pub load: f64,
}

/// `fsbroker serve` with the audit log appended to `log` (`Some`) or off, after consent.
fn sidecar(b: &Bench, log: Option<&std::path::Path>, name: &str) -> Res<Conn> {
    let mut cmd = Command::new(&b.bin);
    cmd.arg("serve")
        .arg("--policy")
        .arg(&b.policy)
        .arg("--root")
        .arg(format!("{MOUNT}={}", b.data.display()))
        .args(["--consent", "auto"]);
    match log {
        Some(f) => cmd.arg("--audit-file").arg(f),
        None => cmd.arg("--no-audit"),
    };
    let mut c = Conn::spawn(cmd, &b.log(name))?;
    let r = c.call("files/consent", &json!({"requestedPaths": [MOUNT]}))?;
    if r.pointer("/result/granted") != Some(&Value::Bool(true)) {
        return Err(format!("consent refused: {r}").into());
    }
    Ok(c)
}

/// Reads per second of one sidecar, after a warm-up.
fn reads(b: &Bench, mut c: Conn) -> Res<f64> {
    let read = |i: usize| {
        let p = json!({"path": format!("{MOUNT}/{}", small_rel(i % b.cfg.small_n))});
        ("files/read", p)
    };
    c.pipelined(500, b.cfg.small_window, read, |c| c.recv_ok().map(drop))?;
    let took = c.pipelined(READS, b.cfg.small_window, read, |c| c.recv_ok().map(drop))?;
    c.close(Duration::from_secs(5))?;
    Ok(READS as f64 / took.as_secs_f64())
}

/// Rounds of audit on and off, alternating which goes first.
pub fn audit(b: &Bench) -> Res<Audit> {
    let mut a = Audit::default();
    let dir = tempfile::tempdir()?;
    for r in 0..b.cfg.rounds {
        eprintln!("audit overhead: round {} of {}", r + 1, b.cfg.rounds);
        let log = dir.path().join(format!("audit-{r}.jsonl"));
        let mut on = 0.0;
        let mut off = 0.0;
        for first in [r % 2 == 0, r % 2 != 0] {
            if first {
                on = reads(b, sidecar(b, Some(&log), "audit-on")?)?;
            } else {
                off = reads(b, sidecar(b, None, "audit-off")?)?;
            }
        }
        // The log must hold a line per read: a bench of a log that wrote nothing says nothing.
        let lines = std::fs::read_to_string(&log)?.lines().count();
        if lines < READS {
            return Err(format!("the audit log has {lines} lines for {READS} reads").into());
        }
        a.on.push(on);
        a.off.push(off);
        a.ratio.push(on / off);
    }
    a.load = load1();
    Ok(a)
}

/// The summary's row.
pub fn rows(a: Option<&Audit>) -> Vec<Row> {
    let Some(a) = a else { return Vec::new() };
    vec![Row {
        workload: format!(
            "`files/read` 1 KiB, pipelined ({READS} a round): audit log on (hash-chained, to a file) vs `--no-audit`"
        ),
        ours: format!("{} ops/s", a.on.show(0)),
        reference: format!("{} ops/s", a.off.show(0)),
        ratio: Some(a.ratio.clone()),
        target: None,
        target_text: String::new(),
        met: None,
        machine: format!("load {:.1}", a.load),
    }]
}
