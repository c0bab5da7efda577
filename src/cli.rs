//! The command line of `fsbroker`, and how its flags build a policy.
//!
//! The flags build the same [`Policy`] a file would: `--root` adds roots to the embedded
//! default (or the `--policy` file), `--consent` sets the consent mode.

use crate::path::MountName;
use crate::policy::{ConsentMode, EraMode, Policy, PolicyError, RootEntry};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// `fsbroker`: client-brokered filesystem access for MCP servers.
#[derive(Debug, Parser)]
#[command(name = "fsbroker", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer one server session's requests on stdin/stdout (newline-delimited JSON-RPC).
    Serve(CommonArgs),
    /// Sit between a host and an MCP server, answering the server's file requests.
    Proxy(Box<ProxyArgs>),
    /// Validate policy files and print each one's effective configuration.
    CheckPolicy {
        /// The policy files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// What `proxy --sandbox` runs: restricts itself with the profile the proxy put in its
    /// environment, then replaces itself with the server. Not for direct use.
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec {
        /// The server command and its arguments.
        #[arg(value_name = "SERVER", trailing_var_arg = true, num_args = 1.., allow_hyphen_values = true)]
        command: Vec<String>,
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
    /// Consent mode: auto, deny, tty, command:PROGRAM (proxy also: elicit).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub consent: Option<ConsentMode>,
    /// With consent mode elicit, who answers when the host cannot: auto, deny, tty or
    /// command:PROGRAM (default: tty with a terminal, else deny).
    #[arg(long = "consent-fallback", value_name = "MODE", value_parser = parse_fallback)]
    pub consent_fallback: Option<ConsentMode>,
    /// The server session id.
    #[arg(long = "server-id", value_name = "ID")]
    pub server_id: Option<String>,
    /// Append the audit log to FILE instead of where the policy's `[audit]` section says.
    #[arg(long = "audit-file", value_name = "FILE", conflicts_with = "no_audit")]
    pub audit_file: Option<PathBuf>,
    /// Turn the audit log off, whatever the policy says (refusals still go to the log at
    /// warn).
    #[arg(long = "no-audit")]
    pub no_audit: bool,
}

/// Options of `proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Shared options.
    #[command(flatten)]
    pub common: CommonArgs,
    /// A remote MCP server (Streamable HTTP, or HTTP+SSE of 2024-11-05) instead of a local
    /// command.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub url: Option<String>,
    /// An extra HTTP header with a plain value, `Name: value` (repeatable). Credentials are
    /// refused here: use --header-env or --bearer-env.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// An extra HTTP header whose value is the environment variable's, `Name=VARIABLE`
    /// (repeatable).
    #[arg(long = "header-env", value_name = "NAME=VARIABLE")]
    pub header_env: Vec<String>,
    /// Send `Authorization: Bearer <value of VARIABLE>`.
    #[arg(long = "bearer-env", value_name = "VARIABLE")]
    pub bearer_env: Option<String>,
    /// Which protocol era a session may take: auto (legacy whenever the server speaks it,
    /// where files are brokered; modern only with a modern-only server), legacy or modern.
    /// Overrides the policy's `[proxy] era`.
    #[arg(long = "era", value_name = "auto|legacy|modern", value_parser = parse_era)]
    pub era: Option<EraMode>,
    /// Seconds allowed for connecting to the remote server (every retry included), and for
    /// its answer to a message that needs no work (a notification, a response, the GET
    /// stream).
    #[arg(long = "connect-timeout", value_name = "SECONDS", default_value = "10", value_parser = parse_grace)]
    pub connect_timeout: std::time::Duration,
    /// Seconds allowed for the remote server's answer to a request, unless it streams.
    #[arg(long = "request-timeout", value_name = "SECONDS", default_value = "300", value_parser = parse_grace)]
    pub request_timeout: std::time::Duration,
    /// Attempts to reconnect to the remote server after a lost connection, with backoff
    /// (within the connect timeout), before the session is given up; also how many streams
    /// in a row may close without bringing anything.
    #[arg(long = "retries", value_name = "N", default_value = "5", value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,
    /// Seconds to wait for the server to exit after its input is closed, and again after
    /// SIGTERM, before killing it. With --url: how long requests in flight may still be
    /// answered once the host has gone (or on SIGTERM); those left are answered with an
    /// error and the exit code is 1.
    #[arg(long = "shutdown-grace", value_name = "SECONDS", default_value = "5", value_parser = parse_grace)]
    pub shutdown_grace: std::time::Duration,
    /// Start the server under a Landlock ruleset (Linux): it and everything it starts reach on
    /// disk only its roots (read-only ones read-only), the system's runtime directories, its
    /// own installation, a private temporary directory and what --sandbox-allow adds.
    /// `--sandbox` refuses to start the server where the kernel cannot enforce that;
    /// `--sandbox=best-effort` starts it and logs what is not enforced.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "strict", value_parser = ["strict", "best-effort"],
          conflicts_with = "url")]
    pub sandbox: Option<String>,
    /// With --sandbox, also allow PATH: read and execute, or read and write with `:rw`
    /// (repeatable).
    #[arg(long = "sandbox-allow", value_name = "PATH[:rw]", requires = "sandbox")]
    pub sandbox_allow: Vec<String>,
    /// With --sandbox, `none` also forbids the server TCP connections and binds.
    #[arg(long = "sandbox-net", value_name = "any|none", default_value = "any",
          value_parser = ["any", "none"])]
    pub sandbox_net: String,
    /// The server command and its arguments. Everything from the first positional argument
    /// on is the server's, options included; a `--` before it is allowed, not needed.
    #[arg(value_name = "SERVER", trailing_var_arg = true, num_args = 1..)]
    pub command: Vec<String>,
}

