//! The audit log's hash chain: each line ends with `"seq":N` and `"hash":"<64 hex>"`, the
//! BLAKE3 hash of the hash it chains to (32 raw bytes) followed by the line's own text up to
//! and including `"seq":N`, closed with `}`.
//!
//! A line chains to the line before it, unless it carries `"prev":"<64 hex>"` just before
//! `seq`: then it chains to that hash, and starts a stretch of chain. The first line of every
//! file has `prev`: all zeros (and `seq` 1) for a brand-new chain, or the last hash of the
//! file it follows (and the next `seq`) after a rotation. The hash is taken over the text as
//! written, so that verifying never serialises JSON again: it strips the textual suffix
//! `,"hash":"<64 hex>"}` and puts back `}`.

/// The hash a brand-new chain starts from.
pub(crate) const ZERO: [u8; 32] = [0; 32];

/// The length of `,"hash":"` + 64 hex digits + `"}`.
pub(crate) const HASH_SUFFIX: usize = 9 + 64 + 2;

/// Where the next line goes on the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// The hash the next line chains to.
    pub hash: [u8; 32],
    /// The `seq` of the line before the next (0 before a brand-new chain's first line).
    pub seq: u64,
    /// Whether the next line starts a stretch of chain (and so carries `prev`).
    pub start: bool,
}

impl Head {
    /// The head of a brand-new chain: its first line has `prev` zeros and `seq` 1.
    pub(crate) fn new_chain() -> Head {
        Head {
            hash: ZERO,
            seq: 0,
            start: true,
        }
    }

    /// The head after a line whose `seq` and `hash` are given: the next line continues it.
    pub(crate) fn after(seq: u64, hash: [u8; 32]) -> Head {
        Head {
            hash,
            seq,
            start: false,
        }
    }

    /// The same place on the chain, for the first line of a new file: it names the hash it
    /// chains to in `prev`.
    pub(crate) fn starting(self) -> Head {
        Head {
            start: true,
            ..self
        }
    }

    /// Appends `prev` (when the line starts a stretch), `seq` and `hash` to `line`, one JSON
    /// object without its newline, and returns the head after it. `line` must end with `}`;
    /// anything else is left as it is, and the head not moved, since it cannot be chained.
    pub(crate) fn seal(&self, line: &mut Vec<u8>) -> Head {
        if line.last() != Some(&b'}') {
            return *self;
        }
        line.pop();
        let seq = self.seq.saturating_add(1);
        if self.start {
            line.extend_from_slice(b",\"prev\":\"");
            line.extend_from_slice(blake3::Hash::from_bytes(self.hash).to_hex().as_bytes());
            line.push(b'"');
        }
        line.extend_from_slice(format!(",\"seq\":{seq}}}").as_bytes());
        let hash = link_hash(&self.hash, line);
        line.pop();
        line.extend_from_slice(b",\"hash\":\"");
        line.extend_from_slice(blake3::Hash::from_bytes(hash).to_hex().as_bytes());
        line.extend_from_slice(b"\"}");
        Head::after(seq, hash)
    }
}

/// The hash of a line whose text without its hash is `body`, chained to `prev`.
pub(crate) fn link_hash(prev: &[u8; 32], body: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(prev);
    h.update(body);
    *h.finalize().as_bytes()
}

/// One line read back as a chained line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sealed {
    /// Its `seq`.
    pub seq: u64,
    /// Its `hash`.
    pub hash: [u8; 32],
    /// Its `prev`, when it starts a stretch of chain.
    pub prev: Option<[u8; 32]>,
    /// The text its hash is taken over (the line without `,"hash":"…"`, closed with `}`).
    pub body: Vec<u8>,
}

/// Why a line is not a chained line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsealed {
    /// Not one JSON object.
    NotJson,
    /// A JSON object without `seq` and `hash` as its last two keys.
    NoChain,
}

