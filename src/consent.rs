//! Consent: the grants a session holds, and the providers that decide `files/consent`.
//!
//! A grant covers a mount-form path and everything beneath it, with `read` or `write` access.
//! Revocation leaves a mark, so that an operation under a revoked path fails with `revoked`
//! rather than `no_consent` until a new grant lifts the mark.

use crate::error::{Error, Reason, Result};
use crate::path::MountPath;
use crate::policy::ConsentMode;
use crate::root::Access;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod command;
mod tty;

pub use command::CommandConsent;
pub use tty::TtyConsent;

/// A boxed future, for the object-safe [`ConsentProvider`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a provider is asked: paths already known to lie inside the roots this server sees.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsentRequest {
    /// The server session asking.
    pub server_id: String,
    /// The server's explanation, as sent (providers must sanitise it before display).
    pub message: Option<String>,
    /// The paths asked for, in mount form.
    pub paths: Vec<MountPath>,
    /// Those of `paths` that are existing directories: a grant on one covers everything
    /// beneath it, which the user should be told.
    pub folders: Vec<MountPath>,
    /// The access asked for (already capped by what the roots allow).
    pub access: Access,
}

/// A provider's answer. Paths not in the request are ignored, and the access is capped by
/// what was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsentDecision {
    /// The approved subset of the requested paths.
    pub approved: Vec<MountPath>,
    /// The access granted for them.
    pub access: Access,
}

impl ConsentDecision {
    /// A refusal of everything.
    pub fn deny() -> Self {
        ConsentDecision {
            approved: Vec::new(),
            access: Access::Read,
        }
    }

    /// An approval of every requested path at the requested access.
    pub fn approve_all(request: &ConsentRequest) -> Self {
        ConsentDecision {
            approved: request.paths.clone(),
            access: request.access,
        }
    }
}

/// Decides consent requests that no policy rule decided. Embedders implement this to show
/// their own dialog; the broker applies the time limit and denies when it passes.
///
/// ```
/// use mcp_fsbroker::consent::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest};
/// struct ApproveReads;
/// impl ConsentProvider for ApproveReads {
///     fn decide<'a>(&'a self, req: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
///         Box::pin(async move {
///             ConsentDecision { approved: req.paths.clone(), access: mcp_fsbroker::Access::Read }
///         })
///     }
/// }
/// ```
pub trait ConsentProvider: Send + Sync + 'static {
    /// Decides one request.
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision>;
}

/// Approves every request (mode `auto`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoConsent;

impl ConsentProvider for AutoConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move { ConsentDecision::approve_all(request) })
    }
}

/// Denies every request (mode `deny`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyConsent;

impl ConsentProvider for DenyConsent {
    fn decide<'a>(&'a self, _request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async { ConsentDecision::deny() })
    }
}

/// Builds the provider for mode `elicit` around its fallback (the provider for hosts that
/// cannot elicit). A transport that can ask its host supplies one, such as the proxy.
pub type Elicitation =
    Arc<dyn Fn(Arc<dyn ConsentProvider>) -> Arc<dyn ConsentProvider> + Send + Sync>;

/// Where a broker's consent provider comes from, decided anew for every policy put in force,
/// so that a reload that changes `consent.mode` or `consent.fallback` takes effect.
#[derive(Clone, Default)]
pub struct ConsentSource {
    /// An embedder's provider, which replaces the policy's mode.
    pub custom: Option<Arc<dyn ConsentProvider>>,
    /// The provider for mode `elicit`; without it, `elicit` is its fallback.
    pub elicitation: Option<Elicitation>,
    /// The mode when the policy sets none.
    pub default_mode: Option<ConsentMode>,
}

impl std::fmt::Debug for ConsentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsentSource")
            .field("custom", &self.custom.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .field("default_mode", &self.default_mode)
            .finish()
    }
}

impl ConsentSource {
    /// The provider for the `[consent]` section `config`.
    pub fn provider(&self, config: &crate::policy::ConsentConfig) -> Arc<dyn ConsentProvider> {
        if let Some(custom) = &self.custom {
            return custom.clone();
        }
        let wait = Duration::from_secs(config.timeout_secs.get());
        match config.mode.as_ref().or(self.default_mode.as_ref()) {
            Some(ConsentMode::Elicit) => {
                let fallback = provider_for(config.fallback.as_ref(), wait);
                match &self.elicitation {
                    Some(make) => make(fallback),
                    None => fallback,
                }
            }
            mode => provider_for(mode, wait),
        }
    }
}

/// The provider for a configured mode; `wait` is the consent time limit, which the tty prompt
/// also uses. An unset mode is `tty` when this process has a controlling terminal, else `deny`;
/// so is `elicit` here, where no host can be asked (see [`ConsentSource`]).
pub fn provider_for(mode: Option<&ConsentMode>, wait: Duration) -> Arc<dyn ConsentProvider> {
    match mode {
        Some(ConsentMode::Auto) => Arc::new(AutoConsent),
        Some(ConsentMode::Deny) => Arc::new(DenyConsent),
        Some(ConsentMode::Tty) => Arc::new(TtyConsent::new().with_wait(wait)),
        Some(ConsentMode::Command(p)) => Arc::new(CommandConsent::new(p.clone())),
        None | Some(ConsentMode::Elicit) => {
            if TtyConsent::available() {
                Arc::new(TtyConsent::new().with_wait(wait))
            } else {
                Arc::new(DenyConsent)
            }
        }
    }
}

