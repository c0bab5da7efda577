//! `fsbroker proxy`: a transparent stdio proxy between an unmodified host and an MCP server.
//!
//! Every line passes through unchanged, except:
//! - the host's `initialize` gains the broker's client capabilities (`roots.listChanged`,
//!   `roots.filesystemBrokering`), and the proxy notes whether the host can elicit;
//! - the server's `roots/list` and `files/*` requests go to the broker, in a lane with the
//!   same ordering and bounds as `fsbroker serve`, and their answers go back to the server;
//! - the broker's notifications (`notifications/files/changed`,
//!   `notifications/roots/list_changed`) go to the server;
//! - the host's responses to the proxy's own requests (consent elicitation) stay here, and
//!   the host's `notifications/roots/list_changed` is dropped, since the server's roots are
//!   the broker's.
//!
//! Each direction has its own reader and writer task joined by bounded queues, so a side
//! that stops reading stalls only the traffic meant for it.

mod elicit;
mod host;
mod link;
mod peek;

pub use elicit::ElicitConsent;
pub use host::{HostChannel, HostError, add_capabilities};
pub use link::{Link, QUEUE_LINES, SpawnError, exit_code, spawn_child};
pub use peek::{Kind, is_brokered, peek};

use crate::broker::{Broker, OutboundReceiver};
use crate::consent::ConsentProvider;
use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use crate::serve::Dispatcher;
use serde_json::{Value, json};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;

/// How long the end of a session waits for the last messages to pass.
pub const LAST_WORDS: std::time::Duration = std::time::Duration::from_secs(5);

/// The session id used when neither `--server-id` nor the server's `serverInfo.name` gave
/// one before the server's first brokered request.
pub const DEFAULT_SERVER_ID: &str = "default";

/// One proxy, before it runs: build the broker in between, since consent by elicitation
/// needs the host channel this creates.
pub struct Proxy {
    host: Arc<HostChannel>,
    to_host_rx: mpsc::Receiver<Vec<u8>>,
    server_id: Option<String>,
}

impl Proxy {
    /// A proxy whose session is `server_id`, or the server's `serverInfo.name` when `None`.
    pub fn new(server_id: Option<String>) -> Proxy {
        let (to_host, to_host_rx) = mpsc::channel(QUEUE_LINES);
        Proxy {
            host: Arc::new(HostChannel::new(to_host)),
            to_host_rx,
            server_id,
        }
    }

    /// A consent provider that asks the host's user through `elicitation/create` when the
    /// host can, and `fallback` when it cannot.
    pub fn elicit_consent(&self, fallback: Arc<dyn ConsentProvider>) -> Arc<dyn ConsentProvider> {
        Arc::new(ElicitConsent::new(self.host.clone(), fallback))
    }

    /// Relays between the host (`host_in`, `host_out`) and the server (`link`) until either
    /// side ends or `shutdown` completes; then ends the server and the broker session.
    /// Returns the server's exit code.
    pub async fn run<R, W, S>(
        self,
        broker: Broker,
        mut outbound: OutboundReceiver,
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
        } = self;
        let Link {
            to_server,
            from_server,
            end,
            exit,
        } = link;
        let max_line = broker.policy().limits.max_line_bytes.get();
        let state = Arc::new(State {
            init_id: Mutex::new(None),
            server_name: OnceLock::new(),
        });

        let mut writer = tokio::spawn(write_host(host_out, to_host_rx));

        let (lane_tx, lane_rx) = mpsc::channel::<Vec<u8>>(QUEUE_LINES);
        let lane = tokio::spawn(run_lane(
            broker.clone(),
            server_id.clone(),
            state.clone(),
            lane_rx,
            to_server.clone(),
        ));
        let notifier = {
            let to_server = to_server.clone();
            tokio::spawn(async move {
                // One broker per proxy serves one session, so every notification is for it.
                while let Some(n) = outbound.recv().await {
                    let Ok(line) = serde_json::to_vec(&n.message) else {
                        continue;
                    };
                    if to_server.send(line).await.is_err() {
                        break;
                    }
                }
            })
        };
        let mut host_reader = tokio::spawn(read_host(
            host_in,
            max_line,
            host.clone(),
            state.clone(),
            broker.capabilities(),
            to_server.clone(),
        ));
        let mut server_reader = tokio::spawn(read_server(
            from_server,
            host.clone(),
            state.clone(),
            lane_tx,
            to_server.clone(),
        ));
        drop(to_server);

