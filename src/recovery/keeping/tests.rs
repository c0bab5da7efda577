//! The guard's settling: what a change kept is journaled when the change happened, and goes
//! when it did not, whichever way the operation ended; with recovery off it keeps nothing.

use super::Keeping;
use crate::access::Access;
use crate::deadline::Deadline;
use crate::path::{MountName, RelPath};
use crate::policy::RecoveryPolicy;
use crate::recovery::{Origin, RecoveryStore};
use crate::root::{FollowFinal, Gate, Granted, Parents, Root, RootSpec};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Setup {
    _tmp: tempfile::TempDir,
    root_dir: PathBuf,
    root: Root,
    store: RecoveryStore,
}

/// A root `w` holding `a.txt` ("old"), and a store beside it.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let root_dir = tmp.path().join("root");
    std::fs::create_dir(&root_dir).unwrap_or_else(|e| panic!("root: {e}"));
    std::fs::write(root_dir.join("a.txt"), "old").unwrap_or_else(|e| panic!("a.txt: {e}"));
    let store = RecoveryStore::open_at(&tmp.path().join("store"), RecoveryPolicy::default())
        .unwrap_or_else(|e| panic!("store: {e}"));
    let spec = RootSpec {
        path: root_dir.clone(),
        mount: MountName::new("w").unwrap_or_else(|e| panic!("mount: {e}")),
        name: "w".into(),
        access: Access::Write,
        servers: vec!["*".into()],
    };
    let root = Root::open(spec, &[]).unwrap_or_else(|e| panic!("root: {e}"));
    Setup {
        _tmp: tmp,
        root_dir,
        root,
        store,
    }
}

impl Setup {
    fn granted(&self, name: &str) -> Granted {
        let rel = RelPath::from_components(vec![name.to_owned()]);
        self.root
            .resolve(
                &rel,
                &Gate::whole(),
                FollowFinal::No,
                Parents::Existing,
                None,
            )
            .unwrap_or_else(|e| panic!("resolve {name}: {e}"))
    }

    fn origin(&self, method: &'static str) -> Origin {
        Origin::server(
            "s",
            "s@1#0",
            method,
            "w/a.txt".into(),
            self.root_dir.clone(),
        )
    }

    fn objects(&self) -> usize {
        std::fs::read_dir(self.store.path().join("objects")).map_or(0, |d| d.count())
    }

    fn journaled(&self) -> Vec<crate::recovery::Change> {
        self.store
            .history(None, None)
            .unwrap_or_else(|e| panic!("history: {e}"))
    }
}

fn deadline() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_secs(60))
}

fn meta(path: &Path) -> cap_std::fs::Metadata {
    let dir = cap_std::fs::Dir::open_ambient_dir(
        path.parent().unwrap_or_else(|| panic!("no parent")),
        cap_std::ambient_authority(),
    )
    .unwrap_or_else(|e| panic!("dir: {e}"));
    let name = path.file_name().unwrap_or_else(|| panic!("no name"));
    dir.symlink_metadata(name)
        .unwrap_or_else(|e| panic!("meta: {e}"))
}

/// Kept, then dropped with the place unchanged (the operation failed before its rename):
/// the change did not happen, so nothing stays in the store and nothing is journaled.
#[test]
fn dropped_before_the_change_keeps_and_journals_nothing() {
    let s = setup();
    let g = s.granted("a.txt");
    let mut keeping = Keeping::begin(Some(&s.store), s.origin("files/write"), deadline());
    keeping
        .keep_replaced(&g, &meta(&s.root_dir.join("a.txt")))
        .unwrap_or_else(|e| panic!("keep: {e}"));
    assert_eq!(s.objects(), 1, "nothing was kept");
    drop(keeping);
    assert_eq!(s.objects(), 0, "a change that did not happen left its keep");
    assert!(s.journaled().is_empty(), "{:?}", s.journaled());
}

/// Kept, the place replaced, then dropped (the operation failed after its rename): the
/// change happened, so it is journaled with what was kept, which a restore puts back.
#[test]
fn dropped_after_the_change_journals_what_was_kept() {
    let s = setup();
    let g = s.granted("a.txt");
    let mut keeping = Keeping::begin(Some(&s.store), s.origin("files/write"), deadline());
    keeping
        .keep_replaced(&g, &meta(&s.root_dir.join("a.txt")))
        .unwrap_or_else(|e| panic!("keep: {e}"));
    std::fs::write(s.root_dir.join("new"), "new").unwrap_or_else(|e| panic!("new: {e}"));
    std::fs::rename(s.root_dir.join("new"), s.root_dir.join("a.txt"))
        .unwrap_or_else(|e| panic!("rename: {e}"));
    drop(keeping);
    let changes = s.journaled();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(changes[0].kept.is_some(), "{changes:?}");
    s.store
        .restore(&changes[0].id, None)
        .unwrap_or_else(|e| panic!("restore: {e}"));
    let now = std::fs::read_to_string(s.root_dir.join("a.txt"));
    assert_eq!(now.ok().as_deref(), Some("old"));
}

