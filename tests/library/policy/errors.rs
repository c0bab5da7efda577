//! Load-time errors: file, line, key, message, and the Display `FILE:LINE: KEY: message`.

use super::*;
use mcp_fsbroker::policy::PolicyError;

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
        + 1
}

/// Parses `text` as `bad.toml`, expects an error at the line holding `at`, with `key` and a
/// message containing `says`; checks the Display form.
fn expect_error(text: &str, at: &str, key: &str, says: &str) -> PolicyError {
    let e = match Policy::parse(text, "bad.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    };
    let line = line_of(text, at);
    assert_eq!(e.file, "bad.toml", "{e}");
    assert_eq!(e.key, key, "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    assert!(
        e.message.contains(says),
        "message {:?} lacks {says:?}",
        e.message
    );
    assert_eq!(
        e.to_string(),
        format!("bad.toml:{line}: {key}: {}", e.message)
    );
    e
}

#[test]
fn unknown_top_level_key_is_named_with_its_line() {
    let text = "[consent]\nmode = \"deny\"\n\nbogus_key = 1\n";
    // `bogus_key` is inside [consent] here; a real top-level one comes first in the file.
    let top = format!("bogus_key = 1\n{text}");
    let e = expect_error(&top, "bogus_key", "bogus_key", "unknown field");
    assert!(e.message.contains("bogus_key"));
    expect_error(text, "bogus_key", "consent.bogus_key", "unknown field");
}

#[test]
fn unknown_key_in_limits_points_at_that_key() {
    let text = "[limits]\nburst = 10\ntimeout_ms = 5\nchunk_size = 4096\nlist_page = 10\n";
    expect_error(text, "chunk_size", "limits.chunk_size", "unknown field");
}

#[test]
fn wrong_value_type_is_named() {
    let text = "[audit]\nenabled = false\n\n[limits]\nburst = 3\ntimeout_ms = \"x\"\n";
    expect_error(text, "timeout_ms", "limits.timeout_ms", "invalid type");
}

#[test]
fn zero_for_a_nonzero_limit_is_refused() {
    let text = "[limits]\nburst = 3\ntimeout_ms = 0\n";
    let e = expect_error(text, "timeout_ms", "limits.timeout_ms", "");
    assert!(e.message.to_lowercase().contains("zero"), "{e}");
}

#[test]
fn unknown_consent_mode_is_refused() {
    let text = "[consent]\ntimeout_secs = 5\nmode = \"sometimes\"\n";
    expect_error(text, "sometimes", "consent.mode", "unknown consent mode");
    expect_error(
        "[consent]\nmode = \"command:\"\n",
        "command:",
        "consent.mode",
        "unknown consent mode",
    );
}

#[test]
fn bad_access_value_is_refused() {
    let f = Fixture::new();
    let text = format!("[[roots]]\npath = {:?}\naccess = \"admin\"\n", f.root);
    expect_error(&text, "admin", "roots[0].access", "admin");
    let text = with_root(&f, "[[grants]]\npath = \"project\"\naccess = \"all\"\n");
    expect_error(&text, "\"all\"", "grants[0].access", "all");
}

#[test]
fn bad_mount_names_are_refused() {
    let f = Fixture::new();
    for bad in ["a/b", "..", ".", "", "sp ace", "ünï"] {
        let text = format!("[[roots]]\npath = {:?}\nmount = {bad:?}\n", f.root);
        expect_error(
            &text,
            "mount =",
            "roots[0].mount",
            "must match [A-Za-z0-9._-]+",
        );
    }
    for good in ["a.b_c-1", "...", "X"] {
        let text = format!("[[roots]]\npath = {:?}\nmount = {good:?}\n", f.root);
        Policy::parse(&text, "good.toml").unwrap_or_else(|e| panic!("{good}: {e}"));
    }
}

#[test]
fn duplicate_mounts_are_refused_at_the_second() {
    let f = Fixture::new();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"same\"\n\n[[roots]]\npath = {:?}\nmount = \"same\" # 2\n",
        f.root, f.sibling
    );
    expect_error(&text, "# 2", "roots[1].mount", "used by another root");
    // Default mounts collide too: two directories both named `project`.
    let other = f.outside.join("project");
    std::fs::create_dir(&other).unwrap();
    let text = format!(
        "[[roots]]\npath = {:?}\n[[roots]]\npath = {other:?}\n",
        f.root
    );
    let e = Policy::parse(&text, "bad.toml").unwrap_err();
    assert_eq!((e.key.as_str(), e.line), ("roots[1].mount", Some(4)), "{e}");
}

