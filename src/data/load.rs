//! Load: `data/` → an in-memory index of resources (ids, names, files), with every problem
//! of the layout and of each record's own shape collected.
//!
//! Records are parsed here to check them and to read `id` and `name`, then dropped: the index
//! holds no record bodies, so memory is bounded by the number of records, not their size.

use super::assemble::{attach_subdocs, check_external, index_resources};
use super::data_path::DataPath;
pub(crate) use super::dataset::SubDocs;
pub(crate) use super::dataset::{Dataset, Known, Record, Seen, Source, SubDoc};
use super::listing::{Block, FileStat, Listed, SeeFile};
use super::recorded::{DataFile, DataFiles, Hash, Place};
use super::settings::read_settings;
use super::table::load_tables;
use super::validate::{check_config, check_record, check_syntax, parse_head};
use super::walk::{Entry, Tables, walk};
use crate::config::{CONFIG_FILE, DataSettings};
use crate::fsutil::{self, NotRead, Stamp};
use crate::json::parse_json;
use crate::problem::Problem;
use rayon::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Fails, saying what to do, unless `dir` is a folder: a missing data folder is a mistake in
/// the command, not a problem in the data.
pub(crate) fn require_folder(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if dir.exists() {
        anyhow::bail!("{} is not a folder: point --data at the folder that holds your records", dir.display());
    }
    anyhow::bail!(
        "{}: no such folder: point --data at the folder that holds your records (the format: docs/data.md)",
        dir.display()
    )
}

/// Loads and indexes `dir`. Returns the dataset and every problem found; the dataset is only
/// usable when there are no problems.
pub fn load(dir: &Path) -> (Dataset, Vec<Problem>) {
    let (dataset, problems, _) = load_reusing(dir, &|_, _| Seen::default(), None, None);
    (dataset, problems)
}

/// Like [`load`], asking `seen` about each file first (it is called before the file is read): a
/// file it knows is not read; a table it knows is not read either, its lines are those
/// `previous` (the data files of the build `seen` knows from) recorded. The files are those
/// `listed` (the data folder's listing) when given, else found by a walk. Also returns every
/// file with its stamp, hash and name.
pub(crate) fn load_reusing(
    dir: &Path,
    seen: &SeeFile<'_>,
    listed: Option<Vec<Block>>,
    previous: Option<&DataFiles>,
) -> (Dataset, Vec<Problem>, DataFiles) {
    let mut problems = Vec::new();
    let mut dataset = Dataset {
        dir: dir.to_path_buf(),
        config: DataSettings::default(),
        resources: BTreeMap::new(),
        data_hash: String::new(),
        tables: Default::default(),
        loaded_hashes: Default::default(),
    };
    if let Some(problem) = not_a_data_folder(dir) {
        problems.push(problem);
        return (dataset, problems, DataFiles::default());
    }

    let mut files = DataFiles::default();
    let config_path = dir.join(CONFIG_FILE);
    read_config(&config_path, seen, &mut dataset, &mut files, &mut problems);

    let mut tables = Tables::default();
    let recorded = previous.map(Recorded::of);
    let (entries, count, sizes): (Box<dyn Iterator<Item = ToLoad>>, usize, Sizes) = match listed {
        Some(listed) => {
            let (entries, count, sizes) = listed_entries(dir, listed, &mut tables, recorded.as_ref());
            (Box::new(entries), count, sizes)
        }
        None => {
            let walked = walk(dir, &mut problems, &mut tables);
            let count = walked.len();
            (Box::new(walked.into_iter().map(|entry| ToLoad::Read(entry, None))), count, Sizes::new())
        }
    };

    let limit = dataset.config.max_document_mb.saturating_mul(1 << 20);
    let mut parsed = Parsed::sized(sizes);
    load_files(dir, (entries, count), (seen, limit), (&mut parsed, &mut files), &mut problems);
    let (table_records, table_subdocs) = load_tables(tables, limit, (seen, previous), &mut files, &mut problems);
    dataset.tables = super::table::open(&dataset.dir, &table_records, &table_subdocs);
    parsed.records.extend(table_records);
    for (segment, items) in table_subdocs {
        super::dataset::add_subdocs(parsed.subdocs.entry(segment).or_default(), items);
    }

    index_resources(&mut dataset, parsed.records, parsed.orders, &config_path, &mut problems);
    attach_subdocs(&mut dataset, parsed.subdocs, &mut problems);
    check_external(&dataset, &config_path, &mut problems);
    problems.extend(super::validate::reserved_segments(dir, dataset.resources.keys().map(String::as_str)));

    if dataset.resources.is_empty() && problems.is_empty() {
        problems.push(Problem::new(
            dir,
            "-",
            "no records: add one folder per resource holding <id>.json records, e.g. berry/1.json \
             (the format: docs/data.md)",
        ));
    }
    files.finish();
    dataset.data_hash = files.combined_hash();
    problems.sort();
    (dataset, problems, files)
}

