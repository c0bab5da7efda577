//! Small atomic writes and a chunked upload, each beside the same atomic sequence done
//! directly by this process; and the memory of many concurrent sessions.

use crate::conn::{Conn, MOUNT};
use crate::fixtures::{small_rel, text_kib};
use crate::stats::{Samples, load1, pss_kib, status_kib};
use crate::{Bench, Res};
use base64::Engine;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const CHUNK: usize = 1 << 20;

/// Results of the write workloads.
#[derive(Default)]
pub struct Writes {
    /// Ours: small atomic writes per second.
    pub ours: Samples,
    /// The same atomic sequence done directly, per second.
    pub raw: Samples,
    /// Ours ÷ direct, per round.
    pub ratio: Samples,
    /// Ours: the chunked upload, MiB/s of file bytes.
    pub upload: Samples,
    /// Writing the same bytes directly (1 MiB writes, fsync, rename, fsync of the directory),
    /// MiB/s.
    pub upload_raw: Samples,
    /// Ours ÷ direct, per round.
    pub upload_ratio: Samples,
    /// Load average after the workload.
    pub load: f64,
}

fn write_rel(round: usize, who: &str, i: usize) -> String {
    format!("w{round}-{who}/d{:03}/f{:03}.txt", i / 100, i % 100)
}

fn make_dirs(data: &Path, round: usize, who: &str, n: usize) -> Res<()> {
    for i in (0..n).step_by(100) {
        let p = data.join(write_rel(round, who, i));
        std::fs::create_dir_all(p.parent().ok_or("no parent")?)?;
    }
    Ok(())
}

