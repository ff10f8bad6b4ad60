//! Writing one bulk-data file member by member (see [`crate::bulk::members`]), for the tree's
//! writer (`bulk.rs`) and the archive's (`archive.rs`) alike: each member whose records the
//! previous file holds as one member (by the member table) is copied from it (as the table
//! says when the build index lists the file and recorded the table; else once what it holds is
//! checked), the others are compressed, their unchanged records' lines taken from the previous
//! file's member when the list kept its order. Where the records and the previous file come
//! from is the writer's: [`Records`], and a [`Source`] (the tree's file, or the archive's bytes).

use crate::bulk::members::{self, FileMembers, Member};
use crate::bulk::{self, FileWriter};
use anyhow::Result;
use std::collections::HashMap;
use std::path::Path;

/// The record documents of a bulk-data file, as a writer has them.
pub(super) trait Records {
    /// The hash and size of the record document of output `i`.
    fn hash_and_size(&self, i: usize) -> Result<(blake3::Hash, u64)>;
    /// True when this build wrote the record document of output `i` anew: its line is never
    /// taken from the previous file.
    fn staged(&self, i: usize) -> bool;
    /// The bytes of the record document of output `i`.
    fn bytes(&self, i: usize) -> Result<Vec<u8>>;
}

/// The bytes of a previous bulk-data file: the tree's file, open, or the archive's, read.
pub(super) enum Source {
    /// A file (read from where it is).
    File(std::fs::File),
    /// The file's bytes, and their BLAKE3 (checked as they were read).
    Bytes(Vec<u8>, blake3::Hash),
}

impl Source {
    /// The `length` bytes at `offset`, when the file has them.
    fn read(&self, offset: u64, length: u64) -> Option<Vec<u8>> {
        match self {
            Source::File(file) => {
                use std::os::unix::fs::FileExt;
                let mut bytes = vec![0u8; usize::try_from(length).ok()?];
                file.read_exact_at(&mut bytes, offset).ok()?;
                Some(bytes)
            }
            Source::Bytes(bytes, _) => {
                let start = usize::try_from(offset).ok()?;
                Some(bytes.get(start..start.checked_add(usize::try_from(length).ok()?)?)?.to_vec())
            }
        }
    }

    /// The BLAKE3 of the file's bytes (read whole, unless known) and their number.
    fn hash(&mut self) -> Option<(blake3::Hash, u64)> {
        match self {
            Source::File(file) => {
                let size = file.metadata().ok()?.len();
                let mut hasher = blake3::Hasher::new();
                hasher.update_reader(file).ok()?;
                Some((hasher.finalize(), size))
            }
            Source::Bytes(bytes, hash) => Some((*hash, bytes.len() as u64)),
        }
    }
}

/// A previous bulk-data file whose members can be copied.
pub(super) struct PreviousFile<'t> {
    source: Source,
    members: HashMap<&'t str, &'t Member>,
    /// Its members in order, when its records are this build's in the same order (else empty):
    /// the line of an unchanged record is then read from the member holding it.
    ordered: &'t [Member],
    /// True when the build index lists this file with these bytes: the member table (which
    /// gen trusts only when the index recorded it) then says what each member holds, and a
    /// member is copied without being read.
    indexed: bool,
}

