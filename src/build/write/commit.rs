//! The commit into an existing tree: which files are gone, the staged files renamed over their
//! paths (journal first), the gone ones removed, the manifest last; then the stamps the commit
//! left, for the index.

use super::docs::Doc;
use super::docs::{Docs, Others};
use super::journal::journal_path;
use super::stage::{Placed, Placements, previous_file};
use super::{NewDocs, Previous, WriteReport, Written};
use crate::build::index::{DocChanges, DocumentFile, DocumentFiles, OtherDoc, gz_path};
use crate::build::state;
use crate::data::recorded::{Hash, Place};
use crate::fsutil;
use crate::tree::dir::TreeDir;
use crate::tree::manifest::MANIFEST_FILE;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::OnceLock;

/// The files of the previous tree that the new one no longer has, sorted: only files the
/// previous index, manifest or journal lists are ever removed. After a partial write (every
/// record and name of the previous tree is kept, see [`crate::build::rendering::Documents`]) only the
/// records visited (one may have lost a shared name's paths) and the documents that are not
/// records' are looked at.
pub(super) fn gone_paths(previous: &Previous<'_>, docs: &Docs<'_, '_>, placed: &Placements) -> Vec<String> {
    let had_files = previous.index.is_some_and(|index| !index.docs.is_empty()) || !previous.listed.is_empty();
    if !had_files {
        return Vec::new(); // a first build: nothing can be gone
    }
    let others: Others<'_> = docs
        .outputs
        .listed()
        .flat_map(|o| o.listed.iter())
        .chain(docs.late.iter().flatten())
        .map(String::as_str)
        .collect();
    let names = OnceLock::new();
    let mut gone: Vec<String> = Vec::new();
    if let Some(index) = previous.index {
        let visited = placed.visited().filter_map(|(i, _)| docs.place(&docs.doc(i)));
        let keyed: Box<dyn Iterator<Item = (Place<'_>, Option<&str>)>> = match placed.whole() {
            true => Box::new(index.docs.each_keyed().map(|(place, name, _)| (place, name))),
            false => Box::new(visited.filter_map(|(place, _)| Some((place, index.docs.name_of(&place)?)))),
        };
        for (place, name) in keyed {
            // Still planned under the same paths: nothing of it is gone.
            let same = docs.dataset.resources.get(place.segment).and_then(|r| Some((r, r.get(place.id)?))).is_some_and(
                |(resource, record)| {
                    resource.path_name(record) == name
                        && place.kind.is_none_or(|kind| record.subdocs.iter().any(|s| *s.name == *kind))
                },
            );
            if !same {
                let paths = std::iter::once(place.tree_path(place.id)).chain(name.map(|n| place.tree_path(n)));
                gone.extend(paths.filter(|path| !docs.planned(path, &others, &names)));
            }
        }
        let other_paths = index.docs.others().iter().flat_map(|doc| doc.paths.iter());
        gone.extend(other_paths.filter(|path| !docs.planned(path, &others, &names)).cloned());
    }
    gone.extend(previous.listed.iter().filter(|path| !docs.planned(path, &others, &names)).cloned());
    gone.sort_unstable();
    gone.dedup();
    gone
}

