//! The data table a build recorded: what each file of the data folder was (stamp, hash, record
//! name) when the tree was built, kept in the build index beside the tree, and the comparisons a
//! rebuild makes against it (what changed, whether anything was removed or renamed). The next
//! build's listing and load (`listing.rs`, `load.rs`, `table.rs`) take it as the previous
//! build's.
//!
//! Its records and sub-documents are fixed-size entries keyed by their [`Place`] (`codec`,
//! `places`): the build index's table of documents is made of the same entries, and encodes
//! them through these two modules too.

pub(crate) mod codec;
pub(crate) mod places;

use super::data_path::DataPath;
use super::dataset::Span;
use crate::fsutil::Stamp;
use crate::tree::layout;
use codec::{Decoder, ENTRY_BYTES, Entry, Key, put_bytes, put_u64, span_stamp, stamp_bytes, stamp_span};
use places::{Places, check_entries};
use rayon::slice::ParallelSliceMut;
use std::collections::BTreeMap;
use std::io::{Read, Write};

/// A BLAKE3 hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hash(pub blake3::Hash);

/// One file of the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Its stamp when it was read.
    pub stamp: Stamp,
    /// BLAKE3 of its bytes.
    pub(crate) hash: Hash,
    /// A record's name.
    pub(crate) name: Option<String>,
    /// The line of a table that holds the record or sub-document, when it is held in one (its
    /// stamp is then the table's: the index keeps the line's place instead).
    pub(crate) line: Option<Span>,
}

/// Which document or data file: a record (`kind` `None`) or one of its sub-documents, in the
/// resource `segment`, by the record's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place<'a> {
    /// The resource.
    pub(crate) segment: &'a str,
    /// The sub-document's name, or `None` for the record itself.
    pub(crate) kind: Option<&'a str>,
    /// The record's id.
    pub(crate) id: i64,
}

impl<'a> Place<'a> {
    /// The place of the data file `rel` (relative to the data folder): `<segment>/<id>.json`
    /// is a record, `<segment>/<id>/<kind>.json` a sub-document; other files have none.
    pub(crate) fn of_data_file(rel: &'a str) -> Option<Place<'a>> {
        match DataPath::parse(rel, false) {
            Ok(DataPath::Record { segment, id }) => Some(Place { segment, kind: None, id }),
            Ok(DataPath::SubDoc { segment, id, name }) => Some(Place { segment, kind: Some(name), id }),
            _ => None,
        }
    }

    /// The data file of this place, relative to the data folder.
    pub(crate) fn data_file(&self) -> String {
        let (segment, id) = (self.segment, self.id);
        match self.kind {
            None => DataPath::Record { segment, id }.file(),
            Some(name) => DataPath::SubDoc { segment, id, name }.file(),
        }
    }

    /// The path of this place's document in the tree under `key` (its id or its name).
    pub(crate) fn tree_path(&self, key: impl std::fmt::Display) -> String {
        match self.kind {
            None => layout::record_path(self.segment, key),
            Some(kind) => layout::sub_document_path(self.segment, key, kind),
        }
    }
}

/// What the listing of a data folder noted of its folders, beside the files its index records.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FolderNotes {
    /// The folders that held no data file (relative to the data folder), sorted: with the data
    /// files' folders, every folder the data holds.
    pub(crate) hollow: Vec<String>,
    /// Each resource folder's identity (device and inode), by segment: a folder is trusted to
    /// hold what it held only when it is the same folder (not another data folder's).
    pub(crate) resources: BTreeMap<String, (u64, u64)>,
}

/// A line of a table, as the index recorded it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableLine<'a> {
    /// The id of its record.
    pub(crate) id: i64,
    /// Its record's name (`None` for a sub-document's line).
    pub(crate) name: Option<&'a str>,
    /// Where the line is in its table (offset, length, line number).
    pub(crate) span: Span,
    /// BLAKE3 of the line's bytes.
    pub(crate) hash: [u8; 32],
}

