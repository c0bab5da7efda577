//! `fsbroker proxy`: a transparent stdio proxy between an unmodified host and an MCP server.
//!
//! Every line passes through unchanged, except:
//! - the host's `initialize` gains the broker's client capabilities (`roots.listChanged`,
//!   `roots.filesystemBrokering`, `experimental.filesystemBrokering`), and the proxy notes
//!   whether the host can elicit;
//! - the server's `roots/list` and `files/*` requests go to the broker, in a lane that runs
//!   a session of the broker's own session loop (the daemon's, or one in process over an
//!   in-memory line pair: `crate::attaching`), and their answers go back to the server;
//! - the broker's notifications (`notifications/files/changed`,
//!   `notifications/roots/list_changed`) go to the server;
//! - the host's responses to the proxy's own requests (consent elicitation) stay here, and
//!   the host's `notifications/roots/list_changed` is dropped, since the server's roots are
//!   the broker's;
//! - what the server sends that is not a JSON-RPC message we can read is answered with an
//!   error and never relayed (`from_server` says why).
//!
//! Each direction has its own reader and writer task joined by queues bounded in lines and
//! bytes. A side that stops reading holds up the traffic meant for it and, once its queue is
//! full, the reader that feeds that queue; memory stays bounded either way. Broker work never
//! holds up relaying: a brokered request that finds the lane full is refused at once.
//!
//! The files, by what they do:
//! - `judge/`: every decision about a message, one function per direction (`judge::server`,
//!   `judge::host`), no IO; singles and batch items judged alike;
//! - `from_server.rs`, `from_host.rs`: the readers, which frame lines, ask the judge and send
//!   what it says; `backend.rs` carries the brokered requests to the broker; `link.rs` is the
//!   connection to a local server (a child on pipes), `remote/` the one to a remote server;
//! - `era/`: the protocol era of the session (the `--era` rule in `era/rule.rs`) and the
//!   brokering of a 2026-07-28 server's roots (`rounds`, `upstream`, `park`, `scan`);
//! - `host_channel.rs`: the proxy's own requests to the host; `elicit.rs` asks consent
//!   through it; `cancel.rs` keeps the brokered requests a server may cancel;
//! - `peek.rs`, `strict.rs`: the exact reader of a relayed message; `names.rs`: the MCP
//!   vocabulary the proxy acts on;
//! - `sandbox/`: `--sandbox`, the kernel's rules for a local server; `own_dirs.rs` names, at
//!   start, the directories on the server's command line that no root (or, sandboxed, nothing
//!   the sandbox allows) holds.

mod backend;
mod cancel;
mod elicit;
mod era;
mod from_host;
mod from_server;
mod host_channel;
mod judge;
mod link;
mod names;
pub(crate) mod own_dirs;
mod peek;
mod relay;
pub(crate) mod remote;
pub(crate) mod sandbox;
mod strict;

// What the command line (`cli::proxy`) wires together; the rest serves the crate (the rmcp
// adapter, the fuzz oracles).
pub(crate) use link::Link;
#[cfg(feature = "cli")]
pub(crate) use link::spawn_child;

pub(crate) use host_channel::HostChannel;
pub(crate) use link::QUEUE_LINES;
// What the fuzz oracles look at.
#[cfg(feature = "fuzzing")]
pub(crate) use from_server::host_part;
#[cfg(feature = "fuzzing")]
pub(crate) use peek::{Kind, peek};

use crate::lines::{LineReceiver, budget, line_channel};
use crate::order::SHUTDOWN_GRACE;
use crate::policy::EraMode;
pub(crate) use backend::{Backend, HostAsker};
use relay::Relay;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long the end of a session waits for the last messages to pass.
pub(crate) const LAST_WORDS: std::time::Duration = std::time::Duration::from_secs(5);

/// One proxy, before it runs: build the broker in between, since consent by elicitation
/// needs the host channel this creates.
pub(crate) struct Proxy {
    host: Arc<HostChannel>,
    to_host_rx: LineReceiver,
    server_id: Option<String>,
    era: Option<EraMode>,
}

impl Proxy {
    /// A proxy whose session is `server_id`, or the server's `serverInfo.name` when `None`.
    pub(crate) fn new(server_id: Option<String>) -> Proxy {
        // The line limit is not known yet; the default budget takes two maximal lines of the
        // default limit, and a longer line still passes alone.
        let (to_host, to_host_rx) = line_channel(QUEUE_LINES, budget(0));
        Proxy {
            host: Arc::new(HostChannel::new(to_host)),
            to_host_rx,
            server_id,
            era: None,
        }
    }

    /// The era rule of this proxy (`--era`); without it, the policy's `[proxy] era`.
    pub(crate) fn era(mut self, mode: Option<EraMode>) -> Proxy {
        self.era = mode;
        self
    }

    /// Who answers the broker's consent questions for this proxy's session: its host, when
    /// it can show a form.
    pub(crate) fn asker(&self) -> Arc<dyn crate::attaching::Asker> {
        Arc::new(HostAsker(self.host.clone()))
    }

