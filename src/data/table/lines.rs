//! A table's lines, read: the file is read in blocks of 1 MB, each cut after its last whole
//! group of lines; a block's groups, then its lines, are hashed in parallel, then given in
//! order to the reader. Memory holds one block (more only while a longer line or group is
//! read), whatever the table's size.
//!
//! Lines are also hashed in groups of [`GROUP`], by line number (lines 1 to 256, 257 to 512,
//! …), each group's bytes (line ends included) as one input: a group of a few hundred
//! kilobytes is hashed several times faster than its lines one by one. A group whose hash is
//! the one the previous build recorded at its number holds the very lines recorded at its line
//! numbers, whose hashes are taken from there; only the lines of the other groups are hashed
//! one by one. An edit changes its own group's hash only; a line added or removed changes every
//! group after it, which are then read as a table without groups is.

use super::{KnownLines, Read};
use crate::data::dataset::{Span, at_line};
use crate::fsutil::NotRead;
use crate::problem::Problem;
use rayon::prelude::*;
use std::io::Read as _;
use std::path::Path;

/// Bytes read at a time: enough groups (several) and lines (thousands) for the hashing to be
/// shared out, little to hold.
const BLOCK: usize = 1 << 20;

/// Lines a group.
pub(crate) const GROUP: u32 = 256;

/// A block is read on until it holds a whole group, up to this many bytes: past it, its lines
/// are read without their group (a group of lines this long is rare, and gains nothing).
const GROUP_BYTES_MAX: usize = 16 << 20;

/// The hash recorded for a group that was not hashed whole (it was read in two blocks).
const NO_GROUP: [u8; 32] = [0; 32];

/// How a line ends, as the table's hash records it after the line's hash: `\n`, `\r\n`, or
/// nothing (the last line of a file without a final newline); a line skipped as too long.
const ENDS_LF: u8 = 1;
const ENDS_CRLF: u8 = 2;
const ENDS_FILE: u8 = 0;
const SKIPPED: u8 = 3;

/// Reads `file` a line at a time, giving each line (without its newline, or `\r\n`) and its
/// hash to `parse` (lines in parallel), then each item it gives to `keep`, in line order (an
/// item it refuses is left out); room is made for as many lines as `known` holds, and a group of lines
/// `known` recorded with the same bytes takes its lines' hashes from there. The table's hash is
/// that of each line's hash followed by how the line ends: any byte changed, a line moved, a
/// line end changed changes it, for 33 bytes a line hashed instead of the whole file again.
/// A blank line is a problem (a table holds one record a line; the file may end with a newline
/// or not), and so is a line longer than `limit` bytes or a table with no lines.
pub(super) fn read_lines<P: Send, T>(
    file: &Path,
    limit: u64,
    known: &KnownLines<'_>,
    (parse, mut keep): (
        impl Fn(Span, &[u8], &blake3::Hash, &mut Vec<Problem>) -> Option<P> + Sync,
        impl FnMut(P, Span, &mut Vec<Problem>) -> Option<T>,
    ),
) -> Read<T> {
    let expected = known.count();
    let (items, hashes) = (Vec::with_capacity(expected), Vec::with_capacity(expected));
    let groups = Vec::with_capacity(expected.div_ceil(GROUP as usize));
    let mut out = Read { items, hashes, groups, problems: Vec::new(), hash: blake3::hash(b"") };
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
    let (mut lines, mut parsed) = (Lines::new(file, limit), Vec::new());
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
            skipping = lines.pass_long_line(&mut buf);
            if skipping && eof {
                break;
            } else if skipping {
                continue;
            }
        }
        let whole_lines = if eof { buf.len() } else { memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1) };
        if whole_lines == 0 && !eof {
            if buf.len() as u64 > limit.saturating_add(1) {
                lines.skip_long_line(&mut out.problems);
                lines.offset += buf.len() as u64;
                (skipping, buf) = (true, Vec::with_capacity(BLOCK));
            } else {
                buf.reserve(buf.len()); // a line longer than the block: read on to its end
            }
            continue;
        }
        // Up to the last whole group; every line at the end of the file, or once the block is
        // too long to wait for a group's end.
        let every_line = eof || buf.len() >= GROUP_BYTES_MAX;
        let cut = lines.block(&buf[..whole_lines], every_line, known, (&mut out, &mut parsed), (&parse, &mut keep));
        if cut == 0 && !eof {
            buf.reserve(buf.len()); // a group longer than the block: read on to its end
            continue;
        }
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
    /// What each line is checked for (and the file, for the problems).
    check: Check<'a>,
    /// Byte offset of the next block in the file.
    offset: u64,
    /// Number of the last line read.
    number: u32,
    whole: blake3::Hasher,
    /// Each line's hash and end of a block, fed to `whole` at once (a hash fed 33 bytes at a
    /// time costs more than the hashing).
    ends: Vec<u8>,
    scratch: Scratch,
}

