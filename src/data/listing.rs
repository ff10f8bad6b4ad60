//! The data folder's files with their stamps, listed in parallel and compared with what the
//! previous build recorded (docs/builds.md, "What a build trusts").
//!
//! Every file is stat'ed; a folder is read only when it may have changed. A folder's change and
//! modification times move whenever an entry is added to it, removed or renamed (and a tool
//! that sets the modification time back, as `tar`, `rsync -a` or `cp -a` do, moves the change
//! time, which no user call can set). So a folder whose times are older than the previous
//! build's start, by the same window as a file's ([`PreviousData::trusted`]), holds what that build
//! found in it: the files it recorded there, and the folders it noted as holding none
//! ([`FolderNotes`]), provided it is the same folder: a resource's folder is trusted only when
//! its identity (device and inode) is the one the previous build noted, so that a build from
//! another data folder of the same shape lists its own files. The data folder itself is always
//! read.
//!
//! Anything a walk would report (a stray file or folder, one that cannot be read, a resource
//! held both as a folder and as a table) ends the listing with `None`, and so does a link to a
//! folder (whose target may change without its folder's times moving): the build then walks
//! the data folder as without a previous build, and reports what it finds.

use super::data_path::DataPath;
use super::data_path::is_ignored;
use super::recorded::{DataFiles, FolderFiles, FolderNotes};
use super::watched::WatchedChanges;
use crate::fsutil::Stamp;
use rayon::prelude::*;
use std::path::Path;

/// What the listing found of one file, against what the previous build recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileStat {
    /// The file's stamp (links followed).
    pub(crate) stamp: Stamp,
    /// True when the previous build recorded the file with this stamp, old enough to trust.
    pub(crate) same: bool,
    /// The file's entry in the previous build's data table ([`NO_ENTRY`] when none; a
    /// listing holds one of these a file: 40 bytes, not the 48 an `Option` makes it).
    entry: u32,
}

/// [`FileStat`]'s entry when it has none.
const NO_ENTRY: u32 = u32::MAX;

impl FileStat {
    /// The file's stamp, `same` or not, and its entry number when it is `same` and a record or
    /// sub-document.
    fn new(stamp: Stamp, same: bool, entry: Option<u32>) -> FileStat {
        FileStat { stamp, same, entry: entry.filter(|_| same).unwrap_or(NO_ENTRY) }
    }

    /// The file's entry in the previous build's data table, when it is `same` and a record or
    /// sub-document.
    pub(crate) fn entry(&self) -> Option<u32> {
        (self.entry != NO_ENTRY).then_some(self.entry)
    }
}

/// What the caller of `load::load_reusing` says of a file before it is read, given the file and
/// what the data folder's listing found of it (when it was listed, not walked).
pub(crate) type SeeFile<'a> = dyn Fn(&Path, Option<&FileStat>) -> super::dataset::Seen + Sync + 'a;

/// One file of the data folder.
#[derive(Debug)]
pub(crate) struct Listed {
    /// Its path relative to the data folder.
    pub(crate) rel: String,
    /// Its stamp, against the previous build's.
    pub(crate) stat: FileStat,
}

/// Some files of a listing: those the previous build recorded as they are, by their entry
/// in its data table (4 bytes a file: what they are is in that table), and the others.
#[derive(Debug, Default)]
pub(crate) struct Block {
    /// The records' and sub-documents' files that are [`FileStat::same`], by entry number.
    pub(crate) same: Vec<u32>,
    /// Every other file.
    pub(crate) other: Vec<Listed>,
}

impl Block {
    /// Adds a file, by its entry number when it is the same.
    fn push(&mut self, listed: Listed) {
        match listed.stat.entry() {
            Some(number) => self.same.push(number),
            None => self.other.push(listed),
        }
    }

    /// Number of files.
    pub(crate) fn len(&self) -> usize {
        self.same.len() + self.other.len()
    }

    /// True when it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Every file of the data folder that a build loads, with its stamp.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// The files, in no particular order, in blocks of a few thousand: the load takes them a
    /// block at a time, and lets go of each.
    pub(crate) blocks: Vec<Block>,
    /// What it noted of the folders (those holding no data file, each resource folder's
    /// identity): for the index.
    pub(crate) notes: FolderNotes,
    /// How many folders were read because they may have changed since the previous build, or
    /// because it did not note them (the data folder aside).
    pub(crate) folders_read: usize,
}

