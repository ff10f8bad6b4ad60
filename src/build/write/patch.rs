//! The manifest of a build that changed few documents, written by patching the previous one:
//! its `files` object is sorted by path, one entry a line, so the new manifest is the new
//! header, then the previous entries merged with the changed ones, with the same bytes as a
//! manifest written whole (see [`super::listing`]). Where each change goes is found by a binary
//! search over the previous file's byte offsets, and the lines between change points are
//! copied file to file by the kernel (`copy_file_range`): the cost follows the changes, not
//! the tree.

use crate::fsutil::Stamp;
use crate::tree::dir::TreeDir;
use crate::tree::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::ops::Range;
use std::path::Path;

/// One entry of the new listing that differs from the previous one: a path and its new hash,
/// or `None` when the path is gone.
pub(super) type Change = (String, Option<blake3::Hash>);

/// The line before the entries of a manifest's `files` object.
const FILES_OPEN: &[u8] = b"  \"files\": {\n";
/// How a manifest with entries ends: its last entry's closing quote and line end, then the
/// lines closing the `files` object and the manifest.
const FILES_END: &[u8] = b"\"\n  }\n}\n";
/// The bytes read from the previous manifest at a time, around a line the search reads.
const BLOCK: u64 = 1024;
/// The first step, in bytes, of the search forward from the last change point, once the two
/// entries there are read (the next change's place, when changes are close together).
const FIRST_STEP: u64 = 512;
/// Runs of previous entries shorter than this are copied through memory (a few blocks
/// read), longer ones file to file: a copy costs two calls.
const COPY_FILE_MIN: u64 = 1 << 15;

/// Writes `manifest` (whose `files` is empty) into the staging folder `stage`, listing the
/// previous tree's manifest's files with `changes` applied (`changes` sorted by path, each
/// path once). The previous manifest is used only when its stamp is `expected` (the one the
/// build index recorded: then its entries are the index's documents) and it reads as gen
/// writes manifests where it is read (see [`patch_listing`]); otherwise `None` is returned,
/// for a full write. Returns the size written.
pub(super) fn patch_manifest(
    manifest: &Manifest,
    tree: &TreeDir,
    expected: Stamp,
    changes: &[Change],
    stage: &Path,
) -> Result<Option<u64>> {
    let Some(previous) = open_previous(tree, expected) else { return Ok(None) };
    let mut head = Vec::new();
    manifest.write_sorted_listing(std::iter::empty::<(&str, blake3::Hash)>(), &mut head)?;
    let Some(head) = head.strip_suffix(b"{}\n}\n".as_slice()) else { return Ok(None) };
    let path = stage.join(MANIFEST_FILE);
    let mut out = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    patch_listing(&previous, head, changes, &mut out).with_context(|| format!("cannot write {}", path.display()))
}

/// The previous manifest, when its stamp is `expected`.
fn open_previous(tree: &TreeDir, expected: Stamp) -> Option<File> {
    let file = tree.open_file(MANIFEST_FILE, MAX_MANIFEST_BYTES).ok()?;
    (Stamp::of(&file.metadata().ok()?) == expected).then_some(file)
}

/// The previous manifest, read at offsets (never whole: a tree of a million records has one of
/// a few hundred MB).
trait Previous {
    /// Its size in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Reads bytes from `offset` into `buf`, as `pread` does.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Fills `buf` from `offset` on.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the previous manifest shrank")),
                n => (buf, offset) = (&mut buf[n..], offset + n as u64),
            }
        }
        Ok(())
    }
    /// Appends the bytes of `range` to `out` (file to file, in the kernel on Linux); returns
    /// how many were copied.
    fn copy_to(&self, range: Range<u64>, out: &mut File) -> io::Result<u64>;
}

impl Previous for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }

    fn copy_to(&self, range: Range<u64>, out: &mut File) -> io::Result<u64> {
        let mut from = self;
        from.seek(io::SeekFrom::Start(range.start))?;
        // std copies `File` to `File` with copy_file_range (or sendfile) on Linux
        io::copy(&mut from.take(range.end - range.start), out)
    }
}

