//! Reading an archive by byte ranges (docs/archive.md, "Finding a key"): the root once, then a
//! directory block (cached: blocks are immutable) and the document. Every read is counted, and
//! every byte returned is checked against the hash that names it.
//!
//! The decoded blocks are held within a byte bound ([`Reader::with_block_cache`], by default
//! [`DEFAULT_BLOCK_CACHE`]) in two generations, as the serve cache holds documents: new blocks
//! go into the current one; when it would pass half the bound it becomes the old one and the
//! old one is dropped; a block found in the old one moves back. A block in use is held by its
//! user until it is done, whatever the bound.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::codec::gunzip;
use super::format::{Entry, Root, decode_block};
use super::{Error, ROOT_FILE, part_file};

/// Where an archive's files are read from, by byte ranges: a folder, a bucket over HTTP `Range`.
pub trait RangeSource {
    /// Up to `len` bytes of `file` from `offset` (fewer only when the file ends sooner).
    fn read(&self, file: &str, offset: u64, len: u64) -> io::Result<Vec<u8>>;
    /// The whole of `file` (the root).
    fn read_all(&self, file: &str) -> io::Result<Vec<u8>>;
}

/// An archive in a local folder.
#[derive(Clone, Debug)]
pub struct Folder(pub PathBuf);

impl RangeSource for Folder {
    fn read(&self, file: &str, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let mut opened = File::open(self.0.join(file))?;
        opened.seek(SeekFrom::Start(offset))?;
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(64 << 20));
        opened.take(len).read_to_end(&mut out)?;
        Ok(out)
    }

    fn read_all(&self, file: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.0.join(file))
    }
}

/// A document found, checked: its entry, its stored bytes (gzip, to send with
/// `Content-Encoding: gzip`) and its bytes decompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Where it is and what it is.
    pub entry: Entry,
    /// The stored gzip member.
    pub stored: Vec<u8>,
    /// The document decompressed, its hash checked.
    pub bytes: Vec<u8>,
}

/// The default bound of the decoded blocks a [`Reader`] holds: 64 MiB, about 300 blocks of
/// 1,024 entries (300,000 keys).
pub const DEFAULT_BLOCK_CACHE: usize = 64 << 20;

/// An open archive: its root read, its directory blocks cached as they are read.
pub struct Reader<S> {
    source: S,
    root: Root,
    digest: [u8; 32],
    sizes: HashMap<[u8; 32], u64>,
    blocks: RwLock<Blocks>,
    reads: AtomicU64,
}

/// The decoded blocks held, by their place in the root, with the bytes each takes, in two
/// generations (see the module's doc).
#[derive(Default)]
struct Blocks {
    bound: usize,
    current: HashMap<usize, (Arc<Vec<Entry>>, usize)>,
    old: HashMap<usize, (Arc<Vec<Entry>>, usize)>,
    current_bytes: usize,
    old_bytes: usize,
}

impl Blocks {
    /// Holds `block` (taking `bytes`) in the current generation, turning generations first when
    /// it would pass half the bound; a block larger than half the bound is not held.
    fn admit(&mut self, i: usize, block: Arc<Vec<Entry>>, bytes: usize) {
        let half = self.bound / 2;
        if bytes > half {
            return;
        }
        if let Some((_, replaced)) = self.current.remove(&i) {
            self.current_bytes -= replaced;
        }
        if let Some((_, dropped)) = self.old.remove(&i) {
            self.old_bytes -= dropped;
        }
        if self.current_bytes + bytes > half {
            self.old = std::mem::take(&mut self.current);
            self.old_bytes = std::mem::replace(&mut self.current_bytes, 0);
        }
        self.current.insert(i, (block, bytes));
        self.current_bytes += bytes;
    }

    fn clear(&mut self) {
        *self = Blocks { bound: self.bound, ..Blocks::default() };
    }
}

/// The bytes a decoded block takes in memory: its entries and their strings.
fn block_bytes(entries: &[Entry]) -> usize {
    let strings: usize = entries.iter().map(|e| e.key.capacity() + e.media_type.capacity()).sum();
    strings + std::mem::size_of_val(entries) + 64
}

