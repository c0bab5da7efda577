//! The broker's private places, which no sandbox profile may open: the daemon's socket
//! directory (with the key that lets a process sign in to the console and answer its own
//! consent questions), the state directory (the store, its journal, the daemon's log), the
//! recovery store wherever it was moved, the configuration directory (the console's grant
//! file, the policy the daemon starts on), the daemon's log, the audit file, and the files
//! whose content decides what a server may do wherever they lie: the policy file the broker
//! was started on (and reloads on save) and the `command:` programs that answer consent.
//!
//! Such a file is private by itself: a rule on it, or on its directory or any directory
//! above, is refused, since a directory rule lets the server replace the file by rename as
//! well as write it. A rule on a file beside it is not: the kernel's rule on a file gives no
//! right over the names in its directory, so it cannot put another file in its place.
//!
//! They are gathered in one place, [`PrivatePlaces::gather`], and every rule of a profile is
//! judged against all of them by [`PrivatePlaces::refusal`]: a rule that holds one of them, or
//! lies within one, is refused. Inferred directories are judged earlier by the same list (see
//! `launcher::Guard`), where a script's directory falls back to the script alone.
//!
//! Paths are compared component by component, each by its real path and as given: a place
//! that does not exist yet (a daemon not started so far) is judged by the real path of its
//! deepest existing ancestor with the rest appended, and by its lexical path too, so that a
//! place whose real path cannot be told still counts.

use super::roots::RootSource;
use std::path::{Component, Path, PathBuf};

/// What a private place is: for the message that refuses a rule, its name and how the user
/// can move it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The directory of a daemon's socket, with `broker.key` beside the socket.
    Socket,
    /// The broker's state directory (`$XDG_STATE_HOME/fsbroker`), with the cache of program
    /// digests a server's identity is read from.
    State,
    /// A recovery store, with its journal.
    Store,
    /// The broker's configuration directory, with the console's grant file.
    Config,
    /// The log of daemons started in the background.
    DaemonLog,
    /// The audit file (and its rotated files beside it).
    Audit,
    /// The policy file the broker was started on, which it reloads on save.
    Policy,
    /// A `command:` program that answers consent questions.
    Consent,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Socket => "the daemon's socket directory (with its key)",
            Kind::State => "the broker's state directory",
            Kind::Store => "the recovery store (with its journal)",
            Kind::Config => "the broker's configuration directory (with the console's grant file)",
            Kind::DaemonLog => "the daemon's log",
            Kind::Audit => "the audit file",
            Kind::Policy => "the broker's policy file",
            Kind::Consent => "the consent program",
        }
    }

    fn fix(self) -> &'static str {
        match self {
            Kind::Socket => {
                "set XDG_RUNTIME_DIR to a directory outside the rule (or give the daemon another --socket)"
            }
            Kind::State | Kind::DaemonLog => "set XDG_STATE_HOME to a directory outside the rule",
            Kind::Store => "move the store with recovery.dir",
            Kind::Config => "set XDG_CONFIG_HOME to a directory outside the rule",
            Kind::Audit => "move the audit file with audit.file or --audit-file",
            Kind::Policy => "keep the policy file (--policy) outside the rule",
            Kind::Consent => "keep the consent program (command:PROGRAM) outside the rule",
        }
    }
}

/// How a rule meets a private place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Met {
    /// The rule is the place, or a directory above it.
    Holds,
    /// The rule lies beneath the place (or is one of the audit file's rotated files).
    Within,
}

/// One private place, by both of its paths.
#[derive(Debug, Clone)]
struct Place {
    kind: Kind,
    /// As named, made absolute and normalised lexically.
    given: PathBuf,
    /// Its real path, or its deepest existing ancestor's real path with the rest appended.
    real: PathBuf,
}

impl Place {
    /// How a rule at `rule` (in each of its forms) meets this place, if it does.
    fn met_by(&self, rule: &[PathBuf]) -> Option<Met> {
        let mine = [&self.given, &self.real];
        if rule.iter().any(|r| mine.iter().any(|p| p.starts_with(r))) {
            return Some(Met::Holds);
        }
        if rule
            .iter()
            .any(|r| mine.iter().any(|p| r.starts_with(p)) || self.rotated_beside(r))
        {
            return Some(Met::Within);
        }
        None
    }

