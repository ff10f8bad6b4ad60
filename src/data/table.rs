//! Tables: a resource held as one NDJSON file, `data/<segment>.ndjson`, one record a line in
//! list order, and its sub-documents as `data/<segment>.<name>.ndjson`, one
//! `{"id": …, "document": …}` a line (docs/data.md). A table is read streamed, a line at a
//! time; each line's problems are reported at `<table>:LINE:COLUMN`.

mod lines;
pub(crate) mod subdoc_line;

use super::data_path::DataPath;
use super::dataset::{Record, Seen, Span, Spread, SubDoc, at_line};
use super::recorded::{DataFile, DataFiles, Hash, Place, TableLine};
use super::validate::{check_record, parse_head};
use super::walk::Tables;
use crate::fsutil::Stamp;
use crate::json::At;
use crate::problem::Problem;
use lines::read_lines;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;

/// What the build knows of the data before reading it: each file's stamp (and, when trusted,
/// what the index recorded of it), and the previous build's data table.
type Known<'a> = (&'a super::listing::SeeFile<'a>, Option<&'a DataFiles>);
use std::path::Path;

/// What reading a table gave: its lines without problems, in order, as items and their bytes'
/// hashes (two vectors: the items are kept, the hashes only noted), every problem, and the
/// table's hash (a line moved changes the list).
pub(crate) struct Read<T> {
    pub(crate) items: Vec<T>,
    pub(crate) hashes: Vec<blake3::Hash>,
    /// The hashes of its line groups, to record (lines.rs).
    pub(crate) groups: Vec<[u8; 32]>,
    pub(crate) problems: Vec<Problem>,
    pub(crate) hash: blake3::Hash,
}

/// What the previous build recorded of a table's lines: a line whose bytes are unchanged is
/// taken from here, not parsed again. Only the number of each line's entry in the previous
/// build's data table is held, by its line number: most lines of an edited table are where
/// they were, and are found there in the order they are read. A line not found at its number
/// is looked up by the first bytes of its hash, in a map made the first time one is needed.
pub(crate) struct KnownLines<'a> {
    files: Option<&'a DataFiles>,
    table: (&'a str, Option<&'a str>),
    /// The hashes of the table's line groups, as recorded.
    groups: &'a [[u8; 32]],
    by_number: Vec<u32>,
    by_hash: OnceLock<HashMap<u64, u32, BuildHasherDefault<Spread>>>,
}

/// No recorded line at this number.
const NO_LINE: u32 = u32::MAX;

impl<'a> KnownLines<'a> {
    /// The lines `files` recorded of the table of `segment` (`kind` `None`) or of its
    /// sub-documents `kind`.
    pub(crate) fn new(files: Option<&'a DataFiles>, table: (&'a str, Option<&'a str>)) -> KnownLines<'a> {
        let mut by_number = Vec::new();
        if let Some(files) = files {
            let lines = files.numbered_lines(table.0, table.1);
            let most = lines.size_hint().1.unwrap_or(0);
            by_number.reserve_exact(most);
            for (entry, line) in lines {
                let at = line.span.line as usize;
                if at == 0 || at > most {
                    continue; // not a line number of a table of this many lines: found by hash
                }
                if at > by_number.len() {
                    by_number.resize(at, NO_LINE);
                }
                by_number[at - 1] = entry;
            }
        }
        let groups = files.map_or(&[][..], |files| files.line_groups(&table_file(table)));
        KnownLines { files, table, groups, by_number, by_hash: OnceLock::new() }
    }

    /// The hash recorded for the line group numbered `group` (from 0).
    fn group(&self, group: usize) -> Option<&[u8; 32]> {
        self.groups.get(group)
    }

    /// The hash of the line recorded at line `number`, when it was `len` bytes long.
    fn hash_at(&self, number: u32, len: usize) -> Option<blake3::Hash> {
        let entry = *(number as usize).checked_sub(1).and_then(|i| self.by_number.get(i))?;
        let line = self.files?.line(entry)?;
        (line.span.len as usize == len).then(|| blake3::Hash::from_bytes(line.hash))
    }

    /// How many lines the previous build recorded (at most).
    fn count(&self) -> usize {
        self.by_number.len()
    }

    /// The recorded line whose bytes hash to `hash`, read at line `number`.
    fn get(&self, number: u32, hash: &blake3::Hash) -> Option<TableLine<'a>> {
        let files = self.files?;
        let same = |line: &TableLine<'_>| line.hash == *hash.as_bytes();
        let at_number =
            (number as usize).checked_sub(1).and_then(|i| self.by_number.get(i)).and_then(|&e| files.line(e));
        if let Some(line) = at_number.filter(same) {
            return Some(line);
        }
        let by_hash = self.by_hash.get_or_init(|| {
            let lines = files.numbered_lines(self.table.0, self.table.1);
            lines.map(|(entry, line)| (hash_key(&line.hash), entry)).collect()
        });
        files.line(*by_hash.get(&hash_key(hash.as_bytes()))?).filter(same)
    }
}

