//! A profile as Landlock rules. Each protection the profile relies on is a feature with the
//! ABI that brought it; what the running kernel lacks is named, so strict mode can refuse and
//! best effort can say exactly what is not enforced.

use super::profile::{Profile, Rule};
use super::right::Right;
use super::trace::open_exact;
use super::{ABI_CAP_VAR, SandboxError, SandboxMode, SandboxNet};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath,
    RestrictSelfAttr, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus,
    Scope,
};
use std::os::fd::OwnedFd;

/// What a feature restricts.
#[derive(Clone, Copy)]
enum Kind {
    Fs(BitFlags<AccessFs>),
    Net(BitFlags<AccessNet>),
    Scope(BitFlags<Scope>),
}

/// One protection, the ABI that brought it, and whether the profile needs it (strict mode
/// refuses without it) or only wants it where the kernel has it.
struct Feature {
    name: &'static str,
    abi: ABI,
    kind: Kind,
    needed: bool,
}

/// The features `profile` relies on.
fn features(profile: &Profile) -> Vec<Feature> {
    let mut list = vec![
        Feature {
            name: "file access rules (read, write, create, remove, execute)",
            abi: ABI::V1,
            kind: Kind::Fs(AccessFs::from_all(ABI::V1)),
            needed: true,
        },
        Feature {
            name: "renaming and linking between directories",
            abi: ABI::V2,
            kind: Kind::Fs(AccessFs::Refer.into()),
            needed: true,
        },
        Feature {
            name: "truncating files",
            abi: ABI::V3,
            kind: Kind::Fs(AccessFs::Truncate.into()),
            needed: true,
        },
        Feature {
            name: "device ioctl",
            abi: ABI::V5,
            kind: Kind::Fs(AccessFs::IoctlDev.into()),
            needed: true,
        },
        Feature {
            name: "signals and abstract UNIX sockets beyond the sandbox",
            abi: ABI::V6,
            kind: Kind::Scope(Scope::AbstractUnixSocket | Scope::Signal),
            needed: true,
        },
        Feature {
            name: "connecting to named UNIX sockets (such as a session bus)",
            abi: ABI::V9,
            kind: Kind::Fs(AccessFs::ResolveUnix.into()),
            needed: false,
        },
    ];
    if profile.net == SandboxNet::None {
        list.push(Feature {
            name: "TCP connect and bind (--sandbox-net none)",
            abi: ABI::V4,
            kind: Kind::Net(AccessNet::BindTcp | AccessNet::ConnectTcp),
            needed: true,
        });
    }
    list
}

/// Whether the running kernel enforces `f` (and the ABI cap, when set, allows it): a ruleset
/// handling only `f` is created with no downgrade allowed.
fn supported(f: &Feature, cap: Option<i32>) -> bool {
    if cap.is_some_and(|c| (f.abi as i32) > c) {
        return false;
    }
    let rs = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    let rs = match f.kind {
        Kind::Fs(a) => rs.handle_access(a),
        Kind::Net(a) => rs.handle_access(a),
        Kind::Scope(s) => rs.scope(s),
    };
    rs.and_then(Ruleset::create).is_ok()
}

fn abi_cap() -> Option<i32> {
    std::env::var(ABI_CAP_VAR).ok()?.trim().parse().ok()
}

/// The rights a rule gives, before they are cut to what the ruleset handles.
fn rights(right: Right) -> BitFlags<AccessFs> {
    match right {
        Right::Read => AccessFs::ReadFile | AccessFs::ReadDir,
        Right::Exec => AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute,
        Right::Write => AccessFs::from_all(ABI::V9),
        Right::Device => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
    }
}

