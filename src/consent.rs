//! Consent: the grants a session holds, and the providers that decide `files/consent`.
//!
//! A grant covers a mount-form path and everything beneath it, with `read` or `write` access.
//! Revocation leaves a mark, so that an operation under a revoked path fails with `revoked`
//! rather than `no_consent` until a new grant lifts the mark.

use crate::access::Access;
use crate::error::{Error, Reason, Result};
use crate::path::MountPath;
use crate::policy::ConsentMode;
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
    /// The host path of each of `paths`, in the same order (its root's directory, resolved,
    /// joined with the path beneath it): for a host's dialog, which may show where the files
    /// are. It never reaches the server.
    pub host_paths: Vec<std::path::PathBuf>,
}

impl ConsentRequest {
    /// The host path of `path`, one of the request's `paths`.
    pub fn host_path(&self, path: &MountPath) -> Option<&std::path::Path> {
        let i = self.paths.iter().position(|p| p == path)?;
        self.host_paths.get(i).map(std::path::PathBuf::as_path)
    }
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

/// One approved path of a [`ConsentAnswer`]: the user may narrow a requested folder to a
/// place inside it and lower write to read, never more.
#[derive(Debug, Clone, PartialEq)]
pub struct PathChoice {
    /// The requested path this approves (one of the request's `paths`).
    pub asked: MountPath,
    /// What the grant covers: `asked` itself, or a place beneath it. A place that is not
    /// at or beneath `asked` is never granted (the whole choice is then a refusal).
    pub granted: MountPath,
    /// The access for it, capped by what was asked.
    pub access: Access,
}

/// A provider's answer path by path: the approved paths, each with its own access and
/// perhaps narrowed; every requested path not listed is denied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsentAnswer {
    /// The approved paths.
    pub approved: Vec<PathChoice>,
}

impl ConsentAnswer {
    /// A refusal of everything.
    pub fn deny() -> Self {
        ConsentAnswer::default()
    }
}

impl From<ConsentDecision> for ConsentAnswer {
    /// The same answer for every approved path, nothing narrowed.
    fn from(d: ConsentDecision) -> Self {
        ConsentAnswer {
            approved: d
                .approved
                .into_iter()
                .map(|p| PathChoice {
                    granted: p.clone(),
                    asked: p,
                    access: d.access,
                })
                .collect(),
        }
    }
}

impl From<ConsentAnswer> for ConsentDecision {
    /// The paths approved whole, at the lowest access any of them got: a provider asked
    /// through [`ConsentProvider::decide`] can say no more than this, and the flattening
    /// only ever grants less than the answer.
    fn from(a: ConsentAnswer) -> Self {
        let whole: Vec<&PathChoice> = a.approved.iter().filter(|c| c.granted == c.asked).collect();
        ConsentDecision {
            access: whole.iter().map(|c| c.access).min().unwrap_or(Access::Read),
            approved: whole.into_iter().map(|c| c.asked.clone()).collect(),
        }
    }
}

/// The place a user narrowed `asked` to by typing `typed`, a path relative to `asked`
/// (`lib` or `lib/sub`), read with the one path parser. `None` (a refusal) when it is empty,
/// absolute, a URI, or leads anywhere but at or beneath `asked` (`../x`).
pub(crate) fn narrowed(asked: &MountPath, typed: &str) -> Option<MountPath> {
    let typed = typed.trim();
    if typed.is_empty() || typed.starts_with('/') || typed.contains(':') {
        return None;
    }
    match crate::path::RequestPath::parse(&format!("{asked}/{typed}")) {
        Ok(crate::path::RequestPath::Mount { mount, rel })
            if mount == asked.mount.as_str() && rel.starts_with(&asked.rel) =>
        {
            Some(MountPath {
                mount: asked.mount.clone(),
                rel,
            })
        }
        _ => None,
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

    /// Decides one request path by path: what the broker asks. By default, the answer of
    /// [`ConsentProvider::decide`] for every path; a provider that lets the user choose per
    /// path, narrow a folder or lower write to read overrides it.
    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        Box::pin(async move { self.decide(request).await.into() })
    }
}

