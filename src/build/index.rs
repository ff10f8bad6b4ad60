//! The build index: what the tree in `out/` was made from, kept beside it as
//! `.<out>.gen-index` so that the next build does only the work the change needs.
//!
//! It records, for the tree whose manifest it names (by the manifest file's own stamp):
//! - the settings the tree was built with;
//! - every data file: its stamp (size, modification and change time, inode), its hash and,
//!   for a record, its name;
//! - each list's entries, as one hash per resource;
//! - what rendering saw for the schemas of `openapi.json`;
//! - every document of the tree: its hash, and the stamp its file had when the build left it.
//!
//! The format is binary and compact (docs/builds.md, "The build index"): one fixed-size entry
//! per data file and per document, keyed by resource, record id and sub-document kind; paths
//! are derived from the key, not stored, and names are stored once. It starts with a magic and
//! a version and ends with a BLAKE3 checksum of everything before it: an index of another
//! version, a damaged one or a truncated one is ignored with a one-line note, and the build is
//! then a full one, never a wrong tree.
//!
//! Nothing in it is trusted blindly: a file, of the data or of the tree, is read again unless
//! its stamp is unchanged and it last changed well before the build that recorded it started
//! (see [`Index::trusted`]); it is read only from a regular file, at most [`MAX_INDEX_BYTES`].

use crate::build::schema::Inferred;
use crate::build::tree_fs::TreeDir;
use crate::fsutil::{self, NotRead};
use crate::fsutil::{Stamp, beside};
use crate::layout;
use crate::manifest::{MANIFEST_FILE, TreeSettings, is_tree_path};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Version of the index's format; another version is ignored (the next build is a full one).
/// 3: binary, one fixed-size entry per data file and per document (2 was JSON, one entry per
/// path of the tree).
pub const FORMAT: u32 = 3;

/// The first bytes of an index file.
const MAGIC: &[u8; 8] = b"genindex";

/// How long before a build started a file must have last changed for its stamp to be trusted:
/// a file changed later may have changed again within the same tick of the file system's clock
/// (coarse clocks tick every few milliseconds; some file systems keep seconds or two).
pub const UNTRUSTED_WINDOW_NS: i64 = 2_000_000_000;

/// Largest build index read (4 GiB): the index of a tree of a million records is about 200 MB.
/// A larger file is not one gen wrote; it is ignored (and replaced) with a note.
pub const MAX_INDEX_BYTES: u64 = 4 << 30;

/// Bytes of one entry in the index file: a data file's (see [`DataFiles`]) or a document's (see
/// [`TreeDocs`]; plus [`STAMP_BYTES`] for its `.gz` sibling in a tree built with `--gzip`).
pub const ENTRY_BYTES: usize = KEY_BYTES + NAME_BYTES + STAMP_BYTES + 32;
const KEY_BYTES: usize = 16;
const NAME_BYTES: usize = 8;
const STAMP_BYTES: usize = 32;

/// What a check of the tree against its index found (see [`Index::verify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    /// A file is not as the index says the build left it.
    Changed,
    /// Every file is; `rehashed` when some had to be read to tell (their stamps were too
    /// recent to trust), so that a new index would let the next build trust them.
    Intact { rehashed: bool },
}

/// A BLAKE3 hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hash(pub blake3::Hash);

/// One file of the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    pub stamp: Stamp,
    pub hash: Hash,
    /// A record's name.
    pub name: Option<String>,
}

/// One document of the tree: the file at each of its paths (they are hard links of one file,
/// so they share one stamp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeFile {
    /// BLAKE3 of its bytes, as in the manifest.
    pub hash: Hash,
    pub stamp: Stamp,
    /// The stamp of its `.gz` sibling, in a tree built with `--gzip`.
    pub gz: Option<Stamp>,
}

/// Which document or data file: a record (`kind` `None`) or one of its sub-documents, in the
/// resource `segment`, by the record's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place<'a> {
    pub segment: &'a str,
    pub kind: Option<&'a str>,
    pub id: i64,
}

