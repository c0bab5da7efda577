//! Newline-delimited framing with a line limit, as the MCP stdio transport uses.
//!
//! A line over the limit is not buffered: its bytes are read and dropped up to the next
//! newline, so a peer cannot grow memory by never sending one.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One framed line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A complete line, without its newline (or trailing `\r`).
    Line(Vec<u8>),
    /// A line longer than the limit, skipped; the value is how many bytes it had.
    TooLong(usize),
    /// End of input.
    Eof,
}

/// Reads the next frame. Blank lines are skipped.
pub(crate) async fn next_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Frame> {
    let mut line = Vec::new();
    let mut total = 0usize;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            // End of input: a last line without a newline still counts.
            return Ok(finish(line, total, max).unwrap_or(Frame::Eof));
        }
        // memchr finds the newline a vector at a time: a byte loop here was a sixth of the
        // sidecar's time in an upload of 1 MiB chunks.
        let (chunk, used, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        total = total.saturating_add(chunk.len());
        if total <= max {
            line.extend_from_slice(chunk);
        } else if !line.is_empty() {
            line = Vec::new();
        }
        reader.consume(used);
        if done {
            if let Some(frame) = finish(line, total, max) {
                return Ok(frame);
            }
            line = Vec::new();
            total = 0;
        }
    }
}

fn finish(mut line: Vec<u8>, total: usize, max: usize) -> Option<Frame> {
    if total > max {
        return Some(Frame::TooLong(total));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(Frame::Line(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_lines_and_skips_long_ones() {
        let input = b"a\r\n\n  \nbbbbbbbbbb\nc".to_vec();
        let mut r = tokio::io::BufReader::with_capacity(3, &input[..]);
        assert_eq!(
            next_frame(&mut r, 5).await.unwrap(),
            Frame::Line(b"a".to_vec())
        );
        assert_eq!(next_frame(&mut r, 5).await.unwrap(), Frame::TooLong(10));
        assert_eq!(
            next_frame(&mut r, 5).await.unwrap(),
            Frame::Line(b"c".to_vec())
        );
        assert_eq!(next_frame(&mut r, 5).await.unwrap(), Frame::Eof);
    }
}
