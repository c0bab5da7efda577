//! The `tty` consent provider: asks on the controlling terminal, never on stdin (which carries
//! the protocol), one question at a time, and stops waiting for an answer at the consent time
//! limit (see [`super::provider_for`]).

use super::{
    BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest, PathChoice,
    sanitise,
};
use crate::access::Access;
use crate::path::MountPath;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest part of a server's message shown on the terminal.
const MAX_MESSAGE_CHARS: usize = 500;
/// Longest answer read (a narrowing names a path).
const MAX_LINE: usize = 1024;
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
        Box::pin(async move { self.decide_each(request).await.into() })
    }

    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
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
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) if no_terminal(&e) => {
                    tracing::warn!(
                        error = %e,
                        "tty consent denied: this process has no controlling terminal to ask on; \
                         choose --consent auto, deny or command:PROGRAM (with fsbroker proxy, \
                         elicit), or run fsbroker from a terminal"
                    );
                    ConsentAnswer::deny()
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "tty consent failed; denying");
                    ConsentAnswer::deny()
                }
                Err(_) => ConsentAnswer::deny(),
            }
        })
    }
}

/// Asks `req` on the terminal `device`: the paths, then one answer for all of them or, when
/// the user chooses so or there is one path, an answer for each. Every answer must come
/// within `wait` of the start.
fn ask(
    device: &std::path::Path,
    req: &ConsentRequest,
    wait: Duration,
) -> std::io::Result<ConsentAnswer> {
    let deadline = Instant::now() + wait;
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(device)?;
    let mut prompt = heading(req);
    // Several paths: one answer for all, or each path in turn.
    if req.paths.len() > 1 {
        if let Some(decision) = ask_all(&mut tty, req, &prompt, deadline)? {
            return Ok(decision.into());
        }
        prompt.clear();
    }
    ask_each(&mut tty, req, prompt, deadline)
}

/// What a question starts with: who asks for what, the paths, and the reason given.
fn heading(req: &ConsentRequest) -> String {
    let mut prompt = match req.purpose {
        super::Purpose::SeeRoots => format!(
            "\nfsbroker: server {:?} asks to see these shared folders (their names and \
             places only, nothing in them):\n",
            sanitise(&req.server_id, 100)
        ),
        _ => format!(
            "\nfsbroker: server {:?} asks for {} access to:\n",
            sanitise(&req.server_id, 100),
            req.access.as_str()
        ),
    };
    for p in &req.paths {
        prompt.push_str(&format!("  {}\n", super::describe(req, p)));
    }
    prompt.push_str("  (a folder covers everything inside it)\n");
    for line in super::who_asks(req) {
        prompt.push_str(&format!("  {line}\n"));
    }
    if let Some(m) = &req.message {
        prompt.push_str(&format!(
            "  reason given: {}\n",
            sanitise(m, MAX_MESSAGE_CHARS)
        ));
    }
    prompt
}

/// Asks, after `prompt`, for one answer for all the paths: the decision, or none when the
/// user chose to answer each path in turn.
fn ask_all(
    tty: &mut std::fs::File,
    req: &ConsentRequest,
    prompt: &str,
    deadline: Instant,
) -> std::io::Result<Option<ConsentDecision>> {
    let question = match req.access {
        Access::Write => "allow? [w]rite all / [r]ead all / [e]ach path in turn / [N]o: ",
        Access::Read => "allow? [r]ead all / [e]ach path in turn / [N]o: ",
    };
    tty.write_all(format!("{prompt}{question}").as_bytes())?;
    tty.flush()?;
    let line = read_line(tty, deadline)?;
    let answer = line.trim().to_ascii_lowercase();
    if answer == "e" || answer == "each" {
        return Ok(None);
    }
    let decision = match whole(&answer, req.access) {
        Some(access) => ConsentDecision {
            approved: req.paths.clone(),
            access,
        },
        None => ConsentDecision::deny(),
    };
    tell(tty, !decision.approved.is_empty())?;
    Ok(Some(decision))
}

/// Asks, after `prompt`, for an answer for each path in turn: allow, read only, a narrowing,
/// or no.
fn ask_each(
    tty: &mut std::fs::File,
    req: &ConsentRequest,
    mut prompt: String,
    deadline: Instant,
) -> std::io::Result<ConsentAnswer> {
    let mut answer = ConsentAnswer::deny();
    // One path was just listed above the question: it is not shown again.
    let listed = req.paths.len() == 1;
    for path in &req.paths {
        if !listed {
            prompt.push_str(&format!("  {}\n", super::describe(req, path)));
        }
        prompt.push_str(&format!(
            "  allow? {} / [N]o; or narrow to a place inside it: {} SUB/PATH: ",
            match req.access {
                Access::Write => "[w]rite / [r]ead only",
                Access::Read => "[r]ead",
            },
            match req.access {
                Access::Write => "w or r",
                Access::Read => "r",
            },
        ));
        tty.write_all(prompt.as_bytes())?;
        tty.flush()?;
        prompt.clear();
        let line = read_line(tty, deadline)?;
        let choice = choose(path, line.trim(), req.access);
        if let Some(c) = choice.as_ref().filter(|c| c.granted != c.asked) {
            let shown = sanitise(&c.granted.to_string(), 4096);
            tty.write_all(format!("  narrowed to {shown}\n").as_bytes())?;
        }
        tell(tty, choice.is_some())?;
        answer.approved.extend(choice);
    }
    Ok(answer)
}

/// The access an answer for the whole request grants, if any.
fn whole(answer: &str, asked: Access) -> Option<Access> {
    match (answer, asked) {
        ("w" | "write", Access::Write) => Some(Access::Write),
        ("r" | "read" | "y" | "yes", _) => Some(Access::Read),
        _ => None,
    }
}

/// The choice one path's answer stands for: `w`, `r`, or `w SUB` / `r SUB`, a place inside
/// `path` (see [`super::narrowed`]). Anything else, a narrowing that leads outside `path`
/// included, is a refusal.
fn choose(path: &MountPath, answer: &str, asked: Access) -> Option<PathChoice> {
    let (word, rest) = match answer.split_once(char::is_whitespace) {
        Some((w, r)) => (w, Some(r)),
        None => (answer, None),
    };
    let access = whole(&word.to_ascii_lowercase(), asked)?;
    let granted = match rest {
        None => path.clone(),
        Some(sub) => super::narrowed(path, sub)?,
    };
    Some(PathChoice::new(path.clone(), granted, access))
}

/// Tells the user what their answer did.
fn tell(tty: &mut std::fs::File, approved: bool) -> std::io::Result<()> {
    tty.write_all(if approved { b"approved\n" } else { b"denied\n" })
}

/// Reads one line of at most [`MAX_LINE`] bytes, waiting no later than `deadline`.
fn read_line(tty: &mut std::fs::File, deadline: Instant) -> std::io::Result<String> {
    use rustix::event::{PollFd, PollFlags, poll};
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
            _ if buf.len() < MAX_LINE => buf.push(byte[0]),
            _ => {}
        }
    }
}

/// Whether opening the terminal failed because the process has none (`ENXIO` from
/// `/dev/tty`, or no such device).
fn no_terminal(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(6 | 19)) || e.kind() == std::io::ErrorKind::NotFound
}