impl Listing {
    /// Every file listed that is not the same as the previous build recorded it, and every
    /// file that is not a record's or sub-document's (`gen.json`, order files, tables).
    pub(crate) fn others(&self) -> impl Iterator<Item = &Listed> {
        self.blocks.iter().flat_map(|block| &block.other)
    }

    /// Number of files listed.
    pub(crate) fn len(&self) -> usize {
        self.blocks.iter().map(Block::len).sum()
    }

    /// True when every file is as the previous build recorded it, no more and no fewer, and no
    /// folder needed reading: the data is the data that build was made from.
    pub(crate) fn unchanged_since(&self, previous: PreviousData<'_>) -> bool {
        self.folders_read == 0
            && self.others().all(|file| file.stat.same)
            && self.len() == previous.data.file_count()
            && previous.folders == Some(&self.notes)
    }
}

/// What the previous build recorded of the data folder, all a listing compares with: its data
/// table, what it noted of the folders, and when its stamps stop being trusted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PreviousData<'a> {
    /// Every data file it recorded.
    pub(crate) data: &'a DataFiles,
    /// What its listing noted of the data folder's folders (`None` when not noted: no folder is
    /// then trusted).
    pub(crate) folders: Option<&'a FolderNotes>,
    /// A stamp is trusted when its file last changed before this time (nanoseconds since the
    /// epoch): the build's start, less the window a clock tick may hide a change in.
    pub(crate) trusted_before_ns: i64,
}

impl PreviousData<'_> {
    /// True when a file whose stamp is unchanged since that build recorded it can be taken as
    /// unchanged: it last changed well before that build started (see the build index's rule).
    pub(crate) fn trusted(&self, stamp: &Stamp) -> bool {
        stamp.ctime_ns < self.trusted_before_ns && stamp.mtime_ns < self.trusted_before_ns
    }
}

/// What the previous build recorded, and what it noted of the data folder's folders (`None` when
/// it did not note them: no folder is then trusted), and what a watcher saw change since.
#[derive(Clone, Copy)]
struct Recorded<'a> {
    index: PreviousData<'a>,
    notes: Option<&'a FolderNotes>,
    /// What a watcher saw change since that build, when it watched: what it did not see
    /// change is taken from the index without a `stat`.
    changes: Option<&'a WatchedChanges>,
}

impl Recorded<'_> {
    /// The folders that held no data file when the previous build listed them.
    fn hollow(&self) -> &[String] {
        self.notes.map_or(&[], |notes| &notes.hollow)
    }

    /// True when the folder `rel` held no data file when the previous build listed it.
    fn is_hollow(&self, rel: &str) -> bool {
        self.hollow().binary_search_by(|folder| folder.as_str().cmp(rel)).is_ok()
    }

    /// True when the folder stamped `stamp`, which the previous build found holding `known`
    /// data files (or noted as holding none), has had no entry added, removed or renamed since.
    fn trusts_folder(&self, known: bool, stamp: &Stamp) -> bool {
        known && self.notes.is_some() && self.index.trusted(stamp)
    }

    /// Whether the folder `rel`, which the previous build found holding `known` data files (or
    /// noted as holding none), is trusted by what a watcher saw: `None` when no watcher did.
    fn watched_folder(&self, rel: &str, known: bool) -> Option<bool> {
        let changes = self.changes?;
        Some(known && self.notes.is_some() && changes.folder_unchanged(rel))
    }

    /// The file `rel` (entry `entry` of the data table, when a record or sub-document), as the
    /// previous build recorded it, when a watcher saw no change to it since: no `stat` needed.
    fn watched_file(&self, rel: &str, entry: Option<u32>) -> Option<FileStat> {
        if !self.changes?.file_unchanged(rel) {
            return None;
        }
        let stamp = match entry {
            Some(number) => self.index.data.stamp_at(number),
            None => self.index.data.other_stamp(rel)?,
        };
        Some(self.stat(rel, stamp, entry))
    }

    /// True when the resource folder `segment` is the folder (by `identity`) the previous
    /// build listed.
    fn same_folder(&self, segment: &str, identity: (u64, u64)) -> bool {
        self.notes.and_then(|notes| notes.resources.get(segment)) == Some(&identity)
    }

    /// What the previous build recorded of the file `rel`, now stamped `stamp`: whether it is the
    /// same, and its entry (`entry`, when the caller knows it; looked up otherwise).
    fn stat(&self, rel: &str, stamp: Stamp, entry: Option<u32>) -> FileStat {
        let data = &self.index.data;
        let trusted = self.index.trusted(&stamp);
        let entry = entry.or_else(|| data.entry_number(rel));
        let same = trusted
            && match entry {
                Some(number) => data.stamp_at(number) == stamp,
                None => data.other_stamp(rel) == Some(stamp),
            };
        FileStat::new(stamp, same, entry)
    }
}

