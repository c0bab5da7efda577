//! What recovery costs: 10,000 small atomic overwrites, and the recursive delete of a
//! 100,000-entry tree, each with recovery on (the default: the old file hard-linked into the
//! store, the tree moved there, every change journaled) and off (`[recovery] enabled =
//! false`), in turns, in one run. The store is the run's own.

use crate::conn::{Conn, MOUNT};
use crate::fixtures::{text_kib, tree};
use crate::stats::{Row, Samples, load1};
use crate::{Bench, Res};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Overwrites per measurement.
const OVERWRITES: usize = 10_000;

/// Entries of the deleted tree (`FSBROKER_BENCH_DELETE_ENTRIES` changes it).
const DELETE_ENTRIES: usize = 100_000;

/// Per round: each workload on and off, and on ÷ off of their rates.
#[derive(Default)]
pub struct Recovery {
    pub writes_on: Samples,
    pub writes_off: Samples,
    pub writes_ratio: Samples,
    pub delete_on: Samples,
    pub delete_off: Samples,
    pub delete_ratio: Samples,
    pub entries: usize,
    pub load: f64,
}

/// The bench's policy with recovery on (into `store`) or off.
fn policy(b: &Bench, store: Option<&Path>) -> Res<PathBuf> {
    let base = std::fs::read_to_string(&b.policy)?;
    let (name, section) = match store {
        Some(s) => ("recovery-on.toml", format!("[recovery]\ndir = {:?}\n", s)),
        None => (
            "recovery-off.toml",
            "[recovery]\nenabled = false\n".to_owned(),
        ),
    };
    // The bench's policy names a store of its own: this one replaces that section.
    let base = base
        .split("[recovery]")
        .next()
        .unwrap_or_default()
        .to_owned();
    let path = b.policy.with_file_name(name);
    std::fs::write(&path, format!("{base}{section}"))?;
    Ok(path)
}

fn rel(round: usize, side: &str, i: usize) -> String {
    format!("rec{round}-{side}/d{:03}/f{:03}.txt", i / 100, i % 100)
}

/// Overwrites per second of `OVERWRITES` existing 1 KiB files, pipelined 16 deep.
fn overwrites(b: &Bench, policy: &Path, round: usize, side: &str) -> Res<f64> {
    for i in 0..OVERWRITES {
        let p = b.data.join(rel(round, side, i));
        if i % 100 == 0 {
            std::fs::create_dir_all(p.parent().ok_or("no parent")?)?;
        }
        std::fs::write(&p, text_kib(i))?;
    }
    let mut c = Conn::sidecar(&b.bin, &b.data, policy, true, &b.log("recovery-writes"))?;
    let took = c.pipelined(
        OVERWRITES,
        16,
        |i| {
            let path = format!("{MOUNT}/{}", rel(round, side, i));
            let content = String::from_utf8_lossy(&text_kib(i + 1)).into_owned();
            let p = json!({"path": path, "content": content, "overwrite": true});
            ("files/write", p)
        },
        |c| c.recv_ok().map(drop),
    )?;
    c.close(Duration::from_secs(5))?;
    std::fs::remove_dir_all(b.data.join(format!("rec{round}-{side}")))?;
    Ok(OVERWRITES as f64 / took.as_secs_f64())
}

/// Entries deleted per second by one recursive `files/delete` of a fresh tree.
fn delete(b: &Bench, policy: &Path, round: usize, side: &str, entries: usize) -> Res<f64> {
    let name = format!("del{round}-{side}");
    tree(&b.data.join(&name), entries)?;
    let mut c = Conn::sidecar(&b.bin, &b.data, policy, true, &b.log("recovery-delete"))?;
    let t = Instant::now();
    let r = c.call(
        "files/delete",
        &json!({"path": format!("{MOUNT}/{name}"), "recursive": true}),
    )?;
    let took = t.elapsed();
    if r.get("error").is_some() {
        return Err(format!("the delete failed: {r}").into());
    }
    c.close(Duration::from_secs(5))?;
    if b.data.join(&name).exists() {
        return Err("the tree is still there".into());
    }
    Ok(entries as f64 / took.as_secs_f64())
}

/// Rounds of recovery on and off, alternating which goes first.
pub fn recovery(b: &Bench) -> Res<Recovery> {
    let entries = std::env::var("FSBROKER_BENCH_DELETE_ENTRIES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(if b.cfg.quick { 10_000 } else { DELETE_ENTRIES });
    let mut out = Recovery {
        entries,
        ..Recovery::default()
    };
    let stores = tempfile::tempdir()?;
    let off = policy(b, None)?;
    for r in 0..b.cfg.slow_rounds {
        eprintln!("recovery: round {} of {}", r + 1, b.cfg.slow_rounds);
        let store = stores.path().join(format!("store-{r}"));
        let on = policy(b, Some(&store))?;
        let (mut w_on, mut w_off, mut d_on, mut d_off) = (0.0, 0.0, 0.0, 0.0);
        for first in [r % 2 == 0, r % 2 != 0] {
            if first {
                w_on = overwrites(b, &on, r, "on")?;
                d_on = delete(b, &on, r, "on", entries)?;
            } else {
                w_off = overwrites(b, &off, r, "off")?;
                d_off = delete(b, &off, r, "off", entries)?;
            }
        }
        // Recovery on must have kept what it claims: a bench of a store that kept nothing
        // says nothing.
        let kept = std::fs::read_dir(store.join("objects"))?.count();
        if kept != OVERWRITES + 1 {
            return Err(format!("the store kept {kept} objects, not {}", OVERWRITES + 1).into());
        }
        std::fs::remove_dir_all(&store)?;
        out.writes_on.push(w_on);
        out.writes_off.push(w_off);
        out.writes_ratio.push(w_on / w_off);
        out.delete_on.push(d_on);
        out.delete_off.push(d_off);
        out.delete_ratio.push(d_on / d_off);
    }
    out.load = load1();
    Ok(out)
}

/// The summary's rows.
pub fn rows(r: Option<&Recovery>) -> Vec<Row> {
    let Some(r) = r else { return Vec::new() };
    let row = |workload: String, on: &Samples, off: &Samples, ratio: &Samples, unit: &str| Row {
        workload,
        ours: format!("{} {unit}", on.show(0)),
        reference: format!("{} {unit}", off.show(0)),
        ratio: Some(ratio.clone()),
        target: None,
        target_text: String::new(),
        met: None,
        machine: format!("load {:.1}", r.load),
    };
    vec![
        row(
            format!(
                "{OVERWRITES} small atomic overwrites (1 KiB, 16 in flight): recovery on (old file hard-linked into the store, journaled) vs `[recovery] enabled = false`"
            ),
            &r.writes_on,
            &r.writes_off,
            &r.writes_ratio,
            "ops/s",
        ),
        row(
            format!(
                "recursive `files/delete` of a {}-entry tree: recovery on (moved into the store whole, measured, journaled) vs off (unlinked)",
                r.entries
            ),
            &r.delete_on,
            &r.delete_off,
            &r.delete_ratio,
            "entries/s",
        ),
    ]
}
