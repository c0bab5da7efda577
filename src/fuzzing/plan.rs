//! The oracle of operation plans: arbitrary sequences of every method, run against a fresh
//! tree with escaping links and a canary outside the root, which must stay unchanged and
//! unseen.

use super::{check_response, runtime};
use crate::{Broker, Policy};
use serde_json::json;
use std::path::{Path, PathBuf};
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
    /// The recovery store of the plan's broker: beside the root, where what the broker keeps
    /// may change, and must never hold what lies outside the root.
    fn store(&self) -> PathBuf {
        self.base.join("store")
    }

    fn outside_snapshot(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        snapshot(
            &self.base,
            &[self.base.join("project"), self.store()],
            &mut out,
        );
        out.sort();
        out
    }

    /// Everything but the granted areas `project/sub` and `project/w`.
    fn ungranted_snapshot(&self) -> Vec<(PathBuf, String)> {
        let project = self.base.join("project");
        let mut out = Vec::new();
        snapshot(
            &self.base,
            &[project.join("sub"), project.join("w"), self.store()],
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
/// notification carries canary content, the recovery store holds none, and every error has a
/// documented code. The first byte picks the grants: the whole root, or only `sub` and `w`
/// (consent for anything else is denied by rule), in which case nothing else in the root may
/// change or be seen either.
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
    let Ok(policy) = Policy::parse(&policy_text(grant, &tree), "fuzz") else {
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
        let mut plan = Plan {
            bytes: data.iter(),
            project: tree.base.join("project"),
        };
        plan.run(&broker, grant).await;
        check_notifications(&mut rx, grant);
        broker.end_session("fuzz");
    });
    assert_eq!(snap(&tree), before, "a place without a grant changed");
    let mut kept = Vec::new();
    snapshot(&tree.store(), &[], &mut kept);
    for (path, what) in kept {
        assert!(
            !what.contains("CANARY"),
            "the store kept outside content: {path:?}"
        );
    }
}

/// The policy of a plan: `tree`'s project as the one writable root, consent as `grant` says,
/// no audit, limits no plan reaches, and the recovery store beside the root.
fn policy_text(grant: Grant, tree: &Tree) -> String {
    let consent = match grant {
        Grant::Whole => "[consent]\nmode = \"auto\"\n",
        Grant::Areas => {
            "[consent]\nmode = \"deny\"\n[[consent.rules]]\npaths = [\"project/sub\", \"project/w\"]\n\
             decision = \"allow\"\n"
        }
    };
    format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"write\"\n{consent}\
         [audit]\nenabled = false\n[limits]\nrequests_per_second = 1000000\nburst = 1000000\ntimeout_ms = 5000\n\
         max_violations_per_minute = 1000000\n[recovery]\ndir = {:?}\n",
        tree.base.join("project"),
        tree.store()
    )
}

/// The rest of a plan's bytes, read one at a time as operations and the paths they name; a
/// plan that runs out of bytes ends (or names shorter paths).
struct Plan<'a> {
    bytes: std::slice::Iter<'a, u8>,
    /// The root on disk, for the moves made behind the broker's back.
    project: PathBuf,
}

impl Plan<'_> {
    fn next(&mut self) -> Option<u8> {
        self.bytes.next().copied()
    }

    /// Runs up to 63 operations through `broker`, checking each response.
    #[expect(
        clippy::panic,
        reason = "an oracle reports a broken promise by panicking: that is how a fuzzer or a test sees it"
    )]
    async fn run(&mut self, broker: &Broker, grant: Grant) {
        for id in 1..64 {
            let Some(op) = self.next() else { break };
            if op % 13 == 12 {
                self.swap_behind();
                continue;
            }
            let (method, params) = self.request(op);
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
    }

    /// Behind the broker's back, as a server's own tool could: swaps a granted directory with
    /// a link to an ungranted one (or back).
    fn swap_behind(&mut self) {
        let a = if self.next().is_some_and(|b| b % 2 == 0) {
            "sub/tosecret"
        } else {
            "w/up"
        };
        let b = if self.next().is_some_and(|b| b % 2 == 0) {
            "w/d"
        } else {
            "sub/new"
        };
        let (a, b) = (self.project.join(a), self.project.join(b));
        let _ = rustix::fs::renameat_with(
            rustix::fs::CWD,
            &a,
            rustix::fs::CWD,
            &b,
            rustix::fs::RenameFlags::EXCHANGE,
        );
    }

    /// The method and params of operation `op`, its paths read from the plan.
    fn request(&mut self, op: u8) -> (&'static str, serde_json::Value) {
        match op % 13 {
            0 => ("files/read", json!({"path": self.path()})),
            1 => ("files/stat", json!({"path": self.path()})),
            2 => (
                "files/list",
                json!({"path": self.path(), "recursive": true, "includeHidden": true}),
            ),
            3 => (
                "files/write",
                json!({"path": self.path(), "content": "fuzz"}),
            ),
            4 => (
                "files/create",
                json!({"path": self.path(), "type": "directory", "parents": true}),
            ),
            5 => (
                "files/delete",
                json!({"path": self.path(), "recursive": true}),
            ),
            6 => (
                "files/rename",
                json!({"oldPath": self.path(), "newPath": self.path(), "overwrite": true}),
            ),
            7 => (
                "files/watch",
                json!({"path": self.path(), "recursive": self.next().is_some_and(|b| b % 2 == 0)}),
            ),
            9 => (
                "files/write",
                json!({"path": self.path(), "content": "fuzz", "final": false}),
            ),
            10 => (
                "files/write",
                json!({"path": self.path(), "content": "more", "offset": 4, "final": true}),
            ),
            11 => (
                "files/create",
                json!({"path": self.path(), "type": "file", "parents": true}),
            ),
            _ => ("files/consent", json!({"requestedPaths": [self.path()]})),
        }
    }

    /// A path from the plan: mounted (`project/...`), absolute on disk, or bare, then up to
    /// five tokens (a byte of 255 is a 300-byte name).
    fn path(&mut self) -> String {
        let mut p = String::new();
        if self.next().is_some_and(|b| b % 4 != 0) {
            p.push_str("project/");
        } else if self.next().is_some_and(|b| b % 2 == 0) {
            p.push_str(&self.project.to_string_lossy());
            p.push('/');
        }
        let n = self.next().map_or(1, |b| b % 6);
        for i in 0..n {
            if i > 0 {
                p.push('/');
            }
            match self.next() {
                Some(255) => p.push_str(&"x".repeat(300)),
                Some(b) => p.push_str(TOKENS[usize::from(b) % TOKENS.len()]),
                None => {}
            }
        }
        p
    }
}

/// Notifications that arrived while the plan ran name only granted places, and carry no
/// canary content.
fn check_notifications(rx: &mut crate::Notifications, grant: Grant) {
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
}
