//! Session names: what a server's self-reported name becomes, and the names the interface
//! keeps for itself.

use super::MAX_SERVER_NAME_CHARS;

/// The session id that a server's self-reported name (its `serverInfo.name`) gives: the name
/// with every character that shows nothing removed (controls, format characters such as
/// zero-width spaces and direction overrides, line separators, private use, unassigned),
/// cut to [`MAX_SERVER_NAME_CHARS`] characters, or `None` when nothing is left.
///
/// The name comes from the server, so it is cleaned before it names a session: it shows up
/// in logs and audit records, where control characters could forge lines or terminal
/// escapes, and in the user's consent questions, where `notes` followed by a zero-width
/// space would pass for `notes`; cleaned, it is `notes`, and a second live one `notes#2`.
/// A bounded length keeps one server from bloating every record.
///
/// A name the interface keeps for itself (see [`reserved`]) is given a `server-` prefix: a
/// server that names itself `user` is `server-user`, never taken for the user.
pub(crate) fn server_name(raw: &str) -> Option<String> {
    let name: String = raw
        .chars()
        .filter(|&c| !crate::visible::is_hidden(c) && !crate::visible::is_ignorable(c))
        .take(MAX_SERVER_NAME_CHARS)
        .collect();
    if name.is_empty() {
        return None;
    }
    Some(if reserved(&name) {
        format!("server-{name}")
    } else {
        name
    })
}

/// A session's server name: `notes` of `notes#2`.
pub(crate) fn base_name(session: &str) -> &str {
    match session.rsplit_once('#') {
        Some((name, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => session,
    }
}

/// Whether `name` is, or would pass for, a name the interface uses for itself (the recovery
/// journal's, which stands below sessions, holds the list), or one the broker gives
/// ([`crate::policy::UNPINNED`], which the policy, below sessions, refuses to name).
pub(crate) fn reserved(name: &str) -> bool {
    crate::recovery::reserved_name(name) || crate::policy::unpinned(name)
}

/// The refusal of a session name the interface keeps for itself, or `None` for one a
/// session may take.
pub(crate) fn refuse_reserved(name: &str) -> Option<String> {
    reserved(name).then(|| {
        format!(
            "the session name {name:?} is reserved: the console and `fsbroker history` use it \
             for the user's own actions; choose another"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_lose_control_characters_and_length() {
        assert_eq!(server_name("files").as_deref(), Some("files"));
        assert_eq!(server_name("notes\n\u{1b}[2J").as_deref(), Some("notes[2J"));
        assert_eq!(server_name("\u{7}"), None);
        assert_eq!(
            server_name("a\u{0}b\tc\r\n\u{1b}d\u{7f}e\u{85}f").as_deref(),
            Some("abcdef")
        );
        assert_eq!(server_name(""), None);
        assert_eq!(server_name("\n\t\u{1b}"), None);
        // The limit counts characters, not bytes, so a multi-byte name is never cut mid-char.
        let long = "é".repeat(MAX_SERVER_NAME_CHARS + 5);
        let cut = server_name(&long).unwrap_or_default();
        assert_eq!(cut.chars().count(), MAX_SERVER_NAME_CHARS);
        assert!(cut.chars().all(|c| c == 'é'));
        // Spaces are kept: they are printable, and the proxy has always kept them.
        assert_eq!(server_name(" my server ").as_deref(), Some(" my server "));
        // What shows nothing goes too: `notes` and a zero-width space must not pass for
        // `notes` beside it.
        assert_eq!(server_name("notes\u{200b}").as_deref(), Some("notes"));
        for ignorable in ["\u{34f}", "\u{fe0f}", "\u{3164}", "\u{180e}", "\u{e0100}"] {
            let name = format!("notes{ignorable}");
            assert_eq!(server_name(&name).as_deref(), Some("notes"), "{name:?}");
        }
        assert_eq!(
            server_name("\u{202e}seton\u{2028}\u{e000}").as_deref(),
            Some("seton")
        );
    }

    #[test]
    fn a_session_name_loses_only_a_numbered_suffix() {
        assert_eq!(base_name("notes#2"), "notes");
        assert_eq!(base_name("notes"), "notes");
        assert_eq!(base_name("a#b"), "a#b");
        assert_eq!(base_name("a#"), "a#");
    }

    #[test]
    fn names_the_interface_uses_are_reserved_and_renamed() {
        for name in [
            "user",
            "User",
            " user ",
            "USER#2",
            "user#10",
            "user\u{200b}",
        ] {
            let given = server_name(name).unwrap_or_default();
            assert!(given.starts_with("server-"), "{name:?} became {given:?}");
            assert!(!reserved(&given), "{given:?}");
            assert!(refuse_reserved(&given).is_none(), "{given:?}");
        }
        assert!(reserved("user") && reserved("User#3"));
        for name in ["unpinned-notes", "UNPINNED-x", " unpinned-"] {
            assert!(reserved(name), "{name:?}");
            assert!(server_name(name).is_some_and(|n| n.starts_with("server-")));
        }
        for free in [
            "users",
            "user#",
            "user#x",
            "notes",
            "a user",
            "server-user",
            "unpinned",
        ] {
            assert!(!reserved(free), "{free:?}");
            assert_eq!(server_name(free).as_deref(), Some(free));
        }
        assert!(refuse_reserved("user").is_some_and(|m| m.contains("reserved")));
    }
}
