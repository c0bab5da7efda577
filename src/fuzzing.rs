//! Fuzz oracles, shared by the cargo-fuzz targets in `fuzz/` and by `cargo test`, which replays
//! every committed corpus file through them. An oracle fails by assertion: that is its job.
//! Nothing here runs on a peer's input in the broker itself.
#![allow(clippy::panic)]

use crate::path::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES, RequestPath};
use crate::{Broker, Policy};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Parses arbitrary bytes as a request path and checks what an accepted path promises: every
/// component is non-empty, not `.` or `..`, free of `/`, NUL, control characters and
/// backslashes, and within the length limits; a mount-form path never climbs above its mount.
pub fn request_path(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = RequestPath::parse(text) else {
        return;
    };
    assert!(text.len() <= MAX_PATH_BYTES);
    let components: Vec<&String> = match &parsed {
        RequestPath::Mount { mount, rel } => {
            std::iter::once(mount).chain(rel.components()).collect()
        }
        RequestPath::Absolute(c) => c.iter().collect(),
    };
    for c in components {
        assert!(
            !c.is_empty() && c != "." && c != "..",
            "bad component {c:?}"
        );
        assert!(c.len() <= MAX_COMPONENT_BYTES);
        assert!(!c.contains(['/', '\\', '\0']));
        assert!(!c.chars().any(char::is_control));
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("cannot start a runtime: {e}"),
        }
    })
}

/// The codes an error may carry: the JSON-RPC ones and the filesystem table.
fn documented(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602 | -32603) || (-31012..=-31001).contains(&code)
}

/// Checks one response object: JSON-RPC 2.0, an id, exactly one of result and error, and a
/// documented error code.
fn check_response(v: &Value) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(v.get("id").is_some(), "{v}");
    assert!(v.get("result").is_some() != v.get("error").is_some(), "{v}");
    if let Some(e) = v.get("error") {
        let code = e["code"].as_i64().unwrap_or(0);
        assert!(documented(code), "undocumented code in {v}");
        assert!(e["message"].is_string(), "{v}");
    }
}

/// Sends arbitrary bytes as one line to a broker and checks that the answer is nothing or a
/// well-formed response (or a batch of them, never over the line limit), and that the session
/// still answers afterwards. The same bytes are then sent again as an item of a batch, between
/// two ordinary items, since a batch item must be judged exactly as a single line is.
pub fn jsonrpc(data: &[u8]) {
    jsonrpc_line(data);
    let mut batch = br#"[{"jsonrpc":"2.0","id":"b1","method":"ping"},"#.to_vec();
    batch.extend_from_slice(data);
    batch.extend_from_slice(br#",{"jsonrpc":"2.0","method":"notifications/x"}]"#);
    jsonrpc_line(&batch);
}

fn jsonrpc_line(data: &[u8]) {
    static BROKER: OnceLock<Broker> = OnceLock::new();
    let broker = BROKER.get_or_init(|| {
        let text = "[consent]\nmode = \"deny\"\n[audit]\nenabled = false\n\
                    [limits]\nrequests_per_second = 1000000\nburst = 1000000\n";
        let built = Policy::parse(text, "fuzz")
            .map_err(|e| e.to_string())
            .and_then(|p| {
                runtime().block_on(async { Broker::builder(p).build().map_err(|e| e.to_string()) })
            });
        match built {
            Ok((b, _)) => b,
            Err(e) => panic!("{e}"),
        }
    });
    proxy_peek(data);
    runtime().block_on(async {
        if let Some(out) = broker.handle_line("fuzz", data).await {
            let v: Value = match serde_json::from_slice(&out) {
                Ok(v) => v,
                Err(e) => panic!("response is not json: {e}"),
            };
            match &v {
                Value::Array(items) => {
                    assert!(!items.is_empty());
                    let limit = broker.policy().limits.max_line_bytes.get();
                    assert!(out.len() <= limit, "a batch's answer passed the line limit");
                    items.iter().for_each(check_response);
                }
                other => check_response(other),
            }
        }
        let ping = broker
            .handle_line("fuzz", br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#)
            .await;
        assert!(ping.is_some(), "session stopped answering");
    });
}

/// The proxy's cheap look at a line agrees with a full decode: whatever the broker would take
/// as a request with some method, the proxy sees as that request. And what the proxy would
/// relay from a server to its host is UTF-8 JSON that holds no `roots/list` or `files/*`
/// message, however leniently the host reads it.
fn proxy_peek(data: &[u8]) {
    proxy_relay(data);
    use crate::jsonrpc::{Item, Message, decode};
    use crate::proxy::{Kind, peek};
    let seen = peek(data);
    if let Ok(Message::Single(Item::Request(r))) = decode(data, usize::MAX) {
        match &seen {
            Kind::Request { method, id } => {
                assert_eq!(method, &r.method);
                assert_eq!(id, r.id.as_value());
            }
            // A key named twice: the proxy reads no message there (and so never relays it to
            // a host), where the broker's decode takes the last duplicate.
            Kind::Other => {}
            other => panic!("peek saw {other:?} for a request to {}", r.method),
        }
    }
    if let Ok(Message::Batch(_)) = decode(data, usize::MAX) {
        assert_eq!(seen, Kind::Batch);
    }
}

/// What the proxy would relay to the host, read twice: by a reader that keeps the first of
/// two equal keys and by one that keeps the last (serde_json's `Value`). Both must see the
/// same message, and neither a brokered method in it.
fn proxy_relay(data: &[u8]) {
    let Some(out) = crate::proxy::host_part(data) else {
        return;
    };
    let text = match std::str::from_utf8(&out) {
        Ok(t) => t,
        Err(e) => panic!("relayed a line that is not utf-8: {e}"),
    };
    let last: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("relayed a line that is not json: {e}"),
    };
    let first = match serde_json::from_str::<FirstKeyWins>(text) {
        Ok(v) => v.0,
        Err(e) => panic!("relayed a line the first-key reader cannot read: {e}"),
    };
    assert_eq!(
        first, last,
        "two readers see two messages in what reaches the host: {text:.300}"
    );
    for reading in [first, last] {
        let items = match reading {
            Value::Array(items) => items,
            one => vec![one],
        };
        for item in &items {
            if let Some(method) = item.get("method").and_then(Value::as_str) {
                assert!(
                    !crate::method::is_brokered(method),
                    "relayed a brokered message to the host: {item}"
                );
            }
        }
    }
}

/// A JSON value read by a parser that keeps the first of two equal keys in an object, as some
/// hosts' parsers do (serde_json's `Value` keeps the last).
struct FirstKeyWins(Value);

impl<'de> serde::Deserialize<'de> for FirstKeyWins {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FirstKeyVisitor)
    }
}

