//! Checks of each record's own shape (an object, its `id`, its `name`), of names across a
//! resource, of order files and of settings. References between records are checked when
//! documents are rendered (`render`), once every record is known.

use super::dataset::{Dataset, Record, Spread};
use crate::config::{self, CONFIG_FILE, DataSettings};
use crate::json::{At, is_integer_text, kind_of, read_value};
use crate::problem::Problem;
use crate::tree::layout::{self, API_PREFIX};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault};
use std::path::Path;

pub(crate) fn check_config(path: &Path, config: &DataSettings, problems: &mut Vec<Problem>) {
    if let Err(message) = config::check_base_url(&config.base_url) {
        problems.push(Problem::new(path, "$.base_url", message));
    }
    for (i, size) in config.page_sizes.iter().enumerate() {
        if *size == 0 {
            problems.push(Problem::new(path, format!("$.page_sizes[{i}]"), "a page size must be at least 1"));
        }
    }
    for (i, segment) in config.external.iter().enumerate() {
        if !config::is_valid_segment(segment) {
            problems.push(Problem::new(
                path,
                format!("$.external[{i}]"),
                format!("{segment:?} is not a valid segment: use lower-case letters, digits and '-'"),
            ));
        } else if let Some(why) = layout::reserved_segment(segment) {
            problems.push(Problem::new(
                path,
                format!("$.external[{i}]"),
                format!("{segment:?} cannot be an external resource: {why}"),
            ));
        }
    }
}

/// The problems of a data folder (`data`) holding a resource (one of `segments`) under a name
/// the tree reserves ([`layout::reserved_segment`]): its list would be written where the tree
/// keeps one of its own documents. Each is reported at the resource's folder, or its table.
pub(crate) fn reserved_segments<'s>(data: &Path, segments: impl Iterator<Item = &'s str>) -> Vec<Problem> {
    let reserved = segments.filter_map(|segment| Some((segment, layout::reserved_segment(segment)?)));
    reserved
        .map(|(segment, why)| {
            let folder = data.join(segment);
            let path = if folder.is_dir() { folder } else { data.join(format!("{segment}.ndjson")) };
            Problem::whole(
                &path,
                format!(
                    "a resource cannot be named {segment:?}: {why}, which gen writes itself; rename the resource \
                     (e.g. {segment}-records)"
                ),
            )
        })
        .collect()
}

/// The top of a record: its kind, `id` and `name`. Everything else is checked for syntax and
/// skipped without being built in memory, which makes loading several times faster than
/// parsing whole records.
#[derive(Debug, Default)]
pub(crate) struct Head {
    /// The kind of the top-level value, when it is not an object.
    pub(crate) not_object: Option<&'static str>,
    pub(crate) id: Option<Value>,
    name: Option<Value>,
}

impl<'de> serde::Deserialize<'de> for Head {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Head, D::Error> {
        deserializer.deserialize_any(HeadVisitor)
    }
}

pub(crate) struct HeadVisitor;

impl<'de> serde::de::Visitor<'de> for HeadVisitor {
    type Value = Head;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let mut head = Head::default();
        // `id` or `name` written twice: which one counts would depend on the reader (the one
        // reader of the data refuses it, and says where: see parse_head)
        let twice = || serde::de::Error::custom("a key written twice");
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "id" if head.id.is_some() => return Err(twice()),
                "name" if head.name.is_some() => return Err(twice()),
                "id" => head.id = Some(map.next_value()?),
                "name" => head.name = Some(map.next_value()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(head)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Head, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Head { not_object: Some("an array"), ..Head::default() })
    }

    fn visit_bool<E>(self, _: bool) -> Result<Head, E> {
        Ok(Head { not_object: Some("a boolean"), ..Head::default() })
    }
    fn visit_i64<E>(self, _: i64) -> Result<Head, E> {
        Ok(Head { not_object: Some("a number"), ..Head::default() })
    }
    fn visit_u64<E>(self, _: u64) -> Result<Head, E> {
        Ok(Head { not_object: Some("a number"), ..Head::default() })
    }
    fn visit_f64<E>(self, _: f64) -> Result<Head, E> {
        Ok(Head { not_object: Some("a number"), ..Head::default() })
    }
    fn visit_str<E>(self, _: &str) -> Result<Head, E> {
        Ok(Head { not_object: Some("a string"), ..Head::default() })
    }
    fn visit_unit<E>(self) -> Result<Head, E> {
        Ok(Head { not_object: Some("null"), ..Head::default() })
    }
}

