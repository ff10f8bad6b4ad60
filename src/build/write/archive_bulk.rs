//! The bulk-data files of an archive write (docs/builds.md, "The archive writer"): made from
//! the record documents spooled, and in a partial build from the archive's for the records not
//! visited; a resource none of whose records changed keeps its file as it is. A file is written
//! member by member as the tree's writer writes it (`bulk_members.rs`): in a partial build each
//! member whose records are unchanged is copied from the previous file as the archive holds it,
//! checked, and only the members holding a changed record are compressed again, their other
//! records' lines taken from the previous file's member. The member table is kept in the state
//! folder, as the tree's is, and trusted only with the build index.

use super::bulk::{MadeFile, gather, updated_dates};
use super::bulk_members::{PreviousFile, Records, Source, write_file};
use super::handed::{Handed, Handled, from_index, receipt_of};
use super::stage::Placed;
use crate::archive::{Folder, Reader, Stream};
use crate::build::index::{DocumentFile, Index};
use crate::build::rendering::{Document, Documents, previous_document};
use crate::build::state;
use crate::bulk;
use crate::bulk::members::Table;
use crate::tree::layout;
use crate::tree::manifest::BuildSettings;
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Where an archive build writes its bulk-data files before it spools them, in the state folder.
const BULK_STAGE: &str = "archive-bulk";

/// One resource's bulk-data file: its index entry, path, what was done with it, its members.
type Made = MadeFile<Handed>;

/// The bulk-data files of an archive write: see the module's doc.
pub(super) struct Bulk<'a, 'd> {
    pub(super) stream: &'a Stream,
    pub(super) documents: &'a Documents<'a, 'd>,
    pub(super) handled: &'a Handled,
    pub(super) out: &'a Path,
    /// In a partial build: the archive in place, its index, and each list's hash now.
    pub(super) previous: Option<(&'a Reader<Folder>, &'a Index, &'a BTreeMap<String, String>)>,
}

impl Bulk<'_, '_> {
    /// Writes (or keeps) every resource's bulk-data file (in parallel, into the state folder),
    /// then spools each written; returns them with the bulk-data index, a late document. The same
    /// code as the tree's cuts the members and names the files. Writes the member table.
    pub(super) fn files(
        &self,
        settings: &BuildSettings,
        known_dates: Option<&BTreeMap<String, i64>>,
    ) -> Result<(Vec<(String, Handed)>, Document)> {
        let dataset = self.documents.dataset();
        let stage = state::folder(self.out).join(BULK_STAGE);
        let _ = crate::fsutil::remove_dir_all(&stage);
        crate::fsutil::create_dir_all(&stage)?;
        let segments: Vec<&str> = dataset.resources.keys().map(String::as_str).collect();
        let dates = updated_dates(&dataset.dir, &segments, settings, known_dates);
        let old = self.previous_entries();
        // Trusted as the index is, and only with it (`--verify` uses no index: no partial build).
        let table = match self.previous {
            Some((_, index, _)) => Table::read(&state::file(self.out, state::BULK), index.member_table.as_deref()),
            None => Table::default(),
        };
        let made: Vec<Result<Made>> = segments
            .par_iter()
            .map(|segment| {
                let updated_at = dates.get(*segment).map_or_else(|| settings.deploy_date.clone(), i64::to_string);
                // a file the member table does not describe (one an older gen wrote) is written
                // again, in members, as a fresh build writes it
                let kept = self.kept(segment, old.get(*segment), settings);
                if let Some((entry, path, file)) = kept.filter(|(_, path, _)| table.files.contains_key(path)) {
                    let handed = Handed { placed: from_index(file.hash.0), receipt: receipt_of(file.stamp.size) };
                    let members = table.files.get(&path).cloned();
                    return Ok((bulk::Entry { updated_at, ..entry }, path, handed, members));
                }
                let from = old.get(*segment).and_then(|old| self.previous_file(segment, old, &table));
                self.write_one(segment, &stage, settings, updated_at, from.as_ref())
            })
            .collect();
        let _ = crate::fsutil::remove_dir_all(&stage);
        let index = self.previous.map(|(_, index, _)| index);
        gather(self.out, made, (&old, table), index, settings.pretty)
    }

    /// The previous bulk-data index's entries by resource (a partial build's), read from the
    /// archive and checked against the index's hash.
    fn previous_entries(&self) -> BTreeMap<String, bulk::Entry> {
        let Some((reader, index, _)) = self.previous else { return BTreeMap::new() };
        let Some(found) = reader.get(layout::BULK_INDEX_PATH).ok().flatten() else { return BTreeMap::new() };
        let indexed = index.docs.other(&[layout::BULK_INDEX_PATH.to_string()]);
        if indexed.is_none_or(|file| file.hash.0 != blake3::hash(&found.bytes)) {
            return BTreeMap::new();
        }
        let entries = bulk::read_index(&found.bytes).unwrap_or_default();
        entries.into_iter().map(|entry| (entry.resource.clone(), entry)).collect()
    }