/// A consent provider made of an async closure: it gets the request (its own copy) and
/// answers with a [`ConsentDecision`] (every path at one access) or a [`ConsentAnswer`]
/// (path by path). The broker applies the time limit and denies when it passes.
///
/// ```
/// use mcp_fsbroker::consent::{self, ConsentDecision};
/// let docs: mcp_fsbroker::path::MountPath = "proj/docs".parse().unwrap();
/// let provider = consent::from_fn(move |req| {
///     let docs = docs.clone();
///     async move {
///         ConsentDecision {
///             approved: req.paths.iter().filter(|p| p.starts_with(&docs)).cloned().collect(),
///             access: mcp_fsbroker::Access::Read,
///         }
///     }
/// });
/// # let _ = provider;
/// ```
pub fn from_fn<F, Fut, D>(decide: F) -> Arc<dyn ConsentProvider>
where
    F: Fn(ConsentRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = D> + Send + 'static,
    D: Into<ConsentAnswer> + 'static,
{
    Arc::new(FromFn(decide))
}

/// The provider [`from_fn`] makes.
struct FromFn<F>(F);

impl<F, Fut, D> ConsentProvider for FromFn<F>
where
    F: Fn(ConsentRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = D> + Send + 'static,
    D: Into<ConsentAnswer> + 'static,
{
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        let answer = (self.0)(request.clone());
        Box::pin(async move { answer.await.into().into() })
    }

    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        let answer = (self.0)(request.clone());
        Box::pin(async move { answer.await.into() })
    }
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
pub(crate) struct ConsentSource {
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
pub(crate) fn provider_for(mode: Option<&ConsentMode>, wait: Duration) -> Arc<dyn ConsentProvider> {
    match mode {
        Some(ConsentMode::Auto) => Arc::new(AutoConsent),
        Some(ConsentMode::Deny) => Arc::new(DenyConsent),
        Some(ConsentMode::Tty) => Arc::new(TtyConsent::new().with_wait(wait)),
        Some(ConsentMode::Command(p)) => Arc::new(CommandConsent::new(p.clone())),
        None | Some(ConsentMode::Elicit) => {
            if TtyConsent::available() {
                Arc::new(TtyConsent::new().with_wait(wait))
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
                 and there is neither a host that can show a form nor a terminal). Choose who answers with \
                 `--consent MODE` (auto, deny, tty, command:PROGRAM) or, with the proxy's \
                 elicit, `--consent-fallback MODE`; or decide paths in the policy with a \
                 [[consent.rules]] entry. Said once per process."
            );
        }
        Box::pin(async { ConsentDecision::deny() })
    }
}

/// One grant held by a session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    /// The path granted, with everything beneath it.
    pub path: MountPath,
    /// What it allows.
    pub access: Access,
    /// Whether it comes from the policy (kept across sessions) rather than a consent request.
    pub standing: bool,
}