impl<'a> Place<'a> {
    /// The place of the data file `rel` (relative to the data folder): `<segment>/<id>.json`
    /// is a record, `<segment>/<id>/<kind>.json` a sub-document; other files have none.
    pub fn of_data_file(rel: &'a str) -> Option<Place<'a>> {
        let stem = rel.strip_suffix(".json")?;
        let mut parts = stem.split('/');
        let (segment, id) = (parts.next()?, crate::config::parse_id(parts.next()?)?);
        let kind = parts.next();
        parts.next().is_none().then_some(Place { segment, kind, id })
    }

    /// The data file of this place, relative to the data folder.
    pub fn data_file(&self) -> String {
        match self.kind {
            None => format!("{}/{}.json", self.segment, self.id),
            Some(kind) => format!("{}/{}/{kind}.json", self.segment, self.id),
        }
    }

    /// The path of this place's document in the tree under `key` (its id or its name).
    pub fn tree_path(&self, key: impl std::fmt::Display) -> String {
        match self.kind {
            None => layout::record_path(self.segment, key),
            Some(kind) => layout::sub_document_path(self.segment, key, kind),
        }
    }
}

/// The build index of one tree.
#[derive(Debug, Clone)]
pub struct Index {
    /// Stamp of the `manifest.json` this index describes: another manifest means the tree was
    /// changed after the index was written, and the index is ignored.
    pub manifest: Stamp,
    /// When the build that wrote the index started (nanoseconds since the epoch).
    pub started_ns: i64,
    pub settings: TreeSettings,
    /// Hash of each resource's list entries (ids and names, in list order).
    pub lists: BTreeMap<String, String>,
    /// What rendering saw, for the schemas: (segment, sub-document kind, inference).
    pub schemas: Vec<(String, Option<String>, Inferred)>,
    /// Every data file.
    pub data: DataFiles,
    /// Every document of the tree (the manifest excepted).
    pub docs: TreeDocs,
}

/// The small part of the index, stored as JSON inside the binary file.
#[derive(Serialize, Deserialize)]
struct Head {
    manifest: Stamp,
    started_ns: i64,
    settings: TreeSettings,
    lists: BTreeMap<String, String>,
    schemas: Vec<(String, Option<String>, Inferred)>,
}

impl Index {
    /// Where the index of the tree in `out` is kept: beside it, so that nothing is published.
    pub fn path(out: &Path) -> PathBuf {
        beside(out, "gen-index")
    }

    /// Reads the index of the tree in `out`, if there is one that describes its current
    /// manifest. An index that is not a regular file, is larger than [`MAX_INDEX_BYTES`], is of
    /// another version, fails its checksum or lists a path no build writes is ignored with a
    /// one-line note (the build is then a full one).
    pub fn read(out: &Path) -> Option<Index> {
        let path = Index::path(out);
        let ignored = |why: String| {
            eprintln!("note: {why}: ignoring the build index; this build checks every file and writes a new index");
        };
        let file = match fsutil::open_regular_file(&path, MAX_INDEX_BYTES, false) {
            Ok(file) => file,
            Err(NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                ignored(fsutil::why_not_read(&path, MAX_INDEX_BYTES, &e));
                return None;
            }
        };
        let size = file.metadata().map_or(0, |m| m.len());
        let index = match decode(std::io::BufReader::with_capacity(1 << 20, file.take(MAX_INDEX_BYTES)), size) {
            Ok(index) => index,
            Err(why) => {
                ignored(format!("{} {why}", path.display()));
                return None;
            }
        };
        if let Some(bad) = index.docs.other.iter().flat_map(|doc| &doc.paths).find(|path| !is_tree_path(path)) {
            ignored(format!("{} lists {bad:?}, which is not a path of a gen tree", path.display()));
            return None;
        }
        let manifest = Stamp::of_file(&out.join(MANIFEST_FILE))?;
        (index.manifest == manifest).then_some(index)
    }