/// One grant held by a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The path granted, with everything beneath it.
    pub path: MountPath,
    /// What it allows.
    pub access: Access,
    /// Whether it comes from the policy (kept across sessions) rather than a consent request.
    pub standing: bool,
}

/// The grants of one session, with revocation marks.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    grants: Vec<Grant>,
    revoked: Vec<MountPath>,
}

/// Most grants one session may hold; consent requests beyond it replace nothing and fail.
pub const MAX_GRANTS: usize = 4096;

impl Grants {
    /// Checks that `path` is covered for `need`.
    ///
    /// Errors: `PERMISSION_DENIED` with `revoked` under a revocation mark, `read_only` when
    /// only read grants cover a write, `no_consent` otherwise.
    pub fn check(&self, path: &MountPath, need: Access) -> Result<()> {
        if self.revoked.iter().any(|r| path.starts_with(r)) {
            return Err(Error::denied(Reason::Revoked).with_path(path.to_string()));
        }
        let best = self
            .grants
            .iter()
            .filter(|g| path.starts_with(&g.path))
            .map(|g| g.access)
            .max();
        match best {
            Some(a) if a >= need => Ok(()),
            Some(_) => Err(Error::denied(Reason::ReadOnly).with_path(path.to_string())),
            None => Err(Error::denied(Reason::NoConsent).with_path(path.to_string())),
        }
    }

    /// Whether `path` lies on the way to a grant: some grant is at or beneath it. A walk may
    /// look at such a place to reach the grant (the grant itself says it is there).
    pub fn leads_to_grant(&self, path: &MountPath) -> bool {
        !self.revoked.iter().any(|r| path.starts_with(r))
            && self.grants.iter().any(|g| g.path.starts_with(path))
    }

    /// Adds a grant, lifting revocation marks at or beneath it. Returns false when the
    /// session already holds [`MAX_GRANTS`] grants.
    pub fn add(&mut self, grant: Grant) -> bool {
        self.revoked.retain(|r| !r.starts_with(&grant.path));
        if let Some(g) = self
            .grants
            .iter_mut()
            .find(|g| g.path == grant.path && g.standing == grant.standing)
        {
            g.access = g.access.max(grant.access);
            return true;
        }
        if self.grants.len() >= MAX_GRANTS {
            return false;
        }
        self.grants.push(grant);
        true
    }

    /// Revokes grants at or beneath `path` (all grants when `None`) and marks `path` revoked.
    /// Returns the number of grants removed.
    pub fn revoke(&mut self, path: Option<&MountPath>) -> usize {
        let before = self.grants.len();
        match path {
            None => {
                let mounts: Vec<MountPath> = self
                    .grants
                    .iter()
                    .map(|g| MountPath {
                        mount: g.path.mount.clone(),
                        rel: crate::path::RelPath::root(),
                    })
                    .collect();
                self.grants.clear();
                for m in mounts {
                    if !self.revoked.contains(&m) {
                        self.revoked.push(m);
                    }
                }
            }
            Some(p) => {
                self.grants.retain(|g| !g.path.starts_with(p));
                if self.revoked.len() < MAX_GRANTS && !self.revoked.contains(p) {
                    self.revoked.push(p.clone());
                }
            }
        }
        before - self.grants.len()
    }

    /// Removes the standing grants, returning them (a reload puts the new ones in).
    pub fn remove_standing(&mut self) -> Vec<Grant> {
        let (standing, rest) = std::mem::take(&mut self.grants)
            .into_iter()
            .partition(|g| g.standing);
        self.grants = rest;
        standing
    }

    /// How many more grants the session may hold.
    pub fn room(&self) -> usize {
        MAX_GRANTS.saturating_sub(self.grants.len())
    }
}

/// Invisible formatting characters (bidirectional overrides and isolates, zero-width
/// characters) that could make a path on screen read differently from the path granted.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Replaces control and invisible formatting characters, so a server can neither drive the
/// terminal with escape sequences nor disguise what it asks for.
pub(crate) fn sanitise(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| {
            if c.is_control() || is_format(c) {
                '?'
            } else {
                c
            }
        })
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

/// A requested path as shown to the user: sanitised, and a folder named as such, since a
/// grant on it covers everything beneath.
pub(crate) fn describe(request: &ConsentRequest, path: &MountPath) -> String {
    let shown = sanitise(&path.to_string(), 4096);
    if path.rel.is_root() {
        format!("{shown}  (the whole root folder, everything in it)")
    } else if request.folders.contains(path) {
        format!("{shown}  (a folder, everything in it)")
    } else {
        shown
    }
}
