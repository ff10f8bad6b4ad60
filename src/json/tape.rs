//! A JSON text read into a tape: one 12-byte slot per value and per key, in text order, strings
//! and numbers pointing into the text itself (simd-json's layout, without its SIMD parser).
//! A record of small objects read as a `serde_json::Value` takes about 45 times its size (a
//! map node per object, a `String` per key, string and number); read so, at most about 9 times
//! (BENCHMARKS.md "Parsing a record").
//!
//! The tape is read by serde_json's own parser, through a visitor that makes the same calls as
//! [`super::numbers::ValueSeed`], so that what is accepted, and every error with its line and
//! column, is what `json::parse_json` gives: numbers as written (found in the text by a
//! cursor, since they are visited in text order), serde_json's number mark refused. Keys written
//! twice are kept on the tape; [`Tape::has_key_twice`] finds them.

use crate::json::numbers::{MARK, MARK_REFUSED, as_serde_json_reads};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One value or key of a tape. Places are byte offsets (into the text, or into the tape's own
/// buffer of unescaped strings); a container's `end` is the slot after its last descendant.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Null,
    Bool(bool),
    Number {
        at: u32,
        len: u32,
    },
    /// A string written without escapes, in the text (without its quotes).
    Text {
        at: u32,
        len: u32,
    },
    /// A string with escapes, unescaped into the tape's buffer.
    Unescaped {
        at: u32,
        len: u32,
    },
    Array {
        len: u32,
        end: u32,
    },
    Object {
        len: u32,
        end: u32,
    },
}

/// A JSON text read into a tape (see the module's documentation).
pub(crate) struct Tape<'t> {
    text: &'t [u8],
    slots: Vec<Slot>,
    unescaped: String,
}

/// What a value of a tape is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind<'a> {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// A number, as written.
    Number(&'a str),
    /// A string, unescaped.
    String(&'a str),
    /// An array of this many items.
    Array(usize),
    /// An object of this many members.
    Object(usize),
}

/// A value of a tape.
#[derive(Clone, Copy)]
pub(crate) struct Node<'a> {
    tape: &'a Tape<'a>,
    at: usize,
}

impl<'t> Tape<'t> {
    /// Reads `text`, which must be valid UTF-8 (else `Err`) of at most 4 GiB.
    pub(crate) fn parse(text: &'t [u8]) -> Result<Tape<'t>, serde_json::Error> {
        if std::str::from_utf8(text).is_err() || u32::try_from(text.len()).is_err() {
            return Err(de::Error::custom("not UTF-8 text of at most 4 GiB"));
        }
        let mut tape = Tape { text, slots: Vec::with_capacity(slots_at_most(text)), unescaped: String::new() };
        let mut reading = Reading { tape: &mut tape, numbers_at: 0 };
        let mut deserializer = serde_json::Deserializer::from_slice(text);
        Seed(&mut reading).deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(tape)
    }

    /// The top value.
    pub(crate) fn root(&self) -> Node<'_> {
        Node { tape: self, at: 0 }
    }

    /// True when an object holds a key twice (what serde_json would keep once, silently).
    pub(crate) fn has_key_twice(&self) -> bool {
        let mut keys: Vec<&str> = Vec::new();
        (0..self.slots.len()).any(|at| {
            let node = Node { tape: self, at };
            if !matches!(node.kind(), Kind::Object(n) if n > 1) {
                return false;
            }
            keys.clear();
            keys.extend(node.members().map(|(key, _)| key));
            keys.sort_unstable();
            keys.windows(2).any(|pair| pair[0] == pair[1])
        })
    }

    fn str_at(&self, at: u32, len: u32, text: bool) -> &str {
        let (at, len) = (at as usize, len as usize);
        if text {
            // the text was checked to be UTF-8, and a place is a whole string's or number's
            std::str::from_utf8(&self.text[at..at + len]).unwrap_or_default()
        } else {
            &self.unescaped[at..at + len]
        }
    }
}

