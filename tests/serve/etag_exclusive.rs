//! `ifMatch` is exclusive across broker processes: several `fsbroker serve` processes on one
//! root, each writing one file with the same etag at the same moment, never have two winners. The etag
//! comparison, the advisory lock and the rename are one critical section, so the loser sees
//! either the winner's lock (`locked`) or the winner's new file (`etag_mismatch`).

use crate::common::*;
use crate::sidecar::*;
use serde_json::json;

/// A count from the environment variable `name`, else `default`.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Rounds of the race (`FSBROKER_RACE_ITERS`). Before the fix, about one round in a hundred
/// had two winners with four processes on two cores (one in seven hundred with two), so the
/// default fails the old code with near certainty in a few seconds.
fn rounds() -> usize {
    env_count("FSBROKER_RACE_ITERS", 2000)
}

/// Processes racing in each round (`FSBROKER_RACE_PROCS`). More than two make it likelier
/// that a loser is descheduled between its check and its lock, the window of the old code.
fn procs() -> usize {
    env_count("FSBROKER_RACE_PROCS", 4).max(2)
}

/// `fsbroker serve --policy P --writable` over the fixture's root, with write consent granted
/// on the whole root and limits high enough for a tight loop.
fn writer(policy: &std::path::Path) -> Sidecar {
    let args: Vec<std::ffi::OsString> = vec![
        "serve".into(),
        "--policy".into(),
        policy.into(),
        "--writable".into(),
        "--server-id".into(),
        "t".into(),
    ];
    let mut s = Sidecar::spawn(&args, None);
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "write"}),
    );
    assert_eq!(r["result"]["granted"], true, "consent refused: {r}");
    s
}

#[test]
fn finding_6_if_match_has_one_winner_across_processes() {
    let f = Fixture::new();
    let policy = f.tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        f.policy_text(
            "write",
            "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n\n[consent]\nmode = \"auto\"\n",
        ),
    )
    .unwrap();
    f.file("race.txt", "round zero");
    let n = procs();
    let mut procs: Vec<Sidecar> = (0..n).map(|_| writer(&policy)).collect();
    let mut wrong = Vec::new();
    for round in 0..rounds() {
        let stat = procs[round % n].request("files/stat", json!({"path": "project/race.txt"}));
        let etag = ok(&stat)["etag"].clone();
        let contents: Vec<String> = (0..n)
            .map(|k| format!("round {round} won by process {k}"))
            .collect();
        // Every request is on its way before any answer is read, so the processes work on
        // the same etag at the same time.
        let id = json!(round as i64);
        for (k, p) in procs.iter_mut().enumerate() {
            p.send(&rpc(
                id.clone(),
                "files/write",
                json!({"path": "project/race.txt", "content": contents[k], "ifMatch": etag}),
            ));
        }
        let answers: Vec<_> = procs.iter_mut().map(|p| p.wait_id(&id)).collect();
        let winners: Vec<usize> = (0..n)
            .filter(|&k| answers[k].get("error").is_none())
            .collect();
        for (k, a) in answers.iter().enumerate() {
            if winners.contains(&k) {
                continue;
            }
            let (code, data, reason) = err(a);
            assert_eq!(
                (code, data.as_str()),
                (-31006, "CONCURRENCY_CONFLICT"),
                "round {round}, process {k}: {a}"
            );
            assert!(
                reason == "etag_mismatch" || reason == "locked",
                "round {round}, process {k}: {a}"
            );
        }
        match winners.as_slice() {
            [k] => assert_eq!(f.text_of("race.txt"), contents[*k], "round {round}"),
            _ => wrong.push((round, winners.len())),
        }
    }
    assert!(
        wrong.is_empty(),
        "rounds without exactly one winner (round, winners): {wrong:?}"
    );
}
