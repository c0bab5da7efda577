//! `fsbroker proxy`: sits between a host and an MCP server, a local command (perhaps in the
//! sandbox) or a remote URL, answering the server's file requests.

use super::runtime::{shutdown_signal, start_broker};
use super::terminal::err;
use super::{ProxyArgs, attach};
use crate::BrokerBuilder;
use crate::attaching::{Attach, Door};
use crate::daemon::in_process::InProcess;
use crate::policy::ConsentMode;
use crate::proxy::Backend;
use crate::proxy::remote::{self, RemoteConfig};
use crate::proxy::sandbox::RootSource;
use crate::proxy::{Link, Proxy, sandbox};
use std::process::ExitCode;

/// Where the server is: what the flags ask for, checked before anything starts.
enum Server {
    /// A remote server, its URL and extra headers.
    Remote(url::Url, reqwest::header::HeaderMap),
    /// A local command, in the sandbox when one is asked for.
    Local(Option<sandbox::SandboxOptions>),
}

/// Proxies until the host or the server goes: the code the session ends with, 2 for a usage
/// error or a policy that does not load, or the failed start's own code (127 for a command
/// that is not found).
pub(super) async fn run(args: ProxyArgs) -> ExitCode {
    // Usage errors are reported before anything starts.
    let server = match server(&args) {
        Ok(s) => s,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::from(2);
        }
    };
    let proxy = Proxy::new(args.common.server_id.clone()).era(args.era);
    let backend = match attach::socket(args.attach.daemon.as_ref()) {
        Some(socket) => match attached(socket, &args, &server, &proxy).await {
            Ok(b) => b,
            Err((message, code)) => {
                err!("fsbroker: {message}");
                return ExitCode::from(code);
            }
        },
        None => match own_broker(&args, &proxy).await {
            Ok(b) => b,
            Err(code) => return code,
        },
    };
    let mut backend = backend;
    let (link, outcome) = match start(server, &mut backend, &args).await {
        Ok(started) => started,
        Err((message, code)) => {
            err!("fsbroker: {message}");
            return ExitCode::from(code);
        }
    };
    let code = proxy
        .run(
            backend,
            super::stdio::stdin_reader(),
            super::stdio::stdout_writer(),
            link,
            shutdown_signal(),
        )
        .await;
    super::stdio::restore_blocking();
    if let Some(e) = outcome.and_then(|o| o.take_error()) {
        err!("fsbroker: {e}");
    }
    ExitCode::from(code)
}

/// Starts the server the flags name (a remote link, a sandboxed or a plain child) for the
/// broker `backend` reaches, and gives the backend who the server is: what a local command
/// is, read before it starts (once its code runs, it could rewrite its own files), or a
/// remote server's origin and key. The link and, for a remote server, how its session ends;
/// else the message and the exit code.
async fn start(
    server: Server,
    backend: &mut Backend,
    args: &ProxyArgs,
) -> Result<(Link, Option<remote::Outcome>), (String, u8)> {
    let max_line = backend.max_line();
    let remote_url = match &server {
        Server::Remote(url, _) => Some(url.clone()),
        Server::Local(_) => None,
    };
    // The program file the sandbox holds, for the identity: what is identified is what runs.
    let mut pin = None;
    let starting = match &remote_url {
        Some(_) => None,
        None => Some(super::identify::before_start(&args.command).await),
    };
    let (link, outcome) = match server {
        Server::Remote(url, headers) => remote::connect(RemoteConfig {
            url,
            headers,
            connect_timeout: args.connect_timeout,
            request_timeout: args.request_timeout,
            retries: args.retries,
            max_message: max_line,
            grace: args.shutdown_grace,
        })
        .map(|(link, outcome)| (link, Some(outcome)))
        .map_err(|e| (e.to_string(), 1))?,
        Server::Local(Some(options)) => {
            let source = RootSource {
                door: backend.attach.door.clone(),
                roots: backend.described.roots.clone(),
                kept: (*backend.described.kept).clone(),
            };
            let (link, held) = sandbox::spawn_sandboxed(
                &args.command,
                &options,
                &source,
                args.common.server_id.as_deref(),
                max_line,
                args.shutdown_grace,
            )
            .map_err(|e| (e.to_string(), e.exit_code()))?;
            pin = held;
            (link, None)
        }
        Server::Local(None) => {
            let roots: Vec<std::path::PathBuf> = backend
                .described
                .roots
                .iter()
                .map(|r| r.path.clone())
                .collect();
            crate::proxy::own_dirs::warn_outside_roots(&args.command, &roots);
            let link = crate::proxy::spawn_child(&args.command, max_line, args.shutdown_grace)
                .map_err(|e| (e.to_string(), e.exit_code()))?;
            (link, None)
        }
    };
    backend.attach.identity = match (&remote_url, &outcome, starting) {
        (Some(url), Some(outcome), _) => {
            super::identify::of_url(url, outcome.clone(), args.connect_timeout)
        }
        (None, _, Some(starting)) => super::identify::of_command(starting, link.pid, pin),
        _ => crate::attaching::Identified::default(),
    };
    Ok((link, outcome))
}

