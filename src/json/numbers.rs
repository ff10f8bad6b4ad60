//! Numbers kept as written. serde_json (with `arbitrary_precision`, which keeps every digit)
//! still rewrites an exponent when it reads it (`1e5` becomes `1e+5`, `1.50E-3` becomes
//! `1.50e-3`: `scan_exponent` in its `de.rs`), and reads the object
//! `{"$serde_json::private::Number": "5"}`, its own mark for a number, as the number 5.
//!
//! [`ValueSeed`] builds a [`Value`] as serde_json's own `Value` does, except that each number
//! that is not a plain integer takes its text from the JSON text itself (the numbers of a text
//! are visited in text order, so the k-th number visited is the k-th number written), and that
//! an object with the mark is refused ([`MARK_REFUSED`]). `tape.rs` reads a text the same
//! way, onto a tape.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::cell::{Cell, OnceCell};
use std::fmt;

/// The key serde_json reads a number from, when it is the only key of an object.
pub(crate) const MARK: &str = "$serde_json::private::Number";

/// The message of an object with serde_json's mark for a number.
pub(crate) const MARK_REFUSED: &str = "an object with the key \"$serde_json::private::Number\", the JSON reader's own \
     mark for a number, which it would read as a number: rename the key";

/// The numbers of one JSON text, as written, in text order.
pub(crate) struct Numbers<'t> {
    text: &'t [u8],
    /// Where each number is written, found when a number other than a plain integer is first read.
    spans: OnceCell<Vec<(usize, usize)>>,
    /// How many numbers were read so far.
    read: Cell<usize>,
}

impl<'t> Numbers<'t> {
    pub(crate) fn new(text: &'t [u8]) -> Self {
        Numbers { text, spans: OnceCell::new(), read: Cell::new(0) }
    }

    /// Counts a plain integer (written as its value prints). Once the text's numbers are known,
    /// one more number than the text holds is a mark read as a number.
    fn integer<E: de::Error>(&self) -> Result<(), E> {
        let k = self.read.replace(self.read.get() + 1);
        match self.spans.get() {
            Some(spans) if k >= spans.len() => Err(E::custom(MARK_REFUSED)),
            _ => Ok(()),
        }
    }

    /// The next number as written, given serde_json's text of it. `Err` when the text holds no
    /// such number there: the number came from a mark.
    fn written<E: de::Error>(&self, read: &str) -> Result<Number, E> {
        let k = self.read.replace(self.read.get() + 1);
        let spans = self.spans.get_or_init(|| number_spans(self.text));
        let written = spans.get(k).and_then(|&(start, end)| std::str::from_utf8(&self.text[start..end]).ok());
        match written {
            // The only constructor that takes a text as it is; serde_json's own tests use it, and
            // tests/suite/build.rs checks that the text is copied byte for byte.
            Some(text) if as_serde_json_reads(text) == read => Ok(Number::from_string_unchecked(text.to_string())),
            _ => Err(E::custom(MARK_REFUSED)),
        }
    }
}

/// Where each number of a JSON text is written, in text order.
fn number_spans(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some((start, end)) = next_number_span(text, from) {
        spans.push((start, end));
        from = end;
    }
    spans
}

/// Where the first number written in `text` at or after `from` is (`from` outside a string):
/// its start and end, strings passed over.
pub(crate) fn next_number_span(text: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len() && matches!(text[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    i += 1;
                }
                return Some((start, i));
            }
            _ => i += 1,
        }
    }
    None
}

/// A number's text as serde_json reads it: the exponent's `E` as `e`, a `+` when it has no sign.
pub(crate) fn as_serde_json_reads(written: &str) -> String {
    let mut out = String::with_capacity(written.len() + 1);
    let mut after_e = false;
    for c in written.chars() {
        if after_e && c != '+' && c != '-' {
            out.push('+');
        }
        after_e = c == 'e' || c == 'E';
        out.push(if after_e { 'e' } else { c });
    }
    out
}

/// Builds a [`Value`] with its numbers as written (see the module's documentation).
#[derive(Clone, Copy)]
pub(crate) struct ValueSeed<'n, 't>(pub &'n Numbers<'t>);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.0.integer()?;
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.0.integer()?;
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        self.0.written(&Number::from_f64(n).map_or_else(String::new, |n| n.to_string())).map(Value::Number)
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == MARK && object.is_empty() {
                return marked_number(self.0, map).map(Value::Number);
            }
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The number serde_json gives as an object with only its mark, `map` read up to the mark:
/// `Err` when it is an object written so.
fn marked_number<'de, A: MapAccess<'de>>(numbers: &Numbers, mut map: A) -> Result<Number, A::Error> {
    let read = map.next_value_seed(ValueSeed(numbers))?;
    match (read, map.next_key::<de::IgnoredAny>()?) {
        (Value::String(read), None) => numbers.written(&read),
        _ => Err(de::Error::custom(MARK_REFUSED)),
    }
}

/// Parses `text` (valid UTF-8) into a [`Value`] with its numbers as written.
pub(crate) fn from_text(text: &[u8]) -> Result<Value, serde_json::Error> {
    let numbers = Numbers::new(text);
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let value = ValueSeed(&numbers).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_kept_as_written() {
        let text = r#"{"a": [1e5, 1.50E-3, -0, 2E+7, 1.0, 12345678901234567890123, -7, 0.5e-0], "b\"1e5": "2E5"}"#;
        let value = from_text(text.as_bytes()).unwrap();
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            r#"{"a":[1e5,1.50E-3,-0,2E+7,1.0,12345678901234567890123,-7,0.5e-0],"b\"1e5":"2E5"}"#
        );
        assert_eq!(value["a"][0].as_f64(), Some(1e5));
    }

    #[test]
    fn the_mark_for_a_number_is_refused_wherever_it_is() {
        for text in [
            r#"{"$serde_json::private::Number": "5"}"#,
            r#"{"id": {"$serde_json::private::Number": "5"}}"#,
            r#"[{"$serde_json::private::Number": "1.5"}, 1.5]"#,
            r#"[{"$serde_json::private::Number": "1"}, 1]"#,
            r#"[1.5, {"$serde_json::private::Number": "1.5"}]"#,
            r#"{"$serde_json::private::Number": "5", "b": 1}"#,
            r#"{"$serde_json::private::Numb\u0065r": 5}"#,
        ] {
            let error = from_text(text.as_bytes()).unwrap_err().to_string();
            assert!(error.starts_with(MARK_REFUSED), "{text}: {error}");
        }
        // not alone, or not first, it is an ordinary key
        let value = from_text(br#"{"a": 1, "$serde_json::private::Number": "5"}"#).unwrap();
        assert_eq!(value["$serde_json::private::Number"], "5");
    }
}
