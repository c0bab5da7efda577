//! The control protocol's lines, as the daemon writes them: a success and an error answer, one
//! JSON value a line, and the longest request line it reads.

use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Longest request line, in bytes.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// An error answer.
pub(crate) fn error(message: impl std::fmt::Display) -> Value {
    json!({"ok": false, "error": message.to_string()})
}

/// `answer` as a success: its fields, with `"ok": true`.
pub(crate) fn ok(answer: &impl serde::Serialize) -> Value {
    let mut v = serde_json::to_value(answer).unwrap_or(Value::Null);
    match &mut v {
        Value::Object(m) => {
            m.insert("ok".into(), Value::Bool(true));
            v
        }
        // Every answer type is a struct: anything else is a bug, said as an error.
        _ => error("the daemon could not write its answer"),
    }
}

/// Writes `v` as one line.
pub(crate) async fn send(w: &mut (impl AsyncWrite + Unpin), v: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
}
