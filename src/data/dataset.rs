//! The dataset: what `load` makes of the data folder (resources, their records in list order,
//! ids and names, the files they come from) and what every later stage reads.

use super::data_path::DataPath;
use super::second_read::{Expected, LoadedHashes};
use crate::config::DataSettings;
use crate::fsutil::{NotRead, Stamp};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The whole data folder, indexed.
#[derive(Debug)]
pub struct Dataset {
    /// The data folder.
    pub(crate) dir: PathBuf,
    /// Site settings from `gen.json` (defaults when absent).
    pub(crate) config: DataSettings,
    /// Resources by segment, sorted.
    pub resources: BTreeMap<String, Resource>,
    /// A hash of every file read, for the meta document.
    pub(crate) data_hash: String,
    /// The tables, opened once: each record is read from its line (not one open a record).
    pub(crate) tables: HashMap<PathBuf, Arc<std::fs::File>>,
    /// The hashes the load recorded of each record's and sub-document's data, once the build
    /// holds later reads to them ([`Dataset::expect_loaded`]).
    pub(crate) loaded_hashes: std::sync::OnceLock<LoadedHashes>,
}

/// One resource: its records in list order.
#[derive(Debug)]
pub struct Resource {
    /// Records in list order (by id, or as `order.json` states).
    pub records: Vec<Record>,
    /// Position in `records` of each id.
    pub(crate) by_id: ById,
    /// Ids of records whose name is shared (declared in `shared_names`) with a lower id, which
    /// owns the name path.
    pub(crate) shadowed: HashSet<i64>,
}

/// One record: how it is reached. Its file is `<data>/<segment>/<id>.json` (see
/// [`Dataset::record_file`]): derived, not held, as a million records would need a hundred MB
/// of paths.
#[derive(Debug)]
pub struct Record {
    /// Its id.
    pub id: i64,
    /// Its name, when it has one (boxed: no room held past its length, 8 bytes less than a
    /// `String` a record).
    pub(crate) name: Option<Box<str>>,
    /// Sub-documents (`data/<segment>/<id>/<name>.json`), sorted by name.
    pub(crate) subdocs: Box<[SubDoc]>,
    /// Its line, when its resource is a table (`data/<segment>.ndjson`).
    pub(crate) line: Option<Span>,
}

/// Where a line of a table is: its byte offset and length (without the newline), and its
/// number (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the line in its table.
    pub(crate) offset: u64,
    /// Length of the line in bytes, without the newline.
    pub(crate) len: u32,
    /// Line number, from 1.
    pub(crate) line: u32,
}

/// A document under a record, such as `creature/132/encounters`: any JSON value.
#[derive(Debug)]
pub(crate) struct SubDoc {
    /// Its name, e.g. `encounters` (shared by every sub-document of a table: one allocation,
    /// not one a line).
    pub(crate) name: std::sync::Arc<str>,
    /// Its line, when it is held in a table (`data/<segment>.<name>.ndjson`).
    pub(crate) line: Option<Span>,
}

/// Sub-documents by their record's segment, with their record's id (a segment's vector, not a
/// copy of the segment's name a sub-document).
pub(crate) type SubDocs = std::collections::BTreeMap<String, Vec<(i64, SubDoc)>>;

/// Adds the sub-documents `items` to `into` (their order does not matter: they are sorted
/// when attached), moving the larger vector rather than copying it.
pub(crate) fn add_subdocs(into: &mut Vec<(i64, SubDoc)>, mut items: Vec<(i64, SubDoc)>) {
    if into.len() < items.len() {
        std::mem::swap(into, &mut items);
    }
    into.append(&mut items);
}

/// Where the JSON of a record or sub-document is: its own file, or a line of a table (for a
/// sub-document, the line's `document`); and how reading it again is held to the load's read
/// (see [`Source::read`]).
#[derive(Debug, Clone)]
pub enum Source {
    /// Its own JSON file.
    File {
        /// The file.
        file: PathBuf,
        /// What its bytes are to be, as the load read them.
        expected: Expected,
    },
    /// A line of a table.
    Line {
        /// The table file.
        table: PathBuf,
        /// The table opened once for all its lines' reads; `None`: opened for this read.
        file: Option<Arc<std::fs::File>>,
        /// Where the line is.
        span: Span,
        /// True when the JSON is the line's `document` (a sub-document table).
        document: bool,
        /// What the line's bytes are to be, as the load read them.
        expected: Expected,
    },
}

