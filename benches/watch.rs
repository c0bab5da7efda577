//! `files/watch` benchmarks through the real sidecar (`target/release/fsbroker serve`).
//!
//! 1. Latency from a write made outside the broker (`std::fs::write`) to the
//!    `notifications/files/changed` for that path, with the default coalescing window (50 ms)
//!    and with `watch_coalesce_ms = 5`. The window is part of the latency by design.
//! 2. The cost of a recursive watch of a tree of 100 x 100 directories: the time for
//!    `files/watch` to answer, the sidecar's RSS before and after, and the inotify watches the
//!    process holds; whether writes made in the first moments after the answer are reported;
//!    the latency of a deep write once the watch has settled; and the `QUOTA_EXCEEDED`
//!    refusal when `max_kernel_watches` is below the tree's directory count.
//!
//! Run with `cargo build --release && cargo bench --bench watch` (or the whole harness with
//! `benches/run`). `FSBROKER_BENCH_WATCH_N` sets the number of timed writes per latency run
//! (default 200); `FSBROKER_BENCH_JSON=FILE` also writes the latencies there as JSON. The sidecar is taken from
//! `target/release/fsbroker` under the crate's directory; each run of it gets a fresh temporary
//! root, and its stderr (logs, audit) goes to a file there.

use serde_json::{Value, json};
use std::error::Error;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error>>;

/// The mount name every root is offered under.
const MOUNT: &str = "bench";
/// How long any one answer or notification may take before the bench gives up.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Writes made before the timed ones (first watcher events, caches).
const WARMUP: usize = 5;
/// The tree: `FANOUT` directories, each with `FANOUT` subdirectories.
const FANOUT: usize = 100;
/// `max_kernel_watches` for the refusal run: below the tree's directory count.
const SMALL_KERNEL_LIMIT: usize = 5_000;
/// Recursive-watch measurements, each with a fresh sidecar.
const TREE_RUNS: usize = 3;
/// Writes made right after a tree's `files/watch` answers, one every `EARLY_GAP`.
const EARLY_WRITES: usize = 30;
/// The gap between early writes.
const EARLY_GAP: Duration = Duration::from_millis(10);
/// How long to wait for the early writes' notifications.
const EARLY_WAIT: Duration = Duration::from_millis(1500);

/// One running `fsbroker serve`, its stdout read by a thread that stamps each line on arrival.
struct Sidecar {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<(Instant, String)>,
    next_id: u64,
    /// Notifications read while waiting for something else.
    other_notifications: usize,
}

impl Sidecar {
    fn start(bin: &Path, root: &Path, policy: Option<&Path>, stderr: &Path) -> Res<Sidecar> {
        let mut cmd = Command::new(bin);
        cmd.arg("serve");
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        cmd.arg("--root")
            .arg(format!("{MOUNT}={}", root.display()))
            .args(["--writable", "--consent", "auto"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr)?);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Ok(Sidecar {
            child,
            stdin: Some(stdin),
            lines,
            next_id: 1,
            other_notifications: 0,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next message and when its line arrived.
    fn next(&mut self) -> Res<(Instant, Value)> {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok((at, line)) => Ok((at, serde_json::from_str(&line)?)),
            Err(RecvTimeoutError::Timeout) => Err(format!("no message within {TIMEOUT:?}").into()),
            Err(RecvTimeoutError::Disconnected) => {
                Err("the sidecar closed its output (see its stderr log)".into())
            }
        }
    }

    /// Sends a request and returns its response (`result` or `error` inside) with the time
    /// from sending to the response's arrival.
    fn call(&mut self, method: &str, params: Value) -> Res<(Value, Duration)> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        let sent = Instant::now();
        writeln!(stdin, "{msg}")?;
        stdin.flush()?;
        loop {
            let (at, v) = self.next()?;
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok((v, at.saturating_duration_since(sent)));
            }
            self.other_notifications += 1;
        }
    }

    /// Like [`Sidecar::call`], but a JSON-RPC error is an error.
    fn call_ok(&mut self, method: &str, params: Value) -> Res<(Value, Duration)> {
        let (v, took) = self.call(method, params)?;
        match v.get("result") {
            Some(r) => Ok((r.clone(), took)),
            None => Err(format!("{method} failed: {v}").into()),
        }
    }

