//! The cost of a server's identity at attach: [`Identity::of_command`] for a large
//! interpreter (`node`, about 100 MB, running a small script) and for small scripts
//! (`python3 small.py`, `sh run.sh`), with a cold digest cache (no cache file: every file is
//! hashed) and a warm one (the cache file holds every digest: files are only `stat`ed).
//!
//! Each measurement is one fresh process of this bench (`--one`), as each start of a proxy
//! is, which times the call alone: reading the cache file, finding and digesting the files,
//! and writing the cache back. The system's page cache is warm in both (the files were read
//! before); a cold page cache adds reading the files from disk to the cold figure.
//!
//! Run with `cargo bench --bench identity`. `FSBROKER_BENCH_IDENTITY_N` sets the runs per
//! case (default 15).

use mcp_fsbroker::Identity;
use std::error::Error;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--one") {
        return one(&args[2..]);
    }
    let runs = std::env::var("FSBROKER_BENCH_IDENTITY_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(15usize);
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.js"), "console.log(1);\n")?;
    std::fs::write(dir.path().join("small.py"), "print(1)\n")?;
    std::fs::write(dir.path().join("run.sh"), "echo 1\n")?;
    // A file changed in the last two seconds is hashed every time (its change time may not
    // have moved yet): let the scripts settle, as a server's files have.
    std::thread::sleep(Duration::from_millis(2100));
    let cases: [&[&str]; 3] = [
        &["node", "index.js"],
        &["/usr/bin/python3", "small.py"],
        &["sh", "run.sh"],
    ];
    println!("| command | cold cache, median (min–max) | warm cache, median (min–max) |");
    println!("|---|---:|---:|");
    for argv in cases {
        let cold = measure(dir.path(), argv, runs, true)?;
        let warm = measure(dir.path(), argv, runs, false)?;
        println!(
            "| `{}` | {} | {} |",
            argv.join(" "),
            show(&cold),
            show(&warm)
        );
    }
    Ok(())
}

/// In a process of its own: computes the identity of `argv` (after the working directory)
/// once and prints how long it took, in microseconds.
fn one(args: &[String]) -> Res<()> {
    let (cwd, argv) = args.split_first().ok_or("--one CWD ARGV...")?;
    let started = Instant::now();
    let id = Identity::of_command(argv, Path::new(cwd), None);
    let took = started.elapsed();
    if id.program.as_ref().is_none_or(|p| p.digest.is_empty()) {
        return Err(format!("no program digest for {argv:?}: {id:?}").into());
    }
    println!("{}", took.as_micros());
    Ok(())
}

/// The times of `runs` fresh processes computing the identity of `argv`, each with no
/// cache file (`cold`) or after one run that left it.
fn measure(dir: &Path, argv: &[&str], runs: usize, cold: bool) -> Res<Vec<u64>> {
    let state = dir.join("state");
    let cache = state.join("fsbroker").join("digests.json");
    let _ = std::fs::remove_file(&cache);
    if !cold {
        run_one(dir, &state, argv)?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        if cold {
            let _ = std::fs::remove_file(&cache);
        }
        times.push(run_one(dir, &state, argv)?);
    }
    times.sort_unstable();
    Ok(times)
}

fn run_one(dir: &Path, state: &Path, argv: &[&str]) -> Res<u64> {
    let out = Command::new(std::env::current_exe()?)
        .arg("--one")
        .arg(dir)
        .args(argv)
        .env("XDG_STATE_HOME", state)
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

fn show(times: &[u64]) -> String {
    let median = times.get(times.len() / 2).copied().unwrap_or(0);
    let (min, max) = (
        times.first().copied().unwrap_or(0),
        times.last().copied().unwrap_or(0),
    );
    format!("{median} µs ({min}–{max})")
}
