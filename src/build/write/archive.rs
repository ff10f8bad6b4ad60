//! The archive writer (`gen build --archive`, docs/builds.md "The archive writer"): the second
//! [`Output`] beside the tree's. It takes the render step's stream as the tree writer does, and
//! writes the archive of the tree the same data and options give (docs/archive.md, "A built API
//! as an archive"): every document under the tree's paths, the bulk-data files and their index,
//! and `manifest.json` with no files listed. Each body is compressed by the worker that renders
//! it and spooled beside the archive (in the build's state folder): memory holds keys and places.
//!
//! Into a folder without an archive (or with `--verify`) it writes a fresh one; over an archive
//! it writes only the change (`archive::edit`'s rules): the documents whose bytes differ, the
//! keys gone, and a new root last (the commit point), or nothing at all when nothing differs.
//!
//! A partial build (docs/builds.md, "The archive writer") hands over only the documents it
//! visits: those whose hash differs from the build index's are put, the paths gone (found as
//! the tree writer finds them) removed, and everything else is left in the archive as it is.
//! The index records every document's hash (and its size as its stamp's) for the next build.

use super::commit::gone_paths;
use super::docs::Docs;
use super::stage::{Placed, Placements};
use super::{NewDocs, Output, Previous, WriteReport, Written};
use crate::archive::{self, Folder, MANIFEST_KEY, Reader, Receipt, Stream};
use crate::build::index::{DocChanges, DocumentFile, DocumentFiles, Index, OtherDoc};
use crate::build::rendering::{Document, Documents, Visited};
use crate::build::state;
use crate::bulk;
use crate::data::recorded::Hash;
use crate::fsutil::Stamp;
use crate::staging::FolderLock;
use crate::tree::layout;
use crate::tree::manifest::{BuildSettings, Manifest};
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The spool of an archive build, in the state folder beside the archive.
const SPOOL: &str = "archive.spool";
/// Where an archive build writes its bulk-data files before it spools them, in the state folder.
const BULK_STAGE: &str = "archive-bulk";

/// The archive writer: see the module's doc.
pub(crate) struct ArchiveWriter<'a> {
    /// The output folder, locked for this build.
    pub(crate) target: &'a mut FolderLock,
    /// The archive's `manifest.json`: the tree's settings and resources, no files listed.
    pub(crate) manifest: Manifest,
    /// Each list's hash (as the build index records them): a bulk-data file is kept only when
    /// its list's is the previous build's.
    pub(crate) lists: &'a BTreeMap<String, String>,
    /// The bulk-data files' dates by resource, when the build asked git for them.
    pub(crate) bulk_dates: Option<&'a BTreeMap<String, i64>>,
    /// The previous build's index, when the archive in place is the one it describes.
    pub(crate) index: Option<&'a Index>,
    /// Write a fresh archive even over one in place (`--verify`: nothing of it is trusted).
    pub(crate) fresh: bool,
}

/// What the writer did with each document handed over: placed (its hash; put or taken from the
/// index unchanged), and the receipt of its bytes (its size; its place in the spool when put).
#[derive(Clone, Copy, Default)]
struct Handed {
    placed: Placed,
    receipt: Receipt,
}

/// The documents of one archive write with what was done with each, by position (see
/// [`Docs`]): every one, or in a partial build those visited and the late ones.
struct Handled {
    each: Vec<Handed>,
    at: Option<Vec<usize>>,
}

impl Handled {
    fn get(&self, i: usize) -> Option<&Handed> {
        match &self.at {
            None => self.each.get(i),
            Some(at) => at.binary_search(&i).ok().map(|k| &self.each[k]),
        }
    }

    fn reserve(&mut self, more: usize) {
        self.each.reserve_exact(more);
        if let Some(at) = &mut self.at {
            at.reserve_exact(more);
        }
    }

    fn push(&mut self, i: usize, handed: Handed) {
        if let Some(at) = &mut self.at {
            at.push(i);
        }
        self.each.push(handed);
    }

    fn placements(&self) -> Placements {
        let each = self.each.iter().map(|handed| handed.placed).collect();
        Placements::from(Visited { each, at: self.at.clone() })
    }
}

/// Puts one document into the stream, unless `partial` and the index has it with the same
/// hash (or it was kept): then the archive holds it already.
fn hand(stream: &Stream, document: Document, partial: bool) -> Result<Handed> {
    let unchanged = |previous: Option<DocumentFile>, hash: blake3::Hash, size: u64| {
        let previous = previous.filter(|previous| partial && previous.hash.0 == hash)?;
        Some(Handed { placed: from_index(previous.hash.0), receipt: receipt_of(size) })
    };
    let (paths, bytes, hash, previous) = match document {
        Document::Rendered { paths, bytes, hash, previous } => (paths, bytes, hash, previous),
        Document::Late { path, bytes, hash, previous } => (vec![path], bytes, hash, previous),
        Document::Kept { previous } => {
            return Ok(unchanged(Some(previous), previous.hash.0, previous.stamp.size)
                .expect("a partial build keeps documents"));
        }
    };
    if let Some(handed) = unchanged(previous, hash, bytes.len() as u64) {
        return Ok(handed);
    }
    let receipt = stream.put(paths, &bytes)?;
    Ok(Handed { placed: Placed { hash, staged: true, written: 1, from_index: false }, receipt })
}

