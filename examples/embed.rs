//! A host embedding the broker: policy in code (one read-only root), consent by a closure that
//! approves one sub-folder, audit to a file, the seed's example requests, typed errors.
use mcp_fsbroker::policy::{Policy, RootEntry};
use mcp_fsbroker::{AuditLog, Broker, ConsentDecision, ErrorKind, Method, MountPath, Reason};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let (project, config) = (tmp.path().join("project"), tmp.path().join("config.json"));
    std::fs::create_dir_all(project.join("src"))?;
    std::fs::write(project.join("src/main.py"), "print('hello')\n")?;
    std::fs::write(project.join("README.md"), "# not approved\n")?;
    std::fs::write(&config, "{}")?;
    let policy = Policy::new().root(RootEntry::new("project", &project).read_only());
    let src: MountPath = "project/src".parse()?;
    let consent = mcp_fsbroker::consent::from_fn(move |req| {
        // The host's dialog: here, yes to what lies in `project/src`, no to the rest.
        let approved = req.paths.iter().filter(|p| p.starts_with(&src)).cloned();
        let decision = ConsentDecision::new(approved, req.access);
        async move { decision }
    });
    let (broker, _notifications) = Broker::builder(policy)
        .consent_provider(consent)
        .audit_log(AuditLog::to_file(&tmp.path().join("audit.jsonl"))?)
        .build()?;
    // The seed's consent request: a folder inside the root, and a file outside every root.
    let paths = [project.join("src"), config];
    let params = json!({"message": "Server requests access to project files for analysis",
        "requestedPaths": paths});
    let granted = broker.call("my-server", Method::Consent, params).await?;
    println!("consent: {granted}");
    assert_eq!(granted["deniedPaths"][0], json!(paths[1]));

    // The seed's read, then one outside the approved folder.
    let read = json!({"path": "project/src/main.py", "encoding": "utf-8", "offset": 0,
        "length": 1048576});
    let file = broker.call("my-server", Method::Read, read).await?;
    println!("read: {}", file["content"]);
    let other = json!({"path": "project/README.md"});
    let refused = broker.call("my-server", Method::Read, other).await.err();
    match refused.map(|e| (e.kind(), e.reason())) {
        Some((ErrorKind::PermissionDenied, Some(Reason::NoConsent))) => println!("refused"),
        answer => return Err(format!("expected no_consent, got {answer:?}").into()),
    }
    let audit = std::fs::read_to_string(tmp.path().join("audit.jsonl"))?;
    assert_eq!(audit.lines().count(), 3, "one audit line per request");
    Ok(())
}

#[test]
fn the_example_runs() {
    assert!(main().is_ok());
}
