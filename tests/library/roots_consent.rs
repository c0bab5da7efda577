//! `consent.roots = "ask"`: `roots/list` shows a server only the roots the user let it see
//! (asked once per root and session, purpose `roots`), and those it holds a grant in; with
//! the default, every root at once.

use crate::common::Fixture;
use mcp_fsbroker::consent::{self, ConsentDecision, Purpose};
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;
use std::sync::{Arc, Mutex};

/// What a provider was asked: the server, the purpose, the paths.
type Asked = Arc<Mutex<Vec<(String, Purpose, Vec<String>)>>>;

fn policy(f: &Fixture, extra: &str) -> Policy {
    let a = f.dir("a");
    let b = f.dir("b");
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"a\"\n[[roots]]\npath = {:?}\nmount = \"b\"\n{extra}",
        a.display().to_string(),
        b.display().to_string()
    );
    Policy::parse(&text, "test").unwrap()
}

async fn names(broker: &Broker, server: &str) -> Vec<String> {
    let r = broker
        .handle_message(
            server,
            json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}),
        )
        .await
        .unwrap();
    r["result"]["roots"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A provider that approves mount `a` only, and keeps what it was asked.
fn only_a(asked: Asked) -> Arc<dyn consent::ConsentProvider> {
    consent::from_fn(move |req| {
        asked.lock().unwrap().push((
            req.server_id.clone(),
            req.purpose,
            req.paths.iter().map(ToString::to_string).collect(),
        ));
        async move {
            let approved = req.paths.iter().filter(|p| p.to_string() == "a").cloned();
            ConsentDecision::new(approved, req.access)
        }
    })
}

#[tokio::test]
async fn with_ask_a_server_sees_only_the_roots_the_user_let_it_see_asked_once() {
    let f = Fixture::new();
    let asked = Arc::default();
    let standing = "[consent]\nroots = \"ask\"\n[[grants]]\nservers = [\"g\"]\npath = \"b\"\naccess = \"read\"\n";
    let (broker, _n) = Broker::builder(policy(&f, standing))
        .consent_provider(only_a(Arc::clone(&asked)))
        .build()
        .unwrap();
    assert_eq!(names(&broker, "s").await, ["a"]);
    assert_eq!(names(&broker, "s").await, ["a"], "asked again, or changed");
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0].1, Purpose::SeeRoots);
        assert_eq!(asked[0].2, ["a", "b"]);
    }
    // Seeing a root grants nothing in it.
    let r = broker
        .handle_message(
            "s",
            json!({"jsonrpc": "2.0", "id": 2, "method": "files/list",
                                    "params": {"path": "a"}}),
        )
        .await
        .unwrap();
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    // A standing grant in b shows b; a is asked about for this session.
    assert_eq!(names(&broker, "g").await, ["a", "b"]);
    assert_eq!(asked.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn by_default_every_root_is_shown_and_nobody_is_asked() {
    let f = Fixture::new();
    let asked: Asked = Arc::default();
    let (broker, _n) = Broker::builder(policy(&f, ""))
        .consent_provider(only_a(Arc::clone(&asked)))
        .build()
        .unwrap();
    assert_eq!(names(&broker, "s").await, ["a", "b"]);
    assert!(asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn with_ask_and_nobody_answering_no_root_is_shown() {
    let f = Fixture::new();
    let mut p = policy(&f, "[consent]\nroots = \"ask\"\ntimeout_secs = 1\n");
    p.consent.mode = Some(mcp_fsbroker::policy::ConsentMode::Deny);
    let (broker, _n) = Broker::builder(p).build().unwrap();
    let shown: Vec<String> = names(&broker, "s").await;
    assert!(shown.is_empty(), "{shown:?}");
}

/// The policy file in force decides what servers may do: a writable root that holds it
/// would let a server with write consent there rewrite its own grants, and the broker reload
/// them. Refused at start and at a reload; a read-only root may hold it.
#[test]
fn a_writable_root_may_not_hold_the_policy_file() {
    let f = Fixture::new();
    let file = f.root.join("fsbroker.toml");
    let text = |access: &str| {
        format!(
            "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"{access}\"\n",
            f.root.display().to_string()
        )
    };
    std::fs::write(&file, text("write")).unwrap();
    let e = Broker::builder(Policy::load(&file).unwrap())
        .build()
        .unwrap_err();
    assert!(
        e.to_string().contains("lies beneath the writable root"),
        "{e}"
    );
    std::fs::write(&file, text("read")).unwrap();
    let (broker, _n) = Broker::builder(Policy::load(&file).unwrap())
        .build()
        .unwrap();
    std::fs::write(&file, text("write")).unwrap();
    let e = broker.reload(Policy::load(&file).unwrap()).unwrap_err();
    assert!(
        e.to_string().contains("lies beneath the writable root"),
        "{e}"
    );
    assert_eq!(
        broker.roots().iter().next().unwrap().access(),
        mcp_fsbroker::Access::Read
    );
}

/// An answer is about a directory: a reload that mounts another directory under the name
/// asks again rather than showing it.
#[tokio::test]
async fn an_answer_does_not_carry_over_to_another_directory_of_the_same_name() {
    let f = Fixture::new();
    let asked: Asked = Arc::default();
    let (broker, _n) = Broker::builder(policy(&f, "[consent]\nroots = \"ask\"\n"))
        .consent_provider(only_a(Arc::clone(&asked)))
        .build()
        .unwrap();
    assert_eq!(names(&broker, "s").await, ["a"]);
    let other = f.dir("other");
    let moved = format!(
        "[[roots]]\npath = {:?}\nmount = \"a\"\n[consent]\nroots = \"ask\"\n",
        other.display().to_string()
    );
    broker
        .reload(Policy::parse(&moved, "test").unwrap())
        .unwrap();
    let before = asked.lock().unwrap().len();
    assert_eq!(names(&broker, "s").await, ["a"]);
    assert_eq!(
        asked.lock().unwrap().len(),
        before + 1,
        "not asked about the new directory"
    );
}