    /// Whether `rule` names one of the audit file's rotated files (`FILE.1`, `FILE.2`, ...),
    /// which lie beside it rather than beneath it.
    fn rotated_beside(&self, rule: &Path) -> bool {
        if self.kind != Kind::Audit {
            return false;
        }
        [&self.given, &self.real].iter().any(|p| {
            let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
                return false;
            };
            let (Some(rdir), Some(rname)) = (rule.parent(), rule.file_name()) else {
                return false;
            };
            let mut prefix = name.to_os_string();
            prefix.push(".");
            rdir == dir
                && rname
                    .as_encoded_bytes()
                    .starts_with(prefix.as_encoded_bytes())
        })
    }
}

/// Every private place of the broker a profile must keep closed.
#[derive(Debug, Clone, Default)]
pub(crate) struct PrivatePlaces {
    places: Vec<Place>,
}

impl PrivatePlaces {
    /// The private places of the broker `source` describes, and of any daemon of this user:
    /// - the directory of the socket the proxy attaches to, of the default socket (a daemon
    ///   may run there even when this proxy does not attach) and `/run/user/UID/fsbroker`
    ///   (where a daemon started from the user's session keeps it when this environment lacks
    ///   `XDG_RUNTIME_DIR`);
    /// - the state directory, as `XDG_STATE_HOME` (else `HOME`) names it and in the home the
    ///   password database gives (service managers start daemons without `HOME`);
    /// - the recovery store: the default place, and the broker's own or the daemon's;
    /// - the configuration directory, as the state directory, and the directory of the
    ///   daemon's console file as it names it;
    /// - the daemon's log, as this environment and as the daemon names it;
    /// - the broker's or the daemon's audit file;
    /// - the broker's or the daemon's policy file and consent programs.
    pub(super) fn gather(source: &RootSource, cwd: &Path) -> PrivatePlaces {
        let mut out = PrivatePlaces::default();
        let mut add = |kind: Kind, path: Option<PathBuf>| {
            if let Some(p) = path {
                out.add(kind, &p, cwd);
            }
        };
        add(Kind::Socket, source.socket().and_then(socket_dir));
        add(
            Kind::Socket,
            crate::attaching::places::default_socket()
                .ok()
                .and_then(|s| socket_dir(&s)),
        );
        let uid = rustix::process::geteuid().as_raw();
        add(
            Kind::Socket,
            Some(PathBuf::from(format!("/run/user/{uid}/fsbroker"))),
        );
        let passwd = crate::policy::passwd_home(uid);
        for (kind, var, fallback) in [
            (Kind::State, "XDG_STATE_HOME", ".local/state"),
            (Kind::Config, "XDG_CONFIG_HOME", ".config"),
        ] {
            add(
                kind,
                crate::policy::xdg_dir(var, fallback).map(|d| d.join("fsbroker")),
            );
            add(
                kind,
                passwd.as_ref().map(|h| h.join(fallback).join("fsbroker")),
            );
        }
        add(
            Kind::Store,
            crate::policy::RecoveryPolicy::default().store_dir(),
        );
        #[cfg(feature = "cli")]
        add(Kind::DaemonLog, crate::attaching::places::daemon_log().ok());
        // What the broker names itself: the daemon's environment may place them elsewhere
        // than the proxy's.
        let kept = source.kept();
        add(Kind::Store, kept.store);
        add(Kind::Audit, kept.audit);
        add(Kind::DaemonLog, kept.log);
        add(Kind::Policy, kept.policy);
        for program in kept.consent {
            add(Kind::Consent, Some(program));
        }
        add(
            Kind::Config,
            kept.console
                .as_deref()
                .and_then(Path::parent)
                .map(Path::to_path_buf),
        );
        out
    }

    /// Adds `path` (relative to `cwd` when it is relative) as a private place of `kind`.
    fn add(&mut self, kind: Kind, path: &Path, cwd: &Path) {
        let given = lexical(&cwd.join(path));
        let real = real_path(&given);
        self.places.push(Place { kind, given, real });
    }

    /// Whether `path` holds a private place or lies within one.
    pub(super) fn meets(&self, path: &Path) -> bool {
        let forms = forms(path);
        self.places.iter().any(|p| p.met_by(&forms).is_some())
    }

