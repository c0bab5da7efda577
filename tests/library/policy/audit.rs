//! The audit log: one JSON line per request, never contents; redacted paths.

use super::*;
use std::path::Path;

const CONTENT: &str = "CONFIDENTIAL-FILE-BODY";

/// A broker (mode auto) over the fixture whose policy's `[audit]` section is `audit`.
fn audited(f: &Fixture, audit: &str) -> Broker {
    let text = with_root(
        f,
        &format!("[consent]\nmode = \"auto\"\n[audit]\n{audit}\n"),
    );
    let policy = Policy::parse(&text, "test").unwrap_or_else(|e| panic!("{e}"));
    Broker::builder(policy).build().expect("broker").0
}

fn audit_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("audit file");
    assert!(
        !text.contains(CONTENT),
        "the audit log holds file contents:\n{text}"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[tokio::test]
async fn audit_file_gets_one_line_per_request_without_contents() {
    let f = Fixture::new();
    f.file("notes/plan.txt", CONTENT);
    let log = f.tmp.path().join("audit.jsonl");
    let b = audited(&f, &format!("file = {log:?}"));
    ok(&call(&b, "srv", "roots/list", json!({})).await);
    consent_all(&b, "srv").await;
    ok(&read(&b, "srv", "project/notes/plan.txt").await);
    assert_eq!(
        err(&read(&b, "srv", "project/notes/missing.txt").await).1,
        "FILE_NOT_FOUND"
    );
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (i, l) in lines.iter().enumerate() {
        let mut keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        // Every line has the keys lines have always had; a consent line adds what it decided;
        // every line ends with its place on the hash chain, the first with the hash it
        // chains to.
        let mut expected = vec![
            "bytes",
            "durationMs",
            "method",
            "outcome",
            "path",
            "server",
            "time",
            "seq",
            "hash",
        ];
        if l["method"] == "files/consent" {
            expected.extend(["access", "approved", "decidedBy", "denied"]);
        }
        if i == 0 {
            expected.push("prev");
        }
        // The CPU time of an operation that did filesystem work (checked below).
        if l.get("cpuMs").is_some() {
            expected.push("cpuMs");
        }
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(l["seq"], i + 1);
        assert_eq!(l["server"], "srv");
        let t = l["time"].as_str().unwrap();
        assert!(wire::is_rfc3339_utc(t), "time {t}");
        assert!(l["durationMs"].as_f64().unwrap() >= 0.0);
    }
    let methods: Vec<&str> = lines
        .iter()
        .map(|l| l["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["roots/list", "files/consent", "files/read", "files/read"]
    );
    assert!(
        lines[0].get("cpuMs").is_none(),
        "roots/list does no filesystem work"
    );
    assert!(lines[2]["cpuMs"].as_f64().unwrap() >= 0.0, "{}", lines[2]);
    assert_eq!(lines[2]["path"], "project/notes/plan.txt");
    assert_eq!(lines[2]["outcome"], "ok");
    assert_eq!(lines[2]["bytes"], CONTENT.len());
    assert_eq!(lines[3]["path"], "project/notes/missing.txt");
    assert_eq!(lines[3]["outcome"], "FILE_NOT_FOUND");
    assert_eq!(lines[3]["bytes"], 0);
}

#[tokio::test]
async fn redacted_audit_paths_are_keyed_hashes() {
    let f = Fixture::new();
    f.file("notes/plan.txt", CONTENT);
    f.file("notes/other.txt", CONTENT);
    let key = "0123456789abcdef".repeat(4);
    let run = |name: &str, key: String| {
        let log = f.tmp.path().join(name);
        let audit = format!("file = {log:?}\nredact_paths = true\nredact_key = \"{key}\"");
        (audited(&f, &audit), log)
    };
    let (b, log) = run("one.jsonl", key.clone());
    consent_all(&b, "srv").await;
    for p in [
        "project/notes/plan.txt",
        "project/notes/plan.txt",
        "project/notes/other.txt",
    ] {
        ok(&read(&b, "srv", p).await);
    }
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 4, "{lines:?}");
    let hashes: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    for h in std::iter::once(&lines[0]["path"].as_str().unwrap()).chain(&hashes) {
        let hex = h
            .strip_prefix("hash:")
            .unwrap_or_else(|| panic!("not redacted: {h}"));
        assert!(
            !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{h}"
        );
        assert!(!h.contains("notes") && !h.contains("plan") && !h.contains("project"));
    }
    assert_eq!(hashes[0], hashes[1]);
    assert_ne!(hashes[0], hashes[2]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("plan.txt") && !text.contains("notes/"),
        "{text}"
    );
    // The same key gives the same hash in another broker; another key does not.
    for (name, k, same) in [
        ("two.jsonl", key.clone(), true),
        ("three.jsonl", "f".repeat(64), false),
    ] {
        let (b, log) = run(name, k);
        consent_all(&b, "srv").await;
        ok(&read(&b, "srv", "project/notes/plan.txt").await);
        let h = audit_lines(&log)[1]["path"].as_str().unwrap().to_owned();
        assert_eq!(h == hashes[0], same, "{name}: {h} vs {}", hashes[0]);
    }
}
