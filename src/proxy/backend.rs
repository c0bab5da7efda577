//! Where the proxy's brokered requests go: a broker of its own, or a session on the user's
//! daemon (`proxy --daemon`). The judge decides what is brokered either way; only the lane
//! that carries it differs.

use super::elicit::ElicitConsent;
use super::era::Era;
use super::host_channel::HostChannel;
use super::link::{ToServer, Wire};
use super::relay::Relay;
use crate::broker::{Broker, Notifications};
use crate::consent::{BoxFuture, ConsentAnswer, ConsentProvider, ConsentRequest, DenyConsent};
use crate::daemon::attached::{self, Asker, Attach, Call, Described, Naming};
use crate::lines::LineReceiver;
use crate::policy::EraMode;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// Where brokered requests go.
pub(crate) enum Backend {
    /// A broker of the proxy's own, with its stream of notifications.
    Own(Broker, Notifications),
    /// A session on the daemon, which described itself as `Described`.
    Daemon(Described, Attach),
}

impl Backend {
    /// The longest line the broker takes.
    pub(crate) fn max_line(&self) -> usize {
        match self {
            Backend::Own(b, _) => b.policy().limits.max_line_bytes.get(),
            Backend::Daemon(d, _) => d.max_line,
        }
    }

    /// The policy's era rule.
    pub(super) fn era(&self) -> EraMode {
        match self {
            Backend::Own(b, _) => b.policy().proxy.era,
            Backend::Daemon(d, _) => d.era,
        }
    }

    /// The client capabilities added to the host's `initialize`.
    pub(super) fn capabilities(&self) -> Value {
        match self {
            Backend::Own(b, _) => b.capabilities(),
            Backend::Daemon(d, _) => d.capabilities.clone(),
        }
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

/// Carries the lane's lines, and the proxy's own roots questions (`calls`), to the daemon,
/// and what the daemon sends back to the server, until the lane ends or `stop` is raised.
pub(super) async fn run_daemon_lane(
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
    let answered = Arc::new(move |id: &Value| {
        drop(answered_state.brokered.watch(id));
    });
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    attached::run::<Option<Wire>>(
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