    /// Writes the index of the tree in `out` (beside it, then renamed into place).
    pub fn write(&self, out: &Path) -> Result<()> {
        let path = Index::path(out);
        // One writer at a time (the build holds the lock on the tree): a fixed name, so that a
        // killed build's leftover is simply overwritten by the next one.
        let temporary = beside(out, "gen-index.tmp");
        let written = (|| -> std::io::Result<()> {
            let file = fsutil::create_new(&temporary).map_err(std::io::Error::other)?;
            let mut out = Checksummed::new(std::io::BufWriter::with_capacity(1 << 20, file));
            self.encode(&mut out)?;
            let (mut file, sum) = out.finish();
            file.write_all(sum.as_bytes())?;
            file.flush()
        })();
        written
            .and_then(|()| std::fs::rename(&temporary, &path))
            .with_context(|| format!("cannot write the build index {}", path.display()))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&temporary);
            })
    }

    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&FORMAT.to_le_bytes())?;
        let head = Head {
            manifest: self.manifest,
            started_ns: self.started_ns,
            settings: self.settings.clone(),
            lists: self.lists.clone(),
            schemas: self.schemas.clone(),
        };
        put_bytes(out, &serde_json::to_vec(&head).map_err(std::io::Error::other)?)?;
        self.data.encode(out)?;
        self.docs.encode(out)
    }

    /// True when a file whose stamp is unchanged since this index recorded it can be taken as
    /// unchanged: it last changed well before that build started. A file that changed just
    /// before or during that build is hashed again, whatever its stamp says. The same rule
    /// holds for data files and for the tree's own files (whose stamps are taken after the
    /// build's commit, so every file a build wrote is read once more by the next build).
    pub fn trusted(&self, stamp: &Stamp) -> bool {
        stamp.ctime_ns < self.started_ns - UNTRUSTED_WINDOW_NS && stamp.mtime_ns < self.started_ns - UNTRUSTED_WINDOW_NS
    }

    /// Whether every file of the tree is as this index says the build left it (see
    /// [`Index::check_file`]): every path of every document, in parallel.
    pub fn verify(&self, tree: &TreeDir) -> Verified {
        use rayon::prelude::*;
        use std::sync::atomic::{AtomicBool, Ordering};
        let rehashed = AtomicBool::new(false);
        let gzip = self.settings.gzip;
        let check = |path: &str, file: &TreeFile| match self.check_file(tree, path, file, gzip) {
            Some(read) => {
                if read {
                    rehashed.store(true, Ordering::Relaxed);
                }
                true
            }
            None => false,
        };
        let docs = &self.docs;
        let keyed = (0..docs.entries.len()).into_par_iter().with_min_len(4096).all(|i| {
            let (place, name, file) = docs.entry(i);
            check(&place.tree_path(place.id), &file) && name.is_none_or(|name| check(&place.tree_path(name), &file))
        });
        let intact = keyed && docs.other.par_iter().all(|doc| doc.paths.iter().all(|path| check(path, &doc.file)));
        match intact {
            true => Verified::Intact { rehashed: rehashed.into_inner() },
            false => Verified::Changed,
        }
    }

    /// Whether the file at `path` in `tree` is as `file` says the build left it, with its `.gz`
    /// sibling when `gzip` wants one (and without one otherwise): `None` when it is not;
    /// `Some(true)` when telling took reading it. A stamp is enough only when it is unchanged
    /// and [`Index::trusted`]: a file changed just before its stamp was taken (during the
    /// commit, say) may have changed again within the same clock tick, so its bytes are read
    /// and checked against its hash (and its `.gz` sibling's, unpacked, against them).
    pub fn check_file(&self, tree: &TreeDir, path: &str, file: &TreeFile, gzip: bool) -> Option<bool> {
        let gz_rel = || format!("{path}.gz");
        let same_gz = match file.gz {
            Some(gz) => gzip && tree.stamp(&gz_rel()) == Some(gz),
            None => !gzip,
        };
        if !same_gz || tree.stamp(path) != Some(file.stamp) {
            return None;
        }
        let gz_trusted = file.gz.is_none_or(|gz| self.trusted(&gz));
        if self.trusted(&file.stamp) && gz_trusted {
            return Some(false);
        }
        let bytes = tree.read(path, file.stamp.size)?;
        if blake3::hash(&bytes) != file.hash.0 {
            return None;
        }
        if let Some(gz) = file.gz.filter(|_| !gz_trusted) {
            let packed = tree.read(&gz_rel(), gz.size)?;
            let mut unpacked = Vec::with_capacity(bytes.len() + 1);
            let decoder = flate2::read::GzDecoder::new(&packed[..]);
            decoder.take(bytes.len() as u64 + 1).read_to_end(&mut unpacked).ok()?;
            if unpacked != bytes {
                return None;
            }
        }
        (tree.stamp(path) == Some(file.stamp)).then_some(true)
    }
}

/// Strings stored once, each named by its position: resource segments and sub-document kinds.
#[derive(Debug, Clone, Default)]
struct Interned {
    strings: Vec<String>,
}

impl Interned {
    fn find(&self, s: &str) -> Option<u32> {
        self.strings.iter().position(|x| x == s).map(|i| i as u32)
    }

    fn intern(&mut self, s: &str) -> u32 {
        self.find(s).unwrap_or_else(|| {
            self.strings.push(s.to_string());
            (self.strings.len() - 1) as u32
        })
    }

    fn get(&self, i: u32) -> &str {
        &self.strings[i as usize]
    }

    /// Sorts the strings; returns each old position's new one.
    fn sorted(&mut self) -> Vec<u32> {
        let mut order: Vec<usize> = (0..self.strings.len()).collect();
        order.sort_by(|a, b| self.strings[*a].cmp(&self.strings[*b]));
        let mut new_of_old = vec![0u32; order.len()];
        for (new, old) in order.iter().enumerate() {
            new_of_old[*old] = new as u32;
        }
        let mut strings: Vec<Option<String>> = std::mem::take(&mut self.strings).into_iter().map(Some).collect();
        self.strings = order.iter().map(|&old| strings[old].take().expect("each once")).collect();
        new_of_old
    }
}

/// A record's place in fixed-size form: indexes into the interned segments and kinds (kind 0:
/// the record itself, k: the sub-document kind k − 1). Ordered by segment, id, kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Key {
    segment: u32,
    id: i64,
    kind: u32,
}

/// Names stored one after another in one string; an entry holds (offset, length).
#[derive(Debug, Clone, Default)]
struct Names {
    text: String,
}

/// No name.
const NO_NAME: (u32, u32) = (0, u32::MAX);

impl Names {
    fn add(&mut self, name: Option<&str>) -> (u32, u32) {
        match name {
            None => NO_NAME,
            Some(name) => {
                let at = self.text.len() as u32;
                self.text.push_str(name);
                (at, name.len() as u32)
            }
        }
    }

    fn get(&self, (at, len): (u32, u32)) -> Option<&str> {
        (len != u32::MAX).then(|| self.text.get(at as usize..at as usize + len as usize)).flatten()
    }
}

/// The places and names of a table of entries, interned.
#[derive(Debug, Clone, Default)]
struct Places {
    segments: Interned,
    kinds: Interned,
    names: Names,
}

impl Places {
    fn key(&mut self, place: &Place<'_>) -> Key {
        let kind = place.kind.map_or(0, |kind| self.kinds.intern(kind) + 1);
        Key { segment: self.segments.intern(place.segment), id: place.id, kind }
    }

