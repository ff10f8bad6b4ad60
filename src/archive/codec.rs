//! The archive's primitives (docs/archive.md, "Integers, hashes, gzip"): LEB128 varints,
//! strings, a cursor that decodes them and says where it failed, and deterministic gzip.

use std::io::Read;

use flate2::read::GzDecoder;
use flate2::{Compress, Compression, Crc, Decompress, FlushCompress, FlushDecompress, Status};

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
    gzip_at(bytes, 6)
}

/// `bytes` gzipped by flate2's `GzEncoder` (a DEFLATE state made for the call).
fn encoder_gzip(bytes: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() + 64), Compression::new(level));
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// The gzip header gen writes: no name, no comment, no extra field, MTIME 0, OS 255 (unknown),
/// XFL as zlib sets it for the level (4 at 0 and 1, 2 at 9, else 0).
fn header(level: u32) -> [u8; 10] {
    let xfl = match level {
        0 | 1 => 4,
        9.. => 2,
        _ => 0,
    };
    [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 0xff]
}

thread_local! {
    /// One DEFLATE state per level on each thread, reset for each document: a state is about
    /// 300 KB, and made afresh for each of a million documents its allocation, zeroing and
    /// release took most of an archive build's time (docs/benchmarks/issue-49-archive.md).
    static DEFLATE: std::cell::RefCell<Vec<(u32, Compress)>> = const { std::cell::RefCell::new(Vec::new()) };
    /// One INFLATE state on each thread, reset for each document.
    static INFLATE: std::cell::RefCell<Option<Decompress>> = const { std::cell::RefCell::new(None) };
}

/// `bytes` as one deterministic gzip member at DEFLATE `level` (0: stored blocks, for bytes
/// that are gzip already): the bytes flate2's `GzEncoder` writes, from a state kept per thread.
pub(crate) fn gzip_at(bytes: &[u8], level: u32) -> Vec<u8> {
    if level < 2 {
        // at 0 and 1, zlib-rs cuts blocks where the output buffer ends: `GzEncoder`'s cuts, kept
        return encoder_gzip(bytes, level);
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 + 64);
    out.extend_from_slice(&header(level));
    DEFLATE.with(|states| {
        let mut states = states.borrow_mut();
        let at = match states.iter().position(|(l, _)| *l == level) {
            Some(at) => at,
            None => {
                states.push((level, Compress::new(Compression::new(level), false)));
                states.len() - 1
            }
        };
        let state = &mut states[at].1;
        state.reset();
        loop {
            let read = state.total_in() as usize;
            out.reserve(bytes.len().saturating_sub(read) / 2 + 1024);
            match state.compress_vec(&bytes[read..], &mut out, FlushCompress::Finish) {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {}
                Err(e) => unreachable!("DEFLATE into memory cannot fail: {e}"),
            }
        }
    });
    let mut crc = Crc::new();
    crc.update(bytes);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out
}

/// The bytes of one gzip member, its CRC-32 and length checked; `None` when it is damaged,
/// truncated, or followed by anything. A member with gen's header is inflated by a state kept
/// per thread; any other by flate2's `GzDecoder`.
pub(crate) fn gunzip(stored: &[u8], size_hint: usize) -> Option<Vec<u8>> {
    let plain = stored.len() >= 18 && stored[..4] == [0x1f, 0x8b, 8, 0];
    if !plain {
        let mut decoder = GzDecoder::new(stored);
        let mut out = Vec::with_capacity(size_hint);
        decoder.read_to_end(&mut out).ok()?;
        return decoder.into_inner().is_empty().then_some(out);
    }
    let (body, trailer) = stored[10..].split_at(stored.len() - 18);
    let mut out = Vec::with_capacity(size_hint);
    let whole = INFLATE.with(|state| {
        let mut state = state.borrow_mut();
        let state = state.get_or_insert_with(|| Decompress::new(false));
        state.reset(false);
        loop {
            let read = state.total_in() as usize;
            out.reserve(size_hint.saturating_sub(out.len()).max(4096));
            match state.decompress_vec(&body[read..], &mut out, FlushDecompress::Finish) {
                Ok(Status::StreamEnd) => return state.total_in() as usize == body.len(),
                Ok(_) if state.total_in() as usize == body.len() && out.len() < out.capacity() => return false,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    });
    let mut crc = Crc::new();
    crc.update(&out);
    let expected = (crc.sum().to_le_bytes(), (out.len() as u32).to_le_bytes());
    (whole && trailer[..4] == expected.0 && trailer[4..] == expected.1).then_some(out)
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
    fn a_kept_state_writes_what_a_fresh_encoder_writes() {
        let mut seed = 7u64;
        let mut noise = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (seed >> 59) as u8 + b'a'
                })
                .collect()
        };
        let mut inputs = vec![Vec::new(), b"x".to_vec(), b"{\"id\": 1}".repeat(5000)];
        inputs.extend([10, 1000, 70_000, 300_000].map(&mut noise));
        for level in [0, 1, 2, 4, 6, 9] {
            for input in &inputs {
                let ours = gzip_at(input, level);
                assert_eq!(ours, encoder_gzip(input, level), "level {level}, {} bytes", input.len());
                assert_eq!(gunzip(&ours, 0).as_deref(), Some(input.as_slice()));
                assert_eq!(gzip_at(input, level), ours, "the state is reset between documents");
            }
        }
        let foreign = flate2::GzBuilder::new().filename("x").write(Vec::new(), Compression::new(6));
        let mut foreign = foreign;
        std::io::Write::write_all(&mut foreign, b"named").unwrap();
        assert_eq!(gunzip(&foreign.finish().unwrap(), 0).unwrap(), b"named", "any other header is read too");
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
