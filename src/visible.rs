//! Which characters a reader cannot see as they are, and the one escaper of what the command
//! line prints: [`shown`] for text, [`shown_json`] for JSON. Every name a server could shape
//! (a path read from the disk, a message, a reason) reaches a terminal only through them, so
//! it can neither drive the terminal with escape sequences nor pass for another name.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a user's screen as it is: a character of general category
/// Cc (control), Cf (format: bidirectional overrides and isolates, zero-width characters,
/// tag characters, the zero-width joiner), Zl or Zp (line and paragraph separators, which
/// many interfaces show as line breaks), Co (private use: no agreed glyph) or Cn
/// (unassigned, noncharacters: meaning unknown to this table, so refused). The category
/// comes from the Unicode tables, never from a hand-written list, so that a whole class is
/// covered, including what a list forgets.
pub(crate) fn is_hidden(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Unassigned
            | G::Surrogate
    )
}

/// Whether `c` is a default-ignorable code point (Unicode's `Default_Ignorable_Code_Point`,
/// DerivedCoreProperties 16.0): drawn as nothing though some are marks or letters
/// (a combining grapheme joiner, variation selectors, the Hangul fillers), so a name that
/// holds one would pass for the name without it. The general categories that
/// [`is_hidden`] reads do not cover them, and no crate of ours carries the property, hence
/// the table.
pub(crate) fn is_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// Whether the terminal escaper writes `c` as an escape: hidden or default-ignorable.
fn escaped(c: char) -> bool {
    c.is_ascii_control() || (!c.is_ascii() && (is_hidden(c) || is_ignorable(c)))
}

/// `text` as a terminal may show it: every character a reader cannot see as it is (see
/// [`is_hidden`] and [`is_ignorable`]) written as an escape that names it (`\u{1b}`,
/// `\u{202e}`; `\n`, `\r` and `\t` for the common three), and the backslash itself doubled,
/// so that an escape on the screen always stands for the character it names and never for
/// text that merely looks like one. Nothing is dropped: two different names always look
/// different. Borrowed when nothing needed escaping, the common case.
pub(crate) fn shown(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(|c: char| c == '\\' || escaped(c)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if escaped(c) => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text, as serde_json wrote it, with every hidden or ignorable character that it left
/// raw (serde_json escapes only U+0000 to U+001F, the quote and the backslash) written as
/// `\uXXXX` (a surrogate pair beyond U+FFFF): the same JSON value, which no longer carries a
/// direction override or a C1 control to the terminal. Outside its strings JSON text holds
/// only ASCII punctuation, digits, letters, spaces and, when pretty-printed, line breaks, so a
/// raw newline is structure and stays, and every other such character stands inside a string,
/// where its escape means the same.
pub(crate) fn shown_json(json: &str) -> Cow<'_, str> {
    let Some(first) = json.find(|c: char| c != '\n' && escaped(c)) else {
        return Cow::Borrowed(json);
    };
    let mut out = String::with_capacity(json.len() + 16);
    out.push_str(&json[..first]);
    for c in json[first..].chars() {
        if c != '\n' && escaped(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