/// The ruleset of `profile` with every rule added, not yet in force, and the features the
/// kernel does not enforce. In strict mode a needed feature missing is an error.
fn build(profile: &Profile) -> Result<(Option<RulesetCreated>, Vec<String>), SandboxError> {
    let cap = abi_cap();
    let mut fs = BitFlags::<AccessFs>::EMPTY;
    let mut net = BitFlags::<AccessNet>::EMPTY;
    let mut scopes = BitFlags::<Scope>::EMPTY;
    let mut missing = Vec::new();
    let mut refused = Vec::new();
    for f in features(profile) {
        if supported(&f, cap) {
            match f.kind {
                Kind::Fs(a) => fs |= a,
                Kind::Net(a) => net |= a,
                Kind::Scope(s) => scopes |= s,
            }
        } else if f.needed && profile.mode == SandboxMode::Strict {
            refused.push(f.name);
        } else {
            missing.push(f.name.to_owned());
        }
    }
    if !refused.is_empty() {
        return Err(SandboxError::Unsupported(format!(
            "this kernel's Landlock does not enforce: {} (Landlock needs Linux 6.12 or later, enabled at boot; --sandbox=best-effort starts the server with what it can enforce)",
            refused.join("; ")
        )));
    }
    if fs.is_empty() {
        // No Landlock at all: only best effort gets here, and nothing is enforced.
        return Ok((
            None,
            vec![
                "anything: this kernel offers no Landlock, so the server runs unconfined"
                    .to_owned(),
            ],
        ));
    }
    let err = |e: landlock::RulesetError| SandboxError::Profile(e.to_string());
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(fs)
        .map_err(err)?;
    if !net.is_empty() {
        rs = rs.handle_access(net).map_err(err)?;
    }
    if !scopes.is_empty() {
        rs = rs.scope(scopes).map_err(err)?;
    }
    let mut created = rs.create().map_err(err)?;
    for rule in &profile.rules {
        let Some(beneath) = rule_fd(rule, fs)? else {
            continue;
        };
        created = created.add_rule(beneath).map_err(err)?;
    }
    Ok((Some(created), missing))
}

/// Opens a rule's path as the kernel's rule, without following links. A missing optional path
/// is skipped; a missing required one, or a path that no longer names what the profile
/// recorded, is an error: the server is not started with a profile other than the one
/// described.
fn rule_fd(
    rule: &Rule,
    handled: BitFlags<AccessFs>,
) -> Result<Option<PathBeneath<OwnedFd>>, SandboxError> {
    let fd = match open_exact(&rule.path) {
        Ok(fd) => fd,
        Err(_) if !rule.required => return Ok(None),
        Err(e) => {
            return Err(SandboxError::Profile(format!(
                "cannot open {} ({}) without following links: {e}",
                rule.path.display(),
                rule.why
            )));
        }
    };
    let st = rustix::fs::fstat(&fd)
        .map_err(|e| SandboxError::Profile(format!("cannot stat {}: {e}", rule.path.display())))?;
    if rule.pin != Some((st.st_dev, st.st_ino)) {
        return Err(SandboxError::Profile(format!(
            "{} ({}) is no longer what the profile was built for",
            rule.path.display(),
            rule.why
        )));
    }
    let is_dir = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
    let mut access = rights(rule.right) & handled;
    if !is_dir {
        access &= AccessFs::from_file(ABI::V9);
    }
    if access.is_empty() {
        return Ok(None);
    }
    Ok(Some(PathBeneath::new(fd, access)))
}

/// Whether the kernel (and the ABI cap) offer restricting all threads at once (ABI 8): a
/// throwaway ruleset is asked for it with no downgrade allowed.
fn all_threads_supported() -> bool {
    if abi_cap().is_some_and(|c| c < ABI::V8 as i32) {
        return false;
    }
    Ruleset::default()
        .handle_access(AccessFs::Execute)
        .and_then(Ruleset::create)
        .and_then(|c| {
            c.set_compatibility(CompatLevel::HardRequirement)
                .all_threads(true)
        })
        .is_ok()
}

/// Builds `profile`'s ruleset without putting it in force: what the proxy checks before it
/// starts anything. Returns what is not enforced on this kernel.
pub(super) fn check(profile: &Profile) -> Result<Vec<String>, SandboxError> {
    build(profile).map(|(_, missing)| missing)
}

/// Puts `profile` in force on this process (single-threaded: the helper before it runs the
/// server), with `no_new_privs` set. In strict mode anything short of full enforcement is an
/// error; with best effort what is not enforced is logged.
pub(super) fn restrict(profile: &Profile) -> Result<(), SandboxError> {
    // What is not enforced was logged by the proxy, which built the same ruleset first.
    let (created, _) = build(profile)?;
    let Some(created) = created else {
        return Ok(());
    };
    // Landlock ABI 8 restricts every thread of the process at once (TSYNC). The helper runs
    // on one thread, so this adds nothing today; it keeps the domain whole should the helper
    // ever start a thread before this point.
    let created = if all_threads_supported() {
        created
            .all_threads(true)
            .map_err(|e| SandboxError::Profile(e.to_string()))?
    } else {
        created
    };
    let status = created
        .restrict_self()
        .map_err(|e| SandboxError::Profile(e.to_string()))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        _ if profile.mode == SandboxMode::BestEffort => Ok(()),
        other => Err(SandboxError::Unsupported(format!(
            "the kernel enforced the ruleset only in part ({other:?})"
        ))),
    }
}
