//! Nothing invisible reaches a consent prompt: every character of general category Cc, Cf,
//! Zl, Zp, Co or Cn in what a server chooses (its name, its message, the names of the paths it
//! asks for) is shown as `?`, on the terminal (`tty` provider) and in the form the proxy asks
//! the host to show (`elicitation/create`), while ordinary text in any script is shown as it
//! is. A zero-width joiner is Cf, so an emoji ZWJ sequence is shown as its parts with `?`
//! between them; variation selectors and skin-tone modifiers are not invisible formatting
//! (Mn, Sk) and pass.

use crate::common::Fixture;
use crate::common::pty::pty;
use crate::proxy_host;
use crate::proxy_host::{host_lines_until, initialize, spawn_proxy, start_ask};
use crate::sidecar::WAIT;
use mcp_fsbroker::Access;
use mcp_fsbroker::consent::{ConsentProvider, ConsentRequest, TtyConsent};
use mcp_fsbroker::path::{MountName, MountPath, RequestPath};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::Duration;

/// The characters the review found passing the old hand-written list.
fn found_by_the_review() -> Vec<char> {
    let ranges = [
        (0xE0020, 0xE007F), // tag characters
        (0x206A, 0x206F),   // deprecated format characters
        (0x1BCA0, 0x1BCA3), // shorthand format controls
        (0x1D173, 0x1D17A), // musical symbol format characters
        (0x2028, 0x2029),   // line and paragraph separators
    ];
    ranges
        .iter()
        .flat_map(|&(a, b)| (a..=b).map(|u| char::from_u32(u).unwrap()))
        .collect()
}

/// A sample of each hidden category, chosen across the code space.
fn samples() -> Vec<char> {
    [
        // Cc: C0, DEL, C1 (NEL, CSI).
        0x01, 0x1B, 0x7F, 0x85, 0x9B, //
        // Cf: soft hyphen, Arabic number sign, Syriac abbreviation mark, Mongolian vowel
        // separator, zero width space, ZWJ, RLO, LRI, BOM, interlinear annotation, Kaithi
        // number sign, Egyptian hieroglyph format control, language tag.
        0xAD, 0x600, 0x70F, 0x180E, 0x200B, 0x200D, 0x202E, 0x2066, 0xFEFF, 0xFFF9, 0x110BD,
        0x13430, 0xE0001, //
        // Zl, Zp.
        0x2028, 0x2029, //
        // Co: the private use area and both supplementary private use planes.
        0xE000, 0xF8FF, 0xF0000, 0xFFFFD, 0x100000, 0x10FFFD, //
        // Cn: noncharacters (unassigned in every version) and long-unassigned code points.
        0x378, 0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF, 0xE0000,
    ]
    .iter()
    .map(|&u| char::from_u32(u).unwrap())
    .collect()
}

/// Ordinary text in many scripts, with combining marks, a variation selector and a skin-tone
/// modifier; the only hidden character in it is the ZWJ of the family emoji.
const SCRIPTS: &str = "Grüße naïve café e\u{301} Ελληνικά Кириллица 日本語のテキスト 中文 한국어 \
     العربية עברית हिन्दी ไทย ქართული 😀 ❤\u{FE0F} 👍🏽 👨\u{200D}👩\u{200D}👧 a\u{A0}b　c";

/// Every character the prompt must hide.
fn hidden() -> Vec<char> {
    let mut all = found_by_the_review();
    all.extend(samples());
    all
}

/// `text` as the prompt must show it: each hidden character replaced by `?`.
fn shown(text: &str) -> String {
    let hidden = hidden();
    text.chars()
        .map(|c| if hidden.contains(&c) { '?' } else { c })
        .collect()
}

/// The server's message: every hidden character, each between two letters, then the scripts.
fn message() -> String {
    let mut m: String = hidden().iter().map(|c| format!("{c}x")).collect();
    m.push(' ');
    m.push_str(SCRIPTS);
    m
}

/// A file name holding the characters of a path name that may be hidden (a path cannot hold
/// Cc, which the broker refuses in any path).
fn odd_name() -> String {
    "a\u{E0041}\u{2028}\u{206A}\u{1BCA0}\u{1D173}\u{200D}\u{E000}\u{FFFE}b.txt".to_owned()
}

/// The text after `marker` on its line (up to `\n`, without a `\r` before it).
fn after<'a>(text: &'a str, marker: &str) -> &'a str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {text:?}"))
        + marker.len();
    let rest = &text[start..];
    let line = rest.split('\n').next().unwrap();
    line.strip_suffix('\r').unwrap_or(line)
}

/// Asserts that no hidden character is anywhere in `text`.
fn assert_nothing_hidden(text: &str, surface: &str) {
    for c in hidden() {
        assert!(
            !text.contains(c),
            "U+{:04X} reached the {surface}:\n{text:?}",
            c as u32
        );
    }
}

