//! The audit log: one JSON line per operation, never file contents.
//!
//! A consent line says what was approved and denied, at which access, and who decided. A
//! violation (a path outside every root, a symlink that leads out, no grant, a revoked or
//! read-only grant) says its reason and a keyed hash of the path as the server sent it, never
//! the path itself, which may name a place outside the roots. With the log turned off,
//! violations still go to the tracing log at `warn`, with the same fields.
//!
//! Every line ends with `seq` and `hash`, a hash chain over the lines (`chain.rs`), so that a
//! line edited or removed shows ([`AuditLog::verify`], `fsbroker audit verify`). A file the
//! log appends to may be shared by processes and rotated by size (`file.rs`).

use crate::access::Access;
use crate::error::{Error, ErrorKind, Reason};
use crate::policy::AuditPolicy;
use chain::Head;
use file::AuditFile;
use line::{ConsentLine, Line};
use serde::Serialize;
use sink::Sink;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

mod chain;
mod event;
mod file;
mod line;
mod sink;
mod verify;

pub use event::{AuditEvent, ConsentEvent};
pub use verify::AuditVerdict;
#[cfg(feature = "cli")]
pub(crate) use verify::MAX_FAULTS;

/// One operation, as logged.
#[derive(Debug, Clone)]
pub(crate) struct AuditRecord<'a> {
    /// The server session.
    pub server_id: &'a str,
    /// The digest of its identity, when it is known.
    pub identity: Option<&'a str>,
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The mount-form path, if the operation had one.
    pub path: Option<&'a str>,
    /// `ok` or the error's `data.code` (or protocol fault name).
    pub outcome: &'a str,
    /// Bytes read or written.
    pub bytes: u64,
    /// The CPU time its blocking work spent.
    pub cpu: Duration,
    /// How long the operation took.
    pub duration: Duration,
    /// What a `files/consent` decided.
    pub consent: Option<&'a ConsentNote>,
    /// The violation the operation was refused for.
    pub violation: Option<Violation<'a>>,
}

/// A refusal that the audit log must never lose: its reason, and the path as requested.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Violation<'a> {
    /// The wire reason (`outside_root`, `no_consent`, ...).
    pub reason: Reason,
    /// The path the server sent, which is only ever logged as a keyed hash.
    pub requested: Option<&'a str>,
}

impl<'a> Violation<'a> {
    /// The violation `e` is, if any: a `PERMISSION_DENIED` other than the operating system's
    /// refusal (which is no attempt of the server's, and is logged as any other failure).
    pub(crate) fn of(e: &Error, requested: Option<&'a str>) -> Option<Violation<'a>> {
        let reason = e.reason()?;
        (e.kind() == ErrorKind::PermissionDenied && reason != Reason::OsDenied)
            .then_some(Violation { reason, requested })
    }
}

/// Who decided a consent request's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Decider {
    /// Confinement: the path lies outside every root, or a symlink leads out of it.
    Confinement,
    /// The root: it allows less than was asked for.
    Root,
    /// A `[[consent.rules]]` entry.
    Rule,
    /// Consent mode `auto`.
    Auto,
    /// The consent provider (a person, a program, mode `deny`, an embedder's).
    Provider,
    /// Nobody: the provider did not answer within the time limit.
    Timeout,
}

/// What one `files/consent` decided, for its audit line.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConsentNote {
    /// The approved paths, in mount form.
    pub approved: Vec<String>,
    /// The denied paths that lie inside a root, in mount form.
    pub denied: Vec<String>,
    /// The denied paths outside every root, as sent: logged only as keyed hashes.
    pub outside: Vec<String>,
    /// The access asked of the provider, or granted.
    pub access: Option<Access>,
    /// Who decided, each once, in the order they did.
    pub decided_by: Vec<Decider>,
}

impl ConsentNote {
    /// Notes that `by` decided a path.
    pub(crate) fn decided(&mut self, by: Decider) {
        if !self.decided_by.contains(&by) {
            self.decided_by.push(by);
        }
    }

    /// The line's outcome: `ok` when everything asked for was approved, `denied` when
    /// nothing was, `partial` otherwise.
    pub(crate) fn outcome(&self) -> &'static str {
        match (
            self.approved.is_empty(),
            self.denied.is_empty() && self.outside.is_empty(),
        ) {
            (false, true) => "ok",
            (true, _) => "denied",
            (false, false) => "partial",
        }
    }
}

