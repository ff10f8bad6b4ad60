//! The bulk step of a write (see [`crate::bulk`]): once every document is placed, each
//! resource's bulk-data file is kept when none of its records was written anew and its list
//! kept its order, and otherwise written again from its record documents as the write left
//! them (staged, or in the tree), one at a time, member by member: a member whose records the
//! previous file holds as one member (by the member table) is copied from it, the others are
//! compressed (`bulk_members.rs`, which the archive writer shares). Then the bulk-data index,
//! and the member table beside the tree.

use super::bulk_members::{PreviousFile, Records, Source, write_file};
use super::docs::{Doc, Docs};
use super::stage::{Placed, Placements, Stager};
use crate::build::index::Index;
use crate::build::plan::Content;
use crate::build::rendering::{Document, Documents};
use crate::build::state;
use crate::bulk::members::{FileMembers, Table};
use crate::bulk::{self, Entry};
use crate::problem::Problems;
use crate::tree::layout;
use crate::tree::manifest::BuildSettings;
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashSet};

/// The bulk-data files of a write, each with its placement, and the bulk-data index (a late
/// document).
pub(super) struct BulkFiles {
    pub(super) files: Vec<(String, Placed)>,
    pub(super) index: Document,
}

/// One resource's bulk-data file as staged: its index entry, path, placement and members.
type Staged = MadeFile<Placed>;

/// Keeps or writes every resource's bulk-data file, in parallel (`None` when the tree has none:
/// `"bulk": false`). `lists`: each list's hash, as the build index records it.
pub(super) fn stage_bulk(
    writer: &Stager<'_>,
    docs: &Docs<'_, '_>,
    documents: &Documents<'_, '_>,
    placed: &Placements,
    settings: &BuildSettings,
    (lists, known_dates): (&BTreeMap<String, String>, Option<&BTreeMap<String, i64>>),
) -> Result<Option<BulkFiles>> {
    if !settings.bulk {
        return Ok(None);
    }
    let (previous, trusted) = previous_entries(writer);
    // The member table is trusted as the index is, and only with it: `--verify` (which uses no
    // index) writes every file whole, so that a damaged table cannot carry into the tree.
    let table = writer
        .tree
        .zip(writer.index)
        .map(|(tree, index)| Table::read(&state::file(tree.path(), state::BULK), index.member_table.as_deref()))
        .unwrap_or_default();
    // the resources with a record written anew (only the documents visited are looked at)
    let mut staged: HashSet<&str> = HashSet::new();
    for (i, _) in placed.visited().filter(|(i, placed)| placed.staged && *i < docs.outputs.len()) {
        if let Content::Record { segment, .. } = docs.outputs.get(i).content {
            staged.insert(segment);
        }
    }
    let segments: Vec<&str> = docs.dataset.resources.keys().map(String::as_str).collect();
    let dates = updated_dates(&docs.dataset.dir, &segments, settings, known_dates);
    let done: Vec<Result<Staged>> = segments
        .par_iter()
        .map(|segment| {
            let old = previous.get(*segment);
            let list_kept = writer.index.is_some_and(|index| index.lists.get(*segment) == lists.get(*segment));
            let unchanged = |_: &&Entry| trusted && list_kept && !staged.contains(segment);
            // a file the member table does not describe (one an older gen wrote whole) is
            // written again, in members, as a fresh build writes it
            let described = |(_, path, _): &(&Entry, String, blake3::Hash)| table.files.contains_key(path);
            let kept = old.filter(unchanged).and_then(|old| kept_file(writer, settings, old)).filter(described);
            let updated_at = dates.get(*segment).map_or_else(|| settings.deploy_date.clone(), i64::to_string);
            if let Some((old, path, file)) = kept {
                let download_url = format!("{}/{path}", settings.base_url);
                let entry = Entry { download_url, updated_at, ..old.clone() };
                let members = table.files.get(&path).cloned();
                return Ok((entry, path, Placed { hash: file, staged: false, written: 0, from_index: true }, members));
            }
            // the same records in the same order as the previous build's file (see `previous_members`)
            let by_position = list_kept && trusted && writer.killed.is_none();
            let from = old.and_then(|old| previous_members(writer, &table, old, by_position));
            let job = Members { writer, docs, documents, placed };
            let indices = docs.outputs.record_positions(segment);
            let (written, members) = write_file(writer.stage, segment, settings.pretty, &indices, from.as_ref(), &job)?;
            let entry = written.entry(segment, &settings.base_url, &updated_at);
            // the same bytes already in place (a build without the index): nothing to write
            let staged = !writer.tree.is_some_and(|tree| same_bytes(tree, &written.path, &written.blake3));
            if !staged {
                let staged_file = writer.stage.join(&written.path);
                std::fs::remove_file(&staged_file)
                    .with_context(|| format!("cannot remove {}", staged_file.display()))?;
            }
            let placed = Placed { hash: written.blake3, staged, written: u32::from(staged), from_index: false };
            Ok((entry, written.path, placed, Some(members)))
        })
        .collect();
    let (files, index) = gather(writer.out, done, (&previous, table), writer.index, settings.pretty)?;
    Ok(Some(BulkFiles { files, index }))
}

