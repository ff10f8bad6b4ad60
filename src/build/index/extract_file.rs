//! A kept extract's file (`.<out>.gen/extract/<segment>.extract`), made of sections each
//! followed by the BLAKE3 of its bytes: the head (the gen and the declared filters' paths it
//! was made for), the keys (each row's record id and data hash, in list order), the summary
//! (the filters' values and their list positions, when the file holds a row for every record),
//! then the rows in blocks of [`BLOCK_ROWS`], and last the table of blocks and where it starts.
//!
//! A build reads the head, keys and summary whole, but a block of rows only when it needs one of
//! its rows: an edit that leaves a resource's names and values as they were reads a few blocks
//! of it, not its rows (docs/builds.md). Every byte used is checked against its section's
//! checksum first; a section not read is copied as it is (with its checksum) when the keys
//! alone change ([`Opened::rekey`]).

use crate::data::recorded::codec::{self, Decoder, put_bytes, put_u64};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

/// What the extract took from one record: its names entry (serialised) and, for each declared
/// filter, the values it takes.
pub(crate) type Kept = (Box<[u8]>, Vec<Vec<String>>);

/// Version of a kept extract's file; another version is not used.
const FORMAT: u32 = 2;

/// The first bytes of a kept extract's file.
const MAGIC: &[u8; 8] = b"genextra";

/// Rows a block: a block is read whole to give one of its rows (about 500 KB).
const BLOCK_ROWS: usize = 4096;

/// What a file was made for: rows made for other filters, or by another gen, are not used.
#[derive(Serialize, Deserialize, PartialEq)]
pub(super) struct Head {
    pub(super) generator: String,
    pub(super) paths: Vec<String>,
}

/// What the extract makes of a resource's rows for its filters, in list order: for each declared
/// field its values (ascending, each with the list positions of the records that take it), and
/// the most values one record gives it (with that record's id).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub(crate) fields: Vec<Vec<(String, Vec<u32>)>>,
    pub(crate) most: Vec<(usize, i64)>,
}

/// Why a kept extract's file is not used.
pub(super) enum Unused {
    /// It was made for other declared filters (gen.json changed): nothing to note.
    OtherFilters,
    /// Another format or gen, or damage: noted.
    Why(String),
}

impl From<String> for Unused {
    fn from(why: String) -> Unused {
        Unused::Why(why)
    }
}

/// Writes one section: its length, its bytes, their BLAKE3.
fn put_section(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    put_bytes(out, bytes)?;
    out.write_all(blake3::hash(bytes).as_bytes())
}

