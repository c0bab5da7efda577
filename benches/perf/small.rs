//! Small reads and stats (sequential latency, pipelined throughput) and the recursive
//! listing, each beside the official server (and the listing beside `find`).

use crate::conn::{Conn, MOUNT};
use crate::fixtures::small_rel;
use crate::stats::{Samples, load1, status_kib};
use crate::{Bench, Res};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

/// Whose server a measurement talks to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// `fsbroker serve`.
    Ours,
    /// The official filesystem server, through `tools/call`.
    Peer,
}

/// One kind of small operation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `files/read` / `read_text_file` of a 1 KiB file.
    Read,
    /// `files/stat` / `get_file_info`.
    Stat,
}

/// Per-round results of one (who, op) pair.
#[derive(Default)]
pub struct OpStats {
    /// Median sequential latency per round, µs.
    pub seq_median_us: Samples,
    /// 99th-percentile sequential latency per round, µs.
    pub seq_p99_us: Samples,
    /// Pipelined operations per second, per round.
    pub pipe_ops: Samples,
}

/// Results of the small-operation workload.
#[derive(Default)]
pub struct Small {
    /// Ours: read, stat.
    pub ours: [OpStats; 2],
    /// The official server: read, stat.
    pub peer: [OpStats; 2],
    /// Ours ÷ official in pipelined ops/s, per round: read, stat.
    pub ratio_pipe: [Samples; 2],
    /// Official ÷ ours in sequential median latency, per round: read, stat.
    pub ratio_seq: [Samples; 2],
    /// Peak RSS of our sidecar and of the official server after a round, MiB.
    pub hwm_mib: [Samples; 2],
    /// Load average after the workload.
    pub load: f64,
}

fn request(b: &Bench, who: Who, op: Op, i: usize) -> (&'static str, Value) {
    let rel = small_rel(i % b.cfg.small_n);
    match (who, op) {
        (Who::Ours, Op::Read) => ("files/read", json!({"path": format!("{MOUNT}/{rel}")})),
        (Who::Ours, Op::Stat) => ("files/stat", json!({"path": format!("{MOUNT}/{rel}")})),
        (Who::Peer, op) => {
            let tool = if op == Op::Read {
                "read_text_file"
            } else {
                "get_file_info"
            };
            let args = json!({"path": b.data.join(rel)});
            ("tools/call", json!({"name": tool, "arguments": args}))
        }
    }
}

#[derive(Deserialize)]
struct ToolResult {
    #[serde(default, rename = "isError")]
    is_error: bool,
    #[allow(dead_code)]
    content: IgnoredAny,
}

/// Reads one response and checks that it succeeded.
fn check(c: &mut Conn, who: Who) -> Res<()> {
    match who {
        Who::Ours => {
            c.recv_ok()?;
        }
        Who::Peer => match c.recv::<ToolResult>()? {
            (_, Ok(r)) if !r.is_error => {}
            (_, r) => return Err(format!("tools/call failed: {:?}", r.err()).into()),
        },
    }
    Ok(())
}

fn connect(b: &Bench, who: Who, name: &str) -> Res<Conn> {
    match who {
        Who::Ours => Conn::sidecar(&b.bin, &b.data, &b.policy, false, &b.log(name)),
        Who::Peer => Conn::peer(&b.node, &b.peer_script, &b.data, &b.log(name)),
    }
}

