//! The daemon's front door: [`run`] starts a daemon from a [`DaemonConfig`] and serves until
//! its shutdown resolves (or its idle exit passes). `fsbroker daemon` maps its flags onto the
//! config and calls it; a library user may do the same.

use super::console::{self, Board, Console, Store, UiConsent};
use super::services::{Reload, Services};
use super::{Attachments, Listening};
use crate::broker::{Broker, BrokerBuilder};
use crate::policy::{ConsentMode, Policy, PolicyError};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How a policy is built again, for a reload.
type Rebuild = Arc<dyn Fn() -> Result<Policy, PolicyError> + Send + Sync>;

/// Where a daemon's policy comes from: built once at the start, and built again on a reload
/// when it says how.
pub struct PolicySource {
    build: Box<dyn FnOnce() -> Result<Policy, PolicyError> + Send>,
    rebuild: Option<Rebuild>,
    file: Option<PathBuf>,
}

impl PolicySource {
    /// `policy`, for the daemon's whole life: nothing reloads it, and the `reload` op says the
    /// daemon has no policy file.
    pub fn fixed(policy: Policy) -> PolicySource {
        PolicySource {
            build: Box::new(move || Ok(policy)),
            rebuild: None,
            file: None,
        }
    }

    /// A policy built by `build` at the start, and by `rebuild` again on SIGHUP and, when the
    /// daemon has a policy `file`, when that file changes and on the `reload` op. A policy
    /// that does not load or validate on a reload leaves the old one in force.
    pub fn rebuilt(
        build: impl FnOnce() -> Result<Policy, PolicyError> + Send + 'static,
        rebuild: impl Fn() -> Result<Policy, PolicyError> + Send + Sync + 'static,
        file: Option<PathBuf>,
    ) -> PolicySource {
        PolicySource {
            build: Box::new(build),
            rebuild: Some(Arc::new(rebuild)),
            file,
        }
    }
}

impl std::fmt::Debug for PolicySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySource")
            .field("file", &self.file)
            .field("reloads", &self.rebuild.is_some())
            .finish_non_exhaustive()
    }
}

/// The console served from the daemon's start (it is served on the first sign-in link
/// otherwise).
#[derive(Debug, Clone, Copy)]
pub struct ConsoleAt {
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    /// Whether the daemon announces a one-time sign-in link; without, only where the console
    /// is served, for a daemon whose output others may read (a log file): `fsbroker console`
    /// asks the socket for a link then.
    pub link: bool,
}

/// Everything a daemon is started with: what `fsbroker daemon`'s flags set.
pub struct DaemonConfig {
    /// The control socket; its directory must be the user's alone.
    pub socket: PathBuf,
    /// Its policy.
    pub policy: PolicySource,
    /// Stop after this long without a session, a control connection or a console page.
    pub idle_exit: Option<Duration>,
    /// The console served from the start.
    pub console: Option<ConsoleAt>,
    /// Where the daemon says what its user must know: that it listens, and where its
    /// console is. By default, the log (`tracing`).
    pub announce: Box<dyn Fn(&str) + Send + Sync>,
}

impl DaemonConfig {
    /// A daemon on `socket` with `policy`, no idle exit and no console served from the start.
    pub fn new(socket: impl Into<PathBuf>, policy: PolicySource) -> DaemonConfig {
        DaemonConfig {
            socket: socket.into(),
            policy,
            idle_exit: None,
            console: None,
            announce: Box::new(|line| tracing::info!("{line}")),
        }
    }
}

impl std::fmt::Debug for DaemonConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonConfig")
            .field("socket", &self.socket)
            .field("policy", &self.policy)
            .field("idle_exit", &self.idle_exit)
            .field("console", &self.console)
            .finish_non_exhaustive()
    }
}

/// Why a daemon did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Its policy did not load or validate, or no broker could be built on it.
    #[error("{0}")]
    Policy(String),
    /// Its socket, its console or the console's saved state could not be set up.
    #[error("{0}")]
    Setup(String),
}