/// The files a build recorded in one resource's folder ([`DataFiles::folder_files`]): (id,
/// entry number), in order of id.
#[derive(Debug, Default)]
pub(crate) struct FolderFiles {
    /// Each record's file.
    pub(crate) records: Vec<(i64, u32)>,
    /// Each sub-document's file, in the folder of its record's id.
    pub(crate) subdocs: Vec<(i64, u32)>,
}

/// Every data file of a build: records and sub-documents as fixed-size entries sorted by their
/// key; the few others (`gen.json`, order files) by path.
#[derive(Debug, Clone, Default)]
pub struct DataFiles {
    places: Places,
    entries: Vec<Entry>,
    other: BTreeMap<String, DataFile>,
    /// Each table's line groups' hashes, by the table's path ([`DataFiles::line_groups`]).
    groups: BTreeMap<String, Vec<[u8; 32]>>,
    sorted: bool,
}

impl DataFiles {
    /// Adds the data file `rel` (relative to the data folder). Call [`DataFiles::finish`] once
    /// every file is in.
    pub fn insert(&mut self, rel: &str, file: DataFile) {
        match Place::of_data_file(rel) {
            Some(place) => self.insert_place(&place, file),
            None => {
                self.other.insert(rel.to_string(), file);
            }
        }
    }

    /// Adds the record or sub-document file at `place` (a table's line, by the file it stands
    /// for), without making and parsing its path.
    pub(crate) fn insert_place(&mut self, place: &Place<'_>, file: DataFile) {
        let stamp = file.line.map_or(file.stamp, span_stamp);
        self.insert_file(place, stamp, &file.hash.0, file.name.as_deref());
    }

    /// Adds the record or sub-document file at `place`, stamped `stamp`, whose bytes hash to
    /// `hash` (a record named `name`): [`DataFiles::insert_place`] without a [`DataFile`] made.
    pub(crate) fn insert_file(&mut self, place: &Place<'_>, stamp: Stamp, hash: &blake3::Hash, name: Option<&str>) {
        let key = self.places.key(place);
        let name = self.places.names.add(name);
        self.entries.push(Entry { key, name, stamp, hash: *hash.as_bytes() });
        self.sorted = false;
    }

    /// Adds the table line at `span` that holds the record or sub-document at `place` (named
    /// `name`), whose bytes hash to `hash`.
    pub(crate) fn insert_line(&mut self, place: &Place<'_>, name: Option<&str>, hash: &blake3::Hash, span: Span) {
        self.insert_file(place, span_stamp(span), hash, name);
    }

    /// Records the hashes of the line groups of the table `rel` (src/data/table/lines.rs): a
    /// group whose bytes hash the same at the next read holds the lines recorded at its
    /// numbers, which are then not hashed one by one.
    pub(crate) fn insert_line_groups(&mut self, rel: &str, groups: Vec<[u8; 32]>) {
        if groups.is_empty() {
            self.groups.remove(rel);
        } else {
            self.groups.insert(rel.to_string(), groups);
        }
    }

    /// The hashes of the line groups of the table `rel`, as [`DataFiles::insert_line_groups`]
    /// recorded them (none for a table read before groups were recorded).
    pub(crate) fn line_groups(&self, rel: &str) -> &[[u8; 32]] {
        self.groups.get(rel).map_or(&[], Vec::as_slice)
    }

    /// Makes room for exactly `n` more files (a table's lines: grown by doubling, the entries
    /// of a million records would hold room for as many more).
    pub(crate) fn reserve(&mut self, n: usize) {
        self.entries.reserve_exact(n);
    }

    /// Sorts the entries for lookups, in an order that does not depend on the order files were
    /// added in: segments and kinds by name, then ids.
    pub fn finish(&mut self) {
        if self.sorted {
            return;
        }
        let segments = self.places.segments.sorted();
        let kinds = self.places.kinds.sorted();
        for e in &mut self.entries {
            e.key.segment = segments[e.key.segment as usize];
            if e.key.kind > 0 {
                e.key.kind = kinds[e.key.kind as usize - 1] + 1;
            }
        }
        // entries added in order (see `load_tables`) are not sorted again
        if !self.entries.is_sorted_by_key(|e| e.key) {
            self.entries.par_sort_unstable_by_key(|e| e.key);
        }
        self.entries.shrink_to_fit();
        self.sorted = true;
    }

