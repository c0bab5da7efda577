//! What the command line prints, with a name a server shaped: a file whose name holds escape
//! sequences, a bell, line breaks, a direction override and zero-width characters, reached
//! through a link, so that the real path (the grant's, the journal's) is that name. Every
//! verb that prints must show it escaped, never raw.

use crate::attach::attach;
use crate::place::Place;
use crate::sidecar::Ran;
use serde_json::{Value, json};

/// The name: it sets the window title, clears the screen, forges a line and hides what
/// follows; a direction override makes `txt.exe` read `exe.txt`; a zero-width space, a line
/// separator, a C1 control and a variation selector pass for nothing.
const HOSTILE: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}[1;1HSESSION ok (no grants)\u{1b}[8m\
                       \n\u{202e}txt.exe\u{200b}\u{2028}\u{9b}\u{fe0f}";

/// Characters that must never be printed raw.
const RAW: &[char] = &[
    '\u{1b}', '\u{7}', '\u{202e}', '\u{200b}', '\u{2028}', '\u{9b}', '\u{fe0f}',
];

/// The name as the text printers must show it.
const TEXT: &[&str] = &[
    "\\u{1b}]0;owned\\u{7}",
    "\\n\\u{202e}txt.exe\\u{200b}\\u{2028}\\u{9b}\\u{fe0f}",
];

/// The name as the JSON printers must show it.
const JSON: &[&str] = &[
    "\\u001b]0;owned\\u0007",
    "\\u202etxt.exe\\u200b\\u2028\\u009b\\ufe0f",
];

/// A name without controls, which the recovery store restores: a direction override makes
/// `gpj.exe` read `exe.jpg`.
const BIDI: &str = "\u{202e}gpj.exe\u{200b}\u{2028}\u{fe0f}";

/// [`BIDI`] as the text printers must show it.
const BIDI_TEXT: &[&str] = &["\\u{202e}gpj.exe\\u{200b}\\u{2028}\\u{fe0f}"];

/// [`BIDI`] as the JSON printers must show it.
const BIDI_JSON: &[&str] = &["\\u202egpj.exe\\u200b\\u2028\\ufe0f"];

/// Asserts that neither stdout nor stderr of `ran` holds a raw hidden character (a raw line
/// break only as the end of a line the command printed, never inside the name), and that
/// stdout shows each of `expected` (none where the verb prints no real path, only requested
/// ones, which hold no hidden character).
fn clean(what: &str, ran: &Ran, expected: &[&str]) {
    for (stream, bytes) in [("stdout", &ran.stdout), ("stderr", &ran.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        if let Some(c) = text.chars().find(|c| RAW.contains(c)) {
            panic!(
                "{what}: raw U+{:04X} on {stream}: {:?}",
                c as u32,
                ran.log()
            );
        }
        assert!(
            !text.contains("owned\nSESSION") && !text.contains("grants)\n"),
            "{what}: the name's line break reached {stream}: {}",
            ran.log()
        );
    }
    let out = ran.out();
    for e in expected {
        assert!(out.contains(e), "{what}: {e} is not shown: {}", ran.log());
    }
}

fn json_of(ran: &Ran) -> Value {
    serde_json::from_slice(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {}", ran.log()))
}

#[test]
fn every_verb_shows_a_hostile_name_escaped() {
    let p = Place::new();
    std::fs::write(p.root.join(HOSTILE), "old").unwrap();
    std::os::unix::fs::symlink(HOSTILE, p.root.join("link")).unwrap();
    std::fs::write(p.root.join(BIDI), "old").unwrap();
    std::os::unix::fs::symlink(BIDI, p.root.join("bidi")).unwrap();
    let _d = p.start_with(&["--writable", "--consent", "auto"]);
    let mut s = attach(&p, "alpha");
    let consent = json!({"requestedPaths": ["root/link", "root/bidi"], "access": "write"});
    let r = s.request("files/consent", consent.clone());
    assert_eq!(r["result"]["granted"], true, "{r}");
    // A request path may hold no control character, but it may hold the others: the last
    // one names the file outright, so the log and the last activity show it.
    for path in [
        "root/link".to_owned(),
        "root/bidi".to_owned(),
        format!("root/{BIDI}"),
    ] {
        let r = s.request("files/write", json!({"path": path, "content": "new"}));
        assert!(r.get("error").is_none(), "{r}");
    }

    // The daemon's verbs: the grant under the real path, the last activity.
    let ran = p.verb(&["status"]);
    assert!(ran.success(), "{}", ran.log());
    clean("status", &ran, TEXT);
    clean("status", &ran, BIDI_TEXT);
    let ran = p.verb(&["status", "--json"]);
    clean("status --json", &ran, JSON);
    let sessions = json_of(&ran)["sessions"].clone();
    let real = format!("root/{HOSTILE}");
    assert_eq!(sessions[0]["grants"][0]["path"], real, "{sessions}");
    assert_eq!(
        sessions[0]["lastActivity"]["path"],
        format!("root/{BIDI}"),
        "{sessions}"
    );
    clean("log", &p.verb(&["log"]), BIDI_TEXT);
    clean("log --json", &p.verb(&["log", "--json"]), BIDI_JSON);

    // The recovery store's verbs: the change was journaled under the real path.
    let ran = p.verb(&["history"]);
    assert!(ran.success(), "{}", ran.log());
    clean("history", &ran, TEXT);
    let ran = p.verb(&["history", "--json"]);
    clean("history --json", &ran, JSON);
    let changes = json_of(&ran)["changes"].clone();
    assert_eq!(changes[0]["path"], real, "{changes}");
    // The store refuses to restore at a name with controls, and says so.
    let id = changes[0]["id"].as_str().unwrap().to_owned();
    clean("restore", &p.verb(&["restore", &id]), &[]);
    assert_eq!(changes[1]["path"], format!("root/{BIDI}"), "{changes}");
    let id = changes[1]["id"].as_str().unwrap().to_owned();
    let ran = p.verb(&["restore", &id]);
    assert!(ran.success(), "{}", ran.log());
    clean("restore", &ran, BIDI_TEXT);
    let ran = p.verb(&["undo", "--server", "alpha"]);
    clean("undo", &ran, TEXT);

    // Taken back and granted again, twice, for both forms of `revoke`.
    let ran = p.verb(&["revoke", "--server", "alpha"]);
    assert!(ran.success(), "{}", ran.log());
    clean("revoke", &ran, TEXT);
    let r = s.request("files/consent", consent);
    assert_eq!(r["result"]["granted"], true, "{r}");
    let ran = p.verb(&["revoke", "--server", "alpha", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    clean("revoke --json", &ran, JSON);

    // The verbs that print no path still go through the same printer.
    for args in [
        &["resume", "--server", "alpha"][..],
        &["resume", "--server", "alpha", "--json"],
        &["reload"],
    ] {
        let ran = p.verb(args);
        for bytes in [&ran.stdout, &ran.stderr] {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.chars().any(|c| RAW.contains(&c)), "{}", ran.log());
        }
    }
}
