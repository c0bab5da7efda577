//! `fsbroker status`, `fsbroker revoke`, `fsbroker resume`, `fsbroker reload` and
//! `fsbroker console`: one
//! request to a running daemon, its answer printed (as a table, or as the daemon's JSON with
//! `--json`).

use super::daemon::socket_path;
use super::terminal::{self, err, out};
use super::{ConsoleArgs, ReloadArgs, ResumeArgs, RevokeArgs, StatusArgs};
use crate::daemon::client;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

/// `fsbroker status`: 0 with the sessions printed, 1 when no answer came or it was an error.
pub(super) fn status(args: StatusArgs) -> ExitCode {
    match ask(args.daemon, &json!({"op": "status"})) {
        Ok(answer) if args.json => print_json(&answer),
        Ok(answer) => {
            terminal::lines(&sessions_table(&answer["sessions"]));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `fsbroker revoke`: 0 with the grants taken back printed, 1 when no answer came or it was
/// an error, 2 when nothing says what to revoke.
pub(super) fn revoke(args: RevokeArgs) -> ExitCode {
    if args.server.is_none() && args.path.is_none() && !args.all {
        err!(
            "fsbroker: say what to revoke: --server ID, a PATH in mount form, or both; \
             --all revokes every grant of every session"
        );
        return ExitCode::from(2);
    }
    let mut request = json!({"op": "revoke"});
    if let Some(s) = &args.server {
        request["server"] = json!(s);
    }
    if let Some(p) = &args.path {
        request["path"] = json!(p);
    }
    if args.all {
        request["all"] = json!(true);
    }
    match ask(args.daemon, &request) {
        Ok(answer) if args.json => print_json(&answer),
        Ok(answer) => {
            let revoked = answer["revoked"].as_array().cloned().unwrap_or_default();
            let carved = answer["carved"].as_array().cloned().unwrap_or_default();
            if revoked.is_empty() && carved.is_empty() {
                out!("no grant matched: nothing revoked");
            }
            for g in &revoked {
                out!(
                    "revoked {} {} from {} ({})",
                    text(&g["access"]),
                    text(&g["path"]),
                    text(&g["server"]),
                    text(&g["origin"]),
                );
            }
            // A path under a wider grant is taken back by itself; the grant stays for the rest.
            for g in &carved {
                out!(
                    "revoked {} from {}: carved out of its {} grant on {} ({}), which stays for \
                     the rest",
                    text(&g["carvedOut"]),
                    text(&g["server"]),
                    text(&g["access"]),
                    text(&g["path"]),
                    text(&g["origin"]),
                );
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `fsbroker resume`: 0 when the session is no longer suspended (also when it was not),
/// 1 when no answer came or it was an error (no such session).
pub(super) fn resume(args: ResumeArgs) -> ExitCode {
    match ask(args.daemon, &json!({"op": "resume", "server": args.server})) {
        Ok(answer) if args.json => print_json(&answer),
        Ok(answer) => {
            if answer["resumed"] == true {
                out!("resumed {}: its requests are answered again", args.server);
            } else {
                out!("{} was not suspended: nothing to resume", args.server);
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `fsbroker reload`: 0 with what changed printed, 1 when no answer came or the daemon
/// refused (the new policy does not load, or it has no policy file).
pub(super) fn reload(args: ReloadArgs) -> ExitCode {
    match ask(args.daemon, &json!({"op": "reload"})) {
        Ok(answer) if args.json => print_json(&answer),
        Ok(answer) => {
            terminal::lines(&reload_report(&answer));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `fsbroker console`: 0 with a fresh sign-in link printed (and opened, unless
/// `--no-open`, where the desktop has an opener), 1 when the daemon gave none.
pub(super) fn console(args: ConsoleArgs) -> ExitCode {
    let socket = match socket_path(args.daemon.clone()) {
        Ok(s) => s,
        Err(message) => {
            err!("fsbroker: {message}");
            return ExitCode::FAILURE;
        }
    };
    let answer = match ask(Some(socket.clone()), &json!({"op": "console"})) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let link = text(&answer["url"]);
    out!("{link}");
    let desktop = std::env::var_os("DISPLAY")
        .or(std::env::var_os("WAYLAND_DISPLAY"))
        .is_some();
    let opened = !args.no_open && desktop && open_privately(&socket, link);
    if !opened {
        err!("fsbroker: open the link above in your browser (it works once, for five minutes)");
    }
    ExitCode::SUCCESS
}

/// Opens `link` in the desktop's browser without putting it on a command line, where every
/// local process could read it (`/proc/PID/cmdline`) and sign in first: the opener is given
/// a page in the daemon's private directory (0700) that sends the browser on. Whether an
/// opener ran.
fn open_privately(socket: &std::path::Path, link: &str) -> bool {
    let Some(dir) = socket.parent() else {
        return false;
    };
    let page = dir.join("console.html");
    let html = format!(
        "<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>\
         <meta http-equiv=refresh content=\"0;url={link}\"><title>fsbroker console</title>\
         <a href=\"{link}\">Open the fsbroker console</a>\n"
    );
    let written = {
        use std::io::Write;
        let _ = std::fs::remove_file(&page);
        crate::daemon::private_file(&page).and_then(|mut f| f.write_all(html.as_bytes()))
    };
    if let Err(e) = written {
        err!("fsbroker: cannot write {}: {e}", page.display());
        return false;
    }
    std::process::Command::new("xdg-open")
        .arg(&page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a reload changed, one line a kind.
fn reload_report(answer: &Value) -> Vec<String> {
    let list = |v: &Value| {
        let items = texts(v);
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    vec![
        format!("reloaded {}", text(&answer["policy"])),
        format!("  roots          {}", list(&answer["roots"])),
        format!("  changed        {}", list(&answer["rootsChanged"])),
        format!("  removed        {}", list(&answer["rootsRemoved"])),
        format!("  sessions told  {}", list(&answer["sessionsTold"])),
        format!("  watches ended  {}", answer["watchesEnded"]),
    ]
}

/// Sends `request` and returns a successful answer; prints why otherwise.
pub(super) fn ask(daemon: Option<PathBuf>, request: &Value) -> Result<Value, ExitCode> {
    let fail = |message: String| {
        err!("fsbroker: {message}");
        ExitCode::FAILURE
    };
    let socket = socket_path(daemon).map_err(fail)?;
    let answer = client::request(&socket, request).map_err(fail)?;
    if answer["ok"] != true {
        return Err(fail(match answer["error"].as_str() {
            Some(m) => m.to_owned(),
            None => format!("unexpected answer: {answer}"),
        }));
    }
    Ok(answer)
}

/// Prints the daemon's answer as JSON; see [`terminal::json`].
pub(super) fn print_json(answer: &Value) -> ExitCode {
    match terminal::json(answer, true) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            err!("fsbroker: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A string field, or `-`.
pub(super) fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// The strings of the list `v` (none when it is not one).
fn texts(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(text)
        .collect()
}

/// The parts carved out of a grant, as ` (except A, B)`, or nothing.
fn except(parts: &Value) -> String {
    let parts = texts(parts);
    if parts.is_empty() {
        String::new()
    } else {
        format!(" (except {})", parts.join(", "))
    }
}

/// One block of lines per session.
fn sessions_table(sessions: &Value) -> Vec<String> {
    let list = sessions.as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return vec!["no sessions".to_owned()];
    }
    let mut out = Vec::new();
    for s in list {
        let c = &s["counters"];
        out.push(format!(
            "session {}  (since {})",
            text(&s["server"]),
            text(&s["started"])
        ));
        if s["attached"] == true {
            let server = match &s["serverPid"] {
                Value::Number(n) => format!(", server pid {n}"),
                _ => String::new(),
            };
            let sandbox = match (s["sandbox"]["mode"].as_str(), s["sandbox"]["caps"].as_str()) {
                (Some(mode), Some(caps)) => format!("sandboxed ({mode}; caps {caps})"),
                (Some(mode), None) => format!("sandboxed ({mode})"),
                (None, _) => "not sandboxed".to_owned(),
            };
            let pid = match &s["pid"] {
                Value::Number(n) => n.to_string(),
                _ => "-".to_owned(),
            };
            out.push(format!(
                "  attached   pid {pid}{server}, era {}, {sandbox}",
                text(&s["era"]),
            ));
            let p = &s["process"];
            if p["processes"].as_u64().is_some_and(|n| n > 0) {
                out.push(format!(
                    "  process    {} processes, cpu {} s, memory {} MiB",
                    p["processes"],
                    p["cpuMs"].as_u64().unwrap_or(0) / 1000,
                    p["rssBytes"].as_u64().unwrap_or(0) >> 20,
                ));
            }
        }
        for mount in s["unavailable"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            out.push(format!(
                "  UNAVAILABLE {}: its directory is not at its configured path; requests \
                 under it are refused until it is back",
                text(mount)
            ));
        }
        let suspended = &s["suspended"];
        if suspended.is_object() {
            out.push(format!(
                "  SUSPENDED  since {} after {} violations within a minute ({}); \
                 fsbroker resume --server {} lifts it",
                text(&suspended["since"]),
                suspended["total"],
                text(&suspended["summary"]),
                text(&s["server"]),
            ));
        }
        let throttled = &s["throttled"];
        if throttled.is_object() {
            out.push(format!(
                "  throttled  {} budget spent, last refused at {}",
                text(&throttled["budget"]),
                text(&throttled["at"]),
            ));
        }
        let grants = s["grants"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if grants.is_empty() {
            out.push("  grants     none".to_owned());
        }
        for g in grants {
            out.push(format!(
                "  grant      {:<5} {}{}  ({}, since {})",
                text(&g["access"]),
                text(&g["path"]),
                except(&g["except"]),
                text(&g["origin"]),
                text(&g["since"])
            ));
        }
        for w in s["watches"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let depth = if w["recursive"] == true {
                ", recursive"
            } else {
                ""
            };
            out.push(format!(
                "  watch      {}  ({}{depth})",
                text(&w["path"]),
                text(&w["id"])
            ));
        }
        for u in s["uploads"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            out.push(format!(
                "  upload     {}  ({} bytes staged)",
                text(&u["path"]),
                u["stagedBytes"]
            ));
        }
        out.push(format!(
            "  requests   {} ({} failed, {} refused, {} cancelled, {} throttled), {} in \
             flight; {} bytes read, {} written, {} entries listed; cpu {} ms",
            c["requests"],
            c["failed"],
            c["refused"],
            c["cancelled"],
            c["throttled"],
            s["inFlight"],
            c["bytesRead"],
            c["bytesWritten"],
            c["entriesListed"],
            c["cpuMs"],
        ));
        let last = &s["lastActivity"];
        if last.is_object() {
            out.push(format!(
                "  last       {} {} -> {}  at {}",
                text(&last["method"]),
                last["path"].as_str().unwrap_or(""),
                text(&last["outcome"]),
                text(&last["at"])
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_each_session_with_its_grants() {
        assert_eq!(sessions_table(&json!([])), ["no sessions"]);
        let t = sessions_table(&json!([{
            "server": "a", "started": "T0",
            "grants": [{"path": "docs/x", "access": "write", "origin": "consented", "since": "T1"}],
            "watches": [{"id": "w1", "path": "docs", "recursive": true}],
            "uploads": [], "inFlight": 0,
            "counters": {"requests": 3, "failed": 1, "refused": 1, "cancelled": 0,
                         "bytesRead": 10, "bytesWritten": 0, "throttled": 0,
                         "entriesListed": 0, "cpuMs": 1},
            "suspended": {"since": "T3", "total": 20, "summary": "outside_root 20"},
            "lastActivity": {"at": "T2", "method": "files/read", "path": "docs/x", "outcome": "ok"},
        }]))
        .join("\n");
        assert!(t.starts_with("session a  (since T0)\n"), "{t}");
        assert!(
            t.contains("grant      write docs/x  (consented, since T1)"),
            "{t}"
        );
        assert!(t.contains("watch      docs  (w1, recursive)"), "{t}");
        assert!(
            t.contains("requests   3 (1 failed, 1 refused, 0 cancelled, 0 throttled)"),
            "{t}"
        );
        assert!(
            t.contains(
                "SUSPENDED  since T3 after 20 violations within a minute (outside_root 20); \
                 fsbroker resume --server a lifts it"
            ),
            "{t}"
        );
        assert!(t.contains("last       files/read docs/x -> ok"), "{t}");
    }

    #[test]
    fn the_reload_report_names_what_changed() {
        let t = reload_report(&json!({
            "ok": true, "policy": "/p.toml", "roots": ["a", "b"], "rootsChanged": ["b"],
            "rootsRemoved": [], "sessionsTold": ["s1"], "watchesEnded": 0,
        }))
        .join("\n");
        assert_eq!(
            t,
            "reloaded /p.toml\n  roots          a, b\n  changed        b\n  removed        none\n  \
             sessions told  s1\n  watches ended  0"
        );
    }
}
