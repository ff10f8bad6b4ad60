//! Reading JSON files: bounded reads of regular files, parsing, and problems located by line
//! and column. Shared by the build, the importer and the settings.

use crate::config;
use crate::fsutil::NotRead;
use crate::problem::Problem;
use serde_json::Value;
use std::path::Path;

pub(crate) mod numbers;
pub mod tape;

/// Deepest nesting accepted in a record (serde_json's own limit, so parsing never overflows
/// the stack).
pub const MAX_DEPTH: usize = 128;

/// Reads and parses a JSON file, reporting invalid UTF-8 and invalid JSON with line and column.
pub fn read_json(path: &Path) -> Result<(Value, blake3::Hash), Problem> {
    let bytes = read_data_file(path)?;
    let hash = blake3::hash(&bytes);
    let value = parse_json(path, &bytes)?;
    Ok((value, hash))
}

/// Reads a settings or source file: a regular file of at most the default document size limit
/// (see [`crate::fsutil::read_regular_file`]).
pub fn read_data_file(path: &Path) -> Result<Vec<u8>, Problem> {
    read_file_limited(path, config::DEFAULT_MAX_DOCUMENT_MB << 20)
}

/// Like [`read_json`], for a file of at most `limit` bytes.
pub fn read_json_limited(path: &Path, limit: u64) -> Result<Value, Problem> {
    let bytes = read_file_limited(path, limit)?;
    parse_json(path, &bytes)
}

fn read_file_limited(path: &Path, limit: u64) -> Result<Vec<u8>, Problem> {
    crate::fsutil::read_regular_file(path, limit).map_err(|e| match e {
        NotRead::TooLarge(_) => Problem::whole(path, format!("larger than {} MB: not a file gen reads", limit >> 20)),
        NotRead::Io(e) => Problem::new(path, "-", format!("cannot read: {e}")),
        refused => Problem::whole(path, refused.to_string()),
    })
}

/// Parses JSON bytes, reporting problems with line and column.
pub fn parse_json(path: &Path, bytes: &[u8]) -> Result<Value, Problem> {
    readable(path, bytes)?;
    let value: Value = numbers::from_text(bytes).map_err(|e| syntax_problem(path, bytes, &e))?;
    // serde_json keeps the last of two equal keys without a word: `{"v":1,"v":2}` would be read
    // as `{"v":2}`. A key of an object is there once.
    match duplicate_key(bytes, &value) {
        Some(twice) => Err(twice.problem(path, bytes)),
        None => Ok(value),
    }
}

/// Parses JSON bytes into a [`tape::Tape`] (many times smaller than a [`Value`]), with the
/// checks and the problems of [`parse_json`].
pub fn parse_tape<'t>(path: &Path, bytes: &'t [u8]) -> Result<tape::Tape<'t>, Problem> {
    readable(path, bytes)?;
    let tape = tape::Tape::parse(bytes).map_err(|e| syntax_problem(path, bytes, &e))?;
    match tape.has_key_twice().then(|| first_key_twice(bytes)).flatten() {
        Some(twice) => Err(twice.problem(path, bytes)),
        None => Ok(tape),
    }
}

/// The problem with `bytes` when they are not UTF-8 or hold nothing.
fn readable(path: &Path, bytes: &[u8]) -> Result<(), Problem> {
    if let Err(e) = std::str::from_utf8(bytes) {
        let (line, column) = line_column(bytes, e.valid_up_to());
        return Err(Problem::new(
            path,
            format!("line {line}, column {column}"),
            "invalid UTF-8: save the file as UTF-8",
        ));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Problem::whole(path, "empty file: a record is a JSON object with at least an \"id\""));
    }
    Ok(())
}

/// The problem of the error `e` serde_json gave reading `bytes`, at its line and column.
fn syntax_problem(path: &Path, bytes: &[u8], e: &serde_json::Error) -> Problem {
    let message = e.to_string();
    let message = message.split(" at line ").next().unwrap_or(&message);
    let (mut line, mut column) = (e.line(), e.column());
    let message = if message.starts_with(numbers::MARK_REFUSED) {
        message.to_string()
    } else if message.contains("recursion limit") {
        format!("nested deeper than {MAX_DEPTH} levels")
    } else if message.contains("trailing comma") {
        // serde_json points at the bracket after the comma; point at the comma to remove.
        if let Some(comma) = comma_before(bytes, line, column) {
            (line, column) = line_column(bytes, comma);
        }
        "invalid JSON: trailing comma: remove it (JSON allows no comma after the last item)".to_string()
    } else {
        format!("invalid JSON: {message}")
    };
    Problem::new(path, format!("line {line}, column {column}"), message)
}

