//! `fsbroker daemon`: one broker for the user, controlled over a private Unix socket; started
//! in the foreground, in the background, for attaching commands (`--ensure`), or not at all
//! (`--init` writes the user's policy).

use super::DaemonArgs;
use super::runtime::shutdown_signal;
use super::terminal::{err, out};
use crate::daemon::console;
use crate::daemon::protocol::{self, blocking};
use crate::daemon::{
    self, ConsoleAt, DaemonConfig, PolicySource, RunError, autostart, background, default_socket,
};
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
    let config = match config(args) {
        Ok(c) => c,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    match daemon::run(config, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            err!("fsbroker: {e}");
            match e {
                RunError::Policy(_) => ExitCode::from(2),
                RunError::Setup(_) => ExitCode::FAILURE,
            }
        }
    }
}

/// The daemon's config, as its flags set it.
fn config(args: DaemonArgs) -> Result<DaemonConfig, String> {
    let socket = socket_path(args.socket)?;
    let (common, again) = (args.common.clone(), args.common);
    let file = common.policy.clone();
    let policy = PolicySource::rebuilt(
        move || common.build_policy(true),
        move || again.build_policy_for_reload(true),
        file,
    );
    // In the background this output is a log file, where a link would wait for anyone who
    // can read it: the starter asks for one over the socket instead.
    let console = match &args.ui {
        Some(addr) => Some(ConsoleAt {
            addr: console::parse_addr(addr)?,
            link: !args.detached,
        }),
        None => None,
    };
    Ok(DaemonConfig {
        socket,
        policy,
        idle_exit: args.idle_exit.map(Duration::from_secs),
        console,
        announce: Box::new(|line: &str| err!("fsbroker: {line}")),
    })
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
                match blocking::request(&socket, protocol::Console {}) {
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