    /// The key of `place`, when its segment and kind are known here.
    fn find(&self, place: &Place<'_>) -> Option<Key> {
        let kind = match place.kind {
            None => 0,
            Some(kind) => self.kinds.find(kind)? + 1,
        };
        Some(Key { segment: self.segments.find(place.segment)?, id: place.id, kind })
    }

    fn place(&self, key: Key) -> Place<'_> {
        let kind = (key.kind > 0).then(|| self.kinds.get(key.kind - 1));
        Place { segment: self.segments.get(key.segment), kind, id: key.id }
    }

    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        for table in [&self.segments, &self.kinds] {
            put_u64(out, table.strings.len() as u64)?;
            for s in &table.strings {
                put_bytes(out, s.as_bytes())?;
            }
        }
        put_bytes(out, self.names.text.as_bytes())
    }

    fn decode(input: &mut Decoder<impl Read>) -> Result<Places, String> {
        let mut places = Places::default();
        for table in [&mut places.segments, &mut places.kinds] {
            let n = input.count(1)?;
            for _ in 0..n {
                table.strings.push(input.string()?);
            }
        }
        places.names.text = input.string()?;
        Ok(places)
    }
}

/// One data file's or document's entry: [`ENTRY_BYTES`] in the file.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: Key,
    /// A record's name; for a document, the name it is also published under, when it is.
    name: (u32, u32),
    stamp: Stamp,
    hash: [u8; 32],
}

impl Entry {
    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut bytes = [0u8; ENTRY_BYTES];
        let rest = put_key(&mut bytes, self.key, self.name);
        rest[..STAMP_BYTES].copy_from_slice(&stamp_bytes(&self.stamp));
        rest[STAMP_BYTES..].copy_from_slice(&self.hash);
        out.write_all(&bytes)
    }

    fn decode(input: &mut Decoder<impl Read>) -> Result<Entry, String> {
        let bytes: [u8; ENTRY_BYTES] = input.array()?;
        let (key, name, rest) = get_key(&bytes);
        let hash = rest[STAMP_BYTES..].try_into().expect("32 bytes");
        Ok(Entry { key, name, stamp: get_stamp(&rest[..STAMP_BYTES]), hash })
    }
}

/// Every data file of a build: records and sub-documents as fixed-size entries sorted by their
/// key; the few others (`gen.json`, order files) by path.
#[derive(Debug, Clone, Default)]
pub struct DataFiles {
    places: Places,
    entries: Vec<Entry>,
    other: BTreeMap<String, DataFile>,
    sorted: bool,
}

impl DataFiles {
    /// Adds the data file `rel` (relative to the data folder). Call [`DataFiles::finish`] once
    /// every file is in.
    pub fn insert(&mut self, rel: &str, file: DataFile) {
        match Place::of_data_file(rel) {
            Some(place) => {
                let key = self.places.key(&place);
                let name = self.places.names.add(file.name.as_deref());
                self.entries.push(Entry { key, name, stamp: file.stamp, hash: *file.hash.0.as_bytes() });
                self.sorted = false;
            }
            None => {
                self.other.insert(rel.to_string(), file);
            }
        }
    }

