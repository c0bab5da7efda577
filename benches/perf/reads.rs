//! The large chunked read, against `base64`, `cat` and the official server's
//! `read_media_file`.

use crate::conn::{Conn, MOUNT};
use crate::stats::{Samples, load1, status_kib};
use crate::{Bench, Res};
use serde::Deserialize;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CHUNK: u64 = 1 << 20;

#[derive(Deserialize)]
struct ReadEnvelope<'a> {
    #[serde(borrow)]
    result: Option<ReadChunk<'a>>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ReadChunk<'a> {
    #[serde(borrow)]
    content: Cow<'a, str>,
    length: u64,
}

/// Results of the large-read workload.
#[derive(Default)]
pub struct LargeRead {
    /// Ours, MiB/s of file bytes.
    pub ours: Samples,
    /// `base64 FILE > /dev/null`, MiB/s.
    pub base64: Samples,
    /// `cat FILE > /dev/null`, MiB/s.
    pub cat: Samples,
    /// `base64 FILE | cat > /dev/null`: the same bytes through a pipe to another process, as
    /// ours go to the client, MiB/s.
    pub base64_pipe: Samples,
    /// Ours ÷ `base64` piped into `cat`, per round.
    pub ratio_base64_pipe: Samples,
    /// `base64 FILE` read through a pipe by this client, as it reads ours, MiB/s.
    pub base64_client: Samples,
    /// Ours ÷ that, per round.
    pub ratio_base64_client: Samples,
    /// Ours ÷ base64, per round.
    pub ratio_base64: Samples,
    /// The sidecar's VmHWM at the end of each round, MiB.
    pub hwm_mib: Samples,
    /// Ours on the official server's smaller file, MiB/s.
    pub ours_small: Samples,
    /// The official server's `read_media_file` of that file, MiB/s.
    pub peer: Samples,
    /// Ours ÷ official, per round.
    pub ratio_peer: Samples,
    /// The official server's VmHWM after its read, MiB.
    pub peer_hwm_mib: Samples,
    /// What the official server did with the full-size file.
    pub peer_full: String,
    /// Load average after the workload.
    pub load: f64,
}

/// Reads `rel` (of `size` bytes) through a fresh sidecar in 1 MiB base64 chunks with
/// `window` requests in flight; returns the time and the sidecar's peak RSS in KiB.
pub fn ours_read(b: &Bench, rel: &str, size: u64, window: usize) -> Res<(Duration, u64)> {
    let mut c = Conn::sidecar(&b.bin, &b.data, &b.policy, false, &b.log("large"))?;
    let chunks = size.div_ceil(CHUNK) as usize;
    let path = format!("{MOUNT}/{rel}");
    let mut got = 0u64;
    let took = c.pipelined(
        chunks,
        window,
        |i| {
            let params = json!({"path": path, "offset": i as u64 * CHUNK, "length": CHUNK,
                "encoding": "base64"});
            ("files/read", params)
        },
        |c| {
            let env: ReadEnvelope = serde_json::from_slice(c.recv_line()?)?;
            match (env.result, env.error) {
                (Some(r), _) if r.content.len() as u64 == r.length.div_ceil(3) * 4 => {
                    got += r.length;
                    Ok(())
                }
                (Some(r), _) => Err(format!("bad chunk of {} bytes", r.length).into()),
                (None, e) => Err(format!("files/read failed: {e:?}").into()),
            }
        },
    )?;
    if got != size {
        return Err(format!("read {got} bytes of {size}").into());
    }
    let hwm = status_kib(c.pid(), "VmHWM:").unwrap_or(0);
    c.close(Duration::from_secs(5))?;
    Ok((took, hwm))
}

/// Times a shell tool reading `file` with its output to /dev/null; `program` may be a
/// pipeline, which gets the file as `$1`.
pub fn tool(program: &str, file: &std::path::Path) -> Res<Duration> {
    let mut cmd = if program.contains(' ') {
        let mut c = Command::new("sh");
        c.arg("-c").arg(program).arg("sh");
        c
    } else {
        Command::new(program)
    };
    let t = Instant::now();
    let status = cmd
        .arg(file)
        .stdout(std::fs::File::create("/dev/null")?)
        .stderr(Stdio::inherit())
        .status()?;
    let took = t.elapsed();
    if !status.success() {
        return Err(format!("{program} failed: {status}").into());
    }
    Ok(took)
}

/// Times `program FILE` with its output read by this process through a pipe, 1 MiB at a
/// time, as the client reads a sidecar's answers.
pub fn piped_to_us(program: &str, file: &std::path::Path) -> Res<Duration> {
    use std::io::Read;
    let t = Instant::now();
    let mut child = Command::new(program)
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut out = child.stdout.take().ok_or("no stdout")?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        match out.read(&mut buf)? {
            0 => break,
            n => total += n,
        }
    }
    let status = child.wait()?;
    let took = t.elapsed();
    if !status.success() || total == 0 {
        return Err(format!("{program} failed: {status}").into());
    }
    Ok(took)
}

#[derive(Deserialize)]
struct PeerEnvelope<'a> {
    #[serde(borrow)]
    result: Option<PeerMedia<'a>>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct PeerMedia<'a> {
    #[serde(borrow)]
    content: Vec<PeerBlock<'a>>,
}

#[derive(Deserialize)]
struct PeerBlock<'a> {
    #[serde(borrow)]
    resource: Option<PeerResource<'a>>,
}

#[derive(Deserialize)]
struct PeerResource<'a> {
    #[serde(borrow)]
    blob: Cow<'a, str>,
}

