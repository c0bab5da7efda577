//! The audit log: one JSON line per operation, never file contents.

use crate::locks::lock;
use crate::policy::AuditConfig;
use serde::Serialize;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

/// One operation, as logged.
#[derive(Debug, Clone)]
pub(crate) struct AuditRecord<'a> {
    /// The server session.
    pub server_id: &'a str,
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The mount-form path, if the operation had one.
    pub path: Option<&'a str>,
    /// `ok` or the error's `data.code` (or protocol fault name).
    pub outcome: &'a str,
    /// Bytes read or written.
    pub bytes: u64,
    /// How long the operation took.
    pub duration: Duration,
}

/// Where audit lines go.
pub struct AuditLog {
    sink: Option<Mutex<Box<dyn Write + Send>>>,
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
    /// Opens the log the policy asks for: a file (appended) or stderr.
    pub fn open(config: &AuditConfig) -> std::io::Result<AuditLog> {
        if !config.enabled {
            return Ok(AuditLog::disabled());
        }
        let sink: Box<dyn Write + Send> = match &config.file {
            Some(p) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ),
            None => Box::new(std::io::stderr()),
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
            sink: Some(Mutex::new(sink)),
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

    /// A log into any writer (for embedders and tests).
    pub fn to_writer(w: Box<dyn Write + Send>, redact_key: Option<[u8; 32]>) -> AuditLog {
        AuditLog {
            sink: Some(Mutex::new(w)),
            redact_key,
        }
    }

    /// Writes one record. Failures to log are reported through tracing, never to the peer.
    pub(crate) fn record(&self, r: &AuditRecord<'_>) {
        let Some(sink) = &self.sink else { return };
        let path = r.path.map(|p| match &self.redact_key {
            Some(k) => format!(
                "hash:{}",
                &blake3::keyed_hash(k, p.as_bytes()).to_hex()[..32]
            ),
            None => p.to_owned(),
        });
        let time = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let line = Line {
            bytes: r.bytes,
            duration_ms: (r.duration.as_secs_f64() * 1e6).round() / 1e3,
            method: r.method,
            outcome: r.outcome,
            path: path.as_deref(),
            server: r.server_id,
            time: &time,
        };
        // The line is built whole and written with one call: stderr is unbuffered, and
        // formatting into it directly cost a write system call per JSON token.
        let mut buf = match serde_json::to_vec(&line) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode audit record");
                return;
            }
        };
        buf.push(b'\n');
        let mut guard = lock(sink);
        if let Err(e) = guard.write_all(&buf).and_then(|()| guard.flush()) {
            tracing::warn!(error = %e, "cannot write audit log");
        }
    }
}

/// One audit line. The fields are in the order the lines have always had (sorted by key).
#[derive(Serialize)]
struct Line<'a> {
    bytes: u64,
    #[serde(rename = "durationMs")]
    duration_ms: f64,
    method: &'a str,
    outcome: &'a str,
    path: Option<&'a str>,
    server: &'a str,
    time: &'a str,
}

fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let mut k = [0u8; 32];
    for (i, byte) in k.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(k)
}
