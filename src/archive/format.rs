//! The archive's two structures in bytes (docs/archive.md, "The root", "A directory block"):
//! the root, which names the parts and indexes the blocks, and a directory block, a sorted run
//! of entries. Both are held with part names, not positions, so that an edit can move them
//! into a new root as they are; positions exist only in the encoded bytes.

use std::collections::{BTreeMap, BTreeSet};

use super::codec::{Cursor, gunzip, gzip, put_str, put_varint};

/// The root's magic, before its version.
const ROOT_MAGIC: &[u8; 8] = b"GENAPIAR";
/// The version of the format this module writes and reads.
pub(crate) const VERSION: u16 = 1;
/// A directory block's magic.
const BLOCK_MAGIC: &[u8; 4] = b"GAB1";

/// A part as the root names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PartRef {
    pub(crate) name: [u8; 32],
    pub(crate) size: u64,
    /// An index part (directory blocks), else a data part (documents).
    pub(crate) index: bool,
    /// Written by an edit since the last full write.
    pub(crate) delta: bool,
}

/// A directory block as the root indexes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlockRef {
    pub(crate) first: String,
    /// The index part that holds it.
    pub(crate) part: [u8; 32],
    pub(crate) offset: u64,
    pub(crate) length: u64,
    /// BLAKE3 of its stored (gzip) bytes.
    pub(crate) hash: [u8; 32],
    pub(crate) entries: u64,
    /// The data parts its entries point into, sorted.
    pub(crate) refs: Vec<[u8; 32]>,
}

/// The root: the commit point of an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Root {
    pub(crate) edits: u64,
    /// Sorted by name: exactly the parts the blocks use.
    pub(crate) parts: Vec<PartRef>,
    pub(crate) blocks: Vec<BlockRef>,
}

/// One key of a directory block: where its document is, and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key (a path of the API, as the tree names its file).
    pub key: String,
    /// The name of the data part holding the stored document.
    pub part: [u8; 32],
    /// Where the stored (gzip) document starts in its part.
    pub offset: u64,
    /// Its stored (gzip) length.
    pub length: u64,
    /// Its length decompressed.
    pub(crate) size: u64,
    /// The media type a host sends it with.
    pub media_type: String,
    /// BLAKE3 of the decompressed document (its ETag).
    pub hash: [u8; 32],
}

impl Root {
    /// The root over `blocks`, naming exactly the parts they use; `known` gives each part's size
    /// and kind.
    pub(crate) fn over(edits: u64, blocks: Vec<BlockRef>, known: &BTreeMap<[u8; 32], PartRef>) -> Root {
        let used: BTreeSet<[u8; 32]> = blocks.iter().flat_map(|b| b.refs.iter().copied().chain([b.part])).collect();
        let parts = used.iter().map(|name| known[name]).collect();
        Root { edits, parts, blocks }
    }

    /// The root's stored bytes: one gzip member.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let position: BTreeMap<[u8; 32], u64> =
            self.parts.iter().enumerate().map(|(i, p)| (p.name, i as u64)).collect();
        let mut out = ROOT_MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_le_bytes());
        put_varint(&mut out, self.edits);
        put_varint(&mut out, self.parts.len() as u64);
        for part in &self.parts {
            out.extend_from_slice(&part.name);
            put_varint(&mut out, part.size);
            out.push(u8::from(part.index) | (u8::from(part.delta) << 1));
        }
        put_varint(&mut out, self.blocks.len() as u64);
        for block in &self.blocks {
            put_str(&mut out, &block.first);
            put_varint(&mut out, position[&block.part]);
            put_varint(&mut out, block.offset);
            put_varint(&mut out, block.length);
            out.extend_from_slice(&block.hash);
            put_varint(&mut out, block.entries);
            put_varint(&mut out, block.refs.len() as u64);
            for name in &block.refs {
                put_varint(&mut out, position[name]);
            }
        }
        gzip(&out)
    }

    /// The root from its stored bytes; the error says what is wrong with them.
    pub(crate) fn decode(stored: &[u8]) -> Result<Root, String> {
        let body = gunzip(stored, stored.len() * 4).ok_or("not a whole gzip member (damaged or truncated)")?;
        let mut at = Cursor::new(&body);
        if at.take(8, "the magic")? != ROOT_MAGIC {
            return Err("not an archive root (no GENAPIAR magic)".into());
        }
        let version = u16::from_le_bytes(at.take(2, "the version")?.try_into().expect("2 bytes"));
        if version != VERSION {
            return Err(format!("format version {version}, and this gen reads version {VERSION}"));
        }
        let edits = at.varint("the edit count")?;
        let mut parts = Vec::new();
        for _ in 0..at.usize("the part count")? {
            let name = at.hash("a part name")?;
            let size = at.varint("a part size")?;
            let flags = at.take(1, "a part's flags")?[0];
            parts.push(PartRef { name, size, index: flags & 1 != 0, delta: flags & 2 != 0 });
        }
        let part = |at: &mut Cursor, what: &str| -> Result<[u8; 32], String> {
            let i = at.usize(what)?;
            parts.get(i).map(|p| p.name).ok_or_else(|| format!("{what} {i} names no part (there are {})", parts.len()))
        };
        let mut blocks: Vec<BlockRef> = Vec::new();
        for _ in 0..at.usize("the block count")? {
            let first = at.string("a block's first key")?;
            let (index, offset, length) =
                (part(&mut at, "a block's part")?, at.varint("an offset")?, at.varint("a length")?);
            let (hash, entries) = (at.hash("a block hash")?, at.varint("an entry count")?);
            let refs = (0..at.usize("a ref count")?)
                .map(|_| part(&mut at, "a block's data part"))
                .collect::<Result<_, _>>()?;
            if blocks.last().is_some_and(|last| last.first >= first) {
                return Err(format!("block keys out of order at {first:?}"));
            }
            blocks.push(BlockRef { first, part: index, offset, length, hash, entries, refs });
        }
        at.end()?;
        Ok(Root { edits, parts, blocks })
    }
}

