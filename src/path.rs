//! Request paths: the only code that turns a peer's string into a path.
//!
//! A request path is a mount-form path (`project/src/main.py`), a `file://` URI, or an absolute
//! host path. [`RequestPath::parse`] applies the grammar and the lexical normalisation of the
//! wire contract; `Roots::locate` (in the crate-private `root`) then matches the result to a root, giving a
//! [`MountPath`]. Every operation takes a [`MountPath`], never a string.
//!
//! Nothing here touches the filesystem: the lexical rules decide what they can (`..` above the
//! mount, malformed strings) before any I/O, and the resolver in `root` decides the
//! rest through the root's directory handle.

use crate::error::{Error, Reason, Result};
use std::fmt;

mod mount_name;

pub use mount_name::MountName;

/// Longest request path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest path component accepted, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// A normalised path beneath a mount: zero or more components, none of them empty, `.`, `..`,
/// or containing `/`, NUL or a control character. Empty means the root itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Vec<String>);

impl RelPath {
    /// The root itself.
    pub fn root() -> Self {
        RelPath(Vec::new())
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[String] {
        &self.0
    }

    /// Whether this is the root itself.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `self` is `other` or lies beneath it, compared component by component.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        self.0.len() >= other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| a == b)
    }

    /// The path with one more component. The caller passes a single valid name, as read from
    /// a directory (so it contains no `/` or NUL).
    pub fn join(&self, name: &str) -> RelPath {
        let mut v = self.0.clone();
        v.push(name.to_owned());
        RelPath(v)
    }

    /// The final component, if any.
    pub fn file_name(&self) -> Option<&str> {
        self.0.last().map(String::as_str)
    }

    /// Whether any component is hidden (starts with `.`).
    pub fn is_hidden(&self) -> bool {
        self.0.iter().any(|c| c.starts_with('.'))
    }

    /// Builds a relative path from components that the caller has already validated, such
    /// as names stacked up by the resolver.
    pub(crate) fn from_components(components: Vec<String>) -> Self {
        RelPath(components)
    }

    /// Appends one component the caller has validated (a name read from a directory); with
    /// [`RelPath::pop`], a walk keeps one path up to date instead of building one per entry.
    pub(crate) fn push(&mut self, name: &str) {
        self.0.push(name.to_owned());
    }

    /// Removes the final component.
    pub(crate) fn pop(&mut self) {
        self.0.pop();
    }
}

/// A path inside a known root, in mount form: the only path type operations accept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MountPath {
    /// The root's mount name.
    pub mount: MountName,
    /// The path beneath the root.
    pub rel: RelPath,
}

impl MountPath {
    /// Whether this is `other` or beneath it (same mount, component-wise prefix).
    pub fn starts_with(&self, other: &MountPath) -> bool {
        self.mount == other.mount && self.rel.starts_with(&other.rel)
    }
}

impl std::str::FromStr for MountPath {
    type Err = Error;

    /// Parses a mount-form path (`MOUNT` or `MOUNT/REL`) with the one request-path parser;
    /// any other form (absolute, `file://`, `..` out of the mount) is an `INVALID_PATH`.
    fn from_str(s: &str) -> Result<MountPath> {
        match RequestPath::parse(s)? {
            RequestPath::Mount { mount, rel } => Ok(MountPath {
                mount: MountName::new(&mount).map_err(Error::malformed)?,
                rel,
            }),
            _ => Err(Error::malformed("not a mount-form path (MOUNT/REL)")),
        }
    }
}

impl fmt::Display for MountPath {
    /// The mount form, `MOUNT` or `MOUNT/REL/PATH`: the only form paths leave the broker in.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mount.as_str())?;
        for c in self.rel.components() {
            write!(f, "/{c}")?;
        }
        Ok(())
    }
}

/// A request path after the grammar and lexical normalisation, before it is matched to a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestPath {
    /// `MOUNT[/REL]`: the first component names a mount (not yet checked to exist).
    Mount {
        /// The first component.
        mount: String,
        /// The normalised rest.
        rel: RelPath,
    },
    /// An absolute host path (from a plain absolute path or a `file://` URI), normalised.
    Absolute(Vec<String>),
}