/// The daemon's session for this proxy, or why there is none and the exit code: 2 for flags
/// that only the daemon may set, 1 when no daemon answers.
async fn attached(
    socket: Result<std::path::PathBuf, String>,
    args: &ProxyArgs,
    server: &Server,
    proxy: &Proxy,
) -> Result<Backend, (String, u8)> {
    let socket = socket.map_err(|e| (e, 1))?;
    attach::refuse_own_broker(&args.common).map_err(|e| (e, 2))?;
    // What `status` shows of the sandbox; what the kernel cannot enforce is in the proxy's log.
    let sandbox = match server {
        Server::Local(Some(o)) => Some(serde_json::json!({
            "mode": match o.mode {
                sandbox::SandboxMode::Strict => "strict",
                sandbox::SandboxMode::BestEffort => "best-effort",
            },
            "caps": o.caps.any().then(|| o.caps.describe()),
        })),
        _ => None,
    };
    let described = attach::described(&socket).await.map_err(|e| (e, 1))?;
    let door: std::sync::Arc<dyn Door> =
        std::sync::Arc::new(crate::daemon::proof::SocketDoor(socket));
    Ok(backend(described, door, sandbox, proxy))
}

/// A broker of the proxy's own, reached as the daemon is (over an in-memory line pair), or
/// the code to exit with when it cannot start.
async fn own_broker(args: &ProxyArgs, proxy: &Proxy) -> Result<Backend, ExitCode> {
    // The proxy asks through the host unless the mode says otherwise: a host launches it
    // without a terminal, so the host's own interface is where the user is.
    let sessions = InProcess::default();
    let elicit = |b: BrokerBuilder| {
        b.elicitation(sessions.elicitation())
            .default_consent_mode(ConsentMode::Elicit)
            .resumed_by(crate::watchdog::ResumedBy::SessionEnd)
    };
    // The broker's own notifications all come on its sessions' connections.
    let (broker, _notifications) = start_broker(&args.common, elicit)?;
    let door = sessions.door(broker);
    let described = crate::attaching::describe(door.as_ref())
        .await
        .map_err(|e| {
            err!("fsbroker: {e}");
            ExitCode::FAILURE
        })?;
    Ok(backend(described, door, None, proxy))
}

/// The proxy's session on the broker that `described` itself behind `door`.
fn backend(
    described: crate::attaching::Described,
    door: std::sync::Arc<dyn Door>,
    sandbox: Option<serde_json::Value>,
    proxy: &Proxy,
) -> Backend {
    let max_line = described.max_line;
    Backend {
        described,
        attach: Attach {
            door,
            server_pid: None,
            identity: crate::attaching::Identified::default(),
            sandbox,
            asker: Some(proxy.asker()),
            max_line,
        },
    }
}

/// The server the flags name, or the usage error to report. What clap cannot check is
/// checked here: a URL and headers that parse (credentials only from the environment), a
/// sandbox's allowances, and a server at all.
fn server(args: &ProxyArgs) -> Result<Server, String> {
    let remote = args
        .url
        .as_deref()
        .map(|url| remote_target(url, args))
        .transpose()
        .map_err(|e| e.to_string())?;
    // Not clap's `requires_if`: clap lets a required argument be missing when it conflicts
    // with one present, and `--sandbox` conflicts with `--url`.
    if args.sandbox_net != "any" && args.sandbox.is_none() {
        return Err("--sandbox-net needs --sandbox".into());
    }
    if let Some((url, headers)) = remote {
        return Ok(Server::Remote(url, headers));
    }
    let sandbox = sandbox_options(args)?;
    if args.command.is_empty() {
        return Err("proxy needs the server command (e.g. `fsbroker proxy --root DIR node server.js`) or --url URL".into());
    }
    Ok(Server::Local(sandbox))
}

/// The sandbox the proxy's flags ask for, if any.
fn sandbox_options(args: &ProxyArgs) -> Result<Option<sandbox::SandboxOptions>, String> {
    let Some(mode) = &args.sandbox else {
        return Ok(None);
    };
    let allow = args
        .sandbox_allow
        .iter()
        .map(|a| a.parse::<sandbox::SandboxAllow>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--sandbox-allow {e}"))?;
    let mut caps = sandbox::Caps::default();
    for spec in &args.sandbox_limit {
        caps.add(spec).map_err(|e| format!("--sandbox-limit {e}"))?;
    }
    Ok(Some(sandbox::SandboxOptions {
        caps,
        mode: if mode == "best-effort" {
            sandbox::SandboxMode::BestEffort
        } else {
            sandbox::SandboxMode::Strict
        },
        allow,
        net: if args.sandbox_net == "none" {
            sandbox::SandboxNet::None
        } else {
            sandbox::SandboxNet::Any
        },
    }))
}

/// The remote endpoint and its extra headers, with secrets read from the environment.
fn remote_target(
    url: &str,
    args: &ProxyArgs,
) -> Result<(url::Url, reqwest::header::HeaderMap), remote::ConfigError> {
    let url = remote::parse_url(url)?;
    let headers = remote::build_headers(
        &url,
        remote::HeaderArgs {
            plain: &args.headers,
            from_env: &args.header_env,
            bearer_env: args.bearer_env.as_deref(),
        },
        |var| std::env::var(var).ok(),
    )?;
    Ok((url, headers))
}