#[test]
fn missing_root_directory_is_refused() {
    let f = Fixture::new();
    let missing = f.tmp.path().join("no-such-dir");
    let text =
        format!("[consent]\nmode = \"auto\"\n[[roots]]\npath = {missing:?}\nmount = \"m\"\n");
    expect_error(
        &text,
        "no-such-dir",
        "roots[0].path",
        "cannot open root directory",
    );
}

#[test]
fn root_that_is_a_file_is_refused() {
    let f = Fixture::new();
    let file = f.file("plain.txt", "x");
    let text = format!("[[roots]]\npath = {file:?}\nmount = \"m\"\n");
    expect_error(&text, "plain.txt", "roots[0].path", "not a directory");
}

#[test]
fn chunk_larger_than_max_chunk_is_refused() {
    let text = "[limits]\nmax_chunk_bytes = 1024\nchunk_bytes = 4096\n";
    expect_error(
        text,
        "chunk_bytes = 4096",
        "limits.chunk_bytes",
        "max_chunk_bytes",
    );
    let text = "[limits]\nlist_page = 50\nmax_list_page = 10\n";
    expect_error(text, "list_page = 50", "limits.list_page", "max_list_page");
}

#[test]
fn grant_for_an_undeclared_mount_is_refused() {
    let f = Fixture::new();
    let text = with_root(&f, "[[grants]]\npath = \"elsewhere/docs\"\n");
    expect_error(&text, "elsewhere", "grants[0].path", "mount-form path");
    let text = with_root(&f, "[[grants]]\npath = \"/etc\"\n");
    expect_error(&text, "/etc", "grants[0].path", "mount-form path");
}

#[test]
fn consent_rule_path_above_its_mount_is_refused() {
    let f = Fixture::new();
    let text = with_root(
        &f,
        "[[consent.rules]]\npaths = [\"project/src\", \"project/../etc\"]\ndecision = \"allow\"\n",
    );
    expect_error(&text, "paths =", "consent.rules[0].paths[1]", "outside");
}

#[test]
fn bad_redact_key_is_refused() {
    let text = "[audit]\nredact_paths = true\nredact_key = \"abc123\"\n";
    expect_error(text, "redact_key", "audit.redact_key", "64 hex digits");
    let not_hex = format!("[audit]\nredact_key = \"{}\"\n", "g".repeat(64));
    expect_error(&not_hex, "redact_key", "audit.redact_key", "64 hex digits");
    let good = format!("[audit]\nredact_key = \"{}\"\n", "aB3".repeat(21) + "0");
    Policy::parse(&good, "good.toml").expect("a 64-hex-digit key");
}

#[test]
fn toml_syntax_error_names_file_and_line_without_a_key() {
    let text = "[limits]\nburst = 3\ntimeout_ms = = 4\n";
    let e = Policy::parse(text, "bad.toml").unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.key.as_str()),
        ("bad.toml", Some(3), "")
    );
    assert_eq!(e.to_string(), format!("bad.toml:3: {}", e.message));
}

#[test]
fn unreadable_policy_file_is_named() {
    let f = Fixture::new();
    let path = f.tmp.path().join("absent.toml");
    let e = Policy::load(&path).unwrap_err();
    assert_eq!(e.file, path.display().to_string());
    assert!(e.message.contains("cannot read policy"), "{e}");
}

#[test]
fn check_policy_reports_errors_as_file_line_key() {
    let f = Fixture::new();
    let path = f.tmp.path().join("p.toml");
    std::fs::write(&path, "[limits]\nburst = 0\n").unwrap();
    let out = std::process::Command::new(bin())
        .arg("check-policy")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:2: limits.burst: ", path.display())),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn an_elicit_fallback_is_refused_since_it_answers_when_eliciting_cannot() {
    let text = "[consent]\nmode = \"elicit\"\nfallback = \"elicit\"\n";
    expect_error(text, "fallback", "consent.fallback", "cannot elicit");
    let fine = "[consent]\nmode = \"elicit\"\nfallback = \"command:/bin/true\"\n";
    let p = Policy::parse(fine, "ok.toml").unwrap();
    assert_eq!(
        p.consent.fallback.map(|m| m.to_string()).as_deref(),
        Some("command:/bin/true")
    );
}