impl<'t> PreviousFile<'t> {
    /// The previous file `source`, when `described` (its entry in the member table) covers its
    /// bytes end to end and its bytes hash to what the table says, and to `indexed` (the build
    /// index's hash of it, when it lists the file). Else `None`: the file is written whole.
    /// With `by_position` (this build's records are the previous build's, in the same order),
    /// its members in order too, when the build index lists the file.
    pub(super) fn check(
        mut source: Source,
        described: &'t FileMembers,
        indexed: Option<blake3::Hash>,
        by_position: bool,
    ) -> Option<PreviousFile<'t>> {
        let mut end = 0;
        for member in &described.members {
            (member.offset == end).then_some(())?;
            end = member.offset.checked_add(member.length)?;
        }
        let (hash, size) = source.hash()?;
        let agrees = end == size && hash.to_hex().as_str() == described.blake3;
        if !agrees || indexed.is_some_and(|indexed| indexed != hash) {
            return None;
        }
        let members = described.members.iter().map(|m| (m.key.as_str(), m)).collect();
        // Lines by position only from the file the index lists: after a killed commit the tree may
        // name another build's file, of another list (copying a member by key is safe either way).
        let ordered = if by_position && indexed.is_some() { &described.members[..] } else { &[] };
        Some(PreviousFile { source, members, ordered, indexed: indexed.is_some() })
    }

    /// The bytes of `member` of this file, when they hold one line for each of `hashes` (the
    /// documents of the records its key names). Of a file the build index lists, the table's
    /// word is taken (it is the table the index recorded: `Table::read`); of another, the
    /// member is read and checked: one gzip member, whole, each line that document's.
    fn holding(&self, member: &Member, hashes: &[blake3::Hash], pretty: bool) -> Option<Vec<u8>> {
        use std::io::BufRead;
        let packed = self.source.read(member.offset, member.length)?;
        if self.indexed {
            return (member.records == hashes.len() as u64 && !hashes.is_empty()).then_some(packed);
        }
        // read a line at a time: a member is about 2 MB of text, held whole it added 120 bytes a
        // record to the peak of a one-record edit (tests/suite/build.rs), its gzip a fraction
        let mut decoder = std::io::BufReader::new(flate2::bufread::GzDecoder::new(packed.as_slice()));
        let (mut line, mut expected) = (Vec::new(), hashes.iter());
        loop {
            line.clear();
            if decoder.read_until(b'\n', &mut line).ok()? == 0 {
                break;
            }
            // every line, the last too, ends with a newline, and is the next record's document
            let hash = expected.next()?;
            if !line.strip_suffix(b"\n").is_some_and(|text| line_holds(text, hash, pretty)) {
                return None;
            }
        }
        // every record's line, and nothing after the member
        let whole = !hashes.is_empty() && expected.next().is_none() && decoder.get_ref().get_ref().is_empty();
        whole.then_some(packed)
    }
}

/// The record lines of a previous bulk-data file, asked for by list position in increasing
/// order: each member holding one is decompressed once (a member is a few MB of lines; reading
/// its records' documents one by one instead opens a few thousand files, or archive entries).
struct OldLines<'a, 't> {
    from: &'a PreviousFile<'t>,
    /// The next member to read, and the list position of its first record.
    next: usize,
    first: u64,
    /// The member read last: its first record's position, its text, and each line's range.
    read: Option<(u64, Vec<u8>, Vec<std::ops::Range<usize>>)>,
}

impl OldLines<'_, '_> {
    /// The line (without its newline) of the record at list `position`, when the previous file
    /// has it as it should (`None` else: the caller reads the record's document).
    fn line(&mut self, position: u64) -> Option<Vec<u8>> {
        loop {
            if let Some((first, text, lines)) = &self.read
                && position >= *first
                && let Some(range) = lines.get((position - first) as usize)
            {
                return Some(text[range.clone()].to_vec());
            }
            let member = self.from.ordered.get(self.next)?;
            let first = self.first;
            (self.next, self.first) = (self.next + 1, first + member.records);
            if position < first || position >= self.first {
                continue; // a member before it (or a position asked for out of order: none has it)
            }
            let text = self.decompress(member)?;
            let mut lines = Vec::with_capacity(member.records as usize);
            let mut start = 0;
            for end in text.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(at, _)| at) {
                lines.push(start..end);
                start = end + 1;
            }
            if lines.len() as u64 != member.records || start != text.len() {
                return None;
            }
            self.read = Some((first, text, lines));
        }
    }

    fn decompress(&self, member: &Member) -> Option<Vec<u8>> {
        use std::io::Read;
        let packed = self.from.source.read(member.offset, member.length)?;
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(packed.as_slice()).read_to_end(&mut text).ok()?;
        Some(text)
    }
}