    /// One hash of every file's path and hash, in the order of [`DataFiles::finish`].
    pub(crate) fn combined_hash(&self) -> String {
        // Fed in blocks: a hash fed a path at a time costs more than the hashing.
        let (mut hasher, mut block) = (blake3::Hasher::new(), Vec::with_capacity(1 << 16));
        let mut add = |block: &mut Vec<u8>, hash: &[u8; 32]| {
            block.push(0);
            block.extend_from_slice(hash);
            if block.len() >= 1 << 16 {
                hasher.update(block);
                block.clear();
            }
        };
        for (rel, file) in &self.other {
            block.extend_from_slice(rel.as_bytes());
            add(&mut block, file.hash.0.as_bytes());
        }
        for e in &self.entries {
            write_data_file(&self.places.place(e.key), &mut block);
            add(&mut block, &e.hash);
        }
        hasher.update(&block);
        hasher.finalize().to_hex().to_string()
    }

    /// Number of files.
    pub(crate) fn len(&self) -> usize {
        self.entries.len() + self.other.len()
    }

    /// The file `rel` (relative to the data folder).
    pub fn get(&self, rel: &str) -> Option<DataFile> {
        match Place::of_data_file(rel) {
            Some(place) => self.get_place(&place),
            None => self.other.get(rel).cloned(),
        }
    }

    /// Number of files of the data folder (a table's lines are not files).
    pub(crate) fn file_count(&self) -> usize {
        self.entries.iter().filter(|e| stamp_span(&e.stamp).is_none()).count() + self.other.len()
    }

    /// True when `test` holds for the stamp of some file (a table's lines are not files).
    pub(crate) fn any_stamp(&self, test: impl Fn(&Stamp) -> bool) -> bool {
        let keyed = self.entries.iter().filter(|e| stamp_span(&e.stamp).is_none()).map(|e| &e.stamp);
        keyed.chain(self.other.values().map(|f| &f.stamp)).any(test)
    }

    /// Number of records, whether held in files or in tables' lines.
    pub(crate) fn record_count(&self) -> usize {
        self.entries.iter().filter(|e| e.key.kind == 0).count()
    }

    /// The record's or sub-document's file at `place`.
    pub(crate) fn get_place(&self, place: &Place<'_>) -> Option<DataFile> {
        let key = self.places.find(place)?;
        let at = self.entries.binary_search_by_key(&key, |e| e.key).ok()?;
        Some(self.file(&self.entries[at]))
    }

    /// The files the build recorded in the folder of `segment` (a table's lines aside), in
    /// order of id: each record's file, and each sub-document's, by entry number
    /// ([`DataFiles::stamp_at`]). What a data folder's listing takes a folder it trusts to hold.
    pub(crate) fn folder_files(&self, segment: &str) -> FolderFiles {
        let mut files = FolderFiles::default();
        let Some(key) = self.places.find(&Place { segment, kind: None, id: 0 }) else { return files };
        let range = self.segment_range(key);
        for (at, e) in self.entries[range.clone()].iter().enumerate() {
            if stamp_span(&e.stamp).is_some() {
                continue;
            }
            let number = (range.start + at) as u32;
            match e.key.kind {
                0 => files.records.push((e.key.id, number)),
                _ => files.subdocs.push((e.key.id, number)),
            }
        }
        files
    }

    /// The number of the entry of the record or sub-document file `rel`, if recorded.
    pub(crate) fn entry_number(&self, rel: &str) -> Option<u32> {
        let key = self.places.find(&Place::of_data_file(rel)?)?;
        self.entries.binary_search_by_key(&key, |e| e.key).ok().map(|at| at as u32)
    }

