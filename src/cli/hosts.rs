//! `fsbroker hosts`, `wrap` and `unwrap`: the MCP servers of the hosts on this machine,
//! whether each runs through the broker, and the rewrite of their entries to do so (or not).
//! What the files are and how they are rewritten is `crate::hosts`; this prints.

use super::terminal::{self, err, out};
use crate::hosts::{self, Change, Env, Host, Options, Place, Transport, proxied};
use clap::Args;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `hosts`.
#[derive(Debug, Args)]
pub(crate) struct HostsArgs {
    /// Only these hosts: claude-desktop, claude-code, vscode, cursor, windsurf, zed, gemini,
    /// codex, continue (all when none is named).
    #[arg(value_name = "HOST", value_parser = parse_host)]
    hosts: Vec<Host>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Where project files (`.mcp.json`, `.vscode/mcp.json`, ...) are looked for (default:
    /// the current directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
}

/// Options of `wrap` and `unwrap`.
#[derive(Debug, Args)]
pub(crate) struct WrapArgs {
    /// Only these hosts (all when none is named).
    #[arg(value_name = "HOST", value_parser = parse_host)]
    hosts: Vec<Host>,
    /// Only the servers of this name (repeatable; all when none is named).
    #[arg(long = "server", value_name = "NAME")]
    servers: Vec<String>,
    /// Print what would change as a unified diff, and write nothing.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Where project files are looked for (default: the current directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
}

fn parse_host(s: &str) -> Result<Host, String> {
    Host::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Host::ALL.iter().map(|h| h.name()).collect();
        format!("{s:?} is not a host: use one of {}", names.join(", "))
    })
}

fn env(project: Option<PathBuf>) -> Result<Env, ExitCode> {
    Env::from_env(project).map_err(|message| {
        err!("fsbroker: {message}");
        ExitCode::FAILURE
    })
}