struct FirstKeyVisitor;

impl<'de> serde::de::Visitor<'de> for FirstKeyVisitor {
    type Value = FirstKeyWins;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any json value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_unit<E>(self) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(Value::Null))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<FirstKeyWins, A::Error> {
        let mut items = Vec::new();
        while let Some(FirstKeyWins(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(FirstKeyWins(Value::Array(items)))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<FirstKeyWins, A::Error> {
        let mut obj = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let FirstKeyWins(v) = map.next_value()?;
            obj.entry(key).or_insert(v);
        }
        Ok(FirstKeyWins(Value::Object(obj)))
    }
}

/// A tree for [`ops_plan`]: `root/project` (the root) holding files, a subdirectory, an
/// escaping relative symlink, an escaping absolute symlink, a dangling symlink pointing
/// outside, and a FIFO; and `root/outside`, the canary, which must stay byte-for-byte the same.
/// Inside the root, `secret` holds a canary of its own, and `sub/tosecret` and `w/up` lead
/// there and to the root: in the plans that grant only `sub` and `w`, nothing outside those
/// two may change or be seen.
struct Tree {
    base: PathBuf,
}

impl Tree {
    fn new() -> std::io::Result<Tree> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(std::io::Error::other)?;
        let base = std::env::temp_dir().join(format!(
            "fsbroker-fuzz-{}-{:016x}",
            std::process::id(),
            u64::from_le_bytes(random)
        ));
        let project = base.join("project");
        let outside = base.join("outside");
        std::fs::create_dir_all(project.join("sub"))?;
        std::fs::create_dir_all(outside.join("deep"))?;
        std::fs::write(project.join("a"), "inside a")?;
        std::fs::write(project.join("sub/b"), "inside b")?;
        std::fs::write(outside.join("canary"), "CANARY-CONTENT")?;
        std::fs::write(outside.join("deep/canary2"), "CANARY-CONTENT-2")?;
        std::os::unix::fs::symlink("../outside", project.join("link"))?;
        std::os::unix::fs::symlink(&outside, project.join("abslink"))?;
        std::os::unix::fs::symlink("../outside/nothere", project.join("dangling"))?;
        std::fs::create_dir_all(project.join("secret/inner"))?;
        std::fs::create_dir_all(project.join("w/d"))?;
        std::fs::write(project.join("secret/s"), "SECRET-IN-ROOT")?;
        std::fs::write(project.join("secret/inner/t"), "SECRET-IN-ROOT-2")?;
        std::os::unix::fs::symlink("../secret", project.join("sub/tosecret"))?;
        std::os::unix::fs::symlink("..", project.join("w/up"))?;
        let fifo = rustix::fs::mknodat(
            rustix::fs::CWD,
            project.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        );
        fifo.map_err(std::io::Error::from)?;
        Ok(Tree { base })
    }

    /// Everything outside the root: paths, kinds and contents, to compare before and after.
    fn outside_snapshot(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        snapshot(&self.base, &[self.base.join("project")], &mut out);
        out.sort();
        out
    }

    /// Everything but the granted areas `project/sub` and `project/w`.
    fn ungranted_snapshot(&self) -> Vec<(PathBuf, String)> {
        let project = self.base.join("project");
        let mut out = Vec::new();
        snapshot(
            &self.base,
            &[project.join("sub"), project.join("w")],
            &mut out,
        );
        out.sort();
        out
    }
}

