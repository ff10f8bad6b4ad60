//! Writing an archive (docs/archive.md, "Writing, and editing at the cost of the change"): a
//! full write of documents given in any order, and an edit that writes a part with the
//! documents put, a part with the directory blocks it changed, and a new root, last.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::codec::gzip_at;
use super::format::{BlockRef, Entry, PartRef, Root, encode_block};
use super::{Change, Document, Error, Folder, Options, PREVIOUS_ROOT_FILE, ROOT_FILE, Reader, part_file};

/// What a write or an edit wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The files written, relative to the archive's folder, in the order written: the root last.
    pub files: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
    /// True when an edit was written as a full write of the edited set (a merge).
    pub merged: bool,
}

/// A document compressed and hashed, its stored bytes in the spool.
pub(super) struct Staged {
    pub(super) keys: Vec<String>,
    pub(super) hash: [u8; 32],
    pub(super) size: u64,
    pub(super) media_type: String,
    pub(super) at: u64,
    pub(super) length: u64,
}

/// A scratch file in the archive's folder holding the compressed documents until they are
/// placed, so that memory holds keys and places, not documents. Removed when dropped.
pub(super) struct Spool {
    path: PathBuf,
    file: File,
    len: u64,
}

impl Spool {
    fn create(dir: &Path) -> Result<Spool, Error> {
        fs::create_dir_all(dir.join("parts")).map_err(|source| Error::Io { file: "parts".into(), source })?;
        Spool::at(dir.join(".spool"))
    }

