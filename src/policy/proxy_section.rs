//! The `[proxy]` section: what `fsbroker proxy` does with the protocol's eras.

use serde::{Deserialize, Serialize};

/// The `[proxy]` section.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ProxyPolicy {
    /// Which era a proxied session may take (`--era` overrides it).
    pub era: EraMode,
}

/// Which protocol era `fsbroker proxy` lets a session take: the legacy era (2025-11-25 and
/// earlier, with `initialize`), where roots, consent and `files/*` are brokered, or the
/// modern one (2026-07-28), where only roots are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EraMode {
    /// Legacy for a host that can fall back to `initialize`; modern for a host that sends
    /// 2026-07-28 requests without probing, and with a modern-only server.
    #[default]
    Auto,
    /// Legacy only: a modern-only server is an error.
    Legacy,
    /// Modern only: a host's `initialize` is refused.
    Modern,
}

impl EraMode {
    /// The mode named `s` on the command line or in a policy.
    pub fn parse(s: &str) -> Option<EraMode> {
        match s {
            "auto" => Some(EraMode::Auto),
            "legacy" => Some(EraMode::Legacy),
            "modern" => Some(EraMode::Modern),
            _ => None,
        }
    }

    /// The mode's name, as [`EraMode::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            EraMode::Auto => "auto",
            EraMode::Legacy => "legacy",
            EraMode::Modern => "modern",
        }
    }
}