/// What the listing of part of the data folder found.
#[derive(Default)]
struct Part {
    /// The files found, in blocks.
    blocks: Vec<Block>,
    /// The folders holding no data file.
    hollow: Vec<String>,
    /// How many folders were read.
    folders_read: usize,
}

/// How many record folders' files make one block of a listing.
const BLOCK_FOLDERS: usize = 2048;

/// How many files of a resource's folder (its records' files) make one block of a listing.
const BLOCK_FILES: usize = 4096;

impl Part {
    /// The parts, one after another.
    fn join(parts: impl IntoIterator<Item = Part>) -> Part {
        let mut all = Part::default();
        for part in parts {
            all.blocks.extend(part.blocks.into_iter().filter(|block| !block.is_empty()));
            all.hollow.extend(part.hollow);
            all.folders_read += part.folders_read;
        }
        all
    }

    /// True when no file was found.
    fn has_no_file(&self) -> bool {
        self.blocks.iter().all(Block::is_empty)
    }
}

/// Lists the data folder `data`, trusting the folders that `previous` (what the previous build
/// recorded, if any) vouches for: by their times, or by what a watcher saw change since that build
/// (`changes`, counted from it). `None` when a walk would report a problem, or when a folder is
/// a link.
pub(crate) fn list(
    data: &Path,
    previous: Option<PreviousData<'_>>,
    changes: Option<&WatchedChanges>,
) -> Option<Listing> {
    let recorded = previous.map(|index| Recorded { index, notes: index.folders, changes });
    let mut top = Vec::new();
    let mut folders = Vec::new();
    for (name, is_dir) in folder_names(data)? {
        let meta = std::fs::metadata(data.join(&name)).ok()?;
        if meta.is_dir() != is_dir {
            return None; // a link to a folder
        }
        let stamp = Stamp::of(&meta);
        match DataPath::parse(&name, is_dir).ok()? {
            DataPath::ResourceFolder { .. } => folders.push((name, stamp, identity(&meta))),
            DataPath::Settings | DataPath::Table { .. } | DataPath::SubDocTable { .. } => {
                let stat = stat_of(recorded, &name, stamp, None);
                top.push(Listed { rel: name, stat });
            }
            _ => return None,
        }
    }
    let held_twice = |segment: &String| top.iter().any(|file| *file.rel == DataPath::Table { segment }.file());
    if folders.iter().any(|(segment, ..)| held_twice(segment)) {
        return None;
    }
    let opened = Data { path: data, dir: std::fs::File::open(data).ok() };
    let parts = folders.par_iter().map(|(segment, stamp, identity)| {
        let same = recorded.is_some_and(|r| r.same_folder(segment, *identity));
        resource_folder(&opened, segment, (stamp, same), recorded)
    });
    let top = Part { blocks: vec![Block { same: Vec::new(), other: top }], ..Part::default() };
    let part = Part::join(std::iter::once(top).chain(parts.collect::<Option<Vec<_>>>()?));
    let mut hollow = part.hollow;
    hollow.sort();
    let resources = folders.into_iter().map(|(segment, _, identity)| (segment, identity)).collect();
    Some(Listing { blocks: part.blocks, notes: FolderNotes { hollow, resources }, folders_read: part.folders_read })
}

/// The stamp of the file `rel`, against what `recorded` says of it.
fn stat_of(recorded: Option<Recorded<'_>>, rel: &str, stamp: Stamp, entry: Option<u32>) -> FileStat {
    match recorded {
        Some(recorded) => recorded.stat(rel, stamp, entry),
        None => FileStat::new(stamp, false, None),
    }
}

