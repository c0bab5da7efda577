//! Checking an audit file's chain, for `fsbroker audit verify`: every line a JSON object line,
//! each `seq` one more than the one before, each `hash` right for the line's text.

use super::chain::{Head, Sealed, Unsealed, ZERO, hex, link_hash, unseal};
use std::io::{BufRead, BufReader, Read};

/// The longest line read: an audit line is a few hundred bytes, a consent line with many
/// paths some kilobytes; a longer one is no audit line, and is not held in memory whole.
const MAX_LINE: u64 = 64 << 20;

/// What [`AuditLog::verify`](super::AuditLog::verify) found in one audit file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditVerdict {
    /// The lines read (up to the first bad one, included).
    pub lines: u64,
    /// The `seq` of the first line, when it has one.
    pub first_seq: Option<u64>,
    /// The `seq` of the last good line.
    pub last_seq: Option<u64>,
    /// The `prev` of the first line (64 hex digits): the hash the file chains to; all zeros
    /// for the start of a chain.
    pub prev: Option<String>,
    /// The `hash` of the last good line (64 hex digits): the value to keep, to check later
    /// that the file was not rewritten up to here.
    pub last_hash: Option<String>,
    /// Whether the first line has no `prev`: the file begins mid-chain (its head was
    /// removed), and only the lines after the first one could be checked.
    pub mid_chain: bool,
    /// The first bad line's number (1-based), when there is one.
    pub fault_line: Option<u64>,
    /// What is wrong with it, as `line N: why`.
    pub fault: Option<String>,
    /// The bad lines after the first, as `line N: why` (at most 100): the check
    /// goes on past a fault from the bad line's own place on the chain, so that one edit
    /// shows once and cannot hide another after it.
    pub later_faults: Vec<String>,
}

/// The most bad lines a verdict lists after the first.
pub(crate) const MAX_FAULTS: usize = 100;

impl AuditVerdict {
    /// Whether every line checked out and the file begins with the start of its stretch of
    /// chain.
    pub fn is_whole(&self) -> bool {
        self.fault.is_none() && !self.mid_chain
    }

    /// Notes a bad line: the first one in full, a later one in `later_faults`.
    fn fail(&mut self, line: u64, why: String) {
        if self.fault.is_some() {
            if self.later_faults.len() < MAX_FAULTS {
                self.later_faults.push(format!("line {line}: {why}"));
            }
            return;
        }
        self.lines = line;
        self.fault_line = Some(line);
        self.fault = Some(format!("line {line}: {why}"));
    }

    /// The head after the last good line.
    fn head(&self) -> Option<Head> {
        let hash = super::chain::parse_hex(self.last_hash.as_deref()?)?;
        Some(Head::after(self.last_seq?, hash))
    }
}

/// Checks the lines `reader` gives; `follows` is the verdict of the file just before it (the
/// next older one, after a rotation), whose last hash this file's first `prev` must name.
pub(super) fn verify(
    reader: impl Read,
    follows: Option<&AuditVerdict>,
) -> std::io::Result<AuditVerdict> {
    let mut r = BufReader::new(reader);
    let before = follows
        .filter(|f| f.fault.is_none())
        .and_then(AuditVerdict::head);
    let mut v = AuditVerdict::default();
    let mut head: Option<Head> = None;
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    loop {
        buf.clear();
        if (&mut r).take(MAX_LINE + 1).read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        n += 1;
        let Some(line) = buf.strip_suffix(b"\n") else {
            let why = if buf.len() as u64 > MAX_LINE {
                "longer than any audit line"
            } else {
                "cut short"
            };
            v.fail(n, why.into());
            break;
        };
        let sealed = match unseal(line) {
            Ok(s) => s,
            Err(Unsealed::NotJson) if r.fill_buf()?.is_empty() => {
                v.fail(n, "cut short".into());
                break;
            }
            // A line that is no chained line holds no place on the chain: the next one is
            // checked against the line before it.
            Err(Unsealed::NotJson) => {
                v.fail(n, "not a JSON line (cut short, or written over)".into());
                continue;
            }
            Err(Unsealed::NoChain) => {
                v.fail(
                    n,
                    "not a chained audit line (no seq and hash at its end)".into(),
                );
                continue;
            }
        };
        let first_fault = v.fault.is_none();
        if let Err(why) = check(&mut v, &head, before, &sealed) {
            v.fail(n, why);
        } else if first_fault {
            v.lines = n;
            v.last_seq = Some(sealed.seq);
            v.last_hash = Some(hex(&sealed.hash));
        }
        // Past a fault, the check goes on from the bad line's own seq and hash: an edited
        // line's successors still chain to its hash as written, a line after a removed one
        // still continues it.
        head = Some(Head::after(sealed.seq, sealed.hash));
    }
    Ok(v)
}

