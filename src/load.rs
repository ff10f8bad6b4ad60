//! Load: `data/` → an in-memory index of resources (ids, names, files), with every problem
//! of the layout and of each record's own shape collected.
//!
//! Records are parsed here to check them and to read `id` and `name`, then dropped: the index
//! holds no record bodies, so memory is bounded by the number of records, not their size.

use crate::config::{self, CONFIG_FILE, SiteConfig};
use crate::fsutil::NotRead;
use crate::problem::Problem;
use rayon::prelude::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// File, inside a resource folder, that states the resource's list order.
pub const ORDER_FILE: &str = "order.json";

/// Deepest nesting accepted in a record (serde_json's own limit, so parsing never overflows
/// the stack).
pub const MAX_DEPTH: usize = 128;

/// The whole data folder, indexed.
#[derive(Debug)]
pub struct Dataset {
    /// The data folder.
    pub dir: PathBuf,
    /// Site settings from `gen.json` (defaults when absent).
    pub config: SiteConfig,
    /// Resources by segment, sorted.
    pub resources: BTreeMap<String, Resource>,
    /// A hash of every file read, for the meta document.
    pub data_hash: String,
}

/// One resource: its records in list order.
#[derive(Debug)]
pub struct Resource {
    pub segment: String,
    /// Records in list order (by id, or as `order.json` states).
    pub records: Vec<Record>,
    /// Position in `records` of each id.
    pub by_id: HashMap<i64, usize>,
    /// Ids of records whose name is shared (declared in `shared_names`) with a lower id, which
    /// owns the name path.
    pub shadowed: HashSet<i64>,
}

/// One record: where it is and how it is reached.
#[derive(Debug)]
pub struct Record {
    pub id: i64,
    pub name: Option<String>,
    pub file: PathBuf,
    /// Sub-documents (`data/<segment>/<id>/<name>.json`), sorted by name.
    pub subdocs: Vec<SubDoc>,
}

/// A document under a record, such as `creature/132/encounters`: any JSON value.
#[derive(Debug)]
pub struct SubDoc {
    pub name: String,
    pub file: PathBuf,
}

impl Resource {
    /// The record with `id`, if any.
    pub fn get(&self, id: i64) -> Option<&Record> {
        self.by_id.get(&id).map(|&i| &self.records[i])
    }

    /// The record's name, when its name path is its own: a shared name's path belongs to the
    /// lowest id that carries it.
    pub fn path_name<'r>(&self, record: &'r Record) -> Option<&'r str> {
        record.name.as_deref().filter(|_| !self.shadowed.contains(&record.id))
    }
}

impl Dataset {
    /// Number of records across all resources.
    pub fn record_count(&self) -> usize {
        self.resources.values().map(|r| r.records.len()).sum()
    }
}

/// What a file in the data folder is, by its place.
enum Entry {
    Record { segment: String, id: i64, file: PathBuf },
    Order { segment: String, file: PathBuf },
    SubDoc { segment: String, id: i64, name: String, file: PathBuf },
}

/// Fails, saying what to do, unless `dir` is a folder: a missing data folder is a mistake in
/// the command, not a problem in the data.
pub fn require_folder(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if dir.exists() {
        anyhow::bail!("{} is not a folder: point --data at the folder that holds your records", dir.display());
    }
    anyhow::bail!(
        "{}: no such folder: point --data at the folder that holds your records (see the README's data format)",
        dir.display()
    )
}

/// Loads and indexes `dir`. Returns the dataset and every problem found; the dataset is only
/// usable when there are no problems.
pub fn load(dir: &Path) -> (Dataset, Vec<Problem>) {
    let (dataset, problems, _) = load_reusing(dir, &|_| None);
    (dataset, problems)
}

/// What an incremental build already knows of a record or sub-document file that has not
/// changed since the previous build: it is not read again.
#[derive(Debug, Clone)]
pub struct Known {
    /// The record's name (`None` for a sub-document or a nameless record).
    pub name: Option<String>,
    pub hash: blake3::Hash,
}

