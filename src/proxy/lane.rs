//! The broker's lane: the server's brokered requests, answered in order as `fsbroker serve`
//! would, through the same `order::Dispatcher` (reads concurrently, changes as barriers,
//! bounded in number and bytes).

use super::link::{ToServer, Wire};
use super::relay::Relay;
use crate::broker::Broker;
use crate::jsonrpc::{self, Item, Message};
use crate::lines::LineReceiver;
use crate::order::Dispatcher;
use std::sync::Arc;
use tokio::sync::watch;

/// Answers the lane's requests until every sender is gone or `stop` is raised. The session
/// id is fixed at the first request, so a session never splits in two. On `stop`, requests
/// still queued are dropped unanswered (the session is over, and a consent question for a
/// server that is gone must not reach the user), and those running get a short grace.
pub(super) async fn run_lane(
    broker: Broker,
    state: Arc<Relay>,
    mut lane: LineReceiver,
    to_server: ToServer,
    mut stop: watch::Receiver<bool>,
) {
    let max_line = broker.policy().limits.max_line_bytes.get();
    let mut dispatcher: Option<Dispatcher<Option<Wire>>> = None;
    loop {
        // `changed` also returns when the proxy is gone, which ends the lane as well.
        let line = tokio::select! {
            biased;
            _ = stop.changed() => break,
            l = lane.recv() => match l {
                Some(l) => l,
                None => break,
            },
        };
        let d = dispatcher.get_or_insert_with(|| {
            let id = state.session_id();
            Dispatcher::new(broker.clone(), &id, to_server.clone())
        });
        let held = tokio::select! {
            biased;
            _ = stop.changed() => break,
            h = d.reserve(line.len()) => match h {
                Some(h) => h,
                None => break,
            },
        };
        let decoded = jsonrpc::decode(&line, max_line);
        drop(line);
        // A request the server cancelled while it waited here is dropped unanswered.
        // Only what can stop where it stands is withdrawn (`Method::is_cancellable`); a
        // change runs to its end and is answered.
        let watched = match &decoded {
            Ok(Message::Single(Item::Request(r))) => {
                state.brokered.watch(r.id.as_value()).map(|w| {
                    (
                        w,
                        r.known.is_some_and(crate::method::Method::is_cancellable),
                    )
                })
            }
            _ => None,
        };
        let cancelled = match watched {
            Some(((flag, _), true)) if flag.is_raised() => continue,
            Some(((_, done), true)) => Some(done.into_cancelled()),
            Some(((_, done), false)) => Some(done.into_held()),
            None => None,
        };
        let submitted = tokio::select! {
            biased;
            _ = stop.changed() => break,
            r = d.submit(decoded, held, cancelled) => r,
        };
        if !submitted {
            break;
        }
    }
    lane.close();
    if let Some(d) = dispatcher {
        d.finish(true).await;
    }
}