/// Cancelled (the change is known not to have happened): what was kept goes and nothing is
/// journaled, even when the place changed meanwhile by another hand.
#[test]
fn cancelled_keeps_and_journals_nothing() {
    let s = setup();
    let g = s.granted("a.txt");
    let mut keeping = Keeping::begin(Some(&s.store), s.origin("files/rename"), deadline());
    keeping
        .keep_replaced(&g, &meta(&s.root_dir.join("a.txt")))
        .unwrap_or_else(|e| panic!("keep: {e}"));
    std::fs::write(s.root_dir.join("a.txt"), "someone else's")
        .unwrap_or_else(|e| panic!("write: {e}"));
    keeping.cancel();
    assert_eq!(s.objects(), 0, "a cancelled change left its keep");
    assert!(s.journaled().is_empty(), "{:?}", s.journaled());
}

/// Done: the change is journaled with its new path, its etag after, and what was kept.
#[test]
fn done_journals_the_change_with_what_was_kept() {
    let s = setup();
    let g = s.granted("a.txt");
    let mut keeping = Keeping::begin(Some(&s.store), s.origin("files/rename"), deadline());
    keeping
        .keep_replaced(&g, &meta(&s.root_dir.join("a.txt")))
        .unwrap_or_else(|e| panic!("keep: {e}"));
    keeping.done(Some("w/b.txt".into()), Some("\"after\"".into()));
    let changes = s.journaled();
    assert_eq!(changes.len(), 1, "{changes:?}");
    let c = &changes[0];
    assert_eq!(c.method, "files/rename");
    assert_eq!(c.to.as_deref(), Some("w/b.txt"));
    assert_eq!(c.etag_after.as_deref(), Some("\"after\""));
    assert!(c.kept.is_some(), "{c:?}");
    assert_eq!(s.objects(), 1);
}

/// A removal dropped without `done`: the entry is in the store by then, and is journaled, so
/// that it stays within `history`'s and `restore`'s reach.
#[test]
fn a_removal_dropped_without_done_is_journaled() {
    let s = setup();
    let g = s.granted("a.txt");
    let mut keeping = Keeping::begin(Some(&s.store), s.origin("files/delete"), deadline());
    keeping
        .remove(&g, false)
        .unwrap_or_else(|e| panic!("remove: {e}"));
    assert!(!s.root_dir.join("a.txt").exists());
    drop(keeping);
    let changes = s.journaled();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].etag_after, None);
    assert!(changes[0].kept.is_some(), "{changes:?}");
}

/// With recovery off the guard removes what it is asked to, and keeps and journals nothing.
#[test]
fn with_recovery_off_it_removes_and_keeps_nothing() {
    let s = setup();
    let g = s.granted("a.txt");
    let mut keeping = Keeping::begin(None, s.origin("files/delete"), deadline());
    keeping
        .keep_replaced(&g, &meta(&s.root_dir.join("a.txt")))
        .unwrap_or_else(|e| panic!("keep: {e}"));
    keeping
        .remove(&g, false)
        .unwrap_or_else(|e| panic!("remove: {e}"));
    assert!(!s.root_dir.join("a.txt").exists(), "not removed");
    keeping.done(None, None);
    assert_eq!(s.objects(), 0);
    assert!(s.journaled().is_empty(), "{:?}", s.journaled());
}

/// No operation asks whether recovery is on, or names the store: each goes through the guard,
/// which `ops/mod.rs` begins, so that a new operation that destroys something cannot keep it
/// in a way of its own, or forget to on one branch.
#[test]
fn no_operation_branches_on_recovery() {
    let ops = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ops");
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&ops).unwrap_or_else(|e| panic!("{}: {e}", ops.display())) {
        let path = entry.unwrap_or_else(|e| panic!("entry: {e}")).path();
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read: {e}"));
        for (i, line) in text.lines().enumerate() {
            let names_store = line.contains(".recovery") || line.contains("RecoveryStore");
            let begins = path.ends_with("mod.rs") && line.contains("Keeping::begin(inner.recovery");
            if names_store && !begins {
                wrong.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "operations naming the recovery store:\n{}",
        wrong.join("\n")
    );
}