impl<S: RangeSource> Reader<S> {
    /// Opens the archive: reads its root (one read) and checks it.
    pub fn open(source: S) -> Result<Reader<S>, Error> {
        let stored = source.read_all(ROOT_FILE).map_err(|source| Error::Io { file: ROOT_FILE.into(), source })?;
        let root = Root::decode(&stored).map_err(|what| Error::Damaged { file: ROOT_FILE.into(), offset: 0, what })?;
        let sizes = root.parts.iter().map(|p| (p.name, p.size)).collect();
        let blocks = RwLock::new(Blocks { bound: DEFAULT_BLOCK_CACHE, ..Blocks::default() });
        let digest = *blake3::hash(&stored).as_bytes();
        Ok(Reader { source, root, digest, sizes, blocks, reads: AtomicU64::new(1) })
    }

    /// The reader holding at most `bytes` of decoded directory blocks (see the module's doc).
    pub fn with_block_cache(self, bytes: usize) -> Reader<S> {
        self.blocks.write().unwrap_or_else(std::sync::PoisonError::into_inner).bound = bytes;
        self
    }

    /// The bytes of decoded blocks held now, and how many blocks.
    pub fn blocks_held(&self) -> (usize, usize) {
        let blocks = self.blocks.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        (blocks.current_bytes + blocks.old_bytes, blocks.current.len() + blocks.old.len())
    }

    /// The BLAKE3 hash of the root's stored bytes: another root is another archive.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// The source the archive is read from.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The reads made so far, the root's included.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Forgets the cached blocks: the next lookups are cold again.
    pub fn forget_blocks(&self) {
        self.blocks.write().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// The files the root names, the root last: what a publish uploads, or a copy takes.
    pub fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = self.root.parts.iter().map(|p| part_file(&p.name)).collect();
        files.push(ROOT_FILE.into());
        files
    }

    /// How many keys the archive holds.
    pub fn len(&self) -> u64 {
        self.root.blocks.iter().map(|b| b.entries).sum()
    }

