//! Crash safety of writes through the real binary: a `fsbroker serve --writable` process is
//! killed with SIGKILL at random moments while it replaces a file (one-shot writes of several
//! MiB, and chunked uploads), and the target must then hold exactly the old or the new bytes,
//! never a mix or a truncation. Temporaries the dead brokers left behind are removed by the
//! next broker's write into that directory.
//!
//! `FSBROKER_CRASH_ITERS` sets the number of kills per test (default 20 each, 40 in all);
//! `FSBROKER_CRASH_SEED` replays a run whose seed was printed.

use crate::common::fs::temporaries;
use crate::common::*;
use crate::sidecar::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MIB: usize = 1 << 20;
const TARGET: &str = "project/big.bin";

/// xorshift64*, seeded from the clock unless `FSBROKER_CRASH_SEED` is set.
struct Rng(u64);

impl Rng {
    fn new(test: &str) -> Rng {
        let seed = match std::env::var("FSBROKER_CRASH_SEED") {
            Ok(s) => s.parse().expect("FSBROKER_CRASH_SEED is a u64"),
            Err(_) => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64,
        } | 1;
        println!("{test}: seed {seed} (replay with FSBROKER_CRASH_SEED={seed})");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A duration uniformly in `[0, max]`.
    fn upto(&mut self, max: Duration) -> Duration {
        let ns = max.as_nanos() as u64;
        Duration::from_nanos(self.next() % (ns + 1))
    }
}

fn iterations() -> usize {
    std::env::var("FSBROKER_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// The chunks of an upload of `content` in `n` pieces (the last one final).
fn upload_lines(content: &[u8], n: usize) -> Vec<Vec<u8>> {
    let size = content.len().div_ceil(n);
    content
        .chunks(size)
        .enumerate()
        .map(|(i, piece)| {
            let last = (i + 1) * size >= content.len();
            rpc_line(
                100 + i as u64,
                "files/write",
                json!({"path": TARGET, "content": std::str::from_utf8(piece).unwrap(),
                       "offset": i * size, "final": last}),
            )
        })
        .collect()
}

/// Sends SIGKILL to `pid` once `delay` has passed since `start`.
fn kill_at(pid: u32, start: Instant, delay: Duration) -> JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep((start + delay).saturating_duration_since(Instant::now()));
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        // The child is not reaped before this thread is joined, so the pid is still ours.
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill -KILL");
    })
}

/// Sends `lines` one at a time, each after the previous response; returns the responses
/// received before the output ended (all of them when the process outlived the sequence).
fn drive(s: &mut Sidecar, stdin: &mut std::process::ChildStdin, lines: &[Vec<u8>]) -> Vec<Value> {
    let mut answers = Vec::new();
    for l in lines {
        if stdin.write_all(l).and_then(|()| stdin.flush()).is_err() {
            break;
        }
        match s.next_raw(WAIT) {
            Some(raw) => answers.push(serde_json::from_slice(&raw).unwrap()),
            None => break,
        }
    }
    answers
}

/// The time one run of `lines` takes on a live broker (the longest of two runs), and checks
/// that the run works: every response is a success and the target ends up as `new`.
fn measure(root: &Path, target: &Path, old: &[u8], new: &[u8], lines: &[Vec<u8>]) -> Duration {
    let mut longest = Duration::ZERO;
    for _ in 0..2 {
        std::fs::write(target, old).unwrap();
        let mut s = Sidecar::serve_writable(root);
        let mut stdin = s.take_stdin();
        let start = Instant::now();
        let answers = drive(&mut s, &mut stdin, lines);
        longest = longest.max(start.elapsed());
        assert_eq!(answers.len(), lines.len());
        for a in &answers {
            ok(a);
        }
        assert!(
            std::fs::read(target).unwrap() == new,
            "a finished write left other content"
        );
    }
    longest
}