/// The key for hashing requested paths of violations when the log has no redaction key: one
/// random key per process, so that the hashes of one run can be compared with each other
/// and with nothing else. `None` when the system has no randomness to give, in which case
/// the path is left out entirely.
fn process_key() -> Option<&'static [u8; 32]> {
    static KEY: std::sync::OnceLock<Option<[u8; 32]>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k).ok().map(|()| k)
    })
    .as_ref()
}

/// `hash:` and the first 128 bits of the keyed BLAKE3 hash of `text`.
fn hashed(key: &[u8; 32], text: &str) -> String {
    format!(
        "hash:{}",
        &blake3::keyed_hash(key, text.as_bytes()).to_hex()[..32]
    )
}

/// Where audit lines go: a file, any writer, a callback, the `tracing` log, or nowhere.
///
/// A broker built without [`BrokerBuilder::audit_log`](crate::BrokerBuilder::audit_log)
/// opens the one the policy's `[audit]` section names ([`AuditLog::open`]): its `file`, or,
/// when it names none, `tracing` events (target `mcp_fsbroker::audit`, level `info`), which
/// reach nothing unless the host installs a subscriber. A library never writes to its host's
/// stderr on its own; the `fsbroker` binary does, as its policy documentation says
/// ([`AuditLog::open_or_stderr`]).
pub struct AuditLog {
    sink: Option<Sink>,
    redact_key: Option<[u8; 32]>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("enabled", &self.sink.is_some())
            .field("redacted", &self.redact_key.is_some())
            .finish()
    }
}

impl AuditLog {
    /// Opens the log the policy asks for: its file (appended), or `tracing` events when it
    /// names none (see [`AuditLog`]); nothing when the log is off.
    pub fn open(config: &AuditPolicy) -> std::io::Result<AuditLog> {
        AuditLog::open_with(config, Sink::tracing)
    }

    /// Opens the log the policy asks for as the `fsbroker` binary does: its file, or stderr
    /// when it names none.
    pub fn open_or_stderr(config: &AuditPolicy) -> std::io::Result<AuditLog> {
        AuditLog::open_with(config, || Sink::writer(Box::new(std::io::stderr())))
    }

