//! The `command:PROGRAM` consent provider: runs PROGRAM, writes the request as one JSON object
//! on its stdin, and reads the decision as one JSON object from its stdout.
//!
//! Request: `{"serverId", "message", "paths": [mount-form], "folders": [those of `paths`
//! that are directories], "access"}`. Answer:
//! `{"granted": bool}` to approve or deny everything, or `{"approvedPaths": [...],
//! "access"?: "read"|"write"}`. A program that fails, times out or answers nonsense denies.

use super::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest};
use crate::root::Access;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest answer read from the program.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

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
            return Ok(ConsentDecision::deny());
        }
        Ok(parse_answer(&out, request))
    }
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
