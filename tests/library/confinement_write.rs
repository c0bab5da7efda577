//! Confinement of the write side: `files/write`, `files/create`, `files/delete` and
//! `files/rename` through escaping or dangling symlinks, symlinked parents, `..` forms,
//! absolute paths and URIs outside, and the prefix-collision sibling `project2`. Nothing
//! outside the root is ever created, changed or removed: after every request the whole tree
//! outside `project` is compared with a snapshot taken before, and the canary is checked.

use crate::common::fs::temporaries;
use crate::common::write::writable;
use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every entry under `dir` (not following links): relative path -> kind and content.
fn tree(dir: &Path, skip: &Path, out: &mut BTreeMap<PathBuf, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p == skip {
            continue;
        }
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let desc = if meta.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&p).unwrap())
        } else if meta.is_dir() {
            tree(&p, skip, out);
            format!(
                "dir {:o}",
                std::os::unix::fs::PermissionsExt::mode(&meta.permissions())
            )
        } else {
            format!("file {:?}", std::fs::read(&p).unwrap())
        };
        out.insert(p, desc);
    }
}

/// The state of everything in the fixture outside the root.
fn outside_state(f: &Fixture) -> BTreeMap<PathBuf, String> {
    let mut m = BTreeMap::new();
    tree(f.tmp.path(), &f.root, &mut m);
    m
}

/// A fixture with escaping and dangling links, and a broker with write consent on the root.
struct Setup {
    f: Fixture,
    b: Broker,
    before: BTreeMap<PathBuf, String>,
}

impl Setup {
    async fn new() -> Setup {
        let f = Fixture::new();
        f.file("mine.txt", "mine");
        f.file("d/inner.txt", "inner");
        let out = f.outside.clone();
        f.symlink(&out, "out-abs");
        f.symlink("../outside", "out-rel");
        f.symlink("d/../../outside", "out-dotdot");
        f.symlink(out.join("secret.txt"), "secret-abs");
        f.symlink("../outside/secret.txt", "secret-rel");
        f.symlink("secret-rel", "chain");
        f.symlink(out.join("new.txt"), "dang-abs");
        f.symlink("../outside/new.txt", "dang-rel");
        f.symlink("../outside/newdir", "dang-dir");
        f.symlink("../project2", "sib");
        f.symlink("/", "slash");
        let b = writable(&f, "").await;
        let before = outside_state(&f);
        Setup { f, b, before }
    }

    async fn call(&self, method: &str, params: Value) -> Value {
        call(&self.b, "s", method, params).await
    }

    /// Asserts that nothing outside the root changed and no temporary is left in the root.
    fn assert_untouched(&self, context: &str) {
        self.f.assert_canary_intact();
        assert_eq!(
            outside_state(&self.f),
            self.before,
            "outside changed after {context}"
        );
        let temps = temporaries(&self.f.root);
        assert!(
            temps.is_empty(),
            "temporary left after {context}: {temps:?}"
        );
    }

    /// Sends `method` with `params`, expects `outside_root`, and checks nothing changed.
    async fn refused(&self, method: &str, params: Value) {
        let r = self.call(method, params.clone()).await;
        let context = format!("{method} {params}: {r}");
        let (c, d, why) = err(&r);
        assert_eq!(
            (c, d.as_str(), why.as_str()),
            (-31002, "PERMISSION_DENIED", "outside_root"),
            "{context}"
        );
        let host = self.f.tmp.path().to_str().unwrap();
        assert!(
            !r["error"].to_string().contains(host),
            "host path in {context}"
        );
        assert!(!r.to_string().contains(SECRET), "{context}");
        self.assert_untouched(&context);
        assert_eq!(
            std::fs::read_to_string(self.f.root.join("mine.txt")).unwrap(),
            "mine"
        );
    }

    fn abs(&self, p: &Path) -> String {
        p.to_str().unwrap().to_owned()
    }