/// The path of the table of `segment`'s records (`kind` `None`) or of its sub-documents `kind`.
fn table_file((segment, kind): (&str, Option<&str>)) -> String {
    match kind {
        None => DataPath::Table { segment }.file(),
        Some(name) => DataPath::SubDocTable { segment, name }.file(),
    }
}

fn hash_key(hash: &[u8; 32]) -> u64 {
    u64::from_le_bytes(hash[..8].try_into().expect("8 bytes"))
}

/// Reads the records of the table `file`, checking each as a record file is checked; its `id`
/// is its own (no file name gives it). An id on two lines is a problem. A line `known` holds
/// with the same bytes is not parsed again: it was checked when it was recorded.
pub(crate) fn read_records(file: &Path, limit: u64, known: &KnownLines<'_>) -> Read<Record> {
    let parse = |span: Span, bytes: &[u8], hash: &blake3::Hash, problems: &mut Vec<Problem>| {
        if let Some(line) = known.get(span.line, hash) {
            return Some((line.id, Name::Recorded(line.name)));
        }
        let at = at_line(file, span.line, 1);
        let head = parse_head(At::Line(file, span.line), bytes).map_err(|p| problems.push(p)).ok()?;
        if head.not_object.is_some() {
            check_record(&at, 0, &head, problems); // says what the line is instead
            return None;
        }
        let id = line_id(&at, head.id.as_ref(), "add \"id\": <an integer> to the record", problems)?;
        Some((id, Name::Read(check_record(&at, id, &head, problems))))
    };
    let mut seen = FirstLines::sized(known.count());
    let keep = |(id, name): (i64, Name<'_>), span: Span, problems: &mut Vec<Problem>| {
        if let Some(first) = seen.first(id, span.line) {
            let at = at_line(file, span.line, 1);
            problems.push(Problem::new(&at, "$.id", format!("id {id} is on line {first} too: ids are unique")));
            return None;
        }
        // made here, on the thread that holds the dataset, as its other long-lived values are:
        // long-lived values made on rayon's threads (the plan's page paths, once) stay amid what
        // those threads let go of, and raised a fresh 1M build's peak by 6 MB
        let name = match name {
            Name::Recorded(name) => name.map(Box::from),
            Name::Read(name) => name.as_deref().map(Box::from),
        };
        Some(Record { id, name, subdocs: Box::default(), line: Some(span) })
    };
    read_lines(file, limit, known, (parse, keep))
}

/// A record's name as a table's line gave it: the one recorded for the same bytes, or read.
enum Name<'a> {
    Recorded(Option<&'a str>),
    Read(Option<String>),
}

/// The line each id was first read at, to find an id on two lines: the ids read in ascending
/// order (a table's usual order) in a sorted list, found by a binary search; the others in a
/// map (a map of every id cost a missed cache line a line).
struct FirstLines {
    ascending: Vec<(i64, u32)>,
    others: HashMap<i64, u32, BuildHasherDefault<Spread>>,
}