/// The file `rel` (with its entry in the previous build's data table, when known), stat'ed and
/// compared with what `recorded` says of it. `None` when it cannot be stat'ed or is a folder.
fn stat_file(data: &Data<'_>, recorded: Option<Recorded<'_>>, (rel, entry): ToStat) -> Option<Listed> {
    if let Some(stat) = recorded.and_then(|r| r.watched_file(&rel, entry)) {
        return Some(Listed { rel, stat });
    }
    let stamp = match data.dir.as_ref() {
        Some(dir) => Stamp::at(dir, &rel, true).filter(|(_, is_dir)| !is_dir)?.0,
        None => Stamp::of(&std::fs::metadata(data.path.join(&rel)).ok().filter(|meta| !meta.is_dir())?),
    };
    let stat = stat_of(recorded, &rel, stamp, entry);
    Some(Listed { rel, stat })
}

/// The data folder, and the folder opened (each file is stat'ed from it).
struct Data<'a> {
    path: &'a Path,
    dir: Option<std::fs::File>,
}

/// The identity of a folder: its device and inode.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// The names in the folder `dir` that the walk does not skip, each with whether it is a folder
/// (by its entry: a link is not one). `None` when it cannot be read.
fn folder_names(dir: &Path) -> Option<Vec<(String, bool)>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name().into_string().ok()?;
        if !is_ignored(&name) {
            names.push((name, entry.file_type().ok()?.is_dir()));
        }
    }
    Some(names)
}

/// The files of the resource folder `segment` (stamped `stamp`; `same` when it is the folder
/// the previous build listed) and of its records' folders.
fn resource_folder(
    data: &Data<'_>,
    segment: &str,
    (stamp, same): (&Stamp, bool),
    recorded: Option<Recorded<'_>>,
) -> Option<Part> {
    let files = recorded.map(|r| r.index.data.folder_files(segment)).unwrap_or_default();
    let order = DataPath::Order { segment }.file();
    let has_order = recorded.is_some_and(|r| r.index.data.other_stamp(&order).is_some());
    let known = !files.records.is_empty()
        || !files.subdocs.is_empty()
        || has_order
        || recorded.is_some_and(|r| r.is_hollow(segment));
    let trusted = same
        && recorded.is_some_and(|r| r.watched_folder(segment, known).unwrap_or_else(|| r.trusts_folder(known, stamp)));
    let mut part = Part { folders_read: usize::from(!trusted), ..Part::default() };
    let (to_stat, record_folders) = match trusted {
        true => recorded_entries(segment, &files, has_order.then_some(order), recorded?),
        false => read_resource_folder(data.path, segment, &files)?,
    };
    let stat = |file: ToStat| stat_file(data, recorded, file);
    let blocks = to_stat.into_par_iter().with_min_len(256).map(stat).chunks(BLOCK_FILES);
    part.blocks = blocks.map(into_block).collect::<Option<_>>()?;
    let in_folders = record_folders.par_chunks(BLOCK_FOLDERS).map(|ids| {
        let mut part =
            Part { blocks: vec![Block { same: Vec::with_capacity(ids.len()), other: Vec::new() }], ..Part::default() };
        // the ids come sorted, as the recorded sub-documents are: one walk along both, not a
        // search of every folder's (a binary search a folder missed the cache at each step)
        let subdocs = &files.subdocs;
        let mut at = subdocs.partition_point(|(i, _)| i < &ids[0]);
        for id in ids {
            at += subdocs[at..].iter().take_while(|(i, _)| i < id).count();
            let end = at + subdocs[at..].iter().take_while(|(i, _)| i == id).count();
            record_folder(data, segment, *id, (&subdocs[at..end], recorded.filter(|_| same)), &mut part)?;
            at = end;
        }
        Some(part)
    });
    let mut part = Part::join(std::iter::once(part).chain(in_folders.collect::<Option<Vec<_>>>()?));
    if part.has_no_file() {
        part.hollow.push(segment.to_string()); // nothing in it or below it is data
    }
    Some(part)
}

/// The files stat'ed, as a block; `None` when one could not be.
fn into_block(files: Vec<Option<Listed>>) -> Option<Block> {
    let mut block = Block { same: Vec::with_capacity(files.len()), other: Vec::new() };
    for listed in files {
        block.push(listed?);
    }
    block.same.shrink_to_fit();
    Some(block)
}

/// A file to stat: its path relative to the data folder, and its entry in the previous build's
/// data table when known.
type ToStat = (String, Option<u32>);