    /// Paths that name places outside the root in every spelling but symlinks.
    fn outside_spellings(&self) -> Vec<String> {
        let f = &self.f;
        vec![
            "project/../outside/secret.txt".into(),
            "project/../outside/new.txt".into(),
            "project/d/../../outside/new.txt".into(),
            "project/../project2/secret.txt".into(),
            "project/../project2/new.txt".into(),
            "project/..".into(),
            "project2/secret.txt".into(),
            "outside/new.txt".into(),
            self.abs(&f.outside.join("secret.txt")),
            self.abs(&f.outside.join("new.txt")),
            self.abs(&f.sibling.join("secret.txt")),
            self.abs(&f.sibling.join("new.txt")),
            self.abs(&f.tmp.path().join("new.txt")),
            self.abs(&f.root.join("../outside/new.txt")),
            format!("file://{}", f.outside.join("new.txt").display()),
            format!("file://{}", f.sibling.join("secret.txt").display()),
        ]
    }
}

/// Links whose final component leads outside (existing or dangling).
const FINAL_LINKS: &[&str] = &[
    "project/secret-abs",
    "project/secret-rel",
    "project/chain",
    "project/dang-abs",
    "project/dang-rel",
];

/// Paths whose parent is a symlinked directory leading outside.
const THROUGH_LINKS: &[&str] = &[
    "project/out-abs/secret.txt",
    "project/out-rel/secret.txt",
    "project/out-dotdot/secret.txt",
    "project/out-abs/new.txt",
    "project/out-rel/new.txt",
    "project/dang-dir/new.txt",
    "project/sib/secret.txt",
    "project/sib/new.txt",
    "project/slash/tmp/new.txt",
];

#[tokio::test]
async fn write_through_a_final_symlink_leading_outside_is_outside_root() {
    let s = Setup::new().await;
    for path in FINAL_LINKS {
        for extra in [
            json!({}),
            json!({"create": false}),
            json!({"overwrite": false}),
            json!({"final": false}),
            json!({"encoding": "base64", "content": "AAAA"}),
        ] {
            let mut params = json!({"path": path, "content": "pwned"});
            for (k, v) in extra.as_object().unwrap() {
                params[k] = v.clone();
            }
            s.refused("files/write", params).await;
        }
    }
}

#[tokio::test]
async fn write_through_a_symlinked_parent_leading_outside_is_outside_root() {
    let s = Setup::new().await;
    for path in THROUGH_LINKS {
        s.refused("files/write", json!({"path": path, "content": "pwned"}))
            .await;
        s.refused(
            "files/write",
            json!({"path": path, "content": "pwned", "offset": 0, "final": false}),
        )
        .await;
    }
}