/// The first key that appears twice in one object of `bytes` (valid JSON, parsed as `value`):
/// its offset and text. Cheap when there is none, the common case: the keys in the text (one
/// `:` outside strings each) are counted against the keys `value` holds, and only when they
/// differ is the text walked object by object.
fn duplicate_key(bytes: &[u8], value: &Value) -> Option<Duplicate> {
    fn keys_held(value: &Value) -> usize {
        match value {
            Value::Object(map) => map.len() + map.values().map(keys_held).sum::<usize>(),
            Value::Array(items) => items.iter().map(keys_held).sum(),
            _ => 0,
        }
    }
    if keys_written(bytes) == keys_held(value) {
        return None;
    }
    first_key_twice(bytes)
}

/// The keys written in `bytes` (valid JSON): its colons outside strings. Only quotes,
/// backslashes and colons matter, found with memchr's vectorised search.
fn keys_written(bytes: &[u8]) -> usize {
    let mut colons = 0;
    let mut in_string = false;
    let mut escaped_at = usize::MAX;
    for at in memchr::memchr3_iter(b'"', b'\\', b':', bytes) {
        if in_string {
            if at == escaped_at {
                continue;
            }
            match bytes[at] {
                b'\\' => escaped_at = at + 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if bytes[at] == b'"' {
            in_string = true;
        } else if bytes[at] == b':' {
            colons += 1;
        }
    }
    colons
}

/// An object or array the walk of [`first_key_twice`] is inside.
enum Open {
    /// An object: the keys seen so far, and the last (the member being read).
    Object { keys: std::collections::HashSet<String>, current: String },
    /// An array: the position of the item being read.
    Array { index: usize },
}

/// The slow walk: the keys of each open object (a key being a string followed by `:`) and the
/// place of each open array, for the JSON path of the object the key is in.
fn first_key_twice(bytes: &[u8]) -> Option<Duplicate> {
    let mut open: Vec<Open> = Vec::new();
    let mut last_string: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                last_string = Some((start, i + 1));
            }
            b'{' => open.push(Open::Object { keys: Default::default(), current: String::new() }),
            b'[' => open.push(Open::Array { index: 0 }),
            b'}' | b']' => {
                open.pop();
            }
            b',' => {
                if let Some(Open::Array { index }) = open.last_mut() {
                    *index += 1;
                }
            }
            b':' => {
                let Some((start, end)) = last_string else { continue };
                let key: String = serde_json::from_slice(&bytes[start..end]).unwrap_or_default();
                let Some(Open::Object { keys, current }) = open.last_mut() else { continue };
                if !keys.insert(key.clone()) {
                    return Some(Duplicate { offset: start, key, object: json_path(&open[..open.len() - 1]) });
                }
                *current = key;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The JSON path (`$.a[2].b`) of the value read in `open`, the objects and arrays around it
/// (outermost first).
fn json_path(open: &[Open]) -> String {
    let mut path = String::from("$");
    for frame in open {
        match frame {
            Open::Object { current, .. } => path.push_str(&format!(".{current}")),
            Open::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

/// A key found twice in one object: where the second one is, the key, and the JSON path of
/// the object.
struct Duplicate {
    offset: usize,
    key: String,
    object: String,
}

impl Duplicate {
    fn problem(&self, path: &Path, bytes: &[u8]) -> Problem {
        let (line, column) = line_column(bytes, self.offset);
        Problem::new(
            path,
            &self.object,
            format!(
                "the key {:?} appears twice in this object (again at line {line}, column {column}): a JSON reader \
                 keeps one or the other; keep the one you mean",
                self.key
            ),
        )
    }
}

/// The offset of the `,` that precedes, across whitespace, the character at `line` and
/// `column` (1-based, as serde_json counts them).
fn comma_before(bytes: &[u8], line: usize, column: usize) -> Option<usize> {
    let line_start = if line <= 1 {
        0
    } else {
        bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(line - 2).map(|(i, _)| i + 1)?
    };
    let at = (line_start + column.saturating_sub(1)).min(bytes.len());
    let comma = bytes[..at].iter().rposition(|b| !b.is_ascii_whitespace())?;
    (bytes[comma] == b',').then_some(comma)
}

fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = offset - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

/// True when `value` is a number written as an integer (digits, an optional `-`), whatever its size.
pub(crate) fn is_integer_text(value: &Value) -> bool {
    let Value::Number(n) = value else { return false };
    let text = n.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A short description of a JSON value's kind, for messages.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> Problem {
        parse_json(Path::new("x.json"), text.as_bytes()).unwrap_err()
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
            assert!(parse_json(Path::new("x.json"), fine.as_bytes()).is_ok(), "{fine}");
        }
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
    }

    #[test]
    fn integers_of_any_size_are_told_from_other_numbers() {
        for (text, integer) in
            [("1", true), ("-5", true), ("99999999999999999999999", true), ("1.0", false), ("1e5", false)]
        {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(is_integer_text(&value), integer, "{text}");
        }
        assert!(!is_integer_text(&Value::String("1".into())));
    }
}
