//! Recovery through the real binary: what a server's overwrite, upload commit, rename over an
//! entry and recursive delete destroy is kept, and `fsbroker restore` puts it back byte for
//! byte with its modes; a restore onto a place that changed since keeps what stood there;
//! `fsbroker history --json` tells each change as it happened. Every test has a store of its
//! own (`XDG_STATE_HOME`, or a policy's `recovery.dir`, in its temporary directory). The
//! helpers here serve `recovery_undo`, `recovery_other_fs` and `recovery_attacks` too.

use crate::common::*;
use crate::sidecar::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A test's own places: the root (mount `w`), the state directory the store is made in
/// (`XDG_STATE_HOME`), and a policy file holding a `[recovery]` section when one is given.
pub(crate) struct Rec {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub state: PathBuf,
    pub policy: Option<PathBuf>,
}

impl Rec {
    /// `<tmp>/w` as the root, the store in `<tmp>/state/fsbroker/recovery`.
    pub fn new() -> Rec {
        Rec::with(None, None)
    }

    /// `root` (else `<tmp>/w`) as the root; `recovery`, when given, is the body of the
    /// policy file's `[recovery]` section, given to every command.
    pub fn with(root: Option<PathBuf>, recovery: Option<&str>) -> Rec {
        let tmp = tempfile::tempdir().unwrap();
        let root = root.unwrap_or_else(|| tmp.path().join("w"));
        std::fs::create_dir_all(&root).unwrap();
        let state = tmp.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let policy = recovery.map(|body| {
            let p = tmp.path().join("policy.toml");
            std::fs::write(&p, format!("[recovery]\n{body}\n")).unwrap();
            p
        });
        Rec {
            tmp,
            root,
            state,
            policy,
        }
    }

    /// `fsbroker serve --root w=ROOT --writable --consent auto --server-id SERVER`, write
    /// consent on the whole root granted.
    pub fn serve(&self, server: &str) -> Sidecar {
        let mut args: Vec<OsString> = [
            "serve",
            "--consent",
            "auto",
            "--writable",
            "--no-audit",
            "--server-id",
            server,
        ]
        .map(OsString::from)
        .into();
        args.push(format!("--root=w={}", self.root.display()).into());
        if let Some(p) = &self.policy {
            args.extend(["--policy".into(), p.into()]);
        }
        let mut s = Sidecar::spawn_env(&args, &[("XDG_STATE_HOME", self.state.to_str().unwrap())]);
        let r = s.request(
            "files/consent",
            json!({"requestedPaths": ["w"], "access": "write"}),
        );
        assert_eq!(ok(&r)["granted"], true, "consent refused: {r}");
        s
    }

    /// `fsbroker ARGS... [--policy FILE]` to its end, with this test's state directory.
    pub fn run(&self, args: &[&str]) -> Ran {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(args).env("XDG_STATE_HOME", &self.state);
        if let Some(p) = &self.policy {
            cmd.arg("--policy").arg(p);
        }
        let ran = run_within(cmd, WAIT);
        assert!(
            ran.status.is_some(),
            "fsbroker {args:?} hung\n{}",
            ran.log()
        );
        ran
    }

    /// The stdout of `fsbroker ARGS...`, which must succeed.
    pub fn run_ok(&self, args: &[&str]) -> String {
        let ran = self.run(args);
        assert!(ran.success(), "fsbroker {args:?} failed\n{}", ran.log());
        String::from_utf8(ran.stdout).unwrap()
    }

    /// `fsbroker history --json EXTRA...`, parsed.
    pub fn history(&self, extra: &[&str]) -> Value {
        let mut args = vec!["history", "--json"];
        args.extend(extra);
        serde_json::from_str(&self.run_ok(&args)).unwrap()
    }

    /// The changes `fsbroker history --json` lists, oldest first.
    pub fn changes(&self) -> Vec<Value> {
        self.history(&[])["changes"].as_array().unwrap().clone()
    }

    /// The store's directory, as `history` names it.
    pub fn store(&self) -> PathBuf {
        PathBuf::from(self.history(&[])["store"].as_str().unwrap())
    }