/// `fsbroker hosts`: every place found and every server in it. 0 unless no `HOME`.
pub(super) fn list(args: HostsArgs) -> ExitCode {
    let env = match env(args.project) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let places: Vec<Value> = hosts::discover(&env, &args.hosts)
        .iter()
        .flat_map(describe)
        .collect();
    if args.json {
        let _ = terminal::json(&json!({ "hosts": places }), true);
        return ExitCode::SUCCESS;
    }
    if places.is_empty() {
        out!("no MCP configuration of a known host found");
    }
    for p in &places {
        out!(
            "{} ({}): {}",
            text(&p["host"]),
            text(&p["scope"]),
            text(&p["file"])
        );
        if let Some(e) = p["error"].as_str() {
            out!("  not read: {e}");
        }
        for s in p["servers"].as_array().into_iter().flatten() {
            out!("  {}: {}", text(&s["name"]), text(&s["status"]));
            if let Some(c) = s["shown"].as_str() {
                out!("      {c}");
            }
        }
    }
    ExitCode::SUCCESS
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// One place as JSON objects, one per section (a Claude Code file has several).
fn describe(place: &Place) -> Vec<Value> {
    let base = |scope: String, error: Option<String>, servers: Vec<Value>| {
        json!({
            "host": place.host.name(),
            "scope": scope,
            "file": place.file.display().to_string(),
            "error": error,
            "servers": servers,
        })
    };
    let first_scope = place.keys.first().map(|k| k.0.label()).unwrap_or_default();
    let text = match hosts::read(&place.file) {
        Ok(Some(b)) => String::from_utf8(b).map_err(|_| "not UTF-8 text".to_owned()),
        Ok(None) => Err("gone".to_owned()),
        Err(e) => Err(e),
    };
    let sections = text.and_then(|t| hosts::sections(place.format, &t, &place.keys));
    match sections {
        Err(e) => vec![base(first_scope, Some(e), Vec::new())],
        Ok(sections) => sections
            .into_iter()
            .map(|s| {
                let servers = s
                    .entries
                    .iter()
                    .map(|e| server(&e.name, &e.transport))
                    .collect();
                base(s.scope.label(), None, servers)
            })
            .collect(),
    }
}

/// One server as JSON: its command or url, and whether and how it runs through the broker.
fn server(name: &str, transport: &Transport) -> Value {
    match transport {
        Transport::Stdio { command, args, .. } => {
            let argv: Vec<&str> = args
                .iter()
                .flat_map(|a| a.items.iter().map(|l| l.value.as_str()))
                .collect();
            let mut all = vec![command.value.as_str()];
            all.extend(&argv);
            let p = proxied(&command.value, &argv);
            let status = match &p {
                None => "not through fsbroker".to_owned(),
                Some(p) => broker_status(p.daemon.as_ref(), p.sandbox.as_deref()),
            };
            let inner = p
                .as_ref()
                .and_then(|p| p.server)
                .map(|i| argv[i..].to_vec());
            json!({
                "name": name, "transport": "stdio", "command": all, "url": p.as_ref().and_then(|p| p.url.clone()),
                "proxied": p.is_some(), "daemon": p.as_ref().is_some_and(|p| p.daemon.is_some()),
                "socket": p.as_ref().and_then(|p| p.daemon.clone().flatten()),
                "sandbox": p.as_ref().and_then(|p| p.sandbox.clone()),
                "server_command": inner, "status": status, "shown": all.join(" "),
            })
        }
        Transport::Remote { url, headers } => json!({
            "name": name, "transport": "remote", "command": null, "url": url, "headers": headers,
            "proxied": false, "daemon": false, "socket": null, "sandbox": null,
            "server_command": null, "status": "remote, not through fsbroker", "shown": url,
        }),
        Transport::Unknown(why) => json!({
            "name": name, "transport": "unknown", "command": null, "url": null,
            "proxied": false, "daemon": false, "socket": null, "sandbox": null,
            "server_command": null, "status": format!("not understood: {why}"), "shown": null,
        }),
    }
}

fn broker_status(daemon: Option<&Option<String>>, sandbox: Option<&str>) -> String {
    let broker = match daemon {
        Some(None) => "attached to the daemon".to_owned(),
        Some(Some(socket)) => format!("attached to the daemon at {socket}"),
        None => "its own broker".to_owned(),
    };
    let sandbox = match sandbox {
        Some(mode) => format!("sandboxed ({mode})"),
        None => "not sandboxed".to_owned(),
    };
    format!("through fsbroker proxy, {broker}, {sandbox}")
}

/// `fsbroker wrap` (`sandbox`: with `--sandbox`) and `fsbroker unwrap`: 0 when every file
/// that needed a change got it, 1 when one could not be written or a named server was not
/// found.
pub(super) fn rewrite(args: WrapArgs, unwrap: bool, sandbox: bool) -> ExitCode {
    let env = match env(args.project) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let exe = match std::env::current_exe() {
        Ok(p) if p.is_absolute() => p.display().to_string(),
        _ => {
            err!("fsbroker: cannot tell this binary's own path");
            return ExitCode::FAILURE;
        }
    };
    let options = Options {
        unwrap,
        sandbox,
        exe,
        servers: args.servers.clone(),
    };
    let mut failed = false;
    let mut seen = Vec::new();
    for place in hosts::discover(&env, &args.hosts) {
        match rewrite_one(&place, &options, args.dry_run) {
            Ok(names) => seen.extend(names),
            Err(message) => {
                err!("fsbroker: {}: {message}", place.file.display());
                failed = true;
            }
        }
    }
    for name in args.servers.iter().filter(|n| !seen.contains(n)) {
        err!("fsbroker: no server called {name} in the hosts' configurations");
        failed = true;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Rewrites (or with `dry_run` shows) one file; the names of the servers it holds.
fn rewrite_one(place: &Place, options: &Options, dry_run: bool) -> Result<Vec<String>, String> {
    let before = hosts::read(&place.file)?.ok_or("gone")?;
    let text = std::str::from_utf8(&before).map_err(|_| "not UTF-8 text")?;
    let plan = match hosts::plan(place.format, text, &place.keys, options) {
        Ok(plan) => plan,
        // A YAML file is named, and is no failure: its host lists its servers.
        Err(e) if place.format == hosts::Format::Yaml => {
            out!("{} ({}): {e}", place.file.display(), place.host.name());
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    if plan.changes.is_empty() {
        return Ok(Vec::new());
    }
    out!("{} ({}):", place.file.display(), place.host.name());
    for (scope, name, change) in &plan.changes {
        let what = match change {
            Change::Wrapped => "wrapped".to_owned(),
            Change::Unwrapped => "unwrapped".to_owned(),
            Change::Unchanged(why) => format!("unchanged, {why}"),
            Change::LeftAlone(why) => format!("left alone: {why}"),
        };
        out!("  {name} ({}): {what}", scope.label());
    }
    let names = plan.changes.iter().map(|c| c.1.clone()).collect();
    if plan.after == text {
        return Ok(names);
    }
    if dry_run {
        terminal::lines(&hosts::unified(
            &place.file.display().to_string(),
            text,
            &plan.after,
        ));
        return Ok(names);
    }
    let written = hosts::replace(&place.file, &before, plan.after.as_bytes())?;
    out!(
        "  written to {}; the file before is kept as {}",
        written.file.display(),
        written.backup.display()
    );
    Ok(names)
}
