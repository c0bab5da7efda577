//! A refused delete whose name is taken between the move into the store and the put-back,
//! made deterministic by taking the name at that point.

use super::super::keep::Origin;
use super::super::place::{Place, Terms};
use super::super::store::BESIDE;
use super::RecoveryStore;
use crate::deadline::Deadline;
use crate::policy::RecoveryPolicy;
use crate::recovery::store::BETWEEN;
use cap_std::fs::Dir;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MAX: u64 = 64 * 1024;
const BIG: usize = 256 * 1024;

struct Setup {
    _tmp: tempfile::TempDir,
    store: RecoveryStore,
    parent: PathBuf,
    handle: Dir,
    origin: Origin,
}

/// A store of `MAX` bytes, and `<root>/d/t`: a tree of a file larger than the whole store.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let parent = root.join("d");
    std::fs::create_dir_all(parent.join("t")).unwrap();
    std::fs::write(parent.join("t/big.bin"), vec![7u8; BIG]).unwrap();
    let policy = RecoveryPolicy {
        max_bytes: MAX,
        ..RecoveryPolicy::default()
    };
    let store = RecoveryStore::open_at(&tmp.path().join("store"), policy).unwrap();
    let handle = Dir::open_ambient_dir(&parent, cap_std::ambient_authority()).unwrap();
    let origin = Origin::server("s", "s@1#0", "files/delete", "w/d/t".into(), root);
    Setup {
        _tmp: tmp,
        store,
        parent,
        handle,
        origin,
    }
}

impl Setup {
    /// The place of `<root>/d/t`.
    fn at(&self) -> Place<'_> {
        Place {
            parent: &self.handle,
            name: "t",
        }
    }
}

/// Runs `step` between the move and the put-back of every delete on this thread.
fn between(step: impl Fn() + 'static) {
    BETWEEN.with(|b| *b.borrow_mut() = Some(Box::new(step)));
}

fn objects(store: &RecoveryStore) -> usize {
    std::fs::read_dir(store.path().join("objects"))
        .unwrap()
        .count()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The store refuses the tree (larger than the whole store) and its name is taken before
/// the put-back: the tree goes back beside the name, the delete is refused saying where,
/// and the store keeps nothing. The delete used to stand, the tree kept past the store's
/// bound, so that a server retaking the name grew the store without bound.
#[test]
fn a_refused_delete_whose_name_is_taken_goes_back_beside_it_and_stays_refused() {
    let s = setup();
    let taken = s.parent.join("t");
    between(move || std::fs::create_dir(&taken).unwrap());
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
    let done = s.store.remove_kept(
        s.at(),
        true,
        &s.origin,
        &Terms::now(&s.store, None, deadline),
    );
    let e = match done {
        Ok(k) => panic!("the refused delete stood: {k:?}"),
        Err(e) => e,
    };
    let listed = names(&s.parent);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let beside = listed
        .iter()
        .find(|n| n.starts_with(&format!("t{BESIDE}")))
        .unwrap_or_else(|| panic!("nothing put back beside `t`: {listed:?}"));
    assert_eq!(
        std::fs::read(s.parent.join(beside).join("big.bin")).unwrap(),
        vec![7u8; BIG]
    );
    assert!(
        e.message().contains(&format!("w/d/{beside}")),
        "the refusal does not say where the entry is: {}",
        e.message()
    );
    assert_eq!(objects(&s.store), 0, "the store kept the refused tree");
    assert!(s.store.history(None, None).unwrap().is_empty());
}

/// A refused delete whose entry cannot go back at all (its directory removed meanwhile), the
/// tree not measured (the deadline passed): the entry is kept, the user's only copy, and
/// the delete journaled at the cost of the whole store, so that nothing more is kept until it is pruned. It used to
/// cost nothing: outside the bound, and never pruned for room.
#[test]
fn an_unmeasured_entry_that_cannot_go_back_costs_the_whole_store() {
    let s = setup();
    let gone = s.parent.clone();
    between(move || std::fs::remove_dir(&gone).unwrap());
    let late = Deadline::at(Instant::now() - Duration::from_millis(1));
    let keep = s
        .store
        .remove_kept(s.at(), true, &s.origin, &Terms::now(&s.store, None, late))
        .unwrap_or_else(|e| panic!("the kept entry was not journaled: {e}"));
    let bytes = keep.kept.as_ref().map_or(0, |k| k.bytes);
    assert!(bytes >= MAX, "kept at {bytes} bytes");
}
