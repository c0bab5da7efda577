//! What the wire must look like, as docs/protocol.md documents it: the filesystem error codes
//! and the form of timestamps.

/// The filesystem error codes of docs/protocol.md, with their `data.code`
/// (`tests/library/errors.rs` checks this table against the document).
pub const DOCUMENTED: &[(i64, &str)] = &[
    (-31001, "FILE_NOT_FOUND"),
    (-31002, "PERMISSION_DENIED"),
    (-31003, "INVALID_PATH"),
    (-31004, "IO_ERROR"),
    (-31005, "TIMEOUT"),
    (-31006, "CONCURRENCY_CONFLICT"),
    (-31007, "QUOTA_EXCEEDED"),
    (-31008, "ALREADY_EXISTS"),
    (-31009, "NOT_A_DIRECTORY"),
    (-31010, "IS_A_DIRECTORY"),
    (-31011, "DIRECTORY_NOT_EMPTY"),
    (-31012, "RATE_LIMITED"),
];

/// Whether `ts` is an RFC 3339 time in UTC: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
pub fn is_rfc3339_utc(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let frac_ok = match &b.get(19..) {
        Some([b'Z']) => true,
        Some([b'.', rest @ .., b'Z']) => !rest.is_empty() && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && frac_ok
}