/// The stored bytes of a block holding `entries` (sorted by key, each key once).
pub(crate) fn encode_block(entries: &[Entry]) -> Vec<u8> {
    let parts: BTreeSet<[u8; 32]> = entries.iter().map(|e| e.part).collect();
    let media: BTreeSet<&str> = entries.iter().map(|e| e.media_type.as_str()).collect();
    let part_at: BTreeMap<&[u8; 32], u64> = parts.iter().zip(0..).collect();
    let media_at: BTreeMap<&str, u64> = media.iter().copied().zip(0..).collect();
    let mut out = BLOCK_MAGIC.to_vec();
    put_varint(&mut out, parts.len() as u64);
    parts.iter().for_each(|name| out.extend_from_slice(name));
    put_varint(&mut out, media.len() as u64);
    media.iter().for_each(|m| put_str(&mut out, m));
    put_varint(&mut out, entries.len() as u64);
    let mut previous = "";
    for entry in entries {
        let shared = previous.bytes().zip(entry.key.bytes()).take_while(|(a, b)| a == b).count();
        let shared = (0..=shared).rev().find(|n| entry.key.is_char_boundary(*n)).unwrap_or(0);
        put_varint(&mut out, shared as u64);
        put_str(&mut out, &entry.key[shared..]);
        for value in [part_at[&entry.part], entry.offset, entry.length, entry.size, media_at[entry.media_type.as_str()]]
        {
            put_varint(&mut out, value);
        }
        out.extend_from_slice(&entry.hash);
        previous = &entry.key;
    }
    gzip(&out)
}

/// A block's entries from its stored bytes; the error says what is wrong with them.
pub(crate) fn decode_block(stored: &[u8]) -> Result<Vec<Entry>, String> {
    let body = gunzip(stored, stored.len() * 3).ok_or("not a whole gzip member (damaged or truncated)")?;
    let mut at = Cursor::new(&body);
    if at.take(4, "the magic")? != BLOCK_MAGIC {
        return Err("not a directory block (no GAB1 magic)".into());
    }
    let parts = (0..at.usize("the part count")?).map(|_| at.hash("a part name")).collect::<Result<Vec<_>, _>>()?;
    let media = (0..at.usize("the media count")?).map(|_| at.string("a media type")).collect::<Result<Vec<_>, _>>()?;
    let count = at.usize("the entry count")?;
    let mut entries: Vec<Entry> = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let shared = at.usize("a shared length")?;
        let previous = entries.last().map_or("", |e| e.key.as_str());
        let prefix = previous.get(..shared).ok_or_else(|| format!("a key shares {shared} bytes of {previous:?}"))?;
        let key = format!("{prefix}{}", at.string("a key")?);
        let part = *parts.get(at.usize("a part")?).ok_or("an entry names no part")?;
        let (offset, length, size) = (at.varint("an offset")?, at.varint("a length")?, at.varint("a size")?);
        let media_type = media.get(at.usize("a media type")?).ok_or("an entry names no media type")?.clone();
        let hash = at.hash("a document hash")?;
        if previous >= key.as_str() && !entries.is_empty() {
            return Err(format!("keys out of order at {key:?}"));
        }
        entries.push(Entry { key, part, offset, length, size, media_type, hash });
    }
    at.end()?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, part: u8) -> Entry {
        let media_type = "application/json; charset=utf-8".to_string();
        Entry { key: key.into(), part: [part; 32], offset: 7, length: 20, size: 40, media_type, hash: [9; 32] }
    }

    #[test]
    fn a_block_round_trips_keys_that_share_part_of_a_character() {
        // "é" is C3 A9 and "è" C3 A8: the keys share a byte that is not a whole character
        let entries = vec![entry("api/é", 1), entry("api/è/x", 2), entry("api/è/y", 1)];
        let mut sorted = entries.clone();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(decode_block(&encode_block(&sorted)).unwrap(), sorted);
    }

    #[test]
    fn a_root_round_trips_and_a_newer_version_is_refused() {
        let block = BlockRef {
            first: "a".into(),
            part: [2; 32],
            offset: 0,
            length: 9,
            hash: [3; 32],
            entries: 4,
            refs: vec![[1; 32]],
        };
        let known = [
            ([1; 32], PartRef { name: [1; 32], size: 10, index: false, delta: false }),
            ([2; 32], PartRef { name: [2; 32], size: 9, index: true, delta: true }),
        ];
        let root = Root::over(3, vec![block], &known.into_iter().collect());
        assert_eq!(root.parts.len(), 2);
        assert_eq!(Root::decode(&root.encode()).unwrap(), root);
        let body = gunzip(&root.encode(), 0).unwrap();
        let mut newer = body.clone();
        newer[8] = 2;
        assert!(Root::decode(&gzip(&newer)).unwrap_err().contains("format version 2"));
        let mut foreign = body;
        foreign[0] = b'X';
        assert!(Root::decode(&gzip(&foreign)).unwrap_err().contains("magic"));
    }
}
