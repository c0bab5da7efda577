//! The error table: README.md and docs/protocol.md against `ErrorKind::wire`, the
//! JSON form of errors, and no host path in any error a failing request produces.

use crate::common;
use crate::common::*;
use mcp_fsbroker::{Error, ErrorKind, Reason};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;

/// The rows `| `NAME` | -31xxx | meaning |` of a markdown file: (NAME, code).
fn error_table(markdown: &str) -> BTreeSet<(String, i64)> {
    let mut rows = BTreeSet::new();
    for line in markdown.lines() {
        let cells: Vec<&str> = line.trim().split('|').map(str::trim).collect();
        // A row "| a | b | c |" splits into ["", a, b, c, ""].
        if cells.len() < 5 || !cells[0].is_empty() {
            continue;
        }
        let Some(name) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            continue;
        }
        let Ok(code) = cells[2].parse::<i64>() else {
            continue;
        };
        assert!(
            rows.insert((name.to_owned(), code)),
            "row {name} appears twice"
        );
    }
    rows
}

/// The filesystem kinds of `ErrorKind::ALL` as (data code, code).
fn filesystem_kinds() -> BTreeSet<(String, i64)> {
    ErrorKind::ALL
        .iter()
        .filter_map(|k| {
            let w = k.wire();
            w.data_code.map(|d| (d.to_owned(), w.code))
        })
        .collect()
}

fn check_table(file: &Path) -> BTreeSet<(String, i64)> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    let table = error_table(&text);
    assert_eq!(table.len(), 12, "{file:?} has 12 filesystem error rows");
    let kinds = filesystem_kinds();
    for row in &table {
        assert!(
            kinds.contains(row),
            "{file:?} row {row:?} has no ErrorKind with that wire code"
        );
    }
    for kind in &kinds {
        assert!(table.contains(kind), "{kind:?} is missing from {file:?}");
    }
    table
}

#[test]
fn readme_error_table_matches_error_kinds_both_ways() {
    check_table(&Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
}

#[test]
fn readme_error_table_matches_the_protocol_table() {
    // The contract is the repository's own docs/protocol.md: a missing one fails the test
    // (check_table panics on a file it cannot read) rather than skip it.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = check_table(&manifest.join("README.md"));
    assert_eq!(check_table(&manifest.join("docs/protocol.md")), readme);
}

#[test]
fn the_codes_the_tests_accept_are_the_protocol_table() {
    let protocol = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol.md");
    let table = check_table(&protocol);
    let documented: BTreeSet<(String, i64)> = common::wire::DOCUMENTED
        .iter()
        .map(|&(code, name)| (name.to_owned(), code))
        .collect();
    assert_eq!(documented, table);
}

#[test]
fn the_parser_reads_the_row_shape_and_skips_other_tables() {
    let md = "| `data.code` | code | meaning |\n|---|---|---|\n\
              | `FILE_NOT_FOUND` | -31001 | path does not exist |\n\
              | `files/read` | `path` | `{content}` |\n\
              text | `X` | -1 |\n";
    let rows = error_table(md);
    assert_eq!(
        rows,
        BTreeSet::from([("FILE_NOT_FOUND".to_owned(), -31001)])
    );
}

#[test]
fn filesystem_codes_are_distinct_and_outside_the_json_rpc_range() {
    let kinds = filesystem_kinds();
    assert_eq!(kinds.len(), 12);
    let codes: BTreeSet<i64> = kinds.iter().map(|(_, c)| *c).collect();
    assert_eq!(codes.len(), 12, "two kinds share a code");
    assert!(codes.iter().all(|c| !(-32768..=-32000).contains(c)));
    let names: BTreeSet<&str> = kinds.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 12, "two kinds share a data code");
}

#[test]
fn json_rpc_kinds_map_to_standard_codes_without_data_code() {
    let expected = [
        (ErrorKind::ParseError, -32700),
        (ErrorKind::InvalidRequest, -32600),
        (ErrorKind::MethodNotFound, -32601),
        (ErrorKind::InvalidParams, -32602),
        (ErrorKind::Internal, -32603),
        (ErrorKind::UnsupportedVersion, -32022),
    ];
    for (kind, code) in expected {
        assert!(ErrorKind::ALL.contains(&kind));
        assert_eq!(kind.wire().code, code, "{kind:?}");
        assert_eq!(kind.wire().data_code, None, "{kind:?}");
        let j = Error::new(kind, "x").to_json();
        assert_eq!(j["code"], code);
        assert!(j["data"]["code"].is_null(), "{j}");
    }
    let rpc = ErrorKind::ALL
        .iter()
        .filter(|k| k.wire().data_code.is_none())
        .count();
    assert_eq!(rpc, expected.len());
}

#[test]
fn to_json_carries_every_data_field_that_is_set() {
    let e = Error::new(ErrorKind::PermissionDenied, "access was revoked")
        .with_reason(Reason::Revoked)
        .with_path("project/a")
        .with_limit(42)
        .with_retry_after_ms(250);
    assert_eq!(
        e.to_json(),
        json!({
            "code": -31002,
            "message": "access was revoked",
            "data": {
                "code": "PERMISSION_DENIED",
                "reason": "revoked",
                "path": "project/a",
                "limit": 42,
                "retryAfterMs": 250,
            }
        })
    );
    let bare = Error::new(ErrorKind::Timeout, "operation timed out").to_json();
    assert_eq!(
        bare,
        json!({"code": -31005, "message": "operation timed out", "data": {"code": "TIMEOUT"}})
    );
    let q = Error::quota("too big", 16).to_json();
    assert_eq!(q["code"], -31007);
    assert_eq!(q["data"]["limit"], 16);
    assert_eq!(q["data"]["code"], "QUOTA_EXCEEDED");
}

