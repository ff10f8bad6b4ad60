//! The build index's table of documents: every document of the tree, its hash and the stamp
//! its file had when the build left it, looked up by place (a record or sub-document) or by
//! path (the root, meta, OpenAPI, list pages).

use super::DocumentFile;
use crate::data::dataset::Spread;
use crate::data::recorded::codec::{Decoder, ENTRY_BYTES, Entry, put_bytes, put_u64, stamp_bytes};
use crate::data::recorded::places::{Places, check_entries};
use crate::data::recorded::{Hash, Place};
use crate::fsutil::Stamp;
use crate::tree::layout;
use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;
use std::hash::{BuildHasher, BuildHasherDefault};
use std::io::{Read, Write};
use std::sync::OnceLock;

/// A document of the tree that is not a record's or a sub-document's (the root, meta, OpenAPI,
/// list pages), with its paths.
#[derive(Debug, Clone)]
pub(crate) struct OtherDoc {
    /// Its paths in the tree.
    pub(crate) paths: Vec<String>,
    /// Its hash and stamps.
    pub(crate) file: DocumentFile,
}

/// Every document of a tree. A record or sub-document is a fixed-size entry keyed by its
/// place, its paths derived (by id, and by name when it has a name path); other documents are
/// listed with their paths (a few per list and page size).
#[derive(Debug, Clone, Default)]
pub(crate) struct DocumentFiles {
    pub(super) places: Places,
    pub(super) entries: Vec<Entry>,
    /// The `.gz` sibling's stamp of each entry, in a tree built with `--gzip` (else empty).
    pub(super) gz: Vec<Stamp>,
    pub(super) other: Vec<OtherDoc>,
    pub(super) other_by_path: PathIndex,
    /// Entries by (segment, name, kind), built on first lookup by name.
    pub(super) by_name: OnceLock<HashMap<(u32, String, u32), usize>>,
}

/// The documents that are not records' by each of their paths, without a copy of the path: by
/// a 64-bit hash of it (a path whose hash another path has too is kept apart, by itself).
/// Made of a few hundred thousand paths as the documents' table is read, and again as it is
/// written: a map of the paths themselves cost each a string and SipHash.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathIndex {
    by_hash: HashMap<u64, usize, BuildHasherDefault<Spread>>,
    /// Paths whose hash another path has (hardly ever one): each once, with its document.
    collided: Box<[(String, usize)]>,
}

impl PathIndex {
    fn key(path: &str) -> u64 {
        BuildHasherDefault::<Spread>::default().hash_one(path)
    }

    /// Notes that `path` is a path of `others[at]` (of a document not yet in `others` when `at`
    /// is its length); a later one of the same path replaces it.
    fn insert(&mut self, path: &str, at: usize, others: &[OtherDoc]) {
        match self.by_hash.entry(PathIndex::key(path)) {
            Slot::Vacant(slot) => {
                slot.insert(at);
            }
            Slot::Occupied(mut slot) => {
                // the same path again, or another whose hash is the same
                if others.get(*slot.get()).is_some_and(|doc| doc.paths.iter().any(|p| p == path)) {
                    slot.insert(at);
                } else if let Some(found) = self.collided.iter_mut().find(|(p, _)| p == path) {
                    found.1 = at;
                } else {
                    let mut collided = std::mem::take(&mut self.collided).into_vec();
                    collided.push((path.to_string(), at));
                    self.collided = collided.into_boxed_slice();
                }
            }
        }
    }

    /// The position in `others` of the document at `path`.
    fn get(&self, path: &str, others: &[OtherDoc]) -> Option<usize> {
        let at = self.by_hash.get(&PathIndex::key(path)).copied();
        match at.filter(|&at| others[at].paths.iter().any(|p| p == path)) {
            Some(at) => Some(at),
            None => self.collided.iter().find(|(p, _)| p == path).map(|(_, at)| *at),
        }
    }
}

/// What a partial build changed in the previous build's table of documents: the records and
/// sub-documents written or added, and every document that is not a record's (they replace
/// the previous ones: a few per list).
#[derive(Debug, Default)]
pub(crate) struct DocChanges<'p> {
    /// Each record or sub-document changed or added: its place, the name it is also
    /// published under, and its file.
    pub(crate) keyed: Vec<(Place<'p>, Option<&'p str>, DocumentFile)>,
    /// Every document that is not a record's.
    pub(crate) others: Vec<OtherDoc>,
}