    /// Makes room for `n` more files.
    pub fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
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
        self.entries.sort_unstable_by_key(|e| e.key);
        self.entries.shrink_to_fit();
        self.sorted = true;
    }

    /// One hash of every file's path and hash, in the order of [`DataFiles::finish`].
    pub fn combined_hash(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        let mut add = |path: &str, hash: &[u8; 32]| {
            hasher.update(path.as_bytes());
            hasher.update(b"\0");
            hasher.update(hash);
        };
        for (rel, file) in &self.other {
            add(rel, file.hash.0.as_bytes());
        }
        for e in &self.entries {
            add(&self.places.place(e.key).data_file(), &e.hash);
        }
        hasher.finalize().to_hex().to_string()
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.entries.len() + self.other.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file `rel` (relative to the data folder).
    pub fn get(&self, rel: &str) -> Option<DataFile> {
        match Place::of_data_file(rel) {
            Some(place) => self.get_place(&place),
            None => self.other.get(rel).cloned(),
        }
    }

    fn get_place(&self, place: &Place<'_>) -> Option<DataFile> {
        let key = self.places.find(place)?;
        let at = self.entries.binary_search_by_key(&key, |e| e.key).ok()?;
        Some(self.file(&self.entries[at]))
    }

    fn file(&self, entry: &Entry) -> DataFile {
        DataFile {
            stamp: entry.stamp,
            hash: Hash(blake3::Hash::from_bytes(entry.hash)),
            name: self.places.names.get(entry.name).map(str::to_string),
        }
    }

    /// Every file: (path relative to the data folder, file).
    pub fn iter(&self) -> impl Iterator<Item = (String, DataFile)> + '_ {
        let keyed = self.entries.iter().map(|e| (self.places.place(e.key).data_file(), self.file(e)));
        keyed.chain(self.other.iter().map(|(rel, file)| (rel.clone(), file.clone())))
    }

    /// True when every file of `self` is in `other` with the same stamp, and no more.
    pub fn same_stamps(&self, other: &DataFiles) -> bool {
        self.len() == other.len()
            && self
                .entries
                .iter()
                .all(|e| other.get_place(&self.places.place(e.key)).is_some_and(|o| o.stamp == e.stamp))
            && self.other.iter().all(|(rel, f)| other.other.get(rel).is_some_and(|o| o.stamp == f.stamp))
    }

    /// The files of `self` that `before` does not have with the same hash (paths relative to the
    /// data folder).
    pub fn changed_since(&self, before: &DataFiles) -> Vec<String> {
        let keyed = self.entries.iter().filter_map(|e| {
            let place = self.places.place(e.key);
            let same = before.get_place(&place).is_some_and(|old| old.hash.0.as_bytes() == &e.hash);
            (!same).then(|| place.data_file())
        });
        let other = self.other.iter().filter(|(rel, f)| before.other.get(*rel).is_none_or(|old| old.hash != f.hash));
        keyed.chain(other.map(|(rel, _)| rel.clone())).collect()
    }

    /// True when every record and sub-document of `before` is in `self` under the same name,
    /// and every other file of `before` is too, order files excepted.
    pub fn keeps_every_file_and_name_of(&self, before: &DataFiles) -> bool {
        let keyed = before.entries.iter().all(|e| {
            let old_name = before.places.names.get(e.name);
            self.get_place(&before.places.place(e.key)).is_some_and(|new| new.name.as_deref() == old_name)
        });
        keyed
            && before.other.keys().all(|rel| {
                self.other.contains_key(rel)
                    || (rel.split('/').count() == 2 && rel.ends_with(&format!("/{}", crate::config::ORDER_FILE)))
            })
    }

    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
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
        Ok(())
    }

    fn decode(input: &mut Decoder<impl Read>) -> Result<DataFiles, String> {
        let places = Places::decode(input)?;
        let n = input.count(ENTRY_BYTES)?;
        let entries = (0..n).map(|_| Entry::decode(input)).collect::<Result<Vec<_>, _>>()?;
        let mut other = BTreeMap::new();
        for _ in 0..input.count(1)? {
            let rel = input.string()?;
            let (stamp, hash) = (input.stamp()?, input.hash()?);
            other.insert(rel, DataFile { stamp, hash, name: None });
        }
        check_entries(&places, &entries)?;
        Ok(DataFiles { places, entries, other, sorted: true })
    }
}

/// A document of the tree that is not a record's or a sub-document's (the root, meta, OpenAPI,
/// list pages), with its paths.
#[derive(Debug, Clone)]
pub struct OtherDoc {
    pub paths: Vec<String>,
    pub file: TreeFile,
}

/// Every document of a tree. A record or sub-document is a fixed-size entry keyed by its
/// place, its paths derived (by id, and by name when it has a name path); other documents are
/// listed with their paths (a few per list and page size).
#[derive(Debug, Clone, Default)]
pub struct TreeDocs {
    places: Places,
    entries: Vec<Entry>,
    /// The `.gz` sibling's stamp of each entry, in a tree built with `--gzip` (else empty).
    gz: Vec<Stamp>,
    other: Vec<OtherDoc>,
    other_by_path: HashMap<String, usize>,
    /// Entries by (segment, name, kind), built on first lookup by name.
    by_name: OnceLock<HashMap<(u32, String, u32), usize>>,
}

impl TreeDocs {
    /// Adds the document at `place`, also published under `name` when given.
    pub fn push_keyed(&mut self, place: &Place<'_>, name: Option<&str>, file: TreeFile) {
        let key = self.places.key(place);
        let name = self.places.names.add(name);
        if let Some(gz) = file.gz {
            self.gz.resize(self.entries.len(), Stamp::default());
            self.gz.push(gz);
        }
        self.entries.push(Entry { key, name, stamp: file.stamp, hash: *file.hash.0.as_bytes() });
    }

    /// Adds a document that is not a record's or a sub-document's, published at `paths`.
    pub fn push_other(&mut self, paths: Vec<String>, file: TreeFile) {
        for path in &paths {
            self.other_by_path.insert(path.clone(), self.other.len());
        }
        self.other.push(OtherDoc { paths, file });
    }

    /// Makes room for `n` more documents.
    pub fn reserve(&mut self, n: usize) {
        self.entries.reserve_exact(n);
    }

