//! Writing an archive (docs/archive.md, "Writing, and editing at the cost of the change"): a
//! full write of documents given in any order, and an edit that writes a part with the
//! documents put, a part with the directory blocks it changed, and a new root, last.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use rayon::prelude::*;

use super::codec::gzip_at;
use super::format::{Entry, PartRef, Root};
use super::full::{stored, write_full};
use super::ledger::{Ledger, Source, Staged};
use super::place::{BlockCutter, Parts, Spool, Written, commit, level_of};
use super::sort::{self, Sorter};
use super::{Change, Document, Error, Folder, Options, Reader};

/// Compresses and hashes documents (in parallel, a batch at a time) into the spool, and records
/// each in the ledger.
fn stage(documents: impl IntoIterator<Item = Document>, spool: &mut Spool, ledger: &mut Ledger) -> Result<(), Error> {
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
            let source = Source::Spool(spool.push(&stored)?);
            let (size, length) = (d.bytes.len() as u64, stored.len() as u64);
            ledger.push(&Staged { keys: d.keys, hash, size, media_type: d.media_type, source, length })?;
        }
    }
    Ok(())
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

/// Places staged documents (a delta's, held) into data parts: their entries, one per key,
/// sorted by key.
fn place_documents(spool: &Spool, docs: &[Staged], mut parts: Parts<'_>) -> Result<(Vec<Entry>, Vec<PartRef>), Error> {
    let mut placed = Vec::with_capacity(docs.len());
    for doc in docs {
        placed.push(parts.place(&stored(spool, None, &doc.keys[0], doc)?)?);
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

/// Writes a fresh archive of `documents` (in any order) into `dir`: data parts, index parts,
/// then the root. The same documents give the same bytes.
pub fn write(dir: &Path, documents: impl IntoIterator<Item = Document>, options: &Options) -> Result<Written, Error> {
    let mut spool = Spool::create(dir)?;
    let mut ledger = Ledger::create(spool.scratch("ledger"))?;
    stage(documents, &mut spool, &mut ledger)?;
    write_full(dir, &spool, &mut ledger, None, options)
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
    let mut ledger = Ledger::create(spool.scratch("ledger"))?;
    stage(puts, &mut spool, &mut ledger)?;
    apply(dir, &reader, &spool, ledger, &removed, options)
}

/// Applies the documents put (recorded in `puts`, their stored bytes in `spool`) and the keys
/// removed to the archive `reader` reads in `dir`: a delta, or a merge when deltas have piled
/// up, or when the change is large (it puts more documents than the archive holds keys a
/// quarter of: a delta holds what it puts in memory, a merge does not).
pub(super) fn apply(
    dir: &Path,
    reader: &Reader<Folder>,
    spool: &Spool,
    mut puts: Ledger,
    removed: &BTreeSet<String>,
    options: &Options,
) -> Result<Written, Error> {
    let root = reader.root();
    let weight = |delta: bool| root.parts.iter().filter(|p| p.delta == delta).map(|p| p.size).sum::<u64>();
    let large = puts.len() > reader.len() / 4 && puts.len() > 1024;
    if root.edits >= options.merge_after || weight(true) * 2 > weight(false) || large {
        return merge(dir, reader, spool, puts, removed, options);
    }
    let staged = puts.records()?.collect::<Result<Vec<Staged>, Error>>()?;
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
    // each block touched, rewritten as one or more blocks (or none, when it lost every key)
    let mut cutter = BlockCutter::new(Parts::new(dir, options, true, true, &mut written), options);
    let mut cuts: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, changes) in touched {
        let old = if root.blocks.is_empty() { Vec::new() } else { reader.block(i)?.to_vec() };
        let mut keyed: BTreeMap<String, Entry> = old.into_iter().map(|e| (e.key.clone(), e)).collect();
        for (key, entry) in changes {
            match entry {
                Some(entry) => drop(keyed.insert(key, entry)),
                None => drop(keyed.remove(&key)),
            }
        }
        let before = cutter.blocks();
        for entry in keyed.into_values() {
            cutter.push(entry)?;
        }
        cutter.place()?;
        cuts.insert(i, cutter.blocks() - before);
    }
    let (mut new_refs, index) = cutter.finish()?;
    let mut blocks = Vec::new();
    for i in 0..root.blocks.len().max(1) {
        match cuts.get(&i) {
            Some(&count) => blocks.extend(new_refs.drain(..count)),
            None => blocks.extend(root.blocks.get(i).cloned()),
        }
    }
    let known = root.parts.iter().copied().chain(data).chain(index).map(|p| (p.name, p)).collect();
    commit(dir, &Root::over(root.edits + 1, blocks, &known), &mut written)?;
    Ok(written)
}

/// The edit as a full write: every key the change leaves is recorded with its document where
/// it is (copied from its part, checked, when placed), beside the documents put. The archive's
/// entries are read a block at a time, walked beside the keys put, sorted: both in key order.
fn merge(
    dir: &Path,
    reader: &Reader<Folder>,
    spool: &Spool,
    mut ledger: Ledger,
    removed: &BTreeSet<String>,
    options: &Options,
) -> Result<Written, Error> {
    let mut put = Sorter::new(spool.scratch("put"), sort::BUDGET);
    for staged in ledger.records()? {
        for key in staged?.keys {
            put.push(key.as_bytes())?;
        }
    }
    let mut put = put.finish()?.peekable();
    for block in 0..reader.root().blocks.len() {
        for entry in reader.block(block)?.iter() {
            let mut replaced = false;
            while let Some(next) = put.peek() {
                match next.as_ref().map(|key| key.as_slice().cmp(entry.key.as_bytes())) {
                    Ok(std::cmp::Ordering::Greater) => break,
                    Ok(order) => {
                        replaced |= order.is_eq();
                        put.next().transpose()?;
                    }
                    Err(_) => return Err(put.next().and_then(Result::err).expect("an error")),
                }
            }
            if replaced || removed.contains(&entry.key) {
                continue;
            }
            let (keys, source) = (vec![entry.key.clone()], Source::Part(entry.part, entry.offset));
            let (hash, size, length, media_type) = (entry.hash, entry.size, entry.length, entry.media_type.clone());
            ledger.push(&Staged { keys, hash, size, media_type, source, length })?;
        }
        reader.forget_blocks(); // one block held at a time
    }
    let mut written = write_full(dir, spool, &mut ledger, Some(reader), options)?;
    written.merged = true;
    Ok(written)
}
