//! A refused `files/consent` answer depends only on what the policy says, never on the disk:
//! without `access`, the answer's `access` is the most the located roots allow, whether the
//! name is a file, a directory, missing, a link out of the root or a loop. A `deny` rule is
//! asked before anything on disk is looked at.

use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};

/// The fixture's variants of `project/NAME`: what may exist there.
const VARIANTS: [&str; 6] = [
    "file",
    "directory",
    "missing",
    "link_out",
    "loop",
    "dangling",
];

fn shape(f: &Fixture, variant: &str) {
    match variant {
        "file" => {
            f.file("NAME", "x");
        }
        "directory" => {
            f.dir("NAME");
        }
        "link_out" => f.symlink(f.outside.join("secret.txt"), "NAME"),
        "loop" => {
            f.symlink("LOOP2", "NAME");
            f.symlink("NAME", "LOOP2");
        }
        "dangling" => f.symlink(f.outside.join("nothing-here"), "NAME"),
        _ => {}
    }
}

/// The answer to consent on `NAME` (no `access`) under `policy`, one per variant.
async fn answers(access: &str, policy: &str) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for variant in VARIANTS {
        let f = Fixture::new();
        shape(&f, variant);
        let b: Broker = f.broker_with(access, policy);
        for path in ["project/NAME", "project/NAME/below"] {
            let r = call(&b, "s", "files/consent", json!({"requestedPaths": [path]})).await;
            let mut v = ok(&r).clone();
            assert_eq!(v["granted"], false, "{variant} {path}: {v}");
            v["for"] = json!(path);
            out.push((variant, v));
        }
    }
    out
}

fn assert_all_same(answers: &[(&str, Value)]) {
    for pair in answers.chunks(2).collect::<Vec<_>>().windows(2) {
        assert_eq!(
            pair[0].iter().map(|(_, v)| v).collect::<Vec<_>>(),
            pair[1].iter().map(|(_, v)| v).collect::<Vec<_>>(),
            "a refusal told {} from {}",
            pair[0][0].0,
            pair[1][0].0
        );
    }
}

#[tokio::test]
async fn a_refusal_in_mode_deny_answers_the_same_whatever_the_name_is() {
    for access in ["read", "write"] {
        let got = answers(access, "[consent]\nmode = \"deny\"\n").await;
        assert_all_same(&got);
        assert_eq!(got[0].1["access"], access, "{got:?}");
    }
}

#[tokio::test]
async fn a_refusal_by_a_deny_rule_answers_the_same_whatever_the_name_is() {
    let rule = "[consent]\nmode = \"auto\"\n[[consent.rules]]\npaths = [\"project/NAME\"]\ndecision = \"deny\"\n";
    for access in ["read", "write"] {
        let got = answers(access, rule).await;
        assert_all_same(&got);
        assert_eq!(got[0].1["access"], access, "{got:?}");
    }
}

/// Several paths in one request: the refused answer's access is the most their roots allow,
/// whatever each path is on disk.
#[tokio::test]
async fn a_mixed_refusal_names_the_roots_access_not_what_the_links_are() {
    let f = Fixture::new();
    f.symlink(f.outside.join("secret.txt"), "out1");
    f.symlink(&f.outside, "out2");
    let b = f.broker_with("write", "[consent]\nmode = \"deny\"\n");
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/out1", "project/out2/x"]}),
    )
    .await;
    assert_eq!(ok(&r)["access"], "write", "{r}");
    assert_eq!(ok(&r)["granted"], false, "{r}");
    f.assert_canary_intact();
}