/// True when `line` of a bulk-data file is the record document that hashes to `hash`: the
/// document itself, or made compact from it when documents are indented (`pretty`: the line
/// indented again as gen indents a document gives the document's bytes).
fn line_holds(line: &[u8], hash: &blake3::Hash, pretty: bool) -> bool {
    if !pretty {
        return blake3::hash(line) == *hash;
    }
    let value: Option<serde_json::Value> = serde_json::from_slice(line).ok();
    value.and_then(|value| serde_json::to_vec_pretty(&value).ok()).is_some_and(|bytes| blake3::hash(&bytes) == *hash)
}

/// Says that the previous bulk-data file of `segment` does not hold what the member table
/// says; `true`: nothing more is taken from it.
fn distrust(segment: &str) -> bool {
    say!(
        "note: the previous bulk-data file of {segment} does not hold what the member table says: \
         ignoring it; this build writes the file from the records' documents"
    );
    true
}

/// Records whose hash and size are found at once (1 MB of results).
const FOUND_AT_ONCE: usize = 16_384;

/// Writes the file of `segment` into `stage` from the records of outputs `indices`, in order,
/// cut into members where [`members::ends_member`] says; each member is copied from `from` when
/// it holds the same records, else compressed (documents are indented when `pretty`).
pub(super) fn write_file(
    stage: &Path,
    segment: &str,
    pretty: bool,
    indices: &[usize],
    from: Option<&PreviousFile<'_>>,
    records: &(impl Records + Sync),
) -> Result<(bulk::FileWritten, FileMembers)> {
    let mut file = FileWriter::create(stage, segment)?;
    let (mut start, mut hashes) = (0, Vec::new());
    // Each record's hash and size, found a run at a time in parallel (a lookup in the index's
    // documents each, for a record not visited): most of a one-record edit's file is found, not
    // written.
    let mut found = Vec::new().into_iter();
    let mut old = from.map(|from| OldLines { from, next: 0, first: 0, read: None });
    // Set once the previous file is found not to hold what the table says: nothing more is
    // taken from it (the rest of the file is compressed from the records' documents).
    let mut distrusted = false;
    for n in 0..indices.len() {
        if n % FOUND_AT_ONCE == 0 {
            use rayon::prelude::*;
            let run = &indices[n..(n + FOUND_AT_ONCE).min(indices.len())];
            let run: Vec<Result<(blake3::Hash, u64)>> = run.par_iter().map(|&i| records.hash_and_size(i)).collect();
            found = run.into_iter();
        }
        let (hash, size) = found.next().expect("one found for each record")?;
        hashes.push(hash);
        if n + 1 < indices.len() && !members::ends_member(&hash, size) {
            continue;
        }
        let (run, first) = (&indices[start..=n], start as u64);
        start = n + 1;
        let key = members::member_key(pretty, hashes.iter());
        let by_key = from.filter(|_| !distrusted).and_then(|from| from.members.get(key.as_str()));
        let copied = match by_key.filter(|old| old.records == run.len() as u64) {
            Some(old) => from.and_then(|from| from.holding(old, &hashes, pretty)).map(|bytes| (old, bytes)),
            None => None,
        };
        match copied {
            Some((old, bytes)) => {
                file.append(key, old.records, &bytes)?;
                hashes.clear();
                continue;
            }
            None if by_key.is_some() => distrusted = distrust(segment),
            None => {}
        }
        let doubted = std::cell::Cell::new(distrusted);
        let lines = run.iter().zip(first..).zip(&hashes).map(|((&i, position), hash)| {
            let taken =
                old.as_mut().filter(|_| !records.staged(i) && !doubted.get()).and_then(|old| old.line(position));
            match taken {
                Some(line) if line_holds(&line, hash, pretty) => Ok(line),
                Some(_) => {
                    doubted.set(distrust(segment));
                    records.bytes(i)
                }
                None => records.bytes(i),
            }
        });
        file.compress(key, pretty, lines)?;
        distrusted = doubted.get();
        hashes.clear();
    }
    if indices.is_empty() {
        file.compress(members::member_key(pretty, std::iter::empty()), pretty, std::iter::empty())?;
    }
    file.finish()
}
