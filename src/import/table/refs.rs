//! References (`--ref FIELD=SEGMENT:KEYFIELD`): a field holding another resource's key made the
//! public API's `{"name": …, "url": "/api/v2/SEGMENT/ID/"}`, the record found by its KEYFIELD
//! among that resource's records in the data folder (or among the records being imported, for
//! a resource that refers to itself).

use super::ids::key_text;
use super::records::Record;
use super::source::Source;
use crate::data::data_path::DataPath;
use crate::json::{At, read_value};
use crate::problem::Problem;
use crate::tree::layout::record_url;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::Path;

/// One `--ref`: the field, and the resource and field its values name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefSpec {
    /// The field that holds the other resource's key.
    pub(crate) field: String,
    /// The other resource.
    pub(crate) segment: String,
    /// The field of the other resource's records that holds the key.
    pub(crate) key: String,
}

/// Parses `FIELD=SEGMENT:KEYFIELD`.
pub(crate) fn parse_ref(text: &str) -> Result<RefSpec, String> {
    let parsed = text.split_once('=').and_then(|(field, target)| {
        let (segment, key) = target.split_once(':')?;
        Some(RefSpec { field: field.to_string(), segment: segment.to_string(), key: key.to_string() })
    });
    match parsed {
        Some(spec)
            if !spec.field.is_empty() && !spec.key.is_empty() && crate::config::is_valid_segment(&spec.segment) =>
        {
            Ok(spec)
        }
        _ => Err(format!(
            "--ref {text:?}: write FIELD=SEGMENT:KEYFIELD (e.g. currency=currency:code), SEGMENT a resource's name"
        )),
    }
}

/// The records of a resource by key: each key's (id, name) pairs.
type Targets = HashMap<String, Vec<(i64, Option<String>)>>;

/// Replaces each `--ref` field's key by a reference to the record that has it. Problems: a
/// resource the data folder does not hold, a key no record (or several) has.
pub(crate) fn resolve(
    source: &Source,
    records: &mut [Record],
    refs: &[RefSpec],
    data: &Path,
    resource: &str,
    problems: &mut Vec<Problem>,
) {
    for spec in refs {
        let targets = if spec.segment == resource {
            let mut targets = Targets::new();
            records.iter().for_each(|r| add_target(&mut targets, &r.fields, &spec.key));
            targets
        } else {
            match load_targets(data, spec, problems) {
                Some(targets) => targets,
                None => continue,
            }
        };
        for record in records.iter_mut() {
            let Some(value) = record.fields.get_mut(&spec.field) else { continue };
            if value.is_null() {
                continue;
            }
            let found = key_text(value).and_then(|key| targets.get(&key).map(|found| (key, found)));
            let why = match found {
                Some((_, found)) if found.len() == 1 => {
                    let (id, name) = &found[0];
                    let url = record_url("", &spec.segment, id);
                    *value = match name {
                        Some(name) => json!({"name": name, "url": url}),
                        None => json!({"url": url}),
                    };
                    continue;
                }
                Some((key, found)) => format!(
                    "{} records of {} have {:?} {key:?} (ids {}): a reference names one",
                    found.len(),
                    spec.segment,
                    spec.key,
                    found.iter().map(|(id, _)| id.to_string()).collect::<Vec<_>>().join(", ")
                ),
                None => format!(
                    "no record of {} has {:?} {} (--ref {}={}:{}): import that record first, or fix the value",
                    spec.segment, spec.key, value, spec.field, spec.segment, spec.key
                ),
            };
            problems.push(source.problem(record.place, Some(&spec.field), why));
        }
    }
}

/// Notes a record's key (`key` field) and its id and name in `targets`.
fn add_target(targets: &mut Targets, fields: &Map<String, Value>, key: &str) {
    let (Some(text), Some(id)) = (fields.get(key).and_then(key_text), fields.get("id").and_then(Value::as_i64)) else {
        return;
    };
    let name = fields.get("name").and_then(Value::as_str).map(str::to_string);
    targets.entry(text).or_default().push((id, name));
}

/// The records of `spec`'s resource in the data folder `data`, by key: a folder of record
/// files or a table. `None` (with a problem) when it holds neither or a record cannot be read.
fn load_targets(data: &Path, spec: &RefSpec, problems: &mut Vec<Problem>) -> Option<Targets> {
    let segment = spec.segment.as_str();
    let folder = data.join(segment);
    let table = data.join(DataPath::Table { segment }.file());
    let read = if folder.is_dir() {
        read_folder(&folder)
    } else if table.is_file() {
        read_table(&table)
    } else {
        let why = format!(
            "--ref {}={segment}:{}: the data folder holds no resource {segment} (neither {segment}/ nor \
             {segment}.ndjson): import it first",
            spec.field, spec.key
        );
        Err(vec![Problem::new(&folder, "-", why)])
    };
    let mut targets = Targets::new();
    match read {
        Ok(records) => records.iter().for_each(|fields| add_target(&mut targets, fields, &spec.key)),
        Err(found) => {
            problems.extend(found);
            return None;
        }
    }
    Some(targets)
}

/// The records of a resource folder (its `<id>.json` files).
fn read_folder(folder: &Path) -> Result<Vec<Map<String, Value>>, Vec<Problem>> {
    let entries =
        std::fs::read_dir(folder).map_err(|e| vec![Problem::new(folder, "-", format!("cannot read: {e}"))])?;
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.strip_suffix(".json").and_then(crate::config::parse_id).is_none() {
            continue;
        }
        match crate::json::read_json(&entry.path()) {
            Ok((Value::Object(fields), _)) => records.push(fields),
            Ok(_) => {}
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() { Ok(records) } else { Err(problems) }
}

/// The records of a table (`<segment>.ndjson`, one a line).
fn read_table(table: &Path) -> Result<Vec<Map<String, Value>>, Vec<Problem>> {
    let bytes = crate::fsutil::read_regular_file(table, super::source::MAX_SOURCE_MB << 20)
        .map_err(|e| vec![Problem::new(table, "-", format!("cannot read: {e}"))])?;
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        match read_value(At::Line(table, u32::try_from(i + 1).unwrap_or(u32::MAX)), line) {
            Ok(Value::Object(fields)) => records.push(fields),
            Ok(_) => {}
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() { Ok(records) } else { Err(problems) }
}
