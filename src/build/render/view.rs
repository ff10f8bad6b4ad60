//! A record's document as rendered from its tape, without being built: each string of an
//! object or array that is a reference (it starts with `/api/v2/`) gets the base URL in front,
//! objects write their members ordered by key, numbers are written as they are in the data.
//! Written with serde_json's serializer, it gives the bytes a `serde_json::Value` rendered so
//! gives (keys sorted, the same escapes, compact or pretty).

use crate::build::schema::{Kind as Shown, Shape};
use crate::json::tape::{Kind, Node};
use crate::tree::layout::API_PREFIX;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::borrow::Cow;

/// A value of a record's document, as rendered with `base_url`.
#[derive(Clone, Copy)]
pub(crate) struct Rendered<'a> {
    pub(crate) node: Node<'a>,
    pub(crate) base_url: &'a str,
    /// True for the document's top value, which is not made absolute even when a string.
    pub(crate) top: bool,
}

impl<'a> Rendered<'a> {
    /// The document's top value.
    pub(crate) fn top(node: Node<'a>, base_url: &'a str) -> Rendered<'a> {
        Rendered { node, base_url, top: true }
    }

    fn child(self, node: Node<'a>) -> Rendered<'a> {
        Rendered { node, base_url: self.base_url, top: false }
    }

    /// A string's text as rendered.
    fn text(self, text: &'a str) -> Cow<'a, str> {
        if !self.top && text.starts_with(API_PREFIX) {
            Cow::Owned(format!("{}{text}", self.base_url))
        } else {
            Cow::Borrowed(text)
        }
    }
}

impl Serialize for Rendered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.node.kind() {
            Kind::Null => serializer.serialize_unit(),
            Kind::Bool(b) => serializer.serialize_bool(b),
            // the only constructor that takes a text as it is (see json/numbers.rs)
            Kind::Number(text) => serde_json::Number::from_string_unchecked(text.to_string()).serialize(serializer),
            Kind::String(text) => serializer.serialize_str(&self.text(text)),
            Kind::Array(len) => {
                let mut seq = serializer.serialize_seq(Some(len))?;
                for item in self.node.items() {
                    seq.serialize_element(&self.child(item))?;
                }
                seq.end()
            }
            Kind::Object(len) => {
                let mut map = serializer.serialize_map(Some(len))?;
                for (key, value) in self.node.sorted_members() {
                    map.serialize_entry(key, &self.child(value))?;
                }
                map.end()
            }
        }
    }
}

impl<'a> Shape<'a> for Rendered<'a> {
    fn shape(self) -> Shown<'a> {
        match self.node.kind() {
            Kind::String(text) => Shown::String(self.text(text)),
            _ => self.node.shape(),
        }
    }
    fn items(self) -> impl Iterator<Item = Self> {
        self.node.items().map(move |item| self.child(item))
    }
    fn members(self) -> impl Iterator<Item = (&'a str, Self)> {
        self.node.members().map(move |(key, value)| (key, self.child(value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::tape::Tape;
    use serde_json::Value;

    /// `value` as the renderer made it before the tape: references of objects and arrays made
    /// absolute in a `serde_json::Value`.
    fn absolute(value: &mut Value, base_url: &str) {
        let children: Vec<&mut Value> = match value {
            Value::Object(map) => map.values_mut().collect(),
            Value::Array(items) => items.iter_mut().collect(),
            _ => return,
        };
        for child in children {
            match child {
                Value::String(text) if text.starts_with(API_PREFIX) => text.insert_str(0, base_url),
                other => absolute(other, base_url),
            }
        }
    }

    #[test]
    fn a_document_renders_byte_for_byte_as_its_value_did() {
        for text in [
            r#"{"z": 1, "a": [1e5, -0.50E-3, 12345678901234567890123, 0, true, null], "m": {}, "e": [], "é": "ü"}"#,
            r#"{"id": 1, "x": {"url": "/api/v2/berry/1/", "name": "cheri"}, "l": ["/api/v2/a/", "a/api/v2/"]}"#,
            r#"{"s": "tab\tquote\"back\\slash\u0001\u001f\u007f\ud83d\ude00 \/", "k\u0041": [[[]], {"b": {}}]}"#,
            r#"{"B": 1, "a": 2, "aa": 3, "": 4, "é": 5, "e\u0301": 6, "~": 7}"#,
            r#""/api/v2/top/""#,
            "  [ 1 ,\n 2.50 ]  ",
        ] {
            let mut value = crate::json::numbers::from_text(text.as_bytes()).unwrap();
            absolute(&mut value, "https://x.org");
            let tape = Tape::parse(text.as_bytes()).unwrap();
            let rendered = Rendered::top(tape.root(), "https://x.org");
            assert_eq!(serde_json::to_string(&rendered).unwrap(), serde_json::to_string(&value).unwrap(), "{text}");
            let pretty = serde_json::to_string_pretty(&rendered).unwrap();
            assert_eq!(pretty, serde_json::to_string_pretty(&value).unwrap(), "{text}");
            let (mut seen, mut before) =
                (crate::build::schema::Inferred::default(), crate::build::schema::Inferred::default());
            seen.observe(rendered);
            before.observe(&value);
            assert_eq!(seen, before, "{text}");
        }
    }
}