    fn consent(&mut self) -> Res<()> {
        let params = json!({"requestedPaths": [MOUNT], "access": "write"});
        let (r, _) = self.call_ok("files/consent", params)?;
        if r.get("granted") != Some(&Value::Bool(true)) {
            return Err(format!("consent refused: {r}").into());
        }
        Ok(())
    }

    /// Reads messages until the change notification for `path` arrives; returns its arrival.
    fn wait_change(&mut self, path: &str) -> Res<Instant> {
        loop {
            let (at, v) = self.next()?;
            let params = v.get("params");
            if v.get("method").and_then(Value::as_str) == Some("notifications/files/changed")
                && params.and_then(|p| p.get("path")).and_then(Value::as_str) == Some(path)
            {
                return Ok(at);
            }
            self.other_notifications += 1;
        }
    }

    /// Every message that arrives within `d`.
    fn drain_for(&mut self, d: Duration) -> Res<Vec<(Instant, Value)>> {
        let until = Instant::now() + d;
        let mut out = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) => out.push((at, serde_json::from_str(&line)?)),
                Err(RecvTimeoutError::Timeout) => return Ok(out),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the sidecar closed its output (see its stderr log)".into());
                }
            }
        }
    }

    /// Closes stdin (end of the session) and returns how long the process took to exit.
    fn finish(mut self) -> Res<Duration> {
        let t = Instant::now();
        drop(self.stdin.take());
        let status = self.child.wait()?;
        let took = t.elapsed();
        if !status.success() {
            return Err(format!("sidecar exited with {status}").into());
        }
        Ok(took)
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS and VmHWM of a process, in KiB.
#[derive(Clone, Copy)]
struct Mem {
    rss_kib: u64,
    hwm_kib: u64,
}

fn mem(pid: u32) -> Res<Mem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Res<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| format!("{name} missing from /proc/{pid}/status"))?;
        let kib = line
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("bad line: {line}"))?;
        Ok(kib.parse()?)
    };
    Ok(Mem {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// Inotify watches a process holds: the `inotify wd:` lines in its fdinfo.
fn inotify_watches(pid: u32) -> Res<usize> {
    let mut watches = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        // An fd may close while we look: skip it.
        let Ok(text) = std::fs::read_to_string(entry?.path()) else {
            continue;
        };
        watches += text
            .lines()
            .filter(|l| l.starts_with("inotify wd:"))
            .count();
    }
    Ok(watches)
}

/// Inotify fds of a process (also those holding no watch).
fn inotify_instances(pid: u32) -> Res<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        if std::fs::read_link(entry?.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify") {
            n += 1;
        }
    }
    Ok(n)
}

/// (inotify fds, inotify watches) of a process.
fn inotify(pid: u32) -> Res<(usize, usize)> {
    Ok((inotify_instances(pid)?, inotify_watches(pid)?))
}

struct Latency {
    label: String,
    sorted_ms: Vec<f64>,
    notifications: usize,
}

impl Latency {
    fn min(&self) -> f64 {
        self.sorted_ms.first().copied().unwrap_or(f64::NAN)
    }
    fn max(&self) -> f64 {
        self.sorted_ms.last().copied().unwrap_or(f64::NAN)
    }
    fn median(&self) -> f64 {
        let n = self.sorted_ms.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => self.sorted_ms[n / 2],
            _ => (self.sorted_ms[n / 2 - 1] + self.sorted_ms[n / 2]) / 2.0,
        }
    }
    /// Nearest-rank percentile.
    fn percentile(&self, p: f64) -> f64 {
        let n = self.sorted_ms.len();
        if n == 0 {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        self.sorted_ms[rank.clamp(1, n) - 1]
    }
}

fn write_policy(dir: &Path, limits: &str) -> Res<PathBuf> {
    let path = dir.join("policy.toml");
    std::fs::write(&path, format!("[limits]\n{limits}\n"))?;
    Ok(path)
}

