//! One file per method: each parses its params, checks path and grant, and does its work
//! through the root's handle under the operation deadline. Every method's params and result
//! are types in [`wire`], the one place that shows what goes over the wire.
//!
//! Checks run in the order of the wire contract: (message and rate limit in the broker)
//! params, path, consent, then the work. Consent is checked twice: on the path as requested,
//! before any I/O, so that a server without consent cannot probe what exists; and on the real
//! path after symlinks, so that a link cannot carry a grant to a place it does not cover.

use crate::access::Access;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::json::Json;
use crate::method::Method;
use crate::path::{MountPath, RelPath, RequestPath};
use crate::policy::Limits;
use crate::root::{FollowFinal, Gate, Granted, Parents, Root};
use crate::session::Session;
use crate::state::BrokerState;
use crate::wire;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

use entry::{mime_type, mtime, shown_size, type_name};
pub(crate) use params::params;

mod consent;
mod create;
mod delete;
mod entry;
mod list;
pub use list::MAX_LIST_DEPTH;
mod params;
mod read;
mod rename;
mod roots_list;
mod stat;
mod watch;
mod write;

/// Calls the operation of `method` (parsed when the request was decoded; `name` is what was
/// sent, for the error when the broker does not answer it).
pub(crate) async fn dispatch(
    ctx: &mut Ctx,
    session: &Arc<Session>,
    method: Option<Method>,
    name: &str,
    params: Value,
) -> Result<Json> {
    let Some(method) = method else {
        let shown: String = name.chars().take(64).collect();
        return Err(Error::new(
            ErrorKind::MethodNotFound,
            format!("method not found: {shown}"),
        ));
    };
    match method {
        Method::Ping => reply(wire::Empty {}),
        Method::RootsList => roots_list::run(ctx, session, params).await.and_then(reply),
        Method::Consent => consent::run(ctx, session, params).await.and_then(reply),
        Method::Read => read::run(ctx, session, params).await,
        Method::List => list::run(ctx, session, params).await,
        Method::Stat => stat::run(ctx, session, params).await.and_then(reply),
        Method::Write => write::run(ctx, session, params).await.and_then(reply),
        Method::Create => create::run(ctx, session, params).await.and_then(reply),
        Method::Delete => delete::run(ctx, session, params).await.and_then(reply),
        Method::Rename => rename::run(ctx, session, params).await.and_then(reply),
        Method::Watch => watch::watch(ctx, session, params).await.and_then(reply),
        Method::Unwatch => watch::unwatch(ctx, session, params).and_then(reply),
    }
}

/// A method's typed result (see [`wire`]) as the JSON text that is sent.
fn reply<T: Serialize>(result: T) -> Result<Json> {
    Json::of(&result)
}

/// What one request carries through its operation: the broker, the server, and what the audit
/// line will say.
pub(crate) struct Ctx {
    inner: Arc<BrokerState>,
    /// The configuration this request works with, start to end.
    pub(crate) config: Arc<crate::config::Config>,
    server_id: String,
    /// What the audit line will say, noted as the operation goes: the request's own, so no
    /// lock.
    audit: Noted,
    /// Mounts whose directory is not at its configured path, as this request started.
    unavailable: std::collections::HashSet<String>,
    /// The request's turn (see [`Ctx::holding`]).
    turn: Option<Arc<crate::turn::Turn>>,
    /// The id the answer goes to, when there is one: results that carry bulk are written
    /// behind the head of their response line, which then need not be copied.
    id: Option<crate::jsonrpc::Id>,
    /// The CPU time its blocking work spent, in nanoseconds: shared with that work, which
    /// may outlive the request.
    cpu: Arc<std::sync::atomic::AtomicU64>,
}

/// What an operation noted for its audit line: the path it worked on and the bytes it moved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Noted {
    /// The real path, in mount form.
    pub(crate) path: Option<String>,
    /// Bytes read or written.
    pub(crate) bytes: u64,
    /// The last path asked for, as sent: a refusal's audit line logs its keyed hash.
    pub(crate) requested: Option<String>,
    /// What a `files/consent` decided.
    pub(crate) consent: Option<crate::audit::ConsentNote>,
    /// Entries a listing gave.
    pub(crate) entries: u64,
    /// The CPU time its blocking work spent so far.
    pub(crate) cpu: Duration,
}

impl Ctx {
    pub(crate) fn new(inner: Arc<BrokerState>, server_id: &str) -> Self {
        let config = inner.config();
        Ctx {
            unavailable: inner.check_roots(&config),
            config,
            inner,
            server_id: server_id.to_owned(),
            audit: Noted::default(),
            turn: None,
            cpu: Arc::default(),
            id: None,
        }
    }

    /// The request's id, for the head of its answer's line.
    pub(crate) fn answering(mut self, id: &crate::jsonrpc::Id) -> Self {
        self.id = Some(id.clone());
        self
    }