/// The entries of the files the data folder's listing found, each with what it found of it
/// (those it found as `previous` recorded them, by their entry there); the tables go in
/// `tables` (the listing found no resource held both ways: it ends on one). Also returns how
/// many entries there are, and how many of each segment.
fn listed_entries<'a>(
    dir: &'a Path,
    mut blocks: Vec<Block>,
    tables: &mut Tables,
    recorded: Option<&'a Recorded<'a>>,
) -> (impl Iterator<Item = ToLoad<'a>> + 'a, usize, Sizes) {
    // the tables and the settings are the files at the top, the only paths without a '/'
    let mut take_top = |Listed { rel, .. }: &Listed| {
        rel.contains('/')
            || match DataPath::parse(rel, false) {
                Ok(DataPath::Table { segment }) => {
                    tables.records.push((segment.to_string(), dir.join(rel)));
                    false
                }
                Ok(DataPath::SubDocTable { segment, name }) => {
                    tables.subdocs.push((segment.to_string(), name.to_string(), dir.join(rel)));
                    false
                }
                Ok(DataPath::Settings) => false, // read apart
                _ => true,
            }
    };
    for block in &mut blocks {
        block.other.retain(&mut take_top);
        if recorded.is_none() {
            block.same.clear(); // none without a previous build
        }
    }
    let count = blocks.iter().map(Block::len).sum();
    let sizes = segment_sizes(&blocks, recorded.map(|recorded| recorded.files));
    // each block let go once its files are taken
    let entries = blocks.into_iter().flat_map(move |Block { same, other }| {
        let same = same.into_iter().filter_map(move |number| Some(ToLoad::Same(recorded?, number)));
        let other = other.into_iter().filter_map(move |Listed { rel, stat }| {
            let file = dir.join(&rel);
            let entry = match DataPath::parse(&rel, false) {
                Ok(DataPath::Record { segment, id }) => Entry::Record { segment: segment.to_string(), id, file },
                Ok(DataPath::Order { segment }) => Entry::Order { segment: segment.to_string(), file },
                Ok(DataPath::SubDoc { segment, id, name }) => {
                    Entry::SubDoc { segment: segment.to_string(), id, name: name.to_string(), file }
                }
                _ => return None,
            };
            Some(ToLoad::Read(entry, Some(stat)))
        });
        same.chain(other)
    });
    (entries, count, sizes)
}

/// How many records and sub-documents of each segment `blocks` holds (those listed the same by
/// their entry in `previous`).
fn segment_sizes(blocks: &[Block], previous: Option<&DataFiles>) -> Sizes {
    let mut sizes = Sizes::new();
    let mut add = |segment: &str, subdoc: bool| {
        let size = match sizes.get_mut(segment) {
            Some(size) => size,
            None => sizes.entry(segment.to_string()).or_default(),
        };
        match subdoc {
            true => size.1 += 1,
            false => size.0 += 1, // a record's file, or the order file: one more room at most
        }
    };
    for block in blocks {
        for place in previous.iter().flat_map(|previous| block.same.iter().map(|&number| previous.place_at(number))) {
            add(place.segment, place.kind.is_some());
        }
        for Listed { rel, .. } in &block.other {
            if let Some((segment, rest)) = rel.split_once('/') {
                add(segment, rest.contains('/'));
            }
        }
    }
    sizes
}

/// The problem with `dir` when it is missing or not a folder.
fn not_a_data_folder(dir: &Path) -> Option<Problem> {
    if dir.is_dir() {
        return None;
    }
    let message = if dir.exists() {
        "is not a folder: point --data at the folder that holds your records".to_string()
    } else {
        "no such folder: point --data at the folder that holds your records (the format: docs/data.md)".to_string()
    };
    Some(Problem::new(dir, "-", message))
}

/// Reads the settings file at `config_path` into `dataset`, when there is one, and checks them.
fn read_config(
    config_path: &Path,
    seen: &SeeFile<'_>,
    dataset: &mut Dataset,
    files: &mut DataFiles,
    problems: &mut Vec<Problem>,
) {
    if config_path.exists() {
        let stamp = seen(config_path, None).stamp.unwrap_or(UNKNOWN);
        match read_settings(config_path) {
            Ok((config, hash)) => {
                files.insert(CONFIG_FILE, DataFile { stamp, hash: Hash(hash), name: None, line: None });
                dataset.config = config;
            }
            Err(found) => problems.extend(found),
        }
    }
    check_config(config_path, &dataset.config, problems);
}

