//! Consent mode `elicit`: the user answers a server's `files/consent` in their own host,
//! through an `elicitation/create` form the proxy sends. A host that did not declare form
//! elicitation gets the fallback provider instead.

use super::host_channel::HostChannel;
use crate::access::Access;
use crate::consent::{
    BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest, PathChoice,
    describe, narrowed, sanitise,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// Longest part of the server's own message shown to the user.
const MAX_MESSAGE_CHARS: usize = 500;

/// Asks the host's user through `elicitation/create`.
pub(crate) struct ElicitConsent {
    host: Arc<HostChannel>,
    fallback: Arc<dyn ConsentProvider>,
}

impl ElicitConsent {
    /// Asks through `host` when it can show a form, else through `fallback`.
    pub(crate) fn new(host: Arc<HostChannel>, fallback: Arc<dyn ConsentProvider>) -> ElicitConsent {
        ElicitConsent { host, fallback }
    }
}

impl ConsentProvider for ElicitConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move { self.decide_each(request).await.into() })
    }

    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        Box::pin(async move {
            if !self.host.can_elicit() {
                tracing::debug!("host cannot elicit; asking the fallback consent provider");
                return self.fallback.decide_each(request).await;
            }
            match self.host.request("elicitation/create", form(request)).await {
                Ok(result) => decision(request, &result),
                Err(e) => {
                    tracing::warn!(error = %e, "consent elicitation failed; denied");
                    ConsentAnswer::deny()
                }
            }
        })
    }
}

/// The `elicitation/create` params for `request`. Every path is listed (a request holds at
/// most 64), in mount form only, and what the server chose (its name, its message) is
/// stripped of control and invisible formatting characters and cut short, since the host
/// shows it to the user as it is.
pub(super) fn form(request: &ConsentRequest) -> Value {
    // Quotes are taken out of the name so that it cannot close the quotation around it.
    let name = sanitise(&plain_text(&request.server_id), 100).replace('"', "'");
    let mut text = match request.purpose {
        crate::consent::Purpose::SeeRoots => format!(
            "The MCP server \"{name}\" asks to see these shared folders (their names and \
             places only, nothing in them):\n"
        ),
        _ => format!(
            "The MCP server \"{name}\" asks to {} these files:\n",
            match request.access {
                Access::Read => "read",
                Access::Write => "read and change",
            }
        ),
    };
    for p in &request.paths {
        text.push_str("  ");
        text.push_str(&describe(request, p));
        text.push('\n');
    }
    text.push_str("A folder covers everything inside it.\n");
    // A package's name and version are its author's text, as much the server's as its
    // message: plain text only.
    for line in crate::consent::who_asks(request) {
        text.push_str(&plain_text(&line));
        text.push('\n');
    }
    if let Some(m) = request.message.as_deref().filter(|m| !m.trim().is_empty()) {
        text.push_str("It says: ");
        text.push_str(&sanitise(&plain_text(m), MAX_MESSAGE_CHARS));
        text.push('\n');
    }
    let (choices, names): (Vec<&str>, Vec<&str>) = match request.access {
        Access::Write => (
            vec!["read", "write", "deny"],
            vec!["Allow reading", "Allow reading and writing", "Deny"],
        ),
        Access::Read => (vec!["read", "deny"], vec!["Allow reading", "Deny"]),
    };
    let mut properties = serde_json::Map::new();
    properties.insert(
        "decision".into(),
        json!({
            "type": "string",
            "title": "Access",
            "description": "What the server may do with these paths",
            "enum": choices,
            "enumNames": names,
        }),
    );
    // A schema is a flat object of primitive fields: one optional choice per path (when
    // there are several) and one optional narrowing per folder, numbered as listed.
    for (i, p) in request.paths.iter().enumerate() {
        let n = i + 1;
        let shown = sanitise(&p.to_string(), 4096);
        if request.paths.len() > 1 {
            properties.insert(
                format!("path_{n}"),
                json!({
                    "type": "string",
                    "title": format!("Access to {shown}"),
                    "description": "Leave empty to use the answer above for this path",
                    "enum": choices,
                    "enumNames": names,
                }),
            );
        }
        if p.rel.is_root() || request.folders.contains(p) {
            properties.insert(
                format!("narrow_{n}"),
                json!({
                    "type": "string",
                    "title": format!("Only a place inside {shown}"),
                    "description": "Optional: a path inside this folder (such as src/lib); \
                                    only it is allowed",
                    "maxLength": 1024,
                }),
            );
        }
    }
    json!({
        "message": text,
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": ["decision"],
        }
    })
}