#[test]
fn every_filesystem_kind_serializes_its_data_code() {
    for kind in ErrorKind::ALL {
        let w = kind.wire();
        let j = Error::new(kind, "m").to_json();
        assert_eq!(j["code"], w.code);
        match w.data_code {
            Some(d) => assert_eq!(j["data"]["code"], d, "{kind:?}"),
            None => assert!(j.get("data").is_none_or(|d| d["code"].is_null())),
        }
    }
}

/// Errors from a handful of failing requests, each as its serialized response text.
async fn failing_responses(f: &Fixture) -> Vec<(String, Value)> {
    f.file("bin.dat", [0xffu8, 0xfe, 0xfd]);
    f.dir("dir");
    f.file("file.txt", "x");
    f.symlink(&f.outside, "escape");
    f.symlink(f.outside.join("secret.txt"), "escape-file");
    f.symlink(f.root.join("gone"), "dangling-inside");
    f.symlink(f.outside.join("gone"), "dangling-outside");
    let abs = |rel: &str| f.root.join(rel).display().to_string();
    let b = f.broker();
    let mut out = Vec::new();
    // Before consent: no_consent, with host paths in the request.
    for (method, params) in [
        ("files/read", json!({"path": abs("file.txt")})),
        (
            "files/stat",
            json!({"path": format!("file://{}", abs("dir"))}),
        ),
    ] {
        out.push((method.to_owned(), call(&b, "s", method, params).await));
    }
    consent_all(&b, "s").await;
    let requests = [
        ("files/read", json!({"path": abs("missing.txt")})),
        (
            "files/read",
            json!({"path": format!("file://{}", abs("nope/x"))}),
        ),
        ("files/read", json!({"path": abs("dir")})),
        ("files/list", json!({"path": abs("file.txt")})),
        (
            "files/read",
            json!({"path": "project/bin.dat", "encoding": "utf-8"}),
        ),
        ("files/read", json!({"path": "project/escape/secret.txt"})),
        ("files/read", json!({"path": abs("escape-file")})),
        ("files/stat", json!({"path": "project/dangling-inside"})),
        ("files/stat", json!({"path": "project/dangling-outside"})),
        (
            "files/read",
            json!({"path": f.outside.join("secret.txt").display().to_string()}),
        ),
        (
            "files/read",
            json!({"path": f.sibling.join("secret.txt").display().to_string()}),
        ),
        ("files/read", json!({"path": abs("file.txt/inner")})),
        (
            "files/read",
            json!({"path": "project/file.txt", "length": 1u64 << 40}),
        ),
        ("files/list", json!({"path": abs("dir"), "cursor": "%%%"})),
        ("files/read", json!({"path": format!("{}/../x", abs(""))})),
    ];
    for (method, params) in requests {
        out.push((method.to_owned(), call(&b, "s", method, params).await));
    }
    out
}

#[tokio::test]
async fn errors_from_failing_requests_never_contain_the_host_path() {
    let f = Fixture::new();
    let responses = failing_responses(&f).await;
    let tmp = f.tmp.path().display().to_string();
    let canonical = std::fs::canonicalize(f.tmp.path())
        .unwrap()
        .display()
        .to_string();
    assert!(responses.len() >= 15);
    for (method, r) in &responses {
        let e = r
            .get("error")
            .unwrap_or_else(|| panic!("{method} should fail: {r}"));
        let text = serde_json::to_string(e).unwrap();
        for host in [&tmp, &canonical] {
            assert!(
                !text.contains(host.as_str()),
                "{method}: host path in {text}"
            );
        }
        assert!(!text.contains(SECRET), "{method}: file contents in {text}");
        let message = e["message"].as_str().expect("message");
        assert_eq!(message, message.to_lowercase(), "{method}: {message}");
        assert!(!message.is_empty() && message.len() <= 120, "{message}");
        if let Some(path) = e["data"]["path"].as_str() {
            assert!(
                path == "project" || path.starts_with("project/"),
                "{method}: data.path {path} is not in mount form"
            );
        }
    }
    f.assert_canary_intact();
}

#[tokio::test]
async fn failing_requests_carry_the_expected_codes() {
    let f = Fixture::new();
    let responses = failing_responses(&f).await;
    let codes: Vec<(i64, String, String)> = responses.iter().map(|(_, r)| err(r)).collect();
    let expect = |code: i64, data_code: &str, reason: &str| (code, data_code.into(), reason.into());
    assert_eq!(
        codes,
        [
            expect(-31002, "PERMISSION_DENIED", "no_consent"),
            expect(-31002, "PERMISSION_DENIED", "no_consent"),
            expect(-31001, "FILE_NOT_FOUND", ""),
            expect(-31001, "FILE_NOT_FOUND", ""),
            expect(-31010, "IS_A_DIRECTORY", ""),
            expect(-31009, "NOT_A_DIRECTORY", ""),
            expect(-31004, "IO_ERROR", "not_utf8"),
            expect(-31002, "PERMISSION_DENIED", "outside_root"),
            expect(-31002, "PERMISSION_DENIED", "outside_root"),
            expect(-31001, "FILE_NOT_FOUND", ""),
            expect(-31002, "PERMISSION_DENIED", "outside_root"),
            expect(-31002, "PERMISSION_DENIED", "outside_root"),
            expect(-31002, "PERMISSION_DENIED", "outside_root"),
            expect(-31009, "NOT_A_DIRECTORY", ""),
            expect(-31007, "QUOTA_EXCEEDED", ""),
            expect(-32602, "", ""),
            expect(-31002, "PERMISSION_DENIED", "outside_root"),
        ]
    );
}
