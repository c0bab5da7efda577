//! Throughput, latency and memory of `fsbroker serve`, each measured in the same run as its
//! reference: `base64`, `cat` and `find` on the same files, the same atomic write sequence
//! done directly, and the official MCP filesystem server (`@modelcontextprotocol/server-
//! filesystem`, through `tools/call`).
//!
//! Run the whole harness with `benches/run`, which builds the sidecar, installs the official
//! server and a plotting environment under `target/bench/`, runs this bench and the watch
//! bench, and rewrites `BENCHMARKS.md` and `benches/ratios.png`. This bench alone
//! (`cargo bench --bench perf`) needs `target/release/fsbroker` and the official server
//! installed by `benches/run`; it writes `perf.md` and `perf.json` to `FSBROKER_BENCH_OUT`
//! (default `target/bench`). Sizes: see [`fixtures::Config`].

mod audit;
mod conn;
mod daemon;
mod fixtures;
mod reads;
mod recovery;
mod report;
mod small;
mod stats;
mod writes;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The bench's result type.
pub type Res<T> = Result<T, Box<dyn Error>>;

/// Where everything is.
pub struct Bench {
    /// `target/release/fsbroker`.
    pub bin: PathBuf,
    /// The `node` executable.
    pub node: String,
    /// The official server's entry point.
    pub peer_script: PathBuf,
    /// The root every server is given.
    pub data: PathBuf,
    /// The sidecar's policy (rate limits lifted).
    pub policy: PathBuf,
    logs: PathBuf,
    /// Sizes and rounds.
    pub cfg: fixtures::Config,
}

impl Bench {
    /// The stderr log of a child named `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.logs.join(format!("{name}.log"))
    }
}

/// The sidecar's policy: the default one with the request rate limit lifted, since a
/// benchmark's flood is what the limit exists to stop, and the recovery store in the run's
/// scratch directory (on, as by default), not the user's. Everything else (audit log on
/// stderr, in-flight cap, chunk limits) stays at its default.
const POLICY: &str =
    "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n\n[recovery]\ndir = \"store\"\n";

fn main() -> Res<()> {
    let started = Instant::now();
    let cfg = fixtures::Config::from_env()?;
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // FSBROKER_BENCH_BIN runs another build of the sidecar (one with symbols, to profile).
    let bin = std::env::var_os("FSBROKER_BENCH_BIN")
        .map_or_else(|| crate_dir.join("target/release/fsbroker"), PathBuf::from);
    if !bin.is_file() {
        return Err(format!("{} is missing: run benches/run", bin.display()).into());
    }
    let out = std::env::var_os("FSBROKER_BENCH_OUT")
        .map_or_else(|| crate_dir.join("target/bench"), PathBuf::from);
    let peer_script = crate_dir.join(
        "target/bench/peer/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    if !peer_script.is_file() {
        return Err(format!("{} is missing: run benches/run", peer_script.display()).into());
    }
    std::fs::create_dir_all(&out)?;
    let scratch = tempfile::Builder::new().prefix("run-").tempdir_in(&out)?;
    let data = scratch.path().join("data");
    let logs = scratch.path().join("logs");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&logs)?;
    let policy = scratch.path().join("policy.toml");
    std::fs::write(&policy, POLICY)?;
    let b = Bench {
        bin,
        node: std::env::var("FSBROKER_BENCH_NODE").unwrap_or_else(|_| "node".into()),
        peer_script,
        data,
        policy,
        logs,
        cfg,
    };

    eprintln!("fixtures: {:?}", b.cfg);
    let t = Instant::now();
    fixtures::random_file(
        &b.data.join("large.bin"),
        b.cfg.large_mib.max(b.cfg.upload_mib),
    )?;
    fixtures::random_file(&b.data.join("peer-large.bin"), b.cfg.peer_large_mib)?;
    fixtures::small_files(&b.data, b.cfg.small_n.max(20))?;
    fixtures::tree(&b.data.join("tree"), b.cfg.tree_entries)?;
    let fixtures_s = t.elapsed().as_secs_f64();

    // FSBROKER_BENCH_ONLY=large,small,audit,recovery,listing,writes,sessions,attach runs some workloads
    // (to profile).
    let only = std::env::var("FSBROKER_BENCH_ONLY").ok();
    let wanted = |w: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x.trim() == w))
    };
    let run = || -> Res<report::Results> {
        Ok(report::Results {
            large: wanted("large").then(|| reads::large_read(&b)).transpose()?,
            small: wanted("small").then(|| small::small(&b)).transpose()?,
            audit: wanted("audit").then(|| audit::audit(&b)).transpose()?,
            recovery: wanted("recovery")
                .then(|| recovery::recovery(&b))
                .transpose()?,
            listing: wanted("listing").then(|| small::listing(&b)).transpose()?,
            writes: wanted("writes").then(|| writes::writes(&b)).transpose()?,
            sessions: wanted("sessions")
                .then(|| writes::sessions(&b))
                .transpose()?,
            attach: wanted("attach").then(|| daemon::attach(&b)).transpose()?,
            daemon_sessions: wanted("sessions")
                .then(|| daemon::sessions(&b))
                .transpose()?,
            watch: report::Watch::load(&out.join("watch.json")),
        })
    };
    let results = match run() {
        Ok(r) => r,
        Err(e) => {
            // The children's stderr logs say what went wrong on their side.
            eprintln!("failed; logs and data kept in {}", scratch.keep().display());
            return Err(e);
        }
    };
    let md = report::markdown(&b, &results, fixtures_s, started.elapsed().as_secs_f64())?;
    std::fs::write(out.join("perf.md"), &md)?;
    std::fs::write(out.join("perf.json"), report::json(&b, &results)?)?;
    println!("{md}");
    // A successful run removes its data unless asked to keep it.
    if std::env::var_os("FSBROKER_BENCH_KEEP").is_some() {
        eprintln!("kept {}", scratch.keep().display());
    }
    Ok(())
}