    /// Sorts the entries by key, for lookups (in place: a tree of a million records has a
    /// hundred MB of them).
    pub fn finish(&mut self) {
        if self.gz.is_empty() {
            self.entries.sort_unstable_by_key(|e| e.key);
            return;
        }
        self.gz.resize(self.entries.len(), Stamp::default());
        let mut pairs: Vec<(Entry, Stamp)> = self.entries.drain(..).zip(self.gz.drain(..)).collect();
        pairs.sort_unstable_by_key(|(e, _)| e.key);
        (self.entries, self.gz) = pairs.into_iter().unzip();
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.entries.len() + self.other.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entry(&self, i: usize) -> (Place<'_>, Option<&str>, TreeFile) {
        let e = &self.entries[i];
        let file =
            TreeFile { hash: Hash(blake3::Hash::from_bytes(e.hash)), stamp: e.stamp, gz: self.gz.get(i).copied() };
        (self.places.place(e.key), self.places.names.get(e.name), file)
    }

    /// The document at `place`, when it is published under the same name as `name` (or under
    /// none when `None`): its paths are then the same.
    pub fn keyed(&self, place: &Place<'_>, name: Option<&str>) -> Option<TreeFile> {
        let key = self.places.find(place)?;
        let at = self.entries.binary_search_by_key(&key, |e| e.key).ok()?;
        let (_, old_name, file) = self.entry(at);
        (old_name == name).then_some(file)
    }

    /// The other document at exactly `paths`.
    pub fn other(&self, paths: &[String]) -> Option<TreeFile> {
        let doc = &self.other[*self.other_by_path.get(paths.first()?)?];
        (doc.paths == paths).then_some(doc.file)
    }

    /// The document at the tree path `path`, whatever its other paths.
    pub fn file(&self, path: &str) -> Option<TreeFile> {
        if let Some(&at) = self.other_by_path.get(path) {
            return Some(self.other[at].file);
        }
        let rest = path.strip_prefix(layout::API_ROOT)?.strip_prefix('/')?.strip_suffix("/index.json")?;
        let mut parts = rest.split('/');
        let (segment, key, kind) = (parts.next()?, parts.next()?, parts.next());
        if parts.next().is_some() {
            return None;
        }
        match crate::config::parse_id(key) {
            Some(id) => self.keyed_any_name(&Place { segment, kind, id }),
            None => {
                let by_name = self.by_name.get_or_init(|| self.names_map());
                let segment = self.places.segments.find(segment)?;
                let kind = match kind {
                    None => 0,
                    Some(kind) => self.places.kinds.find(kind)? + 1,
                };
                let at = *by_name.get(&(segment, key.to_string(), kind))?;
                Some(self.entry(at).2)
            }
        }
    }

    fn keyed_any_name(&self, place: &Place<'_>) -> Option<TreeFile> {
        let key = self.places.find(place)?;
        let at = self.entries.binary_search_by_key(&key, |e| e.key).ok()?;
        Some(self.entry(at).2)
    }

    fn names_map(&self) -> HashMap<(u32, String, u32), usize> {
        let named = self.entries.iter().enumerate().filter_map(|(i, e)| {
            let name = self.places.names.get(e.name)?;
            Some(((e.key.segment, name.to_string(), e.key.kind), i))
        });
        named.collect()
    }

    /// Every path of every document, with its file.
    pub fn paths(&self) -> impl Iterator<Item = (String, TreeFile)> + '_ {
        let keyed = (0..self.entries.len()).flat_map(move |i| {
            let (place, name, file) = self.entry(i);
            let by_name = name.map(|name| (place.tree_path(name), file));
            std::iter::once((place.tree_path(place.id), file)).chain(by_name)
        });
        keyed.chain(self.other.iter().flat_map(|doc| doc.paths.iter().map(|path| (path.clone(), doc.file))))
    }

    /// Every document's paths with its file, one document at a time: for each keyed document
    /// its place, the name it is published under, and its file; then the others.
    pub fn each_keyed(&self) -> impl Iterator<Item = (Place<'_>, Option<&str>, TreeFile)> + '_ {
        (0..self.entries.len()).map(move |i| self.entry(i))
    }

    /// The documents that are not records' or sub-documents'.
    pub fn others(&self) -> &[OtherDoc] {
        &self.other
    }

    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        self.places.encode(out)?;
        put_u64(out, self.entries.len() as u64)?;
        out.write_all(&[u8::from(!self.gz.is_empty())])?;
        for (i, e) in self.entries.iter().enumerate() {
            e.encode(out)?;
            if let Some(gz) = self.gz.get(i) {
                out.write_all(&stamp_bytes(gz))?;
            }
        }
        put_u64(out, self.other.len() as u64)?;
        for doc in &self.other {
            put_u64(out, doc.paths.len() as u64)?;
            for path in &doc.paths {
                put_bytes(out, path.as_bytes())?;
            }
            out.write_all(&stamp_bytes(&doc.file.stamp))?;
            out.write_all(doc.file.hash.0.as_bytes())?;
            match doc.file.gz {
                Some(gz) => {
                    out.write_all(&[1])?;
                    out.write_all(&stamp_bytes(&gz))?;
                }
                None => out.write_all(&[0])?,
            }
        }
        Ok(())
    }

    fn decode(input: &mut Decoder<impl Read>) -> Result<TreeDocs, String> {
        let mut docs = TreeDocs { places: Places::decode(input)?, ..TreeDocs::default() };
        let n = input.count(ENTRY_BYTES)?;
        let with_gz = input.byte()? == 1;
        docs.entries.reserve_exact(n);
        for _ in 0..n {
            docs.entries.push(Entry::decode(input)?);
            if with_gz {
                docs.gz.push(input.stamp()?);
            }
        }
        for _ in 0..input.count(1)? {
            let paths = (0..input.count(1)?).map(|_| input.string()).collect::<Result<Vec<_>, _>>()?;
            let (stamp, hash) = (input.stamp()?, input.hash()?);
            let gz = if input.byte()? == 1 { Some(input.stamp()?) } else { None };
            docs.push_other(paths, TreeFile { hash, stamp, gz });
        }
        check_entries(&docs.places, &docs.entries)?;
        Ok(docs)
    }
}

