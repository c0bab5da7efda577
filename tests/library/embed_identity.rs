//! Who is asking, through the library: a host opens each session with the identity of the
//! server it runs (`Broker::open_session_as`); a grant pinned to one identity is not held by
//! another program of the same name, a suspension holds for the identity when its session
//! ends and another begins, and the policy's pin on a name refuses another program, or opens
//! it as an unknown server.

use crate::common::*;
use mcp_fsbroker::{Broker, Identity, Policy};
use serde_json::{Value, json};

/// A broker over the fixture's root with `extra` in its policy, and every limit out of the
/// way but the violations' threshold.
fn broker(f: &Fixture, extra: &str) -> Broker {
    let text = f.policy_text(
        "read",
        &format!(
            "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n\
             max_violations_per_minute = 3\n{extra}"
        ),
    );
    Broker::builder(Policy::parse(&text, "test").unwrap_or_else(|e| panic!("{e}")))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

async fn read(s: &mcp_fsbroker::broker::ServerSession, path: &str) -> Value {
    s.handle_message(json!({"jsonrpc": "2.0", "id": 1, "method": "files/read",
        "params": {"path": path}}))
        .await
        .unwrap_or_else(|| panic!("no answer"))
}

/// Asks consent for the whole root (granted under mode `auto`).
async fn consent(s: &mcp_fsbroker::broker::ServerSession) {
    let r = s
        .handle_message(json!({"jsonrpc": "2.0", "id": 0, "method": "files/consent",
            "params": {"requestedPaths": ["project"]}}))
        .await
        .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(r["result"]["granted"], true, "{r}");
}

#[tokio::test]
async fn a_grant_pinned_to_one_program_is_not_held_by_another_of_the_same_name() {
    let f = Fixture::new();
    f.file("a.txt", "alpha");
    let notes = Identity::of_host("plugin:notes@1.0.0");
    let impostor = Identity::of_host("plugin:impostor@6.6.6");
    let grant = format!(
        "[consent]\nmode = \"deny\"\n[[grants]]\npath = \"project\"\nservers = [\"notes\"]\n\
         identity = \"{}\"\n",
        notes.digest
    );
    let b = broker(&f, &grant);
    {
        let (s, _n) = b.open_session_as("notes", notes.clone()).unwrap();
        assert_eq!(
            read(&s, "project/a.txt").await["result"]["content"],
            "alpha"
        );
        assert_eq!(s.snapshot().identity.as_ref(), Some(&notes));
    }
    let (s, _n) = b.open_session_as("notes", impostor).unwrap();
    let r = read(&s, "project/a.txt").await;
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    drop(s);
    // A session of no identity holds no grant pinned to one.
    let (s, _n) = b.open_session("notes").unwrap();
    let r = read(&s, "project/a.txt").await;
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
}

#[tokio::test]
async fn a_suspension_holds_for_the_program_across_its_sessions_until_resumed() {
    let f = Fixture::new();
    f.file("a.txt", "alpha");
    let b = broker(&f, "[consent]\nmode = \"auto\"\n");
    let probe = Identity::of_host("plugin:probe@1");
    {
        let (s, _n) = b.open_session_as("probe", probe.clone()).unwrap();
        for _ in 0..3 {
            read(&s, "/etc/passwd").await;
        }
        assert!(s.snapshot().suspended.is_some());
    }
    // Ended and started again, under the same name or another: still suspended.
    for name in ["probe", "renamed"] {
        let (s, _n) = b.open_session_as(name, probe.clone()).unwrap();
        let r = read(&s, "project/a.txt").await;
        assert_eq!(r["error"]["data"]["reason"], "suspended", "{name}: {r}");
    }
    // Another program is not.
    let (other, _n) = b
        .open_session_as("other", Identity::of_host("plugin:other@1"))
        .unwrap();
    consent(&other).await;
    assert_eq!(
        read(&other, "project/a.txt").await["result"]["content"],
        "alpha"
    );
    drop(other);
    // The user resumes it; its next session starts clean.
    let (s, _n) = b.open_session_as("probe", probe.clone()).unwrap();
    assert!(b.resume("probe").unwrap());
    drop(s);
    let (s, _n) = b.open_session_as("probe", probe).unwrap();
    consent(&s).await;
    assert_eq!(
        read(&s, "project/a.txt").await["result"]["content"],
        "alpha"
    );
}

#[tokio::test]
async fn a_pinned_name_refuses_another_program_or_opens_it_as_unknown() {
    let f = Fixture::new();
    f.file("a.txt", "alpha");
    let notes = Identity::of_host("plugin:notes@1.0.0");
    let pin = format!(
        "[consent]\nmode = \"deny\"\n[[grants]]\npath = \"project\"\nservers = [\"notes\"]\n\
         [[servers]]\nname = \"notes\"\ndigest = \"{}\"\n",
        &notes.digest[..16]
    );
    let b = broker(&f, &pin);
    let e = b
        .open_session_as("notes", Identity::of_host("plugin:impostor@1"))
        .err()
        .unwrap_or_else(|| panic!("an impostor was let in"));
    assert!(e.to_string().contains("pins the server name"), "{e}");
    assert!(b.open_session("notes").is_err(), "no identity is no match");
    let (s, _n) = b.open_session_as("notes", notes).unwrap();
    assert_eq!(
        read(&s, "project/a.txt").await["result"]["content"],
        "alpha"
    );
    drop(s);

    let b = broker(&f, &format!("{pin}otherwise = \"unknown\"\n"));
    let (s, _n) = b
        .open_session_as("notes", Identity::of_host("plugin:impostor@1"))
        .unwrap();
    assert_eq!(s.server_id(), "unpinned-notes");
    let r = read(&s, "project/a.txt").await;
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
}

#[test]
fn a_pin_that_pins_nothing_or_too_little_of_a_digest_is_refused_at_load() {
    for (pin, says) in [
        ("[[servers]]\nname = \"n\"\n", "pins nothing"),
        (
            "[[servers]]\nname = \"n\"\ndigest = \"abc\"\n",
            "at least 12",
        ),
        (
            "[[servers]]\nname = \"n\"\ndigest = \"abcdefabcdef\"\n[[servers]]\nname = \"n\"\ndigest = \"abcdefabcdef\"\n",
            "pinned twice",
        ),
    ] {
        let e = Policy::parse(pin, "test")
            .err()
            .unwrap_or_else(|| panic!("loaded: {pin}"));
        assert!(e.to_string().contains(says), "{e}");
    }
}
