//! How an answer describes an entry: its wire type, the size it shows, its modification time
//! and its MIME type.

use crate::path::MountPath;
use crate::wire::EntryType;
use cap_std::fs::{FileType, Metadata};

/// The wire name of a file type, never following links.
pub(super) fn type_name(t: &FileType) -> EntryType {
    if t.is_symlink() {
        EntryType::Symlink
    } else if t.is_dir() {
        EntryType::Directory
    } else if t.is_file() {
        EntryType::File
    } else {
        EntryType::Other
    }
}

/// The size an answer shows for an entry: its own length, except for a symlink, whose
/// length is that of its target's name and would tell the server something about a place the
/// link may lead to outside the root; a link is shown with size 0.
pub(super) fn shown_size(m: &Metadata) -> u64 {
    if m.file_type().is_symlink() {
        0
    } else {
        m.len()
    }
}

/// A modification time in RFC 3339, UTC.
pub(super) fn mtime(m: &Metadata) -> Option<String> {
    let t = m.modified().ok()?.into_std();
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// MIME types of the source files a code server reads, by lower-case extension, consulted
/// before mime_guess: its answers there are `text/plain` (`.py`, `.rs`, `.go`, ...) or wrong
/// (`video/mp2t` for TypeScript's `.ts`). Registered types where there is one (`text/markdown`,
/// `application/json`, `application/yaml`, `application/toml`, `text/javascript`), else the
/// customary `text/x-*` (the seed's example gives `.py` as `text/x-python`).
const SOURCE_TYPES: &[(&str, &str)] = &[
    ("py", "text/x-python"),
    ("pyi", "text/x-python"),
    ("rs", "text/x-rust"),
    ("ts", "text/typescript"),
    ("mts", "text/typescript"),
    ("cts", "text/typescript"),
    ("tsx", "text/typescript"),
    ("js", "text/javascript"),
    ("mjs", "text/javascript"),
    ("cjs", "text/javascript"),
    ("jsx", "text/javascript"),
    ("go", "text/x-go"),
    ("toml", "application/toml"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
    ("md", "text/markdown"),
    ("markdown", "text/markdown"),
    ("json", "application/json"),
    ("sh", "text/x-shellscript"),
    ("bash", "text/x-shellscript"),
    ("c", "text/x-c"),
    ("h", "text/x-c"),
    ("cpp", "text/x-c++"),
    ("cc", "text/x-c++"),
    ("cxx", "text/x-c++"),
    ("hpp", "text/x-c++"),
    ("hh", "text/x-c++"),
    ("java", "text/x-java"),
    ("html", "text/html"),
    ("htm", "text/html"),
    ("css", "text/css"),
    ("txt", "text/plain"),
];

/// The MIME type guessed from the name: [`SOURCE_TYPES`] first, then mime_guess, else
/// `application/octet-stream`.
pub(super) fn mime_type(path: &MountPath) -> String {
    let Some(name) = path.rel.file_name() else {
        return mime_guess::mime::APPLICATION_OCTET_STREAM
            .essence_str()
            .to_owned();
    };
    let ext = std::path::Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if let Some((_, mime)) = ext
        .as_deref()
        .and_then(|e| SOURCE_TYPES.iter().find(|(x, _)| *x == e))
    {
        return (*mime).to_owned();
    }
    mime_guess::from_path(name)
        .first_or_octet_stream()
        .essence_str()
        .to_owned()
}
