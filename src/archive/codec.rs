//! The archive's primitives (docs/archive.md, "Integers, hashes, gzip"): LEB128 varints,
//! strings, a cursor that decodes them and says where it failed, and deterministic gzip.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

/// Appends `value` as an unsigned LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a string: its byte length as a varint, then its bytes.
pub(crate) fn put_str(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Decodes a blob's fields in order; every failure says what was being read and where.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, at: 0 }
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(len).filter(|end| *end <= self.bytes.len());
        let end =
            end.ok_or_else(|| format!("{what} at byte {} runs past the end ({} bytes)", self.at, self.bytes.len()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub(crate) fn varint(&mut self, what: &str) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1, what)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("{what} at byte {}: a varint longer than 10 bytes", self.at))
    }

    /// A varint that counts or indexes something in memory.
    pub(crate) fn usize(&mut self, what: &str) -> Result<usize, String> {
        let value = self.varint(what)?;
        usize::try_from(value).map_err(|_| format!("{what} {value} is too large"))
    }

    pub(crate) fn string(&mut self, what: &str) -> Result<String, String> {
        let len = self.usize(what)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what} at byte {} is not UTF-8", self.at))
    }

    pub(crate) fn hash(&mut self, what: &str) -> Result<[u8; 32], String> {
        Ok(self.take(32, what)?.try_into().expect("32 bytes"))
    }

    /// Fails unless every byte was read.
    pub(crate) fn end(&self) -> Result<(), String> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(format!("{} bytes left over after the end", self.bytes.len() - self.at))
        }
    }
}

/// `bytes` as one deterministic gzip member: no name, no comment, MTIME 0, OS 255, level 6.
pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4 + 32), Compression::new(6));
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// `bytes` as one deterministic gzip member at DEFLATE `level` (0: stored blocks, for bytes
/// that are gzip already); otherwise as [`gzip`].
pub(crate) fn gzip_at(bytes: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4 + 32), Compression::new(level));
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// The bytes of one gzip member, its CRC-32 and length checked; `None` when it is damaged,
/// truncated, or followed by anything.
pub(crate) fn gunzip(stored: &[u8], size_hint: usize) -> Option<Vec<u8>> {
    let mut decoder = GzDecoder::new(stored);
    let mut out = Vec::with_capacity(size_hint);
    decoder.read_to_end(&mut out).ok()?;
    let rest = decoder.into_inner();
    rest.is_empty().then_some(out)
}

/// A hash as 64 lowercase hex digits: a part's file name.
pub(crate) fn hex(hash: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*hash).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_their_edges() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut cursor = Cursor::new(&out);
            assert_eq!(cursor.varint("v").unwrap(), value);
            cursor.end().unwrap();
        }
        assert!(Cursor::new(&[0x80]).varint("v").unwrap_err().contains("past the end"));
    }

    #[test]
    fn gzip_is_deterministic_and_checked() {
        let text = b"{\"id\": 1, \"name\": \"bulbasaur\"}".repeat(10);
        let stored = gzip(&text);
        assert_eq!(stored, gzip(&text));
        assert_eq!(&stored[4..8], &[0, 0, 0, 0], "MTIME 0");
        assert_eq!(stored[3], 0, "no name, comment or extra field");
        assert_eq!(stored[9], 0xff, "OS unknown");
        assert_eq!(gunzip(&stored, 0).unwrap(), text);
        assert!(gunzip(&stored[..stored.len() - 1], 0).is_none(), "truncated");
        let mut damaged = stored.clone();
        let last = damaged.len() - 5;
        damaged[last] ^= 1;
        assert!(gunzip(&damaged, 0).is_none(), "bad length");
    }
}
