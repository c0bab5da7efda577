//! One audit line as it is written, before the chain's `seq` and `hash` are added.

use super::Decider;
use serde::Serialize;

/// One audit line. The fields every line has are in the order the lines have always had
/// (sorted by key); those only some lines have are left out of the others, so that a reader
/// of the old lines still finds every line it knew as it was.
#[derive(Serialize)]
pub(super) struct Line<'a> {
    pub(super) bytes: u64,
    #[serde(rename = "cpuMs", skip_serializing_if = "Option::is_none")]
    pub(super) cpu_ms: Option<f64>,
    #[serde(rename = "durationMs")]
    pub(super) duration_ms: f64,
    /// The digest of the session's identity, when it is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) identity: Option<&'a str>,
    pub(super) method: &'a str,
    pub(super) outcome: &'a str,
    pub(super) path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) requested: Option<String>,
    pub(super) server: &'a str,
    pub(super) time: &'a str,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(super) consent: Option<ConsentLine<'a>>,
}

/// The keys a `files/consent` line adds.
#[derive(Serialize)]
pub(super) struct ConsentLine<'a> {
    pub(super) access: Option<&'static str>,
    pub(super) approved: Vec<String>,
    #[serde(rename = "decidedBy")]
    pub(super) decided_by: &'a [Decider],
    pub(super) denied: Vec<String>,
}
