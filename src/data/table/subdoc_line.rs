//! A line of a sub-document table, `{"id": <the record's id>, "document": <any JSON value>}`.
//! Its two members are found where they are written, without building the document: the
//! `id` is read with the one reader of the data ([`crate::json::reader`]), and the document is
//! read by it too, as a sub-document file is: checked for syntax when the table is read, read
//! whole when it is rendered, as written, at the line's own columns ([`blank_around_document`]).
//! So a document gives the same value and the same problems as a line as in its own file.

use crate::json::reader::{self, At, Refused};
use crate::problem::Problem;
use serde_json::Value;
use std::ops::Range;

/// What a line of a sub-document table is, for the problems of its shape.
pub(crate) const SHAPE: &str =
    "a line of a sub-document table is {\"id\": <the record's id>, \"document\": <the document>}";

/// One member of a line's object: its key, where the key is written, and where its value is.
struct Member {
    key: String,
    at: usize,
    value: Range<usize>,
}

/// Reads the line `line` (`at` a table's line): its `id`, `None` when it has none (a problem
/// for the caller to word), or its first problem: invalid JSON, a key written twice, a key
/// other than `id` and `document`, no `document`, an `id` the reader refuses (the number mark).
/// The document is checked for syntax only, as a sub-document file is when it is loaded.
pub(crate) fn read(at: At<'_>, line: &[u8]) -> Result<Option<Value>, Problem> {
    let shape = || Refused::whole(SHAPE).problem(at, line);
    let Some(members) = members(line) else {
        // not an object of members: the reader says what is wrong, or it is another value
        return Err(match reader::read(line) {
            Ok(_) => shape(),
            Err(refused) => refused.problem(at, line),
        });
    };
    // a member the reader refuses: read again at its place in the line, the rest blanked (as
    // a document is read when it is rendered), for the problem a reader of the line would give
    let in_line = |value: &Range<usize>| {
        let mut blanked = vec![b' '; line.len()];
        blanked[value.clone()].copy_from_slice(&line[value.clone()]);
        reader::read(&blanked).err().map_or_else(shape, |refused| refused.problem(at, &blanked))
    };
    let mut keys = std::collections::HashSet::new();
    for member in &members {
        if !keys.insert(member.key.as_str()) {
            return Err(Refused::key_twice(member.at, &member.key).problem(at, line));
        }
        if !reader::is_json(&line[member.value.clone()]) {
            return Err(in_line(&member.value));
        }
    }
    let has = |key: &str| members.iter().find(|member| member.key == key);
    if members.iter().any(|member| member.key != "id" && member.key != "document") || has("document").is_none() {
        return Err(shape());
    }
    let Some(id) = has("id") else { return Ok(None) };
    reader::read(&line[id.value.clone()]).map(Some).map_err(|_| in_line(&id.value))
}

/// Blanks every byte of `line` (a line of a sub-document table) around its document: the
/// reader then reads the document as written, at the line's columns. False when the line has
/// no document (it is not the line the table was read with).
pub(crate) fn blank_around_document(line: &mut [u8]) -> bool {
    let Some(document) = members(line).and_then(|members| members.into_iter().find(|m| m.key == "document")) else {
        return false;
    };
    line[..document.value.start].fill(b' ');
    line[document.value.end..].fill(b' ');
    true
}

/// The members of the object `line` holds, in order, found by the structure of its top level
/// only (strings and brackets): `None` when the line is not an object of `"key": value`
/// members. Each value is checked by the caller.
fn members(line: &[u8]) -> Option<Vec<Member>> {
    let mut i = skip_space(line, 0);
    if line.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_space(line, i + 1);
    let mut members = Vec::new();
    if line.get(i) == Some(&b'}') {
        return (skip_space(line, i + 1) == line.len()).then_some(members);
    }
    loop {
        if line.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(line, i)?;
        let key: String = serde_json::from_slice(&line[i..key_end]).ok()?;
        let colon = skip_space(line, key_end);
        if line.get(colon) != Some(&b':') {
            return None;
        }
        let start = skip_space(line, colon + 1);
        let end = value_end(line, start)?;
        let trimmed = start + line[start..end].iter().rposition(|b| !is_space(*b))? + 1;
        members.push(Member { key, at: i, value: start..trimmed });
        match line[end] {
            b',' => i = skip_space(line, end + 1),
            _ => return (skip_space(line, end + 1) == line.len()).then_some(members),
        }
    }
}

/// JSON's whitespace.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(line: &[u8], from: usize) -> usize {
    from + line.get(from..).map_or(0, |rest| rest.iter().take_while(|b| is_space(**b)).count())
}

/// The offset just after the string that opens at `start` (a `"`).
fn string_end(line: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        let at = i + memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line[at] == b'"' {
            return Some(at + 1);
        }
        i = at + 2;
    }
}

/// The offset of the `,` or `}` that ends the member value starting at `start`: the first one
/// outside strings and outside the value's own brackets.
fn value_end(line: &[u8], start: usize) -> Option<usize> {
    let (mut depth, mut i) = (0usize, start);
    while i < line.len() {
        match line[i] {
            b'"' => {
                i = string_end(line, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' if depth == 0 => return Some(i),
            b']' if depth == 0 => return None,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn problem(line: &str) -> String {
        read(At::Line(Path::new("t.ndjson"), 2), line.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn a_line_gives_its_id_and_its_document_as_written() {
        let line = r#" {"document" : {"a": [1e5, "}", {"b": "\"]"}]} , "id": 7 } "#;
        assert_eq!(read(At::Line(Path::new("t"), 1), line.as_bytes()).unwrap(), Some(7.into()));
        let mut bytes = line.as_bytes().to_vec();
        assert!(blank_around_document(&mut bytes));
        assert_eq!(String::from_utf8(bytes).unwrap().trim(), r#"{"a": [1e5, "}", {"b": "\"]"}]}"#);
        let none = read(At::Line(Path::new("t"), 1), br#"{"document": 1e5}"#).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn a_line_of_another_shape_is_a_problem_at_its_place() {
        assert!(
            problem(r#"{"id": 1, "id": 2, "document": 3}"#)
                .starts_with("t.ndjson:2:11: $: the key \"id\" appears twice")
        );
        assert!(
            problem(r#"{"id": 1, "document": 3, "document": 3}"#).starts_with("t.ndjson:2:26: $: the key \"document\"")
        );
        let mark = problem(r#"{"id": {"$serde_json::private::Number": "5"}, "document": 1}"#);
        assert!(mark.starts_with("t.ndjson:2:") && mark.contains("mark for a number"), "{mark}");
        assert!(
            problem(r#"{"id": 1, "document": [1,]}"#).starts_with("t.ndjson:2:25: -: invalid JSON: trailing comma")
        );
        assert!(problem(r#"{"id": 1, "document": tru}"#).starts_with("t.ndjson:2:26: -: invalid JSON: expected ident"));
        for other in [r#"{"id": 1}"#, r#"{"id": 1, "document": 2, "x": 3}"#, "[1]", "{}"] {
            assert!(problem(other).starts_with("t.ndjson:2:1: $: a line of a sub-document table is"), "{other}");
        }
        assert!(problem(r#"{"id": 1, "document": 2"#).starts_with("t.ndjson:2:"));
        assert!(problem("\u{feff}{\"id\": 1, \"document\": 2}").contains("byte order mark"));
    }
}