/// What a trusted resource folder holds, by the previous build's index: its files, and the ids
/// of its records' folders.
fn recorded_entries(
    segment: &str,
    files: &FolderFiles,
    order: Option<String>,
    recorded: Recorded<'_>,
) -> (Vec<ToStat>, Vec<i64>) {
    let mut to_stat: Vec<ToStat> = Vec::with_capacity(files.records.len() + 1);
    to_stat.extend(files.records.iter().map(|&(id, number)| (DataPath::Record { segment, id }.file(), Some(number))));
    to_stat.extend(order.map(|order| (order, None)));
    let mut folders: Vec<i64> = files.subdocs.iter().map(|(id, _)| *id).collect();
    let hollow = recorded.hollow().iter().filter_map(|rel| match DataPath::parse(rel, true) {
        Ok(DataPath::RecordFolder { segment: s, id }) if s == segment => Some(id),
        _ => None,
    });
    folders.extend(hollow);
    folders.sort_unstable();
    folders.dedup();
    (to_stat, folders)
}

/// What the resource folder `segment` holds, read: its files (with their entries in `files`),
/// and the ids of its records' folders, in order. `None` for anything else in it, or a link to a folder.
fn read_resource_folder(data: &Path, segment: &str, files: &FolderFiles) -> Option<(Vec<ToStat>, Vec<i64>)> {
    let (mut to_stat, mut folders) = (Vec::new(), Vec::new());
    for (name, is_dir) in folder_names(&data.join(segment))? {
        let rel = format!("{segment}/{name}");
        match DataPath::parse(&rel, is_dir).ok()? {
            DataPath::Record { id, .. } => {
                let entry = files.records.binary_search_by_key(&id, |(id, _)| *id).ok().map(|at| files.records[at].1);
                to_stat.push((rel, entry));
            }
            DataPath::Order { .. } => to_stat.push((rel, None)),
            DataPath::RecordFolder { id, .. } => folders.push(id),
            _ => return None,
        }
    }
    folders.sort_unstable(); // in order of id, as the recorded sub-documents they are walked along
    Some((to_stat, folders))
}

/// The files of the folder of record `id` of `segment` (where the previous build recorded the
/// sub-documents `recorded_subdocs`), added to `part` (its last block): read unless the
/// previous build noted it and it has not changed since (`recorded` is `None` when
/// its resource's folder is not the one the previous build listed). A record's folder moved in
/// from elsewhere has a new change time (Linux file systems set it on a rename), so it is read.
fn record_folder(
    data: &Data<'_>,
    segment: &str,
    id: i64,
    (recorded_subdocs, recorded): (&[(i64, u32)], Option<Recorded<'_>>),
    part: &mut Part,
) -> Option<()> {
    let rel = DataPath::RecordFolder { segment, id }.file();
    let known = !recorded_subdocs.is_empty() || recorded.is_some_and(|r| r.is_hollow(&rel));
    let watched = recorded.and_then(|r| r.watched_folder(&rel, known));
    let trusted = watched == Some(true) || {
        let stamp = match data.dir.as_ref() {
            Some(opened) => Stamp::at(opened, &rel, false).filter(|(_, is_dir)| *is_dir)?.0, // not a link
            None => Stamp::of(&std::fs::symlink_metadata(data.path.join(&rel)).ok().filter(|meta| meta.is_dir())?),
        };
        watched.is_none() && recorded.is_some_and(|r| r.trusts_folder(known, &stamp))
    };
    let to_stat: Vec<ToStat> = match (trusted, recorded) {
        (true, Some(r)) => {
            recorded_subdocs.iter().map(|&(_, number)| (r.index.data.path_at(number), Some(number))).collect()
        }
        _ => {
            let mut to_stat = Vec::new();
            for (name, is_dir) in folder_names(&data.path.join(&rel))? {
                let file = format!("{rel}/{name}");
                let Ok(DataPath::SubDoc { name: kind, .. }) = DataPath::parse(&file, is_dir) else { return None };
                let entry = recorded.and_then(|r| {
                    recorded_subdocs.iter().map(|(_, number)| *number).find(|n| r.index.data.kind_at(*n) == Some(kind))
                });
                to_stat.push((file, entry));
            }
            to_stat
        }
    };
    part.folders_read += usize::from(!trusted);
    if to_stat.is_empty() {
        part.hollow.push(rel);
    }
    let block = part.blocks.last_mut()?;
    for file in to_stat {
        block.push(stat_file(data, recorded, file)?);
    }
    Some(())
}
