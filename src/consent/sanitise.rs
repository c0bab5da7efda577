//! The one sanitiser of what a consent prompt shows: a server's message and its paths reach
//! the user only through [`sanitise`], whatever the provider.

use super::ConsentRequest;
use crate::path::MountPath;
use crate::visible::is_hidden;

/// Replaces every character a user cannot see as it is (see [`is_hidden`], which the
/// command line's escaper shares) with `?`, so a server can neither drive the terminal with
/// escape sequences nor disguise what it asks for, and cuts the text at `max` characters. This is the one sanitiser for everything a consent
/// prompt shows. A zero-width joiner is format (Cf), so an emoji ZWJ sequence is shown as its
/// parts with `?` between them; combining marks, variation selectors and emoji modifiers are
/// visible categories (M, Sk) and pass.
pub(crate) fn sanitise(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if is_hidden(c) { '?' } else { c })
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

/// A requested path as shown to the user: sanitised, and a folder named as such, since a
/// grant on it covers everything beneath.
pub(crate) fn describe(request: &ConsentRequest, path: &MountPath) -> String {
    let shown = sanitise(&path.to_string(), 4096);
    if path.rel.is_root() {
        format!("{shown}  (the whole root folder, everything in it)")
    } else if request.folders.contains(path) {
        format!("{shown}  (a folder, everything in it)")
    } else {
        shown
    }
}

/// What a question says of who asks beyond the name the server chose, one line each: the
/// program and the first digits of its identity's digest, then why the user is asked again
/// about a path they allowed before. Paths on disk may hold any character a server put in a
/// file name, so each line is sanitised.
pub(crate) fn who_asks(request: &ConsentRequest) -> Vec<String> {
    let mut lines = Vec::new();
    match &request.identity {
        Some(i) => lines.push(format!(
            "program: {} (digest {})",
            sanitise(&i.what(), 512),
            i.short()
        )),
        None => lines.push("program: unknown (it could not be told)".to_owned()),
    }
    for why in &request.asked_again {
        lines.push(format!("asked again: {}", sanitise(why, 1024)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `c` alone is shown as `?`.
    fn replaced(c: char) -> bool {
        sanitise(&c.to_string(), 10) == "?"
    }

    #[test]
    fn finding_11_sanitise_hides_the_review_s_characters_and_what_the_old_list_hid() {
        let ranges: [(u32, u32); 15] = [
            // Found by the review.
            (0xE0020, 0xE007F),
            (0x206A, 0x206F),
            (0x1BCA0, 0x1BCA3),
            (0x1D173, 0x1D17A),
            (0x2028, 0x2029),
            // The old hand-written list, which the categories must still cover.
            (0x00AD, 0x00AD),
            (0x061C, 0x061C),
            (0x180E, 0x180E),
            (0x200B, 0x200F),
            (0x202A, 0x202E),
            (0x2060, 0x2069),
            (0xFEFF, 0xFEFF),
            (0xFFF9, 0xFFFB),
            // Controls, and private use.
            (0x0000, 0x001F),
            (0x007F, 0x009F),
        ];
        for (a, b) in ranges {
            for c in (a..=b).filter_map(char::from_u32) {
                assert!(replaced(c), "U+{:04X} is shown", c as u32);
            }
        }
        for u in [
            0xE000, 0xF8FF, 0xF0000, 0x10FFFD, 0x378, 0xFDD0, 0xFFFE, 0x10FFFF,
        ] {
            let c = char::from_u32(u).unwrap_or_default();
            assert!(replaced(c), "U+{u:04X} is shown");
        }
    }

    #[test]
    fn sanitise_keeps_ordinary_text_in_any_script_and_cuts_long_text() {
        let text = "Grüße e\u{301} Ελληνικά Кириллица 日本語 中文 한국어 العربية עברית हिन्दी ไทย \
                    😀 ❤\u{FE0F} 👍🏽 a\u{A0}b";
        assert_eq!(sanitise(text, 1000), text);
        // A ZWJ sequence is shown as its parts: the joiner is a format character.
        assert_eq!(sanitise("👨\u{200D}👩\u{200D}👧", 10), "👨?👩?👧");
        assert_eq!(sanitise("abcdef", 3), "abc…");
        // Every character is either itself or `?`: nothing is dropped or added.
        let all: String = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
        let out = sanitise(&all, usize::MAX);
        assert_eq!(out.chars().count(), all.chars().count());
        assert!(
            all.chars()
                .zip(out.chars())
                .all(|(c, s)| s == c || s == '?')
        );
    }
}
