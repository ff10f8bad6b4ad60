//! The one reader of a JSON value of the data: a record file, a sub-document file, a line of a
//! table, a line's `document`, all read by [`read`] under the same rules, so that the same
//! JSON gives the same value and the same problems whatever the layout (docs/data.md):
//!
//! - the text is UTF-8, and is not empty (whitespace only);
//! - a byte order mark (U+FEFF) where the value starts is named as one, not as invalid JSON;
//! - the syntax is JSON's, nested at most [`MAX_DEPTH`] levels; a trailing comma is placed at
//!   the comma;
//! - numbers are kept as written (`1e5` stays `1e5`), and serde_json's mark for a number
//!   (`{"$serde_json::private::Number": "5"}`) is refused ([`super::numbers`]);
//! - a key written twice in one object, at any depth, is refused (a JSON reader would keep one
//!   or the other without a word).
//!
//! What it refuses is a [`Refused`], placed by byte offset; [`Refused::problem`] words it for
//! where the text is ([`At`]): its own file (`line L, column C`) or a line of a table
//! (`<table>:LINE:COLUMN`). A line's `document` is read as the line with every byte around the
//! document blanked, so that its offsets are the line's.

use super::numbers;
use super::tape::Tape;
use crate::problem::Problem;
use serde_json::Value;
use std::path::Path;

/// Deepest nesting accepted in a record (serde_json's own limit, so parsing never overflows
/// the stack).
pub(crate) const MAX_DEPTH: usize = 128;

/// Where a JSON text is, for the wording and place of its problems.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At<'a> {
    /// Its own file.
    File(&'a Path),
    /// A line of a table: the table and the line's number (the text is the line's bytes, or
    /// its `document` at the line's columns).
    Line(&'a Path, u32),
}

/// Why [`read`] refused a text.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The byte offset of the problem in the text; `None` for the whole text.
    at: Option<usize>,
    /// For a key written twice, the JSON path of its object.
    object: Option<String>,
    message: String,
}

/// Reads `text` as one JSON value under the rules of the module's documentation.
pub(crate) fn read(text: &[u8]) -> Result<Value, Refused> {
    readable(text)?;
    let value = numbers::from_text(text).map_err(|e| syntax(text, &e))?;
    // serde_json keeps the last of two equal keys without a word: `{"v":1,"v":2}` would be read
    // as `{"v":2}`. A key of an object is there once.
    match super::keys::duplicate_key(text, &value) {
        Some(twice) => Err(Refused::twice(twice)),
        None => Ok(value),
    }
}

/// Reads `text` as [`read`] does, into a [`Tape`] (many times smaller than a [`Value`]): the
/// same text is refused for the same reasons, at the same places.
pub(crate) fn read_tape(text: &[u8]) -> Result<Tape<'_>, Refused> {
    readable(text)?;
    let tape = Tape::parse(text).map_err(|e| syntax(text, &e))?;
    match tape.has_key_twice().then(|| super::keys::first_key_twice(text)).flatten() {
        Some(twice) => Err(Refused::twice(twice)),
        None => Ok(tape),
    }
}

/// Refuses a text that is not UTF-8, is empty, or starts with a byte order mark.
fn readable(text: &[u8]) -> Result<(), Refused> {
    if let Err(e) = std::str::from_utf8(text) {
        return Err(refused(e.valid_up_to(), "invalid UTF-8: save the file as UTF-8"));
    }
    if text.iter().all(u8::is_ascii_whitespace) {
        let message = "empty file: a record is a JSON object with at least an \"id\"";
        return Err(Refused { at: None, object: None, message: message.into() });
    }
    let start = text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0);
    if text[start..].starts_with(BOM) {
        return Err(refused(start, BOM_MESSAGE));
    }
    Ok(())
}

