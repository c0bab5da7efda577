//! A broker of a proxy's own, reached as the daemon is: through a door that opens an
//! in-memory line pair instead of a socket, on whose far end the daemon's own session code
//! runs (`attach::run`, `attach::follow`, `attach::describe`). A proxy therefore has one way
//! to a broker, whoever holds it: the same description, the same session loop, the same
//! consent questions beside the answers, the same cancellation rule.

use super::attach;
use super::line;
use super::protocol::Request;
use super::questions::Attachments;
use crate::attaching::{Door, Opened};
use crate::broker::Broker;
use crate::consent::{BoxFuture, Elicitation};
use crate::framing::{Frame, next_frame};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{BufReader, DuplexStream};
use tokio::sync::watch;

/// The bytes each direction of an in-memory pair holds before its writer waits: room for a
/// burst of answers, as a socket's buffer gives.
const PAIR_BYTES: usize = 256 * 1024;

/// The sessions of a broker served in this process, before the broker is built: its consent
/// questions go to whoever attaches, so the broker is built with [`Self::elicitation`].
#[derive(Default)]
pub(crate) struct InProcess {
    attachments: Arc<Attachments>,
}

impl InProcess {
    /// Consent mode `elicit` for the broker: asked of the attached session's asker (the
    /// proxy's host), else of the fallback, as the daemon asks.
    pub(crate) fn elicitation(&self) -> Elicitation {
        self.attachments.around()
    }

    /// The door to `broker`'s sessions. The broker's sessions last as long as their
    /// connections, which end with the door's last holder.
    pub(crate) fn door(self, broker: Broker) -> Arc<dyn Door> {
        let (stop, stopped) = watch::channel(false);
        Arc::new(Memory {
            broker,
            attachments: self.attachments,
            _stop: stop,
            stopped,
        })
    }
}

/// See [`InProcess::door`].
struct Memory {
    broker: Broker,
    attachments: Arc<Attachments>,
    /// Dropped with the door, which ends what is still served.
    _stop: watch::Sender<bool>,
    stopped: watch::Receiver<bool>,
}

impl Door for Memory {
    fn open(&self) -> BoxFuture<'_, Result<Opened, String>> {
        let (near, far) = tokio::io::duplex(PAIR_BYTES);
        let (broker, attachments) = (self.broker.clone(), self.attachments.clone());
        tokio::spawn(serve(broker, attachments, far, self.stopped.clone()));
        let (reader, writer) = tokio::io::split(near);
        Box::pin(async move {
            Ok(Opened {
                reader: Box::new(reader),
                writer: Box::new(writer),
                hello: None,
            })
        })
    }

    fn name(&self) -> String {
        "the proxy's broker".to_owned()
    }

    fn socket(&self) -> Option<&Path> {
        None
    }
}

/// Serves one connection: its first line is `describe` (perhaps following) or `attach`, as on
/// the daemon's socket after the key; nothing else is taken.
async fn serve(
    broker: Broker,
    attachments: Arc<Attachments>,
    far: DuplexStream,
    stop: watch::Receiver<bool>,
) {
    let (read, mut write) = tokio::io::split(far);
    let mut reader = BufReader::new(read);
    let first = match next_frame(&mut reader, line::MAX_LINE).await {
        Ok(Frame::Line(l)) => l,
        _ => return,
    };
    let answer = match Request::parse(&first) {
        Ok(Request::Attach(request)) => match request.name() {
            Ok(_) => {
                let pid = i32::try_from(std::process::id()).ok();
                return attach::run(&broker, &attachments, request, pid, reader, write, stop).await;
            }
            Err(message) => line::error(message),
        },
        Ok(Request::Describe(d)) if d.follow => {
            return attach::follow(&broker, reader, write, stop).await;
        }
        Ok(Request::Describe(_)) => attach::describe(&broker),
        Ok(other) => line::error(format!(
            "a broker in process takes describe and attach, not {}",
            other.op()
        )),
        Err(message) => line::error(message),
    };
    let _ = line::send(&mut write, &answer).await;
}
