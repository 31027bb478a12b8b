//! Strict JSON reading: `serde_json` with repeated keys refused.
//!
//! `JSON.parse` (what srt uses) keeps the last of two equal keys, other
//! parsers keep the first or fail. A settings file whose meaning depends on
//! the parser is a policy an attacker can make two tools read differently,
//! so a repeated key anywhere in the document is a syntax error here.

use crate::error::{PolicyError, quote};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Parses `text` as one JSON value, refusing repeated object keys.
pub(crate) fn parse(text: &str, origin: &str) -> Result<Value, PolicyError> {
    if text.trim().is_empty() {
        return Err(PolicyError::Empty {
            origin: origin.to_owned(),
        });
    }
    if text.starts_with('\u{feff}') {
        // JSON.parse (srt) refuses it too; say why instead of "expected value".
        return Err(PolicyError::Syntax {
            origin: origin.to_owned(),
            line: 1,
            column: 1,
            message: "the file starts with a byte order mark; save it as utf-8 without one".into(),
        });
    }
    match serde_json::from_str::<StrictValue>(text) {
        Ok(StrictValue(value)) => Ok(value),
        Err(err) => Err(syntax_error(&err, origin)),
    }
}

fn syntax_error(err: &serde_json::Error, origin: &str) -> PolicyError {
    let (line, column) = (err.line(), err.column());
    let full = err.to_string();
    // serde_json appends the position; we print it in front instead.
    let suffix = format!(" at line {line} column {column}");
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    PolicyError::Syntax {
        origin: origin.to_owned(),
        line,
        column,
        message: message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect(),
    }
}

/// The JSON type name used in messages (`expected an array, found string`).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = StrictValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Number(v.into())))
    }

    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Number(v.into())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<StrictValue, E> {
        // JSON text cannot spell NaN or infinity, so this only guards the API.
        Number::from_f64(v)
            .map(|n| StrictValue(Value::Number(n)))
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(StrictValue(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                let message = format!("duplicate key {}", quote(&key));
                return Err(de::Error::custom(message));
            }
            let StrictValue(value) = map.next_value()?;
            members.insert(key, value);
        }
        Ok(StrictValue(Value::Object(members)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_position() {
        let err = parse("{\"a\": 1,\n \"a\": 2}", "f").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: line 2 column 4: invalid json: duplicate key \"a\""
        );
    }

    #[test]
    fn nested_duplicates_are_refused() {
        let text = r#"{"network": {"allowedDomains": [], "allowedDomains": ["x.com"]}}"#;
        assert!(matches!(parse(text, "f"), Err(PolicyError::Syntax { .. })));
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = parse("{\n  \"a\": [1,]\n}", "f").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: line 2 column 11: invalid json: trailing comma"
        );
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let err = parse("\u{feff}{}", "f").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: line 1 column 1: invalid json: the file starts with a byte order mark; save it as utf-8 without one"
        );
    }

    #[test]
    fn blank_text_is_empty() {
        assert!(matches!(
            parse(" \n\t", "f"),
            Err(PolicyError::Empty { .. })
        ));
        assert!(matches!(parse("", "f"), Err(PolicyError::Empty { .. })));
    }

    #[test]
    fn values_survive() {
        let value = parse(r#"{"a": [true, null, -1, 2, 1.5, "s"]}"#, "f").unwrap();
        assert_eq!(
            value,
            serde_json::json!({"a": [true, null, -1, 2, 1.5, "s"]})
        );
    }
}
