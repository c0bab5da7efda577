//! A host embedding the broker, with typed calls only: a policy in code, consent by a closure
//! that approves one folder, a chunked read of 5 MiB, a write with `ifMatch`, a listing, a
//! watch, the permissions screen's snapshot, a revocation, and the session's end.
use mcp_fsbroker::policy::{Policy, RootEntry};
use mcp_fsbroker::wire::{ConsentParams, ListParams, ReadParams, WatchParams, WriteParams};
use mcp_fsbroker::{Broker, ConsentDecision, ErrorKind, MountPath, Reason};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    std::fs::create_dir_all(tmp.path().join("src"))?;
    std::fs::write(tmp.path().join("src/big.bin"), vec![7u8; 5 << 20])?;
    let policy = Policy::new().root(RootEntry::new("project", tmp.path()).writable());
    let src: MountPath = "project/src".parse()?;
    let only_src = src.clone();
    let consent = mcp_fsbroker::consent::from_fn(move |req| {
        // The host's dialog: here, yes to what lies in `project/src`, no to the rest.
        let approved = req
            .paths
            .iter()
            .filter(|p| p.starts_with(&only_src))
            .cloned();
        let decision = ConsentDecision::new(approved, req.access);
        async move { decision }
    });
    let (broker, _) = Broker::builder(policy).consent_provider(consent).build()?;
    let (server, mut notifications) = broker.open_session("my-server")?;
    let granted = server
        .call(ConsentParams::new(["project/src", "project"]))
        .await?;
    assert_eq!(granted.approved_paths, ["project/src"]);

    // A chunked read: each answer says where the next chunk starts and whether it was the last.
    let (mut read, mut bytes) = (ReadParams::new("project/src/big.bin"), Vec::new());
    loop {
        let chunk = server.call(read.clone()).await?;
        bytes.extend(chunk.bytes()?);
        read.offset += chunk.length;
        if chunk.eof {
            break;
        }
    }
    assert_eq!(bytes.len(), 5 << 20);

    let watch = server.call(WatchParams::new("project/src")).await?;
    let first = server
        .call(WriteParams::new("project/src/notes.md", "v1"))
        .await?;
    let mut second = WriteParams::new("project/src/notes.md", "v2");
    second.if_match = first.etag;
    server.call(second).await?;
    let listed = server.call(ListParams::new("project/src")).await?;
    println!(
        "listed: {:?}",
        listed.entries.iter().map(|e| &e.name).collect::<Vec<_>>()
    );
    let change = notifications.recv().await.ok_or("no change")?;
    println!("watch {}: {:?}", watch.watch_id, change.kind());

    // The permissions screen, then the user takes access back.
    for s in broker.snapshot() {
        println!(
            "{}: {:?}, {} requests",
            s.server_id, s.grants, s.counters.requests
        );
    }
    assert_eq!(server.revoke(&src).len(), 1);
    let refused = server.call(ReadParams::new("project/src/notes.md")).await;
    match refused.map_err(|e| (e.kind(), e.reason())) {
        Err((ErrorKind::PermissionDenied, Some(Reason::Revoked))) => println!("revoked"),
        answer => return Err(format!("expected revoked, got {answer:?}").into()),
    }
    drop(server); // ends the session: its grants, watches and uploads go
    assert!(broker.sessions().is_empty());
    Ok(())
}

#[test]
fn the_example_runs() {
    assert!(main().is_ok());
}
