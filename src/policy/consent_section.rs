//! The `[consent]` section: the mode that answers, its fallback, and the rules tried first.

use super::all_servers;
use crate::access::{Access, matches_server};
use crate::path::{MountPath, RequestPath};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::num::NonZeroU64;
use std::path::PathBuf;
use toml::Spanned;

/// The `[consent]` section: in code, [`Policy::consent_mode`](super::Policy::consent_mode),
/// [`Policy::consent_rule`](super::Policy::consent_rule) and the builder's
/// [`consent_timeout`](crate::BrokerBuilder::consent_timeout) set it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ConsentPolicy {
    /// The provider for requests that no rule decides; unset means `tty` where a controlling
    /// terminal exists, else `deny` (in `fsbroker proxy`, `elicit`).
    pub mode: Option<ConsentMode>,
    /// With mode `elicit`, who answers when the host cannot show a form; unset means `tty`
    /// where a controlling terminal exists, else `deny`.
    #[serde(default, deserialize_with = "fallback_mode")]
    pub fallback: Option<ConsentMode>,
    /// Seconds to wait for a decision before denying.
    #[serde(default = "default_consent_timeout")]
    pub timeout_secs: NonZeroU64,
    /// Rules tried in order before the provider is asked.
    #[serde(default)]
    pub rules: Vec<ConsentRule>,
    /// Whether `roots/list` shows a server the roots at once (`show`) or only those the
    /// user let it see (`ask`).
    #[serde(default)]
    pub roots: RootsShown,
}

/// What `roots/list` shows a server before anyone consented.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RootsShown {
    /// Every root the server may see.
    #[default]
    Show,
    /// Only the roots the consent provider let this session see (asked once per root and
    /// session, at its first `roots/list`), and those it holds a grant in: host paths are
    /// not shown to a server before the user agreed.
    Ask,
}

/// What the rules decide of one requested path, before anyone is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ruling {
    /// A deny rule covers it.
    Deny,
    /// An allow rule decides it, granting at most its cap (none: what was asked for).
    Allow(Option<Access>),
    /// No rule covers it: the provider decides.
    Ask,
}

impl ConsentPolicy {
    /// The rules that apply to `server` and cover `path`, in order.
    fn covering<'a>(
        &'a self,
        server: &'a str,
        path: &'a MountPath,
    ) -> impl Iterator<Item = &'a ConsentRule> + Clone + 'a {
        self.rules
            .iter()
            .filter(move |r| matches_server(&r.servers, server) && r.covers(path))
    }

    /// What the rules decide for `server` of a path asked for as `requested` that leads to
    /// `real`. A deny rule on either path wins, so a link cannot lead around one; otherwise
    /// the first rule covering the real path decides, since that is what a grant would open.
    pub(crate) fn rule_on(&self, server: &str, requested: &MountPath, real: &MountPath) -> Ruling {
        let denies = |r: &ConsentRule| r.decision == Decision::Deny;
        if self.covering(server, requested).any(denies) || self.covering(server, real).any(denies) {
            return Ruling::Deny;
        }
        match self.covering(server, real).next() {
            Some(r) if r.decision == Decision::Allow => Ruling::Allow(r.access),
            Some(_) => Ruling::Deny,
            None => Ruling::Ask,
        }
    }

    /// What the rules say of `place` for `server` without asking anyone: closed (`false`)
    /// when a deny rule covers it, open (`true`) when only allow rules do, unknown otherwise.
    pub(crate) fn rules_say(&self, server: &str, place: &MountPath) -> Option<bool> {
        let mut covering = self.covering(server, place);
        if covering.clone().any(|r| r.decision == Decision::Deny) {
            return Some(false);
        }
        covering.next().map(|_| true)
    }

    /// The `command:` programs that answer consent (the mode's and the fallback's): whoever
    /// may write one answers the broker's questions, so a sandbox never opens them.
    pub(crate) fn programs(&self) -> Vec<PathBuf> {
        [&self.mode, &self.fallback]
            .into_iter()
            .filter_map(|m| match m {
                Some(ConsentMode::Command(p)) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }
}

impl Default for ConsentPolicy {
    fn default() -> Self {
        ConsentPolicy {
            mode: None,
            fallback: None,
            timeout_secs: default_consent_timeout(),
            rules: Vec::new(),
            roots: RootsShown::Show,
        }
    }
}

/// How consent requests that no rule decides are answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[non_exhaustive]
pub enum ConsentMode {
    /// Approve every path inside the roots.
    Auto,
    /// Deny everything.
    Deny,
    /// Ask on the controlling terminal (never on stdin).
    Tty,
    /// Run a program that reads the request as JSON on stdin and answers on stdout.
    Command(PathBuf),
    /// Ask through the host's `elicitation/create` (proxy only).
    Elicit,
    /// Ask on the daemon's console, the page `fsbroker console` opens (daemon only).
    Ui,
}

impl TryFrom<String> for ConsentMode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "auto" => Ok(ConsentMode::Auto),
            "deny" => Ok(ConsentMode::Deny),
            "tty" => Ok(ConsentMode::Tty),
            "elicit" => Ok(ConsentMode::Elicit),
            "ui" => Ok(ConsentMode::Ui),
            _ => match s.strip_prefix("command:") {
                Some(p) if !p.is_empty() => Ok(ConsentMode::Command(PathBuf::from(p))),
                _ => Err(format!(
                    "unknown consent mode {s:?}: expected auto, deny, tty, elicit, ui or command:PROGRAM"
                )),
            },
        }
    }
}