impl FirstLines {
    /// Room for `lines` ids.
    fn sized(lines: usize) -> FirstLines {
        FirstLines { ascending: Vec::with_capacity(lines), others: HashMap::default() }
    }

    /// `None` when `id` is first read at `line`, else the line it was read at first.
    fn first(&mut self, id: i64, line: u32) -> Option<u32> {
        if self.ascending.last().is_none_or(|&(last, _)| last < id) {
            self.ascending.push((id, line));
            return None;
        }
        if let Ok(at) = self.ascending.binary_search_by_key(&id, |&(id, _)| id) {
            return Some(self.ascending[at].1);
        }
        match self.others.entry(id) {
            std::collections::hash_map::Entry::Occupied(first) => Some(*first.get()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(line);
                None
            }
        }
    }
}

/// Reads the sub-documents `name` of the table `file`: each line `{"id": <the record's id>,
/// "document": <any JSON value>}`. Returns each with its record's id. A line `known` holds
/// with the same bytes is not parsed again.
pub(crate) fn read_subdocs(
    file: &Path,
    name: &std::sync::Arc<str>,
    limit: u64,
    known: &KnownLines<'_>,
) -> Read<(i64, SubDoc)> {
    let parse = |span: Span, bytes: &[u8], hash: &blake3::Hash, problems: &mut Vec<Problem>| {
        let id = match known.get(span.line, hash) {
            Some(line) => line.id,
            None => subdoc_line_id((file, span.line), bytes, problems)?,
        };
        Some((id, SubDoc { name: name.clone(), line: Some(span) }))
    };
    let mut seen = FirstLines::sized(known.count());
    let keep = |item: (i64, SubDoc), span: Span, problems: &mut Vec<Problem>| {
        let Some(first) = seen.first(item.0, span.line) else { return Some(item) };
        let (at, id) = (at_line(file, span.line, 1), item.0);
        problems.push(Problem::new(&at, "$.id", format!("record {id} has its {name} on line {first} too")));
        None
    };
    read_lines(file, limit, known, (parse, keep))
}

/// The record id of a sub-document table's line (line `number` of `file`), checked: the line
/// and its `id` are read by the one reader of the data, its document checked as a sub-document
/// file is ([`subdoc_line::read`]). Every line left out is a problem.
fn subdoc_line_id((file, number): (&Path, u32), bytes: &[u8], problems: &mut Vec<Problem>) -> Option<i64> {
    let id = subdoc_line::read(At::Line(file, number), bytes).map_err(|p| problems.push(p)).ok()?;
    line_id(&at_line(file, number, 1), id.as_ref(), subdoc_line::SHAPE, problems)
}

/// The integer `id` of a line, or a problem saying `fix`.
fn line_id(at: &Path, id: Option<&serde_json::Value>, fix: &str, problems: &mut Vec<Problem>) -> Option<i64> {
    match id {
        None => problems.push(Problem::whole(at, format!("\"id\" is missing: {fix}"))),
        Some(id) => match id.as_i64().filter(|_| id.is_i64() || id.is_u64()) {
            Some(id) => return Some(id),
            None => problems.push(Problem::new(
                at,
                "$.id",
                format!("\"id\" must be an integer from {} to {}, not {id}", i64::MIN, i64::MAX),
            )),
        },
    }
    None
}

/// The records of the tables by segment, in line order, and their sub-documents with their
/// record's segment and id.
pub(crate) type Loaded = (BTreeMap<String, Vec<Record>>, crate::data::dataset::SubDocs);