    /// A spool at `path` (outside the archive's folder: a build keeps it in its state folder).
    pub(super) fn at(path: PathBuf) -> Result<Spool, Error> {
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path);
        let file = file.map_err(|source| Error::Io { file: path.display().to_string(), source })?;
        Ok(Spool { path, file, len: 0 })
    }

    /// Appends whatever `fill` writes through the spool's end, returning where it starts and
    /// its length (a large document is streamed in, never held).
    pub(super) fn append_with(
        &mut self,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(u64, u64), Error> {
        use std::io::{Seek, SeekFrom};
        let at = self.len;
        let failed = |source| Error::Io { file: ".spool".into(), source };
        self.file.seek(SeekFrom::Start(at)).map_err(failed)?;
        let mut out = io::BufWriter::new(&self.file);
        fill(&mut out).map_err(failed)?;
        out.flush().map_err(failed)?;
        drop(out);
        self.len = self.file.metadata().map_err(failed)?.len();
        Ok((at, self.len - at))
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<u64, Error> {
        self.file.write_all_at(bytes, self.len).map_err(|source| Error::Io { file: ".spool".into(), source })?;
        self.len += bytes.len() as u64;
        Ok(self.len - bytes.len() as u64)
    }

    pub(super) fn get(&self, at: u64, length: u64) -> Result<Vec<u8>, Error> {
        let mut out = vec![0; length as usize];
        self.file.read_exact_at(&mut out, at).map_err(|source| Error::Io { file: ".spool".into(), source })?;
        Ok(out)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Compresses and hashes documents (in parallel, a batch at a time) into the spool.
fn stage(documents: impl IntoIterator<Item = Document>, spool: &mut Spool, out: &mut Vec<Staged>) -> Result<(), Error> {
    let mut documents = documents.into_iter().peekable();
    while documents.peek().is_some() {
        let batch: Vec<Document> = documents.by_ref().take(256).collect();
        let packed: Vec<(Document, Vec<u8>, [u8; 32])> = batch
            .into_par_iter()
            .map(|d| {
                let stored = gzip_at(&d.bytes, level_of(&d.keys));
                let hash = *blake3::hash(&d.bytes).as_bytes();
                (d, stored, hash)
            })
            .collect();
        for (d, stored, hash) in packed {
            let at = spool.push(&stored)?;
            let (size, length) = (d.bytes.len() as u64, stored.len() as u64);
            out.push(Staged { keys: d.keys, hash, size, media_type: d.media_type, at, length });
        }
    }
    Ok(())
}

/// The gzip level a document is stored at: 0 (stored blocks, a gzip wrapper) for a bulk-data
/// file, which is gzip already; 6 for every other (docs/archive.md, "Deterministic gzip").
pub(super) fn level_of(keys: &[String]) -> u32 {
    if keys.first().is_some_and(|key| crate::tree::layout::is_bulk_file(key)) { 0 } else { 6 }
}

/// The staged documents once each: one copy per hash (the keys joined), a key given to two
/// different documents refused, ordered by first key.
fn once_each(staged: Vec<Staged>) -> Result<Vec<Staged>, Error> {
    let mut owner: HashMap<String, [u8; 32]> = HashMap::new();
    let mut by_hash: BTreeMap<[u8; 32], Staged> = BTreeMap::new();
    for doc in staged {
        if doc.keys.is_empty() {
            return Err(Error::Input("a document has no key".into()));
        }
        for key in &doc.keys {
            if owner.insert(key.clone(), doc.hash).is_some_and(|h| h != doc.hash) {
                return Err(Error::Input(format!("the key {key} is given to two different documents")));
            }
        }
        match by_hash.get_mut(&doc.hash) {
            Some(kept) => kept.keys.extend(doc.keys),
            None => drop(by_hash.insert(doc.hash, doc)),
        }
    }
    let mut docs: Vec<Staged> = by_hash.into_values().collect();
    for doc in &mut docs {
        doc.keys.sort();
        doc.keys.dedup();
    }
    docs.sort_by(|a, b| a.keys[0].cmp(&b.keys[0]));
    Ok(docs)
}

/// Parts being filled: a part is written, named by its hash, when the next blob would take it
/// past the bound.
struct Parts<'w> {
    dir: &'w Path,
    limit: u64,
    index: bool,
    delta: bool,
    buffer: Vec<u8>,
    done: Vec<PartRef>,
    written: &'w mut Written,
}

impl<'w> Parts<'w> {
    fn new(dir: &'w Path, options: &Options, index: bool, delta: bool, written: &'w mut Written) -> Parts<'w> {
        Parts { dir, limit: options.part_bytes, index, delta, buffer: Vec::new(), done: Vec::new(), written }
    }

    /// Appends a blob: the position its part will have among the parts written, and its offset.
    fn place(&mut self, blob: &[u8]) -> Result<(usize, u64), Error> {
        if !self.buffer.is_empty() && (self.buffer.len() + blob.len()) as u64 > self.limit {
            self.flush()?;
        }
        self.buffer.extend_from_slice(blob);
        Ok((self.done.len(), (self.buffer.len() - blob.len()) as u64))
    }

    fn flush(&mut self) -> Result<(), Error> {
        let name = *blake3::hash(&self.buffer).as_bytes();
        let file = part_file(&name);
        let path = self.dir.join(&file);
        fs::create_dir_all(self.dir.join("parts")).map_err(|source| Error::Io { file: "parts".into(), source })?;
        if fs::metadata(&path).map_or(true, |m| m.len() != self.buffer.len() as u64) {
            replace(&path, &self.buffer).map_err(|source| Error::Io { file: file.clone(), source })?;
        }
        self.written.files.push(file);
        self.written.bytes += self.buffer.len() as u64;
        self.done.push(PartRef { name, size: self.buffer.len() as u64, index: self.index, delta: self.delta });
        self.buffer.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<PartRef>, Error> {
        if !self.buffer.is_empty() {
            self.flush()?;
        }
        Ok(self.done)
    }
}

/// Writes `bytes` at `path` under a temporary name, synced, then renamed over it.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut file = File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

/// Places staged documents into data parts: their entries, one per key, sorted by key.
fn place_documents(spool: &Spool, docs: &[Staged], mut parts: Parts<'_>) -> Result<(Vec<Entry>, Vec<PartRef>), Error> {
    let mut placed = Vec::with_capacity(docs.len());
    for doc in docs {
        placed.push(parts.place(&spool.get(doc.at, doc.length)?)?);
    }
    let refs = parts.finish()?;
    let mut entries = Vec::new();
    for (doc, (seq, offset)) in docs.iter().zip(placed) {
        for key in &doc.keys {
            let (part, length, size, media_type) = (refs[seq].name, doc.length, doc.size, doc.media_type.clone());
            entries.push(Entry { key: key.clone(), part, offset, length, size, media_type, hash: doc.hash });
        }
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    Ok((entries, refs))
}

/// Encodes blocks into index parts: the root's references to them, in order.
fn place_blocks(blocks: &[Vec<Entry>], mut parts: Parts<'_>) -> Result<(Vec<BlockRef>, Vec<PartRef>), Error> {
    let mut placed = Vec::with_capacity(blocks.len());
    for entries in blocks {
        let stored = encode_block(entries);
        let (seq, offset) = parts.place(&stored)?;
        placed.push((seq, offset, stored.len() as u64, *blake3::hash(&stored).as_bytes()));
    }
    let refs = parts.finish()?;
    let blocks = blocks.iter().zip(placed).map(|(entries, (seq, offset, length, hash))| {
        let data: BTreeSet<[u8; 32]> = entries.iter().map(|e| e.part).collect();
        let (first, count) = (entries[0].key.clone(), entries.len() as u64);
        BlockRef { first, part: refs[seq].name, offset, length, hash, entries: count, refs: data.into_iter().collect() }
    });
    Ok((blocks.collect(), refs))
}

/// Writes the root, last: the commit point. The root it replaces is kept as `root.previous`
/// (a link to its bytes), whose parts [`super::prune`] keeps.
fn commit(dir: &Path, root: &Root, written: &mut Written) -> Result<(), Error> {
    let stored = root.encode();
    keep_previous(dir).map_err(|source| Error::Io { file: PREVIOUS_ROOT_FILE.into(), source })?;
    replace(&dir.join(ROOT_FILE), &stored).map_err(|source| Error::Io { file: ROOT_FILE.into(), source })?;
    written.files.push(ROOT_FILE.into());
    written.bytes += stored.len() as u64;
    Ok(())
}

/// Links the current root, if any, as `root.previous` (by a rename over it: atomic).
fn keep_previous(dir: &Path) -> io::Result<()> {
    let temporary = dir.join("root.previous.tmp");
    let _ = fs::remove_file(&temporary);
    match fs::hard_link(dir.join(ROOT_FILE), &temporary) {
        Ok(()) => fs::rename(&temporary, dir.join(PREVIOUS_ROOT_FILE)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The entries cut into blocks of at most `options.block_entries`.
fn cut(entries: Vec<Entry>, options: &Options) -> Vec<Vec<Entry>> {
    let per = options.block_entries.max(1);
    let mut blocks = Vec::with_capacity(entries.len().div_ceil(per));
    let mut rest = entries.into_iter().peekable();
    while rest.peek().is_some() {
        blocks.push(rest.by_ref().take(per).collect());
    }
    blocks
}

/// Writes a fresh archive of `documents` (in any order) into `dir`: data parts, index parts,
/// then the root. The same documents give the same bytes.
pub fn write(dir: &Path, documents: impl IntoIterator<Item = Document>, options: &Options) -> Result<Written, Error> {
    let mut spool = Spool::create(dir)?;
    let mut staged = Vec::new();
    stage(documents, &mut spool, &mut staged)?;
    write_full(dir, &spool, staged, options)
}

/// The full write of staged documents (their stored bytes in `spool`).
pub(super) fn write_full(dir: &Path, spool: &Spool, staged: Vec<Staged>, options: &Options) -> Result<Written, Error> {
    let docs = once_each(staged)?;
    let mut written = Written::default();
    let (entries, data) = place_documents(spool, &docs, Parts::new(dir, options, false, false, &mut written))?;
    let (blocks, index) = place_blocks(&cut(entries, options), Parts::new(dir, options, true, false, &mut written))?;
    let known = data.into_iter().chain(index).map(|p| (p.name, p)).collect();
    commit(dir, &Root::over(0, blocks, &known), &mut written)?;
    Ok(written)
}

/// Applies `changes` to the archive in `dir` at the cost of the change: a part with the
/// documents put, a part with the blocks they and the removed keys fall in, a new root. When
/// deltas have piled up past [`Options::merge_after`] edits (or weigh half the rest), writes the
/// edited set afresh instead, byte for byte what [`write`] would write.
pub fn edit(dir: &Path, changes: impl IntoIterator<Item = Change>, options: &Options) -> Result<Written, Error> {
    let reader = Reader::open(Folder(dir.to_path_buf()))?;
    let (mut puts, mut removed) = (Vec::new(), BTreeSet::new());
    for change in changes {
        match change {
            Change::Put(document) => puts.push(document),
            Change::Remove(key) => drop(removed.insert(key)),
        }
    }
    if let Some(key) = puts.iter().flat_map(|d| &d.keys).find(|k| removed.contains(*k)) {
        return Err(Error::Input(format!("the key {key} is both put and removed")));
    }
    let mut spool = Spool::create(dir)?;
    let mut staged = Vec::new();
    stage(puts, &mut spool, &mut staged)?;
    apply(dir, &reader, &mut spool, staged, &removed, options)
}

/// Applies staged documents put (their stored bytes in `spool`) and keys removed to the archive
/// `reader` reads in `dir`: a delta, or a merge when deltas have piled up.
pub(super) fn apply(
    dir: &Path,
    reader: &Reader<Folder>,
    spool: &mut Spool,
    staged: Vec<Staged>,
    removed: &BTreeSet<String>,
    options: &Options,
) -> Result<Written, Error> {
    let root = reader.root();
    let weight = |delta: bool| root.parts.iter().filter(|p| p.delta == delta).map(|p| p.size).sum::<u64>();
    if root.edits >= options.merge_after || weight(true) * 2 > weight(false) {
        return merge(dir, reader, spool, staged, removed, options);
    }
    write_delta(dir, reader, spool, staged, removed, options)
}

fn write_delta(
    dir: &Path,
    reader: &Reader<Folder>,
    spool: &Spool,
    staged: Vec<Staged>,
    removed: &BTreeSet<String>,
    options: &Options,
) -> Result<Written, Error> {
    let root = reader.root();
    let docs = once_each(staged)?;
    let mut written = Written::default();
    let (put, data) = place_documents(spool, &docs, Parts::new(dir, options, false, true, &mut written))?;
    let block_of = |key: &str| root.blocks.partition_point(|b| b.first.as_str() <= key).saturating_sub(1);
    let mut touched: BTreeMap<usize, BTreeMap<String, Option<Entry>>> = BTreeMap::new();
    for entry in put {
        touched.entry(block_of(&entry.key)).or_default().insert(entry.key.clone(), Some(entry));
    }
    for key in removed {
        touched.entry(block_of(key)).or_default().insert(key.clone(), None);
    }
    let mut rewritten: BTreeMap<usize, Vec<Vec<Entry>>> = BTreeMap::new();
    for (i, changes) in touched {
        let old = if root.blocks.is_empty() { Vec::new() } else { reader.block(i)?.to_vec() };
        let mut keyed: BTreeMap<String, Entry> = old.into_iter().map(|e| (e.key.clone(), e)).collect();
        for (key, entry) in changes {
            match entry {
                Some(entry) => drop(keyed.insert(key, entry)),
                None => drop(keyed.remove(&key)),
            }
        }
        rewritten.insert(i, cut(keyed.into_values().collect(), options));
    }
    let fresh: Vec<Vec<Entry>> = rewritten.values().flatten().cloned().collect();
    let (mut new_refs, index) = place_blocks(&fresh, Parts::new(dir, options, true, true, &mut written))?;
    let mut blocks = Vec::new();
    for i in 0..root.blocks.len().max(1) {
        match rewritten.get(&i) {
            Some(cuts) => blocks.extend(new_refs.drain(..cuts.len())),
            None => blocks.extend(root.blocks.get(i).cloned()),
        }
    }
    let known = root.parts.iter().copied().chain(data).chain(index).map(|p| (p.name, p)).collect();
    commit(dir, &Root::over(root.edits + 1, blocks, &known), &mut written)?;
    Ok(written)
}

/// The edit as a full write: every document still named copied as stored (checked on the
/// way), then the documents put.
fn merge(
    dir: &Path,
    reader: &Reader<Folder>,
    spool: &mut Spool,
    mut staged: Vec<Staged>,
    removed: &BTreeSet<String>,
    options: &Options,
) -> Result<Written, Error> {
    let replaced: BTreeSet<&String> = staged.iter().flat_map(|d| &d.keys).collect();
    let mut kept: BTreeMap<([u8; 32], u64), (Entry, Vec<String>)> = BTreeMap::new();
    for entry in reader.entries()? {
        if removed.contains(&entry.key) || replaced.contains(&entry.key) {
            continue;
        }
        let key = entry.key.clone();
        kept.entry((entry.part, entry.offset)).or_insert_with(|| (entry, Vec::new())).1.push(key);
    }
    let mut old = Vec::with_capacity(kept.len());
    for (entry, keys) in kept.into_values() {
        let found = reader.document(entry)?;
        let at = spool.push(&found.stored)?;
        let (hash, size, length, media_type) =
            (found.entry.hash, found.entry.size, found.entry.length, found.entry.media_type);
        old.push(Staged { keys, hash, size, media_type, at, length });
    }
    staged.extend(old);
    let mut written = write_full(dir, spool, staged, options)?;
    written.merged = true;
    Ok(written)
}