    /// `fsbroker restore ID --json`, which must succeed: what it restored.
    pub fn restore(&self, id: &str) -> Value {
        let out = self.run_ok(&["restore", id, "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["restored"].clone()
    }
}

/// `n` bytes that differ with `seed` (xorshift), every byte value possible.
pub(crate) fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Writes `content` at `p` and sets its mode.
pub(crate) fn put(p: &Path, content: &[u8], mode: u32) {
    std::fs::write(p, content).unwrap();
    chmod(p, mode);
}

pub(crate) fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `files/write` of `content` (base64) at `path`, which must succeed.
pub(crate) fn write(s: &mut Sidecar, path: &str, content: &[u8]) -> Value {
    let r = s.request(
        "files/write",
        json!({"path": path, "content": STANDARD.encode(content), "encoding": "base64"}),
    );
    ok(&r).clone()
}

/// A chunked upload of `content` at `path` in `chunk`-byte pieces: `final: false` chunks at
/// increasing offsets, then the last with `final: true`. Answers the commit's result.
pub(crate) fn upload(s: &mut Sidecar, path: &str, content: &[u8], chunk: usize) -> Value {
    let pieces: Vec<&[u8]> = content.chunks(chunk).collect();
    assert!(pieces.len() > 1, "an upload of one piece is a plain write");
    let mut last = Value::Null;
    for (i, piece) in pieces.iter().enumerate() {
        let done = i + 1 == pieces.len();
        let r = s.request(
            "files/write",
            json!({"path": path, "content": STANDARD.encode(piece), "encoding": "base64",
                   "offset": i * chunk, "final": done}),
        );
        last = ok(&r).clone();
        assert_eq!(last.get("final") == Some(&json!(false)), !done, "{r}");
    }
    last
}

/// What a tree holds, by path under its top: each entry's kind, mode and content (a link's
/// target), links never followed.
pub(crate) fn snapshot(top: &Path) -> Tree {
    let mut out = BTreeMap::new();
    let mut todo = vec![top.to_owned()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(top).unwrap().to_string_lossy().into_owned();
            let mode = m.mode() & 0o7777;
            let entry = if m.file_type().is_symlink() {
                (
                    'l',
                    0,
                    std::fs::read_link(&p).unwrap().into_os_string().into_vec(),
                )
            } else if m.is_dir() {
                todo.push(p.clone());
                ('d', mode, Vec::new())
            } else {
                ('f', mode, std::fs::read(&p).unwrap())
            };
            out.insert(rel, entry);
        }
    }
    out
}

use std::os::unix::ffi::OsStringExt;

/// A tree as [`snapshot`] sees it.
pub(crate) type Tree = BTreeMap<String, (char, u32, Vec<u8>)>;

/// Asserts that two snapshots are the same, naming the entries that differ (not the content).
pub(crate) fn assert_same_tree(now: &Tree, expected: &Tree, what: &str) {
    let show = |e: Option<&(char, u32, Vec<u8>)>| {
        e.map(|(k, m, c)| format!("{k} {m:o} {} bytes", c.len()))
    };
    let differ: Vec<String> = now
        .keys()
        .chain(expected.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| now.get(*k) != expected.get(*k))
        .take(10)
        .map(|k| {
            format!(
                "{k}: {:?}, expected {:?}",
                show(now.get(k)),
                show(expected.get(k))
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "{what}: {} entries differ, such as {differ:#?}",
        differ.len()
    );
}

/// A tree of 1,000 files at `top`: ten directories of ten directories of ten files of
/// varied sizes, the files 0600, 0755, 0640 and 0644 in turn, the directories 0755, 0750 and
/// 0700; besides, a read-only directory (0555) holding a file, an empty directory, a link
/// within the tree and a dangling link.
pub(crate) fn make_tree(top: &Path, seed: u64) {
    const FILE_MODES: [u32; 4] = [0o600, 0o755, 0o640, 0o644];
    const DIR_MODES: [u32; 3] = [0o755, 0o750, 0o700];
    let mut n = 0usize;
    for i in 0..10 {
        for j in 0..10 {
            let d = top.join(format!("d{i}/e{j}"));
            std::fs::create_dir_all(&d).unwrap();
            for k in 0..10 {
                let content = bytes(seed + n as u64, (n * 37) % 700);
                put(&d.join(format!("f{k}")), &content, FILE_MODES[n % 4]);
                n += 1;
            }
            chmod(&d, DIR_MODES[(i + j) % 3]);
        }
        chmod(&top.join(format!("d{i}")), DIR_MODES[i % 3]);
    }
    std::fs::create_dir(top.join("ro")).unwrap();
    put(&top.join("ro/kept.txt"), b"read-only parent", 0o444);
    chmod(&top.join("ro"), 0o555);
    std::fs::create_dir(top.join("empty")).unwrap();
    std::os::unix::fs::symlink("d0/e0/f1", top.join("link")).unwrap();
    std::os::unix::fs::symlink("../../nowhere", top.join("d1/dangling")).unwrap();
}

/// The one change `changes` holds for `method` at `path`.
pub(crate) fn change<'a>(changes: &'a [Value], method: &str, path: &str) -> &'a Value {
    let found: Vec<&Value> = changes
        .iter()
        .filter(|c| c["method"] == method && c["path"] == path)
        .collect();
    assert_eq!(found.len(), 1, "{method} {path} in {changes:#?}");
    found[0]
}

/// The id of a change.
pub(crate) fn id(c: &Value) -> &str {
    c["id"].as_str().unwrap()
}

/// A file's etag as `files/stat` gives it.
pub(crate) fn etag(s: &mut Sidecar, path: &str) -> Value {
    let r = s.request("files/stat", json!({"path": path}));
    ok(&r)["etag"].clone()
}

/// The inode of what `p` names (a link itself).
pub(crate) fn ino(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().ino()
}

#[test]
fn an_overwrite_is_restored_byte_for_byte_with_its_mode() {
    let r = Rec::new();
    let (old, new) = (bytes(1, 5000), bytes(2, 3000));
    let a = r.root.join("a.bin");
    put(&a, &old, 0o640);
    let old_ino = ino(&a);
    let mut s = r.serve("agent");
    write(&mut s, "w/a.bin", &new);
    s.finish();
    assert_eq!(std::fs::read(&a).unwrap(), new);
    // The user gives the new file another mode: the restore brings back the old file's own.
    chmod(&a, 0o600);
    let changes = r.changes();
    let c = change(&changes, "files/write", "w/a.bin");
    assert_eq!(c["kept"]["how"], "link", "{c}");
    let done = r.restore(id(c));
    assert_eq!((&done["id"], &done["path"]), (&c["id"], &json!("w/a.bin")));
    assert_eq!(std::fs::read(&a).unwrap(), old);
    assert_eq!(crate::common::fs::mode(&a), 0o640);
    assert_eq!(ino(&a), old_ino, "the old file itself is back, not a copy");
    // What the restore displaced is kept in turn: restoring it brings the new file back.
    let displaced = done["kept"].as_array().unwrap();
    assert_eq!(displaced.len(), 1, "{done}");
    r.restore(displaced[0].as_str().unwrap());
    assert_eq!(std::fs::read(&a).unwrap(), new);
    assert_eq!(crate::common::fs::mode(&a), 0o600);
}

#[test]
fn an_upload_commit_is_restored_byte_for_byte_with_its_mode() {
    let r = Rec::new();
    let (old, new) = (bytes(3, 200_000), bytes(4, 150_000));
    let big = r.root.join("big.dat");
    put(&big, &old, 0o755);
    let mut s = r.serve("agent");
    let done = upload(&mut s, "w/big.dat", &new, 40_000);
    assert_eq!(done["created"], false, "{done}");
    s.finish();
    assert_eq!(std::fs::read(&big).unwrap(), new);
    let changes = r.changes();
    assert_eq!(
        changes.len(),
        1,
        "one change for the whole upload: {changes:#?}"
    );
    let c = change(&changes, "files/write", "w/big.dat");
    assert_eq!(c["etagAfter"], done["etag"]);
    r.restore(id(c));
    assert_eq!(std::fs::read(&big).unwrap(), old);
    assert_eq!(crate::common::fs::mode(&big), 0o755);
}

#[test]
fn a_rename_over_a_file_is_restored_both_ends_with_their_modes() {
    let r = Rec::new();
    let (src, dst) = (r.root.join("src.txt"), r.root.join("dst.txt"));
    put(&src, b"the source", 0o644);
    put(&dst, b"the replaced target, longer", 0o600);
    let dst_ino = ino(&dst);
    let mut s = r.serve("agent");
    let res = s.request(
        "files/rename",
        json!({"oldPath": "w/src.txt", "newPath": "w/dst.txt", "overwrite": true}),
    );
    ok(&res);
    s.finish();
    assert!(!src.exists());
    assert_eq!(std::fs::read(&dst).unwrap(), b"the source");
    let changes = r.changes();
    let c = change(&changes, "files/rename", "w/src.txt");
    assert_eq!(
        (&c["to"], &c["kept"]["how"]),
        (&json!("w/dst.txt"), &json!("link"))
    );
    r.restore(id(c));
    assert_eq!(std::fs::read(&src).unwrap(), b"the source");
    assert_eq!(crate::common::fs::mode(&src), 0o644);
    assert_eq!(std::fs::read(&dst).unwrap(), b"the replaced target, longer");
    assert_eq!(crate::common::fs::mode(&dst), 0o600);
    assert_eq!(ino(&dst), dst_ino);
}

#[test]
fn a_recursive_delete_of_a_thousand_files_is_restored_whole_with_modes_and_links() {
    let r = Rec::new();
    let tree = r.root.join("tree");
    make_tree(&tree, 10);
    let before = snapshot(&tree);
    assert_eq!(before.values().filter(|e| e.0 == 'f').count(), 1001);
    let tree_ino = ino(&tree);
    let mut s = r.serve("agent");
    let res = s.request("files/delete", json!({"path": "w/tree", "recursive": true}));
    ok(&res);
    s.finish();
    assert!(!crate::common::fs::present(&tree));
    let doc = r.history(&[]);
    let c = change(doc["changes"].as_array().unwrap(), "files/delete", "w/tree");
    assert_eq!(c["kept"]["how"], "move", "{c}");
    assert_eq!(c["kept"]["kind"], "directory", "{c}");
    let content: u64 = before.values().map(|e| e.2.len() as u64).sum();
    assert!(c["kept"]["bytes"].as_u64().unwrap() >= content, "{c}");
    // The tree itself is in the store, moved whole.
    let place = PathBuf::from(c["place"].as_str().unwrap());
    assert_eq!(ino(&place), tree_ino);
    assert_same_tree(&snapshot(&place), &before, "the tree in the store");
    r.restore(id(c));
    assert_same_tree(&snapshot(&tree), &before, "the restored tree");
    assert_eq!(crate::common::fs::mode(&tree), 0o755);
    assert!(!crate::common::fs::present(&place));
}

#[test]
fn a_restore_onto_a_place_changed_since_keeps_the_newer_content_to_restore() {
    let r = Rec::new();
    let a = r.root.join("a.txt");
    std::fs::write(&a, "v1 from the user").unwrap();
    let mut s = r.serve("agent");
    write(&mut s, "w/a.txt", b"v2 from the server");
    s.finish();
    std::fs::write(&a, "v3, the user's newer edit").unwrap();
    let changes = r.changes();
    let first = id(change(&changes, "files/write", "w/a.txt")).to_owned();
    let out = r.run_ok(&["restore", &first]);
    assert!(
        out.contains(&format!("restored {first} at w/a.txt")),
        "{out}"
    );
    let kept = out
        .split_whitespace()
        .skip_while(|w| *w != "as")
        .nth(1)
        .unwrap_or_else(|| panic!("no kept id in {out:?}"))
        .to_owned();
    assert!(out.contains(&format!("fsbroker restore {kept}")), "{out}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "v1 from the user");
    let changes = r.changes();
    let displaced = changes.iter().find(|c| c["id"] == kept.as_str()).unwrap();
    assert_eq!(
        (&displaced["server"], &displaced["method"]),
        (&json!("user"), &json!("restore"))
    );
    let restored = changes.iter().find(|c| c["id"] == first.as_str()).unwrap();
    assert_eq!(restored["restoredBy"], json!([kept]));
    // Restoring it again is refused; restoring the displaced content brings the edit back.
    let again = r.run(&["restore", &first]);
    assert_eq!(again.status.unwrap().code(), Some(1), "{}", again.log());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already restored"));
    r.restore(&kept);
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        "v3, the user's newer edit"
    );
}

/// A second restore of a change whose first restore displaced nothing says only that it
/// was restored already. (Review: it said `already restored (by )`.)
#[test]
fn a_second_restore_says_already_restored_without_an_empty_by() {
    let r = Rec::new();
    std::fs::write(r.root.join("gone.txt"), "kept").unwrap();
    let mut s = r.serve("t");
    let d = s.request("files/delete", json!({"path": "w/gone.txt"}));
    assert!(d.get("error").is_none(), "{d}");
    s.finish();
    let changes = r.changes();
    let deleted = id(change(&changes, "files/delete", "w/gone.txt")).to_owned();
    r.restore(&deleted);
    assert_eq!(
        std::fs::read_to_string(r.root.join("gone.txt")).unwrap(),
        "kept"
    );
    let again = r.run(&["restore", &deleted]);
    assert_eq!(again.status.unwrap().code(), Some(1), "{}", again.log());
    let said = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(said.contains("already restored"), "{said}");
    assert!(!said.contains("(by )"), "{said}");
}
