//! The `fsbroker` binary: parses arguments, sets up logging, and calls into the library.

use clap::Parser;
use mcp_fsbroker::Broker;
use mcp_fsbroker::cli::{Cli, Command};
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr: stdout carries only protocol messages.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_env("FSBROKER_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .init();
    match cli.command {
        Command::CheckPolicy { file } => match mcp_fsbroker::Policy::load(&file) {
            Ok(policy) => {
                print!("{}", mcp_fsbroker::policy::describe(&policy));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("fsbroker: {e}");
                ExitCode::from(2)
            }
        },
        Command::Serve(args) => {
            let policy = match args.build_policy(true) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("fsbroker: {e}");
                    return ExitCode::from(2);
                }
            };
            let server_id = args
                .server_id
                .clone()
                .unwrap_or_else(|| "default".to_owned());
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("fsbroker: cannot start runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let code = runtime.block_on(async move {
                // A write past the file-size limit (RLIMIT_FSIZE) would otherwise kill the
                // process with SIGXFSZ; handled, the write fails with EFBIG and is reported.
                let _xfsz = tokio::signal::unix::signal(
                    tokio::signal::unix::SignalKind::from_raw(
                        rustix::process::Signal::XFSZ.as_raw(),
                    ),
                );
                let (broker, outbound) = match Broker::builder(policy).build() {
                    Ok(b) => b,
                    Err(e) => {
                        eprintln!("fsbroker: {e}");
                        return ExitCode::from(2);
                    }
                };
                let reload_args = args.clone();
                tokio::spawn(mcp_fsbroker::reload::watch_policy(
                    broker.clone(),
                    move || reload_args.build_policy(true),
                    args.policy.clone(),
                    std::time::Duration::from_secs(1),
                ));
                for r in broker.roots().iter() {
                    tracing::info!(mount = %r.mount(), access = r.access().as_str(), "serving root");
                }
                let result = mcp_fsbroker::serve::run(
                    broker,
                    &server_id,
                    tokio::io::stdin(),
                    tokio::io::stdout(),
                    outbound,
                    shutdown_signal(),
                )
                .await;
                match result {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("fsbroker: {e}");
                        ExitCode::FAILURE
                    }
                }
            });
            // Stdin is read on a blocking thread that may be parked in read(2); do not
            // wait for it.
            runtime.shutdown_background();
            code
        }
        Command::Proxy(_) => {
            eprintln!("fsbroker: proxy is not available in this build yet");
            ExitCode::from(2)
        }
    }
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
