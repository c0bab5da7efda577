//! The summary table, the details of each workload, and the ratios for the plot.

use crate::reads::LargeRead;
use crate::small::{Listing, OpStats, Small};
use crate::stats::{Row, Samples};
use crate::writes::{Sessions, Writes};
use crate::{Bench, Res};
use std::fmt::Write as _;

/// The watch bench's latencies (`cargo bench --bench watch` with `FSBROKER_BENCH_JSON`).
#[derive(serde::Deserialize)]
pub struct Watch {
    /// Writes measured per window.
    pub n: usize,
    /// Default window (50 ms): median and p99, ms.
    pub median_ms: f64,
    /// See `median_ms`.
    pub p99_ms: f64,
    /// 5 ms window: median and p99, ms.
    pub fast_median_ms: f64,
    /// See `fast_median_ms`.
    pub fast_p99_ms: f64,
}

impl Watch {
    /// The watch bench's results, if it ran before this one.
    pub fn load(path: &std::path::Path) -> Option<Watch> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }
}

/// Everything measured.
pub struct Results {
    /// Large chunked read.
    pub large: Option<LargeRead>,
    /// Small reads and stats.
    pub small: Option<Small>,
    /// Recursive listing.
    pub listing: Option<Listing>,
    /// What the audit log costs on small reads.
    pub audit: Option<crate::audit::Audit>,
    /// What recovery costs on overwrites and a tree's delete.
    pub recovery: Option<crate::recovery::Recovery>,
    /// Writes and the upload.
    pub writes: Option<Writes>,
    /// Concurrent sessions' memory.
    pub sessions: Option<Sessions>,
    /// The latency attaching to the daemon adds.
    pub attach: Option<crate::daemon::Attach>,
    /// Concurrent sessions' memory in one daemon.
    pub daemon_sessions: Option<crate::daemon::DaemonSessions>,
    /// Watch latency.
    pub watch: Option<Watch>,
}