#[test]
fn finding_11_the_elicitation_form_shows_no_invisible_character() {
    let f = Fixture::new();
    f.file(&odd_name(), "x");
    f.file("plain.txt", "x");
    let name = "srv\u{E0041}\u{202E}\u{2028}名前";
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[("SERVER_NAME", name)]);
    initialize(&mut p, "2025-06-18", json!({"elicitation": {}}));
    let paths = [
        format!("project/{}", odd_name()),
        "project/plain.txt".into(),
    ];
    start_ask(
        &mut p,
        1,
        json!([["files/consent", {"requestedPaths": paths, "access": "read",
                                  "message": message()}]]),
    );
    let lines = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let e: Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    let text = e["params"]["message"].as_str().unwrap().to_owned();
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"decline"}}));
    let a = proxy_host::answers(&mut p, 1);
    assert_eq!(a[0]["result"]["granted"], false, "{}", a[0]);
    p.finish();

    assert_nothing_hidden(&text, "elicitation form");
    assert_eq!(after(&text, "It says: "), shown(&message()));
    // The session's name itself loses what shows nothing (`session::server_name`), so the
    // form names `srv名前`, as every other surface does.
    assert!(text.contains("\"srv名前\""), "{text:?}");
    assert!(
        text.contains(&format!("  project/{}\n", shown(&odd_name()))),
        "{text:?}"
    );
    assert!(text.contains("  project/plain.txt\n"), "{text:?}");
}

/// Answers the prompt with "n" once it has appeared; returns what the terminal showed, and
/// the master side, which must stay open until the provider has read the answer.
fn decline(mut master: std::fs::File) -> std::thread::JoinHandle<(String, std::fs::File)> {
    std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&shown).contains("allow?") {
            let n = master.read(&mut buf).unwrap();
            assert!(n > 0, "the terminal closed before the prompt was complete");
            shown.extend_from_slice(&buf[..n]);
        }
        master.write_all(b"n\n").unwrap();
        (String::from_utf8(shown).unwrap(), master)
    })
}

fn mount_path(rel: &str) -> MountPath {
    let RequestPath::Mount { rel, .. } = RequestPath::parse(&format!("project/{rel}")).unwrap()
    else {
        unreachable!()
    };
    MountPath {
        mount: MountName::new("project").unwrap(),
        rel,
    }
}

#[tokio::test]
async fn finding_11_the_tty_prompt_shows_no_invisible_character() {
    let (master, slave) = pty();
    let shown_on_tty = decline(master);
    let provider = TtyConsent::with_device(slave).with_wait(Duration::from_secs(60));
    let paths = [mount_path(&odd_name()), mount_path("plain.txt")];
    let mut req = ConsentRequest::new("srv\u{E0041}\u{202E}名前", paths, Access::Read);
    req.message = Some(message());
    let decision = provider.decide(&req).await;
    assert!(decision.approved.is_empty());
    // Joined only now: the master side stays open until the answer has been read.
    let (text, _master) = shown_on_tty.join().unwrap();
    assert_nothing_hidden(&text, "terminal");
    assert_eq!(after(&text, "reason given: "), shown(&message()));
    assert!(text.contains("\"srv??名前\""), "{text:?}");
    assert!(
        text.contains(&format!("  project/{}\r\n", shown(&odd_name()))),
        "{text:?}"
    );
    assert!(text.contains("  project/plain.txt\r\n"), "{text:?}");
}

/// An executable script at `path` that saves its input next to itself and denies. It is
/// written by a child shell, so that no descriptor open for writing it is ever in this
/// process (where a concurrent spawn could inherit it and make the exec fail as busy).
fn saving_script(path: &std::path::Path) {
    let body = "#!/bin/sh\ncat > \"$0.in\"\necho '{\"granted\": false}'\n";
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"",
            "sh",
            body,
        ])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn finding_11_the_command_provider_is_given_a_sanitised_copy_to_show() {
    use mcp_fsbroker::consent::CommandConsent;
    let tmp = tempfile::tempdir().unwrap();
    let prog = tmp.path().join("save.sh");
    saving_script(&prog);
    let paths = [mount_path(&odd_name()), mount_path("plain.txt")];
    let mut req = ConsentRequest::new("srv\u{E0041}\u{202E}名前", paths, Access::Read);
    req.message = Some(message());
    let decision = CommandConsent::new(prog.clone()).decide(&req).await;
    assert!(decision.approved.is_empty());
    let seen: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("save.sh.in")).unwrap()).unwrap();
    // The exact fields stay exact: the program matches and answers with them.
    assert_eq!(seen["message"], message());
    assert_eq!(seen["paths"][0], format!("project/{}", odd_name()));
    // What it may show has nothing hidden.
    assert_nothing_hidden(&seen["shown"].to_string(), "command's shown fields");
    let shown_fields = &seen["shown"];
    assert_eq!(shown_fields["message"], shown(&message()));
    assert_eq!(shown_fields["serverId"], "srv??名前");
    assert_eq!(
        shown_fields["paths"],
        json!([
            format!("project/{}", shown(&odd_name())),
            "project/plain.txt"
        ])
    );
}
