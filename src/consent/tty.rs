//! The `tty` consent provider: asks on the controlling terminal, never on stdin (which carries
//! the protocol), one question at a time, and stops waiting for an answer at the consent time
//! limit (see [`super::provider_for`]).

use super::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest, sanitise};
use crate::access::Access;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest part of a server's message shown on the terminal.
const MAX_MESSAGE_CHARS: usize = 500;
/// How long one prompt waits for an answer before it counts as a refusal.
const PROMPT_WAIT: Duration = Duration::from_secs(120);

/// Asks the user on a terminal device (by default `/dev/tty`).
#[derive(Debug)]
pub struct TtyConsent {
    device: PathBuf,
    wait: Duration,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Default for TtyConsent {
    fn default() -> Self {
        TtyConsent::new()
    }
}

impl TtyConsent {
    /// Asks on the controlling terminal.
    pub fn new() -> Self {
        TtyConsent::with_device(PathBuf::from("/dev/tty"))
    }

    /// Asks on another terminal device, such as a pseudo-terminal in a test.
    pub fn with_device(device: PathBuf) -> Self {
        TtyConsent {
            device,
            wait: PROMPT_WAIT,
            lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Sets how long a prompt waits for an answer.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Whether this process has a controlling terminal to ask on.
    pub fn available() -> bool {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .is_ok()
    }
}

impl ConsentProvider for TtyConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move {
            // One prompt at a time: two questions interleaved on one terminal would let an
            // answer meant for one server grant another. The turn moves into the blocking
            // task, so a prompt abandoned by the broker's deadline keeps the terminal until
            // its own read has stopped, and cannot swallow the answer to the next one.
            let turn = self.lock.clone().lock_owned().await;
            let device = self.device.clone();
            let req = request.clone();
            let wait = self.wait;
            let task = tokio::task::spawn_blocking(move || {
                let _turn = turn;
                ask(&device, &req, wait)
            });
            match task.await {
                Ok(Ok(decision)) => decision,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "tty consent failed; denying");
                    ConsentDecision::deny()
                }
                Err(_) => ConsentDecision::deny(),
            }
        })
    }
}

fn ask(
    device: &std::path::Path,
    req: &ConsentRequest,
    wait: Duration,
) -> std::io::Result<ConsentDecision> {
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(device)?;
    let mut prompt = format!(
        "\nfsbroker: server {:?} asks for {} access to:\n",
        sanitise(&req.server_id, 100),
        req.access.as_str()
    );
    for p in &req.paths {
        prompt.push_str(&format!("  {}\n", super::describe(req, p)));
    }
    prompt.push_str("  (a folder covers everything inside it)\n");
    if let Some(m) = &req.message {
        prompt.push_str(&format!(
            "  reason given: {}\n",
            sanitise(m, MAX_MESSAGE_CHARS)
        ));
    }
    prompt.push_str(match req.access {
        Access::Write => "allow? [w]rite / [r]ead only / [N]o: ",
        Access::Read => "allow? [r]ead / [N]o: ",
    });
    tty.write_all(prompt.as_bytes())?;
    tty.flush()?;
    let line = read_line(&mut tty, wait)?;
    let answer = line.trim().to_ascii_lowercase();
    let decision = match (answer.as_str(), req.access) {
        ("w" | "write", Access::Write) => ConsentDecision::approve_all(req),
        ("r" | "read" | "y" | "yes", _) => ConsentDecision {
            approved: req.paths.clone(),
            access: Access::Read,
        },
        _ => ConsentDecision::deny(),
    };
    let verdict = if decision.approved.is_empty() {
        "denied\n"
    } else {
        "approved\n"
    };
    tty.write_all(verdict.as_bytes())?;
    Ok(decision)
}

/// Reads one line of at most 64 bytes, waiting no longer than `wait`.
fn read_line(tty: &mut std::fs::File, wait: Duration) -> std::io::Result<String> {
    use rustix::event::{PollFd, PollFlags, poll};
    let deadline = Instant::now() + wait;
    let mut buf = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(String::new());
        }
        let timeout = rustix::event::Timespec::try_from(left.min(Duration::from_millis(250)))
            .unwrap_or_default();
        let fd = tty.as_fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        if poll(&mut fds, Some(&timeout)).map_err(std::io::Error::from)? == 0 {
            continue;
        }
        let mut byte = [0u8; 1];
        match tty.read(&mut byte)? {
            0 => return Ok(String::from_utf8_lossy(&buf).into_owned()),
            _ if byte[0] == b'\n' || byte[0] == b'\r' => {
                return Ok(String::from_utf8_lossy(&buf).into_owned());
            }
            _ if buf.len() < 64 => buf.push(byte[0]),
            _ => {}
        }
    }
}