/// True when `text` is one JSON value, checked without building it: the fast first pass of a
/// text that is read later (when it is not, [`read`] says why).
pub(crate) fn is_json(text: &[u8]) -> bool {
    std::str::from_utf8(text).is_ok_and(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
}

/// A byte order mark, in UTF-8.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// What a byte order mark is, and what to do.
pub(crate) const BOM_MESSAGE: &str = "a byte order mark (U+FEFF) starts the JSON text, and JSON has none: save it as \
     UTF-8 without a byte order mark (\"UTF-8\", not \"UTF-8 with BOM\")";

fn refused(at: usize, message: &str) -> Refused {
    Refused { at: Some(at), object: None, message: message.to_string() }
}

/// A syntax error of serde_json (or a number mark), placed at its byte offset.
fn syntax(text: &[u8], e: &serde_json::Error) -> Refused {
    let message = e.to_string();
    let message = message.split(" at line ").next().unwrap_or(&message);
    let mut at = offset_of(text, e.line(), e.column());
    let message = if message.starts_with(numbers::MARK_REFUSED) {
        message.to_string()
    } else if message.contains("recursion limit") {
        format!("nested deeper than {MAX_DEPTH} levels")
    } else if message.contains("trailing comma") {
        // serde_json points at the bracket after the comma; point at the comma to remove.
        at = comma_before(text, at).unwrap_or(at);
        "invalid JSON: trailing comma: remove it (JSON allows no comma after the last item)".to_string()
    } else if text[at.min(text.len())..].starts_with(BOM) {
        BOM_MESSAGE.to_string()
    } else {
        format!("invalid JSON: {message}")
    };
    Refused { at: Some(at), object: None, message }
}

impl Refused {
    /// A key written twice, as the walk of the text found it.
    fn twice(twice: super::keys::Duplicate) -> Refused {
        let mut refused = Refused::key_twice(twice.offset, &twice.key);
        refused.object = Some(twice.object);
        refused
    }

    /// A key written twice in the top-level object, the second at `offset`.
    pub(crate) fn key_twice(offset: usize, key: &str) -> Refused {
        Refused {
            at: Some(offset),
            object: Some("$".into()),
            message: format!("the key {key:?} appears twice in this object"),
        }
    }

    /// A problem of the whole text.
    pub(crate) fn whole(message: &str) -> Refused {
        Refused { at: None, object: None, message: message.to_string() }
    }

    /// The problem, worded and placed for a text `at` (`text` its bytes, for lines and columns).
    pub(crate) fn problem(self, at: At<'_>, text: &[u8]) -> Problem {
        let place = self.at.map(|offset| line_column(text, offset));
        let keep = ": a JSON reader keeps one or the other; keep the one you mean";
        match (at, place, self.object) {
            (At::File(path), None, _) => Problem::whole(path, self.message),
            (At::File(path), Some((line, column)), Some(object)) => {
                let message = format!("{} (again at line {line}, column {column}){keep}", self.message);
                Problem::new(path, object, message)
            }
            (At::File(path), Some((line, column)), None) => {
                Problem::new(path, format!("line {line}, column {column}"), self.message)
            }
            (At::Line(table, number), place, object) => {
                // a line has no newline: its column is its offset, plus one
                let mut path = table.as_os_str().to_owned();
                path.push(format!(":{number}:{}", place.map_or(1, |(_, column)| column)));
                let path = std::path::PathBuf::from(path);
                match (object, place) {
                    (Some(object), _) => Problem::new(&path, object, format!("{}{keep}", self.message)),
                    (None, None) => Problem::whole(&path, self.message),
                    (None, Some(_)) => Problem::new(&path, "-", self.message),
                }
            }
        }
    }
}

/// The byte offset of serde_json's `line` and `column` (1-based; the column counts the bytes
/// of the line up to and including the one it points at).
fn offset_of(text: &[u8], line: usize, column: usize) -> usize {
    let line_start = match line {
        0 | 1 => 0,
        _ => memchr::memchr_iter(b'\n', text).nth(line - 2).map_or(text.len(), |i| i + 1),
    };
    (line_start + column.saturating_sub(1)).min(text.len().saturating_sub(1))
}

/// The offset of the `,` that precedes, across whitespace, the byte at `at`.
fn comma_before(text: &[u8], at: usize) -> Option<usize> {
    let comma = text[..at.min(text.len())].iter().rposition(|b| !b.is_ascii_whitespace())?;
    (text[comma] == b',').then_some(comma)
}

/// The line and column (1-based, in bytes) of the byte at `offset`.
fn line_column(text: &[u8], offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = memchr::memchr_iter(b'\n', before).count() + 1;
    let column = before.len() - memchr::memrchr(b'\n', before).map_or(0, |p| p + 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> Problem {
        read(text.as_bytes()).unwrap_err().problem(At::File(Path::new("x.json")), text.as_bytes())
    }

    fn in_line(text: &str) -> String {
        let table = Path::new("t.ndjson");
        read(text.as_bytes()).unwrap_err().problem(At::Line(table, 3), text.as_bytes()).to_string()
    }

    #[test]
    fn a_key_twice_in_one_object_is_reported_with_its_object_and_place() {
        let p = problem(r#"{"v":1,"v":2}"#);
        assert_eq!(p.location, "$");
        assert!(p.message.contains(r#""v" appears twice"#) && p.message.contains("line 1, column 8"), "{}", p.message);
        let p = problem("{\"id\": 1, \"a\": [{\"x\": 1}, {\"b\": {\"k\": 1, \"l\": \"k\",\n \"k\": 2}}]}");
        assert_eq!(p.location, "$.a[1].b");
        assert!(p.message.contains("line 2, column 2"), "{}", p.message);
        // the same key written with an escape is the same key
        assert_eq!(problem(r#"{"id": 1, "name": 1, "n\u0061me": 2}"#).location, "$");
        // equal keys in different objects, keys inside strings, colons in strings: all fine
        for fine in [
            r#"{"a": {"v": 1}, "b": {"v": 1}, "v": [{"v": 1}, {"v": 2}]}"#,
            r#"{"a": "x:y", "b": "\"a\": 1, \"a\": 2", "c": ["a", "a"]}"#,
        ] {
            assert!(read(fine.as_bytes()).is_ok(), "{fine}");
        }
    }

    #[test]
    fn in_a_table_a_problem_is_placed_at_the_line_and_column() {
        assert_eq!(
            in_line(r#"{"v":1,"v":2}"#),
            "t.ndjson:3:8: $: the key \"v\" appears twice in this object: a JSON reader keeps one or the other; \
             keep the one you mean"
        );
        assert!(in_line(r#"{"v": 1,}"#).starts_with("t.ndjson:3:8: -: invalid JSON: trailing comma"));
        assert!(in_line("  \u{feff}{}").starts_with("t.ndjson:3:3: -: a byte order mark (U+FEFF)"));
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let p = problem("\u{feff}{\"id\": 1}");
        assert_eq!((p.location.as_str(), p.message.as_str()), ("line 1, column 1", BOM_MESSAGE));
        // where a value starts, after other text
        let p = problem("[1, \u{feff}2]");
        assert_eq!((p.location.as_str(), p.message.as_str()), ("line 1, column 5", BOM_MESSAGE));
    }

    #[test]
    fn a_trailing_comma_is_reported_where_it_is() {
        let p = problem("{\n  \"id\": 1,\n}\n");
        assert_eq!(p.location, "line 2, column 10");
        assert!(p.message.contains("trailing comma"), "{}", p.message);
        let p = problem("[1, 2,   ]");
        assert_eq!(p.location, "line 1, column 6");
    }

    #[test]
    fn other_syntax_errors_keep_serde_json_positions() {
        let p = problem("{\n  \"id\": 1\n  \"name\": \"x\"\n}");
        assert_eq!(p.location, "line 3, column 3");
        assert!(p.message.starts_with("invalid JSON: "), "{}", p.message);
        assert_eq!(problem("{\"a\": tru}").location, "line 1, column 10");
        assert_eq!(problem("{\"a\": 1").location, "line 1, column 7");
    }
}
