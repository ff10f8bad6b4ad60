//! The build index's building blocks on disk: fixed-size keys, entries and stamps, counted
//! strings, and the checksum every byte passes through. Each read checks the bytes left, so
//! that a damaged or cut file is an error, never a panic or a huge allocation. Here with the
//! data table ([`super::DataFiles`]), the first part of the index; the build index's other
//! parts (its head, its table of documents, the extracts) are written with them too.

use super::Hash;
use crate::data::dataset::Span;
use crate::fsutil::Stamp;
use std::io::{Read, Write};

/// Bytes of one entry in the index file: a data file's (see [`super::DataFiles`]) or a
/// document's (plus [`STAMP_BYTES`] for its `.gz` sibling in a tree built with `--gzip`).
pub(crate) const ENTRY_BYTES: usize = KEY_BYTES + NAME_BYTES + STAMP_BYTES + 32;
pub(crate) const KEY_BYTES: usize = 16;
pub(crate) const NAME_BYTES: usize = 8;
pub(crate) const STAMP_BYTES: usize = 32;

/// A record's place in fixed-size form: indexes into the interned segments and kinds (kind 0:
/// the record itself, k: the sub-document kind k − 1). Ordered by segment, id, kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) segment: u32,
    pub(crate) id: i64,
    pub(crate) kind: u32,
}

/// One data file's or document's entry: [`ENTRY_BYTES`] in the file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) key: Key,
    /// A record's name; for a document, the name it is also published under, when it is.
    pub(crate) name: (u32, u32),
    pub(crate) stamp: Stamp,
    pub(crate) hash: [u8; 32],
}

impl Entry {
    pub(crate) fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut bytes = [0u8; ENTRY_BYTES];
        let rest = put_key(&mut bytes, self.key, self.name);
        rest[..STAMP_BYTES].copy_from_slice(&stamp_bytes(&self.stamp));
        rest[STAMP_BYTES..].copy_from_slice(&self.hash);
        out.write_all(&bytes)
    }

    pub(crate) fn decode(input: &mut Decoder<impl Read>) -> Result<Entry, String> {
        let bytes: [u8; ENTRY_BYTES] = input.array()?;
        let (key, name, rest) = get_key(&bytes);
        let hash = rest[STAMP_BYTES..].try_into().expect("32 bytes");
        Ok(Entry { key, name, stamp: get_stamp(&rest[..STAMP_BYTES]), hash })
    }
}

pub(crate) fn put_key(bytes: &mut [u8], key: Key, name: (u32, u32)) -> &mut [u8] {
    bytes[0..4].copy_from_slice(&key.segment.to_le_bytes());
    bytes[4..8].copy_from_slice(&key.kind.to_le_bytes());
    bytes[8..16].copy_from_slice(&key.id.to_le_bytes());
    bytes[16..20].copy_from_slice(&name.0.to_le_bytes());
    bytes[20..24].copy_from_slice(&name.1.to_le_bytes());
    &mut bytes[KEY_BYTES + NAME_BYTES..]
}

pub(crate) fn get_key(bytes: &[u8]) -> (Key, (u32, u32), &[u8]) {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let key = Key { segment: u32_at(0), kind: u32_at(4), id: i64::from_le_bytes(bytes[8..16].try_into().expect("8")) };
    (key, (u32_at(16), u32_at(20)), &bytes[KEY_BYTES + NAME_BYTES..])
}

/// The inode number that marks a data file's entry as a line of a table (no file has it): its
/// stamp's place then holds the line's [`Span`] (offset, length and number), so that a table
/// whose own stamp is unchanged need not be read to know where each of its records is.
const LINE_MARK: u64 = u64::MAX;

/// The stamp's place of a table line's entry: its span, marked.
pub(crate) fn span_stamp(span: Span) -> Stamp {
    Stamp { size: u64::from(span.len), mtime_ns: span.offset as i64, ctime_ns: i64::from(span.line), ino: LINE_MARK }
}

