//! The configuration in force: the policy, its opened roots, the rate limiter and the consent
//! provider. A reload builds a new [`Config`] and swaps it in whole; each request works on the
//! snapshot it started with.

use crate::consent::{ConsentProvider, ConsentSource};
use crate::limits::RateLimits;
use crate::policy::ConsentMode;
use crate::policy::{Policy, PolicyError};
use crate::root::{self, Root, RootSpec, Roots};
use std::sync::Arc;

/// One consistent configuration.
pub(crate) struct Config {
    /// The policy.
    pub policy: Policy,
    /// Its roots, opened.
    pub roots: Roots,
    /// The rate limiter (kept across reloads that leave the limits alone).
    pub rate: Arc<RateLimits>,
    /// Who decides consent requests no rule decides.
    pub consent: Arc<dyn ConsentProvider>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Opens `policy`'s roots and makes its consent provider from `consent`; `previous` lends
    /// its rate limiter when the limits did not change.
    pub(crate) fn open(
        policy: Policy,
        consent: &ConsentSource,
        previous: Option<&Config>,
    ) -> Result<Config, PolicyError> {
        let err = |key: String, message: String| PolicyError {
            file: "<policy>".into(),
            line: None,
            key,
            message,
        };
        let mut specs = Vec::new();
        for (i, r) in policy.roots.iter().enumerate() {
            let mount = Policy::mount_of(r).map_err(|m| err(format!("roots[{i}].mount"), m))?;
            if let Some(dir) = Policy::mount_derived_from(r) {
                // Servers must use the derived name in paths: say which it is.
                tracing::info!(%mount, directory = %dir, "mount name derived from the directory name");
            }
            specs.push(RootSpec {
                path: r.path.clone(),
                name: r.name.clone().unwrap_or_else(|| mount.to_string()),
                mount,
                access: r.access,
                servers: r.servers.clone(),
            });
        }
        // Where the server may have shaped names: the new policy's writable roots, and the
        // ones in force until now (a reload must not follow what the server made there).
        let mut zones = root::zones(&specs);
        zones.extend(
            previous
                .iter()
                .flat_map(|p| p.roots.iter().filter_map(|r| r.zone())),
        );
        let mut list: Vec<Arc<Root>> = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let root = Root::open(spec, &zones).map_err(|e| {
                err(
                    format!("roots[{i}].path"),
                    format!("cannot open root directory: {e}"),
                )
            })?;
            if list.iter().any(|x| x.mount() == root.mount()) {
                return Err(err(
                    format!("roots[{i}].mount"),
                    format!("mount name {} is used by another root", root.mount()),
                ));
            }
            list.push(Arc::new(root));
        }
        // The policy's other paths: a file the server could replace is refused.
        let zones: Vec<_> = list.iter().filter_map(|r| r.zone()).collect();
        if let Some(file) = &policy.source {
            root::outside_zones(file, &zones).map_err(|m| err("policy".into(), m))?;
        }
        if let Some(file) = &policy.audit.file {
            root::outside_zones(file, &zones).map_err(|m| err("audit.file".into(), m))?;
        }
        if let Some(ConsentMode::Command(program)) = &policy.consent.mode {
            root::outside_zones(program, &zones).map_err(|m| err("consent.mode".into(), m))?;
        }
        let rate = match previous {
            Some(p) if p.policy.limits == policy.limits => p.rate.clone(),
            _ => Arc::new(RateLimits::new(&policy.limits)),
        };
        let consent = consent.provider(&policy.consent);
        Ok(Config {
            roots: Roots::new(list),
            policy,
            rate,
            consent,
        })
    }
}
