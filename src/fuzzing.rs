//! Fuzz oracles, shared by the cargo-fuzz targets in `fuzz/` and by `cargo test`, which replays
//! every committed corpus file through them. An oracle fails by assertion: that is its job.

use crate::path::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES, RequestPath};

/// Parses arbitrary bytes as a request path and checks what an accepted path promises: every
/// component is non-empty, not `.` or `..`, free of `/`, NUL, control characters and
/// backslashes, and within the length limits; a mount-form path never climbs above its mount.
pub fn request_path(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = RequestPath::parse(text) else {
        return;
    };
    assert!(text.len() <= MAX_PATH_BYTES);
    let components: Vec<&String> = match &parsed {
        RequestPath::Mount { mount, rel } => {
            std::iter::once(mount).chain(rel.components()).collect()
        }
        RequestPath::Absolute(c) => c.iter().collect(),
    };
    for c in components {
        assert!(
            !c.is_empty() && c != "." && c != "..",
            "bad component {c:?}"
        );
        assert!(c.len() <= MAX_COMPONENT_BYTES);
        assert!(!c.contains(['/', '\\', '\0']));
        assert!(!c.chars().any(char::is_control));
    }
}