/// Writes one section whose bytes `write` gives, streamed rather than held: `write` is called
/// twice, the first time to count the bytes (the length comes first), the second to write and
/// hash them (a million keys are 40 MB).
fn put_section_with(
    out: &mut impl Write,
    write: impl Fn(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut counted = Counted(0);
    write(&mut counted)?;
    put_u64(out, counted.0)?;
    let mut hashed = Hashed { out: &mut *out, hasher: blake3::Hasher::new() };
    write(&mut hashed)?;
    let sum = hashed.hasher.finalize();
    out.write_all(sum.as_bytes())
}

/// A writer that counts the bytes written to it, and drops them.
struct Counted(u64);

impl Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer that hashes the bytes it passes on.
struct Hashed<'o, W> {
    out: &'o mut W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for Hashed<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.out.write_all(bytes)?;
        self.hasher.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Reads one section at most `left` bytes long (with its length and checksum), checked.
fn section(input: &mut impl Read, left: u64) -> Result<Vec<u8>, String> {
    let mut decoder = Decoder { inner: input, left };
    let n = decoder.count(1)?;
    if n as u64 + 32 > decoder.left {
        return Err(codec::damaged());
    }
    let mut bytes = vec![0u8; n];
    decoder.exact(&mut bytes)?;
    let sum: [u8; 32] = decoder.array()?;
    if sum != *blake3::hash(&bytes).as_bytes() { Err(codec::damaged()) } else { Ok(bytes) }
}

/// Writes a kept extract: `keys` (id and data hash, in list order), the `rows` of those
/// records in the same order, and the `summary` of them when they are every record's.
/// The keys and the summary are streamed, not held (at 1M records, a 48 MB spike at the
/// extract's end).
pub(super) fn write<'r, V: AsRef<[Vec<String>]>>(
    out: &mut impl Write,
    head: &Head,
    keys: impl Iterator<Item = (i64, [u8; 32])> + Clone,
    rows: impl Iterator<Item = (&'r [u8], V)>,
    summary: Option<&Summary>,
) -> std::io::Result<()> {
    out.write_all(MAGIC)?;
    out.write_all(&FORMAT.to_le_bytes())?;
    put_section(out, &serde_json::to_vec(head).map_err(std::io::Error::other)?)?;
    put_section_with(out, |out| {
        for (id, hash) in keys.clone() {
            out.write_all(&id.to_le_bytes())?;
            out.write_all(&hash)?;
        }
        Ok(())
    })?;
    put_section_with(out, |out| put_summary(out, summary))?;
    let (mut table, mut block, mut in_block) = (Vec::new(), Vec::new(), 0u64);
    for (entry, values) in rows {
        put_bytes(&mut block, entry)?;
        for field in values.as_ref() {
            put_u64(&mut block, field.len() as u64)?;
            for value in field {
                put_bytes(&mut block, value.as_bytes())?;
            }
        }
        in_block += 1;
        if in_block as usize == BLOCK_ROWS {
            put_block(out, &mut table, &mut block, &mut in_block)?;
        }
    }
    put_block(out, &mut table, &mut block, &mut in_block)?;
    put_section(out, &table)?;
    // where the table starts, counted back from the end of the file
    put_u64(out, table.len() as u64 + 48)
}

/// Writes the block of `rows` rows (if any) and notes it in `table`; empties it.
fn put_block(out: &mut impl Write, table: &mut Vec<u8>, block: &mut Vec<u8>, rows: &mut u64) -> std::io::Result<()> {
    if *rows > 0 {
        put_u64(table, *rows)?;
        put_u64(table, block.len() as u64)?;
        put_section(out, block)?;
        block.clear();
        *rows = 0;
    }
    Ok(())
}

fn put_summary(out: &mut dyn Write, summary: Option<&Summary>) -> std::io::Result<()> {
    let Some(summary) = summary else { return out.write_all(&[0]) };
    out.write_all(&[1])?;
    for (field, &(most, id)) in summary.fields.iter().zip(&summary.most) {
        out.write_all(&(field.len() as u64).to_le_bytes())?;
        for (value, positions) in field {
            out.write_all(&(value.len() as u64).to_le_bytes())?;
            out.write_all(value.as_bytes())?;
            out.write_all(&(positions.len() as u64).to_le_bytes())?;
            for position in positions {
                out.write_all(&position.to_le_bytes())?;
            }
        }
        out.write_all(&(most as u64).to_le_bytes())?;
        out.write_all(&id.to_le_bytes())?;
    }
    Ok(())
}

fn decode_summary(bytes: &[u8], fields: usize) -> Result<Option<Summary>, String> {
    let mut input = Decoder { inner: bytes, left: bytes.len() as u64 };
    if input.byte()? == 0 {
        return Ok(None);
    }
    let mut summary = Summary { fields: Vec::with_capacity(fields), most: Vec::with_capacity(fields) };
    for _ in 0..fields {
        let n = input.count(16)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let value = input.string()?;
            let count = input.count(4)?;
            let mut positions = Vec::with_capacity(count);
            let mut raw = vec![0u8; count * 4];
            input.exact(&mut raw)?;
            positions.extend(raw.chunks_exact(4).map(|p| u32::from_le_bytes(p.try_into().expect("4 bytes"))));
            values.push((value, positions));
        }
        summary.fields.push(values);
        let most = u64::from_le_bytes(input.array()?) as usize;
        summary.most.push((most, i64::from_le_bytes(input.array()?)));
    }
    if input.left != 0 { Err(codec::damaged()) } else { Ok(Some(summary)) }
}