/// N writes of new files in a watched root; each latency is from the return of
/// `std::fs::write` to the arrival of the notification line for that path.
fn latency_run(bin: &Path, n: usize, label: &str, limits: Option<&str>) -> Res<Latency> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    std::fs::create_dir(&root)?;
    let policy = limits.map(|l| write_policy(tmp.path(), l)).transpose()?;
    let mut sc = Sidecar::start(
        bin,
        &root,
        policy.as_deref(),
        &tmp.path().join("stderr.log"),
    )?;
    sc.consent()?;
    let params = json!({"path": MOUNT, "recursive": true});
    sc.call_ok("files/watch", params)?;
    for i in 0..WARMUP {
        let name = format!("warm{i}.txt");
        std::fs::write(root.join(&name), b"warm-up")?;
        sc.wait_change(&format!("{MOUNT}/{name}"))?;
    }
    let mut ms = Vec::with_capacity(n);
    let before = sc.other_notifications;
    for i in 0..n {
        let name = format!("f{i:05}.txt");
        std::fs::write(root.join(&name), b"benchmark payload\n")?;
        let written = Instant::now();
        let arrived = sc.wait_change(&format!("{MOUNT}/{name}"))?;
        ms.push(arrived.saturating_duration_since(written).as_secs_f64() * 1e3);
    }
    // Let late notifications (a `modified` in a later window) come in, to count them.
    std::thread::sleep(Duration::from_millis(200));
    while let Ok((_, line)) = sc.lines.try_recv() {
        if line.contains("notifications/files/changed") {
            sc.other_notifications += 1;
        }
    }
    let extra = sc.other_notifications - before;
    sc.finish()?;
    ms.sort_by(f64::total_cmp);
    Ok(Latency {
        label: label.to_owned(),
        sorted_ms: ms,
        notifications: n + extra,
    })
}

/// Creates `root` with `FANOUT` x `FANOUT` directories; returns the directories in the tree
/// (the root included).
fn make_tree(root: &Path) -> Res<usize> {
    std::fs::create_dir(root)?;
    let mut dirs = 1;
    for i in 0..FANOUT {
        let top = root.join(format!("d{i:02}"));
        std::fs::create_dir(&top)?;
        dirs += 1;
        for j in 0..FANOUT {
            std::fs::create_dir(top.join(format!("e{j:02}")))?;
            dirs += 1;
        }
    }
    Ok(dirs)
}

struct TreeRun {
    watch: Duration,
    before: Mem,
    after: Mem,
    /// At the end of the run, after every notification.
    end: Mem,
    inotify_before: (usize, usize),
    inotify_after: (usize, usize),
    /// Early writes with no notification (and when they were made, after the answer).
    early_lost: Vec<Duration>,
    /// `overflow` notifications received while waiting for the early writes.
    early_overflows: usize,
    deep_write: Duration,
    exit: Duration,
}

fn early_path(i: usize) -> String {
    format!(
        "d{:02}/e{:02}/early-{i}.txt",
        (i * 37) % FANOUT,
        (i * 53) % FANOUT
    )
}

fn tree_run(bin: &Path, root: &Path, log: &Path) -> Res<TreeRun> {
    let mut sc = Sidecar::start(bin, root, None, log)?;
    sc.consent()?;
    let pid = sc.pid();
    let before = mem(pid)?;
    let inotify_before = inotify(pid)?;
    let (_, watch) = sc.call_ok("files/watch", json!({"path": MOUNT, "recursive": true}))?;
    let answered = Instant::now();
    let after = mem(pid)?;
    // Writes in the moments after the answer: is every one of them reported?
    let mut early = Vec::with_capacity(EARLY_WRITES);
    for i in 0..EARLY_WRITES {
        std::fs::write(root.join(early_path(i)), b"early")?;
        early.push(answered.elapsed());
        std::thread::sleep(EARLY_GAP);
    }
    let inotify_after = inotify(pid)?;
    let seen = sc.drain_for(EARLY_WAIT)?;
    let param = |v: &Value, key: &str| -> Option<String> {
        v.get("params")?.get(key)?.as_str().map(str::to_owned)
    };
    let paths: std::collections::HashSet<String> =
        seen.iter().filter_map(|(_, v)| param(v, "path")).collect();
    let early_overflows = seen
        .iter()
        .filter(|(_, v)| param(v, "event").as_deref() == Some("overflow"))
        .count();
    let early_lost = (0..EARLY_WRITES)
        .filter(|&i| !paths.contains(&format!("{MOUNT}/{}", early_path(i))))
        .map(|i| early[i])
        .collect();
    // Steady state: a write two levels down is reported.
    let deep = root.join("d57").join("e42").join("probe.txt");
    std::fs::write(&deep, b"probe")?;
    let written = Instant::now();
    let arrived = sc
        .wait_change(&format!("{MOUNT}/d57/e42/probe.txt"))
        .map_err(|e| format!("waiting for the deep write's notification: {e}"))?;
    let end = mem(pid)?;
    let exit = sc.finish()?;
    std::fs::remove_file(&deep)?;
    for i in 0..EARLY_WRITES {
        std::fs::remove_file(root.join(early_path(i)))?;
    }
    Ok(TreeRun {
        watch,
        before,
        after,
        end,
        inotify_before,
        inotify_after,
        early_lost,
        early_overflows,
        deep_write: arrived.saturating_duration_since(written),
        exit,
    })
}

