//! The daemon's listening socket and each connection to it: the peer check, the hello, then
//! control requests, a `log` or `describe` follower, or an attached session.

use super::dispatch::{self, Reply, Served};
use super::greeting::{Greeting, MAX_GREETING, to_drop};
use super::hush::Hush;
use super::line::{self, send};
use super::lineage::Sandboxers;
use super::protocol::{AttachRequest, Hello};
use super::secret::Secret;
use super::services::Services;
use super::{attach, socket};
use crate::broker::Broker;
use crate::daemon::Attachments;
use crate::framing::{Frame, next_frame};
use serde_json::{Value, json};
use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, watch};

/// How long a connection may take to send its hello.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// Most control connections served at once after their hello; one more is told so and
/// closed.
const MAX_CONNECTIONS: usize = 64;

/// Most attached sessions at once: as many as a broker holds.
const MAX_ATTACHED: usize = crate::broker::MAX_SESSIONS;

/// The slots connections take once they have said hello: a control connection's, and an
/// attached session's, which it trades the first for.
struct Slots {
    control: Arc<Semaphore>,
    attached: Arc<Semaphore>,
}

/// A daemon's socket, bound, with its key written and its lock held.
#[derive(Debug)]
pub(crate) struct Listening {
    socket: PathBuf,
    key: PathBuf,
    listener: UnixListener,
    secret: Arc<Secret>,
    uid: u32,
    _lock: File,
}

impl Listening {
    /// Checks the place of `socket` (its length, its directory, no live daemon), takes the
    /// lock, writes a fresh key and binds. Must run on a tokio runtime.
    pub(crate) fn bind(socket: &Path) -> Result<Listening, String> {
        let uid = rustix::process::getuid().as_raw();
        socket::check_length(socket)?;
        let dir = socket::private_dir(socket::dir_of(socket)?, uid)?;
        // From here on by its real place, which nobody else can change.
        let name = socket
            .file_name()
            .ok_or_else(|| format!("{} names no socket file", socket.display()))?;
        let socket = &dir.join(name);
        socket::check_length(socket)?;
        // Said first, so that a second daemon hears why rather than meeting the lock.
        socket::refuse_live(socket)?;
        let lock = socket::lock(socket)?;
        socket::clear_stale(socket)?;
        let key = socket::sibling(socket, "key");
        let secret = Secret::create(&key)?;
        let listener = UnixListener::bind(socket).map_err(|e| {
            let _ = std::fs::remove_file(&key);
            format!("cannot listen on {}: {e}", socket.display())
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600));
        }
        Ok(Listening {
            socket: socket.to_owned(),
            key,
            listener,
            secret: Arc::new(secret),
            uid,
            _lock: lock,
        })
    }

    /// The socket's path.
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// Serves connections for `broker` (its consent questions routed by `attachments`), with
    /// `services`, until `shutdown` resolves or the daemon has been idle for its
    /// `--idle-exit`; then gives attached sessions the grace the sidecar gives their work in
    /// flight, and removes the socket and the key (as dropping it does).
    pub(crate) async fn serve(
        self,
        broker: Broker,
        attachments: Arc<Attachments>,
        services: Services,
        shutdown: impl Future<Output = ()>,
    ) {
        let (stop, stopping) = watch::channel(false);
        let admission = Admission {
            slots: Arc::new(Slots {
                control: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
                attached: Arc::new(Semaphore::new(MAX_ATTACHED)),
            }),
            greeting: Arc::new(Greeting::default()),
            daemon: Daemon {
                sandboxers: Arc::new(Sandboxers::default()),
                refusals: Arc::new(Refusals::default()),
                broker,
                attachments,
                services: Arc::new(services),
                secret: self.secret.clone(),
                uid: self.uid,
                stop: stopping,
            },
        };
        tokio::pin!(shutdown);
        let idle = admission
            .daemon
            .services
            .idle_expired(&admission.daemon.broker);
        tokio::pin!(idle);
        loop {
            let stream = tokio::select! {
                () = &mut shutdown => break,
                () = &mut idle => {
                    tracing::info!("idle for the --idle-exit time; shutting down");
                    break;
                }
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors, most likely: wait rather than spin.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            admission.admit(stream);
        }
        let _ = stop.send(true);
        admission.slots.wind_down().await;
    }
}

/// What the accepting loop hands each connection.
struct Admission {
    slots: Arc<Slots>,
    greeting: Arc<Greeting>,
    daemon: Daemon,
}

