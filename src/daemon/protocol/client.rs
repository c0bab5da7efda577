//! The client end of the control socket: connect through the one proof-checked connect
//! ([`crate::daemon::proof::connect_async`]), say hello with the key, then send requests and
//! read their answers. Every wait for an answer is bounded; the lines a stream sends after
//! its answer (`log` with `follow`) are waited for without a bound, as events come when
//! servers work.

use super::{Hello, Op, Request};
use crate::daemon::proof;
use crate::framing::{Frame, next_frame};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// How long the daemon may take to answer one line.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// Longest answer line read, in bytes.
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// A connection to the user's daemon that has proven the key and been welcomed.
#[derive(Debug)]
pub(crate) struct Client {
    socket: PathBuf,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Client {
    /// Connects to the daemon on `socket`, once it is proven to be the user's own (see
    /// [`crate::daemon::proof`]), and says hello with the key beside it. An `Err` says why
    /// no daemon welcomed this client ("no daemon answers on" when nothing listens).
    pub(crate) async fn connect(socket: &Path) -> Result<Client, String> {
        let (stream, secret) = proof::connect_async(socket).await?;
        let (read, writer) = stream.into_split();
        let mut client = Client {
            socket: socket.to_owned(),
            reader: BufReader::new(read),
            writer,
        };
        let hello = serde_json::to_vec(&Hello {
            hello: secret.hex().to_owned(),
        })
        .map_err(|e| format!("cannot write the hello: {e}"))?;
        // The daemon may refuse a peer before reading anything: a failed write still leaves
        // its refusal to read.
        let sent = client.send_line(hello).await;
        let welcome = client.answer().await;
        match (welcome, sent) {
            (Ok(w), _) if w["ok"] == true => Ok(client),
            (Ok(w), _) => Err(format!("the daemon on {} {}", socket.display(), said(&w))),
            (Err(_), Err(e)) | (Err(e), Ok(())) => Err(e),
        }
    }

    /// Sends `request` and returns the daemon's answer as it came, `{"ok": true, ...}` or
    /// `{"ok": false, "error": ...}`. An `Err` says why no answer came.
    pub(crate) async fn call(&mut self, request: &Request) -> Result<Value, String> {
        self.send(request).await?;
        self.answer().await
    }

    /// Sends `request` and reads a successful answer as `A`; an error answer is an `Err`
    /// with the daemon's message.
    pub(crate) async fn ask<A: DeserializeOwned>(
        &mut self,
        request: &Request,
    ) -> Result<A, String> {
        let answer = self.call(request).await?;
        succeeded(answer)
    }

    /// The typed call: sends `op`'s request and reads its successful answer, as its op
    /// answers; an error answer is an `Err` with the daemon's message.
    pub(crate) async fn request<O: Op>(&mut self, op: O) -> Result<O::Answer, String> {
        self.ask(&op.into()).await
    }

    /// Sends `request`, without reading anything.
    pub(crate) async fn send(&mut self, request: &Request) -> Result<(), String> {
        self.send_line(request.to_line()?).await
    }

    /// The next line of a stream the daemon sends after an answer, waited for without a
    /// bound; an `Err` when the daemon closed the stream or sent something else than JSON.
    pub(crate) async fn streamed(&mut self) -> Result<Value, String> {
        match next_frame(&mut self.reader, MAX_ANSWER).await {
            Ok(Frame::Line(l)) => self.json(&l),
            Ok(Frame::Eof) => Err(format!(
                "the daemon on {} closed the stream (it stopped)",
                self.socket.display()
            )),
            Ok(Frame::TooLong(n)) => Err(self.too_long(n)),
            Err(e) => Err(self.lost(&e)),
        }
    }

    /// The answer to the line just sent, waited for at most [`ANSWER_WAIT`].
    pub(crate) async fn answer(&mut self) -> Result<Value, String> {
        let socket = self.socket.display().to_string();
        let read = tokio::time::timeout(ANSWER_WAIT, next_frame(&mut self.reader, MAX_ANSWER));
        match read.await {
            Ok(Ok(Frame::Line(l))) => self.json(&l),
            Ok(Ok(Frame::Eof)) => Err(format!(
                "the daemon on {socket} closed the connection without an answer"
            )),
            Ok(Ok(Frame::TooLong(n))) => Err(self.too_long(n)),
            Ok(Err(e)) => Err(self.lost(&e)),
            Err(_) => Err(format!(
                "no answer from the daemon on {socket} within {} s",
                ANSWER_WAIT.as_secs()
            )),
        }
    }

    /// Writes one line, waiting at most [`ANSWER_WAIT`] for room.
    async fn send_line(&mut self, mut line: Vec<u8>) -> Result<(), String> {
        line.push(b'\n');
        let write = async {
            self.writer.write_all(&line).await?;
            self.writer.flush().await
        };
        match tokio::time::timeout(ANSWER_WAIT, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("cannot send to the daemon: {e}")),
            Err(_) => Err(format!(
                "cannot send to the daemon: it took nothing for {} s",
                ANSWER_WAIT.as_secs()
            )),
        }
    }

    fn json(&self, line: &[u8]) -> Result<Value, String> {
        serde_json::from_slice(line).map_err(|e| {
            format!(
                "the daemon on {} answered a line that is not JSON: {e}",
                self.socket.display()
            )
        })
    }

    fn too_long(&self, n: usize) -> String {
        format!(
            "the daemon on {} answered a line of {n} bytes, over the limit of {MAX_ANSWER}",
            self.socket.display()
        )
    }

    fn lost(&self, e: &std::io::Error) -> String {
        format!(
            "no answer from the daemon on {}: {e}",
            self.socket.display()
        )
    }
}

/// A successful answer read as `A`; an error answer as an `Err` with its message.
fn succeeded<A: DeserializeOwned>(answer: Value) -> Result<A, String> {
    if answer["ok"] != true {
        return Err(match answer["error"].as_str() {
            Some(m) => m.to_owned(),
            None => format!("unexpected answer: {answer}"),
        });
    }
    A::deserialize(&answer).map_err(|e| format!("unexpected answer ({e}): {answer}"))
}

/// What an error answer says.
fn said(answer: &Value) -> String {
    match answer["error"].as_str() {
        Some(m) => format!("answered: {m}"),
        None => format!("answered something else than expected: {answer}"),
    }
}
