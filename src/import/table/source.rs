//! `gen import table`'s sources: a CSV file (RFC 4180, a header row), a JSON array of objects,
//! or NDJSON (an object a line), read into [`Row`]s, each with the place its problems name.

use crate::fsutil::NotRead;
use crate::json::{At, read_value};
use crate::problem::{Problem, Step, json_path};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The largest source file read, in MB: the whole file is held in memory while it is checked.
pub(crate) const MAX_SOURCE_MB: u64 = 1024;

/// A source file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header row (RFC 4180).
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object a line.
    Ndjson,
}

impl Format {
    /// The format a file's extension names: `.csv`, `.json`, `.ndjson` or `.jsonl`.
    pub(crate) fn of_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "json" => Some(Format::Json),
            "ndjson" | "jsonl" => Some(Format::Ndjson),
            _ => None,
        }
    }
}

/// Where a row is in its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Place {
    /// A CSV record or an NDJSON line, by the line it starts at.
    Line(u64),
    /// An element of a JSON array, by its index.
    Index(usize),
}

/// A source file and its format: places its problems.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    pub(crate) format: Format,
}

impl Source {
    /// A problem of the row at `place`, at its field `field` (or the whole row):
    /// `FILE:LINE: column "F": …` (CSV), `FILE:LINE: $.F: …` (NDJSON), `FILE: $[I].F: …` (JSON).
    pub(crate) fn problem(&self, place: Place, field: Option<&str>, message: impl Into<String>) -> Problem {
        match (place, self.format) {
            (Place::Line(line), format) => {
                let mut path = self.path.as_os_str().to_owned();
                path.push(format!(":{line}"));
                let location = match (field, format) {
                    (Some(field), Format::Csv) => format!("column {field:?}"),
                    (Some(field), _) => json_path(&[Step::Key(field)]),
                    (None, Format::Csv) => "-".to_string(),
                    (None, _) => "$".to_string(),
                };
                Problem::new(Path::new(&path), location, message)
            }
            (Place::Index(index), _) => {
                let steps: Vec<Step<'_>> = std::iter::once(Step::Index(index)).chain(field.map(Step::Key)).collect();
                Problem::new(&self.path, json_path(&steps), message)
            }
        }
    }

    /// How a row is named in a message about two rows: `line 3` or `[2]`.
    pub(crate) fn name(&self, place: Place) -> String {
        match place {
            Place::Line(line) => format!("line {line}"),
            Place::Index(index) => format!("$[{index}]"),
        }
    }
}

/// One record of the source: its place and its fields (a CSV row's cells still text).
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) place: Place,
    pub(crate) fields: Map<String, Value>,
}

/// Reads every row of `source`, or the problems that stop it being read.
pub(crate) fn read_rows(source: &Source) -> Result<Vec<Row>, Vec<Problem>> {
    let limit = MAX_SOURCE_MB << 20;
    let bytes = crate::fsutil::read_regular_file(&source.path, limit).map_err(|e| {
        let message = match e {
            NotRead::TooLarge(_) => format!("larger than {MAX_SOURCE_MB} MB: split it, or import it in parts"),
            NotRead::Io(e) => format!("cannot read: {e}"),
            refused => refused.to_string(),
        };
        vec![Problem::new(&source.path, "-", message)]
    })?;
    match source.format {
        Format::Csv => read_csv(source, &bytes),
        Format::Json => read_json_array(source, &bytes).map_err(|p| vec![p]),
        Format::Ndjson => read_ndjson(source, &bytes),
    }
}

/// A CSV file's rows, each field a string (typed later); the header names the fields.
fn read_csv(source: &Source, bytes: &[u8]) -> Result<Vec<Row>, Vec<Problem>> {
    // A spreadsheet's "CSV UTF-8" starts with a byte order mark: not part of the first name.
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header = reader.headers().map_err(|e| vec![csv_problem(source, &e)])?.clone();
    if header.is_empty() {
        return Err(vec![source.problem(
            Place::Line(1),
            None,
            "the file is empty: a CSV file starts with a header row",
        )]);
    }
    let mut problems = Vec::new();
    for (i, name) in header.iter().enumerate() {
        if name.is_empty() {
            problems.push(source.problem(
                Place::Line(1),
                None,
                format!("column {} has no name in the header row", i + 1),
            ));
        } else if header.iter().take(i).any(|other| other == name) {
            problems.push(source.problem(Place::Line(1), Some(name), "the header names this column twice"));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| vec![csv_problem(source, &e)])?;
        let line = record.position().map_or(0, csv::Position::line);
        let fields = header.iter().zip(record.iter()).map(|(k, v)| (k.to_string(), Value::from(v))).collect();
        rows.push(Row { place: Place::Line(line), fields });
    }
    Ok(rows)
}

/// A CSV reader's error, at its line.
fn csv_problem(source: &Source, error: &csv::Error) -> Problem {
    let line = error.position().map_or(1, csv::Position::line);
    let message = match error.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => format!(
            "malformed CSV: this row has {len} field{} and the header {expected_len} (a value holding a comma is \
             written in double quotes)",
            if *len == 1 { "" } else { "s" }
        ),
        csv::ErrorKind::Utf8 { .. } => "malformed CSV: invalid UTF-8: save the file as UTF-8".to_string(),
        _ => format!("malformed CSV: {error}"),
    };
    source.problem(Place::Line(line), None, message)
}

/// A JSON array's elements, each an object.
fn read_json_array(source: &Source, bytes: &[u8]) -> Result<Vec<Row>, Problem> {
    let value = read_value(At::File(&source.path), bytes)?;
    let Value::Array(items) = value else {
        return Err(Problem::whole(
            &source.path,
            format!(
                "a JSON array of records is expected, not {} (one record a line is NDJSON: name the file .ndjson)",
                crate::json::kind_of(&value)
            ),
        ));
    };
    let mut rows = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        rows.push(Row { place: Place::Index(index), fields: object(source, Place::Index(index), item)? });
    }
    Ok(rows)
}

/// A record of a JSON source: an object.
fn object(source: &Source, place: Place, value: Value) -> Result<Map<String, Value>, Problem> {
    match value {
        Value::Object(map) => Ok(map),
        other => {
            Err(source.problem(place, None, format!("a record is a JSON object, not {}", crate::json::kind_of(&other))))
        }
    }
}

/// NDJSON lines, each an object; lines of spaces only are skipped.
fn read_ndjson(source: &Source, bytes: &[u8]) -> Result<Vec<Row>, Vec<Problem>> {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let place = Place::Line(u64::from(number));
        match read_value(At::Line(&source.path, number), line).and_then(|v| object(source, place, v)) {
            Ok(fields) => rows.push(Row { place, fields }),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() { Ok(rows) } else { Err(problems) }
}
