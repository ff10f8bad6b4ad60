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

pub(crate) use super::extract_file::Summary;
use super::extract_file::{self, Head, Kept, Opened, Unused};
use crate::build::state;
use crate::data::recorded::DataFiles;
use crate::fsutil;
use crate::tree::manifest::GENERATOR;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest file read (1 GiB): a resource of a million records keeps about 150 MB.
const MAX_BYTES: u64 = 1 << 30;

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
        let Some(read) = self.reuse.then(|| self.read(segment, paths, compared)).flatten() else {
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

    /// The kept extract of `segment` when it needs no row read but those of its changed
    /// records: the file holds a row for each record `ids` (in this order) and the summary of
    /// them, each row holds for its record's data as it is now or, of a compared resource, as
    /// the previous build had it ([`Held`]). `None` when it does not, and when `names` are
    /// wanted of a resource not compared (its rows must be read): the rows are then taken
    /// ([`ExtractStore::take`]), which notes why a file is not used.
    pub(crate) fn held(&self, segment: &str, paths: &[String], ids: &[i64], names: bool) -> Option<Held> {
        let compared = self.compared.get(segment);
        if !self.reuse || (names && compared.is_none()) {
            return None;
        }
        let file = fsutil::open_regular_file(&self.file(segment), MAX_BYTES, false).ok()?;
        let size = file.metadata().ok()?.len();
        let mut opened = extract_file::open(file, size, paths, GENERATOR).ok()?;
        if opened.keys.len() != ids.len() {
            return None;
        }
        let summary = opened.summary.take()?;
        let (changed, was) = (compared.map_or(&[][..], Vec::as_slice), |id: i64, changed: &[(i64, [u8; 32])]| {
            changed.binary_search_by_key(&id, |(id, _)| *id).ok()
        });
        let hashes = self.hashes.get(segment)?;
        let (mut keys, mut rows, mut next) = (opened.keys.clone(), Vec::new(), 0);
        for (position, (&id, key)) in ids.iter().zip(&mut keys).enumerate() {
            // a list sorted by id finds each hash after the one before
            let at = match hashes.get(next) {
                Some((found, _)) if *found == id => next,
                _ => hashes.binary_search_by_key(&id, |(id, _)| *id).ok()?,
            };
            next = at + 1;
            if key.0 != id {
                return None;
            }
            match was(id, changed) {
                Some(c) if changed[c].1 == key.1 => rows.push(position),
                None if hashes[at].1 == key.1 => continue,
                _ => return None,
            }
            key.1 = hashes[at].1;
        }
        let mut before = Vec::with_capacity(rows.len());
        let mut block: (usize, Vec<Kept>) = (usize::MAX, Vec::new());
        for position in rows {
            if position < block.0 || position >= block.0.saturating_add(block.1.len()) {
                block = opened.block_of(position).ok()?;
            }
            before.push((position, block.1[position - block.0].clone()));
        }
        Some(Held { summary, before, keys, opened })
    }

    /// Keeps again the extract `held` gave, each row now under its record's data hash: only
    /// the keys are written anew (nothing when none changed).
    pub(crate) fn renew(&self, segment: &str, mut held: Held) -> Summary {
        if held.before.is_empty() {
            return held.summary;
        }
        self.write(segment, |file| held.opened.rekey(file, &held.keys));
        held.summary
    }

    /// Keeps `rows` (id, names entry, values) of `segment` for the next build, in list order,
    /// with their `summary` when they are every record's. `ids` are the rows' ids, walked
    /// apart (a row's values may be made as `rows` is walked, once). A file that cannot be
    /// written is left out: the next build then reads every record of `segment`.
    pub(crate) fn keep<'r, V: AsRef<[Vec<String>]>>(
        &self,
        segment: &str,
        paths: &[String],
        (ids, rows): (impl Iterator<Item = i64> + Clone, impl Iterator<Item = (i64, &'r [u8], V)>),
        summary: Option<&Summary>,
    ) {
        let keys = ids.clone().filter_map(|id| Some((id, self.hash(segment, id)?)));
        let every = summary.filter(|_| keys.clone().count() == ids.count());
        let rows =
            rows.filter(|(id, _, _)| self.hash(segment, *id).is_some()).map(|(_, entry, values)| (entry, values));
        let head = Head { generator: GENERATOR.to_string(), paths: paths.to_vec() };
        self.write(segment, |file| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            extract_file::write(&mut out, &head, keys, rows, every)?;
            out.flush()
        });
    }

    /// Writes the kept extract of `segment` with `write`, to a new file then renamed over the
    /// old one; when it cannot, there is none.
    fn write(&self, segment: &str, write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) {
        let path = self.file(segment);
        let temporary = path.with_extension("tmp");
        let written = (|| -> std::io::Result<()> {
            // the state folder, then the extracts' own in it
            self.dir.parent().map_or(Ok(()), state::own_folder)?;
            state::own_folder(&self.dir)?;
            let mut file = fsutil::create_new(&temporary).map_err(std::io::Error::other)?;
            write(&mut file)?;
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
    /// when it is a file made for `paths` by this gen, whole. A file that cannot be used is
    /// noted (unless it was made for other filters: gen.json changed), and every record of
    /// `segment` is then read.
    /// With `changed` (records and their previous data hashes), their rows are not taken, and
    /// those of their previous data are given apart, sorted by id.
    fn read(&self, segment: &str, paths: &[String], changed: Option<&[(i64, [u8; 32])]>) -> Option<Rows> {
        let path = self.file(segment);
        let file = match fsutil::open_regular_file(&path, MAX_BYTES, false) {
            Ok(file) => file,
            Err(fsutil::NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return ignored(segment, fsutil::why_not_read(&path, MAX_BYTES, &e)),
        };
        let shown = path.display();
        let size = file.metadata().map_or(0, |meta| meta.len());
        let opened = extract_file::open(file, size, paths, GENERATOR).and_then(|mut opened| {
            let rows = opened.rows()?;
            Ok((std::mem::take(&mut opened.keys), rows))
        });
        let (keys, rows) = match opened {
            Ok(read) => read,
            Err(Unused::OtherFilters) => return None,
            Err(Unused::Why(why)) => return ignored(segment, format!("{shown} {why}")),
        };
        let changed = changed.unwrap_or_default();
        let was = |id: i64| changed.binary_search_by_key(&id, |(id, _)| *id).ok().map(|at| &changed[at].1);
        let count = keys.len();
        let (mut holding, mut before) = (Vec::with_capacity(count), Vec::new());
        for ((id, hash), row) in keys.into_iter().zip(rows) {
            match was(id) {
                Some(was) if *was == hash => before.push((id, row)),
                Some(_) => {}
                None if self.hash(segment, id) == Some(hash) => holding.push((id, Some(row))),
                None => {}
            }
        }
        if !holding.is_sorted_by_key(|(id, _)| *id) {
            holding.sort_unstable_by_key(|(id, _)| *id);
        }
        if !before.is_sorted_by_key(|(id, _)| *id) {
            before.sort_unstable_by_key(|(id, _)| *id);
        }
        Some(Rows { holding, before, count })
    }

    /// True when `segment` is compared ([`ExtractStore::compare`]).
    pub(crate) fn compares(&self, segment: &str) -> bool {
        self.compared.contains_key(segment)
    }
}

/// A kept extract that needs no row read but those of its changed records
/// ([`ExtractStore::held`]).
pub(crate) struct Held {
    /// The filters' values of the rows, as the file keeps them.
    pub(crate) summary: Summary,
    /// The rows of the changed records' previous data, by their list position, in order: what
    /// those records gave the previous build.
    pub(crate) before: Vec<(usize, Kept)>,
    /// Each row's id and its record's data hash now.
    keys: Vec<(i64, [u8; 32])>,
    opened: Opened,
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
        store.keep(
            "thing",
            &paths,
            (rows.iter().map(|(id, _, _)| *id), rows.iter().map(|(id, e, v)| (*id, &e[..], &v[..]))),
            None,
        );
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

    /// `n` records `thing/<id>.json`, each's data hashing as `data(id)`.
    fn many(n: i64, data: impl Fn(i64) -> String) -> DataFiles {
        let mut files = DataFiles::default();
        for id in 1..=n {
            let stamp = crate::fsutil::Stamp { size: 1, mtime_ns: 1, ctime_ns: 1, ino: 1 };
            let hash = Hash(blake3::hash(data(id).as_bytes()));
            files.insert(&format!("thing/{id}.json"), DataFile { stamp, hash, name: None, line: None });
        }
        files.finish();
        files
    }

    #[test]
    fn an_edit_reads_only_its_changed_records_rows_and_keeps_the_rest_as_they_are() {
        let tmp = std::env::temp_dir().join(format!("gen-extracts-held-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let (out, paths, n) = (tmp.join("out"), vec!["color".to_string()], 10_000);
        let ids: Vec<i64> = (1..=n).collect();
        let rows: Vec<(i64, Vec<u8>, Vec<Vec<String>>)> = ids
            .iter()
            .map(|&id| (id, format!("{{\"id\":{id}}}").into_bytes(), vec![vec![format!("c{}", id % 3)]]))
            .collect();
        let summary =
            Summary { fields: vec![vec![("c0".into(), vec![2, 5]), ("c1".into(), vec![0])]], most: vec![(1, 1)] };
        let store = ExtractStore::new(&out, &many(n, |id| format!("{id}")), ["thing"].into_iter(), true);
        let row_ids = rows.iter().map(|(id, _, _)| *id);
        store.keep("thing", &paths, (row_ids, rows.iter().map(|(id, e, v)| (*id, &e[..], &v[..]))), Some(&summary));
        // record 2 edited: its row of the previous data is given, with the summary as kept
        let edited = |id: i64| if id == 2 { "two".to_string() } else { format!("{id}") };
        let mut compared = ExtractStore::new(&out, &many(n, edited), ["thing"].into_iter(), true);
        compared.compare("thing", vec![(2, *blake3::hash(b"2").as_bytes())]);
        // a damaged byte in the rows of the last records: not read, so not seen
        let file = store.file("thing");
        let mut bytes = std::fs::read(&file).unwrap();
        let table = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
        let at = bytes.len() - table - 100;
        bytes[at] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let held = compared.held("thing", &paths, &ids, true).expect("held: only record 2 changed");
        assert_eq!(held.summary, summary);
        assert_eq!(held.before, [(1, (rows[1].1.clone().into_boxed_slice(), rows[1].2.clone()))]);
        assert!(compared.take("thing", &paths, &ids).before.is_none(), "the damage is seen by a build that reads it");
        // other ids, or the names of a resource not compared, are not held
        assert!(compared.held("thing", &paths, &ids[1..], true).is_none());
        assert!(
            store.held("thing", &paths, &ids, true).is_none() && store.held("thing", &paths, &ids, false).is_some()
        );
        // a row of data the previous build did not have (a failed build's) is not the previous build's
        let mut failed = ExtractStore::new(&out, &many(n, edited), ["thing"].into_iter(), true);
        failed.compare("thing", vec![(2, *blake3::hash(b"teal").as_bytes())]);
        assert!(failed.held("thing", &paths, &ids, true).is_none());
        // kept again under record 2's new hash, the rest copied: held with nothing changed
        assert_eq!(compared.renew("thing", held), summary);
        let next = ExtractStore::new(&out, &many(n, edited), ["thing"].into_iter(), true);
        let again = next.held("thing", &paths, &ids, false).expect("every row holds");
        assert!(again.before.is_empty() && again.summary == summary);
        bytes[at] ^= 1; // the copied rows are those written, damage and all
        let renewed = std::fs::read(&file).unwrap();
        assert_ne!(renewed[at], bytes[at]);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
