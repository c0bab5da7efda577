//! The seed document's example messages (`/work/shared/seeds/004_*.txt`, "Protocol Messages"
//! and "Brokered Filesystem Operations"), each sent to a real `Broker` as written, and each
//! example answer compared with what the broker answers: every key the example shows must be
//! there with the example's value, except where docs/protocol.md ("The seed's examples") says
//! why not.
//!
//! The `files/*` examples name `project/...`: they work as written with a root mounted as
//! `project`. The consent and `roots/list` examples name host paths under `/home/user`, which
//! this machine need not have: the root is made in a temporary directory `T`, and `/home/user`
//! in the example (request and answer alike) is replaced by `T` and nothing else.

use crate::common::wire::is_rfc3339_utc;
use crate::common::*;
use mcp_fsbroker::{Broker, Notifications, Policy};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an expected change notification may take (generous: only its arrival matters).
const EXPECT: Duration = Duration::from_secs(30);

/// The seed's `files/consent` request, as written.
const CONSENT: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/consent",
  "params": {
    "message": "Server requests access to project files for analysis",
    "requestedPaths": ["/home/user/project", "/home/user/config.json"]
  },
  "id": 1
}"#;

/// The seed's answer to it.
const CONSENT_ANSWER: &str = r#"{
  "jsonrpc": "2.0",
  "result": {
    "granted": true,
    "approvedPaths": ["/home/user/project"]
  },
  "id": 1
}"#;

const ROOTS_LIST: &str = r#"{
  "jsonrpc": "2.0",
  "id": 1,
  "method": "roots/list"
}"#;

const ROOTS_LIST_ANSWER: &str = r#"{
  "jsonrpc": "2.0",
  "id": 1,
  "result": {
    "roots": [
      {
        "uri": "file:///home/user/projects/myproject",
        "name": "My Project"
      }
    ]
  }
}"#;

const READ: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/read",
  "params": {
    "path": "project/src/main.py",
    "encoding": "utf-8",
    "offset": 0,
    "length": 1048576
  },
  "id": 1
}"#;

const READ_ANSWER: &str = r##"{
  "jsonrpc": "2.0",
  "result": {
    "content": "# Python file contents...",
    "size": 1234,
    "mimeType": "text/x-python"
  },
  "id": 1
}"##;

const WRITE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/write",
  "params": {
    "path": "project/output.txt",
    "content": "Hello, World!",
    "encoding": "utf-8",
    "create": true
  },
  "id": 2
}"#;

const LIST: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/list",
  "params": {
    "path": "project/src",
    "recursive": false,
    "includeHidden": false
  },
  "id": 3
}"#;

const CREATE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/create",
  "params": {
    "path": "project/new_directory",
    "type": "directory"
  },
  "id": 4
}"#;

const DELETE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/delete",
  "params": {
    "path": "project/temp_file.txt"
  },
  "id": 5
}"#;

const RENAME: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/rename",
  "params": {
    "oldPath": "project/old_name.txt",
    "newPath": "project/new_name.txt"
  },
  "id": 6
}"#;

const WATCH: &str = r#"{
  "jsonrpc": "2.0",
  "method": "files/watch",
  "params": {
    "path": "project/src",
    "recursive": true,
    "events": ["modified", "created", "deleted"]
  },
  "id": 7
}"#;

const CHANGED: &str = r#"{
  "jsonrpc": "2.0",
  "method": "notifications/files/changed",
  "params": {
    "path": "project/src/main.py",
    "event": "modified",
    "timestamp": "2025-10-30T15:30:00Z"
  }
}"#;

/// The server id every example is sent as.
const S: &str = "seed-server";