impl Admission {
    /// Starts serving `stream` on a task of its own, among those waiting to say hello; when
    /// too many wait, one is dropped (see [`Greeting`]).
    fn admit(&self, stream: UnixStream) {
        let daemon = &self.daemon;
        // A sandboxed server's process is refused before it waits among the user's.
        let pid = peer_pid(stream.peer_cred().ok());
        if let Some(why) = daemon.sandboxers.refuse(pid) {
            daemon.refusals.beneath.warn(&why);
            refuse_now(&stream, &why);
            return;
        }
        let id = self
            .greeting
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let busy = daemon.services.busy();
        let (daemon, slots, greeted) = (daemon.clone(), self.slots.clone(), self.greeting.clone());
        // Registered under the lock it is spawned under, so that its `done` comes after.
        let mut waiting = crate::locks::lock(&self.greeting.waiting);
        let task = tokio::spawn(async move {
            connection(stream, &daemon, (id, &greeted), &slots).await;
            drop(busy);
        });
        waiting.push_back((id, pid, task.abort_handle()));
        if waiting.len() > MAX_GREETING
            && let Some(at) = to_drop(&waiting)
            && let Some((_, pid, dropped)) = waiting.remove(at)
        {
            dropped.abort();
            self.daemon.refusals.dropped.warn(&format!(
                "more than {MAX_GREETING} connections waiting to say hello; dropped the \
                 oldest of the process with the most (pid {pid:?})"
            ));
        }
    }
}

impl Slots {
    /// Waits for the connections to end, as a sidecar does on SIGTERM: attached sessions'
    /// work in flight gets its grace, then the connections close.
    async fn wind_down(&self) {
        let grace = crate::order::SHUTDOWN_GRACE + Duration::from_secs(1);
        let all = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let ended = async {
            let _ = self.control.acquire_many(all(MAX_CONNECTIONS)).await;
            let _ = self.attached.acquire_many(all(MAX_ATTACHED)).await;
        };
        let _ = tokio::time::timeout(grace, ended).await;
    }
}

/// The refusals a peer can cause by the thousand, each kind logged at most once a second.
#[derive(Default)]
struct Refusals {
    /// Connections from beneath a sandboxing proxy.
    beneath: Hush,
    /// Connections that did not prove the key.
    keyless: Hush,
    /// Connections of another user.
    foreign: Hush,
    /// Connections dropped while waiting to say hello.
    dropped: Hush,
}

/// What every connection shares.
#[derive(Clone)]
struct Daemon {
    sandboxers: Arc<Sandboxers>,
    refusals: Arc<Refusals>,
    broker: Broker,
    attachments: Arc<Attachments>,
    services: Arc<Services>,
    secret: Arc<Secret>,
    uid: u32,
    stop: watch::Receiver<bool>,
}

