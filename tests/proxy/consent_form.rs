//! The consent form `fsbroker proxy` shows through the host (`elicitation/create`
//! `params.message`): every requested path by name, directories marked as folders, and
//! nothing invisible or quote-breaking from the server's own words (its name, its message).

use crate::common::Fixture;
use crate::proxy_host;
use crate::proxy_host::{host_lines_until, initialize, spawn_proxy, start_ask};
use crate::sidecar::WAIT;
use serde_json::{Value, json};

/// The text of the consent form the host is shown when the server (named `name`) asks for
/// `paths` with `message`; the host declines.
fn consent_form(f: &Fixture, paths: &[String], name: &str, message: &str) -> String {
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[("SERVER_NAME", name)]);
    initialize(&mut p, "2025-06-18", json!({"elicitation": {}}));
    start_ask(
        &mut p,
        1,
        json!([["files/consent", {"requestedPaths": paths, "access": "read",
                                  "message": message}]]),
    );
    let lines = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let e: Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    let text = e["params"]["message"].as_str().unwrap().to_owned();
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"decline"}}));
    let a = proxy_host::answers(&mut p, 1);
    assert_eq!(a[0]["result"]["granted"], false, "{}", a[0]);
    p.finish();
    text
}

/// The form's line that shows `path` itself (not a path beneath it), lower-cased.
fn line_of(text: &str, path: &str) -> String {
    text.lines()
        .find(|l| {
            l.trim_start().strip_prefix(path).is_some_and(|rest| {
                !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || "._-/".contains(c))
            })
        })
        .unwrap_or_else(|| panic!("{path} not on a line of its own:\n{text}"))
        .to_lowercase()
}

#[test]
fn the_consent_form_lists_all_17_requested_paths() {
    let f = Fixture::new();
    let paths: Vec<String> = (1..=17)
        .map(|i| {
            f.file(&format!("f{i:02}.txt"), "x");
            format!("project/f{i:02}.txt")
        })
        .collect();
    let text = consent_form(&f, &paths, "lister", "many files");
    for path in &paths {
        assert!(text.contains(path.as_str()), "{path} not listed:\n{text}");
    }
    assert!(!text.contains("1 more"), "paths were summarised:\n{text}");
}

#[test]
fn the_consent_form_marks_directories_as_folders() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    f.file("docs/inside.txt", "x");
    f.file("docs/deeper/more.txt", "x");
    let paths: Vec<String> = [
        "project/a.txt",
        "project/docs",
        "project/docs/deeper",
        "project",
    ]
    .map(str::to_owned)
    .to_vec();
    let text = consent_form(&f, &paths, "folders", "");
    for dir in ["project", "project/docs", "project/docs/deeper"] {
        assert!(
            line_of(&text, dir).contains("folder"),
            "the directory {dir} is not marked as a folder:\n{text}"
        );
    }
    assert!(
        !line_of(&text, "project/a.txt").contains("folder"),
        "a file is marked as a folder:\n{text}"
    );
}

#[test]
fn the_consent_form_strips_invisible_characters_and_quotes_from_the_servers_words() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    let name = "ev\"il\u{202E}gnp.exe\u{200B}";
    let message = "please\u{202E} trust\u{200B} me\u{2066}\u{FEFF}";
    let text = consent_form(&f, &["project/a.txt".to_owned()], name, message);
    for c in ['\u{202E}', '\u{200B}', '\u{2066}', '\u{FEFF}'] {
        assert!(
            !text.contains(c),
            "U+{:04X} reached the form:\n{text:?}",
            c as u32
        );
    }
    assert!(
        !text.contains("ev\"il"),
        "the quote in the server's name reached the form:\n{text}"
    );
    assert!(text.contains("gnp.exe") && text.contains("trust"), "{text}");
}

/// Hosts render an elicitation message in different ways (text, Markdown, HTML): the
/// server's words are shown as plain text, its markup stripped, so that no host shows it
/// a link, an image, a script or emphasis.
#[test]
fn the_servers_markup_is_stripped_from_the_form() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    let text = consent_form(
        &f,
        &["project/a.txt".to_owned()],
        "marker",
        "read **this** <script>alert(1)</script> ![t](http://t.example/p.png) \
         [safe](http://evil.example) # note my_file",
    );
    let says = text
        .lines()
        .find(|l| l.starts_with("It says: "))
        .unwrap_or_else(|| panic!("no message line:\n{text}"));
    assert_eq!(
        says,
        "It says: read this alert(1) t(http://t.example/p.png) safe(http://evil.example) note my_file",
        "{text}"
    );
}