/// Like [`load`], asking `known` about each record and sub-document file first (it is called
/// before the file is read): a file it answers for is not read. Also returns each file's path
/// relative to `dir` with its hash.
pub fn load_reusing(
    dir: &Path,
    known: &(dyn Fn(&Path) -> Option<Known> + Sync),
) -> (Dataset, Vec<Problem>, Vec<(String, blake3::Hash)>) {
    let mut problems = Vec::new();
    let mut dataset = Dataset {
        dir: dir.to_path_buf(),
        config: SiteConfig::default(),
        resources: BTreeMap::new(),
        data_hash: String::new(),
    };
    if !dir.is_dir() {
        let message = if dir.exists() {
            "is not a folder: point --data at the folder that holds your records".to_string()
        } else {
            "no such folder: point --data at the folder that holds your records (see the README's data format)"
                .to_string()
        };
        problems.push(Problem::new(dir, "-", message));
        return (dataset, problems, Vec::new());
    }

    let mut file_hashes: Vec<(String, blake3::Hash)> = Vec::new();
    let config_path = dir.join(CONFIG_FILE);
    if config_path.exists() {
        match read_settings(&config_path) {
            Ok((config, hash)) => {
                file_hashes.push((CONFIG_FILE.to_string(), hash));
                dataset.config = config;
            }
            Err(found) => problems.extend(found),
        }
    }
    check_config(&config_path, &dataset.config, &mut problems);

    let entries = walk(dir, &mut problems);

    // Parse every record and sub-document in parallel; keep only what the index needs.
    let limit = dataset.config.max_document_mb.saturating_mul(1 << 20);
    let loaded: Vec<Loaded> =
        entries.into_par_iter().map(|entry| reuse(&entry, known).unwrap_or_else(|| load_entry(entry, limit))).collect();

    let mut records: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    let mut orders: BTreeMap<String, (PathBuf, Value)> = BTreeMap::new();
    let mut subdocs: Vec<(String, i64, SubDoc)> = Vec::new();
    for item in loaded {
        match item {
            Loaded::Failed(problem) => problems.push(problem),
            Loaded::Record { segment, record, hash, problems: found } => {
                file_hashes.push((relative(dir, &record.file), hash));
                if found.is_empty() {
                    records.entry(segment).or_default().push(record);
                }
                problems.extend(found);
            }
            Loaded::Order { segment, file, value, hash } => {
                file_hashes.push((relative(dir, &file), hash));
                orders.insert(segment, (file, value));
            }
            Loaded::SubDoc { segment, id, subdoc, hash } => {
                file_hashes.push((relative(dir, &subdoc.file), hash));
                subdocs.push((segment, id, subdoc));
            }
        }
    }

    for (segment, mut list) in records {
        list.sort_by_key(|r| r.id);
        let shadowed = check_unique_names(&segment, &list, &dataset.config, &mut problems);
        if let Some((file, order)) = orders.remove(&segment) {
            list = apply_order(&file, order, list, &mut problems);
        }
        let by_id = list.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
        dataset.resources.insert(segment.clone(), Resource { segment, records: list, by_id, shadowed });
    }
    check_shared_names(&config_path, &dataset, &mut problems);
    for (_, (file, _)) in orders {
        problems.push(Problem::whole(&file, "an order file in a folder without records: remove it or add records"));
    }
    subdocs.sort_by(|a, b| (&a.0, a.1, &a.2.name).cmp(&(&b.0, b.1, &b.2.name)));
    for (segment, id, subdoc) in subdocs {
        match dataset.resources.get_mut(&segment).and_then(|r| r.by_id.get(&id).copied().map(|i| (r, i))) {
            Some((resource, i)) => resource.records[i].subdocs.push(subdoc),
            None => problems.push(Problem::whole(
                &subdoc.file,
                format!(
                    "sub-document of {segment} {id}, which has no record: add {segment}/{id}.json or remove the folder"
                ),
            )),
        }
    }
    for external in &dataset.config.external {
        if dataset.resources.contains_key(external) {
            problems.push(Problem::new(
                &config_path,
                "$.external",
                format!("{external:?} is declared external but data/ holds it: remove it from \"external\""),
            ));
        }
    }

    if dataset.resources.is_empty() && problems.is_empty() {
        problems.push(Problem::new(
            dir,
            "-",
            "no records: add one folder per resource holding <id>.json records, e.g. berry/1.json \
             (see the README's data format)",
        ));
    }
    file_hashes.sort_by(|a, b| a.0.cmp(&b.0));
    dataset.data_hash = combine_hashes(&file_hashes);
    problems.sort();
    (dataset, problems, file_hashes)
}

