//! `fsbroker status`'s table: one block of lines per session, from the sessions as the
//! daemon's `status` shows them.

use super::text;
use serde_json::Value;

/// One block of lines per session.
pub(super) fn sessions_table(sessions: &[Value]) -> Vec<String> {
    if sessions.is_empty() {
        return vec!["no sessions".to_owned()];
    }
    let mut out = Vec::new();
    for s in sessions {
        out.push(format!(
            "session {}  (since {})",
            text(&s["server"]),
            text(&s["started"])
        ));
        program(&s["program"], &mut out);
        if s["attached"] == true {
            attachment(s, &mut out);
        }
        troubles(s, &mut out);
        holdings(s, &mut out);
        out.push(work(s));
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

/// The items of the list `v` (none when it is not one).
fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Who the session's server is: what it runs and the first digits of its digest, and what
/// started it (the daemon's `program`, made by the one reader of an identity); that it
/// could not be told, when it could not.
fn program(p: &Value, out: &mut Vec<String>) {
    if !p.is_object() {
        out.push("  program    unknown: its program could not be told".to_owned());
        return;
    }
    let by: Vec<&str> = items(&p["launchedBy"]).iter().map(text).collect();
    let by = if by.is_empty() {
        String::new()
    } else {
        format!(", launched by {}", by.join(" < "))
    };
    out.push(format!(
        "  program    {} (digest {}){by}",
        text(&p["what"]),
        text(&p["digest"])
    ));
}

/// An attached session's process, its server's, its era and sandbox, and what its processes
/// use.
fn attachment(s: &Value, out: &mut Vec<String>) {
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

/// What holds a session back: roots whose directory is gone, a suspension, a throttle.
fn troubles(s: &Value, out: &mut Vec<String>) {
    for mount in items(&s["unavailable"]) {
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
}

/// What a session holds: its grants, watches and uploads.
fn holdings(s: &Value, out: &mut Vec<String>) {
    let grants = items(&s["grants"]);
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
    for w in items(&s["watches"]) {
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
    for u in items(&s["uploads"]) {
        out.push(format!(
            "  upload     {}  ({} bytes staged)",
            text(&u["path"]),
            u["stagedBytes"]
        ));
    }
}

/// What a session's requests came to.
fn work(s: &Value) -> String {
    let c = &s["counters"];
    format!(
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
    )
}

/// The parts carved out of a grant, as ` (except A, B)`, or nothing.
fn except(parts: &Value) -> String {
    let parts: Vec<&str> = items(parts).iter().map(text).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" (except {})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_shows_each_session_with_its_grants() {
        assert_eq!(sessions_table(&[]), ["no sessions"]);
        let t = sessions_table(&[json!({
            "server": "a", "started": "T0",
            "grants": [{"path": "docs/x", "access": "write", "origin": "consented", "since": "T1"}],
            "watches": [{"id": "w1", "path": "docs", "recursive": true}],
            "uploads": [], "inFlight": 0,
            "counters": {"requests": 3, "failed": 1, "refused": 1, "cancelled": 0,
                         "bytesRead": 10, "bytesWritten": 0, "throttled": 0,
                         "entriesListed": 0, "cpuMs": 1},
            "suspended": {"since": "T3", "total": 20, "summary": "outside_root 20"},
            "lastActivity": {"at": "T2", "method": "files/read", "path": "docs/x", "outcome": "ok"},
        })])
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
}
