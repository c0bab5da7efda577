//! The command line of `fsbroker`: its flags, and what each subcommand runs.
//!
//! The binary is one call, [`main`]: it parses the arguments, sets up logging and runs the
//! subcommand, one file each (`serve.rs`, `proxy.rs`, `daemon.rs` with `init.rs` for its
//! `--init`, `control.rs` and `log.rs` for the daemon's verbs, `check_policy.rs`, `audit.rs`
//! for `audit verify`), on the runtime of `runtime.rs`. The flags build the same [`Policy`](crate::Policy) a file would
//! (`flags.rs`). An embedder's own command line may flatten [`CommonArgs`] into its
//! arguments and build its policy with [`CommonArgs::build_policy`].
//!
//! Usage errors exit 2 (clap's own, and the checks clap cannot express), as does a policy
//! that does not load; a failure after the start exits 1, or with the server's code.
//!
//! Everything the command line prints goes through `terminal.rs`, which escapes it: the
//! printing macros of `std` are refused here, so a new printer cannot forget to.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::policy::{ConsentMode, EraMode};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

mod attach;
mod audit;
mod check_policy;
mod control;
mod daemon;
mod flags;
mod hosts;
mod identify;
mod init;
mod log;
#[cfg(feature = "proxy")]
mod proxy;
mod recovery;
mod runtime;
mod serve;
mod stdio;
mod terminal;
mod values;

pub use flags::split_root_arg;

/// Runs `fsbroker` with the process's arguments and returns its exit code; everything the
/// binary does. It needs the feature `proxy` as well as `cli`.
#[cfg(feature = "proxy")]
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr: stdout carries only protocol messages.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(log_filter())
        .init();
    match cli.command {
        Command::CheckPolicy { files } => check_policy::run(&files),
        Command::Audit(AuditCommand::Verify { files }) => audit::verify(&files),
        Command::Serve(args) => runtime::run(runtime::Threads::One, || serve::run(args)),
        Command::Proxy(args) => runtime::run(runtime::Threads::Many, || proxy::run(*args)),
        Command::Daemon(args) => daemon::main(*args),
        Command::Status(args) => control::status(args),
        Command::Revoke(args) => control::revoke(args),
        Command::Resume(args) => control::resume(args),
        Command::Log(args) => log::run(args),
        Command::Reload(args) => control::reload(args),
        Command::Console(args) => control::console(args),
        Command::History(args) => recovery::history(args),
        Command::Restore(args) => recovery::restore(args),
        Command::Undo(args) => recovery::undo(args),
        Command::Hosts(args) => hosts::list(args),
        Command::Wrap(args) => hosts::rewrite(args.common, false, args.sandbox),
        Command::Unwrap(args) => hosts::rewrite(args, true, false),
        // Before any runtime starts: Landlock restricts the calling thread, and the server
        // that replaces this process must inherit the restriction whole.
        Command::SandboxExec { command } => {
            std::process::ExitCode::from(crate::proxy::sandbox::exec_helper(&command))
        }
    }
}

/// The log filter from `FSBROKER_LOG`, `warn` by default. An empty (or blank) value counts
/// as unset: host configuration templates often produce `FSBROKER_LOG=`, and an empty filter
/// would silence even errors. A value that does not parse also falls back to `warn`.
fn log_filter() -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    match std::env::var("FSBROKER_LOG") {
        Ok(v) if !v.trim().is_empty() => {
            EnvFilter::try_new(v.trim()).unwrap_or_else(|_| EnvFilter::new("warn"))
        }
        _ => EnvFilter::new("warn"),
    }
}