/// Checks what decoding cannot: entries sorted by key without repeats, and every index into
/// the interned strings and names in range (a file that passes its checksum but was not written
/// by this version would otherwise panic on lookup).
fn check_entries(places: &Places, entries: &[Entry]) -> Result<(), String> {
    let in_range = |e: &Entry| {
        (e.key.segment as usize) < places.segments.strings.len()
            && (e.key.kind as usize) <= places.kinds.strings.len()
            && (e.name == NO_NAME || places.names.get(e.name).is_some())
    };
    let sorted = entries.windows(2).all(|w| w[0].key < w[1].key);
    match sorted && entries.iter().all(in_range) {
        true => Ok(()),
        false => Err("is not one this version of gen wrote (its entries do not add up)".to_string()),
    }
}

fn put_key(bytes: &mut [u8], key: Key, name: (u32, u32)) -> &mut [u8] {
    bytes[0..4].copy_from_slice(&key.segment.to_le_bytes());
    bytes[4..8].copy_from_slice(&key.kind.to_le_bytes());
    bytes[8..16].copy_from_slice(&key.id.to_le_bytes());
    bytes[16..20].copy_from_slice(&name.0.to_le_bytes());
    bytes[20..24].copy_from_slice(&name.1.to_le_bytes());
    &mut bytes[KEY_BYTES + NAME_BYTES..]
}

fn get_key(bytes: &[u8]) -> (Key, (u32, u32), &[u8]) {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let key = Key { segment: u32_at(0), kind: u32_at(4), id: i64::from_le_bytes(bytes[8..16].try_into().expect("8")) };
    (key, (u32_at(16), u32_at(20)), &bytes[KEY_BYTES + NAME_BYTES..])
}

fn stamp_bytes(stamp: &Stamp) -> [u8; STAMP_BYTES] {
    let mut bytes = [0u8; STAMP_BYTES];
    bytes[0..8].copy_from_slice(&stamp.size.to_le_bytes());
    bytes[8..16].copy_from_slice(&stamp.mtime_ns.to_le_bytes());
    bytes[16..24].copy_from_slice(&stamp.ctime_ns.to_le_bytes());
    bytes[24..32].copy_from_slice(&stamp.ino.to_le_bytes());
    bytes
}

fn get_stamp(bytes: &[u8]) -> Stamp {
    let at = |i: usize| <[u8; 8]>::try_from(&bytes[i..i + 8]).expect("8 bytes");
    Stamp {
        size: u64::from_le_bytes(at(0)),
        mtime_ns: i64::from_le_bytes(at(8)),
        ctime_ns: i64::from_le_bytes(at(16)),
        ino: u64::from_le_bytes(at(24)),
    }
}

fn put_u64(out: &mut impl Write, n: u64) -> std::io::Result<()> {
    out.write_all(&n.to_le_bytes())
}

fn put_bytes(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    put_u64(out, bytes.len() as u64)?;
    out.write_all(bytes)
}

/// Decodes an index file: magic, version, the head, the data files, the documents, and the
/// checksum of all that at the end.
fn decode(reader: impl Read, size: u64) -> Result<Index, String> {
    let mut input = Decoder { inner: Checksummed::new(reader), left: size };
    let mut magic = [0u8; 8];
    let read = input.exact(&mut magic);
    if read.is_err() || &magic != MAGIC {
        return Err(
            "is not a build index of this version of gen (a JSON index of an earlier version, or another file)"
                .to_string(),
        );
    }
    input.left = input.left.checked_sub(32).ok_or_else(damaged)?;
    let format = u32::from_le_bytes(input.array()?);
    if format != FORMAT {
        return Err(format!("has format {format}, this gen reads format {FORMAT}"));
    }
    let head: Head = serde_json::from_str(&input.string()?).map_err(|_| damaged())?;
    let data = DataFiles::decode(&mut input)?;
    let docs = TreeDocs::decode(&mut input)?;
    if input.left != 0 {
        return Err(damaged());
    }
    let (mut reader, sum) = input.inner.finish();
    let mut stored = [0u8; 32];
    reader.read_exact(&mut stored).map_err(|_| damaged())?;
    if stored != *sum.as_bytes() {
        return Err(damaged());
    }
    Ok(Index {
        manifest: head.manifest,
        started_ns: head.started_ns,
        settings: head.settings,
        lists: head.lists,
        schemas: head.schemas,
        data,
        docs,
    })
}

fn damaged() -> String {
    "is damaged or cut short (its checksum or its length does not match)".to_string()
}

/// Reads an index file's body, counting what is left before its checksum.
struct Decoder<R> {
    inner: Checksummed<R>,
    left: u64,
}