    /// The stamp recorded for the file of entry `number`.
    pub(crate) fn stamp_at(&self, number: u32) -> Stamp {
        self.entries[number as usize].stamp
    }

    /// The sub-document kinds of the entries (`encounters`, ...).
    pub(crate) fn kinds(&self) -> impl Iterator<Item = &str> {
        self.places.kinds.strings.iter().map(String::as_str)
    }

    /// The place of the record or sub-document of entry `number`.
    pub(crate) fn place_at(&self, number: u32) -> Place<'_> {
        self.places.place(self.entries[number as usize].key)
    }

    /// The path (relative to the data folder) of the file of entry `number`.
    pub(crate) fn path_at(&self, number: u32) -> String {
        self.places.place(self.entries[number as usize].key).data_file()
    }

    /// The sub-document kind of entry `number` (`None` for a record).
    pub(crate) fn kind_at(&self, number: u32) -> Option<&str> {
        self.places.place(self.entries[number as usize].key).kind
    }

    /// The file of entry `number`.
    pub(crate) fn file_at(&self, number: u32) -> DataFile {
        self.file(&self.entries[number as usize])
    }

    /// The stamp recorded for a file that is not a record or sub-document (`gen.json`, an
    /// order file), if any.
    pub(crate) fn other_stamp(&self, rel: &str) -> Option<Stamp> {
        self.other.get(rel).map(|file| file.stamp)
    }

    /// A lookup of the hashes of the records and sub-documents of `segment`, fastest when they
    /// are asked for in the table's order (by id, each record before its sub-documents), as a
    /// list sorted by id asks for them: each is then found next to the one before.
    pub(crate) fn cursor(&self, segment: &str) -> HashCursor<'_> {
        let key = self.places.find(&Place { segment, kind: None, id: 0 });
        let range = key.map_or(0..0, |key| self.segment_range(key));
        HashCursor { files: self, segment: key.map(|key| key.segment), next: range.start, range }
    }

    /// The hash of each record's data of `segment` (not its sub-documents'), sorted by id: 40
    /// bytes a record, for what needs only these once the table is let go.
    pub(crate) fn record_hashes(&self, segment: &str) -> Vec<(i64, [u8; 32])> {
        let Some(key) = self.places.find(&Place { segment, kind: None, id: 0 }) else { return Vec::new() };
        let records = self.entries[self.segment_range(key)].iter().filter(|e| e.key.kind == 0);
        let mut hashes = Vec::with_capacity(records.clone().count());
        hashes.extend(records.map(|e| (e.key.id, e.hash)));
        hashes
    }

    /// Where the entries of `key`'s segment are (they are sorted by segment first).
    fn segment_range(&self, key: Key) -> std::ops::Range<usize> {
        let first = self.entries.partition_point(|e| e.key.segment < key.segment);
        first..first + self.entries[first..].partition_point(|e| e.key.segment == key.segment)
    }

    fn file(&self, entry: &Entry) -> DataFile {
        DataFile {
            stamp: entry.stamp,
            hash: Hash(blake3::Hash::from_bytes(entry.hash)),
            name: self.places.names.get(entry.name).map(str::to_string),
            line: stamp_span(&entry.stamp),
        }
    }

    /// Like [`DataFiles::lines`], each with a number that [`DataFiles::line`] gives it back by.
    /// At most as many as the segment's records and sub-documents.
    pub(crate) fn numbered_lines<'a>(
        &'a self,
        segment: &str,
        kind: Option<&str>,
    ) -> impl Iterator<Item = (u32, TableLine<'a>)> + 'a {
        let wanted = self.places.find(&Place { segment, kind, id: 0 });
        let range = wanted.map_or(0..0, |key| self.segment_range(key));
        let of_kind = move |(_, e): &(usize, &Entry)| wanted.is_some_and(|key| e.key.kind == key.kind);
        let numbered = self.entries[range.clone()].iter().enumerate().map(move |(i, e)| (range.start + i, e));
        numbered.filter(of_kind).filter_map(|(at, e)| Some((at as u32, self.table_line(e)?)))
    }

    /// The line numbered `number` by [`DataFiles::numbered_lines`].
    pub(crate) fn line(&self, number: u32) -> Option<TableLine<'_>> {
        self.table_line(self.entries.get(number as usize)?)
    }

    fn table_line<'a>(&'a self, e: &Entry) -> Option<TableLine<'a>> {
        let span = stamp_span(&e.stamp)?;
        Some(TableLine { id: e.key.id, name: self.places.names.get(e.name), span, hash: e.hash })
    }

    /// Every file: (path relative to the data folder, file).
    pub fn iter(&self) -> impl Iterator<Item = (String, DataFile)> + '_ {
        let keyed = self.entries.iter().map(|e| (self.places.place(e.key).data_file(), self.file(e)));
        keyed.chain(self.other.iter().map(|(rel, file)| (rel.clone(), file.clone())))
    }

    /// True when every file of `self` is in `other` with the same stamp, and no more.
    pub(crate) fn same_stamps(&self, other: &DataFiles) -> bool {
        self.len() == other.len()
            && self
                .entries
                .iter()
                .all(|e| other.get_place(&self.places.place(e.key)).is_some_and(|o| o.stamp == e.stamp))
            && self.other.iter().all(|(rel, f)| other.other.get(rel).is_some_and(|o| o.stamp == f.stamp))
    }

    /// The files of `self` that `before` does not have with the same hash (paths relative to the
    /// data folder).
    pub(crate) fn changed_since(&self, before: &DataFiles) -> Vec<String> {
        let keyed = self.with_entries_of(before).filter_map(|(e, old)| {
            let same = old.is_some_and(|old| old.hash == e.hash);
            (!same).then(|| self.places.place(e.key).data_file())
        });
        let other = self.other.iter().filter(|(rel, f)| before.other.get(*rel).is_none_or(|old| old.hash != f.hash));
        keyed.chain(other.map(|(rel, _)| rel.clone())).collect()
    }

    /// True when every record and sub-document of `before` is in `self` under the same name,
    /// and every other file of `before` is too, order files excepted.
    pub(crate) fn keeps_every_file_and_name_of(&self, before: &DataFiles) -> bool {
        let keyed = before
            .with_entries_of(self)
            .all(|(e, new)| new.is_some_and(|new| self.places.names.get(new.name) == before.places.names.get(e.name)));
        keyed
            && before.other.keys().all(|rel| {
                self.other.contains_key(rel) || matches!(DataPath::parse(rel, false), Ok(DataPath::Order { .. }))
            })
    }

    /// Each entry of `self` with the entry of `other` at the same place, if any. When both are
    /// sorted and name the same segments and kinds, the same place has the same key in both,
    /// and the two tables are walked side by side; otherwise each place is looked up.
    fn with_entries_of<'a>(&'a self, other: &'a DataFiles) -> impl Iterator<Item = (&'a Entry, Option<&'a Entry>)> {
        let same_keys = self.sorted
            && other.sorted
            && self.places.segments.strings == other.places.segments.strings
            && self.places.kinds.strings == other.places.kinds.strings;
        let mut next = 0;
        self.entries.iter().map(move |e| {
            if !same_keys {
                return (e, other.entry(&self.places.place(e.key)));
            }
            while other.entries.get(next).is_some_and(|o| o.key < e.key) {
                next += 1;
            }
            (e, other.entries.get(next).filter(|o| o.key == e.key))
        })
    }

    /// The entry of the record's or sub-document's file at `place`.
    fn entry(&self, place: &Place<'_>) -> Option<&Entry> {
        let key = self.places.find(place)?;
        self.entries.binary_search_by_key(&key, |e| e.key).ok().map(|at| &self.entries[at])
    }

    /// Writes the table as the build index holds it.
    pub(crate) fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        self.places.encode(out)?;
        put_u64(out, self.entries.len() as u64)?;
        for e in &self.entries {
            e.encode(out)?;
        }
        put_u64(out, self.other.len() as u64)?;
        for (rel, file) in &self.other {
            put_bytes(out, rel.as_bytes())?;
            out.write_all(&stamp_bytes(&file.stamp))?;
            out.write_all(file.hash.0.as_bytes())?;
        }
        put_u64(out, self.groups.len() as u64)?;
        for (rel, groups) in &self.groups {
            put_bytes(out, rel.as_bytes())?;
            put_u64(out, groups.len() as u64)?;
            for group in groups {
                out.write_all(group)?;
            }
        }
        Ok(())
    }

    /// Reads the table as [`DataFiles::encode`] wrote it, checking that its entries add up.
    pub(crate) fn decode(input: &mut Decoder<impl Read>) -> Result<DataFiles, String> {
        let places = Places::decode(input)?;
        let n = input.count(ENTRY_BYTES)?;
        // Sized once: collected, the vector would double its way up to twice the entries.
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            entries.push(Entry::decode(input)?);
        }
        let mut other = BTreeMap::new();
        for _ in 0..input.count(1)? {
            let rel = input.string()?;
            let (stamp, hash) = (input.stamp()?, input.hash()?);
            other.insert(rel, DataFile { stamp, hash, name: None, line: None });
        }
        let mut groups = BTreeMap::new();
        for _ in 0..input.count(1)? {
            let rel = input.string()?;
            let n = input.count(32)?;
            let mut hashes = Vec::with_capacity(n);
            for _ in 0..n {
                hashes.push(input.array::<32>()?);
            }
            groups.insert(rel, hashes);
        }
        check_entries(&places, &entries)?;
        Ok(DataFiles { places, entries, other, groups, sorted: true })
    }
}