/// `fsbroker`: client-brokered filesystem access for MCP servers.
#[derive(Debug, Parser)]
#[command(name = "fsbroker", version, about)]
pub(crate) struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Answer one server session's requests on stdin/stdout (newline-delimited JSON-RPC).
    Serve(ServeArgs),
    /// Sit between a host and an MCP server, answering the server's file requests.
    Proxy(Box<ProxyArgs>),
    /// Hold one broker for all of the user's servers (`serve --daemon` and `proxy --daemon`
    /// attach to it), controlled over a private Unix socket.
    Daemon(Box<DaemonArgs>),
    /// Show every session of a running daemon: grants, watches, uploads, counters.
    Status(StatusArgs),
    /// Take grants back from a running daemon's sessions.
    Revoke(RevokeArgs),
    /// Lift the suspension of a running daemon's session that was suspended for its
    /// security violations.
    Resume(ResumeArgs),
    /// Show a running daemon's recent audit events, or follow them as they come.
    Log(log::LogArgs),
    /// Make a running daemon read its policy file again, and show what changed.
    Reload(ReloadArgs),
    /// Open the running daemon's console in the browser: print a fresh sign-in link to it
    /// (starting the console if the daemon was started without --ui) and open it with the
    /// desktop's opener where there is one.
    Console(ConsoleArgs),
    /// Validate policy files and print each one's effective configuration.
    CheckPolicy {
        /// The policy files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// List the changes servers made through the broker, with what was kept of what each
    /// replaced or removed.
    History(recovery::HistoryArgs),
    /// Put back what one change replaced or removed (what stands there now is kept in turn).
    Restore(recovery::RestoreArgs),
    /// Take back a server's changes, newest first, leaving alone (and naming) each whose
    /// place changed since.
    Undo(recovery::UndoArgs),
    /// List the MCP servers of the hosts on this machine (Claude Desktop, Claude Code, VS
    /// Code, Cursor, Windsurf, Zed, Gemini CLI, Codex CLI, Continue), and whether each runs
    /// through `fsbroker proxy`.
    Hosts(hosts::HostsArgs),
    /// Rewrite the hosts' server entries to run through `fsbroker proxy --daemon`, keeping
    /// everything else of each file as it was (a backup beside it first).
    Wrap(WrapCommand),
    /// Give wrapped server entries back their own command, byte for byte.
    Unwrap(hosts::WrapArgs),
    /// Work with audit files: `fsbroker audit verify FILE...`.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// What `proxy --sandbox` runs: restricts itself with the profile the proxy put in its
    /// environment, then replaces itself with the server. Not for direct use.
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec {
        /// The server command and its arguments.
        #[arg(value_name = "SERVER", trailing_var_arg = true, num_args = 1.., allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// Options of `wrap`.
#[derive(Debug, Args)]
pub(crate) struct WrapCommand {
    /// Which hosts and servers.
    #[command(flatten)]
    pub(crate) common: hosts::WrapArgs,
    /// Run each server under the proxy's Landlock sandbox (`fsbroker proxy --sandbox`).
    #[arg(long)]
    pub(crate) sandbox: bool,
}

/// The subcommands of `audit`.
#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Check audit files' hash chains: every line whole, none removed, none cut short. Give
    /// rotated files oldest first (FILE.2 FILE.1 FILE). Prints each file's last hash: keep
    /// it, to tell later that the file was not rewritten up to there. Exits 0 when all are
    /// whole, 1 naming the first bad line, 2 when a file cannot be read.
    Verify {
        /// The audit files, oldest first.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

/// Options shared by `serve` and `proxy`.
#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// A policy file (TOML); without it the embedded default is used.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// A root directory to offer, optionally with a mount name: `[MOUNT=]PATH`. Repeatable.
    #[arg(long = "root", value_name = "[MOUNT=]PATH")]
    pub roots: Vec<String>,
    /// Make the `--root` roots writable (they are read-only otherwise).
    #[arg(long)]
    pub writable: bool,
    /// Consent mode: auto, deny, tty, command:PROGRAM (proxy and daemon also: elicit; daemon
    /// also: ui, its console).
    #[arg(long, value_name = "MODE", value_parser = values::parse_mode)]
    pub consent: Option<ConsentMode>,
    /// With consent mode elicit, who answers when the host cannot: auto, deny, tty or
    /// command:PROGRAM (default: tty with a terminal, else deny).
    #[arg(long = "consent-fallback", value_name = "MODE", value_parser = values::parse_fallback)]
    pub consent_fallback: Option<ConsentMode>,
    /// The server session id (not `user`: the interface keeps it for the user's own actions).
    #[arg(long = "server-id", value_name = "ID", value_parser = values::parse_server_id)]
    pub server_id: Option<String>,
    /// Append the audit log to FILE instead of where the policy's `[audit]` section says.
    #[arg(long = "audit-file", value_name = "FILE", conflicts_with = "no_audit")]
    pub audit_file: Option<PathBuf>,
    /// Turn the audit log off, whatever the policy says (refusals still go to the log at
    /// warn).
    #[arg(long = "no-audit")]
    pub no_audit: bool,
}

/// The flag that attaches `serve` or `proxy` to the daemon: `--daemon` for the default
/// socket, `--daemon=SOCKET` for another (with `=`: a proxy's server command follows).
#[derive(Debug, Args, Clone)]
pub(crate) struct DaemonFlag {
    /// Hold no broker here: the session lives in the user's daemon (`fsbroker daemon`), whose
    /// roots, policy and consent it uses. Also `FSBROKER_DAEMON=SOCKET` in the environment.
    #[arg(long = "daemon", value_name = "SOCKET", num_args = 0..=1, require_equals = true)]
    pub(crate) daemon: Option<Option<PathBuf>>,
}

/// Options of `serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Shared options.
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Attaching to the daemon.
    #[command(flatten)]
    pub(crate) attach: DaemonFlag,
}

/// Options of `daemon`.
#[derive(Debug, Args)]
pub(crate) struct DaemonArgs {
    /// Shared options (`--server-id` excepted: the daemon holds every server's session).
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// The control socket [default: $XDG_RUNTIME_DIR/fsbroker/broker.sock, else
    /// broker.sock in fsbroker/ under $XDG_STATE_HOME or ~/.local/state]. Its directory is
    /// made 0700 and must be this user's alone; the key clients prove they hold is written
    /// beside it (broker.key, 0600).
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    /// Stay in the foreground (under `systemd --user`, or another supervisor). Without it
    /// the daemon starts in the background, its output appended to
    /// $XDG_STATE_HOME/fsbroker/daemon.log (else ~/.local/state/fsbroker/daemon.log), and
    /// the command returns, printing the socket, once the daemon answers on it.
    #[arg(long)]
    pub(crate) foreground: bool,
    /// Stop (removing the socket and key) after SECONDS with no connection open and no
    /// session live [default: never].
    #[arg(long = "idle-exit", value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) idle_exit: Option<u64>,
    /// Start a daemon unless one answers on the socket, and return (printing the socket): in
    /// the background, on the user's policy file ($XDG_CONFIG_HOME/fsbroker/policy.toml,
    /// else ~/.config/fsbroker/policy.toml), with --idle-exit 600; as the commands that
    /// attach to the daemon do. Many at once start one daemon.
    #[arg(long, conflicts_with_all = ["foreground", "idle_exit", "init"])]
    pub(crate) ensure: bool,
    /// Write a commented starter policy to the user's policy file (see --ensure), with the
    /// --root directories given (--writable: writable), and return; an existing file is
    /// never overwritten.
    #[arg(long, conflicts_with_all = ["foreground", "idle_exit", "socket"])]
    pub(crate) init: bool,
    /// Serve the console, the page where you answer consent questions and watch and change
    /// what servers may do, on loopback at ADDR [default: 127.0.0.1 and a free port]; its
    /// sign-in link is printed. `fsbroker console` prints a fresh link later (and serves
    /// the console then, when the daemon was started without --ui).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1",
          conflicts_with_all = ["ensure", "init"])]
    pub(crate) ui: Option<String>,
    /// What a start in the background runs: a session of its own, without a terminal. Not
    /// for direct use.
    #[arg(long, hide = true, requires = "foreground")]
    pub(crate) detached: bool,
}