/// Parses the head of a record (its file, or its table's line: `at`); on a syntax error,
/// reports it as the one reader of the data ([`read_value`]) does.
pub(crate) fn parse_head(at: At<'_>, bytes: &[u8]) -> Result<Head, Problem> {
    let parsed = std::str::from_utf8(bytes).map_err(serde::de::Error::custom).and_then(serde_json::from_str::<Head>);
    match parsed {
        Ok(head) => Ok(head),
        // The slow path gives the precise message (UTF-8, nesting, line and column).
        Err(e) => Err(read_value(at, bytes).err().unwrap_or_else(|| {
            let path = match at {
                At::File(path) | At::Line(path, _) => path,
            };
            Problem::new(path, format!("line {}, column {}", e.line(), e.column()), e.to_string())
        })),
    }
}

/// Checks that bytes are one JSON value, without building it.
pub(crate) fn check_syntax(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let text = std::str::from_utf8(bytes).map_err(serde::de::Error::custom)?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).map(|_| ())
}

/// Checks a record's own shape (object, `id`, `name`) and returns its name.
pub(crate) fn check_record(file: &Path, file_id: i64, head: &Head, problems: &mut Vec<Problem>) -> Option<String> {
    if let Some(kind) = head.not_object {
        problems.push(Problem::whole(file, format!("a record must be a JSON object, not {kind}")));
        return None;
    }
    match &head.id {
        None => {
            problems.push(Problem::whole(file, format!("\"id\" is missing: add \"id\": {file_id} (the file name)")));
        }
        Some(id) => {
            match id.as_i64().filter(|_| id.is_i64() || id.is_u64()) {
                Some(id) if id == file_id => {}
                Some(id) => {
                    problems.push(Problem::new(
                    file,
                    "$.id",
                    format!("id {id} does not match the file name: rename the file to {id}.json or set \"id\": {file_id}"),
                ));
                }
                None if is_integer_text(id) => {
                    problems.push(Problem::new(
                        file,
                        "$.id",
                        format!(
                            "id {id} is out of range: ids are integers from {} to {}; write \"id\": {file_id}",
                            i64::MIN,
                            i64::MAX
                        ),
                    ));
                }
                None => {
                    problems.push(Problem::new(
                        file,
                        "$.id",
                        format!("\"id\" must be an integer, not {}: write \"id\": {file_id}", kind_of(id)),
                    ));
                }
            }
        }
    }
    match &head.name {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) if name.len() > config::MAX_NAME_BYTES => {
            problems.push(Problem::new(
                file,
                "$.name",
                format!(
                    "the name is {} bytes long, and a name is a folder name in the tree: at most {} bytes; shorten it",
                    name.len(),
                    config::MAX_NAME_BYTES
                ),
            ));
            None
        }
        Some(Value::String(name)) if config::is_valid_name(name) => Some(name.clone()),
        Some(Value::String(name)) => {
            let why = if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
                "an all-digit name would collide with an id path"
            } else {
                "use lower-case letters, digits and '-' (the name is a url path segment)"
            };
            problems.push(Problem::new(file, "$.name", format!("malformed name {name:?}: {why}")));
            None
        }
        Some(other) => {
            problems.push(Problem::new(file, "$.name", format!("\"name\" must be a string, not {}", kind_of(other))));
            None
        }
    }
}

/// Checks that names are unique within the resource `segment`, except the names `gen.json`
/// declares shared. Returns the ids of records whose name path belongs to another record: a
/// shared name's path serves the lowest id that carries it (`records` is sorted by id).
pub(crate) fn check_unique_names(
    dir: &Path,
    segment: &str,
    records: &[Record],
    config: &DataSettings,
    problems: &mut Vec<Problem>,
) -> HashSet<i64> {
    let mut shadowed = HashSet::new();
    for (record, owner) in same_names(records) {
        let (record, owner) = (&records[record], &records[owner]);
        let name = record.name.as_deref().expect("a record of a name");
        if config.is_shared_name(segment, name) {
            shadowed.insert(record.id);
            continue;
        }
        problems.push(Problem::new(
            &record_place(dir, segment, record),
            "$.name",
            format!(
                "duplicate name {name:?}: {} has it too; names are unique within a resource. If the records \
                 share it on purpose, declare it in {CONFIG_FILE}: \"shared_names\": {{\"{segment}\": [{name:?}]}} \
                 ({API_PREFIX}{segment}/{name}/ then serves the lowest id, {})",
                record_place(dir, segment, owner).display(),
                owner.id
            ),
        ));
    }
    shadowed
}

