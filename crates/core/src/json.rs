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
}