/// Options of `reload`.
#[derive(Debug, Args)]
pub(crate) struct ReloadArgs {
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket (default: as `fsbroker daemon` chooses it).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub(crate) daemon: Option<PathBuf>,
}

/// Options of `console`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    /// Print the link only; open no browser.
    #[arg(long)]
    pub(crate) no_open: bool,
    /// The daemon's socket (default: as `fsbroker daemon` chooses it).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub(crate) daemon: Option<PathBuf>,
}

/// Options of `status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket (default: as `fsbroker daemon` chooses it).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub(crate) daemon: Option<PathBuf>,
}

/// Options of `revoke`: what to revoke is required, `--all` for everything.
#[derive(Debug, Args)]
pub(crate) struct RevokeArgs {
    /// Only this server's session.
    #[arg(long, value_name = "ID")]
    pub(crate) server: Option<String>,
    /// Only grants at or beneath this path, in mount form (`MOUNT/REL`).
    #[arg(value_name = "PATH")]
    pub(crate) path: Option<String>,
    /// Every grant of every session.
    #[arg(long, conflicts_with_all = ["server", "path"])]
    pub(crate) all: bool,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket (default: as `fsbroker daemon` chooses it).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub(crate) daemon: Option<PathBuf>,
}

/// Options of `resume`.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// The suspended session, as `fsbroker status` names it.
    #[arg(long, value_name = "ID")]
    pub(crate) server: String,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket (default: as `fsbroker daemon` chooses it).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub(crate) daemon: Option<PathBuf>,
}