/// A block's lines, the hashes recorded for them, and their hashes: kept from block to block.
#[derive(Default)]
struct Scratch {
    spans: Vec<LineAt>,
    recorded: Vec<Option<blake3::Hash>>,
    hashes: Vec<blake3::Hash>,
}

impl Scratch {
    /// The lines of `block`; when `first` (the lines before it) is given, only those up to the
    /// end of the last group that ends in it.
    fn lines_of(&mut self, block: &[u8], first: Option<u32>) {
        let spans = &mut self.spans;
        spans.clear();
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', block) {
            let crlf = newline > start && block[newline - 1] == b'\r';
            let end = newline - usize::from(crlf);
            spans.push(LineAt { start, end, ends: if crlf { ENDS_CRLF } else { ENDS_LF }, next: newline + 1 });
            start = newline + 1;
        }
        if start < block.len() {
            spans.push(LineAt { start, end: block.len(), ends: ENDS_FILE, next: block.len() });
        }
        if let Some(first) = first {
            let whole = (first as usize + spans.len()) / GROUP as usize * GROUP as usize;
            spans.truncate(whole.saturating_sub(first as usize));
        }
    }

    /// Each line's hash (its lines after the `first` of the table): its groups hashed (their
    /// hashes pushed on `groups`), the lines of a group `known` recorded with the same bytes
    /// given their recorded hashes, the others hashed, in parallel.
    fn hash(&mut self, block: &[u8], first: u32, known: &KnownLines<'_>, groups: &mut Vec<[u8; 32]>) {
        let Scratch { spans, recorded, hashes } = self;
        // The groups begun in this block: (group number, first and last line's index in
        // `spans`). One begun in an earlier block (cut past GROUP_BYTES_MAX, or after a line
        // too long to read) is not hashed. The last one may end in the next block (read here past GROUP_BYTES_MAX) or be
        // the file's last: its lines' bytes are hashed all the same, and a hash equal to the
        // recorded one says the same of its lines as a whole group's.
        let mut begun: Vec<(usize, usize, usize)> = Vec::new();
        let mut i = 0;
        while i < spans.len() {
            let g = (first as usize + i) / GROUP as usize;
            let end = ((g + 1) * GROUP as usize - first as usize).min(spans.len());
            if g * (GROUP as usize) < first as usize {
                if groups.len() == g {
                    groups.push(NO_GROUP);
                }
            } else {
                begun.push((g, i, end));
            }
            i = end;
        }
        let group_hashes: Vec<blake3::Hash> = begun
            .par_iter()
            .map(|&(_, from, to)| blake3::hash(&block[spans[from].start..spans[to - 1].next]))
            .collect();
        // Each line's hash when its group's bytes are those recorded, else `None`.
        recorded.clear();
        recorded.resize(spans.len(), None);
        for (&(g, from, to), hash) in begun.iter().zip(&group_hashes) {
            if groups.len() == g {
                groups.push(*hash.as_bytes());
            }
            if known.group(g) != Some(hash.as_bytes()) {
                continue;
            }
            for i in from..to {
                recorded[i] = known.hash_at(first + 1 + i as u32, spans[i].end - spans[i].start);
                if recorded[i].is_none() {
                    recorded[from..=i].fill(None); // not the lines recorded: each is hashed
                    break;
                }
            }
        }
        spans
            .par_iter()
            .zip(&*recorded)
            .with_min_len(256)
            .map(|(at, recorded)| recorded.unwrap_or_else(|| blake3::hash(&block[at.start..at.end])))
            .collect_into_vec(hashes);
    }
}

/// A line checked and parsed: where it is, what it gave, and its problems.
type Parsed<P> = (Span, Option<P>, Vec<Problem>);

/// A line of a block: where it starts and ends (its line end left out), how it ends, and where
/// the next one starts.
#[derive(Clone, Copy)]
struct LineAt {
    start: usize,
    end: usize,
    ends: u8,
    next: usize,
}