    /// Why a rule at `path` (in the profile because of `why`) must not be in it; `None` when
    /// it neither holds a private place nor lies within one.
    pub(super) fn refusal(&self, path: &Path, why: &str) -> Option<String> {
        let forms = forms(path);
        let (mut holds, mut within) = (Vec::new(), Vec::new());
        let mut fixes: Vec<&str> = Vec::new();
        for p in &self.places {
            let Some(how) = p.met_by(&forms) else {
                continue;
            };
            let item = format!("{} {}", p.kind.name(), p.given.display());
            let list = match how {
                Met::Holds => &mut holds,
                Met::Within => &mut within,
            };
            if !list.contains(&item) {
                list.push(item);
            }
            if !fixes.contains(&p.kind.fix()) {
                fixes.push(p.kind.fix());
            }
        }
        let mut met = Vec::new();
        if !holds.is_empty() {
            met.push(format!("holds {}", holds.join(", ")));
        }
        if !within.is_empty() {
            met.push(format!("lies within {}", within.join(", ")));
        }
        if met.is_empty() {
            return None;
        }
        Some(format!(
            "the profile would open {} ({why}), which {}: a sandboxed server must never reach the broker's private places (the key beside the daemon's socket would let it sign in to the console and answer its own questions, and so would the consent program; the policy file would let it give itself roots; the store, the journal, the grants and the logs are kept for the user); choose a narrower path, or {}",
            path.display(),
            met.join(" and "),
            fixes.join(", or ")
        ))
    }
}

/// The directory of `socket` (where its key lies), when it names one.
fn socket_dir(socket: &Path) -> Option<PathBuf> {
    socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

/// `path` as given (made lexical) and by its real path, when that can be told.
fn forms(path: &Path) -> Vec<PathBuf> {
    let given = lexical(path);
    let mut out = vec![given.clone()];
    if let Ok(real) = std::fs::canonicalize(&given)
        && real != given
    {
        out.push(real);
    }
    out
}

/// `path` with `.` dropped and each `..` taking away the component before it, without
/// asking the disk: the name the place was given, whatever links lie on the way.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The real path of `path`: of the path itself when it exists, else of its deepest existing
/// ancestor with the missing components appended (a place made later will be made there).
/// The lexical path when not even `/` can be resolved.
fn real_path(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            let mut out = real;
            out.extend(missing.iter().rev());
            return out;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(kind: Kind, path: &Path) -> PrivatePlaces {
        let mut p = PrivatePlaces::default();
        p.add(kind, path, Path::new("/"));
        p
    }

    #[test]
    fn places_are_compared_by_component_not_by_prefix() {
        let p = places(Kind::Socket, Path::new("/tmp/nowhere-x/fsbroker"));
        assert!(p.meets(Path::new("/tmp/nowhere-x")));
        assert!(p.meets(Path::new("/tmp/nowhere-x/fsbroker/broker.key")));
        assert!(p.meets(Path::new("/")));
        assert!(!p.meets(Path::new("/tmp/nowhere-x/fsbroker-sandbox-1")));
        assert!(!p.meets(Path::new("/tmp/nowhere")));
    }

    #[test]
    fn a_place_named_through_a_link_is_met_by_its_real_path() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = std::fs::canonicalize(t.path()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(base.join("real")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(base.join("real"), base.join("link"))
            .unwrap_or_else(|e| panic!("{e}"));
        // The place does not exist yet: it is judged by its ancestor's real path.
        let p = places(Kind::State, &base.join("link/state/fsbroker"));
        assert!(p.meets(&base.join("real/state")));
        assert!(p.meets(&base.join("link/../real")));
        assert!(!p.meets(&base.join("real/other")));
    }

    #[test]
    fn a_policy_file_is_refused_with_its_directory_but_not_beside_it() {
        let p = places(Kind::Policy, Path::new("/home/u/pol/policy.toml"));
        assert!(p.meets(Path::new("/home/u/pol/policy.toml")));
        assert!(p.meets(Path::new("/home/u")));
        assert!(!p.meets(Path::new("/home/u/pol/notes.txt")));
        let why = p
            .refusal(Path::new("/home/u/pol"), "--sandbox-allow")
            .unwrap_or_default();
        assert!(why.contains("holds the broker's policy file"), "{why}");
        assert!(why.contains("--policy"), "{why}");
    }

    #[test]
    fn the_audit_files_rotated_files_are_within_it() {
        let p = places(Kind::Audit, Path::new("/var/log/fsb/audit.jsonl"));
        assert!(p.meets(Path::new("/var/log/fsb/audit.jsonl.3")));
        assert!(!p.meets(Path::new("/var/log/fsb/audit.jsonlx")));
        let why = p
            .refusal(Path::new("/var/log/fsb"), "--sandbox-allow")
            .unwrap_or_default();
        assert!(why.contains("holds the audit file"), "{why}");
        assert!(why.contains("audit.file"), "{why}");
    }
}