#[tokio::test]
async fn write_through_a_dangling_symlink_inside_creates_its_target_inside() {
    let s = Setup::new().await;
    let f = &s.f;
    f.symlink("made.txt", "dang-in");
    f.symlink(f.root.join("d/made-abs.txt"), "dang-in-abs");
    let r = s
        .call(
            "files/write",
            json!({"path": "project/dang-in", "content": "one"}),
        )
        .await;
    assert_eq!(ok(&r)["created"], true, "{r}");
    let r = s
        .call(
            "files/write",
            json!({"path": "project/dang-in-abs", "content": "tw", "final": false}),
        )
        .await;
    ok(&r);
    let r = s
        .call(
            "files/write",
            json!({"path": "project/dang-in-abs", "content": "o", "offset": 2}),
        )
        .await;
    ok(&r);
    assert_eq!(f.text_of("made.txt"), "one");
    assert_eq!(f.text_of("d/made-abs.txt"), "two");
    for link in ["dang-in", "dang-in-abs"] {
        assert!(
            std::fs::symlink_metadata(f.root.join(link))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    s.assert_untouched("writes through inside links");
}

#[tokio::test]
async fn write_outside_by_dotdot_absolute_and_uri_spellings_is_outside_root() {
    let s = Setup::new().await;
    for path in s.outside_spellings() {
        s.refused("files/write", json!({"path": path, "content": "pwned"}))
            .await;
        s.refused(
            "files/write",
            json!({"path": path, "content": "pwned", "final": false}),
        )
        .await;
    }
}

#[tokio::test]
async fn create_through_a_symlinked_dir_or_outside_spelling_is_outside_root() {
    let s = Setup::new().await;
    let mut paths: Vec<String> = THROUGH_LINKS.iter().map(|p| p.to_string()).collect();
    paths.extend([
        "project/out-abs/a/b/c".to_owned(),
        "project/dang-dir/a/b".to_owned(),
        "project/out-rel/newdir".to_owned(),
    ]);
    paths.extend(s.outside_spellings());
    for path in paths {
        for kind in ["file", "directory"] {
            for parents in [false, true] {
                s.refused(
                    "files/create",
                    json!({"path": path, "type": kind, "parents": parents}),
                )
                .await;
            }
        }
    }
}

#[tokio::test]
async fn create_on_a_dangling_link_leading_outside_is_already_exists_and_creates_nothing() {
    let s = Setup::new().await;
    for path in ["project/dang-abs", "project/dang-rel", "project/dang-dir"] {
        for kind in ["file", "directory"] {
            let r = s
                .call("files/create", json!({"path": path, "type": kind}))
                .await;
            let (c, d, _) = err(&r);
            assert_eq!((c, d.as_str()), (-31008, "ALREADY_EXISTS"), "{r}");
            s.assert_untouched(path);
        }
    }
}

#[tokio::test]
async fn delete_through_a_symlinked_dir_or_outside_spelling_is_outside_root() {
    let s = Setup::new().await;
    let mut paths: Vec<String> = THROUGH_LINKS.iter().map(|p| p.to_string()).collect();
    paths.push("project/slash/tmp".to_owned());
    paths.extend(s.outside_spellings());
    for path in paths {
        for recursive in [false, true] {
            s.refused(
                "files/delete",
                json!({"path": path, "recursive": recursive}),
            )
            .await;
        }
    }
}

#[tokio::test]
async fn delete_of_a_link_leading_outside_removes_only_the_link() {
    let s = Setup::new().await;
    for (link, recursive) in [
        ("out-abs", true),
        ("out-rel", false),
        ("out-dotdot", true),
        ("secret-abs", false),
        ("secret-rel", true),
        ("chain", false),
        ("dang-abs", false),
        ("dang-dir", true),
        ("sib", true),
        ("slash", true),
    ] {
        let path = format!("project/{link}");
        let r = s
            .call(
                "files/delete",
                json!({"path": path, "recursive": recursive}),
            )
            .await;
        assert_eq!(ok(&r), &json!({ "path": path }));
        assert!(
            std::fs::symlink_metadata(s.f.root.join(link)).is_err(),
            "{link} remains"
        );
        s.assert_untouched(&path);
    }
}

#[tokio::test]
async fn rename_from_outside_is_outside_root() {
    let s = Setup::new().await;
    let mut olds: Vec<String> = THROUGH_LINKS.iter().map(|p| p.to_string()).collect();
    olds.extend(s.outside_spellings());
    for old in olds {
        for overwrite in [false, true] {
            s.refused(
                "files/rename",
                json!({"oldPath": old, "newPath": "project/stolen", "overwrite": overwrite}),
            )
            .await;
        }
    }
    assert!(std::fs::symlink_metadata(s.f.root.join("stolen")).is_err());
}

#[tokio::test]
async fn rename_to_outside_or_into_the_sibling_is_outside_root() {
    let s = Setup::new().await;
    let mut news: Vec<String> = THROUGH_LINKS.iter().map(|p| p.to_string()).collect();
    news.extend(s.outside_spellings());
    news.extend([
        "project2/mine.txt".to_owned(),
        "project/../project2/mine.txt".to_owned(),
        "project/sib/mine.txt".to_owned(),
        s.abs(&s.f.sibling.join("mine.txt")),
        format!("file://{}", s.f.sibling.join("mine.txt").display()),
    ]);
    for new in news {
        for old in ["project/mine.txt", "project/d"] {
            for overwrite in [false, true] {
                s.refused(
                    "files/rename",
                    json!({"oldPath": old, "newPath": new, "overwrite": overwrite}),
                )
                .await;
            }
        }
    }
    assert_eq!(s.f.text_of("d/inner.txt"), "inner");
}

#[tokio::test]
async fn rename_onto_a_link_leading_outside_replaces_the_link_not_its_target() {
    let s = Setup::new().await;
    let r = s
        .call(
            "files/rename",
            json!({"oldPath": "project/mine.txt", "newPath": "project/secret-abs"}),
        )
        .await;
    let (c, d, _) = err(&r);
    assert_eq!((c, d.as_str()), (-31008, "ALREADY_EXISTS"), "{r}");
    s.assert_untouched("rename without overwrite onto a link");
    for link in ["secret-abs", "dang-rel"] {
        std::fs::write(s.f.root.join("mine.txt"), "mine").unwrap();
        let r = s
            .call(
                "files/rename",
                json!({"oldPath": "project/mine.txt", "newPath": format!("project/{link}"),
                       "overwrite": true}),
            )
            .await;
        ok(&r);
        let p = s.f.root.join(link);
        assert!(
            std::fs::symlink_metadata(&p).unwrap().is_file(),
            "{link} is still a link"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "mine");
        s.assert_untouched(link);
    }
}

#[tokio::test]
async fn renaming_a_link_leading_outside_moves_the_link_only() {
    let s = Setup::new().await;
    let r = s
        .call(
            "files/rename",
            json!({"oldPath": "project/out-abs", "newPath": "project/d/moved"}),
        )
        .await;
    ok(&r);
    let moved = s.f.root.join("d/moved");
    assert!(
        std::fs::symlink_metadata(&moved)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_link(&moved).unwrap(), s.f.outside);
    s.assert_untouched("rename of an outside link");
    // The moved link still leads outside and is still refused.
    s.refused(
        "files/write",
        json!({"path": "project/d/moved/secret.txt", "content": "pwned"}),
    )
    .await;
}

#[tokio::test]
async fn a_link_cannot_carry_a_write_grant_to_an_ungranted_directory() {
    let f = Fixture::new();
    f.file("priv/p.txt", "private");
    f.dir("pub");
    f.symlink("../priv", "pub/to-priv");
    f.symlink("../priv/p.txt", "pub/p-link");
    let b = f.broker_with("write", "");
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/pub"], "access": "write"}),
    )
    .await;
    assert_eq!(ok(&r)["approvedPaths"], json!(["project/pub"]), "{r}");
    let w = |path: &str| json!({"path": path, "content": "pwned"});
    for (method, params) in [
        ("files/write", w("project/pub/p-link")),
        ("files/write", w("project/pub/to-priv/p.txt")),
        ("files/write", w("project/pub/to-priv/new.txt")),
        (
            "files/create",
            json!({"path": "project/pub/to-priv/new", "type": "file"}),
        ),
        ("files/delete", json!({"path": "project/pub/to-priv/p.txt"})),
        (
            "files/rename",
            json!({"oldPath": "project/pub/to-priv/p.txt", "newPath": "project/pub/got.txt"}),
        ),
    ] {
        let r = call(&b, "s", method, params).await;
        assert_error(&r, -31002, "PERMISSION_DENIED", "no_consent");
    }
    assert_eq!(f.text_of("priv/p.txt"), "private");
    assert_eq!(std::fs::read_dir(f.root.join("priv")).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(f.root.join("pub")).unwrap().count(), 2);
}