        tokio::pin!(shutdown);
        let mut exit = exit;
        let mut exited = None;
        let server_done = tokio::select! {
            _ = &mut host_reader => {
                tracing::info!("host closed its input; ending the server");
                false
            }
            _ = &mut server_reader => {
                tracing::info!("server closed its output");
                true
            }
            // A server that exits while something else (a process it started) keeps its
            // output open must still end the session.
            code = &mut exit => {
                exited = Some(code);
                false
            }
            () = &mut shutdown => {
                tracing::info!("ending the server");
                false
            }
        };
        host.close();
        let code = match exited {
            Some(code) => code,
            None => {
                let _ = end.send(());
                exit.await
            }
        };
        tracing::info!(code, "server exited");
        if !server_done {
            // The server's last words still reach the host, unless its output stays open
            // (a grandchild holding it).
            if tokio::time::timeout(LAST_WORDS, &mut server_reader)
                .await
                .is_err()
            {
                server_reader.abort();
            }
        }
        host_reader.abort();
        notifier.abort();
        let _ = lane.await;
        drop(host);
        if tokio::time::timeout(LAST_WORDS, &mut writer).await.is_err() {
            tracing::warn!("host is not reading; its last messages are dropped");
            writer.abort();
        }
        let id = state.session_id(server_id.as_deref());
        broker.end_session(&id);
        code
    }
}

/// What the two readers learn and share.
struct State {
    /// The id of the host's `initialize` request, to find the server's answer to it.
    init_id: Mutex<Option<Value>>,
    /// The server's `serverInfo.name`.
    server_name: OnceLock<String>,
}

impl State {
    fn session_id(&self, configured: Option<&str>) -> String {
        configured
            .map(str::to_owned)
            .or_else(|| self.server_name.get().cloned())
            .unwrap_or_else(|| DEFAULT_SERVER_ID.to_owned())
    }
}

/// Writes lines to the host, flushing when the queue runs dry.
async fn write_host<W: AsyncWrite + Unpin>(host_out: W, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut out = tokio::io::BufWriter::new(host_out);
    while let Some(line) = rx.recv().await {
        let r = link::write_queued(&mut out, Some(line), &mut rx).await;
        if let Err(e) = r {
            tracing::info!(error = %e, "host output closed");
            break;
        }
    }
}

/// Reads the host's lines: notes and extends `initialize`, keeps responses meant for the
/// proxy, relays the rest to the server. Returns at the end of the host's input.
async fn read_host<R: AsyncRead + Unpin>(
    host_in: R,
    max_line: usize,
    host: Arc<HostChannel>,
    state: Arc<State>,
    capabilities: Value,
    to_server: mpsc::Sender<Vec<u8>>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, host_in);
    loop {
        let line = match next_frame(&mut reader, max_line).await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(
                    bytes = n,
                    limit = max_line,
                    "dropped an over-long message from the host"
                );
                if let (Ok(v), Some(to_host)) = (
                    serde_json::to_vec(&jsonrpc::too_long(max_line).to_json()),
                    host.sender(),
                ) {
                    let _ = to_host.send(v).await;
                }
                continue;
            }
            Ok(Frame::Eof) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the host's input");
                return;
            }
        };
        let line = match peek(&line) {
            Kind::Request { method, id } if method == "initialize" => {
                match serde_json::from_slice::<Value>(&line) {
                    Ok(message) => {
                        host.note_capabilities(message.pointer("/params/capabilities"));
                        *lock(&state.init_id) = Some(id);
                        let extended = add_capabilities(message, &capabilities);
                        serde_json::to_vec(&extended).unwrap_or(line)
                    }
                    Err(_) => line,
                }
            }
            Kind::Response { id } => {
                if host.complete(&id, serde_json::from_slice(&line).unwrap_or(Value::Null)) {
                    continue;
                }
                line
            }
            Kind::Notification { method } if method == "notifications/roots/list_changed" => {
                tracing::debug!("dropped the host's roots/list_changed: the broker owns the roots");
                continue;
            }
            _ => line,
        };
        if to_server.send(line).await.is_err() {
            return;
        }
    }
}