fn from_index(hash: blake3::Hash) -> Placed {
    Placed { hash, staged: false, written: 0, from_index: true }
}

fn receipt_of(size: u64) -> Receipt {
    Receipt::kept(size)
}

impl Output for ArchiveWriter<'_> {
    /// Spools every document (the planned ones, the bulk-data files made from the record
    /// documents spooled, the late ones, the manifest), then writes the archive or its change.
    /// A partial build spools only the documents whose bytes differ from the index's. A failure
    /// before the root is renamed leaves the archive in place as it was.
    fn write<'d>(self, documents: &Documents<'_, 'd>) -> Result<Written<'d>> {
        let ArchiveWriter { target, manifest, lists, bulk_dates, index, fresh } = self;
        let out = target.dir.clone();
        let edit = !fresh && archive::is_archive(&out);
        let partial = documents.partial() && edit && index.is_some();
        anyhow::ensure!(edit || !documents.partial(), "a partial build writes over an archive");
        let stream = Stream::create(state::ensure(&out)?.join(SPOOL))?;
        let visited = documents.place_each(|document| hand(&stream, document, partial))?;
        let mut handled = Handled { each: visited.each, at: visited.at };
        let mut docs = Docs { dataset: documents.dataset(), outputs: documents.plan(), late: Vec::new() };
        let reader = if partial { Some(Reader::open(Folder(out.clone()))?) } else { None };
        let mut late = documents.late();
        // room for the bulk-data files, their index and the late documents, exactly: a push past
        // the capacity `place_each` collected doubles it (172 MB more at 1.8M documents)
        handled.reserve(documents.dataset().resources.len() + late.len() + 2);
        if manifest.settings.bulk {
            let previous = reader.as_ref().zip(index).map(|(reader, index)| (reader, index, lists));
            let made = Bulk { stream: &stream, documents, handled: &handled, out: &out, previous };
            let (files, bulk_index) = made.files(&manifest.settings, bulk_dates)?;
            for (path, handed) in files {
                handled.push(docs.count(), handed);
                docs.late.push(vec![path]);
            }
            late.push(bulk_index);
        }
        for document in late {
            let Document::Late { path, .. } = &document else { unreachable!("a late document") };
            docs.late.push(vec![path.clone()]);
            handled.push(docs.count() - 1, hand(&stream, document, partial)?);
        }
        let mut listing = Vec::new();
        manifest.write_sorted_listing(std::iter::empty::<(String, blake3::Hash)>(), &mut listing)?;
        let same_manifest = reader.as_ref().and_then(|reader| reader.entry(MANIFEST_KEY).ok().flatten());
        if same_manifest.is_none_or(|entry| entry.hash != *blake3::hash(&listing).as_bytes()) {
            stream.put(vec![MANIFEST_KEY.to_string()], &listing)?;
        }
        drop(reader);
        let options = archive::Options::default();
        let failed =
            || format!("cannot edit the archive in {}; `gen build --archive --verify` writes it afresh", out.display());
        let written = match (edit, partial) {
            (true, true) => {
                let previous = Previous { index, listed: Vec::new(), killed: None };
                let gone: BTreeSet<String> = gone_paths(&previous, &docs, &handled.placements()).into_iter().collect();
                stream.edit_known(&out, &options, &gone).with_context(failed)?
            }
            (true, false) => stream.edit(&out, &options).with_context(failed)?,
            (false, _) => stream.write(&out, &options)?,
        };
        target.exists = true;
        archive::prune(&out)?; // the parts neither this root nor the one it replaced names
        let (files, bytes) = archive::totals(&out)?;
        let report = WriteReport { files, bytes, written: written.files.len(), manifest_patched: None };
        Ok(Written { report, docs: table(&docs, &handled) })
    }
}

/// The documents' table for the index: every document's hash, and its size as its stamp's (an
/// archive's documents have no files). After a partial write, the changes to the previous
/// build's table, as the tree writer makes them.
fn table<'o>(docs: &Docs<'_, 'o>, handled: &Handled) -> NewDocs<'o> {
    let file = |handed: &Handed| {
        let stamp = Stamp { size: handed.receipt.size, ..Stamp::default() };
        DocumentFile { hash: Hash(handed.placed.hash), stamp, gz: None }
    };
    if handled.at.is_some() {
        let mut changes = DocChanges::default();
        let visited = handled.at.iter().flatten().zip(&handled.each);
        for (&i, handed) in visited.filter(|(_, handed)| !handed.placed.from_index) {
            if let Some((place, name)) = docs.place(&docs.doc(i)) {
                changes.keyed.push((place, name, file(handed)));
            }
        }
        let listed = docs.outputs.listed_positions().map(|(i, _)| i).chain(docs.outputs.len()..docs.count());
        for i in listed {
            let handed = handled.get(i).expect("every listed and late document is visited");
            changes.others.push(OtherDoc { paths: docs.paths(&docs.doc(i)), file: file(handed) });
        }
        return NewDocs::Changes(changes);
    }
    let mut table = DocumentFiles::default();
    table.reserve(docs.count());
    for (i, doc) in docs.all().enumerate() {
        let handed = handled.get(i).expect("a whole write visits every document");
        match docs.place(&doc) {
            Some((place, name)) => table.push_keyed(&place, name, file(handed)),
            None => table.push_other(docs.paths(&doc), file(handed)),
        }
    }
    table.finish();
    NewDocs::Whole(table)
}

