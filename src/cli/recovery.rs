//! `fsbroker history`, `fsbroker restore` and `fsbroker undo`: the recovery store, read and
//! restored from directly (no daemon needed: every process of the user shares the store, and
//! its journal's lock).

use super::terminal::{self, err, out};
use crate::policy::Policy;
use crate::recovery::{Change, RecoveryStore};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Where the store is.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The policy file whose `recovery.dir` names the store [default: the embedded
    /// policy's, $XDG_STATE_HOME/fsbroker/recovery or ~/.local/state/fsbroker/recovery].
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `history`.
#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Only this server's changes (a server id, or a session as the list names it).
    #[arg(long, value_name = "ID")]
    server: Option<String>,
    /// Only changes at or after TIME: RFC 3339 (2026-11-26T21:00:00Z), or an age such as
    /// 30s, 10m, 2h or 3d.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

/// Options of `restore`.
#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// The change, as `fsbroker history` names it.
    #[arg(value_name = "ID")]
    id: String,
    /// Put the content there (mount form, MOUNT/PATH) instead of where it was.
    #[arg(long, value_name = "MOUNT-PATH")]
    to: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

/// Options of `undo`.
#[derive(Debug, Args)]
pub(crate) struct UndoArgs {
    /// The server (its latest session, unless --since) or the session whose changes to undo.
    #[arg(long, value_name = "ID")]
    server: String,
    /// Undo its changes at or after TIME (as for `history`), in all its sessions.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

/// `fsbroker history`: 0 with the changes listed, 1 when the store cannot be read, 2 on a
/// bad TIME.
pub(crate) fn history(args: HistoryArgs) -> ExitCode {
    let since = match args.since.as_deref().map(parse_time).transpose() {
        Ok(t) => t,
        Err(e) => return usage(&e),
    };
    let Some(store) = open(&args.store) else {
        return ExitCode::FAILURE;
    };
    let changes = match store.history(args.server.as_deref(), since) {
        Ok(c) => c,
        Err(e) => return fail(&format!("cannot read the recovery journal: {e}")),
    };
    if args.store.json {
        let listed = store.listed(&changes);
        let _ = terminal::json(
            &serde_json::json!({ "store": store.path(), "changes": listed }),
            false,
        );
        return ExitCode::SUCCESS;
    }
    if changes.is_empty() {
        out!(
            "no changes in the recovery store ({})",
            store.path().display()
        );
    }
    for c in &changes {
        out!("{}", line_of(c));
    }
    ExitCode::SUCCESS
}

/// `fsbroker restore`: 0 when the change was put back, 1 when it could not be.
pub(crate) fn restore(args: RestoreArgs) -> ExitCode {
    let Some(store) = open(&args.store) else {
        return ExitCode::FAILURE;
    };
    match store.restore(&args.id, args.to.as_deref()) {
        Ok(r) if args.store.json => {
            let _ = terminal::json(&serde_json::json!({ "restored": r }), false);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            out!("restored {} at {}", r.id, r.path);
            for k in &r.kept {
                out!("  what stood there is kept as {k} (fsbroker restore {k} puts it back)");
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot restore {}: {}", args.id, e.message())),
    }
}

/// `fsbroker undo`: 0 when every change was taken back, 1 when any was left alone (each is
/// named) or the store cannot be read, 2 on a bad TIME.
pub(crate) fn undo(args: UndoArgs) -> ExitCode {
    let since = match args.since.as_deref().map(parse_time).transpose() {
        Ok(t) => t,
        Err(e) => return usage(&e),
    };
    let Some(store) = open(&args.store) else {
        return ExitCode::FAILURE;
    };
    let undone = match store.undo(&args.server, since) {
        Ok(u) => u,
        Err(e) => return fail(&format!("cannot undo: {}", e.message())),
    };
    if args.store.json {
        let _ = terminal::json(&serde_json::json!(undone), false);
    } else {
        if undone.restored.is_empty() && undone.conflicts.is_empty() {
            out!("no changes of {} to undo", args.server);
        }
        for r in &undone.restored {
            out!("undid {} at {}", r.id, r.path);
        }
        for c in &undone.conflicts {
            out!("left {} at {}: {}", c.id, c.path, c.why);
        }
    }
    if undone.conflicts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The store the options name, or `None` with the reason printed.
fn open(args: &StoreArgs) -> Option<RecoveryStore> {
    let policy = match &args.policy {
        Some(p) => Policy::load(p),
        None => Policy::from_default_file(),
    };
    let policy = match policy {
        Ok(p) => p,
        Err(e) => {
            err!("fsbroker: {e}");
            return None;
        }
    };
    match RecoveryStore::open(&policy.recovery) {
        Ok(s) => Some(s),
        Err(e) => {
            err!("fsbroker: cannot open the recovery store: {e}");
            None
        }
    }
}

/// One change as a line of the listing.
fn line_of(c: &Change) -> String {
    let target = match &c.to {
        Some(to) => format!("{} -> {}", c.path, to),
        None => c.path.clone(),
    };
    let kept = match (&c.kept, &c.not_kept) {
        (Some(k), _) => format!("kept {} ({})", k.kind, size(k.bytes)),
        (None, Some(why)) => format!("NOT RECOVERABLE: {why}"),
        (None, None) => "nothing destroyed".to_owned(),
    };
    let state = match (&c.restored_by, &c.pruned) {
        (Some(_), _) => "  [restored]",
        (None, Some(_)) => "  [pruned for space]",
        _ => "",
    };
    format!(
        "{}  {}  {:<12} {:<13} {target}  {kept}{state}",
        c.id,
        c.time,
        c.who(),
        c.method
    )
}

/// A size for people.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// TIME as milliseconds since the epoch: RFC 3339, or an age (`30s`, `10m`, `2h`, `3d`).
fn parse_time(s: &str) -> Result<u64, String> {
    if let Ok(t) = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
        return u64::try_from(t.unix_timestamp_nanos() / 1_000_000)
            .map_err(|_| format!("{s}: before 1970"));
    }
    let bad = || {
        format!(
            "TIME must be RFC 3339 (2026-11-26T21:00:00Z) or an age such as 30s, 10m, 2h or 3d, not {s:?}"
        )
    };
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    Ok(crate::recovery::now_ms().saturating_sub(n.saturating_mul(secs * 1000)))
}

fn usage(message: &str) -> ExitCode {
    err!("fsbroker: {message}");
    ExitCode::from(2)
}

fn fail(message: &str) -> ExitCode {
    err!("fsbroker: {message}");
    ExitCode::FAILURE
}