    fn open_with(config: &AuditPolicy, unset: impl FnOnce() -> Sink) -> std::io::Result<AuditLog> {
        if !config.enabled {
            return Ok(AuditLog::disabled());
        }
        let sink = match &config.file {
            Some(p) => Sink::File(Mutex::new(AuditFile::open(
                p,
                config.rotate_bytes,
                config.keep,
            )?)),
            None => unset(),
        };
        let redact_key = if config.redact_paths {
            Some(match &config.redact_key {
                Some(hex) => parse_key(hex).ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad audit.redact_key")
                })?,
                None => {
                    let mut k = [0u8; 32];
                    getrandom::fill(&mut k).map_err(std::io::Error::other)?;
                    k
                }
            })
        } else {
            None
        };
        Ok(AuditLog {
            sink: Some(sink),
            redact_key,
        })
    }

    /// A log that writes nothing.
    pub fn disabled() -> AuditLog {
        AuditLog {
            sink: None,
            redact_key: None,
        }
    }

    /// A log into any writer, a line at a time; paths are redacted with `redact_key` (a
    /// keyed hash instead of each path) when given.
    pub fn to_writer(w: Box<dyn Write + Send>, redact_key: Option<[u8; 32]>) -> AuditLog {
        AuditLog {
            sink: Some(Sink::writer(w)),
            redact_key,
        }
    }

    /// A log appended to the file at `path` (created if need be), continuing the hash chain
    /// of the lines already there; never rotated.
    pub fn to_file(path: &std::path::Path) -> std::io::Result<AuditLog> {
        Ok(AuditLog {
            sink: Some(Sink::File(Mutex::new(AuditFile::open(path, None, 1)?))),
            redact_key: None,
        })
    }

    /// A log that hands each line (one JSON object, without its newline) to `f`.
    pub fn to_fn(f: impl Fn(&str) + Send + Sync + 'static) -> AuditLog {
        AuditLog {
            sink: Some(Sink::Callback(Mutex::new(Head::new_chain()), Box::new(f))),
            redact_key: None,
        }
    }

    /// A log of `tracing` events (target `mcp_fsbroker::audit`, level `info`, the line as
    /// the message).
    pub fn to_tracing() -> AuditLog {
        AuditLog {
            sink: Some(Sink::tracing()),
            redact_key: None,
        }
    }

    /// Checks the hash chain of one audit file, read from `reader`: each line a JSON object,
    /// each `seq` one more than the one before, each `hash` right for the line's text. When
    /// the file follows another (the next older one after a rotation: `FILE.2`, then `FILE.1`,
    /// then `FILE`), pass that file's verdict as `follows`, so that the first line's `prev`
    /// must name its last hash. Stops at the first bad line, which the verdict names; only
    /// failing to read is an error.
    ///
    /// ```
    /// use mcp_fsbroker::AuditLog;
    /// let verdict = AuditLog::verify(&b""[..], None)?;
    /// assert!(verdict.is_whole() && verdict.lines == 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn verify(
        reader: impl std::io::Read,
        follows: Option<&AuditVerdict>,
    ) -> std::io::Result<AuditVerdict> {
        verify::verify(reader, follows)
    }

    /// A path as logged: itself, or its keyed hash when paths are redacted.
    fn shown(&self, p: &str) -> String {
        match &self.redact_key {
            Some(k) => hashed(k, p),
            None => p.to_owned(),
        }
    }

    /// A path that may lie outside every root, as logged: always a keyed hash (with the
    /// redaction key if there is one, else the process's key), never the path.
    fn outside(&self, p: &str) -> Option<String> {
        self.redact_key
            .as_ref()
            .or(process_key())
            .map(|k| hashed(k, p))
    }

    /// Writes one record. Failures to log are reported through tracing, never to the peer.
    /// With the log off, a violation still goes to the tracing log at `warn`.
    pub(crate) fn record(&self, r: &AuditRecord<'_>) {
        let Some(sink) = &self.sink else {
            self.warn_unlogged(r);
            return;
        };
        // The line is built whole and written with one call: stderr is unbuffered, and
        // formatting into it directly cost a write system call per JSON token.
        match serde_json::to_vec(&self.line_of(r, &now())) {
            Ok(buf) => sink.write(buf, r.violation.is_some()),
            Err(e) => tracing::warn!(error = %e, "cannot encode audit record"),
        }
    }

    /// With the log off, a violation goes to the tracing log at `warn`, with the fields its
    /// line would have.
    fn warn_unlogged(&self, r: &AuditRecord<'_>) {
        if let Some(v) = &r.violation {
            let requested = v.requested.and_then(|p| self.outside(p));
            tracing::warn!(
                server = r.server_id,
                method = r.method,
                outcome = r.outcome,
                reason = v.reason.as_str(),
                requested = requested.as_deref().unwrap_or(""),
                "request refused: {}",
                v.reason.as_str()
            );
        }
    }

    /// The line of `r`, written at `time`: paths as logged (see [`AuditLog::shown`] and
    /// [`AuditLog::outside`]).
    fn line_of<'a>(&self, r: &'a AuditRecord<'a>, time: &'a str) -> Line<'a> {
        let requested = r
            .violation
            .and_then(|v| v.requested)
            .and_then(|p| self.outside(p));
        let consent = r.consent.map(|c| ConsentLine {
            access: c.access.map(Access::as_str),
            approved: c.approved.iter().map(|p| self.shown(p)).collect(),
            decided_by: &c.decided_by,
            denied: c
                .denied
                .iter()
                .map(|p| self.shown(p))
                .chain(c.outside.iter().filter_map(|p| self.outside(p)))
                .collect(),
        });
        Line {
            bytes: r.bytes,
            cpu_ms: (!r.cpu.is_zero()).then(|| (r.cpu.as_secs_f64() * 1e6).round() / 1e3),
            duration_ms: (r.duration.as_secs_f64() * 1e6).round() / 1e3,
            identity: r.identity,
            method: r.method,
            outcome: r.outcome,
            path: r.path.map(|p| self.shown(p)),
            reason: r.violation.map(|v| v.reason.as_str()),
            requested,
            server: r.server_id,
            time,
            consent,
        }
    }
}

/// Now, in RFC 3339, for a line.
fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let mut k = [0u8; 32];
    for (i, byte) in k.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(k)
}