/// The official server reads `file` whole with `read_media_file`. Returns the time and its
/// peak RSS (KiB); the time is `None` when it gave no answer within `timeout` (it is then
/// killed).
fn peer_read(
    b: &Bench,
    file: &std::path::Path,
    size: u64,
    timeout: Duration,
) -> Res<(Option<Duration>, u64)> {
    let mut c = Conn::peer(&b.node, &b.peer_script, &b.data, &b.log("peer-large"))?;
    let pid = c.pid();
    let done = Arc::new(AtomicBool::new(false));
    let hwm = Arc::new(AtomicU64::new(0));
    let watchdog = {
        let (done, hwm) = (done.clone(), hwm.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + timeout;
            while !done.load(Ordering::Relaxed) {
                hwm.fetch_max(status_kib(pid, "VmHWM:").unwrap_or(0), Ordering::Relaxed);
                if Instant::now() >= until {
                    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        })
    };
    let params = json!({"name": "read_media_file", "arguments": {"path": file}});
    let t = Instant::now();
    c.send("tools/call", &params, true)?;
    let answer = c.recv_line().map(|line| {
        let took = t.elapsed();
        let env: PeerEnvelope = serde_json::from_slice(line)?;
        let blob = env
            .result
            .and_then(|r| r.content.into_iter().next())
            .and_then(|b| b.resource)
            .map(|r| r.blob.len() as u64);
        match (blob, env.error) {
            (Some(n), _) if n == size.div_ceil(3) * 4 => Ok(took),
            (_, e) => Err(format!("read_media_file failed: {e:?}").into()),
        }
    });
    let now_hwm = status_kib(pid, "VmHWM:").unwrap_or(0);
    done.store(true, Ordering::Relaxed);
    let killed = watchdog.join().unwrap_or(false);
    let hwm = hwm.load(Ordering::Relaxed).max(now_hwm);
    match answer {
        Ok(Ok(took)) => Ok((Some(took), hwm)),
        Ok(Err(e)) => Err(e),
        Err(_) if killed => Ok((None, hwm)),
        Err(e) => Err(e),
    }
}

/// Rounds of ours, `base64` and `cat` on the large file, rotating which goes first; then
/// the official server on its smaller file, each round beside ours on the same file.
pub fn large_read(b: &Bench) -> Res<LargeRead> {
    let cfg = &b.cfg;
    let size = cfg.large_mib << 20;
    let mib = size as f64 / (1 << 20) as f64;
    let file = b.data.join("large.bin");
    let mut r = LargeRead::default();
    // Everything reads from the page cache.
    tool("cat", &file)?;
    for round in 0..cfg.rounds {
        eprintln!("large read: round {} of {}", round + 1, cfg.rounds);
        let mut ours = 0.0;
        let mut base64 = 0.0;
        let mut piped = 0.0;
        let mut client = 0.0;
        for k in 0..5 {
            match (round + k) % 5 {
                0 => {
                    let (t, hwm) = ours_read(b, "large.bin", size, cfg.large_window)?;
                    ours = mib / t.as_secs_f64();
                    r.hwm_mib.push(hwm as f64 / 1024.0);
                }
                1 => base64 = mib / tool("base64", &file)?.as_secs_f64(),
                2 => piped = mib / tool("base64 \"$1\" | cat", &file)?.as_secs_f64(),
                3 => client = mib / piped_to_us("base64", &file)?.as_secs_f64(),
                _ => r.cat.push(mib / tool("cat", &file)?.as_secs_f64()),
            }
        }
        r.ours.push(ours);
        r.base64.push(base64);
        r.ratio_base64.push(ours / base64);
        r.base64_pipe.push(piped);
        r.ratio_base64_pipe.push(ours / piped);
        r.base64_client.push(client);
        r.ratio_base64_client.push(ours / client);
    }
    let small_size = cfg.peer_large_mib << 20;
    let small_mib = small_size as f64 / (1 << 20) as f64;
    let small_file = b.data.join("peer-large.bin");
    eprintln!(
        "large read: the official server on the full {} MiB file",
        cfg.large_mib
    );
    r.peer_full = match peer_read(b, &file, size, Duration::from_secs(cfg.peer_full_timeout))? {
        (Some(t), hwm) => format!(
            "answered in {:.1} s ({:.0} MiB/s), peak RSS {:.0} MiB",
            t.as_secs_f64(),
            mib / t.as_secs_f64(),
            hwm as f64 / 1024.0
        ),
        (None, hwm) => format!(
            "no answer within {} s (then killed); its RSS had peaked at {:.0} MiB",
            cfg.peer_full_timeout,
            hwm as f64 / 1024.0
        ),
    };
    for round in 0..cfg.slow_rounds {
        eprintln!(
            "large read: official server, round {} of {}",
            round + 1,
            cfg.slow_rounds
        );
        let timeout = Duration::from_secs(cfg.peer_full_timeout.max(60));
        let (pt, phwm) = peer_read(b, &small_file, small_size, timeout)?;
        let pt = pt.ok_or("the official server did not answer the smaller read")?;
        let (ot, _) = ours_read(b, "peer-large.bin", small_size, cfg.large_window)?;
        let (o, p) = (small_mib / ot.as_secs_f64(), small_mib / pt.as_secs_f64());
        r.ours_small.push(o);
        r.peer.push(p);
        r.ratio_peer.push(o / p);
        r.peer_hwm_mib.push(phwm as f64 / 1024.0);
    }
    r.load = load1();
    Ok(r)
}