/// What the broker does for one atomic write, done directly: a temporary file in the target's
/// directory, written and fsynced, renamed over the target, then the directory fsynced.
fn raw_atomic(target: &Path, chunks: &mut dyn Iterator<Item = &[u8]>) -> Res<()> {
    let dir = target.parent().ok_or("no parent")?;
    let tmp = dir.join(format!(".raw-{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    for c in chunks {
        f.write_all(c)?;
    }
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, target)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

fn ours_small_writes(b: &Bench, round: usize, n: usize) -> Res<Duration> {
    make_dirs(&b.data, round, "ours", n)?;
    let mut c = Conn::sidecar(&b.bin, &b.data, &b.policy, true, &b.log("writes"))?;
    let took = c.pipelined(
        n,
        16,
        |i| {
            let path = format!("{MOUNT}/{}", write_rel(round, "ours", i));
            let content = String::from_utf8_lossy(&text_kib(i)).into_owned();
            ("files/write", json!({"path": path, "content": content}))
        },
        |c| c.recv_ok().map(drop),
    )?;
    c.close(Duration::from_secs(5))?;
    Ok(took)
}

fn raw_small_writes(b: &Bench, round: usize, n: usize) -> Res<Duration> {
    make_dirs(&b.data, round, "raw", n)?;
    let t = Instant::now();
    for i in 0..n {
        let content = text_kib(i);
        raw_atomic(
            &b.data.join(write_rel(round, "raw", i)),
            &mut std::iter::once(&content[..]),
        )?;
    }
    Ok(t.elapsed())
}

fn ours_upload(b: &Bench, encoded: &[String], bytes: &[u8]) -> Res<Duration> {
    let mut c = Conn::sidecar(&b.bin, &b.data, &b.policy, true, &b.log("upload"))?;
    let n = encoded.len();
    let took = c.pipelined(
        n,
        2,
        |i| {
            let params = json!({"path": format!("{MOUNT}/upload.bin"), "content": encoded[i],
                "encoding": "base64", "offset": i * CHUNK, "final": i + 1 == n});
            ("files/write", params)
        },
        |c| c.recv_ok().map(drop),
    )?;
    c.close(Duration::from_secs(5))?;
    let len = std::fs::metadata(b.data.join("upload.bin"))?.len();
    if len != bytes.len() as u64 {
        return Err(format!("uploaded {len} bytes of {}", bytes.len()).into());
    }
    std::fs::remove_file(b.data.join("upload.bin"))?;
    Ok(took)
}

fn raw_upload(b: &Bench, bytes: &[u8]) -> Res<Duration> {
    let target = b.data.join("upload-raw.bin");
    let t = Instant::now();
    raw_atomic(&target, &mut bytes.chunks(CHUNK))?;
    let took = t.elapsed();
    std::fs::remove_file(target)?;
    Ok(took)
}

/// Rounds of ours and the direct sequence, alternating which goes first.
pub fn writes(b: &Bench) -> Res<Writes> {
    let cfg = &b.cfg;
    let mut w = Writes::default();
    let upload_len = usize::try_from(cfg.upload_mib << 20)?;
    let bytes = std::fs::read(b.data.join("large.bin"))?;
    let bytes = bytes
        .get(..upload_len)
        .ok_or("the large file is smaller than the upload")?;
    // The client's base64 work is done before the clock starts: the broker is measured.
    let encoded: Vec<String> = bytes
        .chunks(CHUNK)
        .map(|c| base64::engine::general_purpose::STANDARD.encode(c))
        .collect();
    let mib = upload_len as f64 / (1 << 20) as f64;
    for r in 0..cfg.slow_rounds {
        eprintln!("writes: round {} of {}", r + 1, cfg.slow_rounds);
        let n = cfg.write_n;
        let (ours, raw, up, up_raw);
        if r % 2 == 0 {
            ours = ours_small_writes(b, r, n)?;
            raw = raw_small_writes(b, r, n)?;
            up = ours_upload(b, &encoded, bytes)?;
            up_raw = raw_upload(b, bytes)?;
        } else {
            raw = raw_small_writes(b, r, n)?;
            ours = ours_small_writes(b, r, n)?;
            up_raw = raw_upload(b, bytes)?;
            up = ours_upload(b, &encoded, bytes)?;
        }
        let (o, d) = (n as f64 / ours.as_secs_f64(), n as f64 / raw.as_secs_f64());
        w.ours.push(o);
        w.raw.push(d);
        w.ratio.push(o / d);
        let (o, d) = (mib / up.as_secs_f64(), mib / up_raw.as_secs_f64());
        w.upload.push(o);
        w.upload_raw.push(d);
        w.upload_ratio.push(o / d);
    }
    w.load = load1();
    Ok(w)
}

/// Memory of many sessions at once: one sidecar process per session, all alive together.
#[derive(Default)]
pub struct Sessions {
    /// Processes measured.
    pub n: usize,
    /// Per-process VmHWM, MiB.
    pub hwm_mib: Samples,
    /// Sum of VmRSS over the processes, MiB (shared pages counted in each).
    pub rss_total_mib: f64,
    /// Sum of Pss over the processes, MiB (shared pages divided among them).
    pub pss_total_mib: f64,
}

/// Starts `n` sidecars, has each do some work (consent, 20 small reads, a stat, a listing and
/// one 1 MiB base64 chunk), then measures them all while they are still running.
pub fn sessions(b: &Bench) -> Res<Sessions> {
    let n = b.cfg.sessions;
    eprintln!("memory: {n} concurrent sessions");
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        conns.push(Conn::sidecar(
            &b.bin,
            &b.data,
            &b.policy,
            false,
            &b.log(&format!("s{i}")),
        )?);
    }
    for c in &mut conns {
        session_work(c)?;
    }
    let mut s = Sessions {
        n,
        ..Sessions::default()
    };
    let (mut rss, mut pss) = (0u64, 0u64);
    for c in &conns {
        s.hwm_mib
            .push(status_kib(c.pid(), "VmHWM:").unwrap_or(0) as f64 / 1024.0);
        rss += status_kib(c.pid(), "VmRSS:").unwrap_or(0);
        pss += pss_kib(c.pid()).unwrap_or(0);
    }
    s.rss_total_mib = rss as f64 / 1024.0;
    s.pss_total_mib = pss as f64 / 1024.0;
    for c in conns {
        c.close(Duration::from_secs(5))?;
    }
    Ok(s)
}

/// What each session of the memory measurements does before it is measured: 20 small reads,
/// a stat, a listing and one 1 MiB base64 chunk, pipelined, all answered.
pub fn session_work(c: &mut Conn) -> Res<()> {
    for i in 0..20 {
        c.send(
            "files/read",
            &json!({"path": format!("{MOUNT}/{}", small_rel(i))}),
            false,
        )?;
    }
    c.send(
        "files/stat",
        &json!({"path": format!("{MOUNT}/large.bin")}),
        false,
    )?;
    c.send(
        "files/list",
        &json!({"path": format!("{MOUNT}/small/d000")}),
        false,
    )?;
    let big = json!({"path": format!("{MOUNT}/large.bin"), "length": CHUNK, "encoding": "base64"});
    c.send("files/read", &big, true)?;
    for _ in 0..23 {
        c.recv_ok()?;
    }
    Ok(())
}
