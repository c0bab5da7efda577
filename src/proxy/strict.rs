//! The one strict reader of the proxy: single lines and every item of a batch are read by it.
//!
//! serde_json skips what a type does not keep (`IgnoredAny`, unknown fields) without decoding
//! it, so a lone surrogate escape or a number out of range there goes unnoticed. And a JSON
//! object may name a key twice: serde_json's `Value` keeps the last, other parsers keep the
//! first, so two readers of one message can see two different messages. A host that parses
//! leniently accepts all of these, so the proxy must not relay a message it has not read
//! exactly and unambiguously. [`read`] keeps only `method` and `id` but decodes every other
//! string and number and notes a duplicated key in any object of the message, which costs no
//! allocation per value (keys are borrowed from the line unless they hold escapes).
//! [`BatchItems`] cuts a batch into its items, each then read by [`read`] exactly like a
//! single line.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

mod batch;

pub(super) use batch::BatchItems;

/// The parts of a JSON-RPC object the proxy routes by, read from a message that is exact
/// JSON (anything else is an error of [`read`]).
pub(super) struct Envelope {
    /// `method`, when the object has one string `method`.
    pub(super) method: Option<String>,
    /// `id`, when the object names `id` once.
    pub(super) id: Option<Value>,
    /// Every `id` the object names when it names more than one (empty otherwise): each is the
    /// id to some reader.
    pub(super) ids: Vec<Value>,
    /// Whether some object of the message, at any depth, names a key twice. Readers differ on
    /// which of the two counts, so such a message is never relayed.
    pub(super) duplicated: bool,
}

/// Reads one message (a single line or one item of a batch). An error means the bytes are not
/// exact JSON (or not an object, or `method` is not a string); a duplicated key is not an
/// error here but [`Envelope::duplicated`], so a refusal can still name an unambiguous id.
pub(super) fn read(message: &[u8]) -> Result<Envelope, serde_json::Error> {
    serde_json::from_slice::<Envelope>(message)
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
        let mut ids = Vec::new();
        let mut keys = Keys::default();
        let mut duplicated = false;
        while let Some(Key(key)) = map.next_key::<Key>()? {
            let first = keys.insert(key.clone());
            duplicated |= !first;
            match key.as_ref() {
                "method" => {
                    let m = map.next_value::<String>()?;
                    // The first `method` is kept; a second one makes the message ambiguous
                    // and `duplicated` already says so.
                    if first {
                        method = Some(m);
                    }
                }
                "id" => {
                    let Tree {
                        value,
                        duplicated: d,
                    } = map.next_value::<Tree>()?;
                    duplicated |= d;
                    // An id named twice is no id: a refusal then answers `null`.
                    if first {
                        id = Some(value);
                    } else {
                        ids.extend(id.take());
                        ids.push(value);
                    }
                }
                _ => duplicated |= map.next_value::<Checked>()?.0,
            }
        }
        Ok(Envelope {
            method,
            id,
            ids,
            duplicated,
        })
    }
}

/// An object's key, decoded in full (an escaped `"m\u0065thod"` is `method`) and borrowed
/// from the line when it holds no escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The keys seen in one object: a short list searched in place, and a hash set once an object
/// has many keys, so an object of a million keys costs linear time.
#[derive(Default)]
struct Keys<'de> {
    few: Vec<Cow<'de, str>>,
    many: HashSet<Cow<'de, str>>,
}

/// Keys searched in place before [`Keys`] moves to a hash set.
const FEW_KEYS: usize = 16;

impl<'de> Keys<'de> {
    /// Notes `key`; false when the object already named it.
    fn insert(&mut self, key: Cow<'de, str>) -> bool {
        if !self.many.is_empty() {
            return self.many.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        if self.few.len() < FEW_KEYS {
            self.few.push(key);
        } else {
            self.many.extend(self.few.drain(..));
            self.many.insert(key);
        }
        true
    }
}

/// Any JSON value, kept as nothing but read in full: strings are decoded (so a lone surrogate
/// is an error) and numbers parsed (so one out of range is an error); the flag says whether an
/// object in it names a key twice. Nesting is bounded by serde_json's recursion limit.
pub(super) struct Checked(pub(super) bool);

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
        Ok(Checked(false))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked(false))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked(false))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked(false))
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked(false))
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked(false))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        let mut duplicated = false;
        while let Some(Checked(d)) = seq.next_element::<Checked>()? {
            duplicated |= d;
        }
        Ok(Checked(duplicated))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        let mut keys = Keys::default();
        let mut duplicated = false;
        while let Some(Key(key)) = map.next_key::<Key>()? {
            duplicated |= !keys.insert(key);
            duplicated |= map.next_value::<Checked>()?.0;
        }
        Ok(Checked(duplicated))
    }
}