/// Writes into `out` the `head` of the new manifest (up to its `files` object), the previous
/// manifest's entries with `changes` applied, and the manifest's end; returns the size written,
/// or `None` when the previous manifest is not laid out as gen writes one where it is read.
///
/// Read are: the header (to the `files` line), the first and last entries and the end, and
/// for each change the entries the search for its place reads (a few blocks), all of which
/// must be entries as gen writes them, their paths strictly increasing down the file. The
/// entries between change points are copied as bytes, unread.
fn patch_listing(previous: &impl Previous, head: &[u8], changes: &[Change], out: &mut File) -> io::Result<Option<u64>> {
    let mut lines = Lines { previous, size: previous.size()?, block: Vec::new(), at: 0, last_entry: None };
    let Some(body) = lines.body()? else { return Ok(None) };
    let mut emit = Emit { out, buffer: head.to_vec(), first: true };
    emit.buffer.push(b'{');
    let mut search = Search { cursor: body.start, before: None, end: body.end };
    for (path, hash) in changes {
        let Some(found) = search.find(&mut lines, path)? else { return Ok(None) };
        emit.copy(&mut lines, search.cursor..found.at, body.end)?;
        search.cursor = found.next;
        if let Some(hash) = hash {
            emit.entry(path, hash)?;
        }
    }
    emit.copy(&mut lines, search.cursor..body.end, body.end)?;
    emit.finish().map(Some)
}

/// Where the entries of the previous manifest lie: the offsets of the first entry's line and
/// of the end of the last one's.
struct Body {
    start: u64,
    end: u64,
}

/// The previous manifest read a block at a time, the last block kept.
struct Lines<'p, P> {
    previous: &'p P,
    size: u64,
    block: Vec<u8>,
    at: u64,
    /// The last entry read: its line's start and end, and its path (read again by the next
    /// search when changes are close together).
    last_entry: Option<(u64, u64, String)>,
}