impl<'a> Node<'a> {
    /// What the value is.
    pub(crate) fn kind(self) -> Kind<'a> {
        let tape = self.tape;
        match tape.slots[self.at] {
            Slot::Null => Kind::Null,
            Slot::Bool(b) => Kind::Bool(b),
            Slot::Number { at, len } => Kind::Number(tape.str_at(at, len, true)),
            Slot::Text { at, len } => Kind::String(tape.str_at(at, len, true)),
            Slot::Unescaped { at, len } => Kind::String(tape.str_at(at, len, false)),
            Slot::Array { len, .. } => Kind::Array(len as usize),
            Slot::Object { len, .. } => Kind::Object(len as usize),
        }
    }

    /// The slot after this value and its descendants.
    fn end(self) -> usize {
        match self.tape.slots[self.at] {
            Slot::Array { end, .. } | Slot::Object { end, .. } => end as usize,
            _ => self.at + 1,
        }
    }

    /// The text of a string, `None` for another kind.
    pub(crate) fn as_str(self) -> Option<&'a str> {
        match self.kind() {
            Kind::String(text) => Some(text),
            _ => None,
        }
    }

    /// An array's items in order (none for another kind).
    pub(crate) fn items(self) -> impl Iterator<Item = Node<'a>> {
        let len = match self.kind() {
            Kind::Array(len) => len,
            _ => 0,
        };
        let tape = self.tape;
        let mut next = self.at + 1;
        (0..len).map(move |_| {
            let item = Node { tape, at: next };
            next = item.end();
            item
        })
    }

    /// An object's members in text order (none for another kind).
    pub(crate) fn members(self) -> impl Iterator<Item = (&'a str, Node<'a>)> {
        let len = match self.kind() {
            Kind::Object(len) => len,
            _ => 0,
        };
        let tape = self.tape;
        let mut next = self.at + 1;
        (0..len).map(move |_| {
            let key = Node { tape, at: next }.as_str().unwrap_or_default();
            let value = Node { tape, at: next + 1 };
            next = value.end();
            (key, value)
        })
    }

    /// An object's members ordered by key, as a `serde_json::Map` holds and writes them.
    pub(crate) fn sorted_members(self) -> Vec<(&'a str, Node<'a>)> {
        let mut members: Vec<_> = self.members().collect();
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        members
    }

    /// The value of an object's member `key`.
    pub(crate) fn get(self, key: &str) -> Option<Node<'a>> {
        self.members().find(|(k, _)| *k == key).map(|(_, value)| value)
    }
}

/// At most how many slots `text` (valid JSON) takes: one per value and per key, so at most one
/// for the top value, one per `,` (one more item), per `:` (a key) and per `[` or `{` (a first
/// item), counted outside strings. Sizing the tape once keeps it from holding twice its room.
fn slots_at_most(text: &[u8]) -> usize {
    let mut count = 1;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i += 1;
                while let Some(found) = memchr::memchr2(b'"', b'\\', &text[i.min(text.len())..]) {
                    i += found + 1;
                    if text[i - 1] == b'"' {
                        break;
                    }
                    i += 1; // the escaped character
                }
                continue;
            }
            b',' | b':' | b'[' | b'{' => count += 1,
            _ => {}
        }
        i += 1;
    }
    count
}

/// A tape being read, and where the next number is looked for in its text.
struct Reading<'r, 't> {
    tape: &'r mut Tape<'t>,
    numbers_at: usize,
}

impl Reading<'_, '_> {
    /// The place of the next number written in the text (numbers are visited in text order):
    /// `Err` when there is none, the number visited having come from serde_json's mark.
    fn next_number<E: de::Error>(&mut self) -> Result<Slot, E> {
        let text = self.tape.text;
        if let Some((start, end)) = crate::json::numbers::next_number_span(text, self.numbers_at) {
            self.numbers_at = end;
            return Ok(Slot::Number { at: start as u32, len: (end - start) as u32 });
        }
        self.numbers_at = text.len();
        Err(E::custom(MARK_REFUSED))
    }

    /// The next number written, which serde_json read as `read` (see `numbers::Numbers::written`).
    fn written<E: de::Error>(&mut self, read: &str) -> Result<Slot, E> {
        match self.next_number::<E>() {
            Ok(slot @ Slot::Number { at, len }) if as_serde_json_reads(self.tape.str_at(at, len, true)) == read => {
                Ok(slot)
            }
            _ => Err(E::custom(MARK_REFUSED)),
        }
    }

    /// The slot of a string: in the text when `s` lies in it, else copied into the buffer.
    fn string(&mut self, s: &str) -> Slot {
        let text = self.tape.text.as_ptr_range();
        let range = s.as_bytes().as_ptr_range();
        if text.start <= range.start && range.end <= text.end {
            Slot::Text { at: (range.start as usize - text.start as usize) as u32, len: s.len() as u32 }
        } else {
            let at = self.tape.unescaped.len() as u32;
            self.tape.unescaped.push_str(s);
            Slot::Unescaped { at, len: s.len() as u32 }
        }
    }

    fn push(&mut self, slot: Slot) {
        self.tape.slots.push(slot);
    }
}

/// Reads one value onto the tape, making the calls [`super::numbers::ValueSeed`] makes.
struct Seed<'s, 'r, 't>(&'s mut Reading<'r, 't>);

impl<'de> DeserializeSeed<'de> for Seed<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.0.push(Slot::Bool(b));
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        let slot = self.0.next_number()?;
        self.0.push(slot);
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.visit_i64(0)
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<(), E> {
        let read = serde_json::Number::from_f64(n).map_or_else(String::new, |n| n.to_string());
        let slot = self.0.written(&read)?;
        self.0.push(slot);
        Ok(())
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        let slot = self.0.string(s);
        self.0.push(slot);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(Slot::Null);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.0.tape.slots.len();
        self.0.push(Slot::Array { len: 0, end: 0 });
        let mut len = 0;
        while seq.next_element_seed(Seed(&mut *self.0))?.is_some() {
            len += 1;
        }
        let end = self.0.tape.slots.len() as u32;
        self.0.tape.slots[at] = Slot::Array { len, end };
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.tape.slots.len();
        self.0.push(Slot::Object { len: 0, end: 0 });
        let mut len = 0;
        let buffered = self.0.tape.unescaped.len();
        while let Some((slot, mark)) = map.next_key_seed(KeySeed(&mut *self.0))? {
            if mark && len == 0 {
                self.0.tape.slots.truncate(at);
                self.0.tape.unescaped.truncate(buffered);
                return marked_number(self.0, map);
            }
            self.0.push(slot);
            map.next_value_seed(Seed(&mut *self.0))?;
            len += 1;
        }
        let end = self.0.tape.slots.len() as u32;
        self.0.tape.slots[at] = Slot::Object { len, end };
        Ok(())
    }
}

