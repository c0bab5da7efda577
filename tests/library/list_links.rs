//! Listings leak nothing about link targets: a symlink's entry has size 0 (its own type,
//! `symlink`), whatever it points at, inside the root or out of it, and `files/stat` on a
//! link out of the root tells nothing either.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn a_links_entry_carries_no_size_from_its_target() {
    let f = Fixture::new();
    f.dir("d");
    // Targets of different lengths, outside and inside, dangling and not.
    let long = f
        .outside
        .join("a-rather-long-name-that-does-not-exist-anywhere-at-all");
    f.symlink(f.outside.join("secret.txt"), "d/out");
    f.symlink(&long, "d/dangling");
    f.symlink("../d", "d/inside");
    f.file("d/plain", "12345");
    let b = f.broker();
    consent_all(&b, "s").await;
    for recursive in [false, true] {
        let r = call(
            &b,
            "s",
            "files/list",
            json!({"path": "project/d", "recursive": recursive}),
        )
        .await;
        let entries = ok(&r)["entries"].as_array().unwrap().clone();
        assert_eq!(entries.len(), 4, "{r}");
        for e in &entries {
            let name = e["name"].as_str().unwrap();
            if name == "plain" {
                assert_eq!(e["size"], 5, "{e}");
                assert_eq!(e["type"], "file", "{e}");
            } else {
                assert_eq!(e["type"], "symlink", "{e}");
                assert_eq!(e["size"], 0, "a link's size told its target: {e}");
            }
        }
    }
    for path in ["project/d/out", "project/d/dangling"] {
        let r = call(&b, "s", "files/stat", json!({"path": path})).await;
        let (_, code, reason) = err(&r);
        assert_eq!(
            (code.as_str(), reason.as_str()),
            ("PERMISSION_DENIED", "outside_root"),
            "{r}"
        );
    }
    f.assert_canary_intact();
}
