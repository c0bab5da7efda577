use super::*;

/// Reads back what [`shown`] wrote: the proof that its escapes are unambiguous.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                assert_eq!(chars.next(), Some('{'), "{s}");
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let code = u32::from_str_radix(&hex, 16).unwrap();
                out.push(char::from_u32(code).unwrap());
            }
            other => panic!("a lone backslash before {other:?} in {s:?}"),
        }
    }
    out
}

#[test]
fn every_category_a_reader_cannot_see_is_escaped_by_name() {
    let ranges: [(u32, u32); 17] = [
        // Cc: C0, DEL, C1.
        (0x0000, 0x001F),
        (0x007F, 0x009F),
        // Cf: bidirectional embeddings, overrides, isolates and marks; zero-width characters;
        // the byte order mark; tag characters; the soft hyphen.
        (0x202A, 0x202E),
        (0x2066, 0x2069),
        (0x200B, 0x200F),
        (0x061C, 0x061C),
        (0xFEFF, 0xFEFF),
        (0xE0001, 0xE0001),
        (0xE0020, 0xE007F),
        (0x00AD, 0x00AD),
        // Zl, Zp.
        (0x2028, 0x2029),
        // Default-ignorable but of visible categories: the combining grapheme joiner,
        // variation selectors, Hangul fillers, the Mongolian selectors.
        (0x034F, 0x034F),
        (0xFE00, 0xFE0F),
        (0xE0100, 0xE01EF),
        (0x3164, 0x3164),
        (0x115F, 0x1160),
        (0x180B, 0x180F),
    ];
    let odd = [
        0xE000, 0xF8FF, 0xF0000, 0x10FFFD, // Co
        0x378, 0xFDD0, 0xFFFE, 0x10FFFF, // Cn
    ];
    let all = ranges
        .iter()
        .flat_map(|&(a, b)| a..=b)
        .chain(odd)
        .filter_map(char::from_u32);
    for c in all {
        let s = shown(&c.to_string()).into_owned();
        assert!(
            s.starts_with('\\') && s.is_ascii(),
            "U+{:04X} shown as {s:?}",
            c as u32
        );
        assert_eq!(unescape(&s), c.to_string());
    }
    assert_eq!(shown("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
    assert_eq!(shown("proj/\u{202e}txt.exe"), "proj/\\u{202e}txt.exe");
    assert_eq!(shown("a\nb\tc\rd"), "a\\nb\\tc\\rd");
}

#[test]
fn ordinary_text_passes_borrowed_and_the_backslash_is_doubled() {
    let text = "Grüße e\u{301} Ελληνικά Кириллица 日本語 中文 한국어 العربية עברית हिन्दी ไทย \
                😀 👍🏽 a\u{A0}b ~/proj/file name (1).txt";
    assert!(matches!(shown(text), Cow::Borrowed(_)));
    // Text that looks like an escape is shown as the text it is.
    assert_eq!(shown("a\\u{1b}b"), "a\\\\u{1b}b");
    assert_eq!(unescape(&shown("a\\u{1b}b")), "a\\u{1b}b");
}

#[test]
fn every_character_is_itself_or_an_escape_that_reads_back() {
    let all: String = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
    let out = shown(&all);
    assert!(!out.chars().any(escaped), "a hidden character left raw");
    assert_eq!(unescape(&out), all);
}

#[test]
fn json_keeps_its_value_and_loses_its_hidden_characters() {
    let hostile = "\u{1b}[2J\u{7}\u{85}\u{9b}\u{202e}txt.exe\u{200b}\u{2028}\u{fe0f}\u{e0041}\\\"";
    let value = serde_json::json!({ hostile: [hostile, 1, true, null], "plain": "日本語" });
    for text in [
        serde_json::to_string(&value).unwrap(),
        serde_json::to_string_pretty(&value).unwrap(),
    ] {
        let safe = shown_json(&text);
        assert!(
            !safe.chars().any(|c| c != '\n' && escaped(c)),
            "raw hidden character in {safe}"
        );
        assert!(safe.contains("\\u202e"), "{safe}");
        assert!(safe.contains("\\udb40\\udc41"), "{safe}");
        assert!(safe.contains("日本語"), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
    assert!(matches!(shown_json("{\"a\":\n\"b\"}"), Cow::Borrowed(_)));
}
