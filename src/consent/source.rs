//! Which provider decides a session's consent requests: an embedder's, or the one the
//! policy's mode names, chosen anew for every policy put in force.

use super::{
    AutoConsent, BoxFuture, CommandConsent, ConsentDecision, ConsentProvider, ConsentRequest,
    DenyConsent, Elicitation, TtyConsent,
};
use crate::policy::ConsentMode;
use std::sync::Arc;
use std::time::Duration;

/// Where a broker's consent provider comes from, decided anew for every policy put in force,
/// so that a reload that changes `consent.mode` or `consent.fallback` takes effect.
#[derive(Clone, Default)]
pub(crate) struct ConsentSource {
    /// An embedder's provider, which replaces the policy's mode.
    pub custom: Option<Arc<dyn ConsentProvider>>,
    /// The provider for mode `elicit`; without it, `elicit` is its fallback.
    pub elicitation: Option<Elicitation>,
    /// The mode when the policy sets none.
    pub default_mode: Option<ConsentMode>,
    /// The provider of mode `ui`, the daemon's console; it also answers where no mode is
    /// chosen and there is no terminal. Without it, `ui` denies, saying why.
    pub ui: Option<Arc<dyn ConsentProvider>>,
    /// Whether nobody chosen means the terminal, when the process has one: the `fsbroker`
    /// binary's default. A library host's terminal is its own (a coding agent's screen), so
    /// there nobody chosen means nobody asked.
    pub terminal_when_unset: bool,
}

impl std::fmt::Debug for ConsentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsentSource")
            .field("custom", &self.custom.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .field("default_mode", &self.default_mode)
            .field("ui", &self.ui.is_some())
            .field("terminal_when_unset", &self.terminal_when_unset)
            .finish()
    }
}

impl ConsentSource {
    /// The provider for the `[consent]` section `config`.
    pub(crate) fn provider(
        &self,
        config: &crate::policy::ConsentPolicy,
    ) -> Arc<dyn ConsentProvider> {
        if let Some(custom) = &self.custom {
            return custom.clone();
        }
        let wait = Duration::from_secs(config.timeout_secs.get());
        match config.mode.as_ref().or(self.default_mode.as_ref()) {
            Some(ConsentMode::Elicit) => {
                let fallback = provider_for(config.fallback.as_ref(), wait, self.unset());
                match &self.elicitation {
                    Some(make) => make(fallback),
                    None => fallback,
                }
            }
            mode => provider_for(mode, wait, self.unset()),
        }
    }

    /// Who answers where nobody is chosen.
    fn unset(&self) -> Unset<'_> {
        Unset {
            terminal: self.terminal_when_unset,
            ui: self.ui.as_ref(),
        }
    }
}

/// Who answers where no mode is chosen: the terminal when allowed and there is one, else
/// the console when there is one, else nobody.
#[derive(Clone, Copy)]
pub(crate) struct Unset<'a> {
    terminal: bool,
    ui: Option<&'a Arc<dyn ConsentProvider>>,
}

/// The provider for a configured mode; `wait` is the consent time limit, which the tty prompt
/// also uses. An unset mode (and `elicit` here, where no host can be asked) is `unset`'s
/// choice: the terminal, the console, or a refusal that says why once. Mode `ui` without a
/// console refuses the same way.
pub(crate) fn provider_for(
    mode: Option<&ConsentMode>,
    wait: Duration,
    unset: Unset<'_>,
) -> Arc<dyn ConsentProvider> {
    match mode {
        Some(ConsentMode::Ui) => match unset.ui {
            Some(ui) => ui.clone(),
            None => Arc::new(NobodyToAsk),
        },
        Some(ConsentMode::Auto) => Arc::new(AutoConsent),
        Some(ConsentMode::Deny) => Arc::new(DenyConsent),
        Some(ConsentMode::Tty) => Arc::new(TtyConsent::new().with_wait(wait)),
        Some(ConsentMode::Command(p)) => Arc::new(CommandConsent::new(p.clone())),
        None | Some(ConsentMode::Elicit) => {
            if unset.terminal && TtyConsent::available() {
                Arc::new(TtyConsent::new().with_wait(wait))
            } else if let Some(ui) = unset.ui {
                ui.clone()
            } else {
                Arc::new(NobodyToAsk)
            }
        }
    }
}

/// Denies, because nobody can be asked: no mode was chosen, the host cannot elicit and there
/// is no terminal (the usual case under a GUI host). Unlike mode `deny`, which someone chose,
/// this refusal surprises, so the first one of the process says why at `warn`, with the fix;
/// once per process, not per session or per policy, since the cause and the fix are the
/// process's configuration and repeating them would bury other warnings.
#[derive(Debug, Clone, Copy, Default)]
struct NobodyToAsk;

/// Whether this process has already said why nobody was asked.
static NOBODY_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl ConsentProvider for NobodyToAsk {
    fn decide<'a>(&'a self, _request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        if !NOBODY_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                "consent denied: nobody could be asked (no consent mode or fallback was chosen, \
                 and there is neither a host that can show a form nor a terminal). Attach to \
                 the daemon (`--daemon`) to answer in its console (`fsbroker console`); or \
                 choose who answers with `--consent MODE` (auto, deny, tty, command:PROGRAM) \
                 or, with the proxy's elicit, `--consent-fallback MODE`; a host that embeds \
                 the broker gives a \
                 consent provider or a mode (`BrokerBuilder::consent_provider`, \
                 `default_consent_mode`); or decide paths in the policy with a \
                 [[consent.rules]] entry. Said once per process."
            );
        }
        Box::pin(async { ConsentDecision::deny() })
    }
}
