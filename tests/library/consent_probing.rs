//! A consent request is answered the same whatever exists where the session has no grant and
//! did not ask, and grants only what was asked for and what it really leads to (issue 14, from
//! the review after its fixes). Consent resolves the requested path to show its real place,
//! but it looks only along the way to that path, beneath it, and where the session's grants
//! already reach.

use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};

/// Mode `deny` with a rule that allows `project/pub` (and what `extra` adds).
fn rules_broker(f: &Fixture, extra: &str) -> Broker {
    f.broker_with(
        "write",
        &format!(
            "[consent]\nmode = \"deny\"\n{extra}\n[[consent.rules]]\npaths = [\"project/pub\"]\ndecision = \"allow\"\n"
        ),
    )
}

async fn consent(b: &Broker, path: &str) -> Value {
    let r = call(
        b,
        "s",
        "files/consent",
        json!({"requestedPaths": [path], "access": "read"}),
    )
    .await;
    ok(&r).clone()
}

/// `pub/probe -> ../secret/NAME/../../pub/t.txt`: whatever `secret/NAME` is, the answer to
/// consent on `pub/probe` is the same.
#[tokio::test]
async fn consent_through_a_link_into_an_ungranted_place_answers_the_same_whatever_is_there() {
    for policy in [
        "",
        "[[consent.rules]]\npaths = [\"project/secret\"]\ndecision = \"deny\"\n",
    ] {
        let mut answers = Vec::new();
        for variant in ["directory", "missing", "file", "link_out", "link_in"] {
            let f = Fixture::new();
            f.file("pub/t.txt", "public");
            f.dir("secret/present");
            match variant {
                "directory" => {
                    f.dir("secret/NAME");
                }
                "file" => {
                    f.file("secret/NAME", "x");
                }
                "link_out" => f.symlink(&f.outside, "secret/NAME"),
                "link_in" => f.symlink("present", "secret/NAME"),
                _ => {}
            }
            f.symlink("../secret/NAME/../../pub/t.txt", "pub/probe");
            let b = rules_broker(&f, policy);
            consent(&b, "project/pub").await;
            answers.push((variant, consent(&b, "project/pub/probe").await));
        }
        let first = &answers[0].1;
        for (variant, a) in &answers {
            assert_eq!(a, first, "{variant}: {answers:?}");
        }
    }
}

/// Without any link: consent on `project/NAME/pub` must not tell whether `NAME` exists.
#[tokio::test]
async fn consent_does_not_tell_whether_a_component_of_the_asked_path_exists() {
    let f = Fixture::new();
    f.dir("pub");
    f.dir("private_plans");
    let b = rules_broker(&f, "");
    let there = consent(&b, "project/private_plans/pub").await;
    let missing = consent(&b, "project/nothing_here/pub").await;
    assert_eq!(there["granted"], missing["granted"], "{there} {missing}");
    assert_eq!(there["granted"], false, "{there}");
}

/// Consent on `project/zzz/docs` (zzz missing) is about that path, never about `project/docs`:
/// a rule allowing `project/docs` does not approve it, and the provider is never asked about
/// `project/docs`.
#[tokio::test]
async fn consent_on_a_missing_path_is_about_that_path_not_a_shorter_one() {
    let f = Fixture::new();
    f.dir("docs");
    let b = f.broker_with(
        "write",
        "[consent]\nmode = \"deny\"\n[[consent.rules]]\npaths = [\"project/docs\"]\ndecision = \"allow\"\n",
    );
    let r = consent(&b, "project/zzz/docs").await;
    assert_eq!(r["granted"], false, "{r}");
    // Nothing under zzz became writable or readable.
    std::fs::create_dir_all(f.root.join("zzz/docs")).unwrap();
    let w = call(
        &b,
        "s",
        "files/write",
        json!({"path": "project/zzz/docs/f", "content": "x"}),
    )
    .await;
    assert_eq!(err(&w).2, "no_consent", "{w}");
    assert!(!f.root.join("zzz/docs/f").exists());
}

/// Where the policy would grant a place on request anyway (mode `auto`, an allow rule), or a
/// grant already reaches, consent still follows a link there: it shows and grants the real
/// place.
#[tokio::test]
async fn consent_still_follows_links_where_the_policy_or_a_grant_opens_the_place() {
    // Mode auto: any place could be had by asking for it.
    let f = Fixture::new();
    f.file("pub/inner/t.txt", "x");
    f.symlink("inner", "pub/alias");
    let b = f.broker_with("write", "");
    let r = consent(&b, "project/pub/alias").await;
    assert_eq!(r["granted"], true, "{r}");
    let read = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/pub/inner/t.txt"}),
    )
    .await;
    assert_eq!(ok(&read)["content"], "x");

    // Rules: a link from `pub` to `lib`, which the session already holds a grant for.
    let f = Fixture::new();
    f.dir("pub");
    f.file("lib/t.txt", "y");
    f.symlink("../lib", "pub/lib");
    let b = f.broker_with(
        "write",
        "[consent]\nmode = \"deny\"\n[[consent.rules]]\npaths = [\"project/pub\", \"project/lib\"]\ndecision = \"allow\"\n",
    );
    let r = consent(&b, "project/pub/lib").await;
    assert_eq!(r["granted"], true, "{r}");
    let read = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/pub/lib/t.txt"}),
    )
    .await;
    assert_eq!(ok(&read)["content"], "y");
}
