//! The `fsbroker` binary: parses arguments, sets up logging, and calls into the library.
//! It needs the features `cli` and `proxy` (both on by default).

use clap::Parser;
use mcp_fsbroker::cli::{Cli, Command, CommonArgs, ProxyArgs};
use mcp_fsbroker::policy::ConsentMode;
use mcp_fsbroker::proxy::Proxy;
use mcp_fsbroker::proxy::remote::{self, RemoteConfig};
use mcp_fsbroker::proxy::sandbox;
use mcp_fsbroker::{Broker, BrokerBuilder, Notifications};
use std::process::ExitCode;
use std::time::Duration;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr: stdout carries only protocol messages.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(log_filter())
        .init();
    match cli.command {
        Command::CheckPolicy { files } => check_policy(&files),
        Command::Serve(args) => run(|| serve(args)),
        Command::Proxy(args) => run(|| proxy(*args)),
        // Before any runtime starts: Landlock restricts the calling thread, and the server
        // that replaces this process must inherit the restriction whole.
        Command::SandboxExec { command } => {
            ExitCode::from(mcp_fsbroker::proxy::sandbox::exec_helper(&command))
        }
    }
}

/// Checks every policy file, printing each one's effective configuration (under a comment
/// naming the file when there are several); any file that does not load makes the exit 2,
/// after the others were checked too, so one run reports every broken file.
fn check_policy(files: &[std::path::PathBuf]) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    for file in files {
        match mcp_fsbroker::Policy::load(file) {
            Ok(policy) => {
                if files.len() > 1 {
                    println!("# {}", file.display());
                }
                print!("{}", mcp_fsbroker::policy::describe(&policy));
            }
            Err(e) => {
                eprintln!("fsbroker: {e}");
                code = ExitCode::from(2);
            }
        }
    }
    code
}

/// The log filter from `FSBROKER_LOG`, `warn` by default. An empty (or blank) value counts
/// as unset: host configuration templates often produce `FSBROKER_LOG=`, and an empty filter
/// would silence even errors. A value that does not parse also falls back to `warn`.
fn log_filter() -> EnvFilter {
    match std::env::var("FSBROKER_LOG") {
        Ok(v) if !v.trim().is_empty() => {
            EnvFilter::try_new(v.trim()).unwrap_or_else(|_| EnvFilter::new("warn"))
        }
        _ => EnvFilter::new("warn"),
    }
}

/// Runs `job` on a multi-threaded runtime and returns its exit code.
fn run<F, Fut>(job: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fsbroker: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        // A write past the file-size limit (RLIMIT_FSIZE) would otherwise kill the process
        // with SIGXFSZ; handled, the write fails with EFBIG and is reported.
        let _xfsz = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(
            rustix::process::Signal::XFSZ.as_raw(),
        ));
        job().await
    });
    // Stdin is read on a blocking thread that may be parked in read(2); do not wait for it.
    runtime.shutdown_background();
    code
}

/// Builds the broker for `args` (its builder set up further by `configure`) and starts
/// reloading its policy on SIGHUP and when the file changes.
fn start_broker(
    args: &CommonArgs,
    configure: impl FnOnce(BrokerBuilder) -> BrokerBuilder,
) -> Result<(Broker, Notifications), ExitCode> {
    let policy = args.build_policy(true).map_err(|e| {
        eprintln!("fsbroker: {e}");
        ExitCode::from(2)
    })?;
    let (broker, outbound) = configure(Broker::builder(policy).audit_to_stderr_when_unset())
        .build()
        .map_err(|e| {
            eprintln!("fsbroker: {e}");
            ExitCode::from(2)
        })?;
    let reload_args = args.clone();
    tokio::spawn(mcp_fsbroker::watch_policy(
        broker.clone(),
        move || reload_args.build_policy_for_reload(true),
        args.policy.clone(),
        Duration::from_secs(1),
    ));
    for r in broker.roots().iter() {
        tracing::info!(mount = %r.mount(), access = r.access().as_str(), "serving root");
    }
    Ok((broker, outbound))
}

