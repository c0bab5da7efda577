//! The sizes of a run (from the environment) and the files the workloads use.

use crate::Res;
use std::io::Write;
use std::path::Path;

/// Sizes and repetitions; every one can be overridden by an environment variable, and
/// `FSBROKER_BENCH_QUICK=1` shrinks the defaults for a quick check of the harness.
#[derive(Debug, Clone)]
pub struct Config {
    /// Reduced sizes: the results are not written to the repository.
    pub quick: bool,
    /// The large file, MiB (`FSBROKER_BENCH_LARGE_MIB`).
    pub large_mib: u64,
    /// The file the official server reads whole, MiB (`FSBROKER_BENCH_PEER_LARGE_MIB`).
    pub peer_large_mib: u64,
    /// Seconds the official server gets to answer a read of the large file.
    pub peer_full_timeout: u64,
    /// Small files and stats per measurement (`FSBROKER_BENCH_SMALL_N`).
    pub small_n: usize,
    /// Small reads and stats per measurement against the official server
    /// (`FSBROKER_BENCH_PEER_SMALL_N`).
    pub peer_small_n: usize,
    /// Entries in the listed tree (`FSBROKER_BENCH_TREE_ENTRIES`).
    pub tree_entries: usize,
    /// Small atomic writes per measurement (`FSBROKER_BENCH_WRITE_N`).
    pub write_n: usize,
    /// The chunked upload, MiB (`FSBROKER_BENCH_UPLOAD_MIB`).
    pub upload_mib: u64,
    /// Concurrent sessions for the memory measurement (`FSBROKER_BENCH_SESSIONS`).
    pub sessions: usize,
    /// Rounds of the fast workloads (`FSBROKER_BENCH_ROUNDS`).
    pub rounds: usize,
    /// Rounds of the slow ones: writes, upload, the official server's large read
    /// (`FSBROKER_BENCH_SLOW_ROUNDS`).
    pub slow_rounds: usize,
    /// `files/read` chunks in flight during the large read (`FSBROKER_BENCH_WINDOW`).
    pub large_window: usize,
    /// Requests in flight in the pipelined small workloads (`FSBROKER_BENCH_SMALL_WINDOW`).
    pub small_window: usize,
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> Res<T> {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a number, not {s:?}").into()),
        Err(_) => Ok(default),
    }
}

fn pick<T>(quick: bool, full: T, small: T) -> T {
    if quick { small } else { full }
}

impl Config {
    /// The sizes of this run.
    pub fn from_env() -> Res<Config> {
        let quick = std::env::var("FSBROKER_BENCH_QUICK").is_ok_and(|v| v != "0" && !v.is_empty());
        Ok(Config {
            quick,
            large_mib: env_num("FSBROKER_BENCH_LARGE_MIB", pick(quick, 256, 32))?,
            peer_large_mib: env_num("FSBROKER_BENCH_PEER_LARGE_MIB", pick(quick, 64, 16))?,
            peer_full_timeout: env_num("FSBROKER_BENCH_PEER_FULL_TIMEOUT", pick(quick, 30, 10))?,
            small_n: env_num("FSBROKER_BENCH_SMALL_N", pick(quick, 10_000, 1_000))?,
            peer_small_n: env_num("FSBROKER_BENCH_PEER_SMALL_N", pick(quick, 10_000, 500))?,
            tree_entries: env_num("FSBROKER_BENCH_TREE_ENTRIES", pick(quick, 100_000, 10_000))?,
            write_n: env_num("FSBROKER_BENCH_WRITE_N", pick(quick, 10_000, 500))?,
            upload_mib: env_num("FSBROKER_BENCH_UPLOAD_MIB", pick(quick, 256, 32))?,
            sessions: env_num("FSBROKER_BENCH_SESSIONS", pick(quick, 100, 10))?,
            rounds: env_num("FSBROKER_BENCH_ROUNDS", pick(quick, 5, 2))?.max(1),
            slow_rounds: env_num("FSBROKER_BENCH_SLOW_ROUNDS", pick(quick, 2, 1))?.max(1),
            large_window: env_num("FSBROKER_BENCH_WINDOW", 4)?.max(1),
            small_window: env_num("FSBROKER_BENCH_SMALL_WINDOW", 32)?.max(1),
        })
    }
}

/// Writes `mib` MiB of pseudo-random bytes (xorshift: incompressible, and cheap to make).
pub fn random_file(path: &Path, mib: u64) -> Res<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..mib {
        for word in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&block)?;
    }
    f.flush()?;
    Ok(())
}

/// The path (below the data directory) of small file `i`: 100 files per directory.
pub fn small_rel(i: usize) -> String {
    format!("small/d{:03}/f{:03}.txt", i / 100, i % 100)
}

/// `n` text files of exactly 1 KiB.
pub fn small_files(data: &Path, n: usize) -> Res<()> {
    for i in 0..n {
        let path = data.join(small_rel(i));
        if i % 100 == 0
            && let Some(parent) = path.parent()
        {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text_kib(i))?;
    }
    Ok(())
}

/// 1024 bytes of ASCII text that differ per `i`.
pub fn text_kib(i: usize) -> Vec<u8> {
    let mut s = format!("file {i}\n");
    let words = ["alpha ", "beta ", "gamma ", "delta ", "epsilon\n"];
    let mut k = i;
    while s.len() < 1024 {
        s.push_str(words[k % words.len()]);
        k += 1;
    }
    s.truncate(1024);
    s.into_bytes()
}

/// A tree of exactly `entries` entries below `root` (which is not counted): 10 directories of
/// 10 subdirectories each, the rest empty files spread over the 100 subdirectories.
pub fn tree(root: &Path, entries: usize) -> Res<()> {
    const TOP: usize = 10;
    const MID: usize = 10;
    let dirs = TOP + TOP * MID;
    if entries < dirs {
        return Err(format!("a tree needs at least {dirs} entries").into());
    }
    let files = entries - dirs;
    for t in 0..TOP {
        for m in 0..MID {
            let leaf = root.join(format!("dir{t:02}")).join(format!("sub{m:02}"));
            std::fs::create_dir_all(&leaf)?;
            let k = t * MID + m;
            // Leaf k gets the files whose index i has i % 100 == k.
            let mine = files / (TOP * MID) + usize::from(k < files % (TOP * MID));
            for f in 0..mine {
                std::fs::File::create(leaf.join(format!("file{f:04}.dat")))?;
            }
        }
    }
    Ok(())
}