struct Refusal {
    code: String,
    limit: String,
    took: Duration,
    inotify_after: (usize, usize),
}

fn refusal_run(bin: &Path, root: &Path, dir: &Path) -> Res<Refusal> {
    let policy = write_policy(dir, &format!("max_kernel_watches = {SMALL_KERNEL_LIMIT}"))?;
    let mut sc = Sidecar::start(bin, root, Some(&policy), &dir.join("refusal.log"))?;
    sc.consent()?;
    let pid = sc.pid();
    let (v, took) = sc.call("files/watch", json!({"path": MOUNT, "recursive": true}))?;
    let data = v
        .get("error")
        .and_then(|e| e.get("data"))
        .ok_or_else(|| format!("expected QUOTA_EXCEEDED, got {v}"))?;
    let code = data.get("code").and_then(Value::as_str).unwrap_or_default();
    if code != "QUOTA_EXCEEDED" {
        return Err(format!("expected QUOTA_EXCEEDED, got {v}").into());
    }
    let limit = data.get("limit").map(Value::to_string).unwrap_or_default();
    let inotify_after = inotify(pid)?;
    let code = code.to_owned();
    sc.finish()?;
    Ok(Refusal {
        code,
        limit,
        took,
        inotify_after,
    })
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() -> Res<()> {
    // `cargo bench` passes `--bench`; a filter argument is not supported and ignored.
    let started = Instant::now();
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/fsbroker");
    if !bin.is_file() {
        return Err(format!(
            "{} is missing: build the sidecar first with `cargo build --release` (the bench \
             looks in the crate's own target/ directory, whatever CARGO_TARGET_DIR says)",
            bin.display()
        )
        .into());
    }
    let n: usize =
        match std::env::var("FSBROKER_BENCH_WATCH_N") {
            Ok(s) => s.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!("FSBROKER_BENCH_WATCH_N must be a positive integer: {s:?}")
            })?,
            Err(_) => 200,
        };
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = read_trim("/proc/sys/kernel/osrelease");
    let max_user_watches = read_trim("/proc/sys/fs/inotify/max_user_watches");
    let max_user_instances = read_trim("/proc/sys/fs/inotify/max_user_instances");

    eprintln!("latency, default window: {n} writes ...");
    let default = latency_run(&bin, n, "default (`watch_coalesce_ms = 50`)", None)?;
    eprintln!("latency, 5 ms window: {n} writes ...");
    let fast = latency_run(
        &bin,
        n,
        "policy `watch_coalesce_ms = 5`",
        Some("watch_coalesce_ms = 5"),
    )?;

    eprintln!("tree: creating {FANOUT} x {FANOUT} directories ...");
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("tree");
    let t = Instant::now();
    let dirs = make_tree(&root)?;
    let created = t.elapsed();
    let mut runs = Vec::with_capacity(TREE_RUNS);
    for i in 0..TREE_RUNS {
        eprintln!("tree: recursive watch, run {} of {TREE_RUNS} ...", i + 1);
        runs.push(tree_run(
            &bin,
            &root,
            &tmp.path().join(format!("tree{i}.log")),
        )?);
    }
    eprintln!("tree: refusal with max_kernel_watches = {SMALL_KERNEL_LIMIT} ...");
    let refusal = refusal_run(&bin, &root, tmp.path())?;

    let mut out = String::new();
    writeln!(out, "\n## fsbroker watch benchmark\n")?;
    writeln!(
        out,
        "Machine: {cpus} CPUs (nproc), kernel {kernel}; inotify max_user_watches = \
         {max_user_watches}, max_user_instances = {max_user_instances}. Sidecar: {}.\n",
        bin.display()
    )?;
    writeln!(
        out,
        "### Write -> `notifications/files/changed` latency ({n} new files, after {WARMUP} \
         warm-up writes)\n"
    )?;
    writeln!(
        out,
        "| window | median ms | p99 ms | min ms | max ms | notifications |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|")?;
    for l in [&default, &fast] {
        writeln!(
            out,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            l.label,
            l.median(),
            l.percentile(99.0),
            l.min(),
            l.max(),
            l.notifications
        )?;
    }
    writeln!(
        out,
        "\nLatency is from the return of `std::fs::write` to the arrival of the notification \
         line on the sidecar's stdout; the coalescing window is included by design. p99 is \
         nearest-rank.\n"
    )?;
    writeln!(
        out,
        "### Recursive watch of {FANOUT} x {FANOUT} directories ({dirs} directories with the \
         root and the first level; created in {:.0} ms, warm cache)\n",
        ms(created)
    )?;
    writeln!(
        out,
        "| run | `files/watch` answer ms | VmRSS before -> answer -> end MiB | VmHWM \
         before -> answer -> end MiB | inotify fds / watches before -> after | early writes \
         lost | `overflow` received | steady deep write -> notification ms | exit after EOF \
         ms |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for (i, r) in runs.iter().enumerate() {
        let lost = match (r.early_lost.first(), r.early_lost.last()) {
            (Some(a), Some(b)) => format!(
                "{} of {EARLY_WRITES} (+{:.0}..+{:.0} ms)",
                r.early_lost.len(),
                ms(*a),
                ms(*b)
            ),
            _ => format!("0 of {EARLY_WRITES}"),
        };
        writeln!(
            out,
            "| {} | {:.1} | {:.1} -> {:.1} -> {:.1} | {:.1} -> {:.1} -> {:.1} | {} / {} -> {} / \
             {} | {lost} | {} | {:.1} | {:.1} |",
            i + 1,
            ms(r.watch),
            mib(r.before.rss_kib),
            mib(r.after.rss_kib),
            mib(r.end.rss_kib),
            mib(r.before.hwm_kib),
            mib(r.after.hwm_kib),
            mib(r.end.hwm_kib),
            r.inotify_before.0,
            r.inotify_before.1,
            r.inotify_after.0,
            r.inotify_after.1,
            r.early_overflows,
            ms(r.deep_write),
            ms(r.exit),
        )?;
    }
    writeln!(
        out,
        "\nEarly writes: {EARLY_WRITES} new files written {} ms apart across the tree from the \
         moment `files/watch` answered; lost = no notification within {} ms of the last one \
         (times are when the lost writes were made, after the answer). Memory: \"answer\" is \
         read as soon as `files/watch` answered, \"end\" after every notification of the run.",
        EARLY_GAP.as_millis(),
        EARLY_WAIT.as_millis()
    )?;
    writeln!(
        out,
        "\nWith `max_kernel_watches = {SMALL_KERNEL_LIMIT}` (< {dirs}): `files/watch` answered \
         `{}` with `data.limit` = {} in {:.1} ms; the sidecar then held {} inotify fd(s) and \
         {} watches.\n",
        refusal.code,
        refusal.limit,
        ms(refusal.took),
        refusal.inotify_after.0,
        refusal.inotify_after.1
    )?;
    writeln!(
        out,
        "Reproduce: `cargo build --release && cargo bench --bench watch` \
         (FSBROKER_BENCH_WATCH_N={n}). Total time: {:.1} s.",
        started.elapsed().as_secs_f64()
    )?;
    println!("{out}");
    // `benches/run` reads the latencies from here for the summary table of BENCHMARKS.md.
    if let Some(path) = std::env::var_os("FSBROKER_BENCH_JSON") {
        let summary = json!({
            "n": n,
            "median_ms": default.median(),
            "p99_ms": default.percentile(99.0),
            "fast_median_ms": fast.median(),
            "fast_p99_ms": fast.percentile(99.0),
        });
        std::fs::write(path, summary.to_string())?;
    }
    Ok(())
}