/// Options of `proxy`.
#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    /// Shared options.
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Attaching to the daemon.
    #[command(flatten)]
    pub(crate) attach: DaemonFlag,
    /// A remote MCP server (Streamable HTTP, or HTTP+SSE of 2024-11-05) instead of a local
    /// command.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub(crate) url: Option<String>,
    /// An extra HTTP header with a plain value, `Name: value` (repeatable). Credentials are
    /// refused here: use --header-env or --bearer-env.
    #[arg(
        long = "header",
        value_name = "NAME: VALUE",
        requires = "url",
        conflicts_with = "command"
    )]
    pub(crate) headers: Vec<String>,
    /// An extra HTTP header whose value is the environment variable's, `Name=VARIABLE`
    /// (repeatable).
    #[arg(
        long = "header-env",
        value_name = "NAME=VARIABLE",
        requires = "url",
        conflicts_with = "command"
    )]
    pub(crate) header_env: Vec<String>,
    /// Send `Authorization: Bearer <value of VARIABLE>`.
    #[arg(
        long = "bearer-env",
        value_name = "VARIABLE",
        requires = "url",
        conflicts_with = "command"
    )]
    pub(crate) bearer_env: Option<String>,
    /// Which protocol era a session may take: auto (legacy, where files are brokered, for a
    /// host that can fall back to initialize; modern for a host that sends 2026-07-28 requests
    /// without probing, or with a modern-only server), legacy or modern. Overrides the
    /// policy's `[proxy] era`.
    #[arg(long = "era", value_name = "auto|legacy|modern", value_parser = values::parse_era)]
    pub(crate) era: Option<EraMode>,
    /// Seconds allowed for connecting to the remote server (every retry included), and for
    /// its answer to a message that needs no work (a notification, a response, the GET
    /// stream).
    #[arg(long = "connect-timeout", value_name = "SECONDS", default_value = "10", value_parser = values::parse_grace)]
    pub(crate) connect_timeout: std::time::Duration,
    /// Seconds allowed for the remote server's answer to a request, unless it streams.
    #[arg(long = "request-timeout", value_name = "SECONDS", default_value = "300", value_parser = values::parse_grace)]
    pub(crate) request_timeout: std::time::Duration,
    /// Attempts to reconnect to the remote server after a lost connection, with backoff
    /// (within the connect timeout), before the session is given up; also how many streams
    /// in a row may close without bringing anything.
    #[arg(long = "retries", value_name = "N", default_value = "5", value_parser = clap::value_parser!(u32).range(0..=20))]
    pub(crate) retries: u32,
    /// Seconds to wait for the server to exit after its input is closed, and again after
    /// SIGTERM, before killing it. With --url: how long requests in flight may still be
    /// answered once the host has gone (or on SIGTERM); those left are answered with an
    /// error and the exit code is 1.
    #[arg(long = "shutdown-grace", value_name = "SECONDS", default_value = "5", value_parser = values::parse_grace)]
    pub(crate) shutdown_grace: std::time::Duration,
    /// Start the server under a Landlock ruleset (Linux): it and everything it starts reach on
    /// disk only its roots (read-only ones read-only), the system's runtime directories, its
    /// own installation, a private temporary directory and what --sandbox-allow adds.
    /// `--sandbox` refuses to start the server where the kernel cannot enforce that;
    /// `--sandbox=best-effort` starts it and logs what is not enforced.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "strict", value_parser = ["strict", "best-effort"],
          conflicts_with = "url")]
    pub(crate) sandbox: Option<String>,
    /// With --sandbox, also allow PATH: read and execute, or read and write with `:rw`
    /// (repeatable).
    #[arg(long = "sandbox-allow", value_name = "PATH[:rw]", requires = "sandbox")]
    pub(crate) sandbox_allow: Vec<String>,
    /// With --sandbox, cap what the server and everything it starts may use: `cpu=SECONDS`
    /// of CPU time, `memory=SIZE` of address space, `processes=N` (the kernel counts all of
    /// the user's), `file-size=SIZE` of any file it writes; SIZE may end in K, M or G
    /// (repeatable).
    #[arg(
        long = "sandbox-limit",
        value_name = "KIND=VALUE",
        requires = "sandbox"
    )]
    pub(crate) sandbox_limit: Vec<String>,
    /// With --sandbox, `none` also forbids the server TCP connections and binds.
    #[arg(long = "sandbox-net", value_name = "any|none", default_value = "any",
          value_parser = ["any", "none"])]
    pub(crate) sandbox_net: String,
    /// The server command and its arguments. Everything from the first positional argument
    /// on is the server's, options included; a `--` before it is allowed, not needed.
    #[arg(value_name = "SERVER", trailing_var_arg = true, num_args = 1..)]
    pub(crate) command: Vec<String>,
}
