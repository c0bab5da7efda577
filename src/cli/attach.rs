//! `serve --daemon` and `proxy --daemon`: the session lives in the daemon's broker, so the
//! roots, the policy and the consent mode are the daemon's, and flags that would set them
//! here are refused.

use super::CommonArgs;
use super::terminal::err;
use crate::attaching::{self, Attach, Described, Naming};
use crate::daemon::proof::SocketDoor;
use crate::framing::{Frame, next_frame};
use crate::lines::{LineReceiver, LineSender, QUEUE_LINES, budget, line_channel, write_queued};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::io::{AsyncWrite, BufReader};

/// The variable that attaches a `serve` or `proxy` to a daemon, for host configuration
/// files that cannot add a flag: its value is the daemon's socket.
pub(super) const DAEMON_VAR: &str = "FSBROKER_DAEMON";

/// The daemon's socket to attach to: `--daemon[=SOCKET]`, else `FSBROKER_DAEMON`; `None`
/// when neither asks to attach.
pub(super) fn socket(flag: Option<&Option<PathBuf>>) -> Option<Result<PathBuf, String>> {
    match flag {
        Some(Some(p)) => Some(Ok(p.clone())),
        Some(None) => Some(super::daemon::socket_path(None)),
        None => match std::env::var_os(DAEMON_VAR) {
            Some(v) if !v.is_empty() => Some(Ok(PathBuf::from(v))),
            _ => None,
        },
    }
}

/// Why `args` cannot attach: a flag that sets what only the daemon holds.
pub(super) fn refuse_own_broker(args: &CommonArgs) -> Result<(), String> {
    let given: Vec<&str> = args
        .given()
        .into_iter()
        .filter(|f| *f != "--server-id")
        .collect();
    if given.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} cannot be given when attaching to the daemon: roots, policy, consent and the \
         audit log are the daemon's (give them to `fsbroker daemon`, or put them in its \
         policy file); `--server-id` names this session",
        given.join(", ")
    ))
}

/// The daemon's description, a daemon started first unless one answers (on the user's policy
/// file, going when idle: `fsbroker daemon --ensure`), or the message saying why there is none.
pub(super) async fn described(socket: &std::path::Path) -> Result<Described, String> {
    let owned = socket.to_owned();
    tokio::task::spawn_blocking(move || crate::daemon::autostart::ensure(&owned))
        .await
        .map_err(|e| format!("cannot start the daemon: {e}"))??;
    attaching::describe(&SocketDoor(socket.to_owned())).await
}

/// A session name fixed from the start (`serve`'s).
struct Fixed(String);

impl Naming for Fixed {
    fn name(&self) -> String {
        self.0.clone()
    }
    fn era(&self) -> Option<String> {
        Some("legacy".into())
    }
    fn known_at_start(&self) -> bool {
        true
    }
}

/// `fsbroker serve --daemon`: relays the server's lines on stdin to a session on the daemon
/// and the daemon's lines to stdout, until stdin ends or `shutdown` completes.
pub(super) async fn serve<W>(
    socket: PathBuf,
    server_id: Option<String>,
    output: W,
    shutdown: impl std::future::Future<Output = ()>,
) -> ExitCode
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let described = match described(&socket).await {
        Ok(d) => d,
        Err(e) => {
            err!("fsbroker: {e}");
            return ExitCode::FAILURE;
        }
    };
    let max_line = described.max_line;
    let (to_daemon, input) = line_channel(QUEUE_LINES, budget(max_line));
    let (to_out, out) = line_channel::<()>(QUEUE_LINES, budget(max_line));
    let writer = tokio::spawn(write_lines(output, out));
    let (_calls, no_calls) = tokio::sync::mpsc::channel(1);
    let attach = Attach {
        door: Arc::new(SocketDoor(socket)),
        server_pid: None,
        // The server is whoever writes our standard input.
        identity: super::identify::of_stdin_peer(),
        sandbox: None,
        asker: None,
        max_line,
    };
    let name = Fixed(server_id.unwrap_or_else(|| "default".into()));
    let session = tokio::spawn(attaching::run(
        attach,
        Arc::new(name),
        input,
        no_calls,
        to_out.clone(),
        Arc::new(|_: &serde_json::Value| {}),
        std::future::pending(),
    ));
    tokio::select! {
        () = read_lines(super::stdio::stdin_reader(), max_line, to_daemon, to_out) => {}
        () = shutdown => {}
    }
    let _ = session.await;
    let _ = writer.await;
    ExitCode::SUCCESS
}

/// Reads the server's lines into `to_daemon`; one over the limit is answered here, as
/// `serve` answers it.
async fn read_lines(
    input: impl tokio::io::AsyncRead + Unpin,
    max_line: usize,
    to_daemon: LineSender,
    to_out: LineSender,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    loop {
        match next_frame(&mut reader, max_line).await {
            Ok(Frame::Line(l)) => {
                if to_daemon.send(l).await.is_err() {
                    break;
                }
            }
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(bytes = n, limit = max_line, "skipped an over-long message");
                let resp = crate::jsonrpc::too_long(max_line).to_json();
                if let Ok(v) = serde_json::to_vec(&resp)
                    && to_out.send(v).await.is_err()
                {
                    break;
                }
            }
            Ok(Frame::Eof) => break,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read input; ending session");
                break;
            }
        }
    }
}

/// Writes lines to `output`, flushing when the queue runs dry.
async fn write_lines<W: AsyncWrite + Unpin>(output: W, mut rx: LineReceiver) {
    let mut out = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    while let Some(line) = rx.recv().await {
        if let Err(e) = write_queued(&mut out, Some(line), &mut rx).await {
            tracing::info!(error = %e, "output closed");
            return;
        }
    }
}