/// Each record (by position in `records`) whose name a record before it has, with the first
/// of those, in order: found by sorting the names' hashes (in parallel), not by a map of a
/// million names, each looked up at random.
fn same_names(records: &[Record]) -> Vec<(usize, usize)> {
    use rayon::prelude::*;
    let spread = BuildHasherDefault::<Spread>::default();
    let mut named: Vec<(u64, u32)> = records
        .par_iter()
        .enumerate()
        .filter_map(|(at, record)| Some((spread.hash_one(record.name.as_deref()?), at as u32)))
        .collect();
    named.par_sort_unstable();
    let mut same = Vec::new();
    // a run of one hash, by position: mostly one name, a few when names' hashes are the same
    for run in named.chunk_by(|a, b| a.0 == b.0).filter(|run| run.len() > 1) {
        let mut owners: Vec<usize> = Vec::new();
        for &(_, at) in run {
            let at = at as usize;
            match owners.iter().find(|&&owner| records[owner].name == records[at].name) {
                Some(&owner) => same.push((at, owner)),
                None => owners.push(at),
            }
        }
    }
    same.sort_unstable();
    same
}

/// Checks `shared_names` against the data: every declared name is carried by at least two
/// records of a resource the data holds.
pub(crate) fn check_shared_names(config_path: &Path, dataset: &Dataset, problems: &mut Vec<Problem>) {
    for (segment, names) in &dataset.config.shared_names {
        let Some(resource) = dataset.resources.get(segment) else {
            problems.push(Problem::new(
                config_path,
                format!("$.shared_names.{segment}"),
                format!(
                    "{} holds no resource {segment:?}: remove it from \"shared_names\"",
                    crate::fsutil::show_dir(&dataset.dir)
                ),
            ));
            continue;
        };
        for (i, name) in names.iter().enumerate() {
            let carriers = resource.records.iter().filter(|r| r.name.as_deref() == Some(name)).count();
            if carriers < 2 {
                problems.push(Problem::new(
                    config_path,
                    format!("$.shared_names.{segment}[{i}]"),
                    format!(
                        "{name:?} is declared shared but {carriers} record(s) of {segment} carry it: remove it from \"shared_names\""
                    ),
                ));
            }
        }
    }
}

/// Orders `records` as the order file states; every id must appear exactly once.
pub(crate) fn apply_order(file: &Path, order: Value, records: Vec<Record>, problems: &mut Vec<Problem>) -> Vec<Record> {
    let Value::Array(items) = order else {
        problems.push(Problem::whole(file, "an order file is a JSON array of every record id, in list order"));
        return records;
    };
    let before = problems.len();
    let mut slots: HashMap<i64, Option<Record>> = records.into_iter().map(|r| (r.id, Some(r))).collect();
    let mut ordered = Vec::with_capacity(slots.len());
    for (i, item) in items.iter().enumerate() {
        let location = format!("$[{i}]");
        match item.as_i64() {
            None => {
                problems.push(Problem::new(file, location, format!("expected a record id, found {}", kind_of(item))))
            }
            Some(id) => match slots.get_mut(&id) {
                None => problems.push(Problem::new(file, location, format!("id {id} has no record in this folder"))),
                Some(slot) => match slot.take() {
                    Some(record) => ordered.push(record),
                    None => problems.push(Problem::new(file, location, format!("id {id} is listed twice"))),
                },
            },
        }
    }
    let mut missing: Vec<Record> = slots.into_values().flatten().collect();
    missing.sort_by_key(|r| r.id);
    if !missing.is_empty() {
        let ids: Vec<String> = missing.iter().take(10).map(|r| r.id.to_string()).collect();
        problems.push(Problem::whole(
            file,
            format!(
                "{} record(s) missing from the order: {}{}; list every id once",
                missing.len(),
                ids.join(", "),
                if missing.len() > 10 { ", ..." } else { "" }
            ),
        ));
    }
    ordered.extend(missing);
    if problems.len() > before {
        ordered.sort_by_key(|r| r.id);
    }
    ordered
}