impl Drop for Listening {
    /// The socket and the key go with the daemon (the lock file stays: removing it would let
    /// two daemons hold locks on two different files).
    fn drop(&mut self) {
        for path in [&self.socket, &self.key] {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

impl Daemon {
    /// What a request is served with.
    fn served(&self) -> Served<'_> {
        Served {
            broker: &self.broker,
            attachments: &self.attachments,
            services: &self.services,
        }
    }
}

/// A connection that has said hello: its two ends.
type Greeted = (BufReader<OwnedReadHalf>, OwnedWriteHalf);

/// One connection: the peer check, the hello, a slot, then one answer per request line.
/// `greeting` is its number among those waiting to say hello, and where they wait.
async fn connection(
    stream: UnixStream,
    daemon: &Daemon,
    greeting: (u64, &Greeting),
    slots: &Slots,
) {
    let cred = stream.peer_cred().ok();
    let Some((mut reader, mut write)) = hello(stream, daemon).await else {
        return;
    };
    greeting.1.done(greeting.0);
    let Ok(slot) = slots.control.clone().try_acquire_owned() else {
        let e = line::error(format!(
            "too many connections (at most {MAX_CONNECTIONS}); try again"
        ));
        let _ = send(&mut write, &e).await;
        return;
    };
    let welcome = json!({"ok": true, "daemon": "fsbroker", "version": env!("CARGO_PKG_VERSION")});
    if send(&mut write, &welcome).await.is_err() {
        return;
    }
    loop {
        let reply = match next_frame(&mut reader, line::MAX_LINE).await {
            Ok(Frame::Line(line)) => dispatch::answer_line(daemon.served(), &line).await,
            Ok(Frame::TooLong(n)) => Reply::Line(line::error(format!(
                "a line of {n} bytes is over the limit of {} bytes",
                line::MAX_LINE
            ))),
            Ok(Frame::Eof) | Err(_) => return,
        };
        match reply {
            Reply::Line(answer) => {
                if send(&mut write, &answer).await.is_err() {
                    return;
                }
            }
            Reply::Log(first, follow) => {
                if send(&mut write, &first).await.is_ok() {
                    follow.run(&mut reader, &mut write).await;
                }
                return;
            }
            Reply::Describing => {
                // Only a sandboxing proxy follows the description, for its sandbox's roots.
                let _sandboxing = peer_pid(cred).map(|p| daemon.sandboxers.register(p));
                attach::follow(&daemon.broker, reader, write, daemon.stop.clone()).await;
                return;
            }
            Reply::Attach(request) => {
                drop(slot);
                attached(daemon, cred, *request, (reader, write), slots).await;
                return;
            }
        }
    }
}

/// The peer check and the hello: the connection's two ends once the peer is this user and
/// has proven the key; `None` once it has been told why not.
async fn hello(stream: UnixStream, daemon: &Daemon) -> Option<Greeted> {
    let peer = stream.peer_cred().ok().map(|c| c.uid());
    if let Some(message) = socket::refuse_peer(peer, daemon.uid) {
        daemon.refusals.foreign.warn(&message);
        refuse(stream, line::error(message)).await;
        return None;
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let hello = tokio::time::timeout(HELLO_WAIT, next_frame(&mut reader, line::MAX_LINE)).await;
    let proven = match hello {
        Ok(Ok(Frame::Line(line))) => {
            serde_json::from_slice::<Hello>(&line).is_ok_and(|h| daemon.secret.matches(&h.hello))
        }
        _ => false,
    };
    if proven {
        return Some((reader, write));
    }
    daemon
        .refusals
        .keyless
        .warn("refused a connection without the daemon's key");
    let message = "refused: the first line must be {\"hello\": KEY}, KEY being what the \
                   daemon's key file beside the socket holds";
    let _ = send(&mut write, &line::error(message)).await;
    let _ = write.shutdown().await;
    None
}

/// Serves the session `request` attaches on the connection, in an attached session's slot
/// (its control slot already given back); refused when there is none.
async fn attached(
    daemon: &Daemon,
    cred: Option<tokio::net::unix::UCred>,
    request: AttachRequest,
    (reader, mut write): Greeted,
    slots: &Slots,
) {
    let Ok(_session) = slots.attached.clone().try_acquire_owned() else {
        let e = line::error(format!(
            "too many attached sessions (at most {MAX_ATTACHED})"
        ));
        let _ = send(&mut write, &e).await;
        return;
    };
    let pid = cred.and_then(|c| c.pid());
    let _sandboxing = request
        .sandboxed()
        .then(|| peer_pid(cred))
        .flatten()
        .map(|p| daemon.sandboxers.register(p));
    let (b, a, stop) = (&daemon.broker, &daemon.attachments, daemon.stop.clone());
    attach::run(b, a, request, pid, reader, write, stop).await;
}

/// The process id of a peer, from its credentials.
fn peer_pid(cred: Option<tokio::net::unix::UCred>) -> Option<u32> {
    cred.and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok())
}

/// Says why on a connection refused before it is served, without waiting: what does not fit
/// in the socket's buffer at once is not sent, and the connection is closed.
fn refuse_now(stream: &UnixStream, why: &str) {
    if let Ok(mut line) = serde_json::to_vec(&line::error(why)) {
        line.push(b'\n');
        let _ = stream.try_write(&line);
    }
}

/// Sends `message` on a connection that will be served nothing else, then closes it, reading
/// (and dropping) a little of what the peer sent so that the line is not lost to a reset.
async fn refuse(mut stream: UnixStream, message: Value) {
    if send(&mut stream, &message).await.is_ok() {
        let _ = stream.shutdown().await;
        drain(&mut stream).await;
    }
}

/// Reads and drops at most 64 KiB, for at most a second.
async fn drain(r: &mut (impl AsyncRead + Unpin)) {
    let mut sink = tokio::io::sink();
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::io::copy(&mut r.take(64 * 1024), &mut sink),
    )
    .await;
}
