//! The deadline around blocking work on the I/O lane: a call stuck in the kernel is answered
//! `TIMEOUT` at its deadline, and the work after it is not held up behind it.

#![allow(clippy::unwrap_used)] // tests fail by panicking

use crate::error::ErrorKind;
use crate::ops::Ctx;
use crate::policy::Policy;
use std::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_lane_work_is_timeout_and_later_work_still_runs() {
    let policy = Policy::parse(
        "[limits]\ntimeout_ms = 1000\n[recovery]\nenabled = false\n",
        "test",
    )
    .unwrap();
    let (broker, _n) = crate::Broker::builder(policy).build().unwrap();
    let (server, _own) = broker.open_session("s").unwrap();
    let session = server.session().clone();
    let ctx = Ctx::new(broker.inner.clone(), "s");

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
