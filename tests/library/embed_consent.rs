//! Consent for a host without boilerplate: a closure provider (`consent::from_fn`) that
//! approves one sub-folder by testing `MountPath::starts_with` against a path parsed from a
//! string, and sees the host paths of what it is asked, for its dialog.

use crate::common::Fixture;
use mcp_fsbroker::policy::{Policy, RootEntry};
use mcp_fsbroker::{Broker, ConsentDecision, ErrorKind, Method, MountPath, Reason, consent};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn a_closure_approves_one_folder_and_sees_host_paths() {
    let f = Fixture::new();
    f.file("docs/a.txt", "docs");
    f.file("src/b.rs", "src");
    let seen: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
    let docs: MountPath = "project/docs".parse().unwrap();
    let log = seen.clone();
    let provider = consent::from_fn(move |req| {
        let docs = docs.clone();
        log.lock().unwrap().extend(req.host_paths.iter().cloned());
        async move {
            ConsentDecision {
                approved: req
                    .paths
                    .iter()
                    .filter(|p| p.starts_with(&docs))
                    .cloned()
                    .collect(),
                access: req.access,
            }
        }
    });
    let policy = Policy::new().root(RootEntry::new("project", &f.root));
    let (broker, _outbound) = Broker::builder(policy)
        .consent_provider(provider)
        .build()
        .unwrap();
    let answer = broker
        .call(
            "s",
            Method::Consent,
            json!({"requestedPaths": ["project/docs", "project/src"]}),
        )
        .await
        .unwrap();
    assert_eq!(answer["approvedPaths"], json!(["project/docs"]), "{answer}");
    let read = |path: &str| broker.call("s", Method::Read, json!({ "path": path }));
    assert_eq!(read("project/docs/a.txt").await.unwrap()["content"], "docs");
    let e = read("project/src/b.rs").await.unwrap_err();
    assert_eq!(
        (e.kind(), e.reason()),
        (ErrorKind::PermissionDenied, Some(Reason::NoConsent))
    );
    let canonical = std::fs::canonicalize(&f.root).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [canonical.join("docs"), canonical.join("src")]
    );
}

#[test]
fn mount_paths_parse_from_strings() {
    let p: MountPath = "project/docs/a.txt".parse().unwrap();
    assert!(p.starts_with(&"project/docs".parse().unwrap()));
    assert!(!p.starts_with(&"project/src".parse().unwrap()));
    assert_eq!(p.to_string(), "project/docs/a.txt");
    for bad in ["/etc/passwd", "file:///etc", "project/../x", ""] {
        assert!(bad.parse::<MountPath>().is_err(), "{bad}");
    }
}
