//! Consent: the grants a session holds, and the providers that decide `files/consent`.
//!
//! This file holds what a provider is asked and answers, the [`ConsentProvider`] trait and the
//! simplest providers; the prompt on the terminal (`tty.rs`) and the external program
//! (`command.rs`) are providers of their own, `source.rs` chooses one for a policy's mode,
//! `grants.rs` holds what a session was granted, and `sanitise.rs` is the one sanitiser of
//! what a prompt shows.

use crate::access::Access;
use crate::path::MountPath;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

mod command;
mod ended;
pub(crate) mod grants;
mod sanitise;
mod source;
mod tty;

pub use command::CommandConsent;
pub(crate) use ended::SessionEnd;
pub(crate) use grants::{Grant, Grants};
pub use grants::{GrantOrigin, Lifetime};
pub(crate) use sanitise::{describe, sanitise, who_asks};
pub(crate) use source::ConsentSource;
pub use tty::TtyConsent;

/// A boxed future, for the object-safe [`ConsentProvider`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a provider is asked: paths already known to lie inside the roots this server sees.
/// The broker makes them; a host makes one with [`ConsentRequest::new`] to try its provider.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// What an approval allows.
    pub purpose: Purpose,
    /// Who the server that asks is, when that could be told: what a question shows beside
    /// the name the server chose.
    pub identity: Option<crate::Identity>,
    /// Why the user is asked again about a path a grant they gave covers: the grant was
    /// for another program of the same name, or for this one before it changed
    /// ("the program at PATH changed since you allowed it on DATE").
    pub asked_again: Vec<String>,
    /// The end of the session that asks: the question is withdrawn when it comes.
    pub(crate) ended: SessionEnd,
}

/// What approving a [`ConsentRequest`] allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Purpose {
    /// Access to the paths, at the request's access.
    #[default]
    Access,
    /// Only that the server is shown these roots (their names and places) in `roots/list`,
    /// asked under `consent.roots = "ask"`; none of their contents.
    SeeRoots,
}

impl Purpose {
    /// Its name on the wire: `access` or `roots`.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Access => "access",
            Purpose::SeeRoots => "roots",
        }
    }
}

impl ConsentRequest {
    /// A request from `server_id` for `access` to `paths`, with no message, no folders and
    /// no host paths (set the fields to add them).
    ///
    /// ```
    /// use mcp_fsbroker::{Access, ConsentDecision, ConsentRequest, MountPath};
    /// let docs: MountPath = "proj/docs".parse().unwrap();
    /// let mut request = ConsentRequest::new("my-server", [docs.clone()], Access::Read);
    /// request.message = Some("to read the manual".into());
    /// assert_eq!(ConsentDecision::approve_all(&request).approved, [docs]);
    /// ```
    pub fn new(
        server_id: impl Into<String>,
        paths: impl IntoIterator<Item = MountPath>,
        access: Access,
    ) -> Self {
        ConsentRequest {
            server_id: server_id.into(),
            message: None,
            paths: paths.into_iter().collect(),
            folders: Vec::new(),
            access,
            host_paths: Vec::new(),
            purpose: Purpose::Access,
            identity: None,
            asked_again: Vec::new(),
            ended: SessionEnd::default(),
        }
    }

    /// The host path of `path`, one of the request's `paths`.
    pub fn host_path(&self, path: &MountPath) -> Option<&std::path::Path> {
        let i = self.paths.iter().position(|p| p == path)?;
        self.host_paths.get(i).map(std::path::PathBuf::as_path)
    }
}

/// A provider's answer. Paths not in the request are ignored, and the access is capped by
/// what was asked. Make one with [`ConsentDecision::new`], [`ConsentDecision::deny`] or
/// [`ConsentDecision::approve_all`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsentDecision {
    /// The approved subset of the requested paths.
    pub approved: Vec<MountPath>,
    /// The access granted for them.
    pub access: Access,
}

impl ConsentDecision {
    /// An approval of `approved` (a subset of the requested paths) at `access`; the other
    /// requested paths are denied.
    pub fn new(approved: impl IntoIterator<Item = MountPath>, access: Access) -> Self {
        ConsentDecision {
            approved: approved.into_iter().collect(),
            access,
        }
    }

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
/// place inside it and lower write to read, never more. Make one with [`PathChoice::whole`]
/// or [`PathChoice::new`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PathChoice {
    /// The requested path this approves (one of the request's `paths`).
    pub asked: MountPath,
    /// What the grant covers: `asked` itself, or a place beneath it. A place that is not
    /// at or beneath `asked` is never granted (the whole choice is then a refusal).
    pub granted: MountPath,
    /// The access for it, capped by what was asked.
    pub access: Access,
    /// How long the grant holds ([`Lifetime::Session`] unless the user chose otherwise).
    pub lifetime: Lifetime,
}

