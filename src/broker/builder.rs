//! [`BrokerBuilder`]: a policy, a consent source and an audit log become a [`Broker`]; the
//! settings a host makes in code over the policy's values are in `builder/settings.rs`.

mod settings;

use super::{Broker, Notifications};
use crate::atomic::Sweeper;
use crate::audit::AuditLog;
use crate::config::Config;
use crate::consent::{ConsentProvider, ConsentSource, Elicitation};
use crate::locks::LockTable;
use crate::policy::{ConsentMode, Overrides, Policy, PolicyError};
use crate::state::BrokerState;
use crate::watch::WatchHub;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;

/// Builds a [`Broker`] from a [`Policy`], with settings made in code over the policy's values
/// (the request timeout, the consent timeout, the rate limits, sizes and counts: see
/// [`BrokerBuilder::timeout`] and the methods after it).
pub struct BrokerBuilder {
    policy: Policy,
    overrides: Overrides,
    consent: ConsentSource,
    audit: Option<AuditLog>,
    audit_stderr: bool,
    resumed_by: crate::watchdog::ResumedBy,
}

impl Broker {
    /// Starts building a broker for `policy`.
    pub fn builder(policy: Policy) -> BrokerBuilder {
        BrokerBuilder {
            policy,
            overrides: Overrides::default(),
            consent: ConsentSource::default(),
            audit: None,
            audit_stderr: false,
            resumed_by: crate::watchdog::ResumedBy::default(),
        }
    }
}

impl BrokerBuilder {
    /// Uses `provider` for consent requests no rule decides, instead of the policy's mode.
    pub fn consent_provider(mut self, provider: Arc<dyn ConsentProvider>) -> Self {
        self.consent.custom = Some(provider);
        self
    }

    /// Lets consent mode `elicit` ask the host: `make` builds its provider around the
    /// fallback the policy names (`consent.fallback`), anew at every reload.
    pub fn elicitation(mut self, make: Elicitation) -> Self {
        self.consent.elicitation = Some(make);
        self
    }

    /// Refuses, now and at every reload, a policy with a root at or above `dir` (the daemon's
    /// socket directory).
    pub(crate) fn keep_out_of_roots(mut self, dir: &std::path::Path) -> Self {
        self.overrides.keep_out(dir);
        self
    }

    /// Refuses, now and at every reload, a writable root that holds `file` (the console's
    /// state file).
    #[cfg(feature = "cli")]
    pub(crate) fn steer_from(mut self, file: &std::path::Path) -> Self {
        self.overrides.steer_from(file);
        self
    }

    /// Lays the user's run-time edits (the daemon's console) over this policy and every one
    /// a reload brings.
    #[cfg(feature = "cli")]
    pub(crate) fn layer(mut self, layer: crate::policy::Layer) -> Self {
        self.overrides.set_layer(layer);
        self
    }

    /// Asks `provider` (the daemon's console) in consent mode `ui`, and where no mode is
    /// chosen and there is no terminal.
    #[cfg(feature = "cli")]
    pub(crate) fn ui_consent(mut self, provider: Arc<dyn ConsentProvider>) -> Self {
        self.consent.ui = Some(provider);
        self
    }

    /// The consent mode when the policy sets none (the proxy's is `elicit`).
    pub fn default_consent_mode(mut self, mode: ConsentMode) -> Self {
        self.consent.default_mode = Some(mode);
        self
    }

    /// Uses `log` instead of the audit log the policy names (by default, the policy's
    /// `audit.file`, or `tracing` events when it names none: see [`AuditLog`]).
    pub fn audit_log(mut self, log: AuditLog) -> Self {
        self.audit = Some(log);
        self
    }

    /// Writes the audit log to stderr when the policy names no file, as the `fsbroker`
    /// binary does (a library host rarely wants this: its stderr is its own).
    pub fn audit_to_stderr_when_unset(mut self) -> Self {
        self.audit_stderr = true;
        self
    }

    /// Asks on the process's terminal, when it has one, where no consent mode is chosen, as
    /// the `fsbroker` binary does. A library broker never does unless told to (`tty` mode):
    /// a host's terminal is its own.
    pub(crate) fn terminal_when_unset(mut self) -> Self {
        self.consent.terminal_when_unset = true;
        self
    }

