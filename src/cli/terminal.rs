//! The only way the command line prints: [`out!`] and [`err!`] for a line of text, [`json`]
//! for an answer as JSON. Each escapes what it prints through [`crate::visible`] as a whole,
//! so a printer cannot forget a field a server shaped: a path read from the disk, a reason, a
//! daemon's error. `print!`, `println!`, `eprint!` and `eprintln!` are refused in `cli` by
//! clippy (`print_stdout`, `print_stderr`), so a new printer goes through here too.
//!
//! A line is escaped whole, its own line breaks included: text of several lines is printed a
//! line at a time, so that a newline inside a name can never start a line of its own.

use crate::visible::{shown, shown_json};
use serde_json::Value;
use std::io::Write;

/// Prints one line of text to stdout, escaped; see [`line`]. A reader that went (`| head`)
/// is no failure of the command.
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = $crate::cli::terminal::line(&mut ::std::io::stdout().lock(), &format!($($arg)*));
    }};
}

/// Prints one line of text to stderr, escaped; see [`line`].
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = $crate::cli::terminal::line(&mut ::std::io::stderr().lock(), &format!($($arg)*));
    }};
}

pub(crate) use {err, out};

/// Writes `text` escaped, then a line break, and flushes: a follower's reader sees each line
/// as it comes. The error is for a caller that stops when its reader went.
pub(crate) fn line(to: &mut impl Write, text: &str) -> std::io::Result<()> {
    to.write_all(shown(text).as_bytes())?;
    to.write_all(b"\n")?;
    to.flush()
}

/// Prints every line of `lines`, each escaped whole.
pub(crate) fn lines<S: AsRef<str>>(lines: &[S]) {
    for l in lines {
        out!("{}", l.as_ref());
    }
}

/// Prints `value` as JSON to stdout (pretty when asked), the characters a reader cannot see
/// written as `\uXXXX`: the same value, valid JSON, nothing raw for the terminal.
pub(crate) fn json(value: &Value, pretty: bool) -> std::io::Result<()> {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .map_err(std::io::Error::other)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(shown_json(&text).as_bytes())?;
    stdout.write_all(b"\n")?;
    stdout.flush()
}