/// The span a data file's entry holds in its stamp's place, when it is a table line's.
pub(crate) fn stamp_span(stamp: &Stamp) -> Option<Span> {
    let fits = |n: i64| u32::try_from(n).ok();
    let span =
        Span { offset: stamp.mtime_ns as u64, len: u32::try_from(stamp.size).ok()?, line: fits(stamp.ctime_ns)? };
    (stamp.ino == LINE_MARK).then_some(span)
}

pub(crate) fn stamp_bytes(stamp: &Stamp) -> [u8; STAMP_BYTES] {
    let mut bytes = [0u8; STAMP_BYTES];
    bytes[0..8].copy_from_slice(&stamp.size.to_le_bytes());
    bytes[8..16].copy_from_slice(&stamp.mtime_ns.to_le_bytes());
    bytes[16..24].copy_from_slice(&stamp.ctime_ns.to_le_bytes());
    bytes[24..32].copy_from_slice(&stamp.ino.to_le_bytes());
    bytes
}

pub(crate) fn get_stamp(bytes: &[u8]) -> Stamp {
    let at = |i: usize| <[u8; 8]>::try_from(&bytes[i..i + 8]).expect("8 bytes");
    Stamp {
        size: u64::from_le_bytes(at(0)),
        mtime_ns: i64::from_le_bytes(at(8)),
        ctime_ns: i64::from_le_bytes(at(16)),
        ino: u64::from_le_bytes(at(24)),
    }
}

pub(crate) fn put_u64(out: &mut impl Write, n: u64) -> std::io::Result<()> {
    out.write_all(&n.to_le_bytes())
}

pub(crate) fn put_bytes(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    put_u64(out, bytes.len() as u64)?;
    out.write_all(bytes)
}

pub(crate) fn damaged() -> String {
    "is damaged or cut short (its checksum or its length does not match)".to_string()
}

/// Reads an index file's body, counting what is left before its checksum.
pub(crate) struct Decoder<R> {
    pub(crate) inner: R,
    pub(crate) left: u64,
}

impl<R: Read> Decoder<R> {
    pub(crate) fn exact(&mut self, bytes: &mut [u8]) -> Result<(), String> {
        if (bytes.len() as u64) > self.left {
            return Err(damaged());
        }
        self.left -= bytes.len() as u64;
        self.inner.read_exact(bytes).map_err(|_| damaged())
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut bytes = [0u8; N];
        self.exact(&mut bytes)?;
        Ok(bytes)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    /// A count of items of at least `item_bytes` each: more than the bytes left is damage.
    pub(crate) fn count(&mut self, item_bytes: usize) -> Result<usize, String> {
        let n = u64::from_le_bytes(self.array()?);
        if n.saturating_mul(item_bytes as u64) > self.left {
            return Err(damaged());
        }
        Ok(n as usize)
    }

    pub(crate) fn string(&mut self) -> Result<String, String> {
        let n = self.count(1)?;
        let mut bytes = vec![0u8; n];
        self.exact(&mut bytes)?;
        String::from_utf8(bytes).map_err(|_| damaged())
    }

    pub(crate) fn stamp(&mut self) -> Result<Stamp, String> {
        Ok(get_stamp(&self.array::<STAMP_BYTES>()?))
    }

    pub(crate) fn hash(&mut self) -> Result<Hash, String> {
        Ok(Hash(blake3::Hash::from_bytes(self.array()?)))
    }
}

/// A reader or writer that hashes every byte that passes through it.
pub(crate) struct Checksummed<T> {
    pub(crate) inner: T,
    pub(crate) hasher: blake3::Hasher,
}

impl<T> Checksummed<T> {
    pub(crate) fn new(inner: T) -> Checksummed<T> {
        Checksummed { inner, hasher: blake3::Hasher::new() }
    }

    pub(crate) fn finish(self) -> (T, blake3::Hash) {
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
