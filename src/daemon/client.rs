//! The other end of the control socket, for the command line's verbs: connect, prove the
//! secret read from beside the socket, send one request, read its answer. Blocking, with
//! every wait bounded: a verb does one exchange and exits.

use super::proof;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, ErrorKind as IoKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long the daemon may take to answer one line.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// Longest answer line read, in bytes.
const MAX_ANSWER: u64 = 64 * 1024 * 1024;

/// Sends `request` to the daemon on `socket` and returns its answer, `{"ok": true, ...}` or
/// `{"ok": false, "error": ...}`. An `Err` says why no answer came (no daemon, refused, the
/// connection lost).
pub(crate) fn request(socket: &Path, request: &Value) -> Result<Value, String> {
    let (mut reader, mut writer) = connect(socket)?;
    send(&mut writer, request)?;
    read_line(&mut reader, socket)
}

/// Whether a daemon answers on `socket`: it takes the hello and welcomes it. An `Err` says
/// why not.
pub(crate) fn probe(socket: &Path) -> Result<(), String> {
    connect(socket).map(drop)
}

/// Whether anything listens on `socket` at all: false when nothing does (no socket, or a
/// stale one), so that a daemon may be started there; true when something does, welcoming
/// or not (a busy daemon is not to be replaced).
pub(crate) fn listened_on(socket: &Path) -> bool {
    match UnixStream::connect(socket) {
        Ok(_) => true,
        Err(e) => !matches!(e.kind(), IoKind::NotFound | IoKind::ConnectionRefused),
    }
}

/// Sends `request` (a `log` with `follow`) and calls `each` with its answer, then with every
/// line the daemon streams after it, with no time limit, until `each` returns false (`Ok`)
/// or the stream ends (`Err`, saying so).
pub(crate) fn follow(
    socket: &Path,
    request: &Value,
    mut each: impl FnMut(Value) -> bool,
) -> Result<(), String> {
    let (mut reader, mut writer) = connect(socket)?;
    send(&mut writer, request)?;
    let first = read_line(&mut reader, socket)?;
    let following = first["following"] == true;
    if !each(first) || !following {
        return Ok(());
    }
    // Events come when servers work: hours may pass between two.
    reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(|e| format!("the connection to {} failed: {e}", socket.display()))?;
    loop {
        // Past the answer, an end is the daemon going, not a missing answer.
        if reader.fill_buf().is_ok_and(|b| b.is_empty()) {
            return Err(format!(
                "the daemon on {} closed the stream (it stopped)",
                socket.display()
            ));
        }
        if !each(read_line(&mut reader, socket)?) {
            return Ok(());
        }
    }
}

/// A connection to the daemon on `socket`, proven to be the user's own daemon (see
/// [`super::proof`]), that has sent it the key and been welcomed.
fn connect(socket: &Path) -> Result<(BufReader<UnixStream>, UnixStream), String> {
    let (stream, secret) = proof::connect(socket)?;
    let io = |e: std::io::Error| format!("the connection to {} failed: {e}", socket.display());
    stream.set_read_timeout(Some(ANSWER_WAIT)).map_err(io)?;
    stream.set_write_timeout(Some(ANSWER_WAIT)).map_err(io)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    let mut writer = stream;
    // The daemon may refuse a peer before reading anything: a failed write still leaves its
    // refusal to read.
    let sent = send(&mut writer, &json!({"hello": secret.hex()}));
    let welcome = read_line(&mut reader, socket);
    match (welcome, sent) {
        (Ok(w), _) if w["ok"] == true => Ok((reader, writer)),
        (Ok(w), _) => Err(format!("the daemon on {} {}", socket.display(), said(&w))),
        (Err(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
    }
}

/// What an error answer says.
fn said(answer: &Value) -> String {
    match answer["error"].as_str() {
        Some(m) => format!("answered: {m}"),
        None => format!("answered something else than expected: {answer}"),
    }
}

fn send(w: &mut impl Write, v: &Value) -> Result<(), String> {
    let mut line = serde_json::to_vec(v).map_err(|e| e.to_string())?;
    line.push(b'\n');
    w.write_all(&line)
        .and_then(|()| w.flush())
        .map_err(|e| format!("cannot send to the daemon: {e}"))
}

fn read_line(r: &mut impl BufRead, socket: &Path) -> Result<Value, String> {
    let mut line = Vec::new();
    let n = r
        .take(MAX_ANSWER)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("no answer from the daemon on {}: {e}", socket.display()))?;
    if n == 0 {
        return Err(format!(
            "the daemon on {} closed the connection without an answer",
            socket.display()
        ));
    }
    serde_json::from_slice(&line).map_err(|e| {
        format!(
            "the daemon on {} answered a line that is not JSON: {e}",
            socket.display()
        )
    })
}
