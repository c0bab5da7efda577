//! The proxy's connection to the server: lines in, lines out, a way to ask it to end, and
//! its exit code. A local server is a child process on pipes; the relay in
//! [`super::Proxy::run`] sees only this interface, so another transport can stand in for the
//! child.

use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use crate::lines::{LineReceiver, LineSender, budget, line_channel, write_queued};
use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

pub(crate) use crate::lines::QUEUE_LINES;

/// Which era's transport a line to the server goes by, as the proxy's judge decided when it
/// relayed the host's line: the legacy one (the `initialize` handshake, or nothing decided
/// yet) or revision 2026-07-28's. The transport takes it as told and never decides it again;
/// a line the proxy makes itself is unmarked and goes as the host's last line went. A child
/// on pipes has one transport for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Wire {
    /// The `initialize` handshake's transport (sessions, the GET stream, resumption).
    #[default]
    Legacy,
    /// Revision 2026-07-28's: a POST per message, with the request metadata headers.
    Modern,
}

/// The queue of lines to a server, each marked with its [`Wire`] when the judge decided it.
pub(crate) type ToServer = LineSender<Option<Wire>>;

/// A connection to one MCP server.
pub(crate) struct Link {
    /// Lines to send to the server.
    pub(crate) to_server: ToServer,
    /// Lines the server sent, in order. Ends when the server's output ends.
    pub(crate) from_server: LineReceiver,
    /// Asks the server to end: for a child, its input is closed, then its process group gets
    /// SIGTERM, then SIGKILL, a grace period apart.
    pub(crate) end: oneshot::Sender<()>,
    /// The server's exit code, once it has ended.
    pub(crate) exit: Pin<Box<dyn Future<Output = u8> + Send>>,
    /// The server's process id, for a child.
    pub(crate) pid: Option<u32>,
}

/// Why the server could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {program}: {source}")]
pub(crate) struct SpawnError {
    /// The program named.
    pub program: String,
    /// What the OS said.
    #[source]
    pub source: std::io::Error,
}

impl Link {
    /// This link with `f` run once the server has exited, on its exit code; what `f` returns
    /// is the exit code reported.
    pub(crate) fn after_exit(mut self, f: impl FnOnce(u8) -> u8 + Send + 'static) -> Link {
        let exit = self.exit;
        self.exit = Box::pin(async move { f(exit.await) });
        self
    }
}

impl SpawnError {
    /// The exit code a shell would give: 127 for a missing program, 126 for one that cannot
    /// be run, 1 otherwise.
    pub(crate) fn exit_code(&self) -> u8 {
        match self.source.kind() {
            std::io::ErrorKind::NotFound => 127,
            std::io::ErrorKind::PermissionDenied => 126,
            _ => 1,
        }
    }
}

/// Starts `command` (program and arguments) with piped stdin and stdout; its stderr is ours,
/// so its logs reach the host's log unchanged. A line longer than `max_line` is dropped,
/// since a truncated JSON-RPC message cannot be relayed, and the server is told so with the
/// same error `serve` gives. The child leads a process group of its own, so that ending it
/// also ends what it started (`npx`, `uvx` and `sh -c` run the real server as a grandchild).
pub(crate) fn spawn_child(
    command: &[String],
    max_line: usize,
    grace: Duration,
) -> Result<Link, SpawnError> {
    let Some((program, args)) = command.split_first() else {
        return Err(SpawnError {
            program: String::new(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command"),
        });
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    spawn_command(cmd, program.clone(), max_line, grace, None, false)
}

/// Starts `cmd` as [`spawn_child`] does (`program` names it in errors). When `stop` fires,
/// the server is ended as if the proxy were ending: its input closed, then SIGTERM, then
/// SIGKILL. With `pipe_stderr`, the server's stderr is a pipe copied to ours rather than ours.
pub(crate) fn spawn_command(
    mut cmd: Command,
    program: String,
    max_line: usize,
    grace: Duration,
    stop: Option<oneshot::Receiver<()>>,
    pipe_stderr: bool,
) -> Result<Link, SpawnError> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if pipe_stderr {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| SpawnError {
            program: program.clone(),
            source,
        })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(SpawnError {
            program: program.clone(),
            source: std::io::Error::other("no pipes to the child"),
        });
    };

    if let Some(mut err) = child.stderr.take() {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut err, &mut tokio::io::stderr()).await;
        });
    }
    let (to_server, outgoing) = line_channel(QUEUE_LINES, budget(max_line));
    let (incoming, from_server) = line_channel(QUEUE_LINES, budget(max_line));
    let (close_tx, close_rx) = oneshot::channel::<()>();
    tokio::spawn(write_lines(stdin, outgoing, close_rx));
    let answer = to_server.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::with_capacity(64 * 1024, stdout);
        loop {
            match next_frame(&mut reader, max_line).await {
                Ok(Frame::Line(line)) => {
                    if incoming.send(line).await.is_err() {
                        break;
                    }
                }
                Ok(Frame::TooLong(n)) => {
                    tracing::warn!(
                        bytes = n,
                        limit = max_line,
                        "dropped an over-long message from the server"
                    );
                    // Not waited for: a server that does not read its input misses it.
                    if let Ok(v) = serde_json::to_vec(&jsonrpc::too_long(max_line).to_json()) {
                        let _ = answer.try_send(v);
                    }
                }
                Ok(Frame::Eof) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the server's output");
                    break;
                }
            }
        }
    });
    let (end, end_rx) = oneshot::channel::<()>();
    let pid = child.id();
    let exit = Box::pin(supervise(child, end_rx, stop, close_tx, grace));
    Ok(Link {
        to_server,
        from_server,
        end,
        exit,
        pid,
    })
}

