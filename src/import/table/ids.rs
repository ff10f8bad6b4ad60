//! Record ids: read from an integer field (`--id`), or given to each key (`--key`) and kept in
//! the ids file, `DATA/.ids/<segment>.json`, so that a later import of a newer release gives
//! every known key the id it had, new keys new ids above the highest ever given, and never
//! gives a removed key's id to another.
//!
//! The file (hidden: the data walk skips it, and `gen build` never reads it):
//!
//! ```json
//! {
//!   "key": "alpha_3",
//!   "ids": {
//!     "AFG": 1,
//!     "ALB": 2
//!   }
//! }
//! ```
//!
//! `ids` holds every key ever imported, removed ones too (that is how their ids stay
//! reserved), in id order, one a line: a release's import shows in `git diff` as the lines of
//! its new keys.

use super::source::{Place, Row, Source};
use crate::problem::Problem;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The folder of the data folder that holds the ids files.
pub(crate) const IDS_FOLDER: &str = ".ids";

/// The ids file of the resource `segment` in the data folder `data`.
pub(crate) fn ids_file(data: &Path, segment: &str) -> PathBuf {
    data.join(IDS_FOLDER).join(format!("{segment}.json"))
}

/// The ids given to a resource's keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeptIds {
    /// The field whose value is the key.
    pub(crate) key: String,
    /// Every key ever given an id, and its id.
    pub(crate) ids: BTreeMap<String, i64>,
}

/// What giving ids changed: keys new to the file, and known keys the source no longer holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Changes {
    pub(crate) new: Vec<(String, i64)>,
    pub(crate) removed: Vec<(String, i64)>,
}

/// A value as a key: a non-empty string as it is, a number as written.
pub(crate) fn key_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads the ids file `path`, if there is one.
pub(crate) fn load(path: &Path) -> Result<Option<KeptIds>, Problem> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let value = crate::json::read_json(path)?.0;
    let bad = |location: &str, why: &str| {
        Problem::new(path, location, format!("{why}: the ids file is written by gen import table; restore it from git"))
    };
    let key = value.get("key").and_then(Value::as_str).ok_or_else(|| bad("$.key", "\"key\" must be a field name"))?;
    let Some(Value::Object(map)) = value.get("ids") else {
        return Err(bad("$.ids", "\"ids\" must be an object of keys and their ids"));
    };
    let mut ids = BTreeMap::new();
    let mut seen = HashMap::new();
    for (k, v) in map {
        let location = crate::problem::json_path(&[crate::problem::Step::Key("ids"), crate::problem::Step::Key(k)]);
        let id = v.as_i64().filter(|id| *id > 0).ok_or_else(|| bad(&location, "an id is a positive integer"))?;
        if let Some(other) = seen.insert(id, k) {
            return Err(bad(&location, &format!("the id {id} is given to {other:?} too")));
        }
        ids.insert(k.clone(), id);
    }
    Ok(Some(KeptIds { key: key.to_string(), ids }))
}

/// The ids file's text: the keys in id order, one a line.
pub(crate) fn render(kept: &KeptIds) -> Vec<u8> {
    let mut by_id: Vec<(&i64, &String)> = kept.ids.iter().map(|(k, id)| (id, k)).collect();
    by_id.sort();
    let key = serde_json::to_string(&kept.key).expect("a string serialises");
    let mut out = format!("{{\n  \"key\": {key},\n  \"ids\": {{");
    for (i, (id, k)) in by_id.iter().enumerate() {
        let k = serde_json::to_string(k).expect("a string serialises");
        out.push_str(&format!("{}\n    {k}: {id}", if i == 0 { "" } else { "," }));
    }
    out.push_str(if by_id.is_empty() { "}\n}\n" } else { "\n  }\n}\n" });
    out.into_bytes()
}

/// Gives each row the id of its key (`field`): the id `kept` holds for it, else a new one
/// above the highest ever given, in row order. Returns the ids by row, the file's new
/// contents and what changed; a row without a key, or with the key of an earlier row, is a
/// problem.
pub(crate) fn give_ids(
    source: &Source,
    rows: &[Row],
    field: &str,
    kept: KeptIds,
    problems: &mut Vec<Problem>,
) -> (Vec<i64>, KeptIds, Changes) {
    let mut kept = kept;
    let mut next = kept.ids.values().max().copied().unwrap_or(0) + 1;
    let mut changes = Changes::default();
    let mut first: HashMap<String, Place> = HashMap::new();
    let mut ids = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(key) = row.fields.get(field).and_then(key_text) else {
            let why = match row.fields.get(field) {
                None => format!("the key field {field:?} is missing (--key {field})"),
                Some(value) => format!("the key (--key {field}) is {}: every record needs one", shown(value)),
            };
            problems.push(source.problem(row.place, Some(field), why));
            ids.push(0);
            continue;
        };
        if let Some(place) = first.get(&key) {
            let why = format!("the key {key:?} is the key of {} too: a key names one record", source.name(*place));
            problems.push(source.problem(row.place, Some(field), why));
            ids.push(0);
            continue;
        }
        first.insert(key.clone(), row.place);
        let id = *kept.ids.entry(key.clone()).or_insert_with(|| {
            changes.new.push((key.clone(), next));
            next += 1;
            next - 1
        });
        ids.push(id);
    }
    changes.removed =
        kept.ids.iter().filter(|(k, _)| !first.contains_key(*k)).map(|(k, id)| (k.clone(), *id)).collect();
    changes.removed.sort_by_key(|(_, id)| *id);
    (ids, kept, changes)
}

/// Reads each row's id from the integer field `field` (`--id`): a positive integer, each once.
pub(crate) fn read_ids(source: &Source, rows: &[Row], field: &str, problems: &mut Vec<Problem>) -> Vec<i64> {
    let mut first: HashMap<i64, Place> = HashMap::new();
    let mut ids = Vec::with_capacity(rows.len());
    for row in rows {
        let value = row.fields.get(field).unwrap_or(&Value::Null);
        let id = match value {
            Value::Number(_) if crate::json::is_integer_text(value) => value.as_i64(),
            Value::String(text) => crate::config::parse_id(text),
            _ => None,
        };
        let why = match id {
            Some(id) if id > 0 => first
                .insert(id, row.place)
                .map(|place| format!("the id {id} is the id of {} too: an id names one record", source.name(place))),
            _ => Some(format!("the id (--id {field}) is {}: an id is a positive integer", shown(value))),
        };
        if let Some(why) = why {
            problems.push(source.problem(row.place, Some(field), why));
        }
        ids.push(id.unwrap_or(0));
    }
    ids
}

/// A value as messages show it: `"x"`, `1.5`, `null` (missing or empty).
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "empty".to_string(),
        Value::String(text) if text.is_empty() => "empty".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_back_what_it_wrote() {
        let kept = KeptIds { key: "code".into(), ids: [("b".to_string(), 1), ("a\"".to_string(), 7)].into() };
        let text = render(&kept);
        assert!(String::from_utf8_lossy(&text).contains("\"b\": 1,\n    \"a\\\"\": 7\n"));
        let dir = std::env::temp_dir().join(format!("gen-ids-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.json");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(load(&path).unwrap(), Some(kept));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
