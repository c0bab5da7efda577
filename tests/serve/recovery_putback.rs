//! A server retaking a refused delete's name, through the real binary: with a store of
//! 4 MiB and trees of a 5 MiB file (larger than the whole store), the server spins on
//! `mkdir(name)` directly on disk while its `files/delete` runs, so that the name may be
//! taken between the tree's move into the store and its put-back. Whatever the interleaving,
//! every such delete is refused, the tree is whole at its name or beside it, and the store
//! holds nothing of it. A retaken name used to make the delete stand, the tree kept past the
//! store's bound: five rounds left 25 MiB in a 4 MiB store.

use crate::common::*;
use crate::recovery::*;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const CAP: u64 = 4 * 1024 * 1024;
const BIG: usize = 5 * 1024 * 1024;

/// The bytes of the files under `dir`, at any depth.
fn du(dir: &Path) -> u64 {
    let mut total = 0;
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                todo.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

#[test]
fn a_server_retaking_a_refused_deletes_name_never_makes_it_stand_nor_grows_the_store() {
    let r = Rec::with(None, Some("max_bytes = 4194304\nmin_keep_hours = 24"));
    let mut s = r.serve("agent");
    let content: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
    for round in 0..4 {
        let name = format!("t{round}");
        let tree = r.root.join(&name);
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join("big.bin"), &content).unwrap();
        // Many small entries make the store's measuring walk longer: a wider window.
        for k in 0..2000 {
            std::fs::write(tree.join(format!("s{k}")), "x").unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let (stop, tree) = (stop.clone(), tree.clone());
            std::thread::spawn(move || {
                // Bounded as a hang guard only: the delete's answer ends it.
                let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < end {
                    if std::fs::create_dir(&tree).is_ok() {
                        return true;
                    }
                }
                false
            })
        };
        let resp = s.request(
            "files/delete",
            json!({"path": format!("w/{name}"), "recursive": true}),
        );
        stop.store(true, Ordering::Relaxed);
        let took = racer.join().unwrap();
        let (_, code, reason) = err(&resp);
        assert_eq!(
            (code.as_str(), reason.as_str()),
            ("QUOTA_EXCEEDED", "not_recoverable"),
            "round {round}: {resp}"
        );
        // The tree is whole at its name, or (the name retaken) beside it, where the answer says.
        let home = if took {
            let beside = std::fs::read_dir(&r.root)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| n.starts_with(&format!("{name}.fsbroker-putback-")))
                .unwrap_or_else(|| {
                    panic!("round {round}: the name was retaken and nothing is beside it: {resp}")
                });
            let said = resp["error"]["message"].as_str().unwrap_or("");
            assert!(
                said.contains(&format!("w/{beside}")),
                "round {round}: {said}"
            );
            r.root.join(beside)
        } else {
            tree.clone()
        };
        assert!(
            std::fs::read(home.join("big.bin")).is_ok_and(|b| b == content),
            "round {round}: the tree is not whole at {}",
            home.display()
        );
        let held = du(&r.store().join("objects"));
        assert!(
            held <= CAP,
            "round {round}: the store holds {held} bytes, past its cap of {CAP}"
        );
    }
    assert!(
        r.changes().is_empty(),
        "a refused delete was journaled: {:?}",
        r.changes()
    );
}
