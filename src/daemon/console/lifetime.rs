//! How long the user allows what they allow on the page: the lifetimes a question's answer
//! and an offer's take.

use super::reply::{Refusal, bad};
use crate::consent::Lifetime;
use serde::Deserialize;
use std::time::Duration;

/// How long the user allows: for the next request, the session, an hour, or until revoked
/// (remembered).
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum Chosen {
    Once,
    Session,
    Hour,
    Forever,
}

/// How long a grant "for an hour" holds.
const HOUR: Duration = Duration::from_secs(60 * 60);

impl Chosen {
    /// The lifetime chosen by `lifetime` and `remember` (the older way to say `forever`):
    /// `remember` with another lifetime is a contradiction, refused.
    pub(super) fn of(lifetime: Option<Chosen>, remember: bool) -> Result<Chosen, Refusal> {
        match (lifetime, remember) {
            (None, false) => Ok(Chosen::Session),
            (None, true) => Ok(Chosen::Forever),
            (Some(l), false) => Ok(l),
            (Some(Chosen::Forever), true) => Ok(Chosen::Forever),
            (Some(_), true) => Err(bad(
                "remember means a lifetime of \"forever\": give one or the other",
            )),
        }
    }

    /// The session grant's lifetime (a remembered grant is held by the session as long as
    /// it lasts, and by later ones as a standing grant).
    pub(super) fn lifetime(self) -> Lifetime {
        match self {
            Chosen::Once => Lifetime::Once,
            Chosen::Hour => Lifetime::For(HOUR),
            Chosen::Session | Chosen::Forever => Lifetime::Session,
        }
    }
}
