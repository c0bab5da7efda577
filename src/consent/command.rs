//! The `command:PROGRAM` consent provider: runs PROGRAM, writes the request as one JSON object
//! on its stdin, and reads the decision as one JSON object from its stdout.
//!
//! Request: `{"serverId", "message", "paths": [mount-form], "folders": [those of `paths`
//! that are directories], "access", "shown": {"serverId", "message", "paths"}}`; `shown`
//! holds what a program may put on a screen (the same fields through the one sanitiser of
//! consent prompts), the others are exact, for deciding and answering. Answer:
//! `{"granted": bool}` to approve or deny everything, or `{"approvedPaths": [...],
//! "access"?: "read"|"write"}`. A program that fails, times out or answers nonsense denies.

use super::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest, sanitise};
use crate::access::Access;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest answer read from the program.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// Characters of the server's message in `shown`, as on the other prompts.
const MAX_MESSAGE_CHARS: usize = 500;

/// Runs an external program for each decision.
#[derive(Debug, Clone)]
pub struct CommandConsent {
    program: PathBuf,
}

impl CommandConsent {
    /// A provider running `program` (no shell; wrap arguments in a script).
    pub fn new(program: PathBuf) -> Self {
        CommandConsent { program }
    }

    async fn run(&self, request: &ConsentRequest) -> std::io::Result<ConsentDecision> {
        let mut child = tokio::process::Command::new(&self.program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let body = json!({
            "serverId": request.server_id,
            "message": request.message,
            "paths": request.paths.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "folders": request.folders.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "access": request.access.as_str(),
            "purpose": request.purpose.as_str(),
            "identity": request.identity,
            "askedAgain": request.asked_again,
            "shown": shown(request),
        });
        if let Some(mut stdin) = child.stdin.take() {
            // A program that exits without reading its input still gets to answer.
            let _ = stdin.write_all(format!("{body}\n").as_bytes()).await;
        }
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            stdout.take(MAX_ANSWER_BYTES).read_to_end(&mut out).await?;
        }
        let status = child.wait().await?;
        if !status.success() {
            tracing::warn!(program = %self.program.display(), %status, "consent command failed without a decision; denying");
            return Ok(ConsentDecision::deny());
        }
        Ok(parse_answer(&out, request))
    }
}

/// What a program may show the user: the server's name, its message and the paths, with
/// every character a user cannot see as it is replaced (the exact fields are for matching
/// and answering, and may hold invisible or reordering characters).
fn shown(request: &ConsentRequest) -> Value {
    json!({
        "serverId": sanitise(&request.server_id, 100),
        "message": request.message.as_deref().map(|m| sanitise(m, MAX_MESSAGE_CHARS)),
        "paths": request
            .paths
            .iter()
            .map(|p| sanitise(&p.to_string(), 4096))
            .collect::<Vec<_>>(),
    })
}

fn parse_answer(out: &[u8], request: &ConsentRequest) -> ConsentDecision {
    let Ok(v) = serde_json::from_slice::<Value>(out) else {
        tracing::warn!("consent command answered with invalid json; denying");
        return ConsentDecision::deny();
    };
    let access = match v.get("access").and_then(Value::as_str) {
        Some("read") => Access::Read,
        _ => request.access,
    };
    if let Some(granted) = v.get("granted").and_then(Value::as_bool) {
        return if granted {
            ConsentDecision {
                approved: request.paths.clone(),
                access,
            }
        } else {
            ConsentDecision::deny()
        };
    }
    let Some(list) = v.get("approvedPaths").and_then(Value::as_array) else {
        tracing::warn!("consent command answer has neither granted nor approvedPaths; denying");
        return ConsentDecision::deny();
    };
    let approved = request
        .paths
        .iter()
        .filter(|p| {
            let s = p.to_string();
            list.iter().any(|a| a.as_str() == Some(s.as_str()))
        })
        .cloned()
        .collect();
    ConsentDecision { approved, access }
}

impl ConsentProvider for CommandConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move {
            match self.run(request).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(program = %self.program.display(), error = %e, "consent command failed; denying");
                    ConsentDecision::deny()
                }
            }
        })
    }
}