fn parse_grace(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| (0.0..=3600.0).contains(v))
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?} is not a number of seconds between 0 and 3600"))
}

fn parse_era(s: &str) -> Result<EraMode, String> {
    EraMode::parse(s).ok_or_else(|| format!("{s:?} is not an era: use auto, legacy or modern"))
}

fn parse_mode(s: &str) -> Result<ConsentMode, String> {
    ConsentMode::try_from(s.to_owned())
}

fn parse_fallback(s: &str) -> Result<ConsentMode, String> {
    match parse_mode(s)? {
        ConsentMode::Elicit => Err("the fallback answers when the host cannot elicit: use auto, deny, tty or command:PROGRAM".into()),
        mode => Ok(mode),
    }
}

/// Splits `[MOUNT=]PATH`: the part before the first `=` is a mount only when it is a valid
/// mount name, so paths containing `=` still work (write `./a=b`).
pub fn split_root_arg(arg: &str) -> (Option<String>, PathBuf) {
    if let Some((m, p)) = arg.split_once('=')
        && MountName::new(m).is_ok()
        && !p.is_empty()
    {
        return (Some(m.to_owned()), PathBuf::from(p));
    }
    (None, PathBuf::from(arg))
}

impl CommonArgs {
    /// The policy these options describe. With neither `--policy` nor `--root`, and when
    /// `cwd_default` is set, the current directory is offered read-only.
    pub fn build_policy(&self, cwd_default: bool) -> Result<Policy, PolicyError> {
        self.build_policy_with(cwd_default, true)
    }

    /// As [`CommonArgs::build_policy`], for a reload (see [`Policy::load_for_reload`]).
    pub fn build_policy_for_reload(&self, cwd_default: bool) -> Result<Policy, PolicyError> {
        self.build_policy_with(cwd_default, false)
    }

    /// `roots_exist`: whether a missing root directory is an error (at start) or is left out
    /// by the broker (at a reload).
    fn build_policy_with(
        &self,
        cwd_default: bool,
        roots_exist: bool,
    ) -> Result<Policy, PolicyError> {
        let mut policy = match &self.policy {
            Some(p) if roots_exist => Policy::load(p)?,
            Some(p) => Policy::load_for_reload(p)?,
            None => Policy::from_default_file()?,
        };
        let mut roots = self.roots.clone();
        if roots.is_empty() && self.policy.is_none() && cwd_default {
            roots.push(".".to_owned());
        }
        for arg in &roots {
            let (mount, path) = split_root_arg(arg);
            let entry = match mount {
                Some(m) => RootEntry::new(m, path),
                None => RootEntry::unnamed(path),
            };
            let entry = if self.writable {
                entry.writable()
            } else {
                entry
            };
            if entry.mount.is_none() {
                check_unnamed_root(arg, &entry)?;
            }
            policy.roots.push(entry);
        }
        if let Some(mode) = &self.consent {
            policy.consent.mode = Some(mode.clone());
        }
        if let Some(mode) = &self.consent_fallback {
            policy.consent.fallback = Some(mode.clone());
        }
        if let Some(file) = &self.audit_file {
            policy.audit.enabled = true;
            policy.audit.file = Some(file.clone());
        }
        if self.no_audit {
            policy.audit.enabled = false;
        }
        policy.validate_with("<command line>", roots_exist)?;
        Ok(policy)
    }
}

/// Errors in a `--root` argument without a valid mount, reported in the command line's own
/// terms before the combined policy is checked: a `NAME=PATH` whose NAME breaks the mount rule
/// (rather than "no such file" for the whole string read as a path), and a path with no final
/// component to name a mount after (`/`).
fn check_unnamed_root(arg: &str, entry: &RootEntry) -> Result<(), PolicyError> {
    let usage = |message: String| PolicyError {
        file: "<command line>".into(),
        line: None,
        key: "--root".into(),
        message,
    };
    // A NAME with no `/` before the first `=`, when the whole argument is no existing path,
    // was meant as a mount.
    if let Some((m, p)) = arg.split_once('=')
        && !m.is_empty()
        && !m.contains('/')
        && !p.is_empty()
        && !std::path::Path::new(arg).exists()
        && let Err(rule) = MountName::new(m)
    {
        return Err(usage(format!(
            "{arg:?}: {rule} (such as --root {}={p})",
            MountName::from_dir_name(m)
        )));
    }
    Policy::mount_of(entry).map(drop).map_err(|e| {
        usage(format!(
            "{e}; name the mount: --root NAME={}",
            entry.path.display()
        ))
    })
}
