//! The board's questions and offers.

use super::*;
use crate::consent::ConsentProvider;

fn request() -> ConsentRequest {
    ConsentRequest::new("s", ["demo/a".parse().unwrap()], Access::Read)
}

#[tokio::test]
async fn a_question_waits_until_answered_and_goes_when_dropped() {
    let board = Board::new();
    let ui = UiConsent(board.clone());
    let r = request();
    let asking = ui.decide_each(&r);
    tokio::pin!(asking);
    assert!(futures_poll(&mut asking).await.is_none());
    let w = board.waiting();
    assert_eq!(w.questions.len(), 1);
    let id = w.questions[0].id;
    let yes = ConsentAnswer::new([crate::consent::PathChoice::whole(
        "demo/a".parse().unwrap(),
        Access::Read,
    )]);
    assert_eq!(board.answer(id, yes.clone()), Answered::Taken);
    assert_eq!(asking.await, yes);
    assert!(board.waiting().questions.is_empty());
    assert_eq!(board.answer(id, ConsentAnswer::deny()), Answered::Unknown);

    let dropped = ui.decide_each(&r);
    let mut dropped = Box::pin(dropped);
    assert!(futures_poll(&mut dropped).await.is_none());
    assert_eq!(board.waiting().questions.len(), 1);
    drop(dropped);
    // Withdrawn, it is still shown, and takes no answer.
    let w = board.waiting();
    assert_eq!(w.questions.len(), 1);
    assert_eq!(
        w.questions[0].withdrawn.map(|(why, _)| why),
        Some(STOPPED_WAITING)
    );
    let id = w.questions[0].id;
    assert_eq!(
        board.answer(id, ConsentAnswer::deny()),
        Answered::Withdrawn(STOPPED_WAITING)
    );
}

async fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    tokio::time::timeout(std::time::Duration::from_millis(20), f)
        .await
        .ok()
}

#[test]
fn refusals_for_want_of_consent_become_offers_one_per_path() {
    let board = Board::new();
    let mut e = AuditEvent {
        time: SystemTime::now(),
        server_id: "s".into(),
        identity: None,
        method: "files/read".into(),
        path: Some("demo/a".into()),
        outcome: "PERMISSION_DENIED".into(),
        reason: Some(Reason::NoConsent),
        bytes: 0,
        cpu: std::time::Duration::ZERO,
        duration: std::time::Duration::ZERO,
        consent: None,
    };
    board.consider(&e);
    board.consider(&e);
    e.method = "files/write".into();
    e.path = Some("demo/b".into());
    board.consider(&e);
    e.reason = Some(Reason::OutsideRoot);
    e.path = Some("demo/c".into());
    board.consider(&e);
    let offers = board.waiting().offers;
    let seen: Vec<_> = offers
        .iter()
        .map(|o| (o.path.to_string(), o.access))
        .collect();
    assert_eq!(
        seen,
        [
            ("demo/a".into(), Access::Read),
            ("demo/b".into(), Access::Write)
        ]
    );
    // Four servers, none past its own cap: the board's is what holds.
    for i in 0..MAX_OFFERS + 5 {
        e.reason = Some(Reason::NoConsent);
        e.server_id = format!("s{}", i % 4);
        e.path = Some(format!("demo/n{i}"));
        board.consider(&e);
    }
    assert_eq!(board.waiting().offers.len(), MAX_OFFERS);
}

/// A question whose session ends is withdrawn, saying the server left, and no answer is taken
/// for it: not after the end, and not when the answer races the end.
#[tokio::test]
async fn a_question_is_withdrawn_when_its_session_ends_and_takes_no_answer() {
    let board = Board::new();
    let ui = UiConsent(board.clone());
    let yes = ConsentAnswer::new([crate::consent::PathChoice::whole(
        "demo/a".parse().unwrap(),
        Access::Read,
    )]);
    for raced in [false, true] {
        let ends = tokio::sync::watch::Sender::new(false);
        let mut r = request();
        r.ended = crate::consent::SessionEnd::of(&ends);
        let asking = crate::consent::ask(&ui, &r, std::time::Duration::from_secs(600));
        tokio::pin!(asking);
        assert!(futures_poll(&mut asking).await.is_none());
        let id = board.waiting().questions.last().unwrap().id;
        ends.send_replace(true);
        if raced {
            // The user's answer arrives before the asking task saw the end.
            assert_eq!(
                board.answer(id, yes.clone()),
                Answered::Withdrawn(SERVER_LEFT)
            );
        }
        // Nothing approved either way: no answer, or (raced) the refusal the board made.
        let answer = asking.await;
        assert!(
            answer.as_ref().is_none_or(|a| a.approved.is_empty()),
            "{answer:?}"
        );
        let shown = board.question(id).unwrap();
        assert_eq!(
            shown.withdrawn.map(|(why, _)| why),
            Some(SERVER_LEFT),
            "raced: {raced}"
        );
        assert_eq!(
            board.answer(id, yes.clone()),
            Answered::Withdrawn(SERVER_LEFT)
        );
    }
}

#[tokio::test]
async fn withdrawn_questions_shown_are_bounded() {
    let board = Board::new();
    let ui = UiConsent(board.clone());
    let r = request();
    for _ in 0..MAX_WITHDRAWN + 5 {
        let mut asking = Box::pin(ui.decide_each(&r));
        assert!(futures_poll(&mut asking).await.is_none());
    }
    let w = board.waiting();
    assert_eq!(w.questions.len(), MAX_WITHDRAWN);
    assert!(w.questions.iter().all(|q| q.withdrawn.is_some()));
}

/// A refusal for want of consent, of `server` on `path`.
fn refusal(server: &str, path: &str) -> AuditEvent {
    AuditEvent {
        time: SystemTime::now(),
        server_id: server.into(),
        identity: None,
        method: "files/read".into(),
        path: Some(path.into()),
        outcome: "PERMISSION_DENIED".into(),
        reason: Some(Reason::NoConsent),
        bytes: 0,
        cpu: std::time::Duration::ZERO,
        duration: std::time::Duration::ZERO,
        consent: None,
    }
}

#[test]
fn one_server_cannot_push_another_off_the_board_and_asked_paths_are_not_offered() {
    let board = Board::new();
    board.consider(&refusal("quiet", "demo/q"));
    for i in 0..MAX_OFFERS {
        board.consider(&refusal("noisy", &format!("demo/n{i}")));
    }
    let offers = board.waiting().offers;
    let noisy = offers.iter().filter(|o| o.server == "noisy").count();
    assert_eq!(noisy, MAX_OFFERS_PER_SERVER);
    assert!(offers.iter().any(|o| o.server == "quiet"), "{offers:?}");
    // Asked about: its offers go, and no new one comes at or beneath it.
    board.asked("quiet", ["demo".parse().unwrap()]);
    board.consider(&refusal("quiet", "demo/q/deeper"));
    assert!(board.waiting().offers.iter().all(|o| o.server != "quiet"));
    assert_eq!(board.dismiss(Some("noisy")), MAX_OFFERS_PER_SERVER);
    assert!(board.waiting().offers.is_empty());
}