/// Starts a daemon as `config` says and serves until `shutdown` resolves or the daemon has
/// been idle for its `idle_exit`; then its attached sessions get the grace a sidecar gives
/// work in flight, and its socket and key are removed. Must run on a multi-threaded tokio
/// runtime. The socket is set up first: a daemon refused (another one answers, a directory
/// open to others) builds no broker.
pub async fn run(config: DaemonConfig, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let listening = Listening::bind(&config.socket).map_err(RunError::Setup)?;
    // Consent mode `elicit` (the daemon's default, as the proxy's) asks an attached proxy's
    // host; the fallback answers when there is none, or it cannot show a form.
    let attachments = Arc::new(Attachments::default());
    // The console's board: consent mode `ui`, and who answers where nobody else is chosen
    // and there is no terminal. The user's edits from it lie over every policy.
    let board = Board::new();
    let store = Store::default_place();
    let layer = match store.as_ref().map(Store::load).transpose() {
        Ok(layer) => layer.unwrap_or_default(),
        Err(message) => return Err(RunError::Setup(message)),
    };
    let parts = Parts {
        attachments: &attachments,
        board: &board,
        store: store.as_ref(),
        layer: &layer,
        socket_dir: listening.socket().parent(),
    };
    let (broker, reload) = start_broker(config.policy, &parts)?;
    let services = Services::new(&broker, reload, config.idle_exit);
    board.watch_refusals(&broker);
    let console = Console::new(console::Parts {
        broker: broker.clone(),
        attachments: attachments.clone(),
        board,
        log: services.ring(),
        store,
        layer,
        socket: listening.socket().to_owned(),
    });
    let services = services.with_console(console.clone());
    (config.announce)(&format!(
        "daemon listening on {} (pid {})",
        listening.socket().display(),
        std::process::id()
    ));
    if let Some(at) = config.console {
        (config.announce)(&serve_console(&console, at).map_err(RunError::Setup)?);
    }
    listening
        .serve(broker, attachments, services, shutdown)
        .await;
    Ok(())
}

/// What the broker is set up with beside its policy.
struct Parts<'a> {
    attachments: &'a Arc<Attachments>,
    board: &'a Arc<Board>,
    store: Option<&'a Store>,
    layer: &'a crate::policy::Layer,
    socket_dir: Option<&'a Path>,
}

/// Builds the daemon's broker on the policy `source` builds, reloaded on SIGHUP and when its
/// file changes when `source` says how; and the `reload` op's part, for a policy file.
fn start_broker(
    source: PolicySource,
    parts: &Parts<'_>,
) -> Result<(Broker, Option<Reload>), RunError> {
    let policy = (source.build)().map_err(|e| RunError::Policy(e.to_string()))?;
    let builder = configure(Broker::builder(policy), parts);
    let (broker, _broker_wide) = builder
        .audit_to_stderr_when_unset()
        .terminal_when_unset()
        .build()
        .map_err(|e| RunError::Policy(e.to_string()))?;
    let mut reload = None;
    if let Some(rebuild) = source.rebuild {
        let watched = rebuild.clone();
        tokio::spawn(crate::watch_policy(
            broker.clone(),
            move || watched(),
            source.file.clone(),
            Duration::from_secs(1),
        ));
        reload = source
            .file
            .map(|file| Reload::new(file, Box::new(move || rebuild())));
    }
    for r in broker.roots().iter() {
        tracing::info!(mount = %r.mount(), access = r.access().as_str(), "serving root");
    }
    Ok((broker, reload))
}

/// The daemon's broker set up: consent asked of attached proxies, then of the console; the
/// console's edits over its policy; its own places kept out of every root.
fn configure(b: BrokerBuilder, parts: &Parts<'_>) -> BrokerBuilder {
    let b = b
        .elicitation(parts.attachments.around())
        .default_consent_mode(ConsentMode::Elicit)
        .ui_consent(Arc::new(UiConsent(parts.board.clone())))
        .layer(parts.layer.clone())
        .resumed_by(crate::watchdog::ResumedBy::Daemon);
    // A server that may write the console's state could grant itself anything at the
    // daemon's next start.
    let b = match parts.store {
        Some(store) => b.steer_from(store.file()),
        None => b,
    };
    // No root may hold the socket's directory, now or after a reload: its key would be a
    // file a server with consent could read, or a sandbox open.
    match parts.socket_dir {
        Some(dir) => b.keep_out_of_roots(dir),
        None => b,
    }
}

/// Serves the console at `at` and says where, with a sign-in link when `at` asks for one.
fn serve_console(console: &Arc<Console>, at: ConsoleAt) -> Result<String, String> {
    if at.link {
        console::link(console, Some(at.addr)).map(|link| {
            format!(
                "console at {link} (the link works once, for five minutes; `fsbroker \
                 console` makes another)"
            )
        })
    } else {
        console::serve(console, Some(at.addr))
            .map(|at| format!("console served on http://{at} (sign in with `fsbroker console`)"))
    }
}
