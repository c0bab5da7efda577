//! `fsbroker daemon`: one broker for the user, controlled over a private Unix socket.

use super::runtime::{shutdown_signal, start_broker};
use super::{CommonArgs, DaemonArgs};
use crate::daemon::{Attachments, Listening, default_socket};
use crate::policy::ConsentMode;
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs the daemon until SIGTERM or SIGINT: 0 then, 1 when the socket cannot be set up, 2 for
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
    // Consent mode `elicit` (the daemon's default, as the proxy's) asks an attached proxy's
    // host; the fallback answers when there is none, or it cannot show a form.
    let attachments = std::sync::Arc::new(Attachments::default());
    let elicit = attachments.around();
    let configure = |b: crate::BrokerBuilder| {
        b.elicitation(elicit)
            .default_consent_mode(ConsentMode::Elicit)
    };
    let (broker, _broker_wide) = match start_broker(&args.common, configure) {
        Ok(b) => b,
        Err(code) => return code,
    };
    if let Err(message) = key_out_of_roots(&broker, listening.socket()) {
        eprintln!("fsbroker: {message}");
        return ExitCode::from(2);
    }
    eprintln!(
        "fsbroker: daemon listening on {}",
        listening.socket().display()
    );
    listening.serve(broker, attachments, stop).await;
    ExitCode::SUCCESS
}

/// Refuses roots that hold the socket's directory: its key would then be a file a server
/// with consent could read through the broker, and with it use the socket.
fn key_out_of_roots(broker: &crate::Broker, socket: &std::path::Path) -> Result<(), String> {
    let dir = socket
        .parent()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .ok_or_else(|| format!("cannot resolve the directory of {}", socket.display()))?;
    for root in broker.roots().iter() {
        let path = root.host_path_of(&crate::path::RelPath::root());
        if std::fs::canonicalize(&path).is_ok_and(|r| dir.starts_with(r)) {
            return Err(format!(
                "the root {} ({}) holds the daemon's socket directory {}: servers could read \
                 its key through the broker; choose another --socket, or a narrower root",
                root.mount(),
                path.display(),
                dir.display()
            ));
        }
    }
    Ok(())
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
    Ok(())
}