    /// True when the archive holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn root(&self) -> &Root {
        &self.root
    }

    /// The entry of `key`: at most one read (its block, unless cached).
    pub fn entry(&self, key: &str) -> Result<Option<Entry>, Error> {
        self.with_entry(key, Entry::clone)
    }

    /// `f` of the entry of `key`, without copying it: at most one read (its block, unless cached).
    pub fn with_entry<R>(&self, key: &str, f: impl FnOnce(&Entry) -> R) -> Result<Option<R>, Error> {
        let Some(i) = self.root.blocks.partition_point(|b| b.first.as_str() <= key).checked_sub(1) else {
            return Ok(None);
        };
        let block = self.block(i)?;
        Ok(block.binary_search_by(|e| e.key.as_str().cmp(key)).ok().map(|at| f(&block[at])))
    }

    /// The document under `key`, checked: at most two reads cold, one warm.
    pub fn get(&self, key: &str) -> Result<Option<Found>, Error> {
        match self.entry(key)? {
            None => Ok(None),
            Some(entry) => self.document(entry).map(Some),
        }
    }

    /// The document an entry points at, checked against its hash: one read.
    pub fn document(&self, entry: Entry) -> Result<Found, Error> {
        let stored = self.range(&entry.part, entry.offset, entry.length)?;
        let damaged = |what: &str| Error::Damaged {
            file: part_file(&entry.part),
            offset: entry.offset,
            what: format!("{what} (key {})", entry.key),
        };
        let bytes =
            gunzip(&stored, entry.size as usize).ok_or_else(|| damaged("the document is not a whole gzip member"))?;
        if *blake3::hash(&bytes).as_bytes() != entry.hash || bytes.len() as u64 != entry.size {
            return Err(damaged("the document is not the one its directory block names"));
        }
        Ok(Found { entry, stored, bytes })
    }

    /// Every entry, in key order (reads every block not cached).
    pub fn entries(&self) -> Result<Vec<Entry>, Error> {
        let mut all = Vec::new();
        for i in 0..self.root.blocks.len() {
            all.extend(self.block(i)?.iter().cloned());
        }
        Ok(all)
    }

    /// Reads every part the root names whole and checks it against its name: a full check.
    pub fn verify(&self) -> Result<(), Error> {
        for part in &self.root.parts {
            let bytes = self.range(&part.name, 0, part.size)?;
            if *blake3::hash(&bytes).as_bytes() != part.name {
                let what = "its bytes do not hash to its name".to_string();
                return Err(Error::Damaged { file: part_file(&part.name), offset: 0, what });
            }
        }
        Ok(())
    }

    /// The `i`th directory block of the root, from the cache or read (one read) and checked.
    pub(crate) fn block(&self, i: usize) -> Result<Arc<Vec<Entry>>, Error> {
        {
            let blocks = self.blocks.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((block, _)) = blocks.current.get(&i) {
                return Ok(Arc::clone(block));
            }
        }
        {
            let mut blocks = self.blocks.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((block, bytes)) = blocks.old.remove(&i) {
                blocks.old_bytes -= bytes;
                blocks.admit(i, Arc::clone(&block), bytes);
                return Ok(block);
            }
        }
        let at = &self.root.blocks[i];
        let stored = self.range(&at.part, at.offset, at.length)?;
        let damaged = |what: String| Error::Damaged { file: part_file(&at.part), offset: at.offset, what };
        if *blake3::hash(&stored).as_bytes() != at.hash {
            return Err(damaged(format!("directory block {i} is not the one the root names")));
        }
        let entries = decode_block(&stored).map_err(|what| damaged(format!("directory block {i}: {what}")))?;
        if entries.first().map(|e| &e.key) != Some(&at.first) || entries.len() as u64 != at.entries {
            return Err(damaged(format!("directory block {i} does not hold the keys the root says")));
        }
        let bytes = block_bytes(&entries);
        let block = Arc::new(entries);
        self.blocks.write().unwrap_or_else(std::sync::PoisonError::into_inner).admit(i, Arc::clone(&block), bytes);
        Ok(block)
    }

    /// `len` bytes of the part `name` from `offset`: one read, refused when the root gives the
    /// part fewer bytes, when the part is missing, or when the read comes back short.
    pub(crate) fn range(&self, name: &[u8; 32], offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        let file = part_file(name);
        let size = *self.sizes.get(name).ok_or_else(|| Error::Missing { file: file.clone() })?;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            let what = format!("{len} bytes at {offset} run past the part's {size} bytes");
            return Err(Error::Damaged { file, offset, what });
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let bytes = match self.source.read(&file, offset, len) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Error::Missing { file }),
            Err(source) => return Err(Error::Io { file, source }),
        };
        if bytes.len() as u64 != len {
            return Err(Error::Truncated { file, offset, wanted: len, got: bytes.len() as u64 });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Document, Options, write};

    #[test]
    fn the_blocks_held_stay_within_their_bound() {
        let dir = std::env::temp_dir().join(format!("gen-read-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = |i: usize| format!("api/v2/x/{i}/index.json");
        let documents: Vec<Document> =
            (0..2000).map(|i| Document::new(vec![key(i)], format!("{{\"id\": {i}}}").into_bytes())).collect();
        write(&dir, documents, &Options { block_entries: 100, ..Options::default() }).unwrap();
        let unbounded = Reader::open(Folder(dir.clone())).unwrap();
        unbounded.get(&key(0)).unwrap().unwrap();
        let (one_block, _) = unbounded.blocks_held();
        let bound = one_block * 5;
        let reader = Reader::open(Folder(dir.clone())).unwrap().with_block_cache(bound);
        for i in 0..2000 {
            assert_eq!(reader.get(&key(i)).unwrap().unwrap().bytes, format!("{{\"id\": {i}}}").into_bytes());
            assert!(reader.blocks_held().0 <= bound, "{:?} held, bound {bound}", reader.blocks_held());
            // the block used all along keeps its place
            reader.get(&key(0)).unwrap().unwrap();
        }
        let (_, blocks) = reader.blocks_held();
        assert!((1..20).contains(&blocks), "{blocks} of 20 blocks held");
        let before = reader.reads();
        reader.get(&key(0)).unwrap().unwrap();
        assert_eq!(reader.reads(), before + 1, "the block used all along is held: the document alone is read");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
