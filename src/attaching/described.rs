//! What a broker says of itself before a session begins (`describe`), once or after every
//! change of its policy (`describe` with `follow`).

use super::control::{MAX_CONTROL, Reader, connect, exchange, said};
use super::door::{Door, Writer};
use super::protocol::{Describe, Request};
use crate::framing::{Frame, next_frame};
use crate::policy::EraMode;
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;
use tokio::io::AsyncWriteExt;

/// What the daemon says of itself before a session begins.
#[derive(Debug, Clone)]
pub(crate) struct Described {
    /// The longest line its sessions take.
    pub(crate) max_line: usize,
    /// The client capabilities a proxy adds to the host's `initialize`.
    pub(crate) capabilities: Value,
    /// Its era rule for proxied sessions.
    pub(crate) era: EraMode,
    /// Its roots.
    pub(crate) roots: Vec<DescribedRoot>,
    /// The places it keeps for itself, as it names them (boxed: a description is carried by
    /// value beside a broker of the proxy's own, which is one pointer).
    pub(crate) kept: Box<Kept>,
}

/// The places a daemon keeps for itself, as it names them in its description: no sandbox
/// profile opens them (the proxy's own environment may name other places than the daemon's).
#[derive(Debug, Clone, Default)]
pub(crate) struct Kept {
    /// Its recovery store, when recovery is on.
    pub(crate) store: Option<PathBuf>,
    /// Its audit file, when it writes one.
    pub(crate) audit: Option<PathBuf>,
    /// The log of daemons started in the background, as its environment places it.
    pub(crate) log: Option<PathBuf>,
    /// The console's grant file, as its environment places it.
    pub(crate) console: Option<PathBuf>,
    /// The policy file it was started on (and reloads on save), when it has one.
    pub(crate) policy: Option<PathBuf>,
    /// The `command:` programs that answer its consent questions.
    pub(crate) consent: Vec<PathBuf>,
}

/// One of the daemon's roots.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct DescribedRoot {
    /// The mount name.
    pub(crate) mount: String,
    /// Its directory.
    pub(crate) path: PathBuf,
    /// `read` or `write`.
    pub(crate) access: crate::access::Access,
    /// The server ids that see it.
    pub(crate) servers: Vec<String>,
    /// The directory's device and inode as the daemon's handle holds it, when known.
    pub(crate) pin: Option<(u64, u64)>,
}

/// Asks the broker behind `door` to describe itself.
pub(crate) async fn describe(door: &dyn Door) -> Result<Described, String> {
    let (mut r, mut w) = connect(door).await?;
    let d = exchange(&mut r, &mut w, &Request::Describe(Describe::default())).await?;
    described(&d)
}

/// The daemon's descriptions, now and after every change of its policy.
pub(crate) struct Following {
    reader: Reader,
    _writer: Writer,
}

impl Following {
    /// Asks the broker behind `door` for its description now and after every policy change.
    pub(crate) async fn start(door: &dyn Door) -> Result<Following, String> {
        let (reader, mut writer) = connect(door).await?;
        let mut line = Request::Describe(Describe { follow: true }).to_line()?;
        line.push(b'\n');
        writer.write_all(&line).await.map_err(|e| e.to_string())?;
        Ok(Following {
            reader,
            _writer: writer,
        })
    }

    /// The next description; `None` once the daemon is gone or said something else.
    pub(crate) async fn next(&mut self) -> Option<Described> {
        match next_frame(&mut self.reader, MAX_CONTROL).await {
            Ok(Frame::Line(l)) => described(&serde_json::from_slice(&l).ok()?).ok(),
            _ => None,
        }
    }
}

/// A description read from the daemon's answer `d`.
fn described(d: &Value) -> Result<Described, String> {
    if d["ok"] != true {
        return Err(said(d));
    }
    let max_line = d["maxLine"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("the daemon's description has no maxLine")?;
    let era = d["era"]
        .as_str()
        .and_then(EraMode::parse)
        .ok_or("the daemon's description has no era")?;
    let roots = serde_json::from_value(d["roots"].clone())
        .map_err(|e| format!("the daemon's description of its roots: {e}"))?;
    Ok(Described {
        max_line,
        capabilities: d["capabilities"].clone(),
        era,
        roots,
        kept: Box::new(Kept {
            store: path(&d["recoveryStore"]),
            audit: path(&d["auditFile"]),
            log: path(&d["daemonLog"]),
            console: path(&d["consoleFile"]),
            policy: path(&d["policyFile"]),
            consent: paths(&d["consentPrograms"])?,
        }),
    })
}

/// A path the daemon named, if it named one.
fn path(v: &Value) -> Option<PathBuf> {
    v.as_str().map(PathBuf::from)
}

/// The paths the daemon named in the list `v` (none when it named no list). A list with
/// anything but paths in it is refused: a place the sandbox must keep closed that cannot be
/// read would be left open.
fn paths(v: &Value) -> Result<Vec<PathBuf>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                path(i).ok_or_else(|| {
                    format!(
                        "the daemon's description names a consent program that is not a path: {i}"
                    )
                })
            })
            .collect(),
        other => Err(format!(
            "the daemon's description has consentPrograms that are not a list: {other}"
        )),
    }
}