/// Where problems of `record` are reported: its file, or its line in its table.
fn record_place(dir: &Path, segment: &str, record: &Record) -> std::path::PathBuf {
    match record.line {
        Some(span) => {
            super::dataset::at_line(&dir.join(super::data_path::DataPath::Table { segment }.file()), span.line, 1)
        }
        None => super::dataset::record_file(dir, segment, record.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The problems `check_record` finds in `text`, as `location: message`, and the name.
    fn check(file_id: i64, text: &str) -> (Vec<String>, Option<String>) {
        let file = Path::new("r.json");
        let head = parse_head(At::File(file), text.as_bytes()).unwrap();
        let mut problems = Vec::new();
        let name = check_record(file, file_id, &head, &mut problems);
        (problems.iter().map(|p| format!("{}: {}", p.location, p.message)).collect(), name)
    }

    #[test]
    fn a_record_is_an_object_with_its_id_and_an_optional_name() {
        assert_eq!(check(1, r#"{"id": 1, "name": "cheri", "x": [1, {"y": 2}]}"#), (vec![], Some("cheri".into())));
        assert_eq!(check(-1, r#"{"id": -1}"#), (vec![], None));
        let (problems, _) = check(1, "[1]");
        assert_eq!(problems, ["$: a record must be a JSON object, not an array"]);
        let (problems, _) = check(7, r#"{"name": "x"}"#);
        assert!(problems[0].starts_with("$: \"id\" is missing: add \"id\": 7"), "{problems:?}");
        let (problems, _) = check(7, r#"{"id": 8}"#);
        assert!(problems[0].starts_with("$.id: id 8 does not match the file name"), "{problems:?}");
        let (problems, _) = check(7, r#"{"id": "7"}"#);
        assert!(problems[0].starts_with("$.id: \"id\" must be an integer, not a string"), "{problems:?}");
        let (problems, name) = check(7, r#"{"id": 7, "name": "Cheri Berry"}"#);
        assert!(problems[0].starts_with("$.name: malformed name"), "{problems:?}");
        assert_eq!(name, None);
    }

    fn record(id: i64) -> Record {
        Record { id, name: None, subdocs: Box::default(), line: None }
    }

    #[test]
    fn an_order_lists_every_id_once() {
        let ids = |records: &[Record]| records.iter().map(|r| r.id).collect::<Vec<_>>();
        let file = Path::new("order.json");
        let mut problems = Vec::new();
        let ordered =
            apply_order(file, serde_json::json!([3, 1, 2]), vec![record(1), record(2), record(3)], &mut problems);
        assert_eq!((ids(&ordered), problems.len()), (vec![3, 1, 2], 0));
        let ordered = apply_order(file, serde_json::json!([3, 3, 9]), vec![record(1), record(3)], &mut problems);
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(messages[0], "id 3 is listed twice");
        assert_eq!(messages[1], "id 9 has no record in this folder");
        assert!(messages[2].starts_with("1 record(s) missing from the order: 1"), "{messages:?}");
        assert_eq!(ids(&ordered), vec![1, 3], "a bad order falls back to id order");
    }

    #[test]
    fn a_name_held_again_names_its_first_holder_unless_shared_in_list_order() {
        let names = [Some("a"), Some("b"), Some("a"), None, Some("c"), Some("b"), Some("a"), None];
        let records: Vec<Record> = (1..)
            .zip(names)
            .map(|(id, name)| Record { id, name: name.map(Box::from), subdocs: Box::default(), line: None })
            .collect();
        let mut config = DataSettings::default();
        config.shared_names.insert("thing".into(), vec!["b".into()]);
        let mut problems = Vec::new();
        let shadowed = check_unique_names(Path::new("data"), "thing", &records, &config, &mut problems);
        assert_eq!(shadowed, HashSet::from([6]), "the second b is shared: its path serves the first");
        let said: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        for (said, (id, first)) in said.iter().zip([(3, 1), (7, 1)]) {
            assert!(
                said.contains(&format!("thing/{id}.json")) && said.contains(&format!("the lowest id, {first})")),
                "{said}"
            );
        }
    }
}
