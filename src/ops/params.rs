//! A method's params, parsed: a key the method does not know, or a value of the wrong
//! type, is refused with `-32602` naming it, in whole words.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Most characters of a params error's detail: enough for the list of a method's fields.
const MAX_DETAIL_CHARS: usize = 240;

/// `text`, or when longer than `max` characters its first whole words within them and
/// ` ...`: a reader sees that it was cut, and no name is left half-quoted. A single word
/// longer than `max` (a peer's value) is cut where it must be.
fn words_within(text: &str, max: usize) -> String {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    let head = &text[..end];
    let cut = head.rfind(' ').filter(|&i| i > 0).unwrap_or(end);
    format!("{} ...", head[..cut].trim_end_matches([',', ' ']))
}

/// Parses a method's params; absent params are an empty object.
pub(crate) fn params<T: DeserializeOwned>(value: Value) -> Result<T> {
    let value = match value {
        Value::Null => Value::Object(Default::default()),
        Value::Array(_) => return Err(Error::invalid_params("params must be an object")),
        // Any MCP request may carry `_meta`; every other key must be one the method knows.
        Value::Object(mut fields) => {
            fields.remove("_meta");
            Value::Object(fields)
        }
        v => v,
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        // serde quotes the offending value; a peer's value must not make the message long.
        let field = e.path().to_string();
        let detail = words_within(&e.inner().to_string(), MAX_DETAIL_CHARS);
        Error::invalid_params(format!("invalid params: {field}: {detail}"))
    })
}

#[cfg(test)]
mod tests {
    use super::words_within;

    #[test]
    fn a_long_detail_is_cut_at_a_word_and_says_so() {
        assert_eq!(words_within("short", 10), "short");
        assert_eq!(words_within("one `two`, `three`", 14), "one `two` ...");
        assert_eq!(words_within("abcdefghij", 4), "abcd ...");
    }
}