impl DocumentFiles {
    /// Makes `changes`: each changed record's entry replaced, added ones inserted, and the
    /// documents that are not records' replaced by those given.
    pub(crate) fn apply(&mut self, changes: DocChanges<'_>) {
        let (mut added, sorted) = (false, self.entries.len());
        for (place, name, file) in changes.keyed {
            // among the entries sorted before this call (those added since are at the end)
            let Some(at) = self.position(&place, sorted) else {
                self.push_keyed(&place, name, file);
                added = true;
                continue;
            };
            if self.places.names.get(self.entries[at].name) != name {
                self.entries[at].name = self.places.names.add(name);
            }
            self.entries[at].stamp = file.stamp;
            self.entries[at].hash = *file.hash.0.as_bytes();
            if let Some(gz) = file.gz.filter(|_| at < self.gz.len()) {
                self.gz[at] = gz;
            }
        }
        if added {
            self.finish();
        }
        self.other.clear();
        self.other_by_path = PathIndex::default();
        for doc in changes.others {
            self.push_other(doc.paths, doc.file);
        }
        self.by_name = OnceLock::new();
    }

    /// The files (a document's paths, and their `.gz` siblings) and bytes of the tree: a
    /// document's paths are hard links of one file (see `write/stage.rs`), so its bytes are
    /// counted once, however many paths it has.
    pub(crate) fn totals(&self) -> (usize, u64) {
        let mut totals = (0, 0);
        let mut count = |paths: usize, file: &DocumentFile| {
            totals.0 += paths * (1 + usize::from(file.gz.is_some()));
            totals.1 += file.stamp.size + file.gz.map_or(0, |gz| gz.size);
        };
        for i in 0..self.entries.len() {
            let (_, name, file) = self.entry(i);
            count(1 + usize::from(name.is_some()), &file);
        }
        for doc in &self.other {
            count(doc.paths.len(), &doc.file);
        }
        totals
    }

    /// Adds the document at `place`, also published under `name` when given.
    pub(crate) fn push_keyed(&mut self, place: &Place<'_>, name: Option<&str>, file: DocumentFile) {
        let key = self.places.key(place);
        let name = self.places.names.add(name);
        if let Some(gz) = file.gz {
            self.gz.resize(self.entries.len(), Stamp::default());
            self.gz.push(gz);
        }
        self.entries.push(Entry { key, name, stamp: file.stamp, hash: *file.hash.0.as_bytes() });
    }

    /// Adds a document that is not a record's or a sub-document's, published at `paths`.
    pub(crate) fn push_other(&mut self, paths: Vec<String>, file: DocumentFile) {
        for path in &paths {
            self.other_by_path.insert(path, self.other.len(), &self.other);
        }
        self.other.push(OtherDoc { paths, file });
    }

