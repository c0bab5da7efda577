//! A server session held by the user's daemon, for a Rust host that shares the daemon with
//! its proxies: the host relays its server's brokered messages, and the daemon's broker
//! (its roots, policy, grants, locks and audit log) answers them.

use super::proof::SocketDoor;
use crate::attaching::{self, Asker, Attach, Naming};
use crate::consent::{BoxFuture, ConsentAnswer, ConsentProvider, ConsentRequest};
use crate::lines::{LineReceiver, LineSender, QUEUE_LINES, budget, line_channel};
use crate::locks::lock;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// Why a [`DaemonSession`] could not be opened or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DaemonError(String);

/// One server's session on the daemon (`fsbroker daemon`).
///
/// Messages go in the order sent; answers and notifications come back as the daemon sends
/// them. While the daemon cannot be reached, each request is answered at once with
/// `INTERNAL_ERROR`, `data.reason` `broker_unavailable`, and the session attaches again (as a
/// new session) once it answers. The session ends when the value is dropped.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_fsbroker::daemon::DaemonSession;
/// use serde_json::json;
/// let mut session = DaemonSession::attach(None, "my-server", None).await?;
/// session.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})).await?;
/// let answer = session.recv().await;
/// # Ok(()) }
/// ```
pub struct DaemonSession {
    id: Arc<Mutex<Option<String>>>,
    to_daemon: LineSender,
    from_daemon: LineReceiver,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for DaemonSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSession").finish_non_exhaustive()
    }
}

/// A session name fixed from the start, and the id the daemon gave it.
struct Named(String, Arc<Mutex<Option<String>>>);

impl Naming for Named {
    fn name(&self) -> String {
        self.0.clone()
    }
    fn era(&self) -> Option<String> {
        None
    }
    fn attached(&self, session: &str) {
        *lock(&self.1) = Some(session.to_owned());
    }
}

/// A host's consent provider, asked the daemon's questions for this session.
struct Provider(Arc<dyn ConsentProvider>);

impl Asker for Provider {
    fn ask(&self, request: ConsentRequest) -> BoxFuture<'static, Option<ConsentAnswer>> {
        let provider = self.0.clone();
        Box::pin(async move { Some(provider.decide_each(&request).await) })
    }
}

impl DaemonSession {
    /// Attaches a session named `server_id` (or `server_id#2`, ... while one of that name is
    /// live) to the daemon on `socket`, or on [`default_socket`](super::default_socket).
    /// With `consent`, the daemon asks it this session's consent questions (when the daemon's
    /// mode is `elicit`, its default); without, the daemon's fallback decides. Fails when no
    /// daemon answers or it refuses; a daemon is not started for a library host.
    pub async fn attach(
        socket: Option<&Path>,
        server_id: &str,
        consent: Option<Arc<dyn ConsentProvider>>,
    ) -> Result<DaemonSession, DaemonError> {
        let socket = match socket {
            Some(s) => s.to_owned(),
            None => super::default_socket().map_err(DaemonError)?,
        };
        let door = Arc::new(SocketDoor(socket));
        let described = attaching::describe(door.as_ref())
            .await
            .map_err(DaemonError)?;
        let max_line = described.max_line;
        let (to_daemon, input) = line_channel(QUEUE_LINES, budget(max_line));
        let (output, from_daemon) = line_channel(QUEUE_LINES, budget(max_line));
        let (_calls, no_calls) = tokio::sync::mpsc::channel(1);
        let attach = Attach {
            door,
            server_pid: None,
            identity: crate::attaching::Identified::default(),
            sandbox: None,
            asker: consent.map(|c| Arc::new(Provider(c)) as Arc<dyn Asker>),
            max_line,
        };
        let id: Arc<Mutex<Option<String>>> = Arc::default();
        let task = tokio::spawn(attaching::run(
            attach,
            Arc::new(Named(server_id.to_owned(), id.clone())),
            input,
            no_calls,
            output,
            Arc::new(|_: &Value| {}),
            std::future::pending(),
        ));
        Ok(DaemonSession {
            id,
            to_daemon,
            from_daemon,
            task,
        })
    }

    /// The session's id on the daemon, once it attached (at the first message sent): the
    /// name asked for, or `NAME#2`, ... while a session of that name was live; the id of the
    /// new session after the daemon was lost and answered again. What `fsbroker status` and
    /// `fsbroker revoke --server` name it by.
    pub fn session_id(&self) -> Option<String> {
        lock(&self.id).clone()
    }

    /// Sends one message of the server's: a request, a batch, or a `notifications/cancelled`.
    pub async fn send(&self, message: &Value) -> Result<(), DaemonError> {
        let line = serde_json::to_vec(message).map_err(|e| DaemonError(e.to_string()))?;
        self.to_daemon
            .send(line)
            .await
            .map_err(|_| DaemonError("the session has ended".into()))
    }

    /// The next message for the server (an answer or a notification); `None` once the
    /// session has ended.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            let line = self.from_daemon.recv().await?;
            // A line that is not JSON is not the daemon's; it is skipped.
            if let Ok(v) = serde_json::from_slice(&line) {
                return Some(v);
            }
        }
    }
}

impl Drop for DaemonSession {
    fn drop(&mut self) {
        self.task.abort();
    }
}
