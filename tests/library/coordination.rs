//! Writers of one file from different sessions of one broker (as a per-user daemon holds them)
//! take turns: each waits for the file's lock up to `lock_wait_ms`, then is refused with
//! `CONCURRENCY_CONFLICT` `locked` naming the wait (`data.waitedMs`, `data.retryAfterMs`);
//! the wait never outlasts the operation's deadline; `ifMatch` has exactly one winner across
//! sessions; and delete and rename wait for the same locks.
//!
//! A lock held past the wait is held by the test itself (an advisory lock on the file, which
//! conflicts with the broker's exactly as another process's would), so every refusal here is
//! certain, whatever the machine's speed.

use crate::common::Fixture;
use crate::common::fs::assert_no_temporaries;
use mcp_fsbroker::broker::ServerSession;
use mcp_fsbroker::wire::{
    ConsentParams, DeleteParams, RenameParams, StatParams, WriteParams, WriteResult,
};
use mcp_fsbroker::{
    Access, Broker, BrokerBuilder, Error, ErrorKind, Notifications, Policy, Reason,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// The lock wait of the tests that hold a lock past it: short, since each refusal takes it.
const WAIT: Duration = Duration::from_millis(150);

/// Two sessions of one broker over a writable root, each with write consent on all of it.
struct Two {
    broker: Broker,
    one: Arc<ServerSession>,
    two: Arc<ServerSession>,
    _notifications: (Notifications, Notifications),
}

impl Two {
    async fn new(f: &Fixture, set: impl FnOnce(BrokerBuilder) -> BrokerBuilder) -> Two {
        let text = f.policy_text("write", "[consent]\nmode = \"auto\"\n");
        let policy = Policy::parse(&text, "test").unwrap();
        let (broker, _) = set(Broker::builder(policy)).build().unwrap();
        let (one, n1) = broker.open_session("one").unwrap();
        let (two, n2) = broker.open_session("two").unwrap();
        for s in [&one, &two] {
            let mut consent = ConsentParams::new(["project"]);
            consent.access = Some(Access::Write);
            assert!(s.call(consent).await.unwrap().granted);
        }
        Two {
            broker,
            one: Arc::new(one),
            two: Arc::new(two),
            _notifications: (n1, n2),
        }
    }

    fn both(&self) -> [Arc<ServerSession>; 2] {
        [self.one.clone(), self.two.clone()]
    }
}

/// Takes the advisory lock a writer takes on `p`, through an open file description of the
/// test's own, and holds it until the file is dropped.
fn hold_lock(p: &std::path::Path) -> std::fs::File {
    let holder = std::fs::File::open(p).unwrap();
    fs4::FileExt::try_lock(&holder).expect("take the advisory lock");
    holder
}

/// Asserts that `e` is a `locked` refusal that waited out [`WAIT`] and says so.
fn assert_waited_out(e: &Error) {
    assert_eq!(
        (e.kind(), e.reason()),
        (ErrorKind::ConcurrencyConflict, Some(Reason::Locked)),
        "{e}"
    );
    let waited = e.waited_ms().unwrap_or_else(|| panic!("no waitedMs: {e}"));
    assert!(waited >= WAIT.as_millis() as u64, "waited {waited} ms: {e}");
    assert!(
        e.message()
            .contains(&format!("gave up after waiting {waited} ms")),
        "{e}"
    );
    assert!(e.retry_after_ms().is_some_and(|ms| ms > 0), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overwrites_of_one_file_from_two_sessions_take_turns_and_all_succeed() {
    let f = Fixture::new();
    let target = f.file("shared.txt", "start");
    // The default lock wait: what a daemon's sessions get.
    let t = Two::new(&f, |b| b).await;
    const EACH: usize = 100;
    let mut writes = JoinSet::new();
    for (k, s) in t.both().into_iter().enumerate() {
        for i in 0..EACH {
            let s = s.clone();
            let content = format!("session {k} write {i}");
            writes.spawn(async move {
                s.call(WriteParams::new("project/shared.txt", content))
                    .await
            });
        }
    }
    let mut done = 0;
    while let Some(r) = writes.join_next().await {
        let w: WriteResult = r.unwrap().unwrap_or_else(|e| panic!("a write failed: {e}"));
        assert!(w.committed);
        done += 1;
    }
    assert_eq!(done, 2 * EACH);
    let last = std::fs::read_to_string(&target).unwrap();
    assert!(last.starts_with("session "), "{last:?}");
    assert_no_temporaries(&f.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_if_match_writers_of_two_sessions_have_exactly_one_winner() {
    let f = Fixture::new();
    let target = f.file("race.txt", "start");
    let t = Two::new(&f, |b| b).await;
    let etag = t
        .one
        .call(StatParams::new("project/race.txt"))
        .await
        .unwrap()
        .etag;
    // The file is locked while the writers start, so that the first write of each session
    // finds the etag still matching and then waits at the lock: only a check made under the
    // lock can tell them apart. Exactly one wins whenever the lock is released within the
    // wait, so the pause below only makes that case the likely one.
    let holder = hold_lock(&target);
    const EACH: usize = 10;
    let mut writes = JoinSet::new();
    for i in 0..EACH {
        for (k, s) in t.both().into_iter().enumerate() {
            let content = format!("session {k} write {i}");
            let mut p = WriteParams::new("project/race.txt", content.clone());
            p.if_match = Some(etag.clone());
            writes.spawn(async move { (content, s.call(p).await) });
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(holder);
    let mut winners = Vec::new();
    while let Some(r) = writes.join_next().await {
        match r.unwrap() {
            (content, Ok(_)) => winners.push(content),
            (_, Err(e)) => assert_eq!(
                (e.kind(), e.reason()),
                (ErrorKind::ConcurrencyConflict, Some(Reason::EtagMismatch)),
                "{e}"
            ),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), winners[0]);
    assert_no_temporaries(&f.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_held_past_the_wait_refuses_both_sessions_naming_the_wait() {
    let f = Fixture::new();
    let target = f.file("held.txt", "old");
    let t = Two::new(&f, |b| b.lock_wait(WAIT)).await;
    let holder = hold_lock(&target);
    // Both sessions at once: one waits for the other's turn, then for the held lock, and
    // neither waits longer than its own wait in all.
    let mut writes = JoinSet::new();
    for s in t.both() {
        writes.spawn(async move { s.call(WriteParams::new("project/held.txt", "new")).await });
    }
    while let Some(r) = writes.join_next().await {
        assert_waited_out(&r.unwrap().unwrap_err());
    }
    // On the wire, the wait and the hint are `data.waitedMs` and `data.retryAfterMs`.
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "files/write",
                         "params": {"path": "project/held.txt", "content": "new"}});
    let r = t.two.handle_message(request).await.unwrap();
    let data = &r["error"]["data"];
    assert_eq!(
        (&data["code"], &data["reason"]),
        (&json!("CONCURRENCY_CONFLICT"), &json!("locked")),
        "{r}"
    );
    assert!(
        data["waitedMs"]
            .as_u64()
            .is_some_and(|ms| ms >= WAIT.as_millis() as u64),
        "{r}"
    );
    assert!(
        data["retryAfterMs"].as_u64().is_some_and(|ms| ms > 0),
        "{r}"
    );

    // The commit of a chunked upload waits the same way.
    let mut first = WriteParams::new("project/held.txt", "up");
    first.last = false;
    t.one.call(first).await.unwrap();
    let mut last = WriteParams::new("project/held.txt", "load");
    last.offset = 2;
    assert_waited_out(&t.one.call(last).await.unwrap_err());

    // Delete, and rename from or onto the file, wait for the same lock and give up alike.
    let e = t
        .two
        .call(DeleteParams::new("project/held.txt"))
        .await
        .unwrap_err();
    assert_waited_out(&e);
    let away = RenameParams::new("project/held.txt", "project/moved.txt");
    assert_waited_out(&t.one.call(away).await.unwrap_err());
    f.file("other.txt", "other");
    let mut onto = RenameParams::new("project/other.txt", "project/held.txt");
    onto.overwrite = true;
    assert_waited_out(&t.two.call(onto).await.unwrap_err());

    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
    assert!(!f.root.join("moved.txt").exists());
    drop(holder);
    t.one
        .call(WriteParams::new("project/held.txt", "new"))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    t.broker.end_session("one");
    assert_no_temporaries(&f.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_released_within_the_wait_lets_the_waiting_writer_through() {
    let f = Fixture::new();
    let target = f.file("held.txt", "old");
    let t = Two::new(&f, |b| b.lock_wait(Duration::from_secs(60))).await;
    let holder = hold_lock(&target);
    let s = t.one.clone();
    let write =
        tokio::spawn(async move { s.call(WriteParams::new("project/held.txt", "new")).await });
    // Gives the write time to find the lock held, so that it must wait; the outcome does not
    // depend on it, since the write succeeds whenever the lock is released within its wait.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(holder);
    write.await.unwrap().unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_wait_for_a_lock_ends_at_the_operations_deadline() {
    let f = Fixture::new();
    let target = f.file("held.txt", "old");
    // A lock wait far beyond the time limit: the time limit ends it.
    let t = Two::new(&f, |b| {
        b.timeout(Duration::from_millis(300))
            .lock_wait(Duration::from_secs(86_400))
    })
    .await;
    let _holder = hold_lock(&target);
    let e = t
        .one
        .call(WriteParams::new("project/held.txt", "new"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    // The session's next change (a consent, which takes no file lock and no time limit of
    // the operations) runs only once the timed-out write's work has ended: it is answered, so
    // that work stopped waiting at its deadline. The bound only keeps a regression from hanging.
    let next = t.one.call(ConsentParams::new(["project"]));
    let next = tokio::time::timeout(Duration::from_secs(120), next).await;
    assert!(
        next.expect("the timed-out write still waits")
            .unwrap()
            .granted
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
}

#[tokio::test]
async fn a_rename_onto_another_name_of_the_same_file_does_not_wait_for_itself() {
    let f = Fixture::new();
    let a = f.file("a.txt", "same");
    std::fs::hard_link(&a, f.root.join("b.txt")).unwrap();
    // A day's wait: a rename that waited for the lock it holds itself would not come back.
    let t = Two::new(&f, |b| b.lock_wait(Duration::from_secs(86_400))).await;
    let mut onto = RenameParams::new("project/a.txt", "project/b.txt");
    onto.overwrite = true;
    let rename = tokio::time::timeout(Duration::from_secs(120), t.one.call(onto));
    // As rename(2) does for two links of one file, nothing changes, and that is a success.
    rename.await.expect("the rename waits for itself").unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root.join("b.txt")).unwrap(),
        "same"
    );
}
