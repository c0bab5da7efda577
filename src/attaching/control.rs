//! The control lines before a session: a connection opened through a broker's door, its
//! key proven when the broker asks for one, and one request answered at a time.

use super::door::{Door, Reader as Raw, Writer};
use super::protocol::Hello;
use crate::framing::{Frame, next_frame};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};

/// How long the broker may take to welcome a connection, describe itself or attach.
const WELCOME_WAIT: Duration = Duration::from_secs(10);

/// Longest control answer read (`describe`, `attach`).
pub(super) const MAX_CONTROL: usize = 16 * 1024 * 1024;

/// A connection's reading half, buffered.
pub(super) type Reader = BufReader<Raw>;

/// Opens a connection through `door`, and proves the key when the broker asks for one.
pub(super) async fn connect(door: &dyn Door) -> Result<(Reader, Writer), String> {
    let opened = door.open().await?;
    let (mut reader, mut write) = (BufReader::new(opened.reader), opened.writer);
    if let Some(key) = opened.hello {
        let welcome = exchange(&mut reader, &mut write, &Hello { hello: key }).await?;
        if welcome["ok"] != true {
            return Err(said(&welcome));
        }
    }
    Ok((reader, write))
}

/// Sends one control line (a request of the protocol, or the hello) and reads its answer.
pub(super) async fn exchange(
    r: &mut Reader,
    w: &mut Writer,
    v: &impl serde::Serialize,
) -> Result<Value, String> {
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
pub(super) fn said(answer: &Value) -> String {
    match answer["error"].as_str() {
        Some(m) => format!("the daemon refused: {m}"),
        None => format!("the daemon answered something unexpected: {answer}"),
    }
}