impl<P: Previous> Lines<'_, P> {
    /// Where the entries lie, once the header, the first and last entries and the end read
    /// as gen writes them (the first path before the last); `None` otherwise.
    fn body(&mut self) -> io::Result<Option<Body>> {
        let mut offset = 0;
        let start = loop {
            let Some(end) = self.line_end(offset, self.size)? else { return Ok(None) };
            if self.read(offset..end)? == FILES_OPEN {
                break end;
            }
            offset = end;
        };
        let close = FILES_END.len() as u64;
        if self.size < start + close || self.read(self.size - close..self.size)? != FILES_END {
            return Ok(None);
        }
        let end = self.size - close + 2;
        let last = self.line_start_before(start, end - 1)?;
        let (Some((_, first)), Some((_, final_path))) = (self.entry(start, end)?, self.entry(last, end)?) else {
            return Ok(None);
        };
        Ok((last == start || first < final_path).then_some(Body { start, end }))
    }

    /// The entry whose line starts at `start`, among the entries that end at `end`: the end of
    /// its line and its path; `None` when the line is not an entry as gen writes one (followed
    /// by a comma unless it is the last).
    fn entry(&mut self, start: u64, end: u64) -> io::Result<Option<(u64, String)>> {
        if let Some((at, line_end, path)) = &self.last_entry
            && *at == start
        {
            return Ok(Some((*line_end, path.clone())));
        }
        let Some(line_end) = self.line_end(start, end)? else { return Ok(None) };
        let line = self.read(start..line_end - 1)?;
        let entry = if line_end == end { Some(line.as_slice()) } else { line.strip_suffix(b",") };
        let Some((path, _)) = entry.and_then(parse_entry) else { return Ok(None) };
        self.last_entry = Some((start, line_end, path.to_string()));
        Ok(Some((line_end, path.into_owned())))
    }

    /// The offset just past the first line end at or after `offset` and before `end`.
    fn line_end(&mut self, mut offset: u64, end: u64) -> io::Result<Option<u64>> {
        while offset < end {
            let chunk = self.chunk(offset)?;
            let chunk = &chunk[..chunk.len().min((end - offset) as usize)];
            if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                return Ok(Some(offset + i as u64 + 1));
            }
            offset += chunk.len() as u64;
        }
        Ok(None)
    }

    /// The start of the line that holds `offset`, not before `start` (a line's start).
    fn line_start_before(&mut self, start: u64, mut offset: u64) -> io::Result<u64> {
        while offset > start {
            let from = offset.saturating_sub(BLOCK).max(start);
            if let Some(i) = self.read(from..offset)?.iter().rposition(|&b| b == b'\n') {
                return Ok(from + i as u64 + 1);
            }
            offset = from;
        }
        Ok(start)
    }

    /// The bytes of `range`.
    fn read(&mut self, range: Range<u64>) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity((range.end - range.start) as usize);
        if range.end - range.start > BLOCK {
            bytes.resize(bytes.capacity(), 0);
            self.previous.read_exact_at(&mut bytes, range.start)?;
            return Ok(bytes);
        }
        let mut offset = range.start;
        while offset < range.end {
            let chunk = self.chunk(offset)?;
            let n = chunk.len().min((range.end - offset) as usize);
            bytes.extend_from_slice(&chunk[..n]);
            offset += n as u64;
        }
        Ok(bytes)
    }

    /// The bytes from `offset` (before the file's end) to the end of its block.
    fn chunk(&mut self, offset: u64) -> io::Result<&[u8]> {
        let held = self.at..self.at + self.block.len() as u64;
        if !held.contains(&offset) {
            self.at = offset - offset % BLOCK;
            self.block.resize(BLOCK as usize, 0);
            let mut filled = 0;
            while filled < self.block.len() {
                match self.previous.read_at(&mut self.block[filled..], self.at + filled as u64)? {
                    0 => break,
                    n => filled += n,
                }
            }
            self.block.truncate(filled);
            if offset >= self.at + filled as u64 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the previous manifest shrank"));
            }
        }
        Ok(&self.block[(offset - self.at) as usize..])
    }
}

/// The search for each change's place among the previous entries, in order: every change
/// point is past the previous one.
struct Search {
    /// Where the entries not yet written start.
    cursor: u64,
    /// The path of the entry before `cursor`, when one was read.
    before: Option<String>,
    /// The end of the last entry's line.
    end: u64,
}

/// A change's place among the previous entries: where it goes, and where the previous entries
/// go on after it (past the entry it replaces or removes).
struct Found {
    at: u64,
    next: u64,
}

impl Search {
    /// The place of `path` (past the cursor): the first entry whose path is not before it,
    /// found by reading the two entries at the cursor, then steps that double, then halving. `None` when an entry read is
    /// not one, or not after the entries read before it (the manifest is not sorted).
    fn find(&mut self, lines: &mut Lines<'_, impl Previous>, path: &str) -> io::Result<Option<Found>> {
        let (mut low, mut low_path) = (self.cursor, self.before.take());
        let (mut high, mut high_entry): (u64, Option<(String, u64)>) = (self.end, None);
        let mut forward = Some(0); // the steps made forward, while no entry read is past `path`
        while low < high {
            let step = |n: u32| if n < 2 { 0 } else { FIRST_STEP << (n - 2).min(40) };
            let middle = match forward.map(|n| low + step(n)).filter(|&middle| middle < high) {
                Some(middle) => middle,
                None => {
                    forward = None;
                    low + (high - low) / 2
                }
            };
            // the first line that starts at or after `middle`, else the one at `low`
            let start = lines.line_end(middle - 1, high)?.filter(|&start| start < high).unwrap_or(low);
            let Some((line_end, key)) = lines.entry(start, self.end)? else { return Ok(None) };
            let sorted = low_path.as_ref().is_none_or(|low| *low < key)
                && high_entry.as_ref().is_none_or(|(high, _)| key < *high);
            if !sorted {
                return Ok(None);
            }
            if key.as_str() < path {
                (low, low_path) = (line_end, Some(key));
                forward = forward.map(|n| n + 1);
            } else {
                (high, high_entry) = (start, Some((key, line_end)));
                forward = None;
            }
        }
        // the entry after the one at the change point follows it too
        if let Some((key, line_end)) = &high_entry
            && line_end < &self.end
        {
            let Some((_, after)) = lines.entry(*line_end, self.end)? else { return Ok(None) };
            if after <= *key {
                return Ok(None);
            }
        }
        let next = match high_entry {
            Some((key, line_end)) if key == path => {
                low_path = Some(key);
                line_end
            }
            _ => low,
        };
        self.before = low_path;
        Ok(Some(Found { at: low, next }))
    }
}