/// The server's words as plain text: hosts show an elicitation message in different ways
/// (as text, as Markdown, some as HTML), so markup is stripped rather than escaped (an escape
/// would show as a stray backslash where the host renders nothing). HTML tags and comments go
/// whole (`<script>`, `<img src=...>`), a lone `<` or `>` goes, and so do the characters that
/// make Markdown emphasis, code, headings, tables, links and images (`*`, `` ` ``, `#`, `|`,
/// `~`, `[`, `]`, `!` before `[`, `\`), and `_` unless it stands inside a word
/// (`file_name`). What is left is the text a plain-text host would show, without anything a
/// renderer could turn into a link, an image, or emphasis that hides or stresses part of it.
pub(super) fn plain_text(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '<' => {
                let opens_tag = chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?'));
                let close = chars[i..].iter().position(|&x| x == '>');
                match close {
                    // A tag or comment: dropped whole, with a space so words do not join.
                    Some(n) if opens_tag => {
                        out.push(' ');
                        i += n + 1;
                        continue;
                    }
                    _ => {}
                }
            }
            '>' | '*' | '`' | '#' | '|' | '~' | '[' | ']' | '\\' => {}
            '!' if chars.get(i + 1) == Some(&'[') => {}
            '_' => {
                let inside = i > 0
                    && chars[i - 1].is_alphanumeric()
                    && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
                if inside {
                    out.push('_');
                }
            }
            _ => out.push(c),
        }
        i += 1;
    }
    // Runs of spaces left by what was taken out become one.
    let mut collapsed = String::with_capacity(out.len());
    for word in out.split(' ').filter(|w| !w.is_empty()) {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    collapsed
}

/// The answer an `elicitation/create` result stands for. Anything but an accepted `read` or
/// `write` is a denial, and write is never more than was asked. Per path, its own choice
/// (`path_N`) replaces `decision`, and a narrowing (`narrow_N`) grants only the place inside
/// it; a narrowing that leads outside the path denies the path.
pub(super) fn decision(request: &ConsentRequest, result: &Value) -> ConsentAnswer {
    if result.get("action").and_then(Value::as_str) != Some("accept") {
        return ConsentAnswer::deny();
    }
    let content = result.get("content");
    let field = |name: &str| {
        content
            .and_then(|c| c.get(name))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    let access_of = |choice: Option<&str>| match choice {
        Some("read") => Some(Access::Read),
        Some("write") if request.access == Access::Write => Some(Access::Write),
        _ => None,
    };
    let mut answer = ConsentAnswer::deny();
    for (i, p) in request.paths.iter().enumerate() {
        let n = i + 1;
        let chosen = field(&format!("path_{n}")).or_else(|| field("decision"));
        let Some(access) = access_of(chosen) else {
            continue;
        };
        let granted = match field(&format!("narrow_{n}")) {
            None => p.clone(),
            Some(sub) => match narrowed(p, sub) {
                Some(g) => g,
                None => continue,
            },
        };
        answer
            .approved
            .push(PathChoice::new(p.clone(), granted, access));
    }
    answer
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
            folders: Vec::new(),
            paths,
            access,
            host_paths: Vec::new(),
            purpose: crate::consent::Purpose::Access,
            identity: None,
            asked_again: Vec::new(),
            ended: Default::default(),
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
    fn form_lists_every_path_marks_whole_roots_and_hides_format_characters() {
        let mut r = request(Access::Read, Some("safe\u{202E}txt.exe"));
        let one = r.paths[0].clone();
        let mut whole = one.clone();
        whole.rel = crate::path::RelPath::root();
        r.paths = std::iter::repeat_n(one, 16).chain([whole]).collect();
        r.server_id = "evil\" and \"\u{200B}good".into();
        let text = form(&r)["message"].as_str().unwrap_or_default().to_owned();
        assert_eq!(text.matches("proj/a.txt").count(), 16, "{text}");
        assert!(text.contains("proj  (the whole root folder"), "{text}");
        assert!(!text.contains("more"), "{text}");
        assert!(
            !text.contains('\u{202E}') && !text.contains('\u{200B}'),
            "{text}"
        );
        assert!(
            text.starts_with("The MCP server \"evil' and '?good\" asks"),
            "{text}"
        );
    }

    #[test]
    fn form_says_which_program_asks_and_why_it_is_asked_again() {
        let mut r = request(Access::Read, None);
        let text = form(&r)["message"].as_str().unwrap_or_default().to_owned();
        assert!(text.contains("program: unknown"), "{text}");
        let mut identity = crate::Identity::of_host("**evil** <b>pkg</b>\u{1b}[2J");
        identity.launched_by = vec!["code".into()];
        r.identity = Some(identity.clone());
        r.asked_again = vec!["the program at /srv/a.py changed since you allowed it".into()];
        let text = form(&r)["message"].as_str().unwrap_or_default().to_owned();
        assert!(
            text.contains(&format!(
                "program: evil pkg ?2J (digest {})",
                identity.short()
            )),
            "{text}"
        );
        assert!(
            text.contains("asked again: the program at /srv/a.py changed since you allowed it"),
            "{text}"
        );
    }

    #[test]
    fn markup_is_stripped() {
        assert_eq!(
            plain_text("read **this** <script>alert(1)</script> now"),
            "read this alert(1) now"
        );
        assert_eq!(
            plain_text("![x](http://t/p.png) [click](http://e) # h `c` a_b _i_ 1 < 2 > 0"),
            "x(http://t/p.png) click(http://e) h c a_b i 1 2 0"
        );
        assert_eq!(plain_text("<!-- hidden -->ok"), "ok");
        assert_eq!(plain_text("a\\*b"), "ab");
    }

    #[test]
    fn only_an_accepted_choice_grants() {
        let w = request(Access::Write, None);
        let r = request(Access::Read, None);
        let accept = |d: &str| json!({"action":"accept","content":{"decision":d}});
        assert_eq!(
            decision(&w, &accept("write")).approved[0].access,
            Access::Write
        );
        assert_eq!(
            decision(&w, &accept("read")).approved[0].access,
            Access::Read
        );
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