/// A temporary `T` standing for the seed's `/home/user`, with the root `T/project` (mount
/// `project`, writable, consent `auto`) holding the files the examples name.
struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let home = Home {
            tmp: tempfile::tempdir().unwrap(),
        };
        let project = home.path().join("project");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("src/main.py"), "# Python file contents...").unwrap();
        std::fs::write(project.join("temp_file.txt"), "temporary").unwrap();
        std::fs::write(project.join("old_name.txt"), "renamed").unwrap();
        std::fs::write(home.path().join("config.json"), "{}").unwrap();
        home
    }

    /// `T`, canonical, so that it is the path the broker compares absolute requests with.
    fn path(&self) -> PathBuf {
        self.tmp.path().canonicalize().unwrap()
    }

    /// The seed's text with `/home/user` replaced by `T`, parsed.
    fn here(&self, seed: &str) -> Value {
        let t = self.path();
        let t = t.to_str().unwrap();
        serde_json::from_str(&seed.replace("/home/user", t)).unwrap()
    }

    fn broker(&self, roots: &str) -> (Broker, Notifications) {
        let text = format!("{roots}\n[audit]\nenabled = false\n\n[consent]\nmode = \"auto\"\n");
        Broker::builder(Policy::parse(&text, "seed").unwrap())
            .build()
            .unwrap()
    }

    /// The broker for the `files/*` examples, after the seed's consent example was answered
    /// as the seed says.
    async fn consented(&self) -> (Broker, Notifications) {
        let (b, rx, _) = self.consent().await;
        (b, rx)
    }

    /// As [`Home::consented`], with the broker's answer to the consent example.
    async fn consent(&self) -> (Broker, Notifications, Value) {
        let root = self.path().join("project");
        let (b, rx) = self.broker(&format!(
            "[[roots]]\npath = {root:?}\nmount = \"project\"\naccess = \"write\"\n"
        ));
        let answer = send(&b, self.here(CONSENT)).await;
        assert_shows(&answer, &self.here(CONSENT_ANSWER), &[]);
        (b, rx, answer)
    }

    fn project(&self) -> PathBuf {
        self.path().join("project")
    }
}

/// Sends one example message and returns the broker's answer.
async fn send(b: &Broker, message: Value) -> Value {
    b.handle_message(S, message)
        .await
        .expect("a request gets an answer")
}

/// Asserts that `got` has every key of `example` (objects compared key by key, recursively)
/// with the example's value, except the top-level result keys named in `unless`.
fn assert_shows(got: &Value, example: &Value, unless: &[&str]) {
    fn walk(got: &Value, example: &Value, at: &str, unless: &[&str], whole: &Value) {
        match example {
            Value::Object(keys) => {
                for (k, v) in keys {
                    let here = format!("{at}.{k}");
                    if unless.contains(&here.as_str()) {
                        continue;
                    }
                    let Some(g) = got.get(k) else {
                        panic!("{here} is missing from {whole}");
                    };
                    walk(g, v, &here, unless, whole);
                }
            }
            Value::Array(items) => {
                let Some(g) = got.as_array() else {
                    panic!("{at} is not a list in {whole}");
                };
                assert_eq!(g.len(), items.len(), "{at} in {whole}");
                for (i, (g, e)) in g.iter().zip(items).enumerate() {
                    walk(g, e, &format!("{at}[{i}]"), unless, whole);
                }
            }
            _ => assert_eq!(got, example, "{at} in {whole}"),
        }
    }
    walk(got, example, "", unless, got);
}

fn parse(seed: &str) -> Value {
    serde_json::from_str(seed).unwrap()
}

#[tokio::test]
async fn consent_echoes_the_paths_as_sent_and_denies_the_one_outside_every_root() {
    let home = Home::new();
    // Beyond the seed's keys: the path outside every root is denied as sent, and the approved
    // one's mount form is given for the other methods.
    let (_b, _rx, got) = home.consent().await;
    let t = home.path();
    let t = t.to_str().unwrap();
    assert_eq!(
        ok(&got)["deniedPaths"],
        json!([format!("{t}/config.json")]),
        "{got}"
    );
    assert_eq!(
        ok(&got)["mountPaths"],
        json!({format!("{t}/project"): "project"}),
        "{got}"
    );
}

#[tokio::test]
async fn consent_by_file_uri_echoes_the_uri() {
    let home = Home::new();
    let (b, _rx) = home.consented().await;
    let t = home.path();
    let t = t.to_str().unwrap();
    let uri = format!("file://{t}/project/src");
    let outside = format!("file://{t}/config.json");
    let got = send(
        &b,
        json!({"jsonrpc": "2.0", "id": 2, "method": "files/consent",
            "params": {"requestedPaths": [uri, outside]}}),
    )
    .await;
    assert_eq!(ok(&got)["approvedPaths"], json!([uri]), "{got}");
    assert_eq!(ok(&got)["deniedPaths"], json!([outside]), "{got}");
    assert_eq!(ok(&got)["mountPaths"], json!({uri: "project/src"}), "{got}");
}

