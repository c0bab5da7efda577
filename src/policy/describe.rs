//! The effective configuration as text, for `fsbroker check-policy`.

use super::{AuditPolicy, Limits, Policy, ProxyPolicy};
use serde::Serialize;

/// The effective configuration as TOML-like text, for `fsbroker check-policy`.
pub(crate) fn describe(policy: &Policy) -> String {
    let mut out = String::new();
    for r in &policy.roots {
        let mount = Policy::mount_of(r)
            .map(|m| m.to_string())
            .unwrap_or_default();
        let abs = std::fs::canonicalize(&r.path)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| r.path.display().to_string());
        out.push_str(&format!(
            "[[roots]]\npath = {abs:?}\nmount = {mount:?}\nname = {:?}\naccess = {:?}\nservers = {:?}\n\n",
            r.name.clone().unwrap_or_else(|| mount.clone()),
            r.access.as_str(),
            r.servers,
        ));
    }
    let mode = policy
        .consent
        .mode
        .as_ref()
        .map_or("unset (tty with a terminal, else deny)".to_owned(), |m| {
            m.to_string()
        });
    let fallback = policy
        .consent
        .fallback
        .as_ref()
        .map_or("unset (tty with a terminal, else deny)".to_owned(), |m| {
            m.to_string()
        });
    out.push_str(&format!(
        "[consent]\nmode = {mode:?}\nfallback = {fallback:?}\ntimeout_secs = {}\nrules = {}\n\n",
        policy.consent.timeout_secs,
        policy.consent.rules.len()
    ));
    for g in &policy.grants {
        out.push_str(&format!(
            "[[grants]]\nservers = {:?}\npath = {:?}\naccess = {:?}\n\n",
            g.servers,
            &g.path,
            g.access.as_str()
        ));
    }
    out.push_str(
        &toml::to_string(&LimitsSection {
            limits: &policy.limits,
        })
        .unwrap_or_default(),
    );
    out.push('\n');
    out.push_str(
        &toml::to_string(&AuditSection {
            audit: &policy.audit,
        })
        .unwrap_or_default(),
    );
    out.push('\n');
    out.push_str(
        &toml::to_string(&ProxySection {
            proxy: &policy.proxy,
        })
        .unwrap_or_default(),
    );
    out.push('\n');
    out.push_str(
        &toml::to_string(&RecoverySection {
            recovery: &policy.recovery,
        })
        .unwrap_or_default(),
    );
    out
}

#[derive(Serialize)]
struct RecoverySection<'a> {
    recovery: &'a super::RecoveryPolicy,
}

#[derive(Serialize)]
struct ProxySection<'a> {
    proxy: &'a ProxyPolicy,
}

#[derive(Serialize)]
struct LimitsSection<'a> {
    limits: &'a Limits,
}

#[derive(Serialize)]
struct AuditSection<'a> {
    audit: &'a AuditPolicy,
}
