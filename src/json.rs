//! Reading JSON files: bounded reads of regular files, parsing with the one reader of the
//! data ([`reader`]), and problems located by line and column. Shared by the build, the
//! importer and the settings.

use crate::fsutil::NotRead;
use crate::problem::Problem;
use serde_json::Value;
use std::path::Path;

mod keys;
pub(crate) mod numbers;
pub(crate) mod reader;
pub(crate) mod tape;

pub(crate) use reader::At;

/// Reads and parses a JSON file, reporting invalid UTF-8 and invalid JSON with line and column.
pub(crate) fn read_json(path: &Path) -> Result<(Value, blake3::Hash), Problem> {
    let bytes = read_data_file(path)?;
    let hash = blake3::hash(&bytes);
    let value = parse_json(path, &bytes)?;
    Ok((value, hash))
}

/// Reads a settings or source file: a regular file of at most the default document size limit
/// (see [`crate::fsutil::read_regular_file`]).
pub(crate) fn read_data_file(path: &Path) -> Result<Vec<u8>, Problem> {
    read_file_limited(path, DEFAULT_MAX_DOCUMENT_MB << 20)
}

/// The default bound of one JSON document in megabytes (a data folder's `max_document_mb`): far
/// above any published record (the largest are a few MB).
pub(crate) const DEFAULT_MAX_DOCUMENT_MB: u64 = 32;

/// Like [`read_json`], for a file of at most `limit` bytes.
pub(crate) fn read_json_limited(path: &Path, limit: u64) -> Result<Value, Problem> {
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

/// Parses JSON bytes of the file `path` with the one reader of the data ([`reader::read`]),
/// reporting problems with line and column.
pub(crate) fn parse_json(path: &Path, bytes: &[u8]) -> Result<Value, Problem> {
    read_value(At::File(path), bytes)
}

/// Parses a JSON text that is `at` into a [`tape::Tape`] with the one reader of the data
/// ([`reader::read_tape`]), its problems worded and placed for where it is.
pub(crate) fn read_tape<'t>(at: At<'_>, bytes: &'t [u8]) -> Result<tape::Tape<'t>, Problem> {
    reader::read_tape(bytes).map_err(|refused| refused.problem(at, bytes))
}

/// Parses a JSON text that is `at` (a file, or a table's line) with the one reader of the data
/// ([`reader::read`]), its problems worded and placed for where it is.
pub(crate) fn read_value(at: At<'_>, bytes: &[u8]) -> Result<Value, Problem> {
    reader::read(bytes).map_err(|refused| refused.problem(at, bytes))
}

/// True when `value` is a number written as an integer (digits, an optional `-`), whatever its size.
pub(crate) fn is_integer_text(value: &Value) -> bool {
    let Value::Number(n) = value else { return false };
    let text = n.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A short description of a JSON value's kind, for messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
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
