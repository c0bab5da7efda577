//! Mount names: the first component of a mount-form path, the rule they follow, and the
//! name derived for a root that was given none.

use super::MAX_COMPONENT_BYTES;
use std::fmt;

/// A root's mount name: `[A-Za-z0-9._-]+`, not `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MountName(String);

impl MountName {
    /// Checks the mount-name rule.
    ///
    /// ```
    /// use mcp_fsbroker::path::MountName;
    /// assert!(MountName::new("project").is_ok());
    /// assert!(MountName::new("..").is_err());
    /// assert!(MountName::new("a/b").is_err());
    /// ```
    pub fn new(name: &str) -> std::result::Result<Self, String> {
        let ok_chars = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if name.is_empty() || !ok_chars || name == "." || name == ".." {
            return Err(format!(
                "mount name {name:?} must match [A-Za-z0-9._-]+ and not be . or .."
            ));
        }
        if name.len() > MAX_COMPONENT_BYTES {
            return Err(format!(
                "mount name is longer than {MAX_COMPONENT_BYTES} bytes"
            ));
        }
        Ok(MountName(name.to_owned()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A mount name made from a directory's name, so that any directory can be a root without
    /// an explicit mount: the name itself when it is a valid mount name; otherwise accented
    /// Latin letters lose their accents (`données` -> `donnees`, `Straße` -> `Strasse`),
    /// every run of other characters becomes one `-` (`My Project` -> `My-Project`), and `-`
    /// is trimmed from both ends. When nothing is left (a name in a non-Latin script), the
    /// name is `root`.
    pub(crate) fn from_dir_name(name: &str) -> MountName {
        if let Ok(m) = MountName::new(name) {
            return m;
        }
        use unicode_normalization::UnicodeNormalization;
        use unicode_normalization::char::is_combining_mark;
        let mut out = String::with_capacity(name.len());
        // Whether the last character written is a `-` (one of the name's or one standing for
        // replaced characters), so a run of them gives one `-`.
        let mut replaced = false;
        for c in name.nfd().filter(|c| !is_combining_mark(*c)) {
            let ascii: Option<&str> = match c {
                c if c.is_ascii_alphanumeric() || matches!(c, '.' | '_') => None,
                'ß' => Some("ss"),
                'æ' => Some("ae"),
                'Æ' => Some("AE"),
                'œ' => Some("oe"),
                'Œ' => Some("OE"),
                'ø' => Some("o"),
                'Ø' => Some("O"),
                'ł' => Some("l"),
                'Ł' => Some("L"),
                'đ' | 'ð' => Some("d"),
                'Đ' | 'Ð' => Some("D"),
                'þ' => Some("th"),
                'Þ' => Some("Th"),
                'ı' => Some("i"),
                'ħ' => Some("h"),
                'Ħ' => Some("H"),
                _ => Some("-"),
            };
            match ascii {
                None => {
                    out.push(c);
                    replaced = false;
                }
                Some("-") => {
                    if !replaced {
                        out.push('-');
                    }
                    replaced = true;
                }
                Some(s) => {
                    out.push_str(s);
                    replaced = false;
                }
            }
        }
        // Only ASCII was written, so any byte index is a character boundary.
        out.truncate(MAX_COMPONENT_BYTES);
        let trimmed = out.trim_matches('-');
        MountName::new(trimmed).unwrap_or_else(|_| MountName("root".to_owned()))
    }
}

impl fmt::Display for MountName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