impl PathChoice {
    /// An approval of the requested path `asked`, narrowed to `granted` (`asked` itself or a
    /// place beneath it), at `access`.
    pub fn new(asked: MountPath, granted: MountPath, access: Access) -> Self {
        PathChoice {
            asked,
            granted,
            access,
            lifetime: Lifetime::Session,
        }
    }

    /// The same approval, holding for `lifetime` rather than the session.
    pub fn lasting(self, lifetime: Lifetime) -> Self {
        PathChoice { lifetime, ..self }
    }

    /// An approval of the whole requested path `asked` at `access`.
    pub fn whole(asked: MountPath, access: Access) -> Self {
        PathChoice {
            granted: asked.clone(),
            asked,
            access,
            lifetime: Lifetime::Session,
        }
    }
}

/// A provider's answer path by path: the approved paths, each with its own access and
/// perhaps narrowed; every requested path not listed is denied. Make one with
/// [`ConsentAnswer::new`] or by collecting [`PathChoice`]s.
///
/// ```
/// use mcp_fsbroker::consent::{ConsentAnswer, PathChoice};
/// use mcp_fsbroker::{Access, MountPath};
/// let src: MountPath = "proj/src".parse().unwrap();
/// let lib: MountPath = "proj/src/lib".parse().unwrap();
/// // `proj/src` narrowed to `proj/src/lib`, read-only.
/// let answer: ConsentAnswer = [PathChoice::new(src, lib, Access::Read)].into_iter().collect();
/// assert_eq!(answer.approved.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ConsentAnswer {
    /// The approved paths.
    pub approved: Vec<PathChoice>,
}

impl ConsentAnswer {
    /// An approval of `approved`; every requested path not among them is denied.
    pub fn new(approved: impl IntoIterator<Item = PathChoice>) -> Self {
        ConsentAnswer {
            approved: approved.into_iter().collect(),
        }
    }

    /// A refusal of everything.
    pub fn deny() -> Self {
        ConsentAnswer::default()
    }
}

impl FromIterator<PathChoice> for ConsentAnswer {
    fn from_iter<I: IntoIterator<Item = PathChoice>>(approved: I) -> Self {
        ConsentAnswer::new(approved)
    }
}

impl From<ConsentDecision> for ConsentAnswer {
    /// The same answer for every approved path, nothing narrowed.
    fn from(d: ConsentDecision) -> Self {
        ConsentAnswer {
            approved: d
                .approved
                .into_iter()
                .map(|p| PathChoice::whole(p, d.access))
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
///             ConsentDecision::new(req.paths.clone(), mcp_fsbroker::Access::Read)
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

    /// Told that `request` is withdrawn before it was answered: its time limit passed, or
    /// the server cancelled the request, or the host dropped it. The future the broker was
    /// waiting on is dropped too; a provider showing a dialog closes it here. By default,
    /// nothing.
    fn withdrawn(&self, request: &ConsentRequest) {
        let _ = request;
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
///         let approved = req.paths.iter().filter(|p| p.starts_with(&docs)).cloned();
///         ConsentDecision::new(approved, mcp_fsbroker::Access::Read)
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

/// Asks `provider` about `request`, waiting at most `wait`; `None` when it did not answer in
/// time, or the session that asks ended first (see `ended.rs`: whatever answer comes after
/// is for nobody). Unless it answered, the provider is told the question is withdrawn
/// ([`ConsentProvider::withdrawn`]) when the wait ends: the time limit passed, the session
/// ended, or the request was cancelled or dropped while the question was open, so that a
/// dialog can close.
pub(crate) async fn ask(
    provider: &dyn ConsentProvider,
    request: &ConsentRequest,
    wait: std::time::Duration,
) -> Option<ConsentAnswer> {
    // A session whose server is already gone is not asked for: no program is started and no
    // dialog shown for it (a batch's later questions, after its server left).
    if request.ended.has_ended() {
        return None;
    }
    let mut asking = Asking {
        provider,
        request,
        answered: false,
    };
    // An answer ready at once (mode `auto`, a rule) is taken before the end is looked at.
    let answer = tokio::select! {
        biased;
        answer = tokio::time::timeout(wait, provider.decide_each(request)) => answer.ok(),
        () = request.ended.wait() => None,
    };
    asking.answered = answer.is_some();
    answer
}

/// A question put to a provider, told withdrawn when it goes unanswered (see [`ask`]).
struct Asking<'a> {
    provider: &'a dyn ConsentProvider,
    request: &'a ConsentRequest,
    answered: bool,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.provider.withdrawn(self.request);
        }
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
