//! `fsbroker daemon`: one broker for the user, controlled over a private Unix socket; started
//! in the foreground, in the background, for attaching commands (`--ensure`), or not at all
//! (`--init` writes the user's policy).

use super::DaemonArgs;
use super::runtime::{shutdown_signal, start_broker};
use super::terminal::{err, out};
use crate::daemon::console::{self, Board, Console, Store, UiConsent};
use crate::daemon::{
    Attachments, Listening, Reload, Services, autostart, background, default_socket,
};
use crate::daemon::protocol::{ConsoleLink, Nothing, Request, blocking};
use crate::policy::ConsentMode;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Runs `fsbroker daemon` as its flags say: `--init`, `--ensure`, `--foreground`, or a start
/// in the background. 2 for a usage error.
pub(super) fn main(args: DaemonArgs) -> ExitCode {
    if args.init {
        return super::init::run(&args.common);
    }
    if let Err(message) = usage(&args) {
        err!("fsbroker: {message}");
        return ExitCode::from(2);
    }
    if args.ensure {
        return ensure(args.socket);
    }
    if !args.foreground {
        return in_background(&args);
    }
    super::runtime::run(super::runtime::Threads::Many, || run(args))
}

/// Runs the daemon until SIGTERM or SIGINT, or its `--idle-exit`: 0 then, 1 when the socket
/// cannot be set up, 2 for a policy that does not load.
async fn run(args: DaemonArgs) -> ExitCode {
    if args.detached {
        // Its own session, without a controlling terminal: the starter's terminal closing
        // sends it nothing, and a consent prompt never stops it for reading from a terminal
        // it does not own.
        if let Err(e) = rustix::process::setsid() {
            tracing::warn!("cannot start a session of its own: {e}");
        }
    }
    // Every attached session, console connection and watch holds descriptors.
    crate::limits::raise_descriptor_limit();
    // Listened for from here on: a SIGTERM while the daemon starts (or right after it says it
    // listens) still stops it cleanly, removing its socket and key.
    let stop = shutdown_signal();
    let socket = match socket_path(args.socket) {
        Ok(s) => s,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    // The socket first: a daemon refused (another one runs, a directory open to others)
    // builds no broker and starts no watcher.
    let listening = match Listening::bind(&socket) {
        Ok(l) => l,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    // Consent mode `elicit` (the daemon's default, as the proxy's) asks an attached proxy's
    // host; the fallback answers when there is none, or it cannot show a form.
    let attachments = std::sync::Arc::new(Attachments::default());
    let elicit = attachments.around();
    // The console's board: consent mode `ui`, and who answers where nobody else is chosen
    // and there is no terminal. The user's edits from it lie over every policy.
    let board = Board::new();
    let store = Store::default_place();
    let layer = match store.as_ref().map(Store::load).transpose() {
        Ok(layer) => layer.unwrap_or_default(),
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    // No root may hold the socket's directory, now or after a reload: its key would be a
    // file a server with consent could read, or a sandbox open.
    let socket_dir = listening.socket().parent().map(std::path::Path::to_owned);
    let configure = |b: crate::BrokerBuilder| {
        let b = b
            .elicitation(elicit)
            .default_consent_mode(ConsentMode::Elicit)
            .ui_consent(std::sync::Arc::new(UiConsent(board.clone())))
            .layer(layer.clone())
            .resumed_by(crate::watchdog::ResumedBy::Daemon);
        // A server that may write the console's state could grant itself anything at the
        // daemon's next start.
        let b = match &store {
            Some(store) => b.steer_from(store.file()),
            None => b,
        };
        match &socket_dir {
            Some(dir) => b.keep_out_of_roots(dir),
            None => b,
        }
    };
    let (broker, _broker_wide) = match start_broker(&args.common, configure) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let reload = args.common.policy.clone().map(|file| {
        let common = args.common.clone();
        Reload::new(file, Box::new(move || common.build_policy_for_reload(true)))
    });
    let services = Services::new(&broker, reload, args.idle_exit.map(Duration::from_secs));
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
    err!(
        "fsbroker: daemon listening on {} (pid {})",
        listening.socket().display(),
        std::process::id()
    );
    if let Some(addr) = &args.ui {
        let addr = console::parse_addr(addr);
        // In the background this output is a log file, where a link would wait for anyone
        // who can read it: the starter asks for one over the socket instead.
        let said = if args.detached {
            addr.and_then(|a| console::serve(&console, Some(a)))
                .map(|at| {
                    format!("console served on http://{at} (sign in with `fsbroker console`)")
                })
        } else {
            addr.and_then(|a| console::link(&console, Some(a)))
                .map(|link| {
                    format!(
                        "console at {link} (the link works once, for five minutes; `fsbroker \
                     console` makes another)"
                    )
                })
        };
        match said {
            Ok(line) => err!("fsbroker: {line}"),
            Err(message) => {
                err!("fsbroker: {message}");
                return ExitCode::FAILURE;
            }
        }
    }
    listening.serve(broker, attachments, services, stop).await;
    ExitCode::SUCCESS
}

/// `fsbroker daemon` without `--foreground`: the same daemon started in the background; 0
/// with its socket printed once it answers, 1 with why it did not come up.
fn in_background(args: &DaemonArgs) -> ExitCode {
    let socket = match socket_path(args.socket.clone()) {
        Ok(s) => s,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    // Said here rather than in the log: the one that answers is not the one started.
    if blocking::probe(&socket).is_ok() {
        err!(
            "fsbroker: a daemon already answers on {}: stop it first, or name another socket \
             with --socket",
            socket.display()
        );
        return ExitCode::FAILURE;
    }
    // The same command line (it has no positional arguments), with the socket chosen here:
    // the daemon answers where this waits for it.
    let mut again: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.socket.is_none() {
        again.extend(["--socket".into(), socket.clone().into()]);
    }
    match background::start(&again, &socket) {
        Ok(()) => {
            out!("{}", socket.display());
            // The console's link goes to the starter's terminal, never to the log.
            if args.ui.is_some() {
                match blocking::ask::<ConsoleLink>(&socket, &Request::Console(Nothing {})) {
                    Ok(answer) => err!(
                        "fsbroker: console at {} (the link works once, for five minutes; \
                         `fsbroker console` makes another)",
                        answer.url
                    ),
                    Err(e) => err!("fsbroker: no console link: {e}"),
                }
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            err!("fsbroker: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `fsbroker daemon --ensure`: 0 with the socket printed once a daemon answers on it (one
/// started if need be), 1 with why none does.
fn ensure(socket: Option<PathBuf>) -> ExitCode {
    match socket_path(socket).and_then(|s| autostart::ensure(&s).map(|()| s)) {
        Ok(socket) => {
            out!("{}", socket.display());
            ExitCode::SUCCESS
        }
        Err(message) => {
            err!("fsbroker: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The socket to use: `--socket`, else the default one.
pub(super) fn socket_path(given: Option<PathBuf>) -> Result<PathBuf, String> {
    match given {
        Some(p) => Ok(p),
        None => default_socket(),
    }
}

/// What the daemon cannot do with these options.
fn usage(args: &DaemonArgs) -> Result<(), String> {
    let common = &args.common;
    if args.ensure {
        let extra = common.given();
        if !extra.is_empty() {
            return Err(format!(
                "--ensure starts a daemon on your own policy file, with no other options than \
                 --socket (not {}): start one yourself to give it others",
                extra.join(", ")
            ));
        }
    }
    if let Some(addr) = &args.ui {
        console::parse_addr(addr)?;
    }
    if common.server_id.is_some() {
        return Err("--server-id names one session; the daemon holds every server's".into());
    }
    Ok(())
}
