//! One connection to the daemon: the hello, `describe`, `attach`, and then the two tasks of
//! an attached session (one writes the lines to the daemon, one reads what comes back).

use super::ask;
use super::door::{Door, Reader as Raw, Writer};
use super::pending::{Pending, Route};
use super::{Answered, Attach, Naming};
use crate::framing::{Frame, next_frame};
use crate::lines::{LineReceiver, LineSender, QUEUE_LINES, budget, line_channel, write_queued};
use crate::locks::lock;
use crate::policy::EraMode;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long the daemon may take to welcome a connection, describe itself or attach.
const WELCOME_WAIT: Duration = Duration::from_secs(10);

/// Answers to consent questions waiting to be written to the daemon (each a few hundred
/// bytes; the requests' own queue is bounded in bytes).
const ANSWERS: usize = 16;

/// Longest control answer read (`describe`, `attach`).
const MAX_CONTROL: usize = 16 * 1024 * 1024;

type Reader = BufReader<Raw>;

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

/// Opens a connection through `door`, and proves the key when the broker asks for one.
async fn connect(door: &dyn Door) -> Result<(Reader, Writer), String> {
    let opened = door.open().await?;
    let (mut reader, mut write) = (BufReader::new(opened.reader), opened.writer);
    if let Some(key) = opened.hello {
        let welcome = exchange(&mut reader, &mut write, &json!({"hello": key})).await?;
        if welcome["ok"] != true {
            return Err(said(&welcome));
        }
    }
    Ok((reader, write))
}

/// Sends one control line and reads its answer.
async fn exchange(r: &mut Reader, w: &mut Writer, v: &Value) -> Result<Value, String> {
    let mut line = serde_json::to_vec(v).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let talk = async {
        w.write_all(&line).await.map_err(|e| e.to_string())?;
        match next_frame(r, MAX_CONTROL).await {
            Ok(Frame::Line(l)) => serde_json::from_slice(&l).map_err(|e| e.to_string()),
            Ok(_) => Err("the daemon closed the connection".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    };
    match tokio::time::timeout(WELCOME_WAIT, talk).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the daemon did not answer within {} s",
            WELCOME_WAIT.as_secs()
        )),
    }
}

/// What an error answer says.
fn said(answer: &Value) -> String {
    match answer["error"].as_str() {
        Some(m) => format!("the daemon refused: {m}"),
        None => format!("the daemon answered something unexpected: {answer}"),
    }
}

/// Asks the broker behind `door` to describe itself.
pub(crate) async fn describe(door: &dyn Door) -> Result<Described, String> {
    let (mut r, mut w) = connect(door).await?;
    let d = exchange(&mut r, &mut w, &json!({"op": "describe"})).await?;
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
        let line = br#"{"op":"describe","follow":true}
"#;
        writer.write_all(line).await.map_err(|e| e.to_string())?;
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

/// An attached session's live connection.
pub(super) struct Live {
    epoch: u64,
    session: String,
    lines: LineSender,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Live {
    /// The connection's number (see [`Pending::begin`]).
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The session's name on the daemon.
    pub(super) fn session(&self) -> &str {
        &self.session
    }

    /// Sends `line`; false when the connection is gone.
    pub(super) async fn send(&self, line: Vec<u8>) -> bool {
        self.lines.send(line).await.is_ok()
    }

    /// Ends the session: the daemon sees the end of its input, answers what it has under
    /// way within its grace, and closes.
    pub(super) async fn finish(self) {
        drop(self.lines);
        let grace = crate::order::SHUTDOWN_GRACE + Duration::from_secs(5);
        let _ = tokio::time::timeout(grace, self.writer).await;
        let mut reader = self.reader;
        if tokio::time::timeout(grace, &mut reader).await.is_err() {
            reader.abort();
        }
    }
}

/// Connects, attaches and starts the session's tasks.
pub(super) async fn open<M: Default + Send + 'static>(
    attach: &Attach,
    naming: &dyn Naming,
    pending: &Arc<Pending>,
    output: &LineSender<M>,
    answered: &Answered,
) -> Result<Live, String> {
    let (mut r, mut w) = connect(attach.door.as_ref()).await?;
    let request = json!({
        "op": "attach",
        "server": naming.name(),
        "serverPid": attach.server_pid,
        "era": naming.era(),
        "sandbox": attach.sandbox,
        "asks": attach.asker.is_some(),
    });
    let welcome = exchange(&mut r, &mut w, &request).await?;
    let session = match welcome["session"].as_str() {
        Some(s) if welcome["ok"] == true => s.to_owned(),
        _ => return Err(said(&welcome)),
    };
    let epoch = pending.begin();
    // Bounded in bytes as `serve`'s own queues are: while the daemon holds the session (a
    // change, a consent question), the server is held up on its own pipe.
    let (lines, queued) = line_channel(QUEUE_LINES, budget(attach.max_line));
    let (answers, answers_rx) = mpsc::channel(ANSWERS);
    let writer = tokio::spawn(write(w, queued, answers_rx));
    let reader = tokio::spawn(read(
        r,
        Reading {
            epoch,
            max_line: attach.max_line,
            pending: pending.clone(),
            output: output.clone(),
            answered: answered.clone(),
            asker: attach.asker.clone(),
            answers,
            asking: Asking::default(),
        },
    ));
    Ok(Live {
        epoch,
        session,
        lines,
        reader,
        writer,
    })
}

/// Writes the queued lines, a burst at a time, and the answers to consent questions between
/// them, until the session's sender is gone.
async fn write(w: Writer, mut queued: LineReceiver, mut answers: mpsc::Receiver<Vec<u8>>) {
    let mut out = BufWriter::with_capacity(64 * 1024, w);
    let mut answering = true;
    loop {
        let line = tokio::select! {
            l = queued.recv() => match l {
                Some(l) => l,
                None => break,
            },
            a = answers.recv(), if answering => match a {
                Some(a) => a,
                None => { answering = false; continue }
            },
        };
        if write_queued(&mut out, Some(line), &mut queued)
            .await
            .is_err()
        {
            // The daemon is gone: the reader sees it and answers what is owed.
            return;
        }
    }
    let _ = out.shutdown().await;
}

/// What the reading task needs.
struct Reading<M> {
    epoch: u64,
    max_line: usize,
    pending: Arc<Pending>,
    output: LineSender<M>,
    answered: Answered,
    asker: Option<Arc<dyn super::Asker>>,
    /// For the answers to consent questions.
    answers: mpsc::Sender<Vec<u8>>,
    /// The questions being asked, by id: a withdrawn one is stopped where it stands.
    asking: Asking,
}

/// The tasks asking the broker's questions, by the question's id.
type Asking = Arc<std::sync::Mutex<std::collections::HashMap<String, JoinHandle<()>>>>;

/// Reads the daemon's lines until the connection ends, then answers what it owed.
async fn read<M: Default + Send + 'static>(mut r: Reader, how: Reading<M>) {
    // The daemon's lines are at most its own limit; one longer is not from a daemon.
    let limit = how.max_line.saturating_mul(2).max(1 << 20);
    loop {
        let line = match next_frame(&mut r, limit).await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(bytes = n, "dropped an over-long line from the daemon");
                continue;
            }
            Ok(Frame::Eof) | Err(_) => break,
        };
        if !route(line, &how).await {
            return;
        }
    }
    let owed = how.pending.lose(how.epoch);
    if !owed.is_empty() {
        tracing::warn!(
            requests = owed.len(),
            "lost the daemon with requests unanswered; they fail with broker_unavailable"
        );
    }
    for answer in owed {
        if let Some(id) = answer.get("id") {
            (how.answered)(id);
        }
        if let Ok(l) = serde_json::to_vec(&answer) {
            let _ = how.output.send(l).await;
        }
    }
}