impl<R: Read> Decoder<R> {
    fn exact(&mut self, bytes: &mut [u8]) -> Result<(), String> {
        if (bytes.len() as u64) > self.left {
            return Err(damaged());
        }
        self.left -= bytes.len() as u64;
        self.inner.read_exact(bytes).map_err(|_| damaged())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut bytes = [0u8; N];
        self.exact(&mut bytes)?;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    /// A count of items of at least `item_bytes` each: more than the bytes left is damage.
    fn count(&mut self, item_bytes: usize) -> Result<usize, String> {
        let n = u64::from_le_bytes(self.array()?);
        if n.saturating_mul(item_bytes as u64) > self.left {
            return Err(damaged());
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.count(1)?;
        let mut bytes = vec![0u8; n];
        self.exact(&mut bytes)?;
        String::from_utf8(bytes).map_err(|_| damaged())
    }

    fn stamp(&mut self) -> Result<Stamp, String> {
        Ok(get_stamp(&self.array::<STAMP_BYTES>()?))
    }

    fn hash(&mut self) -> Result<Hash, String> {
        Ok(Hash(blake3::Hash::from_bytes(self.array()?)))
    }
}

/// A reader or writer that hashes every byte that passes through it.
struct Checksummed<T> {
    inner: T,
    hasher: blake3::Hasher,
}

impl<T> Checksummed<T> {
    fn new(inner: T) -> Checksummed<T> {
        Checksummed { inner, hasher: blake3::Hasher::new() }
    }

    fn finish(self) -> (T, blake3::Hash) {
        (self.inner, self.hasher.finalize())
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Checksummed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// The `.gz` sibling of a file of the tree.
pub fn gz_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".gz");
    PathBuf::from(name)
}

/// Nanoseconds since the epoch, now.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(n: u64) -> Stamp {
        Stamp { size: n, mtime_ns: n as i64, ctime_ns: n as i64 + 1, ino: n + 2 }
    }

    fn sample() -> Index {
        let mut data = DataFiles::default();
        let file = |n: u64, name: Option<&str>| DataFile {
            stamp: stamp(n),
            hash: Hash(blake3::hash(&n.to_le_bytes())),
            name: name.map(str::to_string),
        };
        data.insert("berry/2.json", file(2, Some("oran")));
        data.insert("berry/1.json", file(1, Some("cheri")));
        data.insert("berry/1/flavor.json", file(3, None));
        data.insert("gen.json", file(4, None));
        data.finish();
        let mut docs = TreeDocs::default();
        let tree = |n: u64| TreeFile { hash: Hash(blake3::hash(&n.to_le_bytes())), stamp: stamp(n), gz: None };
        docs.push_keyed(&Place { segment: "berry", kind: None, id: 2 }, Some("oran"), tree(5));
        docs.push_keyed(&Place { segment: "berry", kind: Some("flavor"), id: 1 }, Some("cheri"), tree(6));
        docs.push_other(vec![layout::ROOT_PATH.to_string()], tree(7));
        docs.finish();
        let settings = crate::build::BuildOptions::default()
            .settings(&crate::config::DataSettings::default(), "d".into())
            .expect("default settings");
        Index { manifest: stamp(9), started_ns: 10, settings, lists: BTreeMap::new(), schemas: Vec::new(), data, docs }
    }

    fn bytes(index: &Index) -> Vec<u8> {
        let mut out = Checksummed::new(Vec::new());
        index.encode(&mut out).unwrap();
        let (mut bytes, sum) = out.finish();
        bytes.extend_from_slice(sum.as_bytes());
        bytes
    }

    #[test]
    fn an_index_reads_back_as_written() {
        let index = sample();
        let written = bytes(&index);
        let read = decode(&written[..], written.len() as u64).unwrap();
        assert_eq!(read.data.iter().collect::<Vec<_>>(), index.data.iter().collect::<Vec<_>>());
        assert_eq!(read.docs.paths().collect::<Vec<_>>(), index.docs.paths().collect::<Vec<_>>());
        assert_eq!(read.data.get("berry/1.json").unwrap().name.as_deref(), Some("cheri"));
        let flavor = read.docs.file("api/v2/berry/cheri/flavor/index.json").unwrap();
        assert_eq!(flavor.stamp, stamp(6));
        assert_eq!(read.docs.file("api/v2/berry/1/flavor/index.json"), Some(flavor));
        assert_eq!(
            read.docs.keyed(&Place { segment: "berry", kind: None, id: 2 }, Some("oran")).unwrap().stamp,
            stamp(5)
        );
        assert_eq!(read.docs.keyed(&Place { segment: "berry", kind: None, id: 2 }, Some("other")), None);
        assert_eq!(bytes(&read), written, "the same index gives the same bytes");
    }

    #[test]
    fn a_damaged_cut_or_other_version_index_is_refused() {
        let written = bytes(&sample());
        for at in [0, 9, 20, written.len() / 2, written.len() - 1] {
            let mut damaged = written.clone();
            damaged[at] ^= 0x40;
            assert!(decode(&damaged[..], damaged.len() as u64).is_err(), "a flipped byte at {at} is caught");
        }
        for cut in [4, 12, written.len() / 2, written.len() - 1] {
            assert!(decode(&written[..cut], cut as u64).is_err(), "cut at {cut}");
        }
        let mut other = written.clone();
        other[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(decode(&other[..], other.len() as u64).unwrap_err().contains("format 2"));
        let json = br#"{"format":2,"files":{}}"#;
        assert!(decode(&json[..], json.len() as u64).unwrap_err().contains("not a build index of this version"));
    }
}