impl RequestPath {
    /// Parses a request path string.
    ///
    /// Errors: `INVALID_PATH` `malformed` for strings that break the grammar, and
    /// `PERMISSION_DENIED` `outside_root` for a `..` that climbs above the mount.
    ///
    /// ```
    /// use mcp_fsbroker::path::RequestPath;
    /// let p = RequestPath::parse("project/./src//../main.py").unwrap();
    /// assert!(matches!(p, RequestPath::Mount { ref mount, .. } if mount == "project"));
    /// assert!(RequestPath::parse("project/../../etc/passwd").is_err());
    /// assert!(RequestPath::parse("project\\..\\x").is_err());
    /// ```
    pub fn parse(raw: &str) -> Result<RequestPath> {
        if raw.is_empty() {
            return Err(Error::malformed("path is empty"));
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(Error::malformed(format!(
                "path is longer than {MAX_PATH_BYTES} bytes"
            )));
        }
        if let Some(rest) = strip_prefix_ignore_case(raw, "file:") {
            return parse_file_uri(rest);
        }
        check_chars(raw)?;
        if raw.starts_with('/') {
            Ok(RequestPath::Absolute(normalise_absolute(raw)?))
        } else {
            let mut parts = raw.split('/').filter(|c| !c.is_empty() && *c != ".");
            // The first component is the mount; a leading `..` climbs above any mount.
            let mount = match parts.next() {
                None => return Err(Error::malformed("path has no components")),
                Some("..") => return Err(Error::denied(Reason::OutsideRoot)),
                Some(m) => m.to_owned(),
            };
            let mut rel: Vec<String> = Vec::new();
            for c in parts {
                check_component(c)?;
                if c == ".." {
                    if rel.pop().is_none() {
                        return Err(Error::denied(Reason::OutsideRoot));
                    }
                } else {
                    rel.push(c.to_owned());
                }
            }
            check_component(&mount)?;
            Ok(RequestPath::Mount {
                mount,
                rel: RelPath(rel),
            })
        }
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn check_chars(s: &str) -> Result<()> {
    if s.contains('\0') {
        return Err(Error::malformed("path contains a nul character"));
    }
    if s.chars().any(char::is_control) {
        return Err(Error::malformed("path contains a control character"));
    }
    if s.contains('\\') {
        return Err(Error::malformed("path contains a backslash"));
    }
    Ok(())
}

fn check_component(c: &str) -> Result<()> {
    if c.len() > MAX_COMPONENT_BYTES {
        return Err(Error::malformed(format!(
            "path component is longer than {MAX_COMPONENT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Normalises an absolute path lexically. A `..` at `/` stays at `/`, as in POSIX; whether
/// the result lies inside a root is decided later, component by component.
fn normalise_absolute(raw: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for c in raw.split('/').filter(|c| !c.is_empty() && *c != ".") {
        check_component(c)?;
        if c == ".." {
            out.pop();
        } else {
            out.push(c.to_owned());
        }
    }
    Ok(out)
}

/// Parses what follows `file:`: `//HOST/PATH` with HOST empty or `localhost`, the path
/// percent-decoded exactly once.
fn parse_file_uri(rest: &str) -> Result<RequestPath> {
    let Some(after) = rest.strip_prefix("//") else {
        return Err(Error::malformed("file uri must start with file://"));
    };
    if after.contains(['?', '#']) {
        return Err(Error::malformed(
            "file uri must not have a query or fragment",
        ));
    }
    let (host, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, ""),
    };
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err(Error::malformed("file uri names another host"));
    }
    if path.is_empty() {
        return Err(Error::malformed("file uri has no path"));
    }
    let decoded = percent_decode(path)?;
    if decoded.len() > MAX_PATH_BYTES {
        return Err(Error::malformed(format!(
            "path is longer than {MAX_PATH_BYTES} bytes"
        )));
    }
    check_chars(&decoded)?;
    Ok(RequestPath::Absolute(normalise_absolute(&decoded)?))
}

fn percent_decode(s: &str) -> Result<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Error::malformed("file uri has a bad percent escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::malformed("file uri does not decode to utf-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn rel(p: &str) -> Vec<String> {
        match RequestPath::parse(p).unwrap() {
            RequestPath::Mount { mount, rel } => {
                let mut v = vec![mount];
                v.extend(rel.0);
                v
            }
            RequestPath::Absolute(v) => v,
        }
    }

    #[test]
    fn derives_mount_names_from_directory_names() {
        let d = |n: &str| MountName::from_dir_name(n).to_string();
        assert_eq!(d("project"), "project");
        assert_eq!(d("a--b"), "a--b");
        assert_eq!(d("My Project"), "My-Project");
        assert_eq!(d("données"), "donnees");
        assert_eq!(d("Ærø  Straße (draft)"), "AEro-Strasse-draft");
        assert_eq!(d("a - b"), "a-b");
        assert_eq!(d("项目"), "root");
        assert_eq!(d("..."), "...");
        assert_eq!(d(""), "root");
        assert_eq!(d("\u{fffd}x"), "x");
        assert_eq!(d(&"é".repeat(200)), "e".repeat(200));
        assert_eq!(d(&"ß".repeat(200)).len(), MAX_COMPONENT_BYTES);
    }

    #[test]
    fn normalises_lexically() {
        assert_eq!(rel("p/./a//b/../c/"), ["p", "a", "c"]);
        assert_eq!(rel("/r/p/../q"), ["r", "q"]);
        assert_eq!(rel("/../../r"), ["r"]);
        assert_eq!(rel("file:///r/p/%2e%2e/q"), ["r", "q"]);
        assert_eq!(rel("p/100%25"), ["p", "100%25"]);
    }

    #[test]
    fn classifies_errors() {
        let kind = |p: &str| RequestPath::parse(p).unwrap_err().kind();
        assert_eq!(kind(""), ErrorKind::InvalidPath);
        assert_eq!(kind("p/a\0b"), ErrorKind::InvalidPath);
        assert_eq!(kind("p/a\u{85}b"), ErrorKind::InvalidPath);
        assert_eq!(kind("p\\a"), ErrorKind::InvalidPath);
        assert_eq!(kind("file://evil/r/p"), ErrorKind::InvalidPath);
        assert_eq!(kind("file:///r/%zz"), ErrorKind::InvalidPath);
        assert_eq!(kind("file:///r/%00"), ErrorKind::InvalidPath);
        assert_eq!(kind("file:///r/%5c"), ErrorKind::InvalidPath);
        assert_eq!(kind("file:///r/%ff"), ErrorKind::InvalidPath);
        assert_eq!(kind("p/.."), ErrorKind::PermissionDenied);
        assert_eq!(kind("../p"), ErrorKind::PermissionDenied);
        assert_eq!(
            kind(&format!("p/{}", "a".repeat(256))),
            ErrorKind::InvalidPath
        );
        assert_eq!(kind(&"a/".repeat(2100)), ErrorKind::InvalidPath);
    }
}
