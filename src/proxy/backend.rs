//! Where the proxy's brokered requests go: a session on a broker, reached through its door
//! (the user's daemon for `proxy --daemon`, else a broker of the proxy's own, in process).
//! The judge decides what is brokered; the lane carries it, in order, with the proxy's own
//! roots questions beside it.

use super::elicit::ElicitConsent;
use super::era::Era;
use super::host_channel::HostChannel;
use super::link::{ToServer, Wire};
use super::relay::Relay;
use crate::attaching::{self, Asker, Attach, Call, Described, Naming};
use crate::consent::{BoxFuture, ConsentAnswer, ConsentProvider, ConsentRequest, DenyConsent};
use crate::lines::LineReceiver;
use crate::policy::EraMode;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// Where brokered requests go: a broker that described itself as `described`, and the
/// session to open on it.
pub(crate) struct Backend {
    /// What the broker said of itself.
    pub(crate) described: Described,
    /// The session, before it attaches.
    pub(crate) attach: Attach,
}

impl Backend {
    /// The longest line the broker takes.
    pub(crate) fn max_line(&self) -> usize {
        self.described.max_line
    }

    /// The policy's era rule.
    pub(super) fn era(&self) -> EraMode {
        self.described.era
    }

    /// The client capabilities added to the host's `initialize`.
    pub(super) fn capabilities(&self) -> Value {
        self.described.capabilities.clone()
    }
}

/// The session's name and era, as the proxy learns them.
struct Learned(Arc<Relay>);

impl Naming for Learned {
    fn name(&self) -> String {
        self.0.session_id()
    }

    fn era(&self) -> Option<String> {
        self.0.era.era().map(|e| {
            match e {
                Era::Legacy => "legacy",
                Era::Modern => "modern",
            }
            .to_owned()
        })
    }
}

/// The host, asked the daemon's consent questions when it can show a form.
pub(crate) struct HostAsker(pub(super) Arc<HostChannel>);

impl Asker for HostAsker {
    fn ask(&self, request: ConsentRequest) -> BoxFuture<'static, Option<ConsentAnswer>> {
        let host = self.0.clone();
        Box::pin(async move {
            if !host.can_elicit() {
                return None;
            }
            // The fallback is never asked: the host was found able to elicit just now.
            let ask = ElicitConsent::new(host, Arc::new(DenyConsent));
            Some(ask.decide_each(&request).await)
        })
    }
}

/// Carries the lane's lines (the server's brokered requests and its cancellations of them),
/// and the proxy's own roots questions (`calls`), to the broker, and what the broker sends
/// back to the server, until the lane ends or `stop` is raised.
pub(super) async fn run_lane(
    attach: Attach,
    state: Arc<Relay>,
    lane: LineReceiver,
    calls: mpsc::Receiver<Call>,
    to_server: ToServer,
    mut stop: watch::Receiver<bool>,
) {
    let answered_state = state.clone();
    // An answered request is forgotten, and remembered as lately answered: a cancellation
    // that crosses its answer is then not the host's either.
    let answered = Arc::new(move |id: &Value| answered_state.brokered.answered(id));
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    attaching::run::<Option<Wire>>(
        attach,
        Arc::new(Learned(state)),
        lane,
        calls,
        to_server,
        answered,
        stopped,
    )
    .await;
}