/// The tables of the data folder, read: their records by segment in line order, and their
/// sub-documents with their record's segment and id. Each line is noted in `files` as the
/// record or sub-document file it stands for (`<segment>/<id>.json`), with the line's hash and
/// the table's stamp, so that a rebuild renders only the lines that changed; each table too,
/// with the hash of its bytes, so that a line moved changes the list. A resource held
/// both as a folder and as a table, and a sub-document table without its table, are problems.
pub(crate) fn load_tables(
    tables: Tables,
    limit: u64,
    (seen, previous): Known<'_>,
    files: &mut DataFiles,
    problems: &mut Vec<Problem>,
) -> Loaded {
    let folders: HashSet<&str> = tables.folders.iter().map(String::as_str).collect();
    let mut records = BTreeMap::new();
    let mut subdocs = crate::data::dataset::SubDocs::new();
    // Room for as many lines as the previous build recorded, made once: grown a table at a
    // time, the entries of a million-line table were copied again for each table after it.
    files.reserve(previous.map_or(0, DataFiles::len));
    // Read in the data table's order (resources by name, each one's records table before its
    // sub-document tables, those by name), and each resource's lines noted in the order of
    // their ids: tables of lines in id order then give the data table in its order, which
    // need not be sorted again (at 1M records, 0.2 s).
    let mut record_tables: Vec<&(String, std::path::PathBuf)> = tables.records.iter().collect();
    record_tables.sort_by(|a, b| a.0.cmp(&b.0));
    let mut subdoc_tables: Vec<&(String, String, std::path::PathBuf)> = tables.subdocs.iter().collect();
    subdoc_tables.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let held: HashSet<&str> = record_tables.iter().map(|(segment, _)| segment.as_str()).collect();
    for (segment, name, file) in &subdoc_tables {
        if !held.contains(segment.as_str()) {
            let table = file.with_file_name(DataPath::Table { segment }.file());
            problems.push(Problem::whole(
                file,
                format!(
                    "sub-documents of {segment}, which is not held as a table ({} is missing): a folder's records \
                     keep theirs as {segment}/<id>/{name}.json",
                    table.display()
                ),
            ));
        }
    }
    for (segment, file) in record_tables {
        if folders.contains(segment.as_str()) {
            let folder = file.with_file_name(segment);
            problems.push(Problem::whole(
                file,
                format!(
                    "{segment} is held twice, as {} and as {}: keep one (gen import --layout picks either)",
                    folder.display(),
                    file.display()
                ),
            ));
            continue; // its sub-document tables are not read either
        }
        let record = |line: &TableLine<'_>| Record {
            id: line.id,
            name: line.name.map(Box::from),
            subdocs: Box::default(),
            line: Some(line.span),
        };
        let read_table = |known: &KnownLines<'_>| read_records(file, limit, known);
        let (read, stamp) = table_lines(file, (segment, None), (seen, previous), record, read_table);
        let rel = table_file((segment, None));
        files.insert(&rel, DataFile { stamp, hash: Hash(read.hash), name: None, line: None });
        files.insert_line_groups(&rel, read.groups);
        problems.extend(read.problems);
        let of_segment = subdoc_tables.iter().filter(|(of, _, _)| of == segment);
        let kinds: Vec<KindLines> = of_segment
            .map(|(_, name, file)| subdoc_table((segment, name, file), limit, (seen, previous), files, problems))
            .collect();
        note_lines(files, segment, (&read.items, &read.hashes), &kinds);
        let mut items = read.items;
        items.shrink_to_fit(); // room made for the previous build's lines: more if some were removed
        records.insert(segment.clone(), items);
        for (items, _) in kinds {
            super::dataset::add_subdocs(subdocs.entry(segment.clone()).or_default(), items);
        }
    }
    (records, subdocs)
}

/// Reads the table `file` of `segment`'s sub-documents `name`, noting the table (not its lines)
/// in `files`.
fn subdoc_table(
    (segment, name, file): (&str, &str, &Path),
    limit: u64,
    (seen, previous): Known<'_>,
    files: &mut DataFiles,
    problems: &mut Vec<Problem>,
) -> KindLines {
    let shared: std::sync::Arc<str> = name.into();
    let subdoc = |line: &TableLine<'_>| (line.id, SubDoc { name: shared.clone(), line: Some(line.span) });
    let read_table = |known: &KnownLines<'_>| read_subdocs(file, &shared, limit, known);
    let (read, stamp) = table_lines(file, (segment, Some(name)), (seen, previous), subdoc, read_table);
    let rel = table_file((segment, Some(name)));
    files.insert(&rel, DataFile { stamp, hash: Hash(read.hash), name: None, line: None });
    files.insert_line_groups(&rel, read.groups);
    problems.extend(read.problems);
    (read.items, read.hashes)
}

