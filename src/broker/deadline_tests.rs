//! The deadline around blocking work on the I/O lane: a call stuck in the kernel is answered
//! `TIMEOUT` at its deadline, and the work after it is not held up behind it.

#![allow(clippy::unwrap_used)] // tests fail by panicking

use crate::error::ErrorKind;
use crate::ops::Ctx;
use crate::policy::Policy;
use std::sync::{Arc, mpsc};

/// A broker whose operations have `timeout_ms`, a session of it (kept alive by the handle
/// returned with it) and a request's context in that session.
fn request(timeout_ms: u64) -> (crate::Broker, super::ServerSession, Arc<Ctx>) {
    let text = format!("[limits]\ntimeout_ms = {timeout_ms}\n[recovery]\nenabled = false\n");
    let (broker, _n) = crate::Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap();
    let (server, _own) = broker.open_session("s").unwrap();
    let ctx = Arc::new(Ctx::new(broker.inner.clone(), "s"));
    (broker, server, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_lane_work_is_timeout_and_later_work_still_runs() {
    let (_broker, server, ctx) = request(1000);
    let session = server.session().clone();

    // Blocked until released, as a call stuck on a hung filesystem would be.
    let (release, blocked) = mpsc::channel::<()>();
    let stuck = ctx
        .run_small(&session, move |_| {
            // Bounded, so that a deadline that does not hold fails the test, not hang it.
            let _ = blocked.recv_timeout(std::time::Duration::from_secs(60));
            Ok(())
        })
        .await;
    assert_eq!(stuck.map_err(|e| e.kind()), Err(ErrorKind::Timeout));

    // The lane is still on that work, long past `lane::STUCK`: the next small work runs on
    // the pool instead, and is answered.
    let name = ctx
        .run_small(&session, |_| {
            Ok(std::thread::current().name().unwrap_or("").to_owned())
        })
        .await
        .unwrap();
    assert_ne!(name, "fsbroker-io");
    drop(release);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_queued_behind_a_stuck_call_moves_off_the_lane_without_a_later_request() {
    let (_broker, server, ctx) = request(60_000);
    let session = server.session().clone();

    let (release, blocked) = mpsc::channel::<()>();
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    let (c, s) = (ctx.clone(), session.clone());
    let stuck = tokio::spawn(async move {
        c.run_small(&s, move |_| {
            let _ = started_tx.send(());
            let _ = blocked.recv_timeout(std::time::Duration::from_secs(60));
            Ok(())
        })
        .await
    });
    started.await.unwrap();
    // Queued behind the blocked call, and nothing is sent after it: it is moved off the lane
    // by its own wait, and answered long before the 60 s deadline.
    let queued = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        ctx.run_small(&session, |_| {
            Ok(std::thread::current().name().unwrap_or("").to_owned())
        }),
    )
    .await
    .expect("queued work waited behind the stuck call")
    .unwrap();
    assert_ne!(queued, "fsbroker-io");
    drop(release);
    stuck.await.unwrap().unwrap();
}
