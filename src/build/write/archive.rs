//! The archive writer (`gen build --archive`, docs/builds.md "The archive writer"): the second
//! [`Output`] beside the tree's. It takes the render step's stream as the tree writer does, and
//! writes the archive of the tree the same data and options give (docs/archive.md, "A built API
//! as an archive"): every document under the tree's paths, the bulk-data files and their index,
//! and `manifest.json` with no files listed. Each body is compressed by the worker that renders
//! it and spooled beside the archive (in the build's state folder), its record in a ledger.
//!
//! Into a folder without an archive (or with `--verify`) it writes a fresh one; over an archive
//! it writes only the change (`archive::edit`'s rules): the documents whose bytes differ, the
//! keys gone, and a new root last (the commit point), or nothing at all when nothing differs.
//!
//! A partial build (docs/builds.md, "The archive writer") hands over only the documents it
//! visits: those whose hash differs from the build index's are put, the paths gone (found as
//! the tree writer finds them) removed, and everything else is left in the archive as it is.
//! The index records every document's hash (and its size as its stamp's) for the next build.

use super::archive_bulk::Bulk;
use super::commit::gone_paths;
use super::docs::Docs;
use super::handed::{Handed, Handled, from_index, receipt_of};
use super::stage::Placed;
use super::{NewDocs, Output, Previous, WriteReport, Written};
use crate::archive::{self, Folder, MANIFEST_KEY, Reader, Stream};
use crate::build::index::{DocChanges, DocumentFile, DocumentFiles, Index, OtherDoc};
use crate::build::rendering::{Document, Documents};
use crate::build::state;
use crate::data::recorded::Hash;
use crate::fsutil::Stamp;
use crate::staging::FolderLock;
use crate::tree::manifest::Manifest;
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};

/// The spool of an archive build, in the state folder beside the archive.
const SPOOL: &str = "archive.spool";

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
        // A partial build's paths gone, found while the bulk-data files are written (a core
        // would wait for the other else), but for the late documents' (made after): those are
        // taken out of them below.
        let previous = Previous { index, listed: Vec::new(), killed: None };
        let (made, gone) = std::thread::scope(|scope| {
            let gone = partial.then(|| scope.spawn(|| gone_paths(&previous, &docs, &handled.placements())));
            let made = manifest.settings.bulk.then(|| {
                let previous = reader.as_ref().zip(index).map(|(reader, index)| (reader, index, lists));
                let made = Bulk { stream: &stream, documents, handled: &handled, out: &out, previous };
                made.files(&manifest.settings, bulk_dates)
            });
            let gone = gone.map(|gone| gone.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            (made, gone)
        });
        if let Some(made) = made {
            let (files, bulk_index) = made?;
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
        put_manifest(&stream, &manifest, reader.as_ref())?;
        drop(reader);
        let options = archive::Options::default();
        let failed =
            || format!("cannot edit the archive in {}; `gen build --archive --verify` writes it afresh", out.display());
        let late: BTreeSet<&String> = docs.late.iter().flatten().collect();
        let commit = || -> Result<WriteReport> {
            let written = match (edit, partial) {
                (true, true) => {
                    let gone = gone.into_iter().flatten().filter(|path| !late.contains(path));
                    stream.edit_known(&out, &options, &gone.collect()).with_context(failed)?
                }
                (true, false) => stream.edit(&out, &options).with_context(failed)?,
                (false, _) => stream.write(&out, &options)?,
            };
            target.exists = true;
            archive::prune(&out)?; // the parts neither this root nor the one it replaced names
            let (files, bytes) = archive::totals(&out)?;
            Ok(WriteReport { files, bytes, written: written.files.len(), manifest_patched: None })
        };
        // A partial build's changes to the documents' table are made while the archive's are
        // written (a third of a second at 1M records); a whole build's table is made after, not
        // held beside the archive's sort.
        let (report, docs) = match partial {
            true => std::thread::scope(|scope| {
                let docs = &docs;
                let made = scope.spawn(move || table(docs, handled));
                let report = commit();
                (report, made.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            }),
            false => {
                let report = commit()?;
                (Ok(report), table(&docs, handled))
            }
        };
        Ok(Written { report: report?, docs })
    }
}

/// Puts the archive's `manifest.json` (`manifest`, no files listed) into `stream`, unless the
/// archive in place (`reader`) holds the same bytes.
fn put_manifest(stream: &Stream, manifest: &Manifest, reader: Option<&Reader<Folder>>) -> Result<()> {
    let mut listing = Vec::new();
    manifest.write_sorted_listing(std::iter::empty::<(String, blake3::Hash)>(), &mut listing)?;
    let same_manifest = reader.and_then(|reader| reader.entry(MANIFEST_KEY).ok().flatten());
    if same_manifest.is_none_or(|entry| entry.hash != *blake3::hash(&listing).as_bytes()) {
        stream.put(vec![MANIFEST_KEY.to_string()], &listing)?;
    }
    Ok(())
}

/// The documents' table for the index: every document's hash, and its size as its stamp's (an
/// archive's documents have no files). After a partial write, the changes to the previous
/// build's table, as the tree writer makes them.
/// A whole write's records are read out of `handled` in order, each chunk let go of once read:
/// the table is made as they go (at 1M records, 150 MB made of 115 MB that were held beside it).
fn table<'o>(docs: &Docs<'_, 'o>, handled: Handled) -> NewDocs<'o> {
    let file = |handed: &Handed| {
        let stamp = Stamp { size: handed.receipt.size, ..Stamp::default() };
        DocumentFile { hash: Hash(handed.placed.hash), stamp, gz: None }
    };
    if handled.at.is_some() {
        let mut changes = DocChanges::default();
        let visited = handled.at.iter().flatten().zip(handled.each.iter());
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
    assert_eq!(handled.each.len(), docs.count(), "a whole write visits every document");
    let mut table = DocumentFiles::default();
    // room for the records' and sub-documents' entries: the others are listed apart
    let listed = docs.outputs.listed_positions().count() + (docs.count() - docs.outputs.len());
    table.reserve(docs.count() - listed);
    for (doc, handed) in docs.all().zip(handled.each.into_records()) {
        match docs.place(&doc) {
            Some((place, name)) => table.push_keyed(&place, name, file(&handed)),
            None => table.push_other(docs.paths(&doc), file(&handed)),
        }
    }
    table.finish();
    NewDocs::Whole(table)
}