    /// The head of the line that answers this request: a result written behind it
    /// ([`crate::json::Object::after`]) goes out without being copied.
    fn result_head(&self) -> Vec<u8> {
        crate::jsonrpc::result_head(self.id.as_ref())
    }

    /// The request's turn in its session's order, held by its blocking work until that
    /// work ends, whatever becomes of the request's future.
    pub(crate) fn holding(mut self, turn: Option<Arc<crate::turn::Turn>>) -> Self {
        self.turn = turn;
        self
    }

    /// What the operation noted for its audit line, once it is over.
    pub(crate) fn take_noted(&mut self) -> Noted {
        let cpu = self.cpu.load(std::sync::atomic::Ordering::Relaxed);
        Noted {
            cpu: Duration::from_nanos(cpu),
            ..std::mem::take(&mut self.audit)
        }
    }

    fn note(&mut self, path: Option<&MountPath>, bytes: u64) {
        if let Some(p) = path {
            self.audit.path = Some(p.to_string());
        }
        self.audit.bytes += bytes;
    }

    /// Whether `root` was at its configured path as this request started.
    fn available(&self, root: &Root) -> bool {
        !self.unavailable.contains(root.mount().as_str())
    }

    fn limits(&self) -> &Limits {
        &self.config.policy.limits
    }

    /// How long a change may wait for the locks of the files it changes (see
    /// [`crate::locks::Wait`]).
    fn lock_wait(&self) -> Duration {
        Duration::from_millis(self.limits().lock_wait_ms.get())
    }

    /// Parses a request path and finds its root among those this server sees.
    fn locate(&mut self, raw: &str) -> Result<(Arc<Root>, MountPath)> {
        self.audit.requested = Some(raw.to_owned());
        let parsed = RequestPath::parse(raw)?;
        let (root, path) = self.config.roots.locate(&parsed, &self.server_id)?;
        self.note(Some(&path), 0);
        if !self.available(&root) {
            return Err(Error::denied(Reason::RootUnavailable).with_path(path.to_string()));
        }
        Ok((root, path))
    }

    /// Locates `raw` and checks, before any I/O, that the root and a grant allow `need`.
    fn authorize(
        &mut self,
        session: &Session,
        raw: &str,
        need: Access,
    ) -> Result<(Arc<Root>, MountPath)> {
        let (root, path) = self.locate(raw)?;
        if need > root.access() {
            return Err(Error::denied(Reason::ReadOnly).with_path(path.to_string()));
        }
        session.grants().check(&path, need)?;
        Ok((root, path))
    }

    /// As [`Ctx::authorize`] for operations on an entry's name (create, delete), which never
    /// act on a root itself.
    fn authorize_entry(
        &mut self,
        session: &Session,
        raw: &str,
        need: Access,
    ) -> Result<(Arc<Root>, MountPath)> {
        let (root, path) = self.authorize(session, raw, need)?;
        if path.rel.is_root() {
            return Err(create::root_itself().with_path(path.to_string()));
        }
        Ok((root, path))
    }

    /// Runs blocking filesystem work on the blocking pool, holding one of the session's
    /// in-flight permits, and answers `TIMEOUT` when the deadline passes. The permit and the
    /// request's turn move into the blocking task, so a task that outlives its answer (timed
    /// out, or its future dropped) still counts against the cap and still holds back the
    /// session's later changes until it really ends; the task itself checks the deadline
    /// between bounded steps.
    ///
    /// The CPU time the work spends is charged, when it ends, to the request, its session's
    /// counters and its CPU budget, also for work that outlives its answer.
    async fn run<T, F>(&self, session: &Session, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Deadline) -> Result<T> + Send + 'static,
    {
        self.run_on(session, Where::Pool, self.deadline(), work)
            .await
    }

    /// [`Ctx::run`] for work that takes microseconds (a stat, a small read): it runs on the
    /// broker's I/O lane (see [`crate::lane`]), under the same deadline, permit and turn.
    pub(crate) async fn run_small<T, F>(&self, session: &Session, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Deadline) -> Result<T> + Send + 'static,
    {
        self.run_on(session, Where::Lane, self.deadline(), work)
            .await
    }

    /// The deadline of blocking work that starts now, by the runtime's clock (the one its
    /// timer waits on: they differ only when a test has moved that clock on).
    fn deadline(&self) -> Instant {
        tokio::time::Instant::now().into_std()
            + Duration::from_millis(self.limits().timeout_ms.get())
    }