/// One resource's bulk-data file as a write made it: its index entry, path, what was done with
/// it (`P`: a tree write's placement, or an archive write's hand-over), its members.
pub(super) type MadeFile<P> = (Entry, String, P, Option<FileMembers>);

/// The end of a write's bulk step, a tree's or an archive's: gathers the files `made` (the
/// first error returned), writes the member table (see [`keep_member_table`]; `previous`: the
/// previous bulk-data entries, and the member table read), and returns each file's path with
/// `P`, and the bulk-data index (a late document, `index`: the previous build's index).
pub(super) fn gather<P>(
    out: &std::path::Path,
    made: Vec<Result<MadeFile<P>>>,
    (previous, table): (&BTreeMap<String, Entry>, Table),
    index: Option<&Index>,
    pretty: bool,
) -> Result<(Vec<(String, P)>, Document)> {
    let mut entries = Vec::with_capacity(made.len());
    let mut files = Vec::with_capacity(made.len());
    let mut members = Table::default();
    for result in made {
        let (entry, path, handed, described) = result?;
        if let Some(described) = described {
            members.files.insert(path.clone(), described);
        }
        entries.push(entry);
        files.push((path, handed));
    }
    keep_member_table(out, previous, table, members)?;
    let (path, bytes) = (layout::BULK_INDEX_PATH.to_string(), bulk::index_document(entries, pretty));
    let previous = index.and_then(|index| index.docs.other(std::slice::from_ref(&path)));
    Ok((files, Document::Late { hash: blake3::hash(&bytes), path, bytes, previous }))
}

/// The date of each resource's bulk-data file (its entry's `updated_at`), by segment: the last
/// commit that touched the resource's data or `gen.json`, when the data is committed in git and
/// no `SOURCE_DATE_EPOCH` gives the build's date (then `built_at` is set); a resource left out
/// is dated with the tree's `deploy_date`. Never the date of a previous build: a fresh clone's
/// build gives the same bytes as a rebuild (docs/guarantees.md).
/// `known`: the dates the build took from git with its deploy date, when it asked.
pub(super) fn updated_dates(
    data: &std::path::Path,
    segments: &[&str],
    settings: &BuildSettings,
    known: Option<&BTreeMap<String, i64>>,
) -> BTreeMap<String, i64> {
    match (settings.built_at.as_ref(), known) {
        (Some(_), _) => BTreeMap::new(),
        (None, Some(known)) => known.clone(),
        (None, None) => {
            crate::data::commit_dates::commit_dates(data, segments).map(|dates| dates.resources).unwrap_or_default()
        }
    }
}

/// The previous tree's bulk-data entries by resource, and whether they can be trusted to
/// describe the files in place (the index's hash of the bulk-data index matches its bytes).
fn previous_entries(writer: &Stager<'_>) -> (BTreeMap<String, Entry>, bool) {
    let Some(tree) = writer.tree else { return (BTreeMap::new(), false) };
    let Some(bytes) = tree.read(layout::BULK_INDEX_PATH, 64 << 20) else { return (BTreeMap::new(), false) };
    let indexed = writer.index.and_then(|index| index.docs.other(&[layout::BULK_INDEX_PATH.to_string()]));
    let trusted = indexed.is_some_and(|file| file.hash.0 == blake3::hash(&bytes));
    let entries = bulk::read_index(&bytes).unwrap_or_default();
    (entries.into_iter().map(|entry| (entry.resource.clone(), entry)).collect(), trusted)
}

/// The file of `old`, when the previous build's index lists it and no killed commit touched it:
/// its path and its hash.
fn kept_file<'e>(
    writer: &Stager<'_>,
    settings: &BuildSettings,
    old: &'e Entry,
) -> Option<(&'e Entry, String, blake3::Hash)> {
    let path = old.download_url.strip_prefix(&format!("{}/", settings.base_url))?;
    if !layout::is_bulk_file(path) || !layout::is_tree_path(path) {
        return None;
    }
    let touched = writer.killed.is_some_and(|paths| paths.is_empty() || paths.contains(path));
    let file = writer.index?.docs.other(&[path.to_string()]).filter(|_| !touched)?;
    Some((old, path.to_string(), file.hash.0))
}