fn rows(b: &Bench, r: &Results) -> Vec<Row> {
    let c = &b.cfg;
    let mut out = Vec::new();
    let load = |l: f64| format!("load {l:.1}");
    let ratio_row = |workload: String,
                     ours: String,
                     reference: String,
                     ratio: &Samples,
                     target: Option<f64>,
                     target_text: &str,
                     l: f64| Row {
        workload,
        ours,
        reference,
        met: target.map(|t| ratio.median() >= t),
        ratio: Some(ratio.clone()),
        target,
        target_text: target_text.to_owned(),
        machine: load(l),
    };
    if let Some(lr) = &r.large {
        let what = format!(
            "large read, {} MiB in 1 MiB base64 chunks, {} in flight",
            c.large_mib, c.large_window
        );
        out.push(ratio_row(
            format!("{what} vs `base64`"),
            format!("{} MiB/s", lr.ours.show(0)),
            format!("{} MiB/s", lr.base64.show(0)),
            &lr.ratio_base64,
            None,
            "",
            lr.load,
        ));
        out.push(ratio_row(
            format!("{what} vs `base64` read through a pipe by the same client"),
            format!("{} MiB/s", lr.ours.show(0)),
            format!("{} MiB/s", lr.base64_client.show(0)),
            &lr.ratio_base64_client,
            Some(1.0),
            "≥ 1.0",
            lr.load,
        ));
        out.push(ratio_row(
            format!("{what} vs `base64` piped into `cat` (a pipe, as ours)"),
            format!("{} MiB/s", lr.ours.show(0)),
            format!("{} MiB/s", lr.base64_pipe.show(0)),
            &lr.ratio_base64_pipe,
            None,
            "",
            lr.load,
        ));
        let vs_cat: Samples = Samples(
            lr.ours
                .0
                .iter()
                .zip(&lr.cat.0)
                .map(|(o, k)| o / k)
                .collect(),
        );
        out.push(ratio_row(
            format!("{what} vs `cat`"),
            format!("{} MiB/s", lr.ours.show(0)),
            format!("{} MiB/s", lr.cat.show(0)),
            &vs_cat,
            None,
            "",
            lr.load,
        ));
        out.push(ratio_row(
            format!(
                "large read, {} MiB file vs official `read_media_file` (whole file)",
                c.peer_large_mib
            ),
            format!("{} MiB/s", lr.ours_small.show(0)),
            format!("{} MiB/s", lr.peer.show(0)),
            &lr.ratio_peer,
            None,
            "",
            lr.load,
        ));
        out.push(Row {
            workload: format!(
                "sidecar peak RSS (VmHWM) during the {} MiB read",
                c.large_mib
            ),
            ours: format!("{} MiB", lr.hwm_mib.show(1)),
            reference: format!(
                "official, {} MiB file: {} MiB",
                c.peer_large_mib,
                lr.peer_hwm_mib.show(0)
            ),
            ratio: None,
            target: None,
            target_text: "< 64 MiB".into(),
            met: Some(lr.hwm_mib.max() < 64.0),
            machine: load(lr.load),
        });
    }
    if let Some(s) = &r.small {
        for (k, (name, peer_tool)) in [
            ("`files/read` 1 KiB", "read_text_file"),
            ("`files/stat`", "get_file_info"),
        ]
        .iter()
        .enumerate()
        {
            let (o, p): (&OpStats, &OpStats) = (&s.ours[k], &s.peer[k]);
            let mut pipelined = ratio_row(
                format!(
                    "{name}, pipelined ({} in flight) vs official `{peer_tool}`",
                    c.small_window
                ),
                format!("{} ops/s", o.pipe_ops.show(0)),
                format!("{} ops/s", p.pipe_ops.show(0)),
                &s.ratio_pipe[k],
                Some(15.0),
                "≥ 15 and ≥ 100,000 ops/s",
                s.load,
            );
            pipelined.met =
                Some(s.ratio_pipe[k].median() >= 15.0 && o.pipe_ops.median() >= 100_000.0);
            out.push(pipelined);
            let mut row = ratio_row(
                format!("{name}, sequential: median latency vs official"),
                format!(
                    "{} µs (p99 {} µs)",
                    o.seq_median_us.show(0),
                    o.seq_p99_us.show(0)
                ),
                format!(
                    "{} µs (p99 {} µs)",
                    p.seq_median_us.show(0),
                    p.seq_p99_us.show(0)
                ),
                &s.ratio_seq[k],
                None,
                "",
                s.load,
            );
            if k == 0 {
                row.target_text = "ours p99 < 500 µs".into();
                row.met = Some(o.seq_p99_us.median() < 500.0);
            }
            out.push(row);
        }
    }
    if let Some(l) = &r.listing {
        let what = format!(
            "recursive listing, {} entries ({} pages of ≤ 10,000)",
            c.tree_entries, l.pages
        );
        let secs = |v: &Samples| format!("{} s", v.show(3));
        out.push(ratio_row(
            format!("{what} vs `find`"),
            secs(&l.ours),
            secs(&l.find),
            &l.ratio_find,
            None,
            "",
            l.load,
        ));
        out.push(ratio_row(
            format!("{what} vs `find -printf '%y %s %T@ %p'`"),
            secs(&l.ours),
            secs(&l.find_stat),
            &l.ratio_find_stat,
            Some(0.8),
            "≥ 0.8",
            l.load,
        ));
        out.push(ratio_row(
            format!("{what} vs official `directory_tree`"),
            secs(&l.ours),
            secs(&l.peer),
            &l.ratio_peer,
            None,
            "",
            l.load,
        ));
    }
    if let Some(w) = &r.writes {
        out.push(ratio_row(format!("{} small atomic `files/write` (1 KiB, 16 in flight) vs the same sequence done directly", c.write_n),
        format!("{} writes/s", w.ours.show(0)), format!("{} writes/s", w.raw.show(0)), &w.ratio, None, "", w.load));
        out.push(ratio_row(
            format!(
                "chunked upload, {} MiB in 1 MiB base64 chunks vs writing it directly",
                c.upload_mib
            ),
            format!("{} MiB/s", w.upload.show(0)),
            format!("{} MiB/s", w.upload_raw.show(0)),
            &w.upload_ratio,
            Some(0.5),
            "≥ 0.5",
            w.load,
        ));
    }
    if let Some(ss) = &r.sessions {
        out.push(Row {
            workload: format!(
                "{} concurrent sessions (one sidecar process each), memory",
                ss.n
            ),
            ours: format!(
                "VmHWM per process {} MiB (max {:.1}); all together VmRSS {:.0} MiB, Pss {:.0} MiB",
                ss.hwm_mib.show(1),
                ss.hwm_mib.max(),
                ss.rss_total_mib,
                ss.pss_total_mib
            ),
            reference: String::new(),
            ratio: None,
            target: None,
            target_text: String::new(),
            met: None,
            machine: String::new(),
        });
    }
    out.extend(crate::audit::rows(r.audit.as_ref()));
    out.extend(crate::recovery::rows(r.recovery.as_ref()));
    out.extend(crate::daemon::rows(
        r.attach.as_ref(),
        r.daemon_sessions.as_ref(),
        r.sessions.as_ref(),
    ));
    if let Some(wt) = &r.watch {
        out.push(Row {
            workload: format!(
                "watch: write → `notifications/files/changed` ({} writes, 50 ms coalescing)",
                wt.n
            ),
            ours: format!("median {:.1} ms, p99 {:.1} ms", wt.median_ms, wt.p99_ms),
            reference: format!(
                "5 ms window: median {:.1} ms, p99 {:.1} ms",
                wt.fast_median_ms, wt.fast_p99_ms
            ),
            ratio: None,
            target: None,
            target_text: "median < 100 ms".into(),
            met: Some(wt.median_ms < 100.0),
            machine: String::new(),
        });
    }
    out
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A one-line description of the machine.
pub fn machine() -> String {
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or_else(|| "?".to_owned(), |s| s.trim().to_owned());
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "{cpus} CPUs ({cpu}), {:.0} GiB RAM, Linux {}, node {node}; shared with other work (see the load column)",
        mem_kib as f64 / (1 << 20) as f64,
        read("/proc/sys/kernel/osrelease").trim()
    )
}