    /// Says what lifts a suspension in the face this broker runs in (the daemon's control
    /// socket, or only the session's end), for the refusals and the warning.
    #[cfg(any(feature = "cli", feature = "proxy"))]
    pub(crate) fn resumed_by(mut self, by: crate::watchdog::ResumedBy) -> Self {
        self.resumed_by = by;
        self
    }

    /// Validates the policy with the settings made in code over it (with the checks and
    /// messages of [`Policy::load`]; a setting at fault is named as the builder's, `<builder>`,
    /// with its policy key), opens the roots and builds the broker, with the stream of its
    /// outbound notifications.
    pub fn build(self) -> std::result::Result<(Broker, Notifications), PolicyError> {
        // A policy built in code is checked as a loaded one was, with the same messages, and
        // with the host's settings in it, which replace the policy's values.
        let applied = self.overrides.apply(self.policy.clone())?;
        applied
            .validate("<policy>")
            .map_err(|e| self.overrides.blame(e))?;
        // The recovery store's place before the roots, which may neither hold it nor lie
        // within it; the store itself is made only once the policy has passed.
        let mut overrides = self.overrides;
        let wanted = applied.recovery;
        let place = store_place(&wanted)?;
        if let Some(dir) = &place {
            overrides.keep_store_out(dir);
        }
        // The roots first: opening them also refuses an audit log beneath a writable root,
        // which must be known before the file is opened. The policy goes in as given: the
        // settings are laid over it there, and it is kept as given for later edits of them.
        let config = Config::open(self.policy, &self.consent, &overrides, None)?;
        let recovery = match place {
            Some(dir) => Some(Arc::new(open_store(&dir, wanted)?)),
            None => None,
        };
        let audit = match self.audit {
            Some(a) => a,
            None if self.audit_stderr => AuditLog::open_or_stderr(&config.policy.audit)
                .map_err(|e| err("audit.file".into(), format!("cannot open audit log: {e}")))?,
            None => AuditLog::open(&config.policy.audit)
                .map_err(|e| err("audit.file".into(), format!("cannot open audit log: {e}")))?,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = BrokerState {
            config: RwLock::new(Arc::new(config)),
            consent: self.consent,
            audit,
            sessions: Mutex::new(HashMap::new()),
            locks: LockTable::default(),
            sweeper: Sweeper::default(),
            hub: WatchHub::default(),
            outbound: tx,
            changes: tokio::sync::watch::Sender::new(0),
            activity: tokio::sync::watch::Sender::new(0),
            events: tokio::sync::broadcast::Sender::new(super::AUDIT_EVENTS),
            unavailable: Mutex::new(Default::default()),
            reloading: Mutex::new(()),
            recovery,
            lane: crate::lane::Lane::default(),
            resumed_by: self.resumed_by,
            suspended: Mutex::new(HashMap::new()),
        };
        Ok((
            Broker {
                inner: Arc::new(inner),
            },
            rx,
        ))
    }
}

/// The refusal of a built policy, naming the key at fault.
fn err(key: String, message: String) -> PolicyError {
    PolicyError {
        file: "<policy>".into(),
        line: None,
        key,
        message,
    }
}

/// Where the recovery store `wanted` goes: `None` when recovery is off; refused when no place
/// can be told.
fn store_place(
    wanted: &crate::policy::RecoveryPolicy,
) -> std::result::Result<Option<std::path::PathBuf>, PolicyError> {
    match wanted.store_dir() {
        _ if !wanted.enabled => Ok(None),
        Some(dir) => Ok(Some(dir)),
        None => {
            let why = crate::recovery::NO_PLACE;
            Err(err("recovery.dir".into(), why.into()))
        }
    }
}

/// Opens (making it) the recovery store at `dir`, under `wanted`'s bounds.
fn open_store(
    dir: &std::path::Path,
    wanted: crate::policy::RecoveryPolicy,
) -> std::result::Result<crate::recovery::RecoveryStore, PolicyError> {
    crate::recovery::RecoveryStore::open_at(dir, wanted).map_err(|e| {
        err(
            "recovery.dir".into(),
            format!(
                "cannot open the recovery store {}: {e}; set recovery.dir to a \
                 directory of this user's, or turn recovery off ([recovery] \
                 enabled = false)",
                dir.display()
            ),
        )
    })
}
