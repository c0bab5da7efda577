//! What `serve` and `proxy` share around their work: the runtime they run on, the broker
//! built from the flags with its policy reloads, and the signals that end them.

use super::CommonArgs;
use super::terminal::err;
use crate::{Broker, BrokerBuilder, Notifications};
use std::process::ExitCode;
use std::time::Duration;

/// The runtime a command runs on.
#[derive(Clone, Copy)]
pub(super) enum Threads {
    /// Several workers: the daemon and the proxy. The daemon's sessions share its runtime,
    /// and a server's heavy lines (decoding a 32 MiB line, encoding a 16 MiB chunk) must hold
    /// one worker, not every session and the console with it.
    Many,
    /// One thread for everything but the filesystem work, which runs on the broker's I/O
    /// lane and the blocking pool: `serve`, one session's stream, where every hand-over
    /// between workers was a wake-up of another thread per request (a sequential read's
    /// median went from about 157 to 113 µs in `benches/perf`).
    One,
}

/// Runs `job` on a runtime of `threads` and returns its exit code.
pub(super) fn run<F, Fut>(threads: Threads, job: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    let built = match threads {
        Threads::Many => tokio::runtime::Runtime::new(),
        Threads::One => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    };
    let runtime = match built {
        Ok(r) => r,
        Err(e) => {
            err!("fsbroker: cannot start runtime: {e}");
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
    // Stdin, when it is not a pipe, is read on a blocking thread that may be parked in
    // read(2); do not wait for it.
    runtime.shutdown_background();
    code
}

/// Builds the broker for `args` (its builder set up further by `configure`) and starts
/// reloading its policy on SIGHUP and when the file changes. A policy that does not load or
/// validate is a usage error: the message is printed, and the code is 2.
pub(super) fn start_broker(
    args: &CommonArgs,
    configure: impl FnOnce(BrokerBuilder) -> BrokerBuilder,
) -> Result<(Broker, Notifications), ExitCode> {
    let policy = args.build_policy(true).map_err(|e| {
        err!("fsbroker: {e}");
        ExitCode::from(2)
    })?;
    let (broker, outbound) = configure(
        Broker::builder(policy)
            .audit_to_stderr_when_unset()
            .terminal_when_unset(),
    )
    .build()
    .map_err(|e| {
        err!("fsbroker: {e}");
        ExitCode::from(2)
    })?;
    let reload_args = args.clone();
    tokio::spawn(crate::watch_policy(
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

/// Resolves on SIGTERM or SIGINT; never, when neither can be listened for. The signals are
/// listened for from the call on, not from the first poll: a signal that comes before the
/// future is first polled still ends the work cleanly rather than killing the process.
pub(super) fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let listening = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = listening else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("terminated; shutting down"),
            _ = int.recv() => tracing::info!("interrupted; shutting down"),
        }
    }
}