impl Source {
    /// The source's JSON bytes, read again as the load read them (see the module's comment),
    /// and checked against the hash it recorded; else the problem, at
    /// [`Source::problem_path`].
    pub(crate) fn read(&self) -> Result<Vec<u8>, crate::problem::Problem> {
        match self {
            Source::File { file, expected } => {
                let bytes = crate::fsutil::read_regular_file(file, expected.limit)
                    .map_err(|why| super::second_read::not_read(file, expected.limit, why))?;
                super::second_read::check(file, &bytes, *expected)?;
                Ok(bytes)
            }
            Source::Line { .. } => self.read_line(),
        }
    }

    /// The JSON bytes of a table's line, read again (for a sub-document table, the line's
    /// `document` as written, at the line's columns), checked as [`Source::read`] says.
    pub(crate) fn read_line(&self) -> Result<Vec<u8>, crate::problem::Problem> {
        let Source::Line { table, file, span, document, expected } = self else { return self.read() };
        let at = self.problem_path();
        let mut bytes = read_span(table, file.as_deref(), *span, expected.limit)
            .map_err(|why| super::second_read::not_read(&at, expected.limit, why))?;
        super::second_read::check(&at, &bytes, *expected)?;
        if *document && !crate::data::table::subdoc_line::blank_around_document(&mut bytes) {
            return Err(super::second_read::changed(&at, " (the line holds no \"document\")"));
        }
        Ok(bytes)
    }

    /// The bytes [`Source::read`] reads, as far as known before reading (0 for a file that
    /// cannot be stat-ed: its read fails): what the parse budget holds for it.
    pub(crate) fn size(&self) -> usize {
        match self {
            Source::File { file, .. } => std::fs::metadata(file).map_or(0, |m| m.len() as usize),
            Source::Line { span, .. } => span.len as usize,
        }
    }

    /// The path problems of this source are reported at: the file, or `<table>:LINE:1`.
    pub(crate) fn problem_path(&self) -> PathBuf {
        match self {
            Source::File { file, .. } => file.clone(),
            Source::Line { table, span, .. } => at_line(table, span.line, 1),
        }
    }

    /// Where the bytes [`Source::read`] reads are, for the one reader of the data: a file, or a
    /// table's line (a sub-document's at the line's columns).
    pub(crate) fn at(&self) -> crate::json::At<'_> {
        match self {
            Source::File { file, .. } => crate::json::At::File(file),
            Source::Line { table, span, .. } => crate::json::At::Line(table, span.line),
        }
    }
}

/// The `span.len` bytes at `span.offset` of the table `table` (`file`: opened already), as the
/// load reads a data file: a regular file only, not waiting on a pipe, at most `limit` bytes.
fn read_span(table: &Path, file: Option<&std::fs::File>, span: Span, limit: u64) -> Result<Vec<u8>, NotRead> {
    use std::os::unix::fs::FileExt;
    if u64::from(span.len) > limit {
        return Err(NotRead::TooLarge(span.len.into()));
    }
    let opened;
    let file = match file {
        Some(file) => file,
        None => {
            // the table may be larger than a document: each line is bounded, not the file
            opened = crate::fsutil::open_table(table)?.0;
            &opened
        }
    };
    let mut bytes = vec![0; span.len as usize];
    file.read_exact_at(&mut bytes, span.offset).map_err(NotRead::Io)?;
    Ok(bytes)
}

/// `<file>:LINE:COLUMN`, where problems of a table's line are reported.
pub(crate) fn at_line(file: &Path, line: u32, column: u64) -> PathBuf {
    let mut path = file.as_os_str().to_owned();
    path.push(format!(":{line}:{column}"));
    PathBuf::from(path)
}

/// The file of the record `id` of `segment` in the data folder `dir`.
pub(crate) fn record_file(dir: &Path, segment: &str, id: i64) -> PathBuf {
    dir.join(DataPath::Record { segment, id }.file())
}