/// How many record files and sub-document files each segment's folder holds, by the listing:
/// the load sizes its vectors once (grown by doubling, a vector holds up to twice the room it
/// needs, and both sizes at once while it grows).
type Sizes = BTreeMap<String, (usize, usize)>;

/// The parsed files, sorted out by kind.
struct Parsed {
    /// Records without problems, by segment, in no particular order.
    records: BTreeMap<String, Vec<Record>>,
    /// Order files, by segment.
    orders: BTreeMap<String, (PathBuf, Value)>,
    /// Sub-documents, with their record's segment and id.
    subdocs: SubDocs,
    /// How many of each segment's files there are, when known.
    sizes: Sizes,
}

impl Parsed {
    /// Nothing parsed yet; `sizes` gives each segment's vectors their room when its first file
    /// comes (the listing gives the files a segment at a time: the room of one is held ahead of
    /// its files, not every segment's at once).
    fn sized(sizes: Sizes) -> Parsed {
        Parsed { records: BTreeMap::new(), orders: BTreeMap::new(), subdocs: SubDocs::new(), sizes }
    }

    fn push_record(&mut self, segment: String, record: Record) {
        let size = self.sizes.get(&segment).map_or(0, |size| size.0);
        let records = self.records.entry(segment).or_insert_with(|| Vec::with_capacity(size));
        records.push(record);
    }

    fn push_subdoc(&mut self, segment: String, item: (i64, SubDoc)) {
        let size = self.sizes.get(&segment).map_or(0, |size| size.1);
        let subdocs = self.subdocs.entry(segment).or_insert_with(|| Vec::with_capacity(size));
        subdocs.push(item);
    }
}

/// A stamp for a file that could not be stamped: never equal to a real one, never trusted.
const UNKNOWN: Stamp = Stamp { size: 0, mtime_ns: 0, ctime_ns: i64::MAX, ino: 0 };

/// A file to load: one to read (or to take from what `seen` knows), with what the listing
/// found of it (when it was listed); or one the listing found as the previous build recorded
/// it, by its entry in that build's data table.
enum ToLoad<'a> {
    Read(Entry, Option<FileStat>),
    Same(&'a Recorded<'a>, u32),
}

/// The previous build's data table, and one name for each sub-document kind it knows: a
/// sub-document found as recorded shares its kind's, instead of one allocation each.
struct Recorded<'a> {
    files: &'a DataFiles,
    kinds: Vec<std::sync::Arc<str>>,
}

impl Recorded<'_> {
    fn of(files: &DataFiles) -> Recorded<'_> {
        Recorded { files, kinds: files.kinds().map(std::sync::Arc::from).collect() }
    }
}