/// Writes queued lines to the child until asked to close (or every sender is gone), then
/// writes what is still queued and closes its stdin: for a stdio server that is the request
/// to exit. A write blocked on a child that does not read ends when the supervisor kills it.
async fn write_lines(
    stdin: ChildStdin,
    mut outgoing: LineReceiver<Option<Wire>>,
    mut close: oneshot::Receiver<()>,
) {
    let mut out = BufWriter::new(stdin);
    loop {
        let line = tokio::select! {
            biased;
            _ = &mut close => None,
            l = outgoing.recv() => l,
        };
        let closing = line.is_none();
        // Everything already queued goes out before one flush (and before the close).
        if let Err(e) = write_queued(&mut out, line, &mut outgoing).await {
            // A server that closed its input cannot take more; its exit is reported when
            // its output ends.
            tracing::debug!(error = %e, "server input closed");
            break;
        }
        if closing {
            break;
        }
    }
    let _ = out.shutdown().await;
}

/// Waits for the child to exit on its own, or, once asked to end, closes its input and
/// escalates. Returns the exit code to report.
async fn supervise(
    mut child: Child,
    end: oneshot::Receiver<()>,
    stop: Option<oneshot::Receiver<()>>,
    close: oneshot::Sender<()>,
    grace: Duration,
) -> u8 {
    // The group's id is the child's pid, kept from before the child is reaped (the id is
    // not reused while any process of the group is alive).
    let group = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    let signal = |s| {
        if let Some(g) = group {
            let _ = rustix::process::kill_process_group(g, s);
        }
    };
    // A stop that is dropped unfired asks nothing.
    let stop = async move {
        let fired = match stop {
            Some(rx) => rx.await.is_ok(),
            None => false,
        };
        if !fired {
            std::future::pending::<()>().await;
        }
    };
    let status = tokio::select! {
        s = child.wait() => s,
        _ = async { tokio::select! { _ = end => {}, _ = stop => {} } } => {
            let _ = close.send(());
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(s) => s,
                Err(_) => {
                    tracing::info!("server still running after its input closed; sending SIGTERM");
                    signal(rustix::process::Signal::TERM);
                    let s = match tokio::time::timeout(grace, child.wait()).await {
                        Ok(s) => s,
                        Err(_) => {
                            tracing::warn!("server ignored SIGTERM; killing it");
                            let _ = child.start_kill();
                            child.wait().await
                        }
                    };
                    // Whatever it started and left behind (one that ignored SIGTERM, say)
                    // goes with it.
                    signal(rustix::process::Signal::KILL);
                    s
                }
            }
        }
    };
    match status {
        Ok(s) => exit_code(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot wait for the server");
            1
        }
    }
}

/// The code to exit with for a child's status: its own code, or 128 plus the signal that
/// ended it, as shells report it.
pub(super) fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from((128 + sig) & 0xff).unwrap_or(1),
        (None, None) => 1,
    }
}
