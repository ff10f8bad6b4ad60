//! The commit into an existing tree: which files are gone, the staged files renamed over their
//! paths (journal first), the gone ones removed, the manifest last; then the stamps the commit
//! left, for the index.

use super::docs::Docs;
use super::journal::journal_path;
use super::stage::{Placed, previous_file};
use super::{Previous, WriteReport, Written};
use crate::build::index::{DocumentFile, DocumentFiles, gz_path};
use crate::fsutil;
use crate::tree::dir::TreeDir;
use crate::tree::manifest::MANIFEST_FILE;
use anyhow::{Context, Result};
use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;

/// The files of the previous tree that the new one no longer has, sorted: only files the
/// previous index, manifest or journal lists are ever removed.
pub(super) fn gone_paths(previous: &Previous<'_>, docs: &Docs<'_, '_>) -> Vec<String> {
    let had_files = previous.index.is_some_and(|index| !index.docs.is_empty()) || !previous.listed.is_empty();
    if !had_files {
        return Vec::new(); // a first build: nothing can be gone
    }
    let others: HashSet<&str> = docs
        .outputs
        .listed()
        .flat_map(|o| o.listed.iter())
        .chain(docs.late.iter().flatten())
        .map(String::as_str)
        .collect();
    let names = OnceLock::new();
    let mut gone: Vec<String> = Vec::new();
    if let Some(index) = previous.index {
        for (place, name, _) in index.docs.each_keyed() {
            // Still planned under the same paths: nothing of it is gone.
            let same = docs.dataset.resources.get(place.segment).and_then(|r| Some((r, r.get(place.id)?))).is_some_and(
                |(resource, record)| {
                    resource.path_name(record) == name
                        && place.kind.is_none_or(|kind| record.subdocs.iter().any(|s| s.name == kind))
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
/// report. `manifest_bytes`: the size of the manifest written.
pub(super) fn stamps_after_commit(
    committed: &TreeDir,
    previous: &Previous<'_>,
    docs: &Docs<'_, '_>,
    placed: &[Placed],
    gzip: bool,
    manifest_bytes: u64,
) -> Result<Written> {
    let mut report = WriteReport { files: 1, bytes: manifest_bytes, written: 1, manifest_patched: None };
    let mut index = DocumentFiles::default();
    index.reserve(placed.len());
    for (doc, output) in docs.all().zip(placed) {
        report.written += output.written as usize;
        let kept = previous.index.filter(|_| output.from_index).and_then(|index| previous_file(index, docs, &doc));
        let (paths_count, place) = match docs.place(&doc) {
            Some((place, name)) => (1 + usize::from(name.is_some()), Some((place, name))),
            None => (docs.paths(&doc).len(), None),
        };
        let file = match kept {
            Some(kept) => kept,
            None => {
                let first = match place {
                    Some((place, _)) => place.tree_path(place.id),
                    None => docs.paths(&doc).swap_remove(0),
                };
                let shown = || format!("cannot read {}", committed.path().join(&first).display());
                let stamp = committed.stamp(&first).with_context(shown)?;
                let gz = if gzip { committed.stamp(&format!("{first}.gz")) } else { None };
                DocumentFile { hash: crate::build::index::Hash(output.hash), stamp, gz }
            }
        };
        report.files += paths_count * (1 + usize::from(file.gz.is_some()));
        report.bytes += paths_count as u64 * (file.stamp.size + file.gz.map_or(0, |gz| gz.size));
        match place {
            Some((place, name)) => index.push_keyed(&place, name, file),
            None => index.push_other(docs.paths(&doc), file),
        }
    }
    index.finish();
    Ok(Written { report, docs: index })
}

/// Moves the staged files over their paths in `tree`, removes the files gone from the tree,
/// and puts the manifest in place last. The paths touched are first written to a journal
/// beside the tree, so that the next build knows them as ours if this one is killed. No link
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
    let temporary = fsutil::beside(tree.path(), "gen-journal.tmp");
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