/// Kills a broker at random moments while it runs `lines` against a target holding `old`;
/// each time the target must hold exactly `old` or `new`. Returns the pid of the last broker
/// killed (reaped, so no longer running).
fn crash_loop(test: &str, old: &[u8], new: &[u8], lines: &[Vec<u8>]) -> (Fixture, u32) {
    let f = Fixture::new();
    let target = f.root.join("big.bin");
    let window = measure(&f.root, &target, old, new, lines);
    // Slightly past the measured time, so that some kills land after the commit.
    let window = window + window / 8;
    let mut rng = Rng::new(test);
    let (mut olds, mut news, mut last_pid) = (0, 0, 0);
    let iters = iterations();
    println!("{test}: {iters} kills within {window:?}");
    for i in 0..iters {
        std::fs::write(&target, old).unwrap();
        let mut s = Sidecar::serve_writable(&f.root);
        let mut stdin = s.take_stdin();
        let delay = rng.upto(window);
        let start = Instant::now();
        let killer = kill_at(s.pid(), start, delay);
        let answers = drive(&mut s, &mut stdin, lines);
        killer.join().unwrap();
        let status = s.wait_exit(WAIT);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "iteration {i}: the broker was not killed: {status:?}"
        );
        last_pid = s.pid();
        drop(stdin);
        for a in &answers {
            ok(a);
        }
        let now = std::fs::read(&target).unwrap();
        let committed = answers.len() == lines.len();
        if now == old {
            assert!(
                !committed,
                "iteration {i} (delay {delay:?}): the write answered success but the old content is there"
            );
            olds += 1;
        } else if now == new {
            news += 1;
        } else {
            panic!(
                "iteration {i} (delay {delay:?}): the target holds neither version: {} bytes, starts {:?}, ends {:?}",
                now.len(),
                String::from_utf8_lossy(&now[..now.len().min(8)]),
                String::from_utf8_lossy(&now[now.len().saturating_sub(8)..]),
            );
        }
    }
    println!("{test}: {olds} kills left the old content, {news} the new");
    (f, last_pid)
}

/// After the kills, one more broker writes into the directory: every temporary left by a dead
/// broker is gone, while one that names a live writer (this test process) is left alone.
fn assert_next_write_sweeps(f: &Fixture, dead_pid: u32) {
    // Make sure at least one stale temporary exists, named as the dead broker would have.
    let stale = format!(".fsbroker-{dead_pid}-0-00000000deadbeef.tmp");
    std::fs::write(f.root.join(&stale), b"partial").unwrap();
    let live = format!(".fsbroker-{}-0-000000000000feed.tmp", std::process::id());
    std::fs::write(f.root.join(&live), b"in progress").unwrap();
    let before = temporaries(&f.root);
    assert!(before.contains(&stale));
    println!("temporaries before the next write: {before:?}");
    let mut s = Sidecar::serve_writable(&f.root);
    let r = s.request(
        "files/write",
        json!({"path": "project/after.txt", "content": "after the crashes"}),
    );
    ok(&r);
    assert_eq!(f.text_of("after.txt"), "after the crashes");
    let after = temporaries(&f.root);
    assert_eq!(
        after,
        vec![live.clone()],
        "temporaries before the write: {before:?}"
    );
    s.finish();
    std::fs::remove_file(f.root.join(&live)).unwrap();
    f.assert_canary_intact();
}

fn filled(letter: u8, len: usize) -> Vec<u8> {
    vec![letter; len]
}

#[test]
fn one_shot_write_killed_at_random_moments_leaves_old_or_new_content_and_next_write_sweeps() {
    let old = filled(b'A', 4 * MIB + 13);
    let new = filled(b'B', 6 * MIB + 77);
    let lines = vec![rpc_line(
        7,
        "files/write",
        json!({"path": TARGET, "content": std::str::from_utf8(&new).unwrap()}),
    )];
    let (f, dead) = crash_loop("one-shot", &old, &new, &lines);
    assert_next_write_sweeps(&f, dead);
}

#[test]
fn chunked_upload_killed_at_random_moments_leaves_old_or_new_content_and_next_write_sweeps() {
    let old = filled(b'A', 5 * MIB + 3);
    // Each chunk its own letter, so a commit of a partial upload cannot pass for the new one.
    let mut new = Vec::new();
    for letter in [b'C', b'D', b'E', b'F'] {
        new.extend(filled(letter, 3 * MIB / 2));
    }
    new.extend(b"tail");
    let lines = upload_lines(&new, 4);
    assert_eq!(lines.len(), 4);
    let (f, dead) = crash_loop("chunked", &old, &new, &lines);
    assert_next_write_sweeps(&f, dead);
}
