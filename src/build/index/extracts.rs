//! What the extract took from each record (its names entry and the values of each declared
//! filter), kept beside the build index for the next build (`.<out>.gen/extract/`, one file per
//! resource), so that an edit reads again only the records whose data changed.
//!
//! Each kept row names its record by id and by the BLAKE3 hash of the record's data (its file's
//! or its table line's, as in the index's data files): a row is taken back only for a record
//! whose data has that hash now, so a row is never stale whatever happened in between. A file
//! written by another version of gen, for other declared filters, damaged or cut short is not
//! used: every record of the resource is then read, as without one.
//!
//! A partial build whose list is unchanged also gives back, for each changed record, the row
//! kept for its data as the previous build's index recorded it ([`ExtractStore::compare`]): if
//! every changed record gives the same row again, the resource's names and filter documents are
//! the previous build's (docs/builds.md, "An edit that leaves names and values as they were").

use crate::build::state;
use crate::data::recorded::DataFiles;
use crate::data::recorded::codec::{self, Checksummed, Decoder, put_bytes, put_u64};
use crate::fsutil;
use crate::tree::manifest::GENERATOR;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};

/// What the extract took from one record: its names entry (serialised) and, for each declared
/// filter, the values it takes.
pub(crate) type Kept = (Box<[u8]>, Vec<Vec<String>>);

/// Version of a kept extract's file; another version is not used.
const FORMAT: u32 = 1;

/// The first bytes of a kept extract's file.
const MAGIC: &[u8; 8] = b"genextra";

/// Largest file read (1 GiB): a resource of a million records keeps about 150 MB.
const MAX_BYTES: u64 = 1 << 30;

/// What a file was made for: rows made for other filters, or by another gen, are not used.
#[derive(Serialize, Deserialize, PartialEq)]
struct Head {
    generator: String,
    paths: Vec<String>,
}

/// The extracts kept between builds of the tree in one output folder, and the hashes of this
/// build's records that say which of them still hold.
pub(crate) struct ExtractStore {
    dir: PathBuf,
    /// By segment: each record's id and data hash, sorted by id (those of the resources
    /// extracted; not the whole data table, which is let go first).
    hashes: BTreeMap<String, Vec<(i64, [u8; 32])>>,
    /// False when nothing kept may be used (`gen build --verify`): rows are only written.
    reuse: bool,
    /// The resources compared ([`ExtractStore::compare`]): each with its records changed since
    /// the previous build and their data hash then, sorted by id.
    compared: BTreeMap<String, Vec<(i64, [u8; 32])>>,
}

/// What [`ExtractStore::take`] gives back of a resource's kept rows.
pub(crate) struct Taken {
    /// The rows of the records `ids`, in their order: `None` where none holds (no row, or one
    /// of the record's data as it was).
    pub(crate) rows: Vec<Option<Kept>>,
    /// Of a compared resource ([`ExtractStore::compare`]) whose kept rows could be read: the
    /// rows of its changed records' data as the previous build had it, by id, sorted; what
    /// those records gave the previous build.
    pub(crate) before: Option<Vec<(i64, Kept)>>,
    /// True when the file holds exactly these rows, each taken: keeping them again would
    /// write the same rows (it need not be written).
    pub(crate) whole: bool,
}

