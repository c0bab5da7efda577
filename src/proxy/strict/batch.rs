//! Cutting a batch line into its items without reading them: each item is then read by the
//! one strict reader exactly like a single line.

use serde::de::IgnoredAny;

/// Why a batch could not be cut into items.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::proxy) enum BatchError {
    /// The line is not a JSON array (or not JSON at all).
    NotAnArray,
}

/// The items of a batch line, in order, each as the bytes the peer wrote (without the
/// whitespace around it). The array's structure is checked as it goes; each item is found by
/// skipping it (without recursion), not read: read it with [`read`](super::read). After an error the
/// iterator ends.
pub(in crate::proxy) struct BatchItems<'a> {
    line: &'a [u8],
    pos: usize,
    stage: Stage,
}

/// Where the cut stands: before the `[`, after an item, or finished.
#[derive(PartialEq, Eq)]
enum Stage {
    Start,
    Item,
    Done,
}

impl<'a> BatchItems<'a> {
    /// The items of `line`, which should begin (after whitespace) with `[`.
    pub(in crate::proxy) fn new(line: &'a [u8]) -> BatchItems<'a> {
        BatchItems {
            line,
            pos: 0,
            stage: Stage::Start,
        }
    }

    fn skip_ws(&mut self) {
        // JSON's whitespace only: a form feed or a vertical tab is not, for any JSON parser.
        while matches!(self.line.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn fail(&mut self) -> Option<Result<&'a [u8], BatchError>> {
        self.stage = Stage::Done;
        Some(Err(BatchError::NotAnArray))
    }

    /// After the array's `]`: only whitespace may follow.
    fn end(&mut self) -> Option<Result<&'a [u8], BatchError>> {
        self.skip_ws();
        if self.pos == self.line.len() {
            self.stage = Stage::Done;
            None
        } else {
            self.fail()
        }
    }
}

impl<'a> Iterator for BatchItems<'a> {
    type Item = Result<&'a [u8], BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.stage {
            Stage::Done => return None,
            Stage::Start => {
                self.skip_ws();
                if self.line.get(self.pos) != Some(&b'[') {
                    return self.fail();
                }
                self.pos += 1;
                self.skip_ws();
                if self.line.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    return self.end();
                }
                self.stage = Stage::Item;
            }
            Stage::Item => {
                self.skip_ws();
                match self.line.get(self.pos) {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        return self.end();
                    }
                    _ => return self.fail(),
                }
            }
        }
        self.skip_ws();
        let rest = self.line.get(self.pos..).unwrap_or_default();
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<IgnoredAny>();
        match stream.next() {
            Some(Ok(_)) => {
                let start = self.pos;
                self.pos += stream.byte_offset();
                match self.line.get(start..self.pos) {
                    Some(item) => Some(Ok(item)),
                    None => self.fail(),
                }
            }
            Some(Err(_)) | None => self.fail(),
        }
    }
}
