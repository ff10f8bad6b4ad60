//! The dataset: what `load` makes of the data folder (resources, their records in list order,
//! ids and names, the files they come from) and what every later stage reads.

use super::data_path::DataPath;
use crate::config::DataSettings;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The whole data folder, indexed.
#[derive(Debug)]
pub struct Dataset {
    /// The data folder.
    pub dir: PathBuf,
    /// Site settings from `gen.json` (defaults when absent).
    pub config: DataSettings,
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

/// One record: how it is reached. Its file is `<data>/<segment>/<id>.json` (see
/// [`Dataset::record_file`]): derived, not held, as a million records would need a hundred MB
/// of paths.
#[derive(Debug)]
pub struct Record {
    pub id: i64,
    pub name: Option<String>,
    /// Sub-documents (`data/<segment>/<id>/<name>.json`), sorted by name.
    pub subdocs: Vec<SubDoc>,
}

/// A document under a record, such as `creature/132/encounters`: any JSON value.
#[derive(Debug)]
pub struct SubDoc {
    pub name: String,
}

/// The file of the record `id` of `segment` in the data folder `dir`.
pub fn record_file(dir: &Path, segment: &str, id: i64) -> PathBuf {
    dir.join(DataPath::Record { segment, id }.file())
}

/// The file of the sub-document `name` of the record `id` of `segment` in the data folder `dir`.
pub fn subdoc_file(dir: &Path, segment: &str, id: i64, name: &str) -> PathBuf {
    dir.join(DataPath::SubDoc { segment, id, name }.file())
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
    /// The file of the record `id` of `segment`.
    pub fn record_file(&self, segment: &str, id: i64) -> PathBuf {
        record_file(&self.dir, segment, id)
    }

    /// The file of the sub-document `name` of the record `id` of `segment`.
    pub fn subdoc_file(&self, segment: &str, id: i64, name: &str) -> PathBuf {
        subdoc_file(&self.dir, segment, id, name)
    }

    /// Number of records across all resources.
    pub fn record_count(&self) -> usize {
        self.resources.values().map(|r| r.records.len()).sum()
    }
}