    /// [`Ctx::run`] in `place`, by `deadline`.
    async fn run_on<T, F>(
        &self,
        session: &Session,
        place: Where,
        deadline: Instant,
        work: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Deadline) -> Result<T> + Send + 'static,
    {
        let semaphore = session.in_flight.clone();
        let turn = self.turn.clone();
        let meters = (self.cpu.clone(), session.cpu.clone());
        let (config, key) = (self.config.clone(), session.budget_key().to_owned());
        let inner = self.inner.clone();
        let job = async move {
            let permit = semaphore
                .acquire_owned()
                .await
                .map_err(|_| Error::new(ErrorKind::Internal, "session is closing"))?;
            let blocking = move || {
                let _held = (permit, turn);
                Deadline::at(deadline).check()?;
                let start = thread_cpu();
                let result = work(Deadline::at(deadline));
                let spent = thread_cpu().saturating_sub(start);
                charge([&meters.0, &meters.1], &config, &key, spent);
                result
            };
            let failed = || Error::new(ErrorKind::Internal, "operation failed");
            match place {
                Where::Pool => tokio::task::spawn_blocking(blocking)
                    .await
                    .map_err(|_| failed())?,
                Where::Lane => {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    inner.lane.submit(Box::new(move || {
                        let _ = tx.send(blocking());
                    }));
                    // Every STUCK, a job still waiting has what is queued moved off a
                    // stuck lane (see `Lane::unstick`); the deadline around all this ends it.
                    tokio::pin!(rx);
                    loop {
                        match tokio::time::timeout(crate::lane::STUCK, &mut rx).await {
                            Ok(r) => break r.map_err(|_| failed())?,
                            Err(_) => inner.lane.unstick(),
                        }
                    }
                }
            }
        };
        match tokio::time::timeout_at(deadline.into(), job).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(ErrorKind::Timeout, "operation timed out")),
        }
    }
}

/// Where [`Ctx::run_on`] runs blocking work.
#[derive(Clone, Copy)]
enum Where {
    /// tokio's blocking pool: a thread of its own, for work that may take long.
    Pool,
    /// The broker's I/O lane, for work that takes microseconds.
    Lane,
}

impl Ctx {
    /// Runs `f`, a step of the request's own (the encoding or decoding of content) that
    /// takes CPU time in proportion to what the server sent or asked for, and charges that
    /// time as [`Ctx::run`] charges its blocking work. `f` has no await in it, so the
    /// thread's clock counts it alone.
    fn metered<T>(&self, session: &Session, f: impl FnOnce() -> T) -> T {
        let start = thread_cpu();
        let out = f();
        let spent = thread_cpu().saturating_sub(start);
        charge(
            [&self.cpu, &session.cpu],
            &self.config,
            session.budget_key(),
            spent,
        );
        out
    }
}

/// Charges `spent` CPU time to the request's and its session's meters and to the CPU budget
/// of the session whose budgets `key` names.
fn charge(
    meters: [&std::sync::atomic::AtomicU64; 2],
    config: &crate::config::Config,
    key: &str,
    spent: Duration,
) {
    let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
    for meter in meters {
        meter.fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
    }
    config.rate.charge_cpu(key, spent);
}

/// The CPU time the calling thread has spent (zero where the clock cannot be read, which
/// leaves work uncounted rather than fail it).
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// Resolves `rel` through the root under the session's grants as they stand now: the only way
/// an operation gets a handle (see [`crate::root::Granted`]). The grants are checked on every
/// place the walk looks at before it looks, and on the real path before the handle exists.
fn resolve_granted(
    root: &Root,
    session: &Session,
    rel: &RelPath,
    follow: FollowFinal,
    parents: Parents,
    need: Access,
    deadline: Deadline,
) -> Result<Granted> {
    let gate = Gate::new(session.grants().clone(), need);
    root.resolve(rel, &gate, follow, parents, Some(deadline))
}

/// The keep-before-destroy guard for the change `session` makes by `method` at `at` in
/// `root`: keeps and journals in the broker's recovery store, or does nothing when recovery
/// is off (see [`Keeping`](crate::recovery::Keeping)).
fn keeping<'a>(
    inner: &'a BrokerState,
    session: &Session,
    method: &'static str,
    root: &Root,
    at: &Granted,
    deadline: Deadline,
) -> crate::recovery::Keeping<'a> {
    let origin = crate::recovery::Origin::server(
        session.server_id(),
        session.label(),
        method,
        at.real().to_string(),
        root.host_path_of(&RelPath::root()),
    )
    .of_identity(session.identity().map(|i| i.digest.as_str()));
    crate::recovery::Keeping::begin(inner.recovery.as_deref(), origin, deadline)
}

/// [`resolve_granted`] for the methods that act on what a path leads to: a final symlink is
/// followed (inside the root), and nothing is created on the way.
fn resolve_target(
    root: &Root,
    session: &Session,
    rel: &RelPath,
    need: Access,
    deadline: Deadline,
) -> Result<Granted> {
    resolve_granted(
        root,
        session,
        rel,
        FollowFinal::Yes,
        Parents::Existing,
        need,
        deadline,
    )
}