    /// Makes room for `n` more documents.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.entries.reserve_exact(n);
    }

    /// Sorts the entries by key, for lookups (in place: a tree of a million records has a
    /// hundred MB of them).
    pub(crate) fn finish(&mut self) {
        if self.gz.is_empty() {
            self.entries.sort_unstable_by_key(|e| e.key);
            return;
        }
        self.gz.resize(self.entries.len(), Stamp::default());
        let mut pairs: Vec<(Entry, Stamp)> = self.entries.drain(..).zip(self.gz.drain(..)).collect();
        pairs.sort_unstable_by_key(|(e, _)| e.key);
        (self.entries, self.gz) = pairs.into_iter().unzip();
    }

    /// True when a document has a `.gz` sibling (the tree was built with `--gzip`).
    pub(crate) fn gzipped(&self) -> bool {
        !self.gz.is_empty() || self.other.iter().any(|doc| doc.file.gz.is_some())
    }

    /// Number of documents.
    pub(crate) fn len(&self) -> usize {
        self.entries.len() + self.other.len()
    }

    /// True when there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn entry(&self, i: usize) -> (Place<'_>, Option<&str>, DocumentFile) {
        let e = &self.entries[i];
        let file =
            DocumentFile { hash: Hash(blake3::Hash::from_bytes(e.hash)), stamp: e.stamp, gz: self.gz.get(i).copied() };
        (self.places.place(e.key), self.places.names.get(e.name), file)
    }

    /// The document at `place`, when it is published under the same name as `name` (or under
    /// none when `None`): its paths are then the same.
    pub(crate) fn keyed(&self, place: &Place<'_>, name: Option<&str>) -> Option<DocumentFile> {
        let (_, old_name, file) = self.entry(self.position(place, self.entries.len())?);
        (old_name == name).then_some(file)
    }

    /// The name the document at `place` is published under (`Some(None)`: none), when the
    /// table has it.
    pub(crate) fn name_of(&self, place: &Place<'_>) -> Option<Option<&str>> {
        Some(self.places.names.get(self.entries[self.position(place, self.entries.len())?].name))
    }

    /// The position of the entry at `place` among the first `sorted` entries (sorted by key).
    fn position(&self, place: &Place<'_>, sorted: usize) -> Option<usize> {
        let key = self.places.find(place)?;
        self.entries[..sorted].binary_search_by_key(&key, |e| e.key).ok()
    }

    /// The other document at exactly `paths`.
    pub(crate) fn other(&self, paths: &[String]) -> Option<DocumentFile> {
        let doc = &self.other[self.other_by_path.get(paths.first()?, &self.other)?];
        (doc.paths == paths).then_some(doc.file)
    }

    /// The document at the tree path `path`, whatever its other paths.
    pub(crate) fn file(&self, path: &str) -> Option<DocumentFile> {
        if let Some(at) = self.other_by_path.get(path, &self.other) {
            return Some(self.other[at].file);
        }
        let (segment, key, kind) = layout::record_document(path)?;
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

    pub(super) fn keyed_any_name(&self, place: &Place<'_>) -> Option<DocumentFile> {
        Some(self.entry(self.position(place, self.entries.len())?).2)
    }

    pub(super) fn names_map(&self) -> HashMap<(u32, String, u32), usize> {
        let named = self.entries.iter().enumerate().filter_map(|(i, e)| {
            let name = self.places.names.get(e.name)?;
            Some(((e.key.segment, name.to_string(), e.key.kind), i))
        });
        named.collect()
    }

    /// Every path of every document, with its file.
    pub(crate) fn paths(&self) -> impl Iterator<Item = (String, DocumentFile)> + '_ {
        let keyed = (0..self.entries.len()).flat_map(move |i| {
            let (place, name, file) = self.entry(i);
            let by_name = name.map(|name| (place.tree_path(name), file));
            std::iter::once((place.tree_path(place.id), file)).chain(by_name)
        });
        keyed.chain(self.other.iter().flat_map(|doc| doc.paths.iter().map(|path| (path.clone(), doc.file))))
    }

    /// Every document's paths with its file, one document at a time: for each keyed document
    /// its place, the name it is published under, and its file; then the others.
    pub(crate) fn each_keyed(&self) -> impl Iterator<Item = (Place<'_>, Option<&str>, DocumentFile)> + '_ {
        (0..self.entries.len()).map(move |i| self.entry(i))
    }

    /// The documents that are not records' or sub-documents'.
    pub(crate) fn others(&self) -> &[OtherDoc] {
        &self.other
    }

    pub(super) fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
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

    pub(super) fn decode(input: &mut Decoder<impl Read>) -> Result<DocumentFiles, String> {
        let mut docs = DocumentFiles { places: Places::decode(input)?, ..DocumentFiles::default() };
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
            docs.push_other(paths, DocumentFile { hash, stamp, gz });
        }
        check_entries(&docs.places, &docs.entries)?;
        Ok(docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two 16-byte paths whose 64-bit hashes are the same: the first word of each as chosen,
    /// the second of the other made to cancel the difference (tried until it is ASCII).
    fn colliding() -> (String, String) {
        const C: u64 = 0x9E37_79B9_7F4A_7C15;
        let first = u64::from_le_bytes(*b"api/v2/a");
        for n in 0u64.. {
            let other = u64::from_le_bytes(*b"api/v2/b") ^ (n << 8);
            let second = u64::from_le_bytes(*b"/index.j");
            let cancel = first.wrapping_mul(C) ^ second ^ other.wrapping_mul(C);
            let (a, b) = ([first.to_le_bytes(), second.to_le_bytes()].concat(), [other, cancel].map(u64::to_le_bytes));
            let b = b.concat();
            if b.iter().all(|&c| (0x20..0x7f).contains(&c)) {
                return (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
            }
        }
        unreachable!()
    }

    #[test]
    fn other_documents_are_found_by_each_path_even_when_two_paths_hash_alike() {
        let (a, b) = colliding();
        assert_ne!(a, b);
        assert_eq!(PathIndex::key(&a), PathIndex::key(&b), "{a:?} and {b:?} collide");
        let file = |n: u8| DocumentFile { hash: Hash(blake3::hash(&[n])), stamp: Stamp::default(), gz: None };
        let mut docs = DocumentFiles::default();
        docs.push_other(vec![a.clone()], file(0));
        docs.push_other(vec!["api/v2/x/index.json".into(), b.clone()], file(1));
        assert_eq!(docs.file(&a), Some(file(0)));
        assert_eq!(docs.file(&b), Some(file(1)));
        assert_eq!(docs.other(&["api/v2/x/index.json".into(), b.clone()]), Some(file(1)));
        assert_eq!(docs.other(std::slice::from_ref(&b)), None, "exactly its paths");
        // a later document at a path takes it
        docs.push_other(vec![b.clone()], file(2));
        docs.push_other(vec![a.clone()], file(3));
        assert_eq!((docs.file(&a), docs.file(&b)), (Some(file(3)), Some(file(2))));
        assert_eq!(docs.file("api/v2/x/index.json"), Some(file(1)));
        assert_eq!(docs.file("api/v2/y/index.json"), None);
    }
}