/// Writes the new manifest: each entry after `\n` or `,\n` as serde_json's pretty printer does,
/// new entries through a buffer, runs of previous entries copied from the previous file.
struct Emit<'o> {
    out: &'o mut File,
    buffer: Vec<u8>,
    first: bool,
}

impl Emit<'_> {
    /// Appends the previous entries whose lines lie in `lines` (the last of which ends the
    /// entries when `lines` ends at `end`), without the last one's comma and line end.
    fn copy(&mut self, previous: &mut Lines<'_, impl Previous>, lines: Range<u64>, end: u64) -> io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        self.separator();
        let bytes = lines.start..lines.end - if lines.end == end { 1 } else { 2 };
        if bytes.end - bytes.start < COPY_FILE_MIN {
            let read = previous.read(bytes)?;
            self.buffer.extend_from_slice(&read);
            return self.flush_full();
        }
        self.out.write_all(&std::mem::take(&mut self.buffer))?;
        if previous.previous.copy_to(bytes.clone(), self.out)? != bytes.end - bytes.start {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the previous manifest shrank"));
        }
        Ok(())
    }

    /// Appends a new entry.
    fn entry(&mut self, path: &str, hash: &blake3::Hash) -> io::Result<()> {
        self.separator();
        let key = serde_json::to_string(path).expect("a string always serialises");
        write!(self.buffer, "    {key}: \"{}\"", hash.to_hex())?;
        self.flush_full()
    }

    /// Writes out the buffer once it holds a large block.
    fn flush_full(&mut self) -> io::Result<()> {
        if self.buffer.len() >= 1 << 16 {
            self.out.write_all(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    fn separator(&mut self) {
        self.buffer.extend_from_slice(if self.first { b"\n" } else { b",\n" });
        self.first = false;
    }

    /// Ends the manifest; returns its size.
    fn finish(mut self) -> io::Result<u64> {
        self.buffer.extend_from_slice(if self.first { b"}\n}\n" } else { b"\n  }\n}\n" });
        self.out.write_all(&self.buffer)?;
        self.out.flush()?;
        self.out.stream_position()
    }
}

/// The path of one line of a manifest's `files` object (`    "<path>": "<64 hex>"`), and the
/// line's entry (without its indent), or `None` when the line is not one.
fn parse_entry(line: &[u8]) -> Option<(std::borrow::Cow<'_, str>, &[u8])> {
    let entry = line.strip_prefix(b"    ")?;
    let key_end = entry.len().checked_sub(68)?;
    let (key, value) = entry.split_at(key_end);
    let hex = value.strip_prefix(b": \"")?.strip_suffix(b"\"")?;
    if hex.len() != 64 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let key = std::str::from_utf8(key).ok()?;
    let inner = key.strip_prefix('"')?.strip_suffix('"')?;
    let path = match inner.contains('\\') {
        false => std::borrow::Cow::Borrowed(inner),
        true => std::borrow::Cow::Owned(serde_json::from_str::<String>(key).ok()?),
    };
    Some((path, entry))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A manifest without files whose one resource has `count` records.
    fn manifest(count: u64) -> Manifest {
        crate::tree::manifest::test_manifest("thing", count)
    }

    /// The bytes of the manifest with `count` records listing `files`, written whole.
    fn whole(count: u64, files: &BTreeMap<String, blake3::Hash>) -> Vec<u8> {
        let mut list: Vec<(&str, blake3::Hash)> = files.iter().map(|(path, hash)| (path.as_str(), *hash)).collect();
        manifest(count).to_bytes_listing(&mut list)
    }

    /// `files` of `n` paths, some with characters JSON escapes or spells as they are.
    fn listing(n: usize) -> BTreeMap<String, blake3::Hash> {
        let path = |i: usize| match i % 7 {
            0 => format!("api/v1/thing/{i:06}.json"),
            1 => format!("api/v1/thing/caf\u{e9}-{i}/index.json"),
            2 => format!("api/v1/thing/a\"quote\\{i}.json"),
            _ => format!("api/v1/thing/{i}/encounters.json"),
        };
        (0..n).map(|i| (path(i), blake3::hash(&i.to_le_bytes()))).collect()
    }

    /// A folder of its own below the system's temporary folder.
    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gen-patch-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The previous manifest `bytes`, written to `dir` and opened.
    fn previous(dir: &Path, bytes: &[u8]) -> File {
        std::fs::write(dir.join("previous.json"), bytes).unwrap();
        File::open(dir.join("previous.json")).unwrap()
    }

    /// The manifest with `count` records patched from `previous` with `changes`, as written.
    fn patched(dir: &Path, count: u64, previous: &impl Previous, changes: &[Change]) -> Option<Vec<u8>> {
        let mut head = Vec::new();
        manifest(count).write_sorted_listing(std::iter::empty::<(&str, blake3::Hash)>(), &mut head).unwrap();
        let head = head.strip_suffix(b"{}\n}\n".as_slice()).unwrap();
        let path = dir.join("patched.json");
        let size = patch_listing(previous, head, changes, &mut File::create(&path).unwrap()).unwrap()?;
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(size, bytes.len() as u64);
        Some(bytes)
    }

    /// `files` with `changes` applied.
    fn applied(files: &BTreeMap<String, blake3::Hash>, changes: &[Change]) -> BTreeMap<String, blake3::Hash> {
        let mut files = files.clone();
        for (path, hash) in changes {
            match hash {
                Some(hash) => files.insert(path.clone(), *hash),
                None => files.remove(path),
            };
        }
        files
    }

    #[test]
    fn a_patched_manifest_has_the_bytes_of_one_written_whole() {
        let dir = temp("whole");
        let files = listing(3000);
        let paths: Vec<&String> = files.keys().collect();
        let new = |path: &str, i: u8| (path.to_string(), Some(blake3::hash(&[i])));
        let gone = |path: &str| (path.to_string(), None);
        let (first, last) = (paths[0].as_str(), paths[paths.len() - 1].as_str());
        let cases: Vec<(&str, Vec<Change>)> = vec![
            ("nothing", vec![]),
            ("first changed", vec![new(first, 1)]),
            ("last changed", vec![new(last, 1)]),
            ("before the first", vec![new("a", 1), new("api/v1/thing/", 2)]),
            ("after the last", vec![new("zz", 1), new("zzz", 2)]),
            ("first and last gone", vec![gone(first), gone(last)]),
            ("a run gone", paths[1000..1010].iter().map(|path| gone(path)).collect()),
            ("every other one changed", paths[5..600].iter().step_by(2).map(|path| new(path, 3)).collect()),
            (
                "start, middle, end, between, gone",
                vec![
                    new(first, 4),
                    gone(paths[1]),
                    new(&format!("{}-between", paths[1500]), 5),
                    new(paths[1501], 6),
                    gone(paths[1502]),
                    new(&format!("{}-between", paths[2998]), 7),
                    new(last, 8),
                    new("zzz", 9),
                ],
            ),
            ("every one gone", paths.iter().map(|path| gone(path)).collect()),
        ];
        let before = whole(3000, &files);
        for (what, mut changes) in cases {
            changes.sort_by(|a, b| a.0.cmp(&b.0));
            let ours = patched(&dir, 3001, &previous(&dir, &before), &changes);
            let expected = whole(3001, &applied(&files, &changes));
            assert!(ours.as_deref() == Some(expected.as_slice()), "{what}: the patch differs from a whole write");
        }
        // one entry, replaced, followed and preceded
        let one = listing(1);
        let only = one.keys().next().unwrap().clone();
        for changes in [vec![new(&only, 1)], vec![new("a", 1)], vec![new("zz", 1)], vec![gone(&only)]] {
            let ours = patched(&dir, 2, &previous(&dir, &whole(1, &one)), &changes);
            assert!(ours == Some(whole(2, &applied(&one, &changes))), "{changes:?}: the patch differs");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The previous manifest, counting the bytes read from it (copies file to file are not).
    struct Counted {
        file: File,
        read: std::cell::Cell<u64>,
    }

    impl Previous for Counted {
        fn size(&self) -> io::Result<u64> {
            self.file.size()
        }

        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let n = Previous::read_at(&self.file, buf, offset)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }

        fn copy_to(&self, range: Range<u64>, out: &mut File) -> io::Result<u64> {
            self.file.copy_to(range, out)
        }
    }

    #[test]
    fn a_patch_reads_a_few_blocks_per_change_not_the_whole_manifest() {
        let dir = temp("seek");
        let files = listing(100_000);
        let before = whole(100_000, &files);
        let paths: Vec<&String> = files.keys().collect();
        let changes: Vec<Change> = vec![
            (paths[10].clone(), Some(blake3::hash(b"1"))),
            (format!("{}-new", paths[50_000]), Some(blake3::hash(b"2"))),
            (paths[90_000].clone(), None),
        ];
        let counted = Counted { file: previous(&dir, &before), read: 0.into() };
        let ours = patched(&dir, 100_000, &counted, &changes);
        assert!(ours == Some(whole(100_000, &applied(&files, &changes))), "the patch differs from a whole write");
        let read = counted.read.get();
        assert!(read < before.len() as u64 / 50, "{read} bytes read of a manifest of {}", before.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_manifest_not_as_gen_writes_it_where_the_patch_reads_is_written_whole() {
        let dir = temp("refused");
        let files = listing(3000);
        let before = String::from_utf8(whole(3000, &files)).unwrap();
        let paths: Vec<&String> = files.keys().collect();
        let line = |path: &str| {
            let key = serde_json::to_string(path).unwrap();
            before.lines().find(|line| line.starts_with(&format!("    {key}:"))).unwrap().to_string()
        };
        let swapped = |a: &str, b: &str| {
            let (a, b) = (line(a), line(b));
            before.replace(&a, "\u{0}").replace(&b, &a).replace('\u{0}', &b)
        };
        let change = vec![(paths[1500].clone(), Some(blake3::hash(b"1")))];
        let cases = [
            ("the entries at and after the change swapped", swapped(paths[1500], paths[1501])),
            ("the first and last entries swapped", swapped(paths[0], paths[2999])),
            ("an entry at the change not one", before.replace(&line(paths[1500]), "    \"x\": 1,")),
            ("no end", before.trim_end_matches("}\n").to_string()),
            ("no files", before.replace("\"files\"", "\"filez\"")),
            ("the last entry with a comma", before.replace("\"\n  }\n}", "\",\n  }\n}")),
        ];
        for (what, bytes) in cases {
            assert_ne!(bytes, before, "{what}");
            assert!(patched(&dir, 3000, &previous(&dir, bytes.as_bytes()), &change).is_none(), "{what}: patched");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