/// One round for one server: warm-up, then each op sequential and pipelined.
fn round(b: &Bench, who: Who, out: &mut [OpStats; 2]) -> Res<f64> {
    let n = if who == Who::Ours {
        b.cfg.small_n
    } else {
        b.cfg.peer_small_n
    };
    let mut c = connect(
        b,
        who,
        if who == Who::Ours {
            "small"
        } else {
            "peer-small"
        },
    )?;
    for i in 0..200 {
        let (m, p) = request(b, who, Op::Read, i);
        c.send(m, &p, true)?;
        check(&mut c, who)?;
    }
    for (k, op) in [Op::Read, Op::Stat].into_iter().enumerate() {
        let mut lat = Samples::default();
        for i in 0..n {
            let (m, p) = request(b, who, op, i);
            let t = Instant::now();
            c.send(m, &p, true)?;
            check(&mut c, who)?;
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        out[k].seq_median_us.push(lat.median());
        out[k].seq_p99_us.push(lat.percentile(99.0));
        let took = c.pipelined(
            n,
            b.cfg.small_window,
            |i| request(b, who, op, i),
            |c| check(c, who),
        )?;
        out[k].pipe_ops.push(n as f64 / took.as_secs_f64());
    }
    let hwm = status_kib(c.pid(), "VmHWM:").unwrap_or(0) as f64 / 1024.0;
    c.close(Duration::from_secs(5))?;
    Ok(hwm)
}

/// Rounds of ours and the official server, alternating which goes first.
pub fn small(b: &Bench) -> Res<Small> {
    let mut s = Small::default();
    for r in 0..b.cfg.rounds {
        eprintln!("small operations: round {} of {}", r + 1, b.cfg.rounds);
        let order = if r % 2 == 0 {
            [Who::Ours, Who::Peer]
        } else {
            [Who::Peer, Who::Ours]
        };
        for who in order {
            let (stats, slot) = match who {
                Who::Ours => (&mut s.ours, 0),
                Who::Peer => (&mut s.peer, 1),
            };
            let hwm = round(b, who, stats)?;
            s.hwm_mib[slot].push(hwm);
        }
        for k in 0..2 {
            let last = |v: &Samples| v.0.last().copied().unwrap_or(f64::NAN);
            s.ratio_pipe[k].push(last(&s.ours[k].pipe_ops) / last(&s.peer[k].pipe_ops));
            s.ratio_seq[k].push(last(&s.peer[k].seq_median_us) / last(&s.ours[k].seq_median_us));
        }
    }
    s.load = load1();
    Ok(s)
}

/// Results of the listing workload, in seconds per full listing.
#[derive(Default)]
pub struct Listing {
    /// Ours: recursive `files/list`, paged.
    pub ours: Samples,
    /// Pages ours took.
    pub pages: usize,
    /// `find DIR`.
    pub find: Samples,
    /// `find DIR -printf` with type, size and mtime (a stat per entry, as ours).
    pub find_stat: Samples,
    /// The official server's `directory_tree`.
    pub peer: Samples,
    /// Ours ÷ find in speed, per round.
    pub ratio_find: Samples,
    /// Ours ÷ find -printf in speed, per round.
    pub ratio_find_stat: Samples,
    /// Ours ÷ official in speed, per round.
    pub ratio_peer: Samples,
    /// Load average after the workload.
    pub load: f64,
}

#[derive(Deserialize)]
struct Page {
    entries: Vec<IgnoredAny>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

fn list_ours(b: &Bench) -> Res<(Duration, usize)> {
    let mut c = connect(b, Who::Ours, "list")?;
    let t = Instant::now();
    let (mut cursor, mut total, mut pages) = (None::<String>, 0, 0);
    loop {
        let mut p = json!({"path": format!("{MOUNT}/tree"), "recursive": true, "limit": 10_000});
        if let Some(cur) = &cursor {
            p["cursor"] = json!(cur);
        }
        c.send("files/list", &p, true)?;
        let page = match c.recv::<Page>()? {
            (_, Ok(page)) => page,
            (_, Err(e)) => return Err(format!("files/list failed: {e}").into()),
        };
        total += page.entries.len();
        pages += 1;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let took = t.elapsed();
    if total != b.cfg.tree_entries {
        return Err(format!("listed {total} entries of {}", b.cfg.tree_entries).into());
    }
    c.close(Duration::from_secs(5))?;
    Ok((took, pages))
}

fn list_peer(b: &Bench) -> Res<Duration> {
    let mut c = connect(b, Who::Peer, "peer-list")?;
    let args = json!({"path": b.data.join("tree")});
    let t = Instant::now();
    c.send(
        "tools/call",
        &json!({"name": "directory_tree", "arguments": args}),
        true,
    )?;
    check(&mut c, Who::Peer)?;
    let took = t.elapsed();
    c.close(Duration::from_secs(5))?;
    Ok(took)
}

fn find(b: &Bench, printf: bool) -> Res<Duration> {
    let mut cmd = Command::new("find");
    cmd.arg(b.data.join("tree")).arg("-mindepth").arg("1");
    if printf {
        cmd.args(["-printf", "%y %s %T@ %p\\n"]);
    }
    let t = Instant::now();
    let status = cmd.stdout(std::fs::File::create("/dev/null")?).status()?;
    let took = t.elapsed();
    if !status.success() {
        return Err(format!("find failed: {status}").into());
    }
    Ok(took)
}

/// Rounds of ours, both `find`s and the official server, rotating the order.
pub fn listing(b: &Bench) -> Res<Listing> {
    let mut l = Listing::default();
    find(b, true)?;
    for r in 0..b.cfg.rounds {
        eprintln!("listing: round {} of {}", r + 1, b.cfg.rounds);
        let (mut ours, mut f, mut fs, mut p) = (0.0, 0.0, 0.0, 0.0);
        for k in 0..4 {
            match (r + k) % 4 {
                0 => {
                    let (t, pages) = list_ours(b)?;
                    ours = t.as_secs_f64();
                    l.pages = pages;
                }
                1 => f = find(b, false)?.as_secs_f64(),
                2 => fs = find(b, true)?.as_secs_f64(),
                _ => p = list_peer(b)?.as_secs_f64(),
            }
        }
        l.ours.push(ours);
        l.find.push(f);
        l.find_stat.push(fs);
        l.peer.push(p);
        l.ratio_find.push(f / ours);
        l.ratio_find_stat.push(fs / ours);
        l.ratio_peer.push(p / ours);
    }
    l.load = load1();
    Ok(l)
}