    /// Relays between the host (`host_in`, `host_out`) and the server (`link`) until either
    /// side ends or `shutdown` completes; then ends the server and the broker session.
    /// Returns the server's exit code.
    pub(crate) async fn run<R, W, S>(
        self,
        backend: Backend,
        host_in: R,
        host_out: W,
        link: Link,
        shutdown: S,
    ) -> u8
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
        S: Future<Output = ()>,
    {
        let Proxy {
            host,
            to_host_rx,
            server_id,
            era,
        } = self;
        let Link {
            to_server,
            from_server,
            end,
            mut exit,
            pid,
        } = link;
        let Backend {
            described,
            mut attach,
        } = backend;
        attach.server_pid = pid;
        let backend = Backend { described, attach };
        let max_line = backend.max_line();
        // A link without a process of ours is a remote server's.
        let state = Arc::new(Relay::new(server_id.clone()).remote(pid.is_none()));
        let mode = era.unwrap_or(backend.era());
        tracing::info!(?mode, "protocol era rule");
        let capabilities = backend.capabilities();
        let (calls, calls_rx) = tokio::sync::mpsc::channel(8);
        let resolver = era::Resolver {
            calls,
            host: host.clone(),
        };
        state.era.configure(mode, resolver);
        // A session that cannot go on in the era asked for ends as a shutdown does.
        let era_state = state.clone();
        let shutdown = async move {
            tokio::select! {
                () = shutdown => {}
                () = era_state.era.failed() => {}
            }
        };

        let writer = tokio::spawn(write_host(host_out, to_host_rx));
        let (lane_tx, lane_rx) = line_channel(QUEUE_LINES, budget(max_line));
        let (stop_lane, lane_stop) = watch::channel(false);
        // The broker's notifications come on the session's own connection.
        let lane = tokio::spawn(backend::run_lane(
            backend.attach,
            state.clone(),
            lane_rx,
            calls_rx,
            to_server.clone(),
            lane_stop,
        ));
        let host_reader = tokio::spawn(from_host::read_host(
            host_in,
            max_line,
            host.clone(),
            state.clone(),
            capabilities,
            to_server.clone(),
        ));
        let server_reader = tokio::spawn(from_server::read_server(
            from_server,
            host.clone(),
            host.sender(),
            state.clone(),
            lane_tx,
            to_server.clone(),
        ));
        drop(to_server);
        let mut tasks = Tasks {
            writer,
            lane,
            host_reader,
            server_reader,
        };

        let ending = tasks.wait_for_end(&mut exit, shutdown).await;
        // The session is over: broker work still queued is dropped, not done for a server
        // that is leaving.
        let _ = stop_lane.send(true);
        host.close();
        let code = match ending.exited {
            Some(code) => code,
            None => {
                let _ = end.send(());
                exit.await
            }
        };
        tracing::info!(code, "server exited");
        // The broker's session ends with its connection, which the lane closes.
        tasks.wind_down(ending.server_done, host).await;
        if state.era.failure().is_some() {
            return 1;
        }
        code
    }
}

/// The tasks of a running proxy.
struct Tasks {
    /// Writes what is queued for the host.
    writer: JoinHandle<()>,
    /// Carries the server's brokered requests to the broker, and back its answers and
    /// notifications.
    lane: JoinHandle<()>,
    /// Reads the host.
    host_reader: JoinHandle<()>,
    /// Reads the server.
    server_reader: JoinHandle<()>,
}

/// How a session came to its end.
struct Ending {
    /// Whether the server closed its output (so everything it said has been read).
    server_done: bool,
    /// The server's exit code, when its exit is what ended the session.
    exited: Option<u8>,
}

impl Tasks {
    /// Waits until either side ends, the server exits or `shutdown` completes.
    async fn wait_for_end<S: Future<Output = ()>>(
        &mut self,
        exit: &mut Pin<Box<dyn Future<Output = u8> + Send>>,
        shutdown: S,
    ) -> Ending {
        tokio::pin!(shutdown);
        let mut exited = None;
        let server_done = tokio::select! {
            _ = &mut self.host_reader => {
                tracing::info!("host closed its input; ending the server");
                false
            }
            _ = &mut self.server_reader => {
                tracing::info!("server closed its output");
                true
            }
            // A server that exits while something else (a process it started) keeps its
            // output open must still end the session.
            code = exit => {
                exited = Some(code);
                false
            }
            () = &mut shutdown => {
                tracing::info!("ending the server");
                false
            }
        };
        Ending {
            server_done,
            exited,
        }
    }

    /// Once the server has ended, lets each task finish what it still carries, within a
    /// bound: the server's last words, the broker work under way, the host's queue. `host` is
    /// let go before the host's queue is drained, so that the writer sees its end.
    async fn wind_down(mut self, server_done: bool, host: Arc<HostChannel>) {
        if !server_done {
            // The server's last words still reach the host, unless its output stays open
            // (a grandchild holding it).
            if tokio::time::timeout(LAST_WORDS, &mut self.server_reader)
                .await
                .is_err()
            {
                self.server_reader.abort();
            }
        }
        self.host_reader.abort();
        if tokio::time::timeout(SHUTDOWN_GRACE + LAST_WORDS, self.lane)
            .await
            .is_err()
        {
            tracing::warn!("broker work still running at the end was abandoned");
        }
        drop(host);
        if tokio::time::timeout(LAST_WORDS, &mut self.writer)
            .await
            .is_err()
        {
            tracing::warn!("host is not reading; its last messages are dropped");
            self.writer.abort();
        }
    }
}

/// Writes lines to the host, flushing when the queue runs dry.
async fn write_host<W: AsyncWrite + Unpin>(host_out: W, mut rx: LineReceiver) {
    let mut out = tokio::io::BufWriter::new(host_out);
    while let Some(line) = rx.recv().await {
        let r = crate::lines::write_queued(&mut out, Some(line), &mut rx).await;
        if let Err(e) = r {
            tracing::info!(error = %e, "host output closed");
            break;
        }
    }
}