/// One message of a daemon's line, as far as routing needs it.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
}

/// Sends one line of the daemon where it goes; false when the server's side is gone.
async fn route<M: Default + Send + 'static>(line: Vec<u8>, how: &Reading<M>) -> bool {
    let batch = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if batch {
        for head in serde_json::from_slice::<Vec<Head>>(&line).unwrap_or_default() {
            if let Some(id) = head.id {
                how.pending.answered(&id);
                (how.answered)(&id);
            }
        }
        return how.output.send(line).await.is_ok();
    }
    let head: Option<Head> = serde_json::from_slice(&line).ok();
    match head {
        Some(Head {
            id: None,
            method: Some(m),
        }) if m == ask::WITHDRAW_METHOD => {
            withdraw(&line, how).await;
            true
        }
        Some(Head {
            id: Some(id),
            method: Some(m),
        }) if m == ask::ASK_METHOD => {
            ask_user(id, &line, how);
            true
        }
        Some(Head {
            id: Some(id),
            method: None,
        }) => match how.pending.answered(&id) {
            Route::Call(answer) => {
                if let Ok(v) = serde_json::from_slice(&line) {
                    let _ = answer.send(v);
                }
                true
            }
            Route::Server => {
                (how.answered)(&id);
                how.output.send(line).await.is_ok()
            }
        },
        _ => how.output.send(line).await.is_ok(),
    }
}

/// Puts a consent question to this side's asker, on a task of its own (the user may take a
/// while), and sends the answer back; without an asker, answers at once that nobody here
/// could be asked.
fn ask_user<M>(id: Value, line: &[u8], how: &Reading<M>) {
    let question = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| ask::read_question(&v));
    let answers = how.answers.clone();
    let asker = how.asker.clone();
    let key = crate::jsonrpc::id_key(&id);
    let asking = how.asking.clone();
    // Held while the task is noted, so that the task's own removal comes after.
    let mut tasks = lock(&how.asking);
    let task = tokio::spawn({
        let key = key.clone();
        async move {
            let decided = match (question, asker) {
                (Some((_, request)), Some(asker)) => asker.ask(request).await,
                _ => None,
            };
            lock(&asking).remove(&key);
            let _ = answers.send(ask::answer(&id, decided.as_ref())).await;
        }
    });
    tasks.insert(key, task);
}

/// Stops asking the question a withdrawal line names: the asker's future is dropped, which
/// closes a host's dialog, before the next line of the broker's is passed on (the answer it
/// then sends the server comes after the host heard). The broker wants no answer to it.
async fn withdraw<M>(line: &[u8], how: &Reading<M>) {
    let id = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| ask::read_withdrawal(&v));
    let task = id.and_then(|id| lock(&how.asking).remove(&crate::jsonrpc::id_key(&id)));
    if let Some(task) = task {
        task.abort();
        // Ends once the task is dropped, its asker's future with it.
        let _ = task.await;
    }
}