/// A kept extract's file, open: its head, keys and summary read and checked; its rows read a
/// block at a time ([`Opened::rows`]).
pub(super) struct Opened {
    file: File,
    /// Each row's record id and data hash, in the order of the rows (the list's when written).
    pub(super) keys: Vec<(i64, [u8; 32])>,
    /// The filters' values of these rows, when they are every record's.
    pub(super) summary: Option<Summary>,
    /// The number of declared paths (values a row).
    paths: usize,
    /// The head and summary sections as read (with their lengths and checksums).
    head: Vec<u8>,
    summary_section: Vec<u8>,
    /// Each block: its first row, offset in the file and length (of its bytes).
    blocks: Vec<(usize, u64, u64)>,
    /// Where the blocks start.
    blocks_at: u64,
}

/// Opens the kept extract `file` (`size` bytes) made for the declared `paths`.
pub(super) fn open(mut file: File, size: u64, paths: &[String], generator: &str) -> Result<Opened, Unused> {
    let mut input = std::io::BufReader::with_capacity(1 << 16, &mut file);
    let mut start = [0u8; 12];
    let format = input.read_exact(&mut start).is_ok() && start[..8] == *MAGIC && start[8..] == FORMAT.to_le_bytes();
    let head_bytes = format.then(|| section(&mut input, size.saturating_sub(12)).ok()).flatten();
    let head: Option<Head> = head_bytes.as_deref().and_then(|bytes| serde_json::from_slice(bytes).ok());
    let (Some(head), Some(head_bytes)) = (head, head_bytes) else {
        return Err(Unused::Why("is not a kept extract of this format".into()));
    };
    if head.generator != generator {
        return Err(Unused::Why(format!("was written by {}, not by this {generator}", head.generator)));
    }
    if head.paths != paths {
        return Err(Unused::OtherFilters);
    }
    let mut at = 12 + head_bytes.len() as u64 + 40;
    let keys_bytes = section(&mut input, size.saturating_sub(at))?;
    at += keys_bytes.len() as u64 + 40;
    if keys_bytes.len() % 40 != 0 {
        return Err(codec::damaged().into());
    }
    let keys = keys_bytes
        .chunks_exact(40)
        .map(|k| (i64::from_le_bytes(k[..8].try_into().expect("8 bytes")), k[8..].try_into().expect("32 bytes")))
        .collect::<Vec<_>>();
    drop(keys_bytes);
    let summary_section = section(&mut input, size.saturating_sub(at))?;
    at += summary_section.len() as u64 + 40;
    let summary = decode_summary(&summary_section, paths.len())?;
    drop(input);
    let blocks_at = at;
    // the table, where the last 8 bytes say
    let back = (|| -> std::io::Result<u64> {
        file.seek(SeekFrom::End(-8))?;
        let mut bytes = [0u8; 8];
        file.read_exact(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    })()
    .map_err(|_| codec::damaged())?;
    let table_at = size.checked_sub(back).filter(|&t| t >= blocks_at && back >= 48).ok_or_else(codec::damaged)?;
    file.seek(SeekFrom::Start(table_at)).map_err(|_| codec::damaged())?;
    let table = section(&mut (&mut file).take(back - 8), back - 8)?;
    if table.len() as u64 + 48 != back || table.len() % 16 != 0 {
        return Err(codec::damaged().into());
    }
    let (mut blocks, mut first, mut offset) = (Vec::new(), 0usize, blocks_at);
    for entry in table.chunks_exact(16) {
        let rows = u64::from_le_bytes(entry[..8].try_into().expect("8 bytes")) as usize;
        let len = u64::from_le_bytes(entry[8..].try_into().expect("8 bytes"));
        blocks.push((first, offset, len));
        first = first.saturating_add(rows);
        offset = offset.saturating_add(len).saturating_add(40);
    }
    if first != keys.len() || offset != table_at {
        return Err(codec::damaged().into());
    }
    let paths = paths.len();
    let head = head_bytes;
    Ok(Opened { file, keys, summary, paths, head, summary_section, blocks, blocks_at })
}

impl Opened {
    /// The rows of the block that holds row `row` (by its number in [`Opened::keys`]), and the
    /// number of its first row.
    pub(super) fn block_of(&mut self, row: usize) -> Result<(usize, Vec<Kept>), String> {
        let at =
            self.blocks.partition_point(|(first, _, _)| *first <= row).checked_sub(1).ok_or_else(codec::damaged)?;
        let (first, offset, len) = self.blocks[at];
        let rows = self.blocks.get(at + 1).map_or(self.keys.len(), |next| next.0) - first;
        self.file.seek(SeekFrom::Start(offset)).map_err(|_| codec::damaged())?;
        let bytes = section(&mut std::io::BufReader::new(&mut self.file), len + 40)?;
        Ok((first, decode_rows(&bytes, rows, self.paths)?))
    }

    /// Every row, in order.
    pub(super) fn rows(&mut self) -> Result<Vec<Kept>, String> {
        self.file.seek(SeekFrom::Start(self.blocks_at)).map_err(|_| codec::damaged())?;
        let mut input = std::io::BufReader::with_capacity(1 << 20, &mut self.file);
        let mut rows = Vec::with_capacity(self.keys.len());
        for (at, &(first, _, len)) in self.blocks.iter().enumerate() {
            let n = self.blocks.get(at + 1).map_or(self.keys.len(), |next| next.0) - first;
            let bytes = section(&mut input, len + 40)?;
            rows.extend(decode_rows(&bytes, n, self.paths)?);
        }
        Ok(rows)
    }

    /// Writes to `out` this file with `keys` instead of its own (as many, the same ids in the
    /// same order: only the data hashes change), its other sections copied as they are.
    pub(super) fn rekey(&mut self, out: &mut File, keys: &[(i64, [u8; 32])]) -> std::io::Result<()> {
        debug_assert!(keys.len() == self.keys.len());
        let mut head = std::io::BufWriter::with_capacity(1 << 20, &mut *out);
        head.write_all(MAGIC)?;
        head.write_all(&FORMAT.to_le_bytes())?;
        put_section(&mut head, &self.head)?;
        let mut bytes = Vec::with_capacity(keys.len() * 40);
        for (id, hash) in keys {
            bytes.extend_from_slice(&id.to_le_bytes());
            bytes.extend_from_slice(hash);
        }
        put_section(&mut head, &bytes)?;
        put_section(&mut head, &self.summary_section)?;
        head.flush()?;
        drop(head);
        // the blocks, the table and its place, as they are
        self.file.seek(SeekFrom::Start(self.blocks_at))?;
        let rest = self.file.metadata()?.len() - self.blocks_at;
        let copied = std::io::copy(&mut (&mut self.file).take(rest), out)?;
        if copied == rest { Ok(()) } else { Err(std::io::Error::other("cut short")) }
    }
}

/// Decodes `n` rows of a block, each of `paths` fields.
fn decode_rows(bytes: &[u8], n: usize, paths: usize) -> Result<Vec<Kept>, String> {
    let mut input = Decoder { inner: bytes, left: bytes.len() as u64 };
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        let entry = input.string()?.into_bytes().into_boxed_slice();
        let mut values = Vec::with_capacity(paths);
        for _ in 0..paths {
            let count = input.count(8)?;
            values.push((0..count).map(|_| input.string()).collect::<Result<Vec<_>, _>>()?);
        }
        rows.push((entry, values));
    }
    if input.left != 0 { Err(codec::damaged()) } else { Ok(rows) }
}