/// Every document of the committed tree with its hash and stamp, for the index (stamps as the
/// commit left them: renames and new links change a file's change time), and the write's
/// report. `manifest_bytes`: the size of the manifest written. After a partial write, the
/// changes to the previous build's table: the records visited and not kept, and every document
/// that is not a record's.
pub(super) fn stamps_after_commit<'o>(
    committed: &TreeDir,
    previous: &Previous<'_>,
    docs: &Docs<'_, 'o>,
    placed: &Placements,
    gzip: bool,
    manifest_bytes: u64,
) -> Result<Written<'o>> {
    let mut report = WriteReport { files: 1, bytes: manifest_bytes, written: 1, manifest_patched: None };
    report.written += placed.visited().map(|(_, placed)| placed.written as usize).sum::<usize>();
    // The file of a document placed at `placed` (unvisited: as the index has it).
    let file_of = |doc: &Doc<'_, 'o>, placed: Option<&Placed>| -> Result<DocumentFile> {
        let kept = previous.index.filter(|_| placed.is_none_or(|p| p.from_index));
        if let Some(kept) = kept.and_then(|index| previous_file(index, docs, doc)) {
            return Ok(kept);
        }
        let placed = placed.context("a document not visited is missing from the build index")?;
        let first = match docs.place(doc) {
            Some((place, _)) => place.tree_path(place.id),
            None => docs.paths(doc).swap_remove(0),
        };
        let shown = || format!("cannot read {}", committed.path().join(&first).display());
        let stamp = committed.stamp(&first).with_context(shown)?;
        let gz = if gzip { committed.stamp(&format!("{first}.gz")) } else { None };
        Ok(DocumentFile { hash: Hash(placed.hash), stamp, gz })
    };
    if !placed.whole() {
        let mut changes = DocChanges::default();
        for (i, placed) in placed.visited().filter(|(_, placed)| !placed.from_index) {
            let doc = docs.doc(i);
            if let Some((place, name)) = docs.place(&doc) {
                changes.keyed.push((place, name, file_of(&doc, Some(placed))?));
            }
        }
        let listed = docs.outputs.listed_positions().map(|(i, _)| i).chain(docs.outputs.len()..docs.count());
        for i in listed {
            let doc = docs.doc(i);
            changes.others.push(OtherDoc { paths: docs.paths(&doc), file: file_of(&doc, placed.get(i))? });
        }
        return Ok(Written { report, docs: NewDocs::Changes(changes) });
    }
    let mut index = DocumentFiles::default();
    index.reserve(docs.count());
    for (i, doc) in docs.all().enumerate() {
        let file = file_of(&doc, placed.get(i))?;
        match docs.place(&doc) {
            Some((place, name)) => index.push_keyed(&place, name, file),
            None => index.push_other(docs.paths(&doc), file),
        }
    }
    index.finish();
    Ok(Written { report, docs: NewDocs::Whole(index) })
}

/// Moves the staged files over their paths in `tree`, removes the files gone from the tree,
/// and puts the manifest in place last. The paths touched are first written to a journal
/// in the state folder beside the tree, so that the next build knows them as ours if this one is killed. No link
/// inside the tree is followed (see [`TreeDir`]).
pub(super) fn commit_in_place<I: Iterator<Item = String>>(
    tree: &TreeDir,
    stage: &Path,
    staged: &dyn Fn() -> I,
    gone: &[String],
    stale_gz: &[String],
    gzip: bool,
) -> Result<()> {
    let mut text = String::new();
    for path in staged().chain(gone.iter().cloned()) {
        text.push_str(&path);
        text.push('\n');
    }
    // Written whole, then renamed into place: a build killed while writing it leaves no
    // journal with a cut line, only a leftover the next journal replaces.
    let journal = journal_path(tree.path());
    let temporary = state::temporary(tree.path(), state::JOURNAL);
    state::ensure(tree.path())?;
    fsutil::write_new(&temporary, text.as_bytes())?;
    std::fs::rename(&temporary, &journal).with_context(|| format!("cannot write {}", journal.display()))?;
    for path in staged() {
        let from = stage.join(&path);
        tree.rename_into(&from, &path)?;
        // a bulk-data file is gzip already: it has no `.gz` sibling
        if gzip && !crate::tree::layout::is_bulk_file(&path) {
            tree.rename_into(&gz_path(&from), &format!("{path}.gz"))?;
        }
    }
    for path in stale_gz {
        tree.remove(&format!("{path}.gz"), false)?;
    }
    for path in gone {
        tree.remove(&format!("{path}.gz"), false)?;
        // Folders left empty go too; a folder holding anything else (a user's file) stays.
        tree.remove(path, true)?;
    }
    tree.rename_into(&stage.join(MANIFEST_FILE), MANIFEST_FILE)
}