/// Reads the server's lines: brokered requests go to the lane, everything else to the host.
/// Returns at the end of the server's output.
async fn read_server(
    mut from_server: mpsc::Receiver<Vec<u8>>,
    host: Arc<HostChannel>,
    state: Arc<State>,
    lane: mpsc::Sender<Vec<u8>>,
    to_server: mpsc::Sender<Vec<u8>>,
) {
    let Some(to_host) = host.sender() else { return };
    while let Some(line) = from_server.recv().await {
        let routed = match peek(&line) {
            Kind::Request { method, .. } if is_brokered(&method) => Routed::lane(line),
            Kind::Request { id, .. } if host.is_reserved(&id) => Routed {
                refusal: Some(reserved_id_error(id)),
                ..Routed::default()
            },
            Kind::Response { id } => {
                let is_init = lock(&state.init_id).as_ref() == Some(&id);
                if is_init {
                    note_server_name(&state, &line);
                }
                Routed::host(line)
            }
            Kind::Batch => split_batch(&line, &host),
            _ => Routed::host(line),
        };
        let Routed {
            lane: for_lane,
            host: for_host,
            refusal,
        } = routed;
        if let Some(l) = for_lane
            && lane.send(l).await.is_err()
        {
            return;
        }
        if let Some(l) = refusal
            && to_server.send(l).await.is_err()
        {
            return;
        }
        if let Some(l) = for_host
            && to_host.send(l).await.is_err()
        {
            return;
        }
    }
}

/// Where the parts of one server line go.
#[derive(Default)]
struct Routed {
    /// Brokered requests, for the lane.
    lane: Option<Vec<u8>>,
    /// Everything else, for the host.
    host: Option<Vec<u8>>,
    /// Refusals of requests that used the proxy's reserved ids, back to the server.
    refusal: Option<Vec<u8>>,
}

impl Routed {
    fn lane(line: Vec<u8>) -> Routed {
        Routed {
            lane: Some(line),
            ..Routed::default()
        }
    }

    fn host(line: Vec<u8>) -> Routed {
        Routed {
            host: Some(line),
            ..Routed::default()
        }
    }
}

/// Splits a server's batch into brokered requests, the rest, and refusals. The broker's
/// answers come back as a batch of their own.
fn split_batch(line: &[u8], host: &HostChannel) -> Routed {
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(line) else {
        return Routed::host(line.to_vec());
    };
    let (mut ours, mut theirs, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    for item in items {
        match peek::peek_value(&item) {
            Kind::Request { method, .. } if is_brokered(&method) => ours.push(item),
            Kind::Request { id, .. } if host.is_reserved(&id) => refused.push(error_value(id)),
            _ => theirs.push(item),
        }
    }
    let encode = |v: Vec<Value>| {
        (!v.is_empty())
            .then(|| serde_json::to_vec(&Value::Array(v)).ok())
            .flatten()
    };
    Routed {
        lane: encode(ours),
        host: encode(theirs),
        refusal: encode(refused),
    }
}

fn error_value(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32600,
        "message": "request id is reserved by the proxy",
    }})
}

fn reserved_id_error(id: Value) -> Vec<u8> {
    serde_json::to_vec(&error_value(id)).unwrap_or_default()
}

fn note_server_name(state: &State, line: &[u8]) {
    let name = serde_json::from_slice::<Value>(line).ok().and_then(|v| {
        v.pointer("/result/serverInfo/name")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        let name: String = name.chars().filter(|c| !c.is_control()).take(128).collect();
        tracing::info!(server = %name, "server initialized");
        let _ = state.server_name.set(name);
    }
}

/// Answers the brokered requests in order, as `fsbroker serve` would. The session id is
/// fixed at the first request, so a session never splits in two.
async fn run_lane(
    broker: Broker,
    configured: Option<String>,
    state: Arc<State>,
    mut lane: mpsc::Receiver<Vec<u8>>,
    to_server: mpsc::Sender<Vec<u8>>,
) {
    let max_line = broker.policy().limits.max_line_bytes.get();
    let mut dispatcher: Option<Dispatcher> = None;
    while let Some(line) = lane.recv().await {
        let d = dispatcher.get_or_insert_with(|| {
            let id = state.session_id(configured.as_deref());
            Dispatcher::new(broker.clone(), &id, to_server.clone())
        });
        let Some(held) = d.reserve(line.len()).await else {
            break;
        };
        let decoded = jsonrpc::decode(&line, max_line);
        drop(line);
        if !d.submit(decoded, held).await {
            break;
        }
    }
    if let Some(d) = dispatcher {
        d.finish(true).await;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