/// The bulk-data files of an archive write: made from the record documents spooled, and in a
/// partial build from the archive's for the records not visited; a resource none of whose
/// records changed keeps its file as it is.
struct Bulk<'a, 'd> {
    stream: &'a Stream,
    documents: &'a Documents<'a, 'd>,
    handled: &'a Handled,
    out: &'a Path,
    /// In a partial build: the archive in place, its index, and each list's hash now.
    previous: Option<(&'a Reader<Folder>, &'a Index, &'a BTreeMap<String, String>)>,
}

impl Bulk<'_, '_> {
    /// Writes (or keeps) every resource's bulk-data file (in parallel, into the state folder),
    /// then spools each written; returns them with the bulk-data index, a late document. The same
    /// code as the tree's cuts the members and names the files.
    fn files(
        &self,
        settings: &BuildSettings,
        known_dates: Option<&BTreeMap<String, i64>>,
    ) -> Result<(Vec<(String, Handed)>, Document)> {
        let dataset = self.documents.dataset();
        let stage = state::folder(self.out).join(BULK_STAGE);
        let _ = crate::fsutil::remove_dir_all(&stage);
        crate::fsutil::create_dir_all(&stage)?;
        let segments: Vec<&str> = dataset.resources.keys().map(String::as_str).collect();
        let dates = super::bulk::updated_dates(&dataset.dir, &segments, settings, known_dates);
        let old = self.previous_entries();
        let made: Vec<Result<(bulk::Entry, String, Handed)>> = segments
            .par_iter()
            .map(|segment| {
                let updated_at = dates.get(*segment).map_or_else(|| settings.deploy_date.clone(), i64::to_string);
                if let Some((entry, path, file)) = self.kept(segment, old.get(*segment), settings) {
                    let handed = Handed { placed: from_index(file.hash.0), receipt: receipt_of(file.stamp.size) };
                    return Ok((bulk::Entry { updated_at, ..entry }, path, handed));
                }
                self.write_one(segment, &stage, settings, updated_at)
            })
            .collect();
        let _ = crate::fsutil::remove_dir_all(&stage);
        let (mut entries, mut files) = (Vec::new(), Vec::new());
        for made in made {
            let (entry, path, handed) = made?;
            entries.push(entry);
            files.push((path, handed));
        }
        let (path, bytes) = (layout::BULK_INDEX_PATH.to_string(), bulk::index_document(entries, settings.pretty));
        let previous = self.previous.and_then(|(_, index, _)| index.docs.other(std::slice::from_ref(&path)));
        Ok((files, Document::Late { hash: blake3::hash(&bytes), path, bytes, previous }))
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

    /// Writes the bulk-data file of `segment` whole into `stage`, then spools it (unless a
    /// partial build's index has the same bytes).
    fn write_one(
        &self,
        segment: &str,
        stage: &Path,
        settings: &BuildSettings,
        updated_at: String,
    ) -> Result<(bulk::Entry, String, Handed)> {
        let (dataset, plan) = (self.documents.dataset(), self.documents.plan());
        let positions = plan.record_positions(segment);
        let key = |i: usize| plan.get(i).paths(dataset).swap_remove(0);
        let from_archive = |i: usize| self.handled.get(i).is_none_or(|handed| !handed.placed.staged);
        let reader = self.previous.map(|(reader, _, _)| reader);
        let read = |i: usize| -> Result<archive::Found> {
            let key = key(i);
            let reader = reader.context("a record document not spooled outside a partial build")?;
            reader
                .get(&key)?
                .with_context(|| format!("the archive lacks {key}; `gen build --archive --verify` writes it afresh"))
        };
        let mut records: Vec<(blake3::Hash, u64)> = Vec::with_capacity(positions.len());
        for &i in &positions {
            records.push(match self.handled.get(i) {
                Some(handed) => (handed.placed.hash, handed.receipt.size),
                None => {
                    let entry = reader.context("a record not visited outside a partial build")?.entry(&key(i))?;
                    let entry = entry.with_context(|| format!("the archive lacks {}", key(i)))?;
                    (blake3::Hash::from_bytes(entry.hash), entry.size)
                }
            });
        }
        let bytes = |n: usize| match from_archive(positions[n]) {
            true => Ok(read(positions[n])?.bytes),
            false => Ok(self.stream.read(self.handled.get(positions[n]).expect("spooled").receipt)?),
        };
        let written = bulk::write_whole(stage, segment, settings.pretty, &records, bytes)?;
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
        Ok((written.entry(segment, &settings.base_url, &updated_at), written.path, handed))
    }
}
