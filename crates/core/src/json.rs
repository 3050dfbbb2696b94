//! Strict JSON: exactly one document (no trailing text, no second document) and no key twice in an
//! object, as the YAML readers already require. serde_json alone keeps the last of duplicate keys and,
//! through a `Deserializer` without `end()`, ignores whatever follows the first document.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON value read with duplicate keys rejected.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Strict, E> {
        Ok(Strict(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Strict, D::Error> {
        Strict::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Strict(Value::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            // One lookup per key: the entry is vacant or the key is a duplicate.
            match m.entry(k) {
                serde_json::map::Entry::Occupied(e) => {
                    return Err(de::Error::custom(format!("duplicate key {:?} (a key may appear once in an object)", e.key())));
                }
                serde_json::map::Entry::Vacant(e) => {
                    let Strict(v) = map.next_value()?;
                    e.insert(v);
                }
            }
        }
        Ok(Strict(Value::Object(m)))
    }
}

/// Parses exactly one JSON document with no duplicate key. The error is serde_json's, with its line
/// and column.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let Strict(v) = Strict::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Parses exactly one JSON document, as [`parse`] does, handing each element of the top-level object's
/// `items` array to `item` as soon as it is read instead of keeping it: a 100,000-pod List then never
/// exists as one tree (about 830 MB for a 48 MB text). The document comes back with `items: []`.
/// An `Err` from `item` stops the parse and is returned as [`Stopped::Item`].
pub fn parse_items<E>(text: &str, item: &mut dyn FnMut(usize, Value) -> Result<(), E>) -> Result<Value, Stopped<E>> {
    let mut stop = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let r = de::DeserializeSeed::deserialize(Streamed { at: Level::Document, item, stop: &mut stop }, &mut de).and_then(|v| de.end().map(|()| v));
    match (r, stop) {
        (_, Some(e)) => Err(Stopped::Item(e)),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(Stopped::Json(e)),
    }
}

/// Why [`parse_items`] stopped.
#[derive(Debug)]
pub enum Stopped<E> {
    /// The text is not one strict JSON document.
    Json(serde_json::Error),
    /// The item handler's error.
    Item(E),
}

/// Where a [`Streamed`] value stands.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// The document: an object's `items` value is read at [`Level::Items`].
    Document,
    /// The document's `items`: an array is handed over element by element and comes back empty.
    Items,
}

/// A value of [`parse_items`]'s document: read as [`Strict`] is, except where `at` streams.
struct Streamed<'a, E> {
    at: Level,
    item: &'a mut dyn FnMut(usize, Value) -> Result<(), E>,
    stop: &'a mut Option<E>,
}

impl<'de, E> de::DeserializeSeed<'de> for Streamed<'_, E> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, E> Visitor<'de> for Streamed<'_, E> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<X: de::Error>(self, v: bool) -> Result<Value, X> {
        StrictVisitor.visit_bool(v).map(|Strict(v)| v)
    }
    fn visit_i64<X: de::Error>(self, v: i64) -> Result<Value, X> {
        StrictVisitor.visit_i64(v).map(|Strict(v)| v)
    }
    fn visit_u64<X: de::Error>(self, v: u64) -> Result<Value, X> {
        StrictVisitor.visit_u64(v).map(|Strict(v)| v)
    }
    fn visit_f64<X: de::Error>(self, v: f64) -> Result<Value, X> {
        StrictVisitor.visit_f64(v).map(|Strict(v)| v)
    }
    fn visit_str<X: de::Error>(self, v: &str) -> Result<Value, X> {
        StrictVisitor.visit_str(v).map(|Strict(v)| v)
    }
    fn visit_unit<X: de::Error>(self) -> Result<Value, X> {
        StrictVisitor.visit_unit().map(|Strict(v)| v)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.at != Level::Items {
            return StrictVisitor.visit_seq(seq).map(|Strict(v)| v);
        }
        let mut j = 0;
        while let Some(Strict(x)) = seq.next_element()? {
            if let Err(e) = (self.item)(j, x) {
                *self.stop = Some(e);
                return Err(de::Error::custom("stopped by the item handler"));
            }
            j += 1;
        }
        Ok(Value::Array(Vec::new()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if self.at != Level::Document {
            return StrictVisitor.visit_map(map).map(|Strict(v)| v);
        }
        let mut m = Map::new();
        let mut item = Some(self.item);
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("duplicate key {k:?} (a key may appear once in an object)")));
            }
            let v = match (k.as_str(), item.take()) {
                ("items", Some(item)) => map.next_value_seed(Streamed { at: Level::Items, item, stop: &mut *self.stop })?,
                (_, taken) => {
                    item = taken;
                    map.next_value::<Strict>()?.0
                }
            };
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_document_without_duplicate_keys() {
        assert_eq!(parse(r#"{"a": [1, 2.5, "x", null, true]}"#).unwrap(), serde_json::json!({"a": [1, 2.5, "x", null, true]}));
        let dup = parse(r#"{"a": {"b": 1, "b": 2}}"#).unwrap_err().to_string();
        assert!(dup.contains("duplicate key \"b\""), "{dup}");
        let trailing = parse("{\"a\": 1}\n{\"a\": 2}\n").unwrap_err().to_string();
        assert!(trailing.contains("trailing characters") && trailing.contains("line 2"), "{trailing}");
        assert!(parse("{\"a\": 1} garbage").is_err());
        assert!(parse("{\"a\": 1}\n  \n").is_ok(), "trailing whitespace is fine");
    }

    /// `parse_items` reads what `parse` reads, hands over the top-level items in order, and rejects
    /// what `parse` rejects, with the same error.
    #[test]
    fn items_are_streamed_and_the_rest_is_strict() {
        let text = r#"{"apiVersion": "v1", "items": [{"kind": "Pod", "x": [1, 2]}, 3, {"items": [4]}], "kind": "List"}"#;
        let mut got = Vec::new();
        let top = parse_items::<()>(text, &mut |j, v| {
            got.push((j, v));
            Ok(())
        })
        .unwrap();
        assert_eq!(top, serde_json::json!({"apiVersion": "v1", "items": [], "kind": "List"}));
        let whole = parse(text).unwrap();
        let items: Vec<(usize, Value)> = whole["items"].as_array().unwrap().iter().cloned().enumerate().collect();
        assert_eq!(got, items, "the items as parse reads them, nested items kept");
        for bad in [
            r#"{"items": [{"a": 1, "a": 2}], "kind": "List"}"#,
            r#"{"items": [], "items": [], "kind": "List"}"#,
            r#"{"kind": "List", "kind": "List"}"#,
            "{\"items\": [1]}\n{\"items\": [2]}",
            r#"{"items": [1, }"#,
        ] {
            let want = parse(bad).unwrap_err().to_string();
            match parse_items::<()>(bad, &mut |_, _| Ok(())) {
                Err(Stopped::Json(e)) => assert_eq!(e.to_string(), want, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        let stopped = parse_items(r#"{"items": [1, 2, 3]}"#, &mut |j, _| if j == 1 { Err("second") } else { Ok(()) });
        assert!(matches!(stopped, Err(Stopped::Item("second"))), "{stopped:?}");
        // Not an array: kept as parse keeps it.
        assert_eq!(parse_items::<()>(r#"{"items": {"a": 1}}"#, &mut |_, _| Ok(())).unwrap(), serde_json::json!({"items": {"a": 1}}));
    }
}