impl ExtractStore {
    /// The store of the tree in `out`, for the resources `segments` of a build whose data
    /// files are `files`.
    pub(crate) fn new<'s>(
        out: &Path,
        files: &DataFiles,
        segments: impl Iterator<Item = &'s str>,
        reuse: bool,
    ) -> ExtractStore {
        let hashes = segments.map(|segment| (segment.to_string(), files.record_hashes(segment))).collect();
        ExtractStore { dir: state::file(out, state::EXTRACT), hashes, reuse, compared: Default::default() }
    }

    /// Compares `segment`'s records `changed` since the previous build (each with its data hash
    /// then, sorted by id): their rows are never taken (each is read again), and the rows kept
    /// of their data then are given back ([`Taken::before`]). Only a row of that data is the
    /// previous build's: one a build that failed since kept is not.
    pub(crate) fn compare(&mut self, segment: &str, changed: Vec<(i64, [u8; 32])>) {
        self.compared.insert(segment.to_string(), changed);
    }

    /// The kept rows of the records `ids` of `segment`, and of a compared resource the rows of
    /// its changed records' previous data ([`Taken`]).
    pub(crate) fn take(&self, segment: &str, paths: &[String], ids: &[i64]) -> Taken {
        let compared = self.compared.get(segment).map(Vec::as_slice);
        let Some(read) = self.reuse.then(|| self.read(segment, paths, ids.len(), compared)).flatten() else {
            return Taken { rows: ids.iter().map(|_| None).collect(), before: None, whole: false };
        };
        let Rows { holding: mut kept, before, count } = read;
        let rows: Vec<Option<Kept>> = ids
            .iter()
            .map(|&id| {
                let at = kept.binary_search_by_key(&id, |(id, _)| *id).ok()?;
                kept[at].1.take()
            })
            .collect();
        let whole = count == ids.len() && rows.iter().all(Option::is_some);
        Taken { rows, before: compared.map(|_| before), whole }
    }

    /// Keeps `rows` (id, names entry, values) of `segment` for the next build. A file that
    /// cannot be written is left out: the next build then reads every record of `segment`.
    pub(crate) fn keep<'r>(
        &self,
        segment: &str,
        paths: &[String],
        rows: impl Iterator<Item = (i64, &'r [u8], &'r [Vec<String>])>,
    ) {
        let path = self.file(segment);
        let temporary = path.with_extension("tmp");
        let written = (|| -> std::io::Result<()> {
            // the state folder, then the extracts' own in it
            self.dir.parent().map_or(Ok(()), state::own_folder)?;
            state::own_folder(&self.dir)?;
            let file = fsutil::create_new(&temporary).map_err(std::io::Error::other)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, Checksummed::new(file));
            out.write_all(MAGIC)?;
            out.write_all(&FORMAT.to_le_bytes())?;
            let head = Head { generator: GENERATOR.to_string(), paths: paths.to_vec() };
            put_bytes(&mut out, &serde_json::to_vec(&head).map_err(std::io::Error::other)?)?;
            for (id, entry, values) in rows {
                let Some(hash) = self.hash(segment, id) else { continue };
                out.write_all(&[1])?;
                out.write_all(&id.to_le_bytes())?;
                out.write_all(&hash)?;
                put_bytes(&mut out, entry)?;
                for field in values {
                    put_u64(&mut out, field.len() as u64)?;
                    for value in field {
                        put_bytes(&mut out, value.as_bytes())?;
                    }
                }
            }
            out.write_all(&[0])?;
            let (mut file, sum) = out.into_inner().map_err(|e| e.into_error())?.finish();
            file.write_all(sum.as_bytes())?;
            std::fs::rename(&temporary, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
            let _ = std::fs::remove_file(&path);
        }
    }

    fn file(&self, segment: &str) -> PathBuf {
        self.dir.join(format!("{segment}.extract"))
    }

    fn hash(&self, segment: &str, id: i64) -> Option<[u8; 32]> {
        let hashes = self.hashes.get(segment)?;
        hashes.binary_search_by_key(&id, |(id, _)| *id).ok().map(|at| hashes[at].1)
    }

    /// The rows of `segment`'s file that hold for the records' data as it is now, sorted by id,
    /// when it is a file made for `paths` by this gen, whole. Room is made for `records` rows
    /// (a row a record): the rows of a million records are 50 MB, twice that when doubled.
    /// A file that cannot be used is noted (unless it was made for other filters: gen.json
    /// changed), and every record of `segment` is then read.
    /// With `changed` (records and their previous data hashes), their rows are not taken, and
    /// those of their previous data are given apart, sorted by id.
    fn read(
        &self,
        segment: &str,
        paths: &[String],
        records: usize,
        changed: Option<&[(i64, [u8; 32])]>,
    ) -> Option<Rows> {
        let path = self.file(segment);
        let file = match fsutil::open_regular_file(&path, MAX_BYTES, false) {
            Ok(file) => file,
            Err(fsutil::NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return ignored(segment, fsutil::why_not_read(&path, MAX_BYTES, &e)),
        };
        let shown = path.display();
        let damaged = || ignored(segment, format!("{shown} {}", codec::damaged()));
        let Some(body) = file.metadata().ok().and_then(|meta| meta.len().checked_sub(32)) else { return damaged() };
        let checksummed = Checksummed::new(file.take(body));
        let mut input = Decoder { inner: std::io::BufReader::with_capacity(1 << 20, checksummed), left: body };
        let changed = changed.unwrap_or_default();
        let was = |id: i64| changed.binary_search_by_key(&id, |(id, _)| *id).ok().map(|at| &changed[at].1);
        let sort = |id: i64, hash: &[u8; 32]| match was(id) {
            Some(was) if was == hash => Row::Before,
            Some(_) => Row::Dropped,
            None if self.hash(segment, id).as_ref() == Some(hash) => Row::Holds,
            None => Row::Dropped,
        };
        let Rows { holding: mut rows, mut before, count } = match decode(&mut input, paths, records, sort) {
            Ok(rows) => rows,
            Err(Unused::OtherFilters) => return None,
            Err(Unused::Why(why)) => return ignored(segment, format!("{shown} {why}")),
        };
        let (reader, sum) = input.inner.into_inner().finish();
        let mut stored = [0u8; 32];
        if reader.into_inner().read_exact(&mut stored).is_err() || stored != *sum.as_bytes() {
            return damaged();
        }
        if !rows.is_sorted_by_key(|(id, _)| *id) {
            rows.sort_unstable_by_key(|(id, _)| *id);
        }
        if !before.is_sorted_by_key(|(id, _)| *id) {
            before.sort_unstable_by_key(|(id, _)| *id);
        }
        Some(Rows { holding: rows, before, count })
    }
}

/// What becomes of a kept row, by its record's id and data hash.
enum Row {
    /// Its data is as it is now: taken.
    Holds,
    /// The previous build's row of a changed record: given apart.
    Before,
    /// Neither.
    Dropped,
}

/// A kept extract's rows that hold (sorted by id), and those of changed records' previous data.
struct Rows {
    holding: Vec<(i64, Option<Kept>)>,
    before: Vec<(i64, Kept)>,
    /// How many rows the file holds.
    count: usize,
}

/// Says why the kept extract of `segment` is not used; `None`.
fn ignored<T>(segment: &str, why: String) -> Option<T> {
    say!("note: {why}: ignoring the kept extract; this build reads every record of {segment} again");
    None
}

/// Why a kept extract's file is not used.
enum Unused {
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

/// Decodes a kept extract's body: magic, version, head, rows, end mark; `Err` for another
/// version or gen, other filters, or damage. Each row goes where `sort` says (by id and data
/// hash).
fn decode(
    input: &mut Decoder<impl std::io::Read>,
    paths: &[String],
    records: usize,
    sort: impl Fn(i64, &[u8; 32]) -> Row,
) -> Result<Rows, Unused> {
    let format = input.array::<8>()? == *MAGIC && u32::from_le_bytes(input.array()?) == FORMAT;
    let head: Option<Head> = format.then(|| input.string().ok()).flatten().and_then(|s| serde_json::from_str(&s).ok());
    let Some(head) = head else { return Err(Unused::Why("is not a kept extract of this format".into())) };
    if head.generator != GENERATOR {
        return Err(Unused::Why(format!("was written by {}, not by this {GENERATOR}", head.generator)));
    }
    if head.paths != paths {
        return Err(Unused::OtherFilters);
    }
    let (mut rows, mut others, mut count) = (Vec::with_capacity(records), Vec::new(), 0);
    while input.byte()? == 1 {
        count += 1;
        let id = i64::from_le_bytes(input.array()?);
        let hash: [u8; 32] = input.array()?;
        let entry = input.string()?.into_bytes().into_boxed_slice();
        let mut values = Vec::with_capacity(paths.len());
        for _ in paths {
            let n = input.count(8)?;
            values.push((0..n).map(|_| input.string()).collect::<Result<Vec<_>, _>>()?);
        }
        match sort(id, &hash) {
            Row::Holds => rows.push((id, Some((entry, values)))),
            Row::Before => others.push((id, (entry, values))),
            Row::Dropped => {}
        }
    }
    if input.left != 0 {
        return Err(codec::damaged().into());
    }
    Ok(Rows { holding: rows, before: others, count })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::recorded::{DataFile, Hash};

    fn files(blue: &str) -> DataFiles {
        let mut files = DataFiles::default();
        for (id, text) in [(1, "red"), (2, blue)] {
            let stamp = crate::fsutil::Stamp { size: 1, mtime_ns: 1, ctime_ns: 1, ino: 1 };
            let file = DataFile { stamp, hash: Hash(blake3::hash(text.as_bytes())), name: None, line: None };
            files.insert(&format!("thing/{id}.json"), file);
        }
        files.finish();
        files
    }

    #[test]
    fn rows_come_back_only_for_the_same_data_filters_and_whole_file() {
        let tmp = std::env::temp_dir().join(format!("gen-extracts-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let out = tmp.join("out");
        let paths = vec!["color".to_string()];
        let (before, after) = (files("blue"), files("cyan"));
        let rows: Vec<(i64, Vec<u8>, Vec<Vec<String>>)> =
            vec![(1, b"{\"id\":1}".to_vec(), vec![vec!["red".into()]]), (2, b"{\"id\":2}".to_vec(), vec![vec![]])];
        let store = ExtractStore::new(&out, &before, ["thing"].into_iter(), true);
        store.keep("thing", &paths, rows.iter().map(|(id, e, v)| (*id, &e[..], &v[..])));
        let taken = store.take("thing", &paths, &[2, 1, 3]).rows;
        assert_eq!(taken.iter().map(Option::is_some).collect::<Vec<_>>(), [true, true, false]);
        assert_eq!(taken[1].as_ref().unwrap().1, vec![vec!["red".to_string()]]);
        let whole = store.take("thing", &paths, &[1, 2]);
        assert!(whole.whole && whole.before.is_none(), "every row taken, none given as it was: not compared");
        let mut compared = ExtractStore::new(&out, &after, ["thing"].into_iter(), true);
        let changed = compared.take("thing", &paths, &[1, 2]);
        assert_eq!(changed.rows.iter().map(Option::is_some).collect::<Vec<_>>(), [true, false], "record 2 changed");
        assert!(!changed.whole && changed.before.is_none());
        compared.compare("thing", vec![(2, *blake3::hash(b"blue").as_bytes())]);
        let changed = compared.take("thing", &paths, &[1, 2]);
        let was = changed.before.expect("a compared resource's rows of its changed records' previous data");
        assert_eq!(
            was.iter().map(|(id, (entry, _))| (*id, entry.to_vec())).collect::<Vec<_>>(),
            [(2, rows[1].1.clone())]
        );
        // a row of data the previous build did not have (a failed build's) is neither taken nor given
        compared.compare("thing", vec![(2, *blake3::hash(b"teal").as_bytes())]);
        let changed = compared.take("thing", &paths, &[1, 2]);
        assert!(changed.rows[1].is_none() && changed.before.is_some_and(|was| was.is_empty()));
        assert!(store.take("thing", &["shade".to_string()], &[1]).rows.iter().all(Option::is_none), "other filters");
        assert!(
            ExtractStore::new(&out, &before, ["thing"].into_iter(), false).take("thing", &paths, &[1]).rows[0]
                .is_none(),
            "--verify"
        );
        let file = store.file("thing");
        let mut bytes = std::fs::read(&file).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        assert!(store.take("thing", &paths, &[1]).rows[0].is_none(), "a damaged file is not used");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