impl From<ConsentMode> for String {
    fn from(m: ConsentMode) -> String {
        m.to_string()
    }
}

impl fmt::Display for ConsentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsentMode::Auto => f.write_str("auto"),
            ConsentMode::Deny => f.write_str("deny"),
            ConsentMode::Tty => f.write_str("tty"),
            ConsentMode::Elicit => f.write_str("elicit"),
            ConsentMode::Ui => f.write_str("ui"),
            ConsentMode::Command(p) => write!(f, "command:{}", p.display()),
        }
    }
}

/// A `[[consent.rules]]` entry: decides consent for matching paths without asking. Build one
/// with [`ConsentRule::allow`] or [`ConsentRule::deny`].
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "RawConsentRule")]
pub struct ConsentRule {
    /// Server ids the rule applies to; `["*"]` (default) means every server.
    pub servers: Vec<String>,
    /// Mount-form paths; the rule applies to these and everything beneath them.
    pub paths: Vec<String>,
    /// `allow` or `deny`.
    pub decision: Decision,
    /// For `allow`: the most the rule grants (default: what the root allows).
    pub access: Option<Access>,
    /// Where each of `paths` stood in the file it was loaded from.
    spans: Vec<std::ops::Range<usize>>,
}

/// A `[[consent.rules]]` entry as written, with the places of its paths.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConsentRule {
    #[serde(default = "all_servers")]
    servers: Vec<String>,
    paths: Vec<Spanned<String>>,
    decision: Decision,
    access: Option<Access>,
}

impl From<RawConsentRule> for ConsentRule {
    fn from(r: RawConsentRule) -> ConsentRule {
        ConsentRule {
            servers: r.servers,
            spans: r.paths.iter().map(Spanned::span).collect(),
            paths: r.paths.into_iter().map(Spanned::into_inner).collect(),
            decision: r.decision,
            access: r.access,
        }
    }
}

impl ConsentRule {
    /// A rule that approves the mount-form `paths` (and everything beneath them) without
    /// asking, for every server, at the access asked for within the root's.
    pub fn allow<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> ConsentRule {
        ConsentRule {
            servers: all_servers(),
            paths: paths.into_iter().map(Into::into).collect(),
            decision: Decision::Allow,
            access: None,
            spans: Vec::new(),
        }
    }

    /// A rule that denies the mount-form `paths` (and everything beneath them) without
    /// asking, for every server.
    pub fn deny<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> ConsentRule {
        ConsentRule {
            decision: Decision::Deny,
            ..ConsentRule::allow(paths)
        }
    }

    /// Grants at most `access` (for an allow rule).
    pub fn at_most(mut self, access: Access) -> ConsentRule {
        self.access = Some(access);
        self
    }

    /// Only for the servers `ids`.
    pub fn servers<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> ConsentRule {
        self.servers = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The span of path `i` in the file it was loaded from.
    pub(crate) fn path_span(&self, i: usize) -> Option<std::ops::Range<usize>> {
        self.spans.get(i).cloned()
    }
}

impl ConsentRule {
    /// Whether one of the rule's paths is `path` or lies above it.
    pub(crate) fn covers(&self, path: &MountPath) -> bool {
        self.paths.iter().any(|p| match RequestPath::parse(p) {
            Ok(RequestPath::Mount { mount, rel }) => {
                mount == path.mount.as_str() && path.rel.starts_with(&rel)
            }
            _ => false,
        })
    }
}

/// A rule's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Approve without asking.
    Allow,
    /// Deny without asking.
    Deny,
}

/// `consent.fallback`: any mode but `elicit`, since it answers when eliciting cannot.
fn fallback_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ConsentMode>, D::Error> {
    match ConsentMode::deserialize(d)? {
        ConsentMode::Elicit => Err(serde::de::Error::custom(
            "must be auto, deny, tty, ui or command:PROGRAM: it answers when the host cannot elicit",
        )),
        mode => Ok(Some(mode)),
    }
}

fn default_consent_timeout() -> NonZeroU64 {
    NonZeroU64::new(120).unwrap_or(NonZeroU64::MIN)
}