#[tokio::test]
async fn roots_list() {
    let home = Home::new();
    let root = home.path().join("projects/myproject");
    std::fs::create_dir_all(&root).unwrap();
    let (b, _rx) = home.broker(&format!(
        "[[roots]]\npath = {root:?}\nmount = \"myproject\"\nname = \"My Project\"\n"
    ));
    let got = send(&b, parse(ROOTS_LIST)).await;
    assert_shows(&got, &home.here(ROOTS_LIST_ANSWER), &[]);
}

#[tokio::test]
async fn read() {
    let home = Home::new();
    let (b, _rx) = home.consented().await;
    let got = send(&b, parse(READ)).await;
    // The example's size (1234) is not the length of its content; its mimeType is shown as
    // written.
    assert_shows(&got, &parse(READ_ANSWER), &[".result.size"]);
    assert_eq!(ok(&got)["size"], "# Python file contents...".len(), "{got}");
}

#[tokio::test]
async fn write() {
    let home = Home::new();
    let (b, _rx) = home.consented().await;
    let got = send(&b, parse(WRITE)).await;
    assert_eq!(ok(&got)["path"], "project/output.txt", "{got}");
    assert_eq!(got["id"], 2, "{got}");
    let written = std::fs::read_to_string(home.project().join("output.txt")).unwrap();
    assert_eq!(written, "Hello, World!");
}

#[tokio::test]
async fn list() {
    let home = Home::new();
    std::fs::write(home.project().join("src/.hidden"), "h").unwrap();
    std::fs::create_dir_all(home.project().join("src/pkg")).unwrap();
    std::fs::write(home.project().join("src/pkg/deep.py"), "d").unwrap();
    let (b, _rx) = home.consented().await;
    let got = send(&b, parse(LIST)).await;
    assert_eq!(got["id"], 3, "{got}");
    let paths: Vec<&str> = ok(&got)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["project/src/main.py", "project/src/pkg"], "{got}");
}

#[tokio::test]
async fn create() {
    let home = Home::new();
    let (b, _rx) = home.consented().await;
    let got = send(&b, parse(CREATE)).await;
    assert_eq!(
        ok(&got),
        &json!({"path": "project/new_directory", "type": "directory"}),
        "{got}"
    );
    assert!(home.project().join("new_directory").is_dir());
}

#[tokio::test]
async fn delete() {
    let home = Home::new();
    let (b, _rx) = home.consented().await;
    let got = send(&b, parse(DELETE)).await;
    assert_eq!(ok(&got), &json!({"path": "project/temp_file.txt"}), "{got}");
    assert!(!home.project().join("temp_file.txt").exists());
}

#[tokio::test]
async fn rename() {
    let home = Home::new();
    let (b, _rx) = home.consented().await;
    let got = send(&b, parse(RENAME)).await;
    assert_eq!(
        ok(&got),
        &json!({"oldPath": "project/old_name.txt", "newPath": "project/new_name.txt"}),
        "{got}"
    );
    let renamed = std::fs::read_to_string(home.project().join("new_name.txt")).unwrap();
    assert_eq!(renamed, "renamed");
    assert!(!home.project().join("old_name.txt").exists());
}

#[tokio::test]
async fn watch_and_the_change_notification() {
    let home = Home::new();
    let (b, mut rx) = home.consented().await;
    let got = send(&b, parse(WATCH)).await;
    let id = ok(&got)["watchId"].as_str().expect("watchId").to_owned();
    append(&home.project().join("src/main.py"));
    let example = parse(CHANGED);
    let deadline = tokio::time::Instant::now() + EXPECT;
    loop {
        let m = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("the seed's change notification within the bound")
            .expect("the broker is still there");
        assert_eq!(m.server_id, S);
        let n = m.message.clone();
        drop(m);
        if n["params"]["path"] == example["params"]["path"]
            && n["params"]["event"] == example["params"]["event"]
        {
            // The example's timestamp is an example; the form is what must match.
            assert_shows(&n, &example, &[".params.timestamp"]);
            assert!(
                is_rfc3339_utc(n["params"]["timestamp"].as_str().unwrap()),
                "{n}"
            );
            assert_eq!(n["params"]["watchId"], id.as_str(), "{n}");
            break;
        }
    }
}

/// Changes a file in place, as an editor that does not replace files would.
fn append(p: &Path) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
    f.write_all(b"\nprint('changed')\n").unwrap();
}
