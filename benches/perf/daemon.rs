//! The daemon: the latency attaching adds to a small read (an attached `serve --daemon`
//! against an embedded `serve`, in turns, in one run), and the memory of many sessions in
//! one daemon against one sidecar process each (the `sessions` workload).

use crate::conn::{Conn, MOUNT};
use crate::fixtures::small_rel;
use crate::stats::Row;
use crate::stats::{Samples, load1, pss_kib, status_kib};
use crate::writes::Sessions;
use crate::{Bench, Res};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Sequential reads measured per connection and round.
const READS: usize = 3000;

/// A daemon for the bench, in a private directory of its own; killed when dropped.
struct Daemon {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// `fsbroker daemon --foreground` on the bench's root and policy, consent approved
    /// automatically, as the embedded sidecar's.
    fn start(b: &Bench) -> Res<Daemon> {
        // Short: a Unix socket's path must fit in 108 bytes.
        let dir = tempfile::Builder::new().prefix("fsbd").tempdir_in("/tmp")?;
        let socket = dir.path().join("run").join("b.sock");
        let mut cmd = Command::new(&b.bin);
        cmd.args(["daemon", "--foreground", "--socket"])
            .arg(&socket)
            .arg("--policy")
            .arg(&b.policy)
            .arg("--root")
            .arg(format!("{MOUNT}={}", b.data.display()))
            .args(["--consent", "auto"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(b.log("daemon"))?);
        let child = cmd.spawn()?;
        let d = Daemon {
            child,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !d.socket.exists() || !d.socket.with_file_name("b.key").exists() {
            if Instant::now() > deadline {
                return Err("the daemon did not listen within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// `fsbroker serve --daemon=SOCKET`, after consent.
    fn attach(&self, b: &Bench, name: &str) -> Res<Conn> {
        let mut cmd = Command::new(&b.bin);
        cmd.arg("serve")
            .arg(format!("--daemon={}", self.socket.display()))
            .args(["--server-id", name]);
        let mut c = Conn::spawn(cmd, &b.log(name))?;
        let r = c.call("files/consent", &json!({"requestedPaths": [MOUNT]}))?;
        if r.pointer("/result/granted") != Some(&Value::Bool(true)) {
            return Err(format!("consent refused: {r}").into());
        }
        Ok(c)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What attaching adds to a sequential 1 KiB `files/read`.
#[derive(Default)]
pub struct Attach {
    /// Embedded `serve`: median and p99 per round, µs.
    pub own_p50: Samples,
    /// See `own_p50`.
    pub own_p99: Samples,
    /// Attached `serve --daemon`: median and p99 per round, µs.
    pub attached_p50: Samples,
    /// See `attached_p50`.
    pub attached_p99: Samples,
    /// Attached minus embedded median, per round, µs.
    pub added_p50: Samples,
    /// Load average after the workload.
    pub load: f64,
}

/// Median and p99 of `READS` sequential 1 KiB reads on `c`, after a warm-up, µs.
fn latency(c: &mut Conn) -> Res<(f64, f64)> {
    let read = |i: usize| json!({"path": format!("{MOUNT}/{}", small_rel(i % 1000))});
    for i in 0..200 {
        c.send("files/read", &read(i), true)?;
        c.recv_ok()?;
    }
    let mut lat = Samples::default();
    for i in 0..READS {
        let t = Instant::now();
        c.send("files/read", &read(i), true)?;
        c.recv_ok()?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok((lat.median(), lat.percentile(99.0)))
}

/// Rounds of an embedded sidecar and an attached one, alternating which goes first.
pub fn attach(b: &Bench) -> Res<Attach> {
    let d = Daemon::start(b)?;
    let mut a = Attach::default();
    for r in 0..b.cfg.rounds {
        eprintln!("daemon attach latency: round {} of {}", r + 1, b.cfg.rounds);
        let mut own = (0.0, 0.0);
        let mut attached = (0.0, 0.0);
        for k in 0..2 {
            if (k + r) % 2 == 0 {
                let mut c = Conn::sidecar(&b.bin, &b.data, &b.policy, false, &b.log("own"))?;
                own = latency(&mut c)?;
                c.close(Duration::from_secs(5))?;
            } else {
                let mut c = d.attach(b, &format!("attached{r}"))?;
                attached = latency(&mut c)?;
                c.close(Duration::from_secs(5))?;
            }
        }
        a.own_p50.push(own.0);
        a.own_p99.push(own.1);
        a.attached_p50.push(attached.0);
        a.attached_p99.push(attached.1);
        a.added_p50.push(attached.0 - own.0);
    }
    a.load = load1();
    Ok(a)
}

/// Memory of many sessions in one daemon.
#[derive(Default)]
pub struct DaemonSessions {
    /// Sessions.
    pub n: usize,
    /// The daemon's VmRSS with every session live, MiB.
    pub daemon_rss_mib: f64,
    /// The daemon's VmRSS before any session, MiB.
    pub daemon_idle_rss_mib: f64,
    /// The attached relays' VmRSS summed, MiB.
    pub relays_rss_mib: f64,
    /// The attached relays' Pss summed, MiB.
    pub relays_pss_mib: f64,
}

/// The `sessions` workload's sessions, attached to one daemon: each does the same work
/// (consent, 20 small reads, a stat, a listing, one 1 MiB base64 chunk), then all are
/// measured while alive.
pub fn sessions(b: &Bench) -> Res<DaemonSessions> {
    let n = b.cfg.sessions;
    eprintln!("memory: {n} sessions in one daemon");
    let d = Daemon::start(b)?;
    let pid = d.child.id();
    let idle = status_kib(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        conns.push(d.attach(b, &format!("s{i}"))?);
    }
    for c in &mut conns {
        crate::writes::session_work(c)?;
    }
    let mut s = DaemonSessions {
        n,
        daemon_idle_rss_mib: idle,
        daemon_rss_mib: status_kib(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0,
        ..DaemonSessions::default()
    };
    let (mut rss, mut pss) = (0u64, 0u64);
    for c in &conns {
        rss += status_kib(c.pid(), "VmRSS:").unwrap_or(0);
        pss += pss_kib(c.pid()).unwrap_or(0);
    }
    s.relays_rss_mib = rss as f64 / 1024.0;
    s.relays_pss_mib = pss as f64 / 1024.0;
    for c in conns {
        c.close(Duration::from_secs(5))?;
    }
    Ok(s)
}

/// The summary's rows of the daemon's workloads.
pub fn rows(
    attach: Option<&Attach>,
    daemon_sessions: Option<&DaemonSessions>,
    sidecars: Option<&Sessions>,
) -> Vec<Row> {
    let mut out = Vec::new();
    if let Some(a) = attach {
        out.push(Row {
            workload: format!(
                "`files/read` 1 KiB, sequential, through `serve --daemon` vs the embedded `serve` ({READS} reads a round)"
            ),
            ours: format!(
                "median {} µs (p99 {} µs); added to the median {} µs",
                a.attached_p50.show(0),
                a.attached_p99.show(0),
                a.added_p50.show(0)
            ),
            reference: format!(
                "median {} µs (p99 {} µs)",
                a.own_p50.show(0),
                a.own_p99.show(0)
            ),
            ratio: None,
            target: None,
            target_text: "added ≤ 50 µs".into(),
            met: Some(a.added_p50.median() <= 50.0),
            machine: format!("load {:.1}", a.load),
        });
    }
    if let Some(ds) = daemon_sessions {
        out.push(Row {
            workload: format!("{} concurrent sessions in one daemon, memory", ds.n),
            ours: format!(
                "daemon VmRSS {:.0} MiB ({:.0} MiB before any session); the {} attached `serve` relays VmRSS {:.0} MiB, Pss {:.0} MiB",
                ds.daemon_rss_mib, ds.daemon_idle_rss_mib, ds.n, ds.relays_rss_mib, ds.relays_pss_mib
            ),
            reference: sidecars.map_or_else(String::new, |ss| {
                format!(
                    "{} sidecars, each its own broker: VmRSS {:.0} MiB, Pss {:.0} MiB",
                    ss.n, ss.rss_total_mib, ss.pss_total_mib
                )
            }),
            ratio: None,
            target: None,
            target_text: "daemon ≤ 100 MiB".into(),
            met: Some(ds.daemon_rss_mib <= 100.0),
            machine: String::new(),
        });
    }
    out
}
