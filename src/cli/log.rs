//! `fsbroker log`: a running daemon's recent audit events, one line each, and with
//! `--follow` each new one as it comes, until interrupted or the daemon stops.

use super::control::{ask, text};
use super::daemon::socket_path;
use super::terminal::{self, err, out};
use crate::daemon::protocol::{self, Events, Request, blocking};
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `log`.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// After the recent events, print each new one as it comes, until interrupted.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
    /// Only this server's events.
    #[arg(long, value_name = "ID")]
    pub(crate) server: Option<String>,
    /// One JSON object a line, as the daemon sends them.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket (default: as `fsbroker daemon` chooses it).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub(crate) daemon: Option<PathBuf>,
}

/// Longest field shown on a human line (a path, a server id), in characters.
const FIELD_MAX: usize = 512;

/// 0 with the events printed, 1 when no answer came, it was an error, or a followed daemon
/// stopped.
pub(super) fn run(args: LogArgs) -> ExitCode {
    let mut log = protocol::Log {
        server: args.server,
        follow: false,
    };
    if !args.follow {
        return match ask(args.daemon, log) {
            Ok(Events { events }) => {
                if events.is_empty() && !args.json {
                    out!("no events");
                }
                // A reader that went (`| head`) is no failure.
                let _ = print_events(&events, args.json);
                ExitCode::SUCCESS
            }
            Err(code) => code,
        };
    }
    log.follow = true;
    let request = Request::Log(log);
    let socket = match socket_path(args.daemon) {
        Ok(s) => s,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    let mut refused = None;
    let followed = blocking::follow(&socket, &request, |line| {
        if line.get("ok").is_some() {
            if line["ok"] != true {
                refused = Some(text(&line["error"]).to_owned());
                return false;
            }
            let events = line["events"].as_array().cloned().unwrap_or_default();
            return print_events(&events, args.json).is_ok();
        }
        if let Some(event) = line.get("event") {
            return print_events(std::slice::from_ref(event), args.json).is_ok();
        }
        if let Some(n) = line.get("missed") {
            if args.json {
                return terminal::json(&line, false).is_ok();
            }
            err!("fsbroker: {n} events missed: this reader fell behind the daemon");
        }
        true
    });
    match (followed, refused) {
        (_, Some(message)) | (Err(message), None) => {
            err!("fsbroker: {message}");
            ExitCode::FAILURE
        }
        (Ok(()), None) => ExitCode::SUCCESS,
    }
}

/// Prints `events`, as JSON lines or as human ones, each flushed as it comes; an `Err` when
/// stdout is gone, for a follower to stop on.
fn print_events(events: &[Value], json: bool) -> std::io::Result<()> {
    for e in events {
        if json {
            terminal::json(e, false)?;
        } else {
            terminal::line(&mut std::io::stdout().lock(), &event_line(e))?;
        }
    }
    Ok(())
}

/// `text` cut at [`FIELD_MAX`] characters, marked when cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(FIELD_MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// One event as a readable line: time, server, method, path, outcome (and reason), bytes,
/// duration; for a consent, what it approved and denied. What a server chose (its id, the
/// paths) is escaped when the line is printed, as everything the command line prints is.
fn event_line(e: &Value) -> String {
    let shown = |v: &Value| clip(v.as_str().filter(|s| !s.is_empty()).unwrap_or("-"));
    let list = |v: &Value| {
        v.as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(&shown)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "{}  {}  {} {} -> {}",
        text(&e["time"]),
        shown(&e["server"]),
        shown(&e["method"]),
        shown(&e["path"]),
        shown(&e["outcome"]),
    );
    if let Some(r) = e["reason"].as_str() {
        line.push_str(&format!(" ({})", clip(r)));
    }
    line.push_str(&format!("  {} bytes  {} ms", e["bytes"], e["durationMs"]));
    if e.get("approved").is_some() {
        line.push_str(&format!(
            "  approved [{}] denied [{}]",
            list(&e["approved"]),
            list(&e["denied"])
        ));
        if e["outside"].as_u64().is_some_and(|n| n > 0) {
            line.push_str(&format!(" and {} outside every root", e["outside"]));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_line_is_readable_and_shows_no_escapes() {
        let mut printed = Vec::new();
        let l = event_line(&json!({
            "time": "T", "server": "s1", "method": "files/read", "path": "demo/f\u{1b}[2J",
            "outcome": "PERMISSION_DENIED", "reason": "no_consent", "bytes": 0,
            "durationMs": 0.25,
        }));
        terminal::line(&mut printed, &l).unwrap();
        assert_eq!(
            String::from_utf8(printed).unwrap(),
            "T  s1  files/read demo/f\\u{1b}[2J -> PERMISSION_DENIED (no_consent)  0 bytes  \
             0.25 ms\n"
        );
        let l = event_line(&json!({
            "time": "T", "server": "s1", "method": "files/consent", "path": null,
            "outcome": "partial", "bytes": 0, "durationMs": 1.0, "access": "read",
            "approved": ["demo/a"], "denied": ["demo/b"], "outside": 2, "decidedBy": ["rule"],
        }));
        assert!(
            l.ends_with(
                "files/consent - -> partial  0 bytes  1.0 ms  approved [demo/a] \
                         denied [demo/b] and 2 outside every root"
            ),
            "{l}"
        );
    }
}
