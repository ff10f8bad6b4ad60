//! A full write of staged documents (docs/archive.md, "Writing"), in bounded memory: every key
//! of the ledger is sorted on disk with its document's record; walked in key order, each
//! document is placed into a data part the first time one of its keys comes (so documents lie in
//! the order of their first keys, and one stored under two keys, or put twice, is stored once),
//! and each key's entry goes to a scratch file; the entries are then cut into directory blocks a
//! block at a time. What stays in memory is a document's hash and place (about 48 bytes each).

use std::collections::HashMap;

use super::codec::{Cursor, put_str, put_varint};
use super::format::{Entry, Root};
use super::ledger::{Ledger, Source, Staged, fields, put_fields};
use super::place::{BlockCutter, Parts, Spool, Written, commit};
use super::sort::{self, Scratch, Sorter};
use super::{Error, Folder, Options, Reader};

/// Writes a fresh archive of the documents in `ledger` into `dir`: data parts, index parts, then
/// the root, last. Their stored bytes are in `spool`, or (a merge's) in the parts of the archive
/// `reader` reads.
pub(super) fn write_full(
    dir: &std::path::Path,
    spool: &Spool,
    ledger: &mut Ledger,
    reader: Option<&Reader<Folder>>,
    options: &Options,
) -> Result<Written, Error> {
    let mut keys = Sorter::new(spool.scratch("keys"), sort::BUDGET);
    let mut item = Vec::new();
    for staged in ledger.records()? {
        let staged = staged?;
        if staged.keys.is_empty() {
            return Err(Error::Input("a document has no key".into()));
        }
        for key in &staged.keys {
            encode_item(&mut item, key, &staged)?;
            keys.push(&item)?;
        }
    }
    let mut written = Written::default();
    let mut parts = Parts::new(dir, options, false, false, &mut written);
    let mut placed = Placements::with_capacity(ledger.len() as usize);
    let mut entries = Scratch::create(spool.scratch("entries"))?;
    let mut last: Option<(String, [u8; 32])> = None;
    for item in keys.finish()? {
        let (key, staged) = decode_item(&item?)?;
        if let Some((last_key, last_hash)) = &last
            && *last_key == key
        {
            if *last_hash != staged.hash {
                return Err(Error::Input(format!("the key {key} is given to two different documents")));
            }
            continue; // the same document put twice under the key
        }
        let (seq, offset) = match placed.get(&staged.hash) {
            Some(place) => place,
            None => {
                let place = parts.place(&stored(spool, reader, &key, &staged)?)?;
                placed.insert(staged.hash, place)?;
                place
            }
        };
        entries.push(&encode_entry(&key, &staged, seq, offset))?;
        last = Some((key, staged.hash));
    }
    drop(placed);
    let data = parts.finish()?;
    let mut cutter = BlockCutter::new(Parts::new(dir, options, true, false, &mut written), options);
    for record in entries.read()? {
        cutter.push(decode_entry(&record?, &data)?)?;
    }
    let (blocks, index) = cutter.finish()?;
    let known = data.into_iter().chain(index).map(|p| (p.name, p)).collect();
    commit(dir, &Root::over(0, blocks, &known), &mut written)?;
    Ok(written)
}

/// The stored bytes of a staged document: from the spool, or read from the archive's part and
/// checked (decompressed, against its hash and size) on the way.
pub(super) fn stored(
    spool: &Spool,
    reader: Option<&Reader<Folder>>,
    key: &str,
    staged: &Staged,
) -> Result<Vec<u8>, Error> {
    match staged.source {
        Source::Spool(at) => spool.get(at, staged.length),
        Source::Part(part, offset) => {
            let reader = reader.ok_or_else(|| Error::Input("a kept document without its archive".into()))?;
            let (length, size, hash) = (staged.length, staged.size, staged.hash);
            let media_type = staged.media_type.clone();
            let entry = Entry { key: key.to_string(), part, offset, length, size, media_type, hash };
            Ok(reader.document(entry)?.stored)
        }
    }
}

/// A sort item: the key, a NUL, then its document's record (so that items sort by key, then by
/// hash). A key holding a NUL is refused: no path of the API holds one.
fn encode_item(out: &mut Vec<u8>, key: &str, staged: &Staged) -> Result<(), Error> {
    if key.contains('\0') {
        return Err(Error::Input(format!("the key {key:?} holds a NUL byte")));
    }
    out.clear();
    out.extend_from_slice(key.as_bytes());
    out.push(0);
    put_fields(out, staged);
    Ok(())
}

fn damaged(what: String) -> Error {
    Error::Damaged { file: "a write's scratch file".into(), offset: 0, what }
}

/// A sort item's key and record (with no keys).
fn decode_item(item: &[u8]) -> Result<(String, Staged), Error> {
    let nul = item.iter().position(|b| *b == 0).ok_or_else(|| damaged("a sort item without its key".into()))?;
    let key = String::from_utf8(item[..nul].to_vec()).map_err(|_| damaged("a key that is not UTF-8".into()))?;
    let mut cursor = Cursor::new(&item[nul + 1..]);
    let staged = fields(&mut cursor).and_then(|staged| cursor.end().map(|()| staged)).map_err(damaged)?;
    Ok((key, staged))
}

/// An entry as the scratch file holds it: its data part by position among the parts written.
fn encode_entry(key: &str, staged: &Staged, seq: usize, offset: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 64);
    put_str(&mut out, key);
    out.extend_from_slice(&staged.hash);
    for value in [staged.size, staged.length, seq as u64, offset] {
        put_varint(&mut out, value);
    }
    put_str(&mut out, &staged.media_type);
    out
}

fn decode_entry(record: &[u8], data: &[super::format::PartRef]) -> Result<Entry, Error> {
    let mut cursor = Cursor::new(record);
    let mut read = || -> Result<Entry, String> {
        let key = cursor.string("a key")?;
        let hash = cursor.hash("a hash")?;
        let (size, length) = (cursor.varint("a size")?, cursor.varint("a length")?);
        let (seq, offset) = (cursor.usize("a part")?, cursor.varint("an offset")?);
        let media_type = cursor.string("a media type")?;
        cursor.end()?;
        let part = data.get(seq).ok_or("a part not written")?.name;
        Ok(Entry { key, part, offset, length, size, media_type, hash })
    };
    read().map_err(damaged)
}

/// Where each document was placed, by hash: its part's position (24 bits) and offset (40 bits)
/// packed in 8 bytes, so that 1.8M documents take 86 MB (with the hash as the key).
struct Placements(HashMap<[u8; 32], u64>);

impl Placements {
    fn with_capacity(documents: usize) -> Placements {
        Placements(HashMap::with_capacity(documents))
    }

    fn get(&self, hash: &[u8; 32]) -> Option<(usize, u64)> {
        self.0.get(hash).map(|packed| ((packed >> 40) as usize, packed & ((1 << 40) - 1)))
    }

    fn insert(&mut self, hash: [u8; 32], (seq, offset): (usize, u64)) -> Result<(), Error> {
        if seq >= 1 << 24 || offset >= 1 << 40 {
            return Err(Error::Input(format!("part {seq} or offset {offset} is past what a write can place")));
        }
        self.0.insert(hash, (seq as u64) << 40 | offset);
        Ok(())
    }
}