/// Loads the `count` files of `entries` (records, sub-documents, order files), or takes them
/// from what `seen` knows, in parallel, a block of files at a time (what loading one gives is a
/// few times what is kept of it); keeps only what the index needs. Documents over `limit`
/// bytes are problems.
fn load_files<'a>(
    dir: &Path,
    (entries, count): (impl Iterator<Item = ToLoad<'a>>, usize),
    (seen, limit): (&SeeFile<'_>, u64),
    (parsed, files): (&mut Parsed, &mut DataFiles),
    problems: &mut Vec<Problem>,
) {
    files.reserve(count); // sized once, not doubled up to twice its size
    let mut entries = entries.peekable();
    while entries.peek().is_some() {
        let block: Vec<ToLoad> = entries.by_ref().take(LOAD_BLOCK).collect();
        let loaded: Vec<(Loaded, Option<Stamp>)> = block
            .into_par_iter()
            .with_min_len(256)
            .map(|to_load| match to_load {
                ToLoad::Read(entry, listed) => {
                    let file = match &entry {
                        Entry::Record { file, .. } | Entry::Order { file, .. } | Entry::SubDoc { file, .. } => file,
                    };
                    let Seen { stamp, known } = seen(file, listed.as_ref());
                    (reuse(&entry, known).unwrap_or_else(|| load_entry(entry, limit)), stamp)
                }
                ToLoad::Same(recorded, number) => same_as_recorded(recorded, number),
            })
            .collect();
        sort_out(dir, loaded, parsed, files, problems);
    }
    // the entries dropped: the listing's room goes before the dataset is made
}

/// How many files the load reads (or takes from the index) at a time: what loading a file
/// gives (its path, its record, its problems) is held for a block, not for every file at once
/// (about 60 MB at 320,000 files, 3 MB a block).
const LOAD_BLOCK: usize = 16_384;

/// Sorts the parsed files out by kind into `parsed`, noting each file's stamp, hash and name in `files`, and
/// every problem found.
fn sort_out(
    dir: &Path,
    loaded: Vec<(Loaded, Option<Stamp>)>,
    parsed: &mut Parsed,
    files: &mut DataFiles,
    problems: &mut Vec<Problem>,
) {
    for (item, stamp) in loaded {
        match item {
            Loaded::Failed(problem) => problems.push(problem),
            Loaded::Record { segment, record, hash, problems: found } => {
                let place = Place { segment: &segment, kind: None, id: record.id };
                files.insert_file(&place, stamp.unwrap_or(UNKNOWN), &hash, record.name.as_deref());
                if found.is_empty() {
                    parsed.push_record(segment, record);
                }
                problems.extend(found);
            }
            Loaded::Order { segment, file, value, hash } => {
                files.insert(&fsutil::relative(dir, &file), data_file(stamp, hash, None));
                parsed.orders.insert(segment, (file, value));
            }
            Loaded::SubDoc { segment, id, subdoc, hash } => {
                let place = Place { segment: &segment, kind: Some(&subdoc.name), id };
                files.insert_file(&place, stamp.unwrap_or(UNKNOWN), &hash, None);
                parsed.push_subdoc(segment, (id, subdoc));
            }
        }
    }
}

fn data_file(stamp: Option<Stamp>, hash: blake3::Hash, name: Option<&str>) -> DataFile {
    DataFile { stamp: stamp.unwrap_or(UNKNOWN), hash: Hash(hash), name: name.map(str::to_string), line: None }
}

/// The record's or sub-document's file of entry `number` of `previous`, found as recorded
/// there, as loading it would give, with its stamp.
fn same_as_recorded(recorded: &Recorded<'_>, number: u32) -> (Loaded, Option<Stamp>) {
    let (place, file) = (recorded.files.place_at(number), recorded.files.file_at(number));
    let kind =
        |kind: &str| recorded.kinds.iter().find(|known| ***known == *kind).cloned().unwrap_or_else(|| kind.into());
    let (segment, id, hash) = (place.segment.to_string(), place.id, file.hash.0);
    let loaded = match place.kind {
        None => Loaded::Record {
            segment,
            record: Record { id, name: file.name.map(String::into_boxed_str), subdocs: Box::default(), line: None },
            hash,
            problems: Vec::new(),
        },
        Some(name) => Loaded::SubDoc { segment, id, subdoc: SubDoc { name: kind(name), line: None }, hash },
    };
    (loaded, Some(file.stamp))
}

/// What is `known` of an entry, as loading it would give (order files are always read).
fn reuse(entry: &Entry, known: Option<Known>) -> Option<Loaded> {
    match entry {
        Entry::Record { segment, id, .. } => known.map(|k| Loaded::Record {
            segment: segment.clone(),
            record: Record { id: *id, name: k.name.map(String::into_boxed_str), subdocs: Box::default(), line: None },
            hash: k.hash,
            problems: Vec::new(),
        }),
        Entry::SubDoc { segment, id, name, .. } => known.map(|k| Loaded::SubDoc {
            segment: segment.clone(),
            id: *id,
            subdoc: SubDoc { name: name.as_str().into(), line: None },
            hash: k.hash,
        }),
        Entry::Order { .. } => None,
    }
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
        Entry::Record { segment, id, file } => match parse_head(crate::json::At::File(&file), &bytes) {
            Err(problem) => Loaded::Failed(problem),
            Ok(head) => {
                let mut problems = Vec::new();
                let name = check_record(&file, id, &head, &mut problems);
                let (name, subdocs) = (name.map(String::into_boxed_str), Box::default());
                Loaded::Record { segment, record: Record { id, name, subdocs, line: None }, hash, problems }
            }
        },
        Entry::Order { segment, file } => match parse_json(&file, &bytes) {
            Ok(value) => Loaded::Order { segment, file, value, hash },
            Err(problem) => Loaded::Failed(problem),
        },
        Entry::SubDoc { segment, id, name, file } => {
            let checked = check_syntax(&bytes).map_err(|_| parse_json(&file, &bytes).err());
            match checked {
                Ok(()) => Loaded::SubDoc { segment, id, subdoc: SubDoc { name: name.into(), line: None }, hash },
                Err(problem) => Loaded::Failed(problem.unwrap_or_else(|| Problem::whole(&file, "invalid JSON"))),
            }
        }
    }
}
