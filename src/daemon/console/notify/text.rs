//! What a desktop notification of a consent question says. Everything a server chose (its
//! name, its message, the paths it asks for) is sanitised as every prompt sanitises it, then
//! escaped: notification servers may read a subset of HTML markup in the text (`<b>`,
//! `<a href>`, `<img>`), and a server's name must stay text, never become a link or an image.

use crate::consent::{ConsentRequest, Purpose, describe, sanitise, who_asks};

/// Longest server name shown, in characters.
const MAX_NAME: usize = 64;

/// Longest message shown, in characters.
const MAX_MESSAGE: usize = 300;

/// Most paths listed; the rest are counted.
const MAX_PATHS: usize = 5;

/// Longest path shown, in characters (the page shows it whole).
const MAX_PATH: usize = 200;

/// A notification's two texts.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Text {
    /// The summary: who asks for what.
    pub summary: String,
    /// The body: the paths, the message, who the program is, where to answer.
    pub body: String,
}

/// The notification of `request`; `console` is the page's address (no sign-in in it), and
/// `actions` whether the notification carries buttons to answer with.
pub(super) fn of(request: &ConsentRequest, console: &str, actions: bool) -> Text {
    let name = escape(&sanitise(&request.server_id, MAX_NAME));
    let summary = match request.purpose {
        Purpose::SeeRoots => format!("fsbroker: \u{201C}{name}\u{201D} asks to see roots"),
        _ => format!(
            "fsbroker: \u{201C}{name}\u{201D} asks for {} access",
            request.access.as_str()
        ),
    };
    let mut lines: Vec<String> = request
        .paths
        .iter()
        .take(MAX_PATHS)
        .map(|p| escape(&cut(&describe(request, p))))
        .collect();
    if request.paths.len() > MAX_PATHS {
        lines.push(format!(
            "and {} more (the console lists them all)",
            request.paths.len() - MAX_PATHS
        ));
    }
    if let Some(m) = &request.message {
        lines.push(format!(
            "Its message: \u{201C}{}\u{201D}",
            escape(&sanitise(m, MAX_MESSAGE))
        ));
    }
    lines.extend(who_asks(request).iter().map(|l| escape(&cut(l))));
    lines.push(if actions {
        format!("Allow grants every path above for this session only. Console: {console}")
    } else {
        format!("Answer it on the console: {console}")
    });
    Text {
        summary,
        body: lines.join("\n"),
    }
}

/// `text` cut to [`MAX_PATH`] characters (it is sanitised already).
fn cut(text: &str) -> String {
    sanitise(text, MAX_PATH)
}

/// `text` with the characters markup gives meaning to written as entities, so that a
/// server that reads markup shows them as they are.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Access;
    use crate::path::MountPath;

    fn request(server: &str, paths: &[&str], message: Option<&str>) -> ConsentRequest {
        let paths: Vec<MountPath> = paths.iter().map(|p| p.parse().unwrap()).collect();
        let mut r = ConsentRequest::new(server, paths, Access::Read);
        r.message = message.map(str::to_owned);
        r
    }

    #[test]
    fn markup_from_the_server_is_shown_as_text() {
        let r = request(
            "<b>evil</b>&co",
            &["root/<img src=x>.md"],
            Some("<a href=\"http://x\">click</a>"),
        );
        let t = of(&r, "http://127.0.0.1:1/", true);
        assert_eq!(
            t.summary,
            "fsbroker: \u{201C}&lt;b&gt;evil&lt;/b&gt;&amp;co\u{201D} asks for read access"
        );
        assert!(t.body.contains("root/&lt;img src=x&gt;.md"), "{}", t.body);
        assert!(
            t.body
                .contains("&lt;a href=&quot;http://x&quot;&gt;click&lt;/a&gt;"),
            "{}",
            t.body
        );
        for text in [&t.summary, &t.body] {
            assert!(!text.contains('<') && !text.contains('>'), "{text}");
        }
    }

    #[test]
    fn hidden_characters_are_replaced_and_long_lists_counted() {
        let paths: Vec<String> = (0..8).map(|i| format!("root/f{i}")).collect();
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let r = request("a\u{202E}b\nc", &paths, None);
        let t = of(&r, "http://127.0.0.1:1/", false);
        assert!(t.summary.contains("a?b?c"), "{}", t.summary);
        assert!(t.body.contains("root/f4") && !t.body.contains("root/f5"));
        assert!(t.body.contains("and 3 more"), "{}", t.body);
        assert!(
            t.body
                .ends_with("Answer it on the console: http://127.0.0.1:1/")
        );
    }
}