/// The hashes of one resource's records and sub-documents ([`DataFiles::cursor`]).
pub(crate) struct HashCursor<'a> {
    files: &'a DataFiles,
    segment: Option<u32>,
    /// The resource's entries.
    range: std::ops::Range<usize>,
    /// The entry after the last one found.
    next: usize,
}

impl HashCursor<'_> {
    /// The hash of the data of the record `id` (`kind` `None`) or of its sub-document `kind`.
    pub(crate) fn hash(&mut self, kind: Option<&str>, id: i64) -> Option<[u8; 32]> {
        let kind = match kind {
            None => 0,
            Some(kind) => self.files.places.kinds.find(kind)? + 1,
        };
        let key = Key { segment: self.segment?, id, kind };
        let entries = &self.files.entries[self.range.clone()];
        let next = self.next - self.range.start;
        // a few entries on (a record's sub-documents follow it), else anywhere
        let ahead = entries.get(next..).unwrap_or_default().iter().take(4).position(|e| e.key >= key);
        let at = match ahead.map(|i| next + i) {
            Some(at) if entries[at].key == key => at,
            _ => entries.binary_search_by_key(&key, |e| e.key).ok()?,
        };
        self.next = self.range.start + at + 1;
        Some(entries[at].hash)
    }
}

/// Writes the data file of `place`, as [`Place::data_file`] makes it, to the end of `path`:
/// one buffer for every file, not a string each.
fn write_data_file(place: &Place<'_>, path: &mut Vec<u8>) {
    path.extend_from_slice(place.segment.as_bytes());
    path.push(b'/');
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut id = place.id.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (id % 10) as u8;
        id /= 10;
        if id == 0 {
            break;
        }
    }
    if place.id < 0 {
        path.push(b'-');
    }
    path.extend_from_slice(&digits[at..]);
    if let Some(kind) = place.kind {
        path.push(b'/');
        path.extend_from_slice(kind.as_bytes());
    }
    path.extend_from_slice(b".json");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_file_is_written_as_its_place_makes_it() {
        for id in [0, 7, -12, 1_000_000, i64::MIN, i64::MAX] {
            for kind in [None, Some("encounters")] {
                let place = Place { segment: "creature", kind, id };
                let mut path = b"before ".to_vec();
                write_data_file(&place, &mut path);
                assert_eq!(String::from_utf8(path).unwrap(), format!("before {}", place.data_file()));
            }
        }
    }
}
