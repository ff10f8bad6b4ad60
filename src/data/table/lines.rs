//! A table's lines, read: the file is read in blocks of 1 MB, each cut after its last
//! newline; a block's lines are hashed in parallel, then given in order to the reader. Memory
//! holds one block (more only while a longer line is read), whatever the table's size.

use super::Read;
use crate::data::dataset::{Span, at_line};
use crate::fsutil::NotRead;
use crate::problem::Problem;
use rayon::prelude::*;
use std::io::Read as _;
use std::path::Path;

/// Bytes read at a time: enough lines (thousands) for the hashing to be shared out, little to hold.
const BLOCK: usize = 1 << 20;

/// How a line ends, as the table's hash records it after the line's hash: `\n`, `\r\n`, or
/// nothing (the last line of a file without a final newline); a line skipped as too long.
const ENDS_LF: u8 = 1;
const ENDS_CRLF: u8 = 2;
const ENDS_FILE: u8 = 0;
const SKIPPED: u8 = 3;

/// Reads `file` a line at a time, giving each line (without its newline, or `\r\n`) and its
/// hash to `read`; room is made for `lines` lines. The table's hash is that of each line's hash followed by how the line ends:
/// any byte changed, a line moved, a line end changed changes it, for 33 bytes a line hashed
/// instead of the whole file again.
/// A blank line is a problem (a table holds one record a line; the file may end with a newline
/// or not), and so is a line longer than `limit` bytes or a table with no lines.
pub(super) fn read_lines<T>(
    file: &Path,
    limit: u64,
    lines: usize,
    mut read: impl FnMut(Span, &[u8], &blake3::Hash, &mut Vec<Problem>) -> Option<T>,
) -> Read<T> {
    let (items, hashes) = (Vec::with_capacity(lines), Vec::with_capacity(lines));
    let mut out = Read { items, hashes, problems: Vec::new(), hash: blake3::hash(b"") };
    // opened as a record file is (a regular file, without blocking), and read to its size then
    let mut input = match crate::fsutil::open_table(file) {
        Ok((input, size)) => input.take(size),
        Err(NotRead::Io(e)) => {
            out.problems.push(Problem::new(file, "-", format!("cannot read: {e}")));
            return out;
        }
        Err(refused) => {
            out.problems.push(Problem::whole(file, refused.to_string()));
            return out;
        }
    };
    let mut lines = Lines { file, limit, offset: 0, number: 0, whole: blake3::Hasher::new(), ends: Vec::new() };
    let (mut buf, mut skipping) = (Vec::with_capacity(BLOCK), false);
    loop {
        let spare = (buf.capacity() - buf.len()) as u64;
        let eof = match (&mut input).take(spare).read_to_end(&mut buf) {
            Ok(n) => (n as u64) < spare,
            Err(e) => {
                out.problems.push(Problem::new(file, "-", format!("cannot read: {e}")));
                break;
            }
        };
        if skipping {
            // The rest of a line too long to hold: passed over up to its newline.
            let Some(end) = memchr::memchr(b'\n', &buf) else {
                lines.offset += buf.len() as u64;
                buf.clear();
                if eof {
                    break;
                }
                continue;
            };
            lines.offset += end as u64 + 1;
            buf.drain(..=end);
            skipping = false;
        }
        let cut = if eof { buf.len() } else { memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1) };
        if cut == 0 && !eof {
            if buf.len() as u64 > limit.saturating_add(1) {
                lines.skip_long_line(&mut out.problems);
                lines.offset += buf.len() as u64;
                (skipping, buf) = (true, Vec::with_capacity(BLOCK));
            } else {
                buf.reserve(buf.len()); // a line longer than the block: read on to its end
            }
            continue;
        }
        lines.block(&buf[..cut], &mut out, &mut read);
        buf.drain(..cut);
        if eof {
            break;
        }
    }
    out.hash = lines.whole.finalize();
    if lines.number == 0 && out.problems.is_empty() {
        out.problems.push(Problem::whole(file, "empty table: add one record a line, or remove the file"));
    }
    out
}

/// Where the reading of a table is, and its hash so far.
struct Lines<'a> {
    file: &'a Path,
    limit: u64,
    /// Byte offset of the next block in the file.
    offset: u64,
    /// Number of the last line read.
    number: u32,
    whole: blake3::Hasher,
    /// Each line's hash and end of a block, fed to `whole` at once (a hash fed 33 bytes at a
    /// time costs more than the hashing).
    ends: Vec<u8>,
}

impl Lines<'_> {
    /// Reads the lines of `block` (whole lines, the last one ending the block), hashing them in
    /// parallel, then checking them and giving them to `read` in order.
    fn block<T>(
        &mut self,
        block: &[u8],
        out: &mut Read<T>,
        read: &mut impl FnMut(Span, &[u8], &blake3::Hash, &mut Vec<Problem>) -> Option<T>,
    ) {
        let mut spans: Vec<(usize, usize, u8)> = Vec::new();
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', block) {
            let crlf = newline > start && block[newline - 1] == b'\r';
            spans.push((start, newline - usize::from(crlf), if crlf { ENDS_CRLF } else { ENDS_LF }));
            start = newline + 1;
        }
        if start < block.len() {
            spans.push((start, block.len(), ENDS_FILE));
        }
        let hashes: Vec<blake3::Hash> =
            spans.par_iter().with_min_len(256).map(|&(start, end, _)| blake3::hash(&block[start..end])).collect();
        self.ends.clear();
        for (hash, &(_, _, end)) in hashes.iter().zip(&spans) {
            self.ends.extend_from_slice(hash.as_bytes());
            self.ends.push(end);
        }
        self.whole.update(&self.ends);
        for (hash, &(start, end, _)) in hashes.iter().zip(&spans) {
            self.number += 1;
            let bytes = &block[start..end];
            let span = Span { offset: self.offset + start as u64, len: bytes.len() as u32, line: self.number };
            if let Some(item) = self.line(span, bytes, hash, out, read) {
                out.items.push(item);
                out.hashes.push(*hash);
            }
        }
        self.offset += block.len() as u64;
    }

    /// Checks one line and gives it to `read`: a blank line or one longer than the limit is a
    /// problem.
    fn line<T>(
        &self,
        span: Span,
        bytes: &[u8],
        hash: &blake3::Hash,
        out: &mut Read<T>,
        read: &mut impl FnMut(Span, &[u8], &blake3::Hash, &mut Vec<Problem>) -> Option<T>,
    ) -> Option<T> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            out.problems.push(Problem::whole(
                &at_line(self.file, span.line, 1),
                "blank line: a table holds one record a line; remove it",
            ));
            None
        } else if bytes.len() as u64 > self.limit || bytes.len() > u32::MAX as usize {
            out.problems.push(self.too_long(span.line));
            None
        } else {
            read(span, bytes, hash, &mut out.problems)
        }
    }

    /// Notes the next line as too long to read, before it is passed over.
    fn skip_long_line(&mut self, problems: &mut Vec<Problem>) {
        self.number += 1;
        problems.push(self.too_long(self.number));
        self.whole.update(&[SKIPPED]);
    }

    fn too_long(&self, line: u32) -> Problem {
        Problem::whole(
            &at_line(self.file, line, 1),
            format!("a line longer than the {} MB limit: raise \"max_document_mb\" in gen.json", self.limit >> 20),
        )
    }
}
