//! Consent mode `elicit`: the user answers a server's `files/consent` in their own host,
//! through an `elicitation/create` form the proxy sends. A host that did not declare form
//! elicitation gets the fallback provider instead.

use super::host::HostChannel;
use crate::consent::{BoxFuture, ConsentDecision, ConsentProvider, ConsentRequest};
use crate::root::Access;
use serde_json::{Value, json};
use std::sync::Arc;

/// Longest part of the server's own message shown to the user.
const MAX_MESSAGE_CHARS: usize = 500;
/// Paths listed by name in the form; the rest are counted.
const MAX_LISTED: usize = 16;

/// Asks the host's user through `elicitation/create`.
pub struct ElicitConsent {
    host: Arc<HostChannel>,
    fallback: Arc<dyn ConsentProvider>,
}

impl ElicitConsent {
    /// Asks through `host` when it can show a form, else through `fallback`.
    pub fn new(host: Arc<HostChannel>, fallback: Arc<dyn ConsentProvider>) -> ElicitConsent {
        ElicitConsent { host, fallback }
    }
}

impl ConsentProvider for ElicitConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move {
            if !self.host.can_elicit() {
                tracing::debug!("host cannot elicit; asking the fallback consent provider");
                return self.fallback.decide(request).await;
            }
            match self.host.request("elicitation/create", form(request)).await {
                Ok(result) => decision(request, &result),
                Err(e) => {
                    tracing::warn!(error = %e, "consent elicitation failed; denied");
                    ConsentDecision::deny()
                }
            }
        })
    }
}

/// The `elicitation/create` params for `request`. Only mount-form paths appear, and the
/// server's message is stripped of control characters and cut short, since the host shows
/// it to the user as it is.
pub fn form(request: &ConsentRequest) -> Value {
    let mut text = format!(
        "The MCP server \"{}\" asks to {} these files:\n",
        clean(&request.server_id, 100),
        match request.access {
            Access::Read => "read",
            Access::Write => "read and change",
        }
    );
    for p in request.paths.iter().take(MAX_LISTED) {
        text.push_str("  ");
        text.push_str(&p.to_string());
        text.push('\n');
    }
    if request.paths.len() > MAX_LISTED {
        text.push_str(&format!(
            "  and {} more\n",
            request.paths.len() - MAX_LISTED
        ));
    }
    if let Some(m) = request.message.as_deref().filter(|m| !m.trim().is_empty()) {
        text.push_str("It says: ");
        text.push_str(&clean(m, MAX_MESSAGE_CHARS));
        text.push('\n');
    }
    let (choices, names): (Vec<&str>, Vec<&str>) = match request.access {
        Access::Write => (
            vec!["read", "write", "deny"],
            vec!["Allow reading", "Allow reading and writing", "Deny"],
        ),
        Access::Read => (vec!["read", "deny"], vec!["Allow reading", "Deny"]),
    };
    json!({
        "message": text,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Access",
                    "description": "What the server may do with these paths",
                    "enum": choices,
                    "enumNames": names,
                }
            },
            "required": ["decision"],
        }
    })
}

/// The decision an `elicitation/create` result stands for. Anything but an accepted `read`
/// or `write` is a denial, and write is never more than was asked.
pub fn decision(request: &ConsentRequest, result: &Value) -> ConsentDecision {
    if result.get("action").and_then(Value::as_str) != Some("accept") {
        return ConsentDecision::deny();
    }
    let access = match result
        .get("content")
        .and_then(|c| c.get("decision"))
        .and_then(Value::as_str)
    {
        Some("read") => Access::Read,
        Some("write") if request.access == Access::Write => Access::Write,
        _ => return ConsentDecision::deny(),
    };
    ConsentDecision {
        approved: request.paths.clone(),
        access,
    }
}

fn clean(s: &str, max: usize) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{MountName, MountPath, RequestPath};

    fn request(access: Access, message: Option<&str>) -> ConsentRequest {
        let paths: Vec<MountPath> = match RequestPath::parse("proj/a.txt") {
            Ok(RequestPath::Mount { mount, rel }) => MountName::new(&mount)
                .ok()
                .map(|mount| MountPath { mount, rel })
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        assert_eq!(paths.len(), 1);
        ConsentRequest {
            server_id: "srv".into(),
            message: message.map(str::to_owned),
            paths,
            access,
        }
    }

    #[test]
    fn form_names_paths_and_offers_only_what_was_asked() {
        let f = form(&request(Access::Read, Some("need\x1b[2J it")));
        let text = f["message"].as_str().unwrap_or_default();
        assert!(text.contains("proj/a.txt"));
        assert!(!text.contains('\x1b'));
        assert_eq!(
            f["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["read", "deny"])
        );
        let f = form(&request(Access::Write, None));
        assert_eq!(
            f["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["read", "write", "deny"])
        );
    }

    #[test]
    fn only_an_accepted_choice_grants() {
        let w = request(Access::Write, None);
        let r = request(Access::Read, None);
        let accept = |d: &str| json!({"action":"accept","content":{"decision":d}});
        assert_eq!(decision(&w, &accept("write")).access, Access::Write);
        assert_eq!(decision(&w, &accept("read")).access, Access::Read);
        assert_eq!(decision(&w, &accept("read")).approved.len(), 1);
        assert!(decision(&r, &accept("write")).approved.is_empty());
        assert!(decision(&w, &accept("deny")).approved.is_empty());
        assert!(
            decision(&w, &json!({"action":"decline"}))
                .approved
                .is_empty()
        );
        assert!(
            decision(&w, &json!({"action":"cancel"}))
                .approved
                .is_empty()
        );
        assert!(
            decision(&w, &json!({"action":"accept"}))
                .approved
                .is_empty()
        );
    }
}
