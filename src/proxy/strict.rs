//! Reading a message's envelope while checking the rest in full.
//!
//! serde_json skips what a type does not keep (`IgnoredAny`, unknown fields) without decoding
//! it, so a lone surrogate escape or a number out of range there goes unnoticed. A host that
//! parses leniently accepts those, so the proxy must not relay a line it has not read exactly.
//! [`Envelope`] keeps only `method` and `id` but decodes every other string and number,
//! which costs no allocation per value.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// The parts of a JSON-RPC object the proxy routes by. A duplicated `method` or `id`, a
/// `method` that is not a string, and anything in the line that is not exact JSON are errors.
pub(super) struct Envelope {
    pub(super) method: Option<String>,
    pub(super) id: Option<Value>,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a json-rpc object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut method = None;
        let mut id = None;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Method if method.is_some() => {
                    return Err(de::Error::duplicate_field("method"));
                }
                Key::Method => method = Some(map.next_value::<String>()?),
                Key::Id if id.is_some() => return Err(de::Error::duplicate_field("id")),
                Key::Id => id = Some(map.next_value::<Value>()?),
                Key::Other => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(Envelope { method, id })
    }
}

/// A key of the envelope, decoded in full (an escaped `"m\u0065thod"` is `method`).
enum Key {
    Method,
    Id,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "method" => Key::Method,
                    "id" => Key::Id,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Any JSON value, kept as nothing but read in full: strings are decoded (so a lone surrogate
/// is an error) and numbers parsed (so one out of range is an error). Nesting is bounded by
/// serde_json's recursion limit.
pub(super) struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any json value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Option<(Option<String>, Option<Value>)> {
        serde_json::from_str::<Envelope>(line)
            .ok()
            .map(|e| (e.method, e.id))
    }

    #[test]
    fn the_envelope_is_read_and_the_rest_checked() {
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1,2.5,"x",null]}}"#),
            Some((Some("ping".into()), Some(1.into())))
        );
        assert_eq!(
            read(r#"{"m\u0065thod":"roots/list","id":2}"#),
            Some((Some("roots/list".into()), Some(2.into())))
        );
        for bad in [
            r#"{"method":"x","params":{"data":"\udfff"}}"#,
            r#"{"method":"x","extra":"\ud800"}"#,
            r#"{"id":"n","method":"ping","params":{"x":-1e400}}"#,
            r#"{"id":"r","result":{"n":1e999}}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"method":"a","method":"b"}"#,
            r#"{"method":7}"#,
            r#"[1]"#,
        ] {
            assert!(read(bad).is_none(), "{bad}");
        }
    }
}
