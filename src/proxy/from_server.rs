//! The server's lines: read, judged (`judge::server`), and sent where the verdict says:
//! brokered requests to the broker's lane, the rest to the host, refusals back to the server.
//! Refusals wait for room in the queue towards the server: whatever drains it (a child's
//! stdin writer, the remote transport's driver) never waits for this reader.

use super::era;
use super::host_channel::HostChannel;
use super::judge::refusal;
use super::judge::server::{ForLane, Routed, route};
use super::link::ToServer;
use super::relay::Relay;
use crate::error::{Error, ErrorKind};
use crate::lines::{LineReceiver, LineSender, SendError};
use serde_json::Value;
use std::sync::Arc;

/// How long a server is told to wait when the broker's queue is full.
const RETRY_AFTER_MS: u64 = 100;

/// Reads the server's lines until its output ends. Never waits on the broker: a request that
/// does not fit in the lane's queue is refused with `RATE_LIMITED`, so host-bound traffic is
/// not held up behind broker work.
/// `to_host` is taken before this task starts: a host that sends its last lines and leaves
/// at once closes the host channel, maybe before this task first runs, and the server's
/// answers to those lines must still reach it.
pub(super) async fn read_server(
    mut from_server: LineReceiver,
    host: Arc<HostChannel>,
    to_host: Option<LineSender>,
    state: Arc<Relay>,
    lane: LineSender,
    to_server: ToServer,
) {
    let Some(to_host) = to_host else { return };
    while let Some(line) = from_server.recv().await {
        let mut routed = route(line, &host, &state);
        for notice in std::mem::take(&mut routed.notices) {
            tracing::warn!("{}", notice.text());
        }
        for response in std::mem::take(&mut routed.input) {
            if let Some(l) =
                era::intercept(&state.era, response, to_host.clone(), to_server.clone())
                && to_host.send(l).await.is_err()
            {
                return;
            }
        }
        if let Some(ForLane { line, ids, batch }) = routed.lane.take() {
            match lane.try_send(line) {
                Ok(()) => {}
                Err(SendError::Full(_)) => {
                    forget(&state, &ids, batch);
                    tracing::warn!(requests = ids.len(), "broker queue full; refused");
                    let busy = Error::new(ErrorKind::RateLimited, "too many requests in flight")
                        .with_retry_after_ms(RETRY_AFTER_MS);
                    routed
                        .refusals
                        .extend(ids.iter().map(|id| refusal(Some(id), busy.clone())));
                    routed.batch |= batch;
                }
                // The lane has stopped: the session is ending and broker work is dropped,
                // but what the server says to the host (answers to its last requests) still
                // passes.
                Err(SendError::Closed(_)) => {
                    forget(&state, &ids, batch);
                    tracing::debug!(
                        requests = ids.len(),
                        "the session is ending; dropped brokered requests"
                    );
                }
            }
        }
        for l in routed.refusal_lines() {
            if to_server.send(l).await.is_err() {
                return;
            }
        }
        for l in routed.host {
            if to_host.send(l).await.is_err() {
                return;
            }
        }
    }
}

/// Forgets brokered requests that never reached the lane.
fn forget(state: &Relay, ids: &[Value], batch: bool) {
    if !batch {
        for id in ids {
            state.brokered.forget(id);
        }
    }
}

/// What of one server line would be relayed to the host, routed as in a session whose
/// `initialize` has not been seen: for the fuzz oracle that checks nothing brokered, and
/// nothing we cannot read exactly, ever reaches the host.
pub(crate) fn host_part(line: &[u8]) -> Option<Vec<u8>> {
    let (tx, _rx) = crate::lines::line_channel(1, 1024);
    let host = HostChannel::new(tx);
    let state = Relay::new(None);
    let routed: Routed = route(line.to_vec(), &host, &state);
    // The oracle's session has seen no `initialize`, so at most the server's line goes on.
    routed.host.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::line_channel;
    use std::time::Duration;

    #[tokio::test]
    async fn the_host_still_gets_the_servers_lines_once_the_lane_has_stopped() {
        let (server_out, from_server) = line_channel(8, 1 << 20);
        let (host_tx, mut host_rx) = line_channel(8, 1 << 20);
        let host = Arc::new(HostChannel::new(host_tx));
        // The lane stopped: the session is ending.
        let (lane, lane_rx) = line_channel(8, 1 << 20);
        drop(lane_rx);
        let (to_server, _server_in) = line_channel(8, 1 << 20);
        let reader = tokio::spawn(read_server(
            from_server,
            host.clone(),
            host.sender(),
            Arc::new(Relay::new(None)),
            lane,
            to_server,
        ));
        // A brokered request, then the answer to one of the host's last requests.
        let roots = br#"{"jsonrpc":"2.0","id":"r","method":"roots/list"}"#;
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        for line in [roots.to_vec(), answer.to_vec()] {
            assert_eq!(server_out.send(line).await, Ok(()));
        }
        let got = tokio::time::timeout(Duration::from_secs(5), host_rx.recv()).await;
        assert_eq!(got.ok().flatten().as_deref(), Some(&answer[..]));
        reader.abort();
    }
}
