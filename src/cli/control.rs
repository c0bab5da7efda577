//! `fsbroker status`, `fsbroker revoke`, `fsbroker resume`, `fsbroker reload` and
//! `fsbroker console`: one request to a running daemon, its answer printed (as a table, or as
//! the daemon's JSON with `--json`).

use super::daemon::socket_path;
use super::terminal::{self, err, out};
use super::{ConsoleArgs, ReloadArgs, ResumeArgs, RevokeArgs, StatusArgs};
use crate::daemon::protocol::{self, Op, Reloaded, Revoked, RevokedGrant, blocking};
use serde_json::Value;
use sessions::sessions_table;
use std::path::PathBuf;
use std::process::ExitCode;

mod sessions;

/// `fsbroker status`: 0 with the sessions printed, 1 when no answer came or it was an error.
pub(super) fn status(args: StatusArgs) -> ExitCode {
    shown(args.json, args.daemon, protocol::Status {}, |a| {
        terminal::lines(&sessions_table(&a.sessions));
    })
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
    let revoke = protocol::Revoke {
        server: args.server,
        path: args.path,
        all: args.all,
    };
    shown(args.json, args.daemon, revoke, |a| {
        terminal::lines(&revoked_report(&a));
    })
}

/// What a revocation took back, one line a grant.
fn revoked_report(a: &Revoked) -> Vec<String> {
    if a.revoked.is_empty() && a.carved.is_empty() {
        return vec!["no grant matched: nothing revoked".to_owned()];
    }
    let or_dash = |s: &Option<String>| s.as_deref().unwrap_or("-").to_owned();
    let whole = a.revoked.iter().map(|g: &RevokedGrant| {
        format!(
            "revoked {} {} from {} ({})",
            g.access,
            g.path,
            g.server,
            or_dash(&g.origin),
        )
    });
    // A path under a wider grant is taken back by itself; the grant stays for the rest.
    let carved = a.carved.iter().map(|g| {
        format!(
            "revoked {} from {}: carved out of its {} grant on {} ({}), which stays for the \
             rest",
            or_dash(&g.carved_out),
            g.server,
            g.access,
            g.path,
            or_dash(&g.origin),
        )
    });
    whole.chain(carved).collect()
}

/// `fsbroker resume`: 0 when the session is no longer suspended (also when it was not),
/// 1 when no answer came or it was an error (no such session).
pub(super) fn resume(args: ResumeArgs) -> ExitCode {
    let server = args.server;
    let resume = protocol::Resume {
        server: server.clone(),
    };
    shown(args.json, args.daemon, resume, |a| {
        if a.resumed {
            out!("resumed {server}: its requests are answered again");
        } else {
            out!("{server} was not suspended: nothing to resume");
        }
    })
}

/// `fsbroker reload`: 0 with what changed printed, 1 when no answer came or the daemon
/// refused (the new policy does not load, or it has no policy file).
pub(super) fn reload(args: ReloadArgs) -> ExitCode {
    shown(args.json, args.daemon, protocol::Reload {}, |a| {
        terminal::lines(&reload_report(&a));
    })
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
    let link = match ask(Some(socket.clone()), protocol::Console {}) {
        Ok(a) => a.url,
        Err(code) => return code,
    };
    out!("{link}");
    let desktop = crate::daemon::console::desktop();
    let opened = !args.no_open && desktop && open_privately(&socket, &link);
    if !opened {
        err!("fsbroker: open the link above in your browser (it works once, for five minutes)");
    }
    ExitCode::SUCCESS
}

/// Opens `link` in the desktop's browser through a private page (never on a command line);
/// whether an opener ran.
fn open_privately(socket: &std::path::Path, link: &str) -> bool {
    crate::daemon::console::open_privately(socket, link).unwrap_or_else(|e| {
        err!("fsbroker: {e}");
        false
    })
}

/// What a reload changed, one line a kind.
fn reload_report(a: &Reloaded) -> Vec<String> {
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    vec![
        format!("reloaded {}", a.policy.display()),
        format!("  roots          {}", list(&a.roots)),
        format!("  changed        {}", list(&a.roots_changed)),
        format!("  removed        {}", list(&a.roots_removed)),
        format!("  sessions told  {}", list(&a.sessions_told)),
        format!("  watches ended  {}", a.watches_ended),
    ]
}

/// Sends `op` and prints its answer: as the daemon's JSON with `json`, else read as its
/// op's answer and shown by `show`. 0 then; 1, with why printed, when no answer came or it
/// was an error.
fn shown<O: Op>(
    json: bool,
    daemon: Option<PathBuf>,
    op: O,
    show: impl FnOnce(O::Answer),
) -> ExitCode {
    if json {
        let fail = |message: String| {
            err!("fsbroker: {message}");
            ExitCode::FAILURE
        };
        let answer = socket_path(daemon).and_then(|s| blocking::ask::<Value>(&s, &op.into()));
        return answer.map_or_else(fail, |a| print_json(&a));
    }
    match ask(daemon, op) {
        Ok(answer) => {
            show(answer);
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// Sends `op` and returns its successful answer; prints why otherwise.
pub(super) fn ask<O: Op>(daemon: Option<PathBuf>, op: O) -> Result<O::Answer, ExitCode> {
    let fail = |message: String| {
        err!("fsbroker: {message}");
        ExitCode::FAILURE
    };
    let socket = socket_path(daemon).map_err(fail)?;
    blocking::request(&socket, op).map_err(fail)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reload_report_names_what_changed() {
        let t = reload_report(&Reloaded {
            policy: "/p.toml".into(),
            roots: vec!["a".into(), "b".into()],
            roots_changed: vec!["b".into()],
            roots_removed: vec![],
            sessions_told: vec!["s1".into()],
            watches_ended: 0,
        })
        .join("\n");
        assert_eq!(
            t,
            "reloaded /p.toml\n  roots          a, b\n  changed        b\n  removed        none\n  \
             sessions told  s1\n  watches ended  0"
        );
    }

    #[test]
    fn the_revoke_report_names_each_grant_and_each_part_carved_out() {
        let grant = |carved: Option<&str>| RevokedGrant {
            path: "docs".into(),
            access: "write".into(),
            origin: Some("consented".into()),
            server: "s1".into(),
            carved_out: carved.map(str::to_owned),
        };
        let none = Revoked {
            revoked: vec![],
            carved: vec![],
        };
        assert_eq!(revoked_report(&none), ["no grant matched: nothing revoked"]);
        let some = Revoked {
            revoked: vec![grant(None)],
            carved: vec![grant(Some("docs/x"))],
        };
        assert_eq!(
            revoked_report(&some),
            [
                "revoked write docs from s1 (consented)",
                "revoked docs/x from s1: carved out of its write grant on docs (consented), \
                 which stays for the rest",
            ]
        );
    }
}