async fn serve(args: CommonArgs) -> ExitCode {
    if args.consent == Some(ConsentMode::Elicit) {
        eprintln!(
            "fsbroker: --consent elicit asks through the host, which only `fsbroker proxy` can do"
        );
        return ExitCode::from(2);
    }
    let (broker, outbound) = match start_broker(&args, |b| b) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let server_id = args
        .server_id
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let result = mcp_fsbroker::serve(
        broker,
        &server_id,
        tokio::io::stdin(),
        stdout_writer(),
        outbound,
        shutdown_signal(),
    )
    .await;
    restore_stdout_blocking();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fsbroker: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn proxy(args: ProxyArgs) -> ExitCode {
    // Usage errors in the remote options are reported before anything starts.
    let remote = match args.url.as_deref().map(|u| remote_target(u, &args)) {
        Some(Ok(target)) => Some(target),
        Some(Err(e)) => {
            eprintln!("fsbroker: {e}");
            return ExitCode::from(2);
        }
        None => None,
    };
    if remote.is_none()
        && (!args.headers.is_empty() || !args.header_env.is_empty() || args.bearer_env.is_some())
    {
        eprintln!("fsbroker: --header, --header-env and --bearer-env need --url");
        return ExitCode::from(2);
    }
    if args.sandbox_net != "any" && args.sandbox.is_none() {
        eprintln!("fsbroker: --sandbox-net needs --sandbox");
        return ExitCode::from(2);
    }
    let sandbox = match sandbox_options(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fsbroker: {e}");
            return ExitCode::from(2);
        }
    };
    if remote.is_none() && args.command.is_empty() {
        eprintln!(
            "fsbroker: proxy needs the server command (e.g. `fsbroker proxy --root DIR node server.js`) or --url URL"
        );
        return ExitCode::from(2);
    }
    let proxy = Proxy::new(args.common.server_id.clone()).era(args.era);
    // The proxy asks through the host unless the mode says otherwise: a host launches it
    // without a terminal, so the host's own interface is where the user is.
    let elicit = |b: BrokerBuilder| {
        b.elicitation(proxy.elicitation())
            .default_consent_mode(ConsentMode::Elicit)
    };
    let (broker, outbound) = match start_broker(&args.common, elicit) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let max_line = broker.policy().limits.max_line_bytes.get();
    let (link, outcome) = match remote {
        Some((url, headers)) => {
            let cfg = RemoteConfig {
                url,
                headers,
                connect_timeout: args.connect_timeout,
                request_timeout: args.request_timeout,
                retries: args.retries,
                max_message: max_line,
                grace: args.shutdown_grace,
            };
            match remote::connect(cfg) {
                Ok((link, outcome)) => (link, Some(outcome)),
                Err(e) => {
                    eprintln!("fsbroker: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => match &sandbox {
            Some(options) => match sandbox::spawn_sandboxed(
                &args.command,
                options,
                &broker,
                args.common.server_id.as_deref(),
                max_line,
                args.shutdown_grace,
            ) {
                Ok(l) => (l, None),
                Err(e) => {
                    eprintln!("fsbroker: {e}");
                    return ExitCode::from(e.exit_code());
                }
            },
            None => {
                match mcp_fsbroker::proxy::spawn_child(&args.command, max_line, args.shutdown_grace)
                {
                    Ok(l) => (l, None),
                    Err(e) => {
                        eprintln!("fsbroker: {e}");
                        return ExitCode::from(e.exit_code());
                    }
                }
            }
        },
    };
    let code = proxy
        .run(
            broker,
            outbound,
            tokio::io::stdin(),
            tokio::io::stdout(),
            link,
            shutdown_signal(),
        )
        .await;
    if let Some(e) = outcome.and_then(|o| o.take_error()) {
        eprintln!("fsbroker: {e}");
    }
    ExitCode::from(code)
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
    Ok(Some(sandbox::SandboxOptions {
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

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("terminated; shutting down"),
        _ = int.recv() => tracing::info!("interrupted; shutting down"),
    }
}

/// Standard output for the protocol. A pipe (what a host gives a sidecar) is written from the
/// runtime directly, without tokio's stdout copying each response into its own buffer and
/// handing every write to a blocking thread; anything else (a file, a terminal) goes through
/// tokio's stdout.
fn stdout_writer() -> Box<dyn tokio::io::AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// Gives standard output back its blocking mode: the pipe writer made the pipe non-blocking,
/// and the host may hand the same pipe to whatever it runs after us.
fn restore_stdout_blocking() {
    use std::os::fd::AsFd;
    let out = std::io::stdout();
    if let Ok(flags) = rustix::fs::fcntl_getfl(out.as_fd()) {
        let _ = rustix::fs::fcntl_setfl(out.as_fd(), flags - rustix::fs::OFlags::NONBLOCK);
    }
}