/// One sub-document table's lines, read: each sub-document with its record's id, and its hash.
type KindLines = (Vec<(i64, SubDoc)>, Vec<blake3::Hash>);

/// Notes in `files` the lines of the records of `segment` and of its sub-documents (each kind's
/// table in turn), each as the file it stands for, in the order of their ids (for an id, the
/// record, then its sub-documents in their tables' order): the data table's order, when each
/// table's lines are in id order.
fn note_lines(
    files: &mut DataFiles,
    segment: &str,
    (records, hashes): (&[Record], &[blake3::Hash]),
    kinds: &[KindLines],
) {
    files.reserve(records.len() + kinds.iter().map(|(items, _)| items.len()).sum::<usize>());
    let mut next = vec![0usize; 1 + kinds.len()];
    let id_at = |table: usize, at: usize| match table {
        0 => records.get(at).map(|record| record.id),
        k => kinds[k - 1].0.get(at).map(|(id, _)| *id),
    };
    loop {
        // the table whose next line has the least id (the first such table on a tie)
        let mut least: Option<(i64, usize)> = None;
        for (table, &at) in next.iter().enumerate() {
            if let Some(id) = id_at(table, at)
                && least.is_none_or(|(least, _)| id < least)
            {
                least = Some((id, table));
            }
        }
        let Some((id, table)) = least else { break };
        let at = next[table];
        next[table] += 1;
        if table == 0 {
            let record = &records[at];
            let place = Place { segment, kind: None, id };
            files.insert_line(&place, record.name.as_deref(), &hashes[at], record.line.unwrap_or(NO_SPAN));
        } else {
            let (items, hashes) = &kinds[table - 1];
            let subdoc = &items[at].1;
            let place = Place { segment, kind: Some(&subdoc.name), id };
            files.insert_line(&place, None, &hashes[at], subdoc.line.unwrap_or(NO_SPAN));
        }
    }
}