/// The file of the sub-document `name` of the record `id` of `segment` in the data folder `dir`.
pub(crate) fn subdoc_file(dir: &Path, segment: &str, id: i64, name: &str) -> PathBuf {
    dir.join(DataPath::SubDoc { segment, id, name }.file())
}

impl Resource {
    /// The record with `id`, if any.
    pub(crate) fn get(&self, id: i64) -> Option<&Record> {
        self.by_id.get(&self.records, id).map(|i| &self.records[i])
    }

    /// The record's name, when its name path is its own: a shared name's path belongs to the
    /// lowest id that carries it.
    pub(crate) fn path_name<'r>(&self, record: &'r Record) -> Option<&'r str> {
        record.name.as_deref().filter(|_| !self.shadowed.contains(&record.id))
    }
}

impl Dataset {
    /// The file of the record `id` of `segment`.
    pub fn record_file(&self, segment: &str, id: i64) -> PathBuf {
        record_file(&self.dir, segment, id)
    }

    /// The file of the sub-document `name` of the record `id` of `segment`.
    pub(crate) fn subdoc_file(&self, segment: &str, id: i64, name: &str) -> PathBuf {
        subdoc_file(&self.dir, segment, id, name)
    }

    /// Where the JSON of `record` of `segment` is.
    pub fn record_source(&self, segment: &str, record: &Record) -> Source {
        let hash = self.loaded_hashes.get().and_then(|hashes| hashes.record(segment, self.position(segment, record)?));
        let expected = Expected { limit: self.limit(), hash };
        match record.line {
            Some(span) => self.line(self.dir.join(DataPath::Table { segment }.file()), span, false, expected),
            None => Source::File { file: self.record_file(segment, record.id), expected },
        }
    }

    /// Where the JSON of the sub-document `subdoc` of the record `id` of `segment` is.
    pub(crate) fn subdoc_source(&self, segment: &str, id: i64, subdoc: &SubDoc) -> Source {
        let name = &*subdoc.name;
        let hash = self.loaded_hashes.get().and_then(|hashes| {
            let resource = self.resources.get(segment)?;
            let position = resource.by_id.get(&resource.records, id)?;
            let nth = resource.records[position].subdocs.iter().position(|s| *s.name == *name)?;
            hashes.subdoc(segment, position, nth)
        });
        let expected = Expected { limit: self.limit(), hash };
        match subdoc.line {
            Some(span) => {
                self.line(self.dir.join(DataPath::SubDocTable { segment, name }.file()), span, true, expected)
            }
            None => Source::File { file: self.subdoc_file(segment, id, name), expected },
        }
    }

    fn line(&self, table: PathBuf, span: Span, document: bool, expected: Expected) -> Source {
        Source::Line { file: self.tables.get(&table).cloned(), table, span, document, expected }
    }

    /// The position of `record` in the list of `segment`.
    fn position(&self, segment: &str, record: &Record) -> Option<usize> {
        let resource = self.resources.get(segment)?;
        resource.by_id.get(&resource.records, record.id)
    }

    /// The most bytes a document is read of (`max_document_mb`).
    pub(crate) fn limit(&self) -> u64 {
        self.config.max_document_mb.saturating_mul(1 << 20)
    }

    /// Holds every later read of a record or sub-document to the hash the load recorded of it
    /// (`cursor(segment)` looks up `(sub-document, id)` in the load's data table, fastest in
    /// the order of ids): a read that finds other bytes is a problem (see [`Source::read`]).
    /// Made once the previous build's data table is let go, so that it never adds to the
    /// load's peak. Once a dataset: later calls change nothing.
    pub(crate) fn expect_loaded<C>(&self, cursor: impl Fn(&str) -> C + Sync)
    where
        C: FnMut(Option<&str>, i64) -> Option<[u8; 32]>,
    {
        use super::second_read::{ResourceHashes, short};
        use rayon::prelude::*;
        let resources = self
            .resources
            .iter()
            .map(|(segment, resource)| {
                // records in blocks, each looked up in order by a cursor of its own
                let records = resource
                    .records
                    .par_chunks(1 << 14)
                    .map(|block| {
                        let mut hash = cursor(segment);
                        block.iter().map(|r| hash(None, r.id).map(|hash| short(&hash))).collect::<Vec<_>>()
                    })
                    .flatten_iter()
                    .collect();
                let mut hashes = ResourceHashes { records, ..ResourceHashes::default() };
                if resource.records.iter().any(|r| !r.subdocs.is_empty()) {
                    let mut hash = cursor(segment);
                    hashes.first.reserve_exact(resource.records.len());
                    for record in &resource.records {
                        hashes.first.push(hashes.subdocs.len() as u32);
                        let subdocs = record.subdocs.iter().map(|s| hash(Some(&*s.name), record.id).map(|h| short(&h)));
                        hashes.subdocs.extend(subdocs);
                    }
                    hashes.subdocs.shrink_to_fit();
                }
                (segment.clone(), hashes)
            })
            .collect();
        let _ = self.loaded_hashes.set(LoadedHashes { resources });
    }