/// Checks a line against the line before it (`head`; `None` for the first line, which is
/// checked against `before`, the file before's last line, when there is one).
fn check(
    v: &mut AuditVerdict,
    head: &Option<Head>,
    before: Option<Head>,
    s: &Sealed,
) -> Result<(), String> {
    let (chained_to, prior) = match (*head, s.prev) {
        (None, None) => {
            // Nothing to check this line's hash against: the rest is checked from it on.
            v.mid_chain = true;
            v.first_seq = Some(s.seq);
            return Ok(());
        }
        (None, Some(p)) => {
            v.first_seq = Some(s.seq);
            v.prev = Some(hex(&p));
            if let Some(b) = before
                && p != b.hash
            {
                return Err(format!(
                    "its prev ({}) is not the last hash of the file before ({})",
                    hex(&p),
                    hex(&b.hash)
                ));
            }
            if p == ZERO && s.seq != 1 {
                return Err(format!("a new chain starts at seq {}, not 1", s.seq));
            }
            (p, before)
        }
        (Some(h), Some(p)) if p != h.hash => {
            return Err(format!(
                "starts a new chain (prev {}) instead of continuing the line before",
                hex(&p)
            ));
        }
        (Some(h), _) => (h.hash, Some(h)),
    };
    if let Some(prior) = prior {
        let expected = prior.seq.saturating_add(1);
        if s.seq > expected {
            return Err(format!(
                "a line before it is missing (seq {} follows {})",
                s.seq, prior.seq
            ));
        }
        if s.seq < expected {
            return Err(format!(
                "out of order (seq {} follows {})",
                s.seq, prior.seq
            ));
        }
    }
    if link_hash(&chained_to, &s.body) != s.hash {
        return Err("changed (its hash does not match its content)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// `n` chained lines, from `head`, with the head after them.
    fn chain(mut head: Head, n: u64) -> (Vec<String>, Head) {
        let mut out = Vec::new();
        for i in 0..n {
            let mut line = format!(r#"{{"i":{i},"path":"a\"b"}}"#).into_bytes();
            head = head.seal(&mut line);
            out.push(String::from_utf8(line).unwrap());
        }
        (out, head)
    }

    fn text(lines: &[String]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    fn verdict(lines: &[String]) -> AuditVerdict {
        verify(text(lines).as_bytes(), None).unwrap()
    }

    #[test]
    fn a_whole_file_verifies_with_its_last_hash() {
        let (lines, head) = chain(Head::new_chain(), 5);
        let v = verdict(&lines);
        assert!(v.is_whole(), "{v:?}");
        assert_eq!((v.lines, v.first_seq, v.last_seq), (5, Some(1), Some(5)));
        assert_eq!(v.last_hash, Some(hex(&head.hash)));
        assert_eq!(v.prev, Some(hex(&ZERO)));
        let empty = verify(&b""[..], None).unwrap();
        assert!(empty.is_whole() && empty.lines == 0, "{empty:?}");
    }

    #[test]
    fn the_check_goes_on_past_a_fault_and_names_each_one_once() {
        let (mut lines, _) = chain(Head::new_chain(), 12);
        lines[2] = lines[2].replace(r#""i":2"#, r#""i":7"#);
        lines.insert(5, "2026-11-26T00:00:00Z  WARN something".into());
        lines.remove(9);
        let v = verdict(&lines);
        assert_eq!(
            v.fault.as_deref(),
            Some("line 3: changed (its hash does not match its content)")
        );
        assert_eq!(
            v.later_faults,
            vec![
                "line 6: not a JSON line (cut short, or written over)".to_owned(),
                "line 10: a line before it is missing (seq 10 follows 8)".to_owned(),
            ]
        );
        // What was whole before the first fault is what the verdict vouches for.
        assert_eq!((v.lines, v.last_seq), (3, Some(2)));
    }

    #[test]
    fn an_edited_line_is_named_as_changed() {
        let (mut lines, _) = chain(Head::new_chain(), 5);
        lines[2] = lines[2].replace(r#""i":2"#, r#""i":7"#);
        let v = verdict(&lines);
        assert_eq!(v.fault_line, Some(3), "{v:?}");
        assert!(v.fault.unwrap().contains("changed"));
    }

    #[test]
    fn a_removed_line_is_named_as_missing() {
        let (mut lines, _) = chain(Head::new_chain(), 5);
        lines.remove(2);
        let v = verdict(&lines);
        assert_eq!(
            v.fault.as_deref(),
            Some("line 3: a line before it is missing (seq 4 follows 2)")
        );
    }

    #[test]
    fn a_file_cut_short_is_named_at_its_last_line() {
        let (lines, _) = chain(Head::new_chain(), 3);
        let full = text(&lines);
        // Without its final newline, and cut inside the last line.
        for cut in [full.len() - 1, full.len() - 20] {
            let v = verify(&full.as_bytes()[..cut], None).unwrap();
            assert_eq!(v.fault.as_deref(), Some("line 3: cut short"), "{cut}");
        }
        // A torn line followed by more lines is not cut short but written over.
        let torn = format!("{}\n{}", &lines[0][..10], text(&lines[1..]));
        let v = verify(torn.as_bytes(), None).unwrap();
        assert_eq!(v.fault_line, Some(1), "{v:?}");
    }

    #[test]
    fn a_file_without_its_head_is_mid_chain_and_the_rest_still_checked() {
        let (lines, head) = chain(Head::new_chain(), 5);
        let v = verdict(&lines[2..]);
        assert!(v.mid_chain && v.fault.is_none(), "{v:?}");
        assert_eq!((v.first_seq, v.last_seq), (Some(3), Some(5)));
        assert_eq!(v.last_hash, Some(hex(&head.hash)));
        let mut edited = lines[2..].to_vec();
        edited[1] = edited[1].replace(r#""i":3"#, r#""i":9"#);
        assert_eq!(verdict(&edited).fault_line, Some(2));
    }

    #[test]
    fn a_rotated_file_continues_the_one_before_and_must_name_its_last_hash() {
        let (old, head) = chain(Head::new_chain(), 3);
        let (new, _) = chain(head.starting(), 2);
        let first = verdict(&old);
        let v = verify(text(&new).as_bytes(), Some(&first)).unwrap();
        assert!(v.is_whole(), "{v:?}");
        assert_eq!((v.first_seq, v.last_seq), (Some(4), Some(5)));
        // Alone, it begins with its `prev`: whole too.
        assert!(verdict(&new).is_whole());
        // After another chain's file, its `prev` is not that file's last hash.
        let (other, _) = chain(Head::new_chain(), 2);
        let v = verify(text(&new).as_bytes(), Some(&verdict(&other))).unwrap();
        assert_eq!(v.fault_line, Some(1), "{v:?}");
        assert!(
            v.fault
                .unwrap()
                .contains("not the last hash of the file before")
        );
    }

    #[test]
    fn a_restart_in_the_middle_of_a_file_is_a_fault() {
        let (mut lines, _) = chain(Head::new_chain(), 3);
        let (restart, _) = chain(Head::new_chain(), 1);
        lines.extend(restart);
        let v = verdict(&lines);
        assert_eq!(v.fault_line, Some(4), "{v:?}");
    }
}
