//! Every control request the daemon serves, answered in one place: a line is read into its
//! [`Request`] once, and one `match` says what each op does. Most ops are answered with one
//! line; `log` may go on as a stream, `describe` with `follow` as a stream of descriptions,
//! and `attach` turns the connection into a session, which the connection's loop
//! (`server.rs`) carries on.

use super::attach;
use super::line::{self, error};
use super::log::Follow;
use super::protocol::{AttachRequest, Request};
use super::questions::Attachments;
use super::services::Services;
use super::{control, recovery};
use crate::broker::Broker;
use serde_json::{Value, json};

/// What a request is served with: the daemon's broker, its attached sessions and its
/// services.
#[derive(Clone, Copy)]
pub(crate) struct Served<'a> {
    /// The daemon's one broker.
    pub(crate) broker: &'a Broker,
    /// What `status` shows of attached sessions.
    pub(crate) attachments: &'a Attachments,
    /// The audit ring, the reload, the console.
    pub(crate) services: &'a Services,
}

/// What the connection does with a request.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Sends this one line, and the connection goes on.
    Line(Value),
    /// Sends this first line, then the audit events that come, until the client goes.
    Log(Value, Follow),
    /// Sends the daemon's description now and after every policy change.
    Describing,
    /// Becomes this session (boxed: it carries the server's identity).
    Attach(Box<AttachRequest>),
}

/// What to do with request `line`: a refusal saying what is wrong with a line that is not a
/// request.
pub(crate) async fn answer_line(at: Served<'_>, line: &[u8]) -> Reply {
    match Request::parse(line) {
        Ok(request) => answer(at, request).await,
        Err(message) => Reply::Line(error(message)),
    }
}

/// What to do with `request`: the one place each op is answered.
pub(crate) async fn answer(at: Served<'_>, request: Request) -> Reply {
    let broker = at.broker;
    Reply::Line(match request {
        Request::Status(_) => {
            json!({"ok": true, "sessions": control::status(broker, at.attachments)})
        }
        Request::Revoke(r) => match control::revoke(broker, &r) {
            Ok(taken) => taken.answer(),
            Err(message) => error(message),
        },
        Request::Resume(r) => match control::resume(broker, &r) {
            Ok(resumed) => line::ok(&resumed),
            Err(message) => error(message),
        },
        Request::Describe(d) if d.follow => return Reply::Describing,
        Request::Describe(_) => attach::describe(broker),
        Request::Attach(request) => match request.name() {
            Ok(_) => return Reply::Attach(Box::new(request)),
            Err(message) => error(message),
        },
        Request::Log(log) => match at.services.ring().answer(log) {
            (first, Some(follow)) => return Reply::Log(first, follow),
            (only, None) => only,
        },
        Request::Reload(_) => at.services.reload(broker),
        Request::Console(_) => at.services.console_link(),
        Request::History(h) => recovery::history_answer(broker, h).await,
        Request::Restore(r) => recovery::restore_answer(broker, r).await,
        Request::Undo(u) => recovery::undo_answer(broker, u).await,
    })
}

#[cfg(test)]
mod tests;