/// The grants of one session, with revocation marks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
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
    pub(crate) fn check(&self, path: &MountPath, need: Access) -> Result<()> {
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
    pub(crate) fn leads_to_grant(&self, path: &MountPath) -> bool {
        !self.revoked.iter().any(|r| path.starts_with(r))
            && self.grants.iter().any(|g| g.path.starts_with(path))
    }

    /// Adds a grant, lifting revocation marks at or beneath it. Returns false when the
    /// session already holds [`MAX_GRANTS`] grants.
    pub(crate) fn add(&mut self, grant: Grant) -> bool {
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
    pub(crate) fn revoke(&mut self, path: Option<&MountPath>) -> usize {
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
    pub(crate) fn remove_standing(&mut self) -> Vec<Grant> {
        let (standing, rest) = std::mem::take(&mut self.grants)
            .into_iter()
            .partition(|g| g.standing);
        self.grants = rest;
        standing
    }

    /// How many more grants the session may hold.
    pub(crate) fn room(&self) -> usize {
        MAX_GRANTS.saturating_sub(self.grants.len())
    }
}

/// Whether `c` must not reach a user's screen as it is: a character of general category
/// Cc (control), Cf (format: bidirectional overrides and isolates, zero-width characters,
/// tag characters, the zero-width joiner), Zl or Zp (line and paragraph separators, which
/// many interfaces show as line breaks), Co (private use: no agreed glyph) or Cn
/// (unassigned, noncharacters: meaning unknown to this table, so refused). The category
/// comes from the Unicode tables, never from a hand-written list, so that a whole class is
/// covered, including what a list forgets.
fn is_hidden(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Unassigned
            | G::Surrogate
    )
}

/// Replaces every character a user cannot see as it is (see [`is_hidden`]) with `?`, so a
/// server can neither drive the terminal with escape sequences nor disguise what it asks for,
/// and cuts the text at `max` characters. This is the one sanitiser for everything a consent
/// prompt shows. A zero-width joiner is format (Cf), so an emoji ZWJ sequence is shown as its
/// parts with `?` between them; combining marks, variation selectors and emoji modifiers are
/// visible categories (M, Sk) and pass.
pub(crate) fn sanitise(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if is_hidden(c) { '?' } else { c })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `c` alone is shown as `?`.
    fn replaced(c: char) -> bool {
        sanitise(&c.to_string(), 10) == "?"
    }

    #[test]
    fn finding_11_sanitise_hides_the_review_s_characters_and_what_the_old_list_hid() {
        let ranges: [(u32, u32); 15] = [
            // Found by the review.
            (0xE0020, 0xE007F),
            (0x206A, 0x206F),
            (0x1BCA0, 0x1BCA3),
            (0x1D173, 0x1D17A),
            (0x2028, 0x2029),
            // The old hand-written list, which the categories must still cover.
            (0x00AD, 0x00AD),
            (0x061C, 0x061C),
            (0x180E, 0x180E),
            (0x200B, 0x200F),
            (0x202A, 0x202E),
            (0x2060, 0x2069),
            (0xFEFF, 0xFEFF),
            (0xFFF9, 0xFFFB),
            // Controls, and private use.
            (0x0000, 0x001F),
            (0x007F, 0x009F),
        ];
        for (a, b) in ranges {
            for c in (a..=b).filter_map(char::from_u32) {
                assert!(replaced(c), "U+{:04X} is shown", c as u32);
            }
        }
        for u in [
            0xE000, 0xF8FF, 0xF0000, 0x10FFFD, 0x378, 0xFDD0, 0xFFFE, 0x10FFFF,
        ] {
            let c = char::from_u32(u).unwrap_or_default();
            assert!(replaced(c), "U+{u:04X} is shown");
        }
    }

    #[test]
    fn sanitise_keeps_ordinary_text_in_any_script_and_cuts_long_text() {
        let text = "Grüße e\u{301} Ελληνικά Кириллица 日本語 中文 한국어 العربية עברית हिन्दी ไทย \
                    😀 ❤\u{FE0F} 👍🏽 a\u{A0}b";
        assert_eq!(sanitise(text, 1000), text);
        // A ZWJ sequence is shown as its parts: the joiner is a format character.
        assert_eq!(sanitise("👨\u{200D}👩\u{200D}👧", 10), "👨?👩?👧");
        assert_eq!(sanitise("abcdef", 3), "abc…");
        // Every character is either itself or `?`: nothing is dropped or added.
        let all: String = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
        let out = sanitise(&all, usize::MAX);
        assert_eq!(out.chars().count(), all.chars().count());
        assert!(
            all.chars()
                .zip(out.chars())
                .all(|(c, s)| s == c || s == '?')
        );
    }
}