fn snapshot(dir: &Path, skip: &[PathBuf], out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if skip.contains(&p) {
            continue;
        }
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            out.push((p.clone(), "dir".into()));
            snapshot(&p, skip, out);
        } else {
            // Only regular files are read: opening the tree's FIFO would block.
            let body = if m.is_file() {
                std::fs::read(&p).unwrap_or_default()
            } else {
                Vec::new()
            };
            out.push((
                p,
                format!("{:?}:{}", m.file_type(), String::from_utf8_lossy(&body)),
            ));
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // The oracle's own scratch tree, created above; nothing a peer names.
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

const TOKENS: &[&str] = &[
    ".", "..", "a", "sub", "b", "link", "abslink", "dangling", "fifo", "new", "", "/", "\\", "\0",
    "é", "%2e%2e", "..%2f", "....", "outside", "canary", "project", "project2", "secret", "w",
    "tosecret", "up", "d", "inner", "s",
];

/// Whether a plan grants the whole root, or only `project/sub` and `project/w`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Grant {
    Whole,
    Areas,
}

/// Runs an arbitrary plan of operations (every method, chunked uploads, watches, and moves
/// made behind the broker's back; paths built from tokens such as `.`, `..`, `link`, `/`, `\`,
/// NUL, long names and Unicode) against a fresh tree with escaping and dangling symlinks and a
/// FIFO, and checks the oracle: the canary tree outside the root is unchanged, no response or
/// notification carries canary content, and every error has a documented code. The first byte
/// picks the grants: the whole root, or only `sub` and `w` (consent for anything else is
/// denied by rule), in which case nothing else in the root may change or be seen either.
pub fn ops_plan(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let grant = if first % 2 == 0 {
        Grant::Whole
    } else {
        Grant::Areas
    };
    let Ok(tree) = Tree::new() else { return };
    let snap = |t: &Tree| match grant {
        Grant::Whole => t.outside_snapshot(),
        Grant::Areas => t.ungranted_snapshot(),
    };
    let before = snap(&tree);
    let consent = match grant {
        Grant::Whole => "[consent]\nmode = \"auto\"\n",
        Grant::Areas => {
            "[consent]\nmode = \"deny\"\n[[consent.rules]]\npaths = [\"project/sub\", \"project/w\"]\n\
             decision = \"allow\"\n"
        }
    };
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"write\"\n{consent}\
         [audit]\nenabled = false\n[limits]\nrequests_per_second = 1000000\nburst = 1000000\ntimeout_ms = 5000\n",
        tree.base.join("project")
    );
    let Ok(policy) = Policy::parse(&text, "fuzz") else {
        return;
    };
    runtime().block_on(async {
        let Ok((broker, mut rx)) = Broker::builder(policy).build() else {
            return;
        };
        let asked = match grant {
            Grant::Whole => json!(["project"]),
            Grant::Areas => json!(["project/sub", "project/w"]),
        };
        let consent = json!({"jsonrpc": "2.0", "id": 0, "method": "files/consent",
            "params": {"requestedPaths": asked, "access": "write"}});
        broker.handle_message("fuzz", consent).await;
        let project = tree.base.join("project");
        let mut bytes = data.iter().copied();
        let mut next = move || bytes.next();
        for id in 1..64 {
            let Some(op) = next() else { break };
            let mut path = || {
                let mut p = String::new();
                if next().is_some_and(|b| b % 4 != 0) {
                    p.push_str("project/");
                } else if next().is_some_and(|b| b % 2 == 0) {
                    p.push_str(&tree.base.join("project").to_string_lossy());
                    p.push('/');
                }
                let n = next().map_or(1, |b| b % 6);
                for i in 0..n {
                    if i > 0 {
                        p.push('/');
                    }
                    match next() {
                        Some(255) => p.push_str(&"x".repeat(300)),
                        Some(b) => p.push_str(TOKENS[usize::from(b) % TOKENS.len()]),
                        None => {}
                    }
                }
                p
            };
            if op % 13 == 12 {
                // Behind the broker's back, as a server's own tool could: swap a granted
                // directory with a link to an ungranted one (or back).
                let a = project.join(if next().is_some_and(|b| b % 2 == 0) {
                    "sub/tosecret"
                } else {
                    "w/up"
                });
                let b = project.join(if next().is_some_and(|b| b % 2 == 0) {
                    "w/d"
                } else {
                    "sub/new"
                });
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                continue;
            }
            let (method, params) = match op % 13 {
                0 => ("files/read", json!({"path": path()})),
                1 => ("files/stat", json!({"path": path()})),
                2 => (
                    "files/list",
                    json!({"path": path(), "recursive": true, "includeHidden": true}),
                ),
                3 => ("files/write", json!({"path": path(), "content": "fuzz"})),
                4 => (
                    "files/create",
                    json!({"path": path(), "type": "directory", "parents": true}),
                ),
                5 => ("files/delete", json!({"path": path(), "recursive": true})),
                6 => (
                    "files/rename",
                    json!({"oldPath": path(), "newPath": path(), "overwrite": true}),
                ),
                7 => (
                    "files/watch",
                    json!({"path": path(), "recursive": next().is_some_and(|b| b % 2 == 0)}),
                ),
                9 => (
                    "files/write",
                    json!({"path": path(), "content": "fuzz", "final": false}),
                ),
                10 => (
                    "files/write",
                    json!({"path": path(), "content": "more", "offset": 4, "final": true}),
                ),
                11 => (
                    "files/create",
                    json!({"path": path(), "type": "file", "parents": true}),
                ),
                _ => ("files/consent", json!({"requestedPaths": [path()]})),
            };
            let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let Some(resp) = broker.handle_message("fuzz", req).await else {
                panic!("a request got no response");
            };
            check_response(&resp);
            let text = resp.to_string();
            assert!(!text.contains("CANARY"), "canary content leaked: {resp}");
            // With the whole root granted, `secret` is as readable as the rest.
            assert!(
                grant == Grant::Whole || !text.contains("SECRET-IN-ROOT"),
                "ungranted content leaked: {resp}"
            );
        }
        // Notifications that arrived meanwhile name only granted places.
        while let Ok(note) = rx.try_recv() {
            let text = note.message.to_string();
            assert!(!text.contains("CANARY"), "canary content notified: {text}");
            if note.message["method"] != "notifications/files/changed" {
                continue;
            }
            let path = note.message["params"]["path"].as_str().unwrap_or_default();
            let inside = match grant {
                Grant::Whole => path == "project" || path.starts_with("project/"),
                Grant::Areas => ["project/sub", "project/w"]
                    .iter()
                    .any(|a| path == *a || path.starts_with(&format!("{a}/"))),
            };
            assert!(
                inside,
                "a notification names a place without a grant: {text}"
            );
        }
        broker.end_session("fuzz");
    });
    assert_eq!(snap(&tree), before, "a place without a grant changed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_readers_differ_on_a_key_named_twice() {
        let text = r#"[{"method":"ping","id":1,"method":"roots/list","p":{"a":1,"a":2}}]"#;
        let first = serde_json::from_str::<FirstKeyWins>(text).map(|v| v.0).ok();
        let last = serde_json::from_str::<Value>(text).ok();
        assert_eq!(
            first,
            Some(json!([{"method": "ping", "id": 1, "p": {"a": 1}}]))
        );
        assert_eq!(
            last,
            Some(json!([{"method": "roots/list", "id": 1, "p": {"a": 2}}]))
        );
    }
}