/// Reads a key as a `String` is read: its slot, and whether it is serde_json's number mark.
struct KeySeed<'s, 'r, 't>(&'s mut Reading<'r, 't>);

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_, '_> {
    type Value = (Slot, bool);
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(Slot, bool), D::Error> {
        deserializer.deserialize_string(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_, '_> {
    type Value = (Slot, bool);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E>(self, s: &str) -> Result<(Slot, bool), E> {
        Ok((self.0.string(s), s == MARK))
    }
}

/// The number serde_json gives as an object with only its mark, `map` read up to the mark:
/// `Err` when it is an object written so (as `numbers::marked_number` does).
fn marked_number<'de, A: MapAccess<'de>>(reading: &mut Reading, mut map: A) -> Result<(), A::Error> {
    let (at, buffered) = (reading.tape.slots.len(), reading.tape.unescaped.len());
    map.next_value_seed(Seed(&mut *reading))?;
    let read = Node { tape: reading.tape, at }.as_str().map(str::to_string);
    reading.tape.slots.truncate(at);
    reading.tape.unescaped.truncate(buffered);
    match (read, map.next_key::<de::IgnoredAny>()?) {
        (Some(read), None) => {
            let slot = reading.written(&read)?;
            reading.push(slot);
            Ok(())
        }
        _ => Err(de::Error::custom(MARK_REFUSED)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 12);
    }

    #[test]
    fn values_are_read_as_written_and_walked_in_order() {
        let text = br#"{"b": [1e5, -0.50E-3, 7, "x\u0041"], "a": {"t": true, "n": null}, "s": "plain", "e": []}"#;
        let tape = Tape::parse(text).unwrap();
        let root = tape.root();
        assert_eq!(root.kind(), Kind::Object(4));
        let keys: Vec<&str> = root.members().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b", "a", "s", "e"]);
        let sorted: Vec<&str> = root.sorted_members().iter().map(|(k, _)| *k).collect();
        assert_eq!(sorted, ["a", "b", "e", "s"]);
        let items: Vec<Kind> = root.get("b").unwrap().items().map(Node::kind).collect();
        assert_eq!(items, [Kind::Number("1e5"), Kind::Number("-0.50E-3"), Kind::Number("7"), Kind::String("xA")]);
        assert_eq!(root.get("a").unwrap().get("n").unwrap().kind(), Kind::Null);
        assert_eq!(root.get("s").unwrap().as_str(), Some("plain"));
        assert_eq!(root.get("e").unwrap().kind(), Kind::Array(0));
        assert!(!tape.has_key_twice());
        assert!(Tape::parse(br#"[{"a": 1, "b": {"k": 1, "k\u0020": 2, "k": 3}}]"#).unwrap().has_key_twice());
    }

    #[test]
    fn what_is_refused_is_refused_as_the_value_reader_refuses_it() {
        for text in [
            r#"{"$serde_json::private::Number": "5"}"#,
            r#"[{"$serde_json::private::Number": "1.5"}, 1.5]"#,
            r#"[{"$serde_json::private::Number": "1"}, 1]"#,
            r#"[1.5, {"$serde_json::private::Number": "1.5"}]"#,
            r#"{"$serde_json::private::Numb\u0065r": 5}"#,
            r#"{"a": {"$serde_json::private::Number": {"$serde_json::private::Number": "2"}}, "b": 2}"#,
            "{\"a\": 1,\n \"b\": [1, 2,]}",
            "[01]",
            "{\"a\" 1}",
            "[1] x",
            "\"\\ud800\"",
            &format!("{}1{}", "[".repeat(130), "]".repeat(130)),
        ] {
            let old = crate::json::numbers::from_text(text.as_bytes()).unwrap_err();
            let new = Tape::parse(text.as_bytes()).err().unwrap_or_else(|| panic!("{text} is read"));
            assert_eq!((new.to_string(), new.line(), new.column()), (old.to_string(), old.line(), old.column()));
        }
    }

    #[test]
    fn slots_are_counted_before_they_are_made() {
        for text in [r#"{"a": [1, {}, [], "x,:[{"], "b": {"c": null}}"#, "[[[1]]]", "1", r#""\"[""#] {
            let tape = Tape::parse(text.as_bytes()).unwrap();
            assert!(tape.slots.len() <= slots_at_most(text.as_bytes()), "{text}");
            assert_eq!(tape.slots.capacity(), slots_at_most(text.as_bytes()), "{text}");
        }
    }
}