/// Reads `line` (without its newline) as a chained line: one JSON object whose last two keys
/// are `seq` (a number) and `hash` (64 hex digits), with `prev` (64 hex digits) just before
/// `seq` when it has one.
pub(crate) fn unseal(line: &[u8]) -> Result<Sealed, Unsealed> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|_| Unsealed::NotJson)?;
    let obj = value.as_object().ok_or(Unsealed::NotJson)?;
    let seq = obj
        .get("seq")
        .and_then(serde_json::Value::as_u64)
        .ok_or(Unsealed::NoChain)?;
    let hash = obj
        .get("hash")
        .and_then(serde_json::Value::as_str)
        .and_then(parse_hex)
        .ok_or(Unsealed::NoChain)?;
    let prev = match obj.get("prev") {
        None => None,
        Some(p) => Some(p.as_str().and_then(parse_hex).ok_or(Unsealed::NoChain)?),
    };
    // The keys' order is checked on the text itself, which is what the hash covers.
    let cut = line
        .len()
        .checked_sub(HASH_SUFFIX)
        .ok_or(Unsealed::NoChain)?;
    let (head, suffix) = line.split_at(cut);
    let expected = format!(
        ",\"hash\":\"{}\"}}",
        blake3::Hash::from_bytes(hash).to_hex()
    );
    if suffix != expected.as_bytes() {
        return Err(Unsealed::NoChain);
    }
    let mut body = head.to_vec();
    body.push(b'}');
    let mut tail = match prev {
        Some(p) => format!(",\"prev\":\"{}\"", blake3::Hash::from_bytes(p).to_hex()),
        None => String::new(),
    };
    tail.push_str(&format!(",\"seq\":{seq}}}"));
    if !body.ends_with(tail.as_bytes()) {
        return Err(Unsealed::NoChain);
    }
    Ok(Sealed {
        seq,
        hash,
        prev,
        body,
    })
}

/// 64 hex digits as 32 bytes.
pub(crate) fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

/// 32 bytes as 64 hex digits.
pub(crate) fn hex(hash: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*hash).to_hex().to_string()
}

/// The head after the last line of `tail`, the end of a file: `None` when the tail does not
/// end with a whole chained line (a torn line, an unchained log, a line longer than the tail).
/// `whole` says whether `tail` is the whole file, so that its first line is complete.
pub(crate) fn head_of_tail(tail: &[u8], whole: bool) -> Option<Head> {
    let text = tail.strip_suffix(b"\n")?;
    let start = match text.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if whole => 0,
        None => return None,
    };
    let line = text.get(start..)?;
    unseal(line).ok().map(|s| Head::after(s.seq, s.hash))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_sealed_line_reads_back_with_its_seq_hash_and_prev() {
        let head = Head::new_chain();
        let mut line = br#"{"a":1}"#.to_vec();
        let next = head.seal(&mut line);
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(
            text.starts_with(&format!(
                r#"{{"a":1,"prev":"{}","seq":1,"hash":""#,
                hex(&ZERO)
            )),
            "{text}"
        );
        let s = unseal(&line).unwrap();
        assert_eq!((s.seq, s.prev, s.hash), (1, Some(ZERO), next.hash));
        assert_eq!(s.hash, link_hash(&ZERO, &s.body));
        // The next line continues the chain, without `prev`.
        let mut second = br#"{"b":2}"#.to_vec();
        let after = next.seal(&mut second);
        let s2 = unseal(&second).unwrap();
        assert_eq!((s2.seq, s2.prev), (2, None));
        assert_eq!(s2.hash, link_hash(&next.hash, &s2.body));
        assert_eq!(after, Head::after(2, s2.hash));
    }

    #[test]
    fn a_line_without_its_chain_or_with_keys_out_of_place_is_not_sealed() {
        assert_eq!(unseal(b"{\"a\":1"), Err(Unsealed::NotJson));
        assert_eq!(unseal(b"[1]"), Err(Unsealed::NotJson));
        assert_eq!(unseal(b"{\"a\":1}"), Err(Unsealed::NoChain));
        let mut line = br#"{"a":1}"#.to_vec();
        Head::new_chain().seal(&mut line);
        let text = String::from_utf8(line).unwrap();
        // The same keys, with `a` after them: the hash no longer ends the line.
        let moved = text
            .replacen(r#"{"a":1,"#, "{", 1)
            .replace("\"}", "\",\"a\":1}");
        assert_eq!(unseal(moved.as_bytes()), Err(Unsealed::NoChain));
    }

    #[test]
    fn the_tail_of_a_file_gives_the_head_only_after_a_whole_chained_line() {
        let mut first = br#"{"a":1}"#.to_vec();
        let head = Head::new_chain().seal(&mut first);
        first.push(b'\n');
        assert_eq!(head_of_tail(&first, true), Some(head));
        // The same bytes as the end of a longer file: the line may have begun before them.
        assert_eq!(head_of_tail(&first, false), None);
        let mut two = b"older line\n".to_vec();
        two.extend_from_slice(&first);
        assert_eq!(head_of_tail(&two, false), Some(head));
        // Torn: no newline at the end.
        assert_eq!(head_of_tail(&first[..first.len() - 1], true), None);
        // An unchained log.
        assert_eq!(head_of_tail(b"{\"a\":1}\n", true), None);
        assert_eq!(head_of_tail(b"", true), None);
    }
}
