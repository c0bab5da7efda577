//! The host's lines: read, judged (`judge::host`), and sent where the verdict says: to the
//! server (maybe rewritten), or answered by the proxy itself.

use super::host_channel::HostChannel;
use super::judge::host::route;
use super::link::ToServer;
use super::relay::Relay;
use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncRead, BufReader};

/// Reads the host's lines until its input ends.
pub(super) async fn read_host<R: AsyncRead + Unpin>(
    host_in: R,
    max_line: usize,
    host: Arc<HostChannel>,
    state: Arc<Relay>,
    capabilities: Value,
    to_server: ToServer,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, host_in);
    loop {
        let line = match next_frame(&mut reader, max_line).await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(
                    bytes = n,
                    limit = max_line,
                    "dropped an over-long message from the host"
                );
                if let (Ok(v), Some(to_host)) = (
                    serde_json::to_vec(&jsonrpc::too_long(max_line).to_json()),
                    host.sender(),
                ) {
                    let _ = to_host.send(v).await;
                }
                continue;
            }
            Ok(Frame::Eof) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the host's input");
                return;
            }
        };
        let routed = route(line, &host, &state, &capabilities);
        if !routed.host.is_empty()
            && let Some(to_host) = host.sender()
        {
            for l in routed.host {
                if to_host.send(l).await.is_err() {
                    break;
                }
            }
        }
        for l in routed.server {
            if to_server.send_marked(l, Some(routed.wire)).await.is_err() {
                return;
            }
        }
    }
}