    /// The file of `segment` kept as the archive holds it: in a partial build, when its list is
    /// the previous build's and none of its records was written anew.
    fn kept(
        &self,
        segment: &str,
        old: Option<&bulk::Entry>,
        settings: &BuildSettings,
    ) -> Option<(bulk::Entry, String, DocumentFile)> {
        let (_, index, lists) = self.previous?;
        let plan = self.documents.plan();
        let written = |i: &usize| self.handled.get(*i).is_some_and(|handed| !handed.placed.from_index);
        if index.lists.get(segment) != lists.get(segment) || plan.record_positions(segment).iter().any(written) {
            return None;
        }
        let old = old?;
        let path = old.download_url.strip_prefix(&format!("{}/", settings.base_url))?;
        let file = index.docs.other(&[path.to_string()])?;
        Some((old.clone(), path.to_string(), file))
    }

    /// The previous file of `segment` (its entry `old`) as the archive holds it, read, with its
    /// members by key: when the member table describes it, the build index lists it, and it is
    /// as both say (see [`PreviousFile::check`]). Else `None`: the file is written whole.
    fn previous_file<'t>(&self, segment: &str, old: &bulk::Entry, table: &'t Table) -> Option<PreviousFile<'t>> {
        let (reader, index, lists) = self.previous?;
        let path = format!("{}/{}", layout::BULK_KEY, old.download_url.rsplit('/').next()?);
        if !layout::is_bulk_file(&path) || !layout::is_tree_path(&path) {
            return None;
        }
        let described = table.files.get(&path)?;
        let indexed = index.docs.other(std::slice::from_ref(&path))?;
        // one gzip member at level 0 around the file's bytes: decompressed at copying speed, and
        // checked against the hash its directory entry holds
        let found = reader.get(&path).ok()??;
        let by_position = index.lists.get(segment) == lists.get(segment);
        let source = Source::Bytes(found.bytes, blake3::Hash::from_bytes(found.entry.hash));
        PreviousFile::check(source, described, Some(indexed.hash.0), by_position)
    }

    /// Writes the bulk-data file of `segment` into `stage` member by member (copying from
    /// `from`, the previous file, what it can), then spools it (unless a partial build's index
    /// has the same bytes).
    fn write_one(
        &self,
        segment: &str,
        stage: &Path,
        settings: &BuildSettings,
        updated_at: String,
        from: Option<&PreviousFile<'_>>,
    ) -> Result<Made> {
        let positions = self.documents.plan().record_positions(segment);
        let (written, members) = write_file(stage, segment, settings.pretty, &positions, from, self)?;
        let file = stage.join(&written.path);
        let previous = self.previous.and_then(|(_, index, _)| index.docs.other(std::slice::from_ref(&written.path)));
        let handed = match previous.filter(|previous| previous.hash.0 == written.blake3) {
            Some(previous) => Handed { placed: from_index(previous.hash.0), receipt: receipt_of(written.size) },
            None => {
                let receipt = self.stream.put_file(vec![written.path.clone()], &file)?;
                Handed { placed: Placed { hash: written.blake3, staged: true, written: 1, from_index: false }, receipt }
            }
        };
        std::fs::remove_file(&file).with_context(|| format!("cannot remove {}", file.display()))?;
        Ok((written.entry(segment, &settings.base_url, &updated_at), written.path, handed, Some(members)))
    }

    /// The archive key of the record document of output `i`.
    fn key(&self, i: usize) -> String {
        self.documents.plan().get(i).paths(self.documents.dataset()).swap_remove(0)
    }
}

impl Records for Bulk<'_, '_> {
    /// Its receipt's, when it was handed over; else (not visited by a partial build) the
    /// index's, or the archive's entry's.
    fn hash_and_size(&self, i: usize) -> Result<(blake3::Hash, u64)> {
        if let Some(handed) = self.handled.get(i) {
            return Ok((handed.placed.hash, handed.receipt.size));
        }
        let (reader, index, _) = self.previous.context("a record not visited outside a partial build")?;
        let output = self.documents.plan().get(i);
        if let Some(file) = previous_document(index, self.documents.dataset(), &output) {
            return Ok((file.hash.0, file.stamp.size));
        }
        let key = self.key(i);
        let entry = reader.entry(&key)?.with_context(|| format!("the archive lacks {key}"))?;
        Ok((blake3::Hash::from_bytes(entry.hash), entry.size))
    }

    fn staged(&self, i: usize) -> bool {
        self.handled.get(i).is_some_and(|handed| handed.placed.staged)
    }

    /// From the spool when it was put, else from the archive.
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        if let Some(handed) = self.handled.get(i).filter(|handed| handed.placed.staged) {
            return Ok(self.stream.read(handed.receipt)?);
        }
        let key = self.key(i);
        let reader = self.previous.map(|(reader, _, _)| reader);
        let reader = reader.context("a record document not spooled outside a partial build")?;
        let found = reader.get(&key)?;
        Ok(found
            .with_context(|| format!("the archive lacks {key}; `gen build --archive --verify` writes it afresh"))?
            .bytes)
    }
}
