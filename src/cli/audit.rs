//! `fsbroker audit verify FILE...`: checks audit files' hash chains and prints one line per
//! file: whole (with the last hash, to keep), or the first bad line and why.

use super::terminal::{err, out};
use crate::{AuditLog, AuditVerdict};
use std::path::PathBuf;
use std::process::ExitCode;

/// Verifies `files`, oldest first (`FILE.2 FILE.1 FILE`): each file's first `prev` must name
/// the last hash of the file before it. Exits 0 when every file is whole, 1 when a line is
/// bad or a file begins mid-chain, and 2 when a file cannot be read (after the others).
pub(super) fn verify(files: &[PathBuf]) -> ExitCode {
    let mut code = 0u8;
    let mut before: Option<AuditVerdict> = None;
    for (i, file) in files.iter().enumerate() {
        let name = file.display();
        let last = i + 1 == files.len();
        let verdict =
            match std::fs::File::open(file).and_then(|f| AuditLog::verify(f, before.as_ref())) {
                Ok(v) => v,
                Err(e) => {
                    err!("fsbroker: {name}: cannot read: {e}");
                    code = 2;
                    before = None;
                    continue;
                }
            };
        match &verdict.fault {
            Some(fault) => {
                out!("{name}: {fault}");
                for later in &verdict.later_faults {
                    out!("{name}: also {later}");
                }
                if verdict.later_faults.len() >= crate::audit::MAX_FAULTS {
                    out!("{name}: and perhaps more after those");
                }
                code = code.max(1);
            }
            None if verdict.mid_chain => {
                out!(
                    "{name}: begins mid-chain (its head was removed); from its first line on, {}",
                    summary(&verdict)
                );
                code = code.max(1);
            }
            // Rotation moves a file aside only to add a line it cannot hold, so only the
            // newest file may be empty: an empty one before it had its lines taken.
            None if verdict.lines == 0 && !last => {
                out!("{name}: empty, though a rotated file always holds lines: they were removed");
                code = code.max(1);
            }
            None => out!("{name}: whole: {}", summary(&verdict)),
        }
        // The next file is checked against the last line of the chain seen so far.
        if verdict.lines > 0 {
            before = Some(verdict);
        }
    }
    ExitCode::from(code)
}

/// `N lines, seq A to B, last hash H` (or `0 lines`).
fn summary(v: &AuditVerdict) -> String {
    let lines = if v.lines == 1 { "line" } else { "lines" };
    match (v.first_seq, v.last_seq, &v.last_hash) {
        (Some(a), Some(b), Some(h)) => {
            format!("{} {lines}, seq {a} to {b}, last hash {h}", v.lines)
        }
        _ => format!("{} {lines}", v.lines),
    }
}