/// The Markdown section for BENCHMARKS.md.
pub fn markdown(b: &Bench, r: &Results, fixtures_s: f64, total_s: f64) -> Res<String> {
    let c = &b.cfg;
    let mut o = String::new();
    writeln!(
        o,
        "## Side by side: fsbroker, the raw filesystem and the official MCP filesystem server\n"
    )?;
    writeln!(o, "Machine: {}.\n", machine())?;
    writeln!(
        o,
        "Ratio = ours ÷ reference in speed (throughput, or the inverse of time), the median of per-round ratios with the range in brackets: above 1 we are faster. \
        Each value is the median over rounds (range, n = rounds); ours and its reference run in the same round, in rotating order. \
        The machine column is the 1-minute load average when the workload ended.\n"
    )?;
    writeln!(
        o,
        "| workload | ours | reference | ratio | target | met | machine |"
    )?;
    writeln!(o, "|---|---|---|---:|---|---|---|")?;
    for row in rows(b, r) {
        let ratio = row.ratio.as_ref().map_or_else(String::new, |s| s.show(2));
        let met = match row.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        writeln!(
            o,
            "| {} | {} | {} | {ratio} | {} | {met} | {} |",
            row.workload, row.ours, row.reference, row.target_text, row.machine
        )?;
    }
    writeln!(o, "\n![ratios](benches/ratios.png)\n")?;
    writeln!(o, "### How each workload is measured\n")?;
    writeln!(
        o,
        "- Our side is `target/release/fsbroker serve --policy P --root bench=DATA --consent auto` (`--writable` for writes), driven over its pipes by a single-threaded Rust client (`benches/perf/`) that sends `files/consent` first. \
        The policy P lifts the request rate limit (`requests_per_second = burst = 1000000`) and keeps its recovery store in the run's scratch directory; everything else is the default, including recovery (on) and the audit log (one JSON line per operation on stderr, here a file)."
    )?;
    writeln!(
        o,
        "- The official server is `@modelcontextprotocol/server-filesystem` 2026.8.31 (pinned in `benches/peer/package-lock.json`, installed by `benches/run`), started as `node dist/index.js DATA`, \
        driven through `initialize` and `tools/call` by the same client. Its paths are absolute host paths."
    )?;
    writeln!(
        o,
        "- Large read: each chunk response is parsed by the client (the JSON, with the base64 text borrowed, not decoded) and its size checked; time is first request to last answer. \
        `base64 FILE > /dev/null`, `base64 FILE | cat > /dev/null` and `cat FILE > /dev/null` read the same file from the page cache (the piped one pays, like ours, for moving the text through a pipe to another process). The official server has no ranged read: `read_media_file` returns a whole file as base64 in one message. \
        With the full {} MiB file it gave {}. So it is compared on a {} MiB file, beside ours reading that same file.",
        c.large_mib,
        r.large
            .as_ref()
            .map_or("(not run)", |l| l.peer_full.as_str()),
        c.peer_large_mib
    )?;
    writeln!(
        o,
        "- Small operations: {} files of 1 KiB text in directories of 100; per round, after 200 warm-up reads, {} sequential reads (one request, wait for the answer), {} sequential stats, then the same numbers pipelined. \
        The official server gets {} of each. Latencies are per request, send to parsed answer; p99 is nearest-rank within a round, then the median over rounds.",
        c.small_n, c.small_n, c.small_n, c.peer_small_n
    )?;
    writeln!(
        o,
        "- Listing: a tree of {} entries (10 directories × 10 subdirectories × empty files); ours is `files/list` recursive with `limit: 10000`, following `nextCursor`, every entry with type, size and mtime (one `fstatat` each). \
        `find` alone does not stat (it uses the directory entry type); `find -printf` with size and mtime does. The official `directory_tree` returns names and types as one indented JSON text.",
        c.tree_entries
    )?;
    writeln!(
        o,
        "- Writes: new 1 KiB files; each `files/write` is the broker's atomic sequence (temporary, fsync, rename, fsync of the directory), which the direct reference repeats with std::fs in this process. \
        The upload sends `final: false` chunks at increasing offsets and a `final: true` last chunk; the client encodes the chunks before the clock starts."
    )?;
    writeln!(
        o,
        "- Memory: VmHWM from `/proc/PID/status` at the end of each large read. Concurrent sessions: {} sidecar processes alive together, each after consent, 20 small reads, a stat, a listing and one 1 MiB base64 chunk; \
        per-process peak, and totals of VmRSS (shared pages counted in every process) and Pss (shared pages divided).",
        c.sessions
    )?;
    writeln!(
        o,
        "\nSizes: large {} MiB, small {} × 1 KiB, tree {} entries, writes {}, upload {} MiB, sessions {}; rounds: {} (writes, upload and the official large read: {}). Fixtures took {fixtures_s:.0} s; the whole bench {total_s:.0} s.{}\n",
        c.large_mib,
        c.small_n,
        c.tree_entries,
        c.write_n,
        c.upload_mib,
        c.sessions,
        c.rounds,
        c.slow_rounds,
        if c.quick {
            " **Quick run (FSBROKER_BENCH_QUICK): reduced sizes.**"
        } else {
            ""
        }
    )?;
    Ok(o)
}

/// The rows with a ratio, for the plot.
pub fn json(b: &Bench, r: &Results) -> Res<String> {
    let rows: Vec<Row> = rows(b, r)
        .into_iter()
        .filter(|row| row.ratio.is_some())
        .collect();
    Ok(serde_json::to_string_pretty(
        &serde_json::json!({"machine": machine(), "rows": rows}),
    )?)
}