/// A JSON value kept as a [`Value`] (for an id), read like [`Checked`]: the first of two
/// equal keys is kept and `duplicated` says there were two.
struct Tree {
    value: Value,
    duplicated: bool,
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl TreeVisitor {
    fn leaf<E>(value: Value) -> Result<Tree, E> {
        Ok(Tree {
            value,
            duplicated: false,
        })
    }
}

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any json value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
        Self::leaf(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
        Self::leaf(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
        Self::leaf(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Tree, E> {
        Self::leaf(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Self::leaf(v.into())
    }
    fn visit_unit<E>(self) -> Result<Tree, E> {
        Self::leaf(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        let mut duplicated = false;
        while let Some(t) = seq.next_element::<Tree>()? {
            duplicated |= t.duplicated;
            items.push(t.value);
        }
        Ok(Tree {
            value: Value::Array(items),
            duplicated,
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut obj = Map::new();
        let mut duplicated = false;
        while let Some(Key(key)) = map.next_key::<Key>()? {
            let t = map.next_value::<Tree>()?;
            duplicated |= t.duplicated;
            if obj.contains_key(key.as_ref()) {
                duplicated = true;
            } else {
                obj.insert(key.into_owned(), t.value);
            }
        }
        Ok(Tree {
            value: Value::Object(obj),
            duplicated,
        })
    }
}

/// Whether a message has an object with a key named twice, at any depth; `None` when it is
/// not exact JSON.
pub(super) fn has_duplicated_key(message: &[u8]) -> Option<bool> {
    serde_json::from_slice::<Checked>(message).ok().map(|c| c.0)
}

#[cfg(test)]
mod tests {
    use super::batch::BatchError;
    use super::*;

    fn envelope(line: &str) -> Option<(Option<String>, Option<Value>, bool)> {
        read(line.as_bytes())
            .ok()
            .map(|e| (e.method, e.id, e.duplicated))
    }

    #[test]
    fn the_envelope_is_read_and_the_rest_checked() {
        assert_eq!(
            envelope(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1,2.5,"x",null]}}"#),
            Some((Some("ping".into()), Some(1.into()), false))
        );
        assert_eq!(
            envelope(r#"{"m\u0065thod":"roots/list","id":2}"#),
            Some((Some("roots/list".into()), Some(2.into()), false))
        );
        for bad in [
            r#"{"method":"x","params":{"data":"\udfff"}}"#,
            r#"{"method":"x","extra":"\ud800"}"#,
            r#"{"id":"n","method":"ping","params":{"x":-1e400}}"#,
            r#"{"id":"r","result":{"n":1e999}}"#,
            r#"{"method":7}"#,
            r#"[1]"#,
        ] {
            assert!(envelope(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_key_named_twice_anywhere_is_noted() {
        for (line, id) in [
            (r#"{"id":1,"id":2}"#, None),
            (r#"{"method":"a","method":"b"}"#, None),
            (r#"{"id":3,"method":"a","m\u0065thod":"b"}"#, Some(3.into())),
            (
                r#"{"jsonrpc":"2.0","jsonrpc":"1.0","id":4}"#,
                Some(4.into()),
            ),
            (r#"{"id":5,"params":{},"params":{}}"#, Some(5.into())),
            (
                r#"{"id":6,"result":1,"error":{},"result":2}"#,
                Some(6.into()),
            ),
            (r#"{"id":7,"params":{"a":[{"b":1,"b":2}]}}"#, Some(7.into())),
            (
                r#"{"id":{"x":1,"x":2},"method":"a"}"#,
                Some(serde_json::json!({"x": 1})),
            ),
        ] {
            let e = read(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(e.duplicated, "{line}");
            assert_eq!(e.id, id, "{line}");
        }
        let wide: String = (0..100).map(|i| format!("\"k{i}\":{i},")).collect();
        let once = format!(r#"{{{wide}"id":1}}"#);
        assert!(!read(once.as_bytes()).unwrap().duplicated);
        let twice = format!(r#"{{{wide}"id":1,"k77":0}}"#);
        assert!(read(twice.as_bytes()).unwrap().duplicated);
        let three = read(br#"{"id":1,"id":"b","method":"x","id":3}"#).unwrap();
        assert_eq!(
            (three.id, three.ids),
            (None, vec![1.into(), "b".into(), 3.into()])
        );
        assert_eq!(has_duplicated_key(br#"[{"a":1},{"a":2}]"#), Some(false));
        assert_eq!(has_duplicated_key(br#"[{"a":1,"a":2}]"#), Some(true));
        assert_eq!(has_duplicated_key(b"{"), None);
    }

    fn items(line: &str) -> Result<Vec<&str>, BatchError> {
        BatchItems::new(line.as_bytes())
            .map(|r| r.map(|b| std::str::from_utf8(b).unwrap()))
            .collect()
    }

    #[test]
    fn a_batch_is_cut_into_the_items_as_written() {
        assert_eq!(items(" [ ] "), Ok(vec![]));
        assert_eq!(
            items(r#"[ {"a":[1,{"b":"]"}]} ,1,"x" ,null,[2],-3.5e2]"#),
            Ok(vec![
                r#"{"a":[1,{"b":"]"}]}"#,
                "1",
                r#""x""#,
                "null",
                "[2]",
                "-3.5e2"
            ])
        );
        assert_eq!(
            items(r#"[{"id":1,"id":2}]"#),
            Ok(vec![r#"{"id":1,"id":2}"#])
        );
        for bad in [
            "", "{}", "[", "[1", "[1,]", "[,1]", "[1 2]", "[1]x", "[1],", "[1]\u{c}", "[\u{c}1]",
            "[1,{]",
        ] {
            assert!(items(bad).is_err(), "{bad:?}");
        }
        let deep = format!("[{}{}]", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(items(&deep).map(|v| v.len()), Ok(1));
    }
}