impl Lines<'_> {
    /// A reading of `file` from its start.
    fn new(file: &Path, limit: u64) -> Lines<'_> {
        let whole = blake3::Hasher::new();
        let check = Check { file, limit };
        Lines { check, offset: 0, number: 0, whole, ends: Vec::new(), scratch: Scratch::default() }
    }

    /// Passes over the rest of a line too long to hold, in `buf`, up to its newline; true when
    /// it goes on past `buf`.
    fn pass_long_line(&mut self, buf: &mut Vec<u8>) -> bool {
        let Some(end) = memchr::memchr(b'\n', buf) else {
            self.offset += buf.len() as u64;
            buf.clear();
            return true;
        };
        self.offset += end as u64 + 1;
        buf.drain(..=end);
        false
    }

    /// Reads the lines of `block` (whole lines, the last one ending the block) up to the end of
    /// its last whole group (every line when `every_line`), hashing its groups and then the
    /// lines of the groups `known` does not hold in parallel, then checking the lines and
    /// giving them to `read` in order. Returns the bytes read (0: no whole group).
    fn block<P: Send, T>(
        &mut self,
        block: &[u8],
        every_line: bool,
        known: &KnownLines<'_>,
        (out, parsed): (&mut Read<T>, &mut Vec<Parsed<P>>),
        (parse, keep): (
            &(impl Fn(Span, &[u8], &blake3::Hash, &mut Vec<Problem>) -> Option<P> + Sync),
            &mut impl FnMut(P, Span, &mut Vec<Problem>) -> Option<T>,
        ),
    ) -> usize {
        // the block's vectors are the last block's, cleared: made afresh, each block's were given
        // back to the system and taken again, page by page (a third of the reading's time)
        let mut scratch = std::mem::take(&mut self.scratch);
        let first = self.number; // lines before this block
        scratch.lines_of(block, (!every_line).then_some(first));
        let Some(read_to) = scratch.spans.last().map(|last| last.next) else {
            self.scratch = scratch;
            return 0;
        };
        scratch.hash(block, first, known, &mut out.groups);
        self.ends.clear();
        for (hash, at) in scratch.hashes.iter().zip(&scratch.spans) {
            self.ends.extend_from_slice(hash.as_bytes());
            self.ends.push(at.ends);
        }
        self.whole.update(&self.ends);
        // each line checked and parsed in parallel (its problems kept with it), then kept in order
        let (check, offset) = (self.check, self.offset);
        let Scratch { spans, hashes, .. } = &scratch;
        spans
            .par_iter()
            .zip(hashes)
            .enumerate()
            .with_min_len(256)
            .map(|(i, (at, hash))| {
                let bytes = &block[at.start..at.end];
                let span =
                    Span { offset: offset + at.start as u64, len: bytes.len() as u32, line: first + 1 + i as u32 };
                let mut problems = Vec::new();
                let item = check.line(span, bytes, hash, &mut problems, parse);
                (span, item, problems)
            })
            .collect_into_vec(parsed);
        for ((span, item, problems), hash) in parsed.drain(..).zip(hashes) {
            out.problems.extend(problems);
            if let Some(item) = item.and_then(|item| keep(item, span, &mut out.problems)) {
                out.items.push(item);
                out.hashes.push(*hash);
            }
        }
        self.number += spans.len() as u32;
        self.offset += read_to as u64;
        self.scratch = scratch;
        read_to
    }

    /// Notes the next line as too long to read, before it is passed over.
    fn skip_long_line(&mut self, problems: &mut Vec<Problem>) {
        self.number += 1;
        problems.push(self.check.too_long(self.number));
        self.whole.update(&[SKIPPED]);
    }
}

/// What every line of a table is checked for: not blank, and not longer than `limit`.
#[derive(Clone, Copy)]
struct Check<'a> {
    file: &'a Path,
    limit: u64,
}

impl Check<'_> {
    /// Checks one line and gives it to `parse`: a blank line or one longer than the limit is a
    /// problem.
    fn line<T>(
        &self,
        span: Span,
        bytes: &[u8],
        hash: &blake3::Hash,
        problems: &mut Vec<Problem>,
        parse: &impl Fn(Span, &[u8], &blake3::Hash, &mut Vec<Problem>) -> Option<T>,
    ) -> Option<T> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            problems.push(Problem::whole(
                &at_line(self.file, span.line, 1),
                "blank line: a table holds one record a line; remove it",
            ));
            None
        } else if bytes.len() as u64 > self.limit || bytes.len() > u32::MAX as usize {
            problems.push(self.too_long(span.line));
            None
        } else {
            parse(span, bytes, hash, problems)
        }
    }

    fn too_long(&self, line: u32) -> Problem {
        Problem::whole(
            &at_line(self.file, line, 1),
            format!("a line longer than the {} MB limit: raise \"max_document_mb\" in gen.json", self.limit >> 20),
        )
    }
}