/// True when the tree holds a regular file at `path` whose bytes hash to `hash` (read a piece
/// at a time).
fn same_bytes(tree: &crate::tree::dir::TreeDir, path: &str, hash: &blake3::Hash) -> bool {
    let Ok(mut file) = tree.open_file(path, u64::MAX) else { return false };
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(&mut file).is_ok() && hasher.finalize() == *hash
}

/// The bytes of the record document of output `i`, as the write left them: in the staging
/// folder when it was written anew, else in the tree; rendered again when the tree's file
/// cannot be read (a plain build trusts the tree: a link put in its place is not followed).
fn record_bytes(
    writer: &Stager<'_>,
    docs: &Docs<'_, '_>,
    documents: &Documents<'_, '_>,
    placed: &Placements,
    i: usize,
) -> Result<Vec<u8>> {
    let (place, _) = docs.outputs.get(i).place(docs.dataset).expect("a record has a place");
    let path = place.tree_path(place.id);
    if placed.get(i).is_some_and(|placed| placed.staged) {
        let staged = writer.stage.join(&path);
        return std::fs::read(&staged).with_context(|| format!("cannot read {}", staged.display()));
    }
    if let Some(bytes) = writer.tree.and_then(|tree| tree.read(&path, u64::MAX)) {
        return Ok(bytes);
    }
    documents.render_again(i).map_err(|problems| Problems::all(problems).into())
}

/// The previous file of a resource, open, and its members by key: when the member table
/// describes it and it is as the table says (see [`PreviousFile::check`]). Else `None`: the
/// file is written whole.
fn previous_members<'t>(
    writer: &Stager<'_>,
    table: &'t Table,
    old: &Entry,
    by_position: bool,
) -> Option<PreviousFile<'t>> {
    let path = format!("{}/{}", layout::BULK_KEY, old.download_url.rsplit('/').next()?);
    if !layout::is_bulk_file(&path) || !layout::is_tree_path(&path) {
        return None;
    }
    let described = table.files.get(&path)?;
    let file = writer.tree?.open_file(&path, u64::MAX).ok()?;
    let indexed = writer.index.and_then(|index| index.docs.other(std::slice::from_ref(&path)));
    PreviousFile::check(Source::File(file), described, indexed.map(|file| file.hash.0), by_position)
}

/// What writing a resource's file member by member needs.
struct Members<'a, 'w, 'd, 'o> {
    writer: &'a Stager<'w>,
    docs: &'a Docs<'d, 'o>,
    documents: &'a Documents<'a, 'o>,
    placed: &'a Placements,
}

impl Records for Members<'_, '_, '_, '_> {
    fn staged(&self, i: usize) -> bool {
        self.placed.get(i).is_some_and(|placed| placed.staged)
    }

    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        record_bytes(self.writer, self.docs, self.documents, self.placed, i)
    }

    /// The hash and size of the record document of output `i`: its staged file's size, the
    /// index's (when it is the document in place: always for one not visited), else its bytes'.
    fn hash_and_size(&self, i: usize) -> Result<(blake3::Hash, u64)> {
        let output = self.docs.outputs.get(i);
        let (place, name) = output.place(self.docs.dataset).expect("a record has a place");
        let placed = self.placed.get(i);
        if let Some(placed) = placed.filter(|placed| placed.staged) {
            let staged = self.writer.stage.join(place.tree_path(place.id));
            let meta = std::fs::metadata(&staged).with_context(|| format!("cannot read {}", staged.display()))?;
            return Ok((placed.hash, meta.len()));
        }
        let indexed = match placed {
            Some(_) => self.writer.index.and_then(|index| index.docs.keyed(&place, name)),
            None => self.writer.previous(self.docs, &Doc::Planned(output)),
        };
        match (placed, indexed) {
            (Some(placed), Some(file)) if file.hash.0 == placed.hash => Ok((placed.hash, file.stamp.size)),
            (None, Some(file)) => Ok((file.hash.0, file.stamp.size)),
            _ => {
                let bytes = self.bytes(i)?;
                Ok((placed.map_or_else(|| blake3::hash(&bytes), |placed| placed.hash), bytes.len() as u64))
            }
        }
    }
}

/// Writes the member table of this build's files beside the tree (or archive) in `out`,
/// keeping the previous files' members too (a build that fails after this leaves them in
/// place), when it changed.
fn keep_member_table(
    out: &std::path::Path,
    previous: &BTreeMap<String, Entry>,
    old: Table,
    mut new: Table,
) -> Result<()> {
    for entry in previous.values() {
        let Some(name) = entry.download_url.rsplit('/').next() else { continue };
        let path = format!("{}/{name}", layout::BULK_KEY);
        if let Some(described) = old.files.get(&path) {
            new.files.entry(path).or_insert_with(|| described.clone());
        }
    }
    if new == old {
        return Ok(());
    }
    state::ensure(out)?;
    new.write(&state::file(out, state::BULK), &state::temporary(out, state::BULK))
}