/// What `known` says of an entry, as loading it would give (order files are always read).
fn reuse(entry: &Entry, known: &(dyn Fn(&Path) -> Option<Known> + Sync)) -> Option<Loaded> {
    match entry {
        Entry::Record { segment, id, file } => known(file).map(|k| Loaded::Record {
            segment: segment.clone(),
            record: Record { id: *id, name: k.name, file: file.clone(), subdocs: Vec::new() },
            hash: k.hash,
            problems: Vec::new(),
        }),
        Entry::SubDoc { segment, id, name, file } => known(file).map(|k| Loaded::SubDoc {
            segment: segment.clone(),
            id: *id,
            subdoc: SubDoc { name: name.clone(), file: file.clone() },
            hash: k.hash,
        }),
        Entry::Order { file, .. } => {
            known(file);
            None
        }
    }
}

fn check_config(path: &Path, config: &SiteConfig, problems: &mut Vec<Problem>) {
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
        }
    }
}

/// Combines the hashes of a data folder's files (path relative to the folder, content hash)
/// into one hash of the data.
fn combine_hashes(file_hashes: &[(String, blake3::Hash)]) -> String {
    let mut hasher = blake3::Hasher::new();
    for (path, hash) in file_hashes {
        hasher.update(path.as_bytes());
        hasher.update(b"\0");
        hasher.update(hash.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// Walks the data folder and classifies every file by its place; anything else is a problem.
fn walk(dir: &Path, problems: &mut Vec<Problem>) -> Vec<Entry> {
    let mut entries = Vec::new();
    let walker =
        walkdir::WalkDir::new(dir).min_depth(1).max_depth(3).follow_links(true).sort_by_file_name().into_iter();
    for item in walker {
        let item = match item {
            Ok(item) => item,
            Err(e) => {
                let path = e.path().unwrap_or(dir).to_path_buf();
                problems.push(Problem::new(&path, "-", format!("cannot read: {}", io_message(&e))));
                continue;
            }
        };
        let path = item.path().to_path_buf();
        let file_name = item.file_name().to_string_lossy().to_string();
        let is_dir = item.file_type().is_dir();
        let parts: Vec<String> = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        match (parts.len(), is_dir) {
            (1, true) if !config::is_valid_segment(&file_name) => problems.push(Problem::new(
                &path,
                "-",
                "folder name is not a valid segment: use lower-case letters, digits and '-' (it is the path segment in /api/v2/<segment>/)",
            )),
            (1, true) => {}
            (1, false) if file_name == CONFIG_FILE => {}
            (1, false) => problems.push(Problem::new(
                &path,
                "-",
                format!("stray file: data/ holds only {CONFIG_FILE} and one folder per resource"),
            )),
            _ if !config::is_valid_segment(&parts[0]) => {} // reported above
            (2, false) if file_name == ORDER_FILE => {
                entries.push(Entry::Order { segment: parts[0].clone(), file: path });
            }
            (2, false) => match file_name.strip_suffix(".json").and_then(parse_id) {
                Some(id) => entries.push(Entry::Record { segment: parts[0].clone(), id, file: path }),
                None => problems.push(Problem::new(
                    &path,
                    "-",
                    format!("stray file: a resource folder holds <id>.json records (e.g. 1.json, -1.json) and an optional {ORDER_FILE}"),
                )),
            },
            (2, true) if parse_id(&file_name).is_some() => {}
            (2, true) => problems.push(Problem::new(
                &path,
                "-",
                "stray folder: a folder inside a resource holds a record's sub-documents and is named by the record's id",
            )),
            (3, false) => {
                let id = parse_id(&parts[1]);
                match (id, file_name.strip_suffix(".json").filter(|n| config::is_valid_name(n))) {
                    (Some(id), Some(name)) => entries.push(Entry::SubDoc {
                        segment: parts[0].clone(),
                        id,
                        name: name.to_string(),
                        file: path,
                    }),
                    (Some(_), None) => problems.push(Problem::new(
                        &path,
                        "-",
                        "stray file: a sub-document is <name>.json, the name made of lower-case letters, digits and '-'",
                    )),
                    (None, _) => {} // its folder is reported
                }
            }
            (3, true) if parse_id(&parts[1]).is_some() => problems.push(Problem::new(
                &path,
                "-",
                "stray folder: sub-documents are files, <segment>/<id>/<name>.json",
            )),
            _ => {}
        }
    }
    entries
}

/// Parses a record id as written in a file name: the integer's canonical decimal form.
pub fn parse_id(text: &str) -> Option<i64> {
    let id: i64 = text.parse().ok()?;
    (id.to_string() == text).then_some(id)
}

/// Reads and parses a JSON file, reporting invalid UTF-8 and invalid JSON with line and column.
pub fn read_json(path: &Path) -> Result<(Value, blake3::Hash), Problem> {
    let bytes = read_data_file(path)?;
    let hash = blake3::hash(&bytes);
    let value = parse_json(path, &bytes)?;
    Ok((value, hash))
}

/// Reads `gen.json`: a JSON object of settings (an empty file or another kind of value is
/// reported as such, not as a bad record).
fn read_settings(path: &Path) -> Result<(SiteConfig, blake3::Hash), Vec<Problem>> {
    let bytes = read_data_file(path).map_err(|p| vec![p])?;
    let hash = blake3::hash(&bytes);
    let example = "e.g. {\"base_url\": \"https://api.example.org\"}, or {} for the defaults";
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(vec![Problem::whole(
            path,
            format!("empty file: {CONFIG_FILE} holds the settings as a JSON object, {example}"),
        )]);
    }
    let value = parse_json(path, &bytes).map_err(|p| vec![p])?;
    if !value.is_object() {
        let kind = match value {
            Value::Array(_) => "an array",
            Value::String(_) => "a string",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Err(vec![Problem::whole(
            path,
            format!("the settings are {kind}, not a JSON object: write them as an object, {example}"),
        )]);
    }
    let config = config::parse(value)
        .map_err(|wrong| wrong.into_iter().map(|(at, message)| Problem::new(path, at, message)).collect::<Vec<_>>())?;
    Ok((config, hash))
}

/// Reads a settings or source file: a regular file of at most the default document size limit
/// (see [`crate::fsutil::read_regular_file`]).
pub fn read_data_file(path: &Path) -> Result<Vec<u8>, Problem> {
    let limit = config::DEFAULT_MAX_DOCUMENT_MB << 20;
    crate::fsutil::read_regular_file(path, limit).map_err(|e| match e {
        NotRead::TooLarge(_) => Problem::whole(path, format!("larger than {} MB: not a file gen reads", limit >> 20)),
        NotRead::Io(e) => Problem::new(path, "-", format!("cannot read: {e}")),
        refused => Problem::whole(path, refused.to_string()),
    })
}

/// Parses JSON bytes, reporting problems with line and column.
pub fn parse_json(path: &Path, bytes: &[u8]) -> Result<Value, Problem> {
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
    serde_json::from_slice(bytes).map_err(|e| {
        let message = e.to_string();
        let message = message.split(" at line ").next().unwrap_or(&message);
        let (mut line, mut column) = (e.line(), e.column());
        let message = if message.contains("recursion limit") {
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
    })
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

/// What loading one file of the data folder gave.
enum Loaded {
    Record { segment: String, record: Record, hash: blake3::Hash, problems: Vec<Problem> },
    Order { segment: String, file: PathBuf, value: Value, hash: blake3::Hash },
    SubDoc { segment: String, id: i64, subdoc: SubDoc, hash: blake3::Hash },
    Failed(Problem),
}

fn load_entry(entry: Entry, limit: u64) -> Loaded {
    let file = match &entry {
        Entry::Record { file, .. } | Entry::Order { file, .. } | Entry::SubDoc { file, .. } => file,
    };
    let bytes = match crate::fsutil::read_regular_file(file, limit) {
        Ok(bytes) => bytes,
        Err(NotRead::TooLarge(bytes)) => {
            return Loaded::Failed(Problem::whole(
                file,
                format!(
                    "{:.1} MB, larger than the {} MB limit: split the document, or raise \"max_document_mb\" in {CONFIG_FILE}",
                    bytes as f64 / (1 << 20) as f64,
                    limit >> 20
                ),
            ));
        }
        Err(NotRead::Io(e)) => return Loaded::Failed(Problem::new(file, "-", format!("cannot read: {e}"))),
        Err(refused) => return Loaded::Failed(Problem::whole(file, refused.to_string())),
    };
    let hash = blake3::hash(&bytes);
    match entry {
        Entry::Record { segment, id, file } => match parse_head(&file, &bytes) {
            Err(problem) => Loaded::Failed(problem),
            Ok(head) => {
                let mut problems = Vec::new();
                let name = check_record(&file, id, &head, &mut problems);
                Loaded::Record { segment, record: Record { id, name, file, subdocs: Vec::new() }, hash, problems }
            }
        },
        Entry::Order { segment, file } => match parse_json(&file, &bytes) {
            Ok(value) => Loaded::Order { segment, file, value, hash },
            Err(problem) => Loaded::Failed(problem),
        },
        Entry::SubDoc { segment, id, name, file } => {
            let checked = check_syntax(&bytes).map_err(|_| parse_json(&file, &bytes).err());
            match checked {
                Ok(()) => Loaded::SubDoc { segment, id, subdoc: SubDoc { name, file }, hash },
                Err(problem) => Loaded::Failed(problem.unwrap_or_else(|| Problem::whole(&file, "invalid JSON"))),
            }
        }
    }
}

/// The top of a record: its kind, `id` and `name`. Everything else is checked for syntax and
/// skipped without being built in memory, which makes loading several times faster than
/// parsing whole records.
#[derive(Debug, Default)]
struct Head {
    /// The kind of the top-level value, when it is not an object.
    not_object: Option<&'static str>,
    id: Option<Value>,
    name: Option<Value>,
}

impl<'de> serde::Deserialize<'de> for Head {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Head, D::Error> {
        deserializer.deserialize_any(HeadVisitor)
    }
}

struct HeadVisitor;

impl<'de> serde::de::Visitor<'de> for HeadVisitor {
    type Value = Head;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let mut head = Head::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
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

/// Parses the head of a record; on a syntax error, reports it as [`parse_json`] does.
fn parse_head(path: &Path, bytes: &[u8]) -> Result<Head, Problem> {
    let parsed = std::str::from_utf8(bytes).map_err(serde::de::Error::custom).and_then(serde_json::from_str::<Head>);
    match parsed {
        Ok(head) => Ok(head),
        // The slow path gives the precise message (UTF-8, nesting, line and column).
        Err(e) => Err(parse_json(path, bytes)
            .err()
            .unwrap_or_else(|| Problem::new(path, format!("line {}, column {}", e.line(), e.column()), e.to_string()))),
    }
}

/// Checks that bytes are one JSON value, without building it.
fn check_syntax(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let text = std::str::from_utf8(bytes).map_err(serde::de::Error::custom)?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).map(|_| ())
}

/// Checks a record's own shape (object, `id`, `name`) and returns its name.
fn check_record(file: &Path, file_id: i64, head: &Head, problems: &mut Vec<Problem>) -> Option<String> {
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
fn check_unique_names(
    segment: &str,
    records: &[Record],
    config: &SiteConfig,
    problems: &mut Vec<Problem>,
) -> HashSet<i64> {
    let mut first: HashMap<&str, &Record> = HashMap::new();
    let mut shadowed = HashSet::new();
    for record in records {
        let Some(name) = &record.name else { continue };
        let Some(&owner) = first.get(name.as_str()) else {
            first.insert(name, record);
            continue;
        };
        if config.is_shared_name(segment, name) {
            shadowed.insert(record.id);
            continue;
        }
        problems.push(Problem::new(
            &record.file,
            "$.name",
            format!(
                "duplicate name {name:?}: {} has it too; names are unique within a resource. If the records \
                 share it on purpose, declare it in {CONFIG_FILE}: \"shared_names\": {{\"{segment}\": [{name:?}]}} \
                 (/api/v2/{segment}/{name}/ then serves the lowest id, {})",
                owner.file.display(),
                owner.id
            ),
        ));
    }
    shadowed
}

/// Checks `shared_names` against the data: every declared name is carried by at least two
/// records of a resource the data holds.
fn check_shared_names(config_path: &Path, dataset: &Dataset, problems: &mut Vec<Problem>) {
    for (segment, names) in &dataset.config.shared_names {
        let Some(resource) = dataset.resources.get(segment) else {
            problems.push(Problem::new(
                config_path,
                format!("$.shared_names.{segment}"),
                format!("data/ holds no resource {segment:?}: remove it from \"shared_names\""),
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
fn apply_order(file: &Path, order: Value, records: Vec<Record>, problems: &mut Vec<Problem>) -> Vec<Record> {
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

/// True when `value` is a number written as an integer (digits, an optional `-`), whatever its size.
fn is_integer_text(value: &Value) -> bool {
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

fn relative(dir: &Path, file: &Path) -> String {
    file.strip_prefix(dir).unwrap_or(file).to_string_lossy().replace('\\', "/")
}

fn io_message(e: &walkdir::Error) -> String {
    if e.loop_ancestor().is_some() {
        return "symbolic link loop".to_string();
    }
    e.io_error().map(|e| e.to_string()).unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> Problem {
        parse_json(Path::new("x.json"), text.as_bytes()).unwrap_err()
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

    #[test]
    fn ids_are_canonical_integers() {
        assert_eq!(parse_id("-1"), Some(-1));
        assert_eq!(parse_id("0"), Some(0));
        for bad in ["01", "+1", "-0", "1.0", "", "9223372036854775808"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }
}