    /// Number of records across all resources.
    pub fn record_count(&self) -> usize {
        self.resources.values().map(|r| r.records.len()).sum()
    }
}

/// What the caller of `load::load_reusing` saw of a file before it is read: its stamp, and what it
/// already knows of it when it has not changed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    /// Its stamp, when the file could be stat'ed.
    pub(crate) stamp: Option<Stamp>,
    /// What is known of it from the previous build, when it has not changed.
    pub(crate) known: Option<Known>,
}

/// What an incremental build already knows of a record or sub-document file that has not
/// changed since the previous build: it is not read again.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    /// The record's name (`None` for a sub-document or a nameless record).
    pub(crate) name: Option<String>,
    /// BLAKE3 of its bytes.
    pub(crate) hash: blake3::Hash,
}

/// Where each id of a resource is in its records: nothing held when they are in id order
/// (most are: records listed by id, a table written in id order), the records themselves
/// searched; else each id with its position, by id (12 bytes a record, not a hash map's 17).
#[derive(Debug, Default)]
pub(crate) struct ById(Vec<(i64, u32)>);

impl ById {
    /// Where each record of `records` (in list order, ids unique) is.
    pub(crate) fn new(records: &[Record]) -> ById {
        if records.windows(2).all(|pair| pair[0].id < pair[1].id) {
            return ById(Vec::new());
        }
        let mut ids: Vec<(i64, u32)> = records.iter().enumerate().map(|(at, r)| (r.id, at as u32)).collect();
        ids.sort_unstable();
        ById(ids)
    }

    /// The position in `records` (those it was made of) of the record with `id`.
    pub(crate) fn get(&self, records: &[Record], id: i64) -> Option<usize> {
        if self.0.is_empty() {
            return records.binary_search_by_key(&id, |r| r.id).ok();
        }
        let at = self.0.binary_search_by_key(&id, |&(id, _)| id).ok()?;
        Some(self.0[at].1 as usize)
    }
}

/// A hasher for the keys a build looks up a few times each (ids, the first bytes of a hash,
/// names): each 8 bytes of the key times an odd constant, which spreads consecutive ids over
/// the table, instead of SipHash, which costs more than the lookups it serves.
#[derive(Default)]
pub(crate) struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        // A product's low bits depend only on its factors' low bits: the high ones, well mixed,
        // are turned down to where the table takes its slot from.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::Spread;
    use std::collections::HashSet;
    use std::hash::{BuildHasher, BuildHasherDefault};

    /// A hash table takes a key's slot from the low bits of its hash: keys alike but for a few
    /// bytes (ids in a row, names that differ after their eighth byte) must not share them.
    #[test]
    fn keys_alike_spread_over_the_low_bits() {
        let spread = BuildHasherDefault::<Spread>::default();
        let slots = |hashes: Vec<u64>| hashes.into_iter().map(|h| h & 0xffff).collect::<HashSet<_>>().len();
        let names = (0..10_000).map(|i| spread.hash_one(format!("creature-{i}").as_str())).collect();
        let ids = (0..10_000i64).map(|i| spread.hash_one(i * 1000)).collect();
        for (what, hashes) in [("names", names), ("ids", ids)] {
            let used = slots(hashes);
            assert!(used > 8_000, "{what}: 10,000 keys in {used} of 65,536 slots");
        }
    }
}
