//! `fsbroker serve`: answers one server session's requests on stdin and stdout.

use super::runtime::{shutdown_signal, start_broker};
use super::terminal::err;
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
                err!("fsbroker: {message}");
                return ExitCode::from(2);
            }
        };
        let code = attach::serve(
            socket,
            args.common.server_id,
            super::stdio::stdout_writer(),
            shutdown_signal(),
        )
        .await;
        super::stdio::restore_blocking();
        return code;
    }
    let args = args.common;
    // A value clap accepts for both subcommands, which only the proxy can act on.
    if args.consent == Some(ConsentMode::Elicit) {
        err!(
            "fsbroker: --consent elicit asks through the host, which only `fsbroker proxy` can do"
        );
        return ExitCode::from(2);
    }
    let (broker, _broker_wide) = match start_broker(&args, |b| {
        b.resumed_by(crate::watchdog::ResumedBy::SessionEnd)
    }) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let server_id = args.server_id.as_deref().unwrap_or("default");
    // The broker is new: no session of that id can be open. The server is whoever writes our
    // standard input.
    let opened = match super::identify::of_stdin_peer().get().await {
        Some(identity) => broker.open_session_as(server_id, identity),
        None => broker.open_session(server_id),
    };
    let (session, notifications) = match opened {
        Ok(s) => s,
        Err(e) => {
            err!("fsbroker: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = crate::serve(
        session,
        notifications,
        super::stdio::stdin_reader(),
        super::stdio::stdout_writer(),
        shutdown_signal(),
    )
    .await;
    super::stdio::restore_blocking();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            err!("fsbroker: {e}");
            ExitCode::FAILURE
        }
    }
}
