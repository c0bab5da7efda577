//! `fsbroker daemon`: one broker for the user, controlled over a private Unix socket.

use super::runtime::{shutdown_signal, start_broker};
use super::{CommonArgs, DaemonArgs};
use crate::daemon::{Listening, Reload, Services, default_socket};
use crate::policy::ConsentMode;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Runs the daemon until SIGTERM or SIGINT, or its `--idle-exit`: 0 then, 1 when the socket cannot be set up, 2 for
/// a usage error or a policy that does not load.
pub(super) async fn run(args: DaemonArgs) -> ExitCode {
    if let Err(message) = usage(&args.common, args.foreground) {
        eprintln!("fsbroker: {message}");
        return ExitCode::from(2);
    }
    // Listened for from here on: a SIGTERM while the daemon starts (or right after it says it
    // listens) still stops it cleanly, removing its socket and key.
    let stop = shutdown_signal();
    let socket = match socket_path(args.socket) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    // The socket first: a daemon refused (another one runs, a directory open to others)
    // builds no broker and starts no watcher.
    let listening = match Listening::bind(&socket) {
        Ok(l) => l,
        Err(message) => {
            eprintln!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    let (broker, _broker_wide) = match start_broker(&args.common, |b| b) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let reload = args.common.policy.clone().map(|file| {
        let common = args.common.clone();
        Reload::new(file, Box::new(move || common.build_policy_for_reload(true)))
    });
    let services = Services::new(&broker, reload, args.idle_exit.map(Duration::from_secs));
    eprintln!(
        "fsbroker: daemon listening on {}",
        listening.socket().display()
    );
    listening.serve(broker, services, stop).await;
    ExitCode::SUCCESS
}

/// The socket to use: `--socket`, else the default one.
pub(super) fn socket_path(given: Option<PathBuf>) -> Result<PathBuf, String> {
    match given {
        Some(p) => Ok(p),
        None => default_socket(),
    }
}

/// What the daemon cannot do with these options yet, or at all.
fn usage(common: &CommonArgs, foreground: bool) -> Result<(), String> {
    if !foreground {
        return Err(
            "the daemon runs only in the foreground for now: add --foreground \
                    (under systemd --user, or another supervisor, it stays in the foreground)"
                .into(),
        );
    }
    if common.server_id.is_some() {
        return Err("--server-id names one session; the daemon holds every server's".into());
    }
    if common.consent == Some(ConsentMode::Elicit) {
        return Err("--consent elicit asks through a host, which only `fsbroker proxy` has".into());
    }
    Ok(())
}
