//! `fsbroker serve`: answers one server session's requests on stdin and stdout.

use super::runtime::{shutdown_signal, start_broker};
use super::{ServeArgs, attach};
use crate::policy::ConsentMode;
use std::process::ExitCode;

/// Serves until stdin closes or a signal asks to stop: 0 then, 1 when the stream failed, 2
/// for a usage error or a policy that does not load.
pub(super) async fn run(args: ServeArgs) -> ExitCode {
    if let Some(socket) = attach::socket(args.attach.daemon.as_ref()) {
        let socket = match socket.and_then(|s| attach::refuse_own_broker(&args.common).map(|()| s))
        {
            Ok(s) => s,
            Err(message) => {
                eprintln!("fsbroker: {message}");
                return ExitCode::from(2);
            }
        };
        let code = attach::serve(
            socket,
            args.common.server_id,
            stdout_writer(),
            shutdown_signal(),
        )
        .await;
        restore_stdout_blocking();
        return code;
    }
    let args = args.common;
    // A value clap accepts for both subcommands, which only the proxy can act on.
    if args.consent == Some(ConsentMode::Elicit) {
        eprintln!(
            "fsbroker: --consent elicit asks through the host, which only `fsbroker proxy` can do"
        );
        return ExitCode::from(2);
    }
    let (broker, _broker_wide) = match start_broker(&args, |b| b) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let server_id = args.server_id.as_deref().unwrap_or("default");
    // The broker is new: no session of that id can be open.
    let (session, notifications) = match broker.open_session(server_id) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fsbroker: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = crate::serve(
        session,
        notifications,
        tokio::io::stdin(),
        stdout_writer(),
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
