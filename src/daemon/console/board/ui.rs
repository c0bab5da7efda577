//! The consent provider of mode `ui`: questions put on the board for the page.

use super::{Board, MAX_QUESTIONS, Question, SERVER_LEFT, STOPPED_WAITING};
use crate::consent::{BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest};
use crate::locks::lock;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::oneshot;

/// The consent provider of mode `ui`: each question waits on the board until the user
/// answers it on the page, or its server stops waiting (the time limit, a cancellation),
/// which takes it off.
#[derive(Debug, Clone)]
pub(crate) struct UiConsent(pub(crate) Arc<Board>);

impl ConsentProvider for UiConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move { self.decide_each(request).await.into() })
    }

    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        let board = self.0.clone();
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            // Asked about, whatever comes of it: a refusal there is never offered.
            if request.purpose == crate::consent::Purpose::Access {
                board.asked(&request.server_id, request.paths.iter().cloned());
            }
            let id = {
                let mut inner = lock(&board.inner);
                let open = inner.questions.iter().filter(|q| q.withdrawn.is_none());
                if open.count() >= MAX_QUESTIONS {
                    tracing::warn!(
                        server = %request.server_id,
                        "consent denied: {MAX_QUESTIONS} questions already wait on the console"
                    );
                    return ConsentAnswer::deny();
                }
                inner.next += 1;
                let id = inner.next;
                inner.questions.push(Question {
                    id,
                    request: request.clone(),
                    asked: SystemTime::now(),
                    reply: Some(reply),
                    withdrawn: None,
                });
                id
            };
            board.changed();
            tracing::info!(server = %request.server_id, question = id, "a consent question waits on the console");
            // Marked withdrawn however the wait ends unanswered: the session's end (the
            // question's request knows of it), the time limit, a cancellation.
            let _off = Off {
                board: &board,
                id,
                ended: &request.ended,
            };
            answer.await.unwrap_or_default()
        })
    }
}

/// Marks a question withdrawn when dropped unanswered (an answered one is off the board
/// already), saying whether its session ended.
struct Off<'a> {
    board: &'a Board,
    id: u64,
    ended: &'a crate::consent::SessionEnd,
}

impl Drop for Off<'_> {
    fn drop(&mut self) {
        let why = if self.ended.has_ended() {
            SERVER_LEFT
        } else {
            STOPPED_WAITING
        };
        self.board.withdraw(self.id, why);
    }
}
