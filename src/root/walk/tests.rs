//! The walk's own tests: look-ups counted, links and `..` resolved as the kernel would.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
use super::*;
use crate::access::Access;
use crate::consent::{Grant, Grants};
use crate::path::MountName;
use crate::root::{Gate, RootSpec};

/// The directory `path` as root `m`, and a gate that may read all of it.
fn readable(path: &std::path::Path) -> (Root, Gate) {
    let root = Root::open(
        RootSpec {
            path: path.to_path_buf(),
            mount: MountName::new("m").unwrap(),
            name: "m".into(),
            access: Access::Read,
            servers: vec!["*".into()],
        },
        &[],
    )
    .unwrap();
    let mut grants = Grants::default();
    grants.add(Grant::new(
        MountPath {
            mount: MountName::new("m").unwrap(),
            rel: RelPath::root(),
        },
        Access::Read,
        crate::consent::GrantOrigin::Consented,
    ));
    (root, Gate::new(grants, Access::Read))
}

/// Issue 14, finding 9: each `..` after a symlink walked again from the root, so one 4 KB
/// path through 20 link pairs cost tens of seconds. Now a `..` is one step: the look-ups of
/// a walk grow with the components it goes through, not with their square.
#[test]
fn finding_9_dotdot_after_symlinks_is_linear_in_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let depth = 150;
    let mut deep = tmp.path().to_path_buf();
    for _ in 0..depth {
        deep.push("a");
    }
    std::fs::create_dir_all(&deep).unwrap();
    // At the bottom, a link back to the root: `depth` steps of `..`.
    let up: Vec<&str> = vec![".."; depth];
    std::os::unix::fs::symlink(up.join("/"), deep.join("up")).unwrap();
    let (root, gate) = readable(tmp.path());
    // Down to the link and back up, `pairs` times.
    let pairs = 6;
    let mut components = Vec::new();
    for _ in 0..pairs {
        components.extend(std::iter::repeat_n("a".to_owned(), depth));
        components.push("up".to_owned());
    }
    let rel = RelPath::from_components(components);
    LOOKUPS.with(|c| c.set(0));
    let g = root
        .resolve(&rel, &gate, FollowFinal::Yes, Parents::Existing, None)
        .unwrap();
    assert!(g.real().rel.is_root());
    let lookups = LOOKUPS.with(|c| c.get());
    // Every component down is one look-up, every `..` at most one: about 2 x depth per
    // pair. Walking again from the root for each `..` would be depth x depth / 2 per pair.
    let linear = pairs * (depth + 1 + depth) + 10;
    assert!(
        lookups <= linear,
        "{lookups} look-ups, linear would be {linear}"
    );
}

/// The stack of held handles is bounded, and stepping back above it is checked: a walk
/// through a deep tree and back out again still arrives where the kernel would.
#[test]
fn dotdot_beyond_the_held_handles_arrives_at_the_right_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut deep = tmp.path().to_path_buf();
    for i in 0..(HELD * 3) {
        deep.push(format!("l{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(tmp.path().join("l0/l1/target.txt"), "t").unwrap();
    let up: Vec<&str> = vec![".."; HELD * 3 - 2];
    std::os::unix::fs::symlink(format!("{}/target.txt", up.join("/")), deep.join("link")).unwrap();
    let (root, gate) = readable(tmp.path());
    let mut components: Vec<String> = (0..HELD * 3).map(|i| format!("l{i}")).collect();
    components.push("link".into());
    let g = root
        .resolve(
            &RelPath::from_components(components),
            &gate,
            FollowFinal::Yes,
            Parents::Existing,
            None,
        )
        .unwrap();
    assert_eq!(g.real().rel.components(), ["l0", "l1", "target.txt"]);
    let mut s = String::new();
    std::io::Read::read_to_string(&mut g.open_read().unwrap(), &mut s).unwrap();
    assert_eq!(s, "t");
}