/// The lines of the table `file` (of `segment`'s records, or of its sub-documents `kind`), and
/// its stamp. When `seen` finds the table unchanged since the build that recorded `previous`,
/// the table is not read: its lines are the recorded ones, made items by `item`. Otherwise it
/// is read by `read`, streamed, and only the lines whose bytes `previous` does not hold are
/// parsed.
fn table_lines<T>(
    file: &Path,
    (segment, kind): (&str, Option<&str>),
    (seen, previous): Known<'_>,
    item: impl Fn(&TableLine<'_>) -> T,
    read: impl FnOnce(&KnownLines<'_>) -> Read<T>,
) -> (Read<T>, Stamp) {
    let Seen { stamp, known } = seen(file, None);
    let stamp = stamp.unwrap_or(UNKNOWN_STAMP);
    if let (Some(known), Some(previous)) = (known, previous) {
        // (line number, entry number) a line: 8 bytes, not the 72 of a line taken out whole
        let count = previous.numbered_lines(segment, kind).count();
        let mut recorded: Vec<(u32, u32)> = Vec::with_capacity(count);
        recorded.extend(previous.numbered_lines(segment, kind).map(|(entry, line)| (line.span.line, entry)));
        if !recorded.is_empty() {
            recorded.sort_unstable();
            let lines = || recorded.iter().filter_map(|&(_, entry)| previous.line(entry));
            let (mut items, mut hashes) = (Vec::with_capacity(count), Vec::with_capacity(count));
            items.extend(lines().map(|line| item(&line)));
            hashes.extend(lines().map(|line| blake3::Hash::from_bytes(line.hash)));
            let groups = previous.line_groups(&table_file((segment, kind))).to_vec();
            return (Read { items, hashes, groups, problems: Vec::new(), hash: known.hash }, stamp);
        }
    }
    (read(&KnownLines::new(previous, (segment, kind))), stamp)
}

/// Each table of `records` and `subdocs` (of the data folder `dir`), opened for reading its
/// lines; one that cannot be opened is left out (each read opens it, and reports why not).
pub(crate) fn open(
    dir: &Path,
    records: &BTreeMap<String, Vec<Record>>,
    subdocs: &crate::data::dataset::SubDocs,
) -> HashMap<std::path::PathBuf, std::sync::Arc<std::fs::File>> {
    let tables = records.keys().map(|segment| DataPath::Table { segment }.file());
    // Each table's path made once, not once a line.
    let kinds: HashSet<(&str, &str)> = subdocs
        .iter()
        .flat_map(|(segment, items)| items.iter().map(move |(_, subdoc)| (segment, subdoc)))
        .filter(|(_, subdoc)| subdoc.line.is_some())
        .map(|(segment, subdoc)| (segment.as_str(), &*subdoc.name))
        .collect();
    let subdoc_tables = kinds.into_iter().map(|(segment, name)| DataPath::SubDocTable { segment, name }.file());
    let files: HashSet<String> = tables.chain(subdoc_tables).collect();
    // opened as the load read them: regular files only, without blocking
    let open = |rel: String| {
        let (file, _) = crate::fsutil::open_table(&dir.join(&rel)).ok()?;
        Some((dir.join(&rel), std::sync::Arc::new(file)))
    };
    files.into_iter().filter_map(open).collect()
}

/// A stamp for a file that could not be stamped: never equal to a real one, never trusted.
const UNKNOWN_STAMP: Stamp = Stamp { size: 0, mtime_ns: 0, ctime_ns: i64::MAX, ino: 0 };

/// The span of a line read from a table: each has one.
const NO_SPAN: Span = Span { offset: 0, len: 0, line: 0 };

#[cfg(test)]
mod tests {
    use super::lines::GROUP;
    use super::*;

    /// Records what reading `read` gave as the build index would: each line, and the groups.
    fn recorded(read: &Read<Record>, fake: Option<(i64, &str, [u8; 32])>) -> DataFiles {
        let mut files = DataFiles::default();
        for (record, hash) in read.items.iter().zip(&read.hashes) {
            let place = Place { segment: "thing", kind: None, id: record.id };
            let (name, hash) = match fake.filter(|(id, _, _)| *id == record.id) {
                Some((_, name, hash)) => (Some(name), blake3::Hash::from_bytes(hash)),
                None => (record.name.as_deref(), *hash),
            };
            files.insert_line(&place, name, &hash, record.line.unwrap());
        }
        files.insert_line_groups("thing.ndjson", read.groups.clone());
        files.finish();
        files
    }

    /// A resource's lines and its sub-documents' are noted in the order of their ids, each
    /// record before its sub-documents, the kinds in their tables' order: the data table's.
    #[test]
    fn a_resources_lines_are_noted_in_id_order() {
        let span = |line| Span { offset: 0, len: 1, line };
        let record = |id| Record { id, name: None, subdocs: Box::default(), line: Some(span(id as u32)) };
        let records = [record(1), record(2), record(4)];
        let subdoc = |id: i64, name: &str| (id, SubDoc { name: name.into(), line: Some(span(id as u32)) });
        let hashes = |n| vec![blake3::hash(b"x"); n];
        let kinds = [
            (vec![subdoc(2, "a"), subdoc(4, "a")], hashes(2)),
            (vec![subdoc(1, "b"), subdoc(2, "b"), subdoc(3, "b")], hashes(3)),
        ];
        let mut files = DataFiles::default();
        note_lines(&mut files, "thing", (&records, &hashes(3)), &kinds);
        let paths: Vec<String> = files.iter().map(|(path, _)| path).collect();
        let expected = [
            "thing/1.json",
            "thing/1/b.json",
            "thing/2.json",
            "thing/2/a.json",
            "thing/2/b.json",
            "thing/3/b.json",
            "thing/4.json",
            "thing/4/a.json",
        ];
        assert_eq!(paths, expected);
    }

    /// An id read again is found at the line it was first read at, whether the ids before it
    /// were in ascending order or not.
    #[test]
    fn an_id_read_twice_names_its_first_line() {
        let mut seen = FirstLines::sized(4);
        let ids = [(1, None), (2, None), (5, None), (3, None), (3, Some(4)), (5, Some(3)), (0, None), (2, Some(2))];
        for (line, (id, first)) in ids.into_iter().enumerate() {
            assert_eq!(seen.first(id, line as u32 + 1), first, "id {id} at line {}", line + 1);
        }
    }

    /// A group of lines whose bytes the previous read recorded takes its lines' hashes (and so
    /// their ids and names) from the record, unparsed: shown by a record whose recorded hash and
    /// name are made up, which a read after an edit of another group still gives; its own group
    /// edited, or every group moved by a line added before it, its line is hashed and read again.
    /// The table's hash is the same as a read that knows nothing gives.
    #[test]
    fn a_group_of_lines_recorded_with_the_same_bytes_is_not_hashed_again() {
        let dir = std::env::temp_dir().join(format!("gen-table-groups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("thing.ndjson");
        let count = 2 * GROUP as i64 + 100; // two whole groups and part of a third
        let line = |id: i64, value: &str| format!("{{\"id\": {id}, \"name\": \"n{id}\", \"value\": \"{value}\"}}\n");
        let table = |edited: Option<(i64, &str)>, first: &str| {
            let lines = (1..=count).map(|id| line(id, edited.filter(|(at, _)| *at == id).map_or("v", |(_, v)| v)));
            first.to_string() + &lines.collect::<String>()
        };
        let read = |known: &KnownLines<'_>| read_records(&file, 1 << 20, known);
        let fresh = || read(&KnownLines::new(None, ("thing", None)));

        std::fs::write(&file, table(None, "")).unwrap();
        let first = fresh();
        assert!(first.problems.is_empty(), "{:?}", first.problems);
        assert_eq!(first.groups.len(), 3, "a group for each 256 lines begun");
        let fake = [7u8; 32];
        let files = recorded(&first, Some((10, "made-up", fake)));

        // line 300 (the second group) edited: the first group's lines are the record's
        std::fs::write(&file, table(Some((300, "edited")), "")).unwrap();
        let second = read(&KnownLines::new(Some(&files), ("thing", None)));
        assert!(second.problems.is_empty(), "{:?}", second.problems);
        assert_eq!(second.items[9].name.as_deref(), Some("made-up"), "line 10 was read again");
        assert_eq!(second.hashes[9].as_bytes(), &fake);
        let edited = line(300, "edited");
        assert_eq!(second.hashes[299], blake3::hash(edited.trim_end().as_bytes()), "the edited line's own hash");
        assert_eq!(second.groups[0], first.groups[0]);
        assert_ne!(second.groups[1], first.groups[1]);
        assert_eq!(second.groups[2], first.groups[2]);
        let unknown = fresh();
        assert_eq!(second.hashes[10..], unknown.hashes[10..], "every other line's hash is its own");
        assert_eq!(
            second.items.iter().map(|r| r.line.unwrap()).collect::<Vec<_>>(),
            unknown.items.iter().map(|r| r.line.unwrap()).collect::<Vec<_>>()
        );

        // line 10 edited itself: read again
        std::fs::write(&file, table(Some((10, "edited")), "")).unwrap();
        let third = read(&KnownLines::new(Some(&files), ("thing", None)));
        assert_eq!(third.items[9].name.as_deref(), Some("n10"));
        assert_eq!(third.hash, fresh().hash, "the table's hash is its lines'");

        // a line added first: every group moved, every line hashed
        std::fs::write(&file, table(None, &line(0, "v"))).unwrap();
        let moved = read(&KnownLines::new(Some(&files), ("thing", None)));
        assert!(moved.problems.is_empty(), "{:?}", moved.problems);
        assert_eq!(moved.items[10].name.as_deref(), Some("n10"), "line 10, now 11, is read");
        assert_eq!(moved.hashes, fresh().hashes);
        assert_eq!(moved.hash, fresh().hash);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
