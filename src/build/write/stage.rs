//! Staging: places each document of the render step's stream: kept in the tree when its bytes
//! are already there, else written (with its hard links and `.gz`) into the staging folder
//! beside the tree. Nothing in the tree changes here.

use super::docs::{Doc, Docs};
use crate::build::index::{DocumentFile, Index, gz_path};
use crate::build::rendering::{Document, Visited, previous_document};
use crate::fsutil::{self, gzip_bytes};
use crate::tree::dir::TreeDir;
use anyhow::{Context, Result};
use std::borrow::Cow;
use std::path::Path;

/// Where the documents of a write were placed: every one, or in a partial build only those
/// visited (the others are the previous tree's, unchanged, as the index has them).
pub(super) struct Placements {
    placed: Vec<Placed>,
    /// The position of each of `placed`, sorted, when not every document was visited.
    at: Option<Vec<usize>>,
}

impl From<Visited<Placed>> for Placements {
    /// The placements in one vector, each chunk of the stream's let go of once copied.
    fn from(visited: Visited<Placed>) -> Placements {
        let mut placed = Vec::with_capacity(visited.each.len());
        placed.extend(visited.each.into_records());
        Placements { placed, at: visited.at }
    }
}

impl Placements {
    /// The placement of document `i`; `None` when it was not visited (it is as the index has it).
    pub(super) fn get(&self, i: usize) -> Option<&Placed> {
        match &self.at {
            None => self.placed.get(i),
            Some(at) => at.binary_search(&i).ok().map(|k| &self.placed[k]),
        }
    }

    /// The documents visited, with their positions, in order.
    pub(super) fn visited(&self) -> impl Iterator<Item = (usize, &Placed)> + '_ {
        self.placed.iter().enumerate().map(|(k, placed)| (self.at.as_ref().map_or(k, |at| at[k]), placed))
    }

    /// True when every document was visited.
    pub(super) fn whole(&self) -> bool {
        self.at.is_none()
    }

    /// Adds the placement of the next document (after every planned one): `count` documents
    /// come before it.
    pub(super) fn push(&mut self, count: usize, placed: Placed) {
        if let Some(at) = &mut self.at {
            at.push(count);
        }
        // A few late documents follow every planned one: room for them, not for as many again
        // (a doubled vector of a million placements is 40 MB held to the end of the build).
        if self.placed.len() == self.placed.capacity() {
            self.placed.reserve_exact(64);
        }
        self.placed.push(placed);
    }

    /// Every document's placement, those not visited taken from the index by `previous` (for
    /// a manifest written whole after a partial build).
    pub(super) fn whole_list(
        &self,
        count: usize,
        previous: impl Fn(usize) -> Option<blake3::Hash>,
    ) -> Result<Cow<'_, [Placed]>> {
        let Some(at) = &self.at else { return Ok(Cow::Borrowed(&self.placed)) };
        let mut visited = at.iter().zip(&self.placed).peekable();
        let mut whole = Vec::with_capacity(count);
        for i in 0..count {
            match visited.next_if(|(at, _)| **at == i) {
                Some((_, placed)) => whole.push(*placed),
                None => {
                    let hash = previous(i).context("a document not visited is missing from the build index")?;
                    whole.push(Placed { hash, staged: false, written: 0, from_index: true });
                }
            }
        }
        Ok(Cow::Owned(whole))
    }
}

/// The previous tree's file of `doc`, as `index` describes it, when it is published at the
/// same paths (its stamps are checked before a build trusts the index).
pub(super) fn previous_file<'o>(index: &Index, docs: &Docs<'_, 'o>, doc: &Doc<'_, 'o>) -> Option<DocumentFile> {
    match doc {
        Doc::Planned(output) => previous_document(index, docs.dataset, output),
        Doc::Late(paths) => index.docs.other(paths),
    }
}

/// Places documents: taken from the previous tree when unchanged, staged otherwise.
pub(super) struct Stager<'w> {
    /// The tree in place, when there is one.
    pub(super) tree: Option<&'w TreeDir>,
    pub(super) stage: &'w Path,
    pub(super) index: Option<&'w Index>,
    pub(super) gzip: bool,
    /// The paths a killed commit's journal lists (see [`super::Previous::killed`]).
    pub(super) killed: Option<&'w std::collections::HashSet<String>>,
    /// The output folder (the bulk-data member table is kept beside it).
    pub(super) out: &'w Path,
}

/// One document, placed at all its paths. (The default: one that was not placed, as the build
/// fails.)
#[derive(Clone, Copy)]
pub(super) struct Placed {
    pub(super) hash: blake3::Hash,
    /// True when its new bytes are in the staging folder.
    pub(super) staged: bool,
    /// Files written anew, at each path (with `.gz` siblings): a document's paths share one
    /// file's bytes through hard links, as in every build.
    pub(super) written: u32,
    /// True when it was taken from the index unchanged: its stamps are the index's.
    pub(super) from_index: bool,
}

impl Default for Placed {
    fn default() -> Placed {
        Placed { hash: blake3::Hash::from_bytes([0; 32]), staged: false, written: 0, from_index: false }
    }
}

impl Stager<'_> {
    /// Places one document of the stream: a kept one is in the tree already, as the index
    /// says; the others are placed by [`Stager::place`].
    pub(super) fn put(&self, document: Document) -> Result<Placed> {
        match document {
            Document::Kept { previous, .. } => {
                Ok(Placed { hash: previous.hash.0, staged: false, written: 0, from_index: true })
            }
            Document::Rendered { paths, bytes, hash, previous, .. } => self.place(&paths, previous, &bytes, hash),
            Document::Late { path, bytes, hash, previous } => {
                self.place(std::slice::from_ref(&path), previous, &bytes, hash)
            }
        }
    }

    /// The previous tree's file of `doc` (see [`previous_file`]).
    pub(super) fn previous<'o>(&self, docs: &Docs<'_, 'o>, doc: &Doc<'_, 'o>) -> Option<DocumentFile> {
        previous_file(self.index?, docs, doc)
    }

    /// Places `bytes` (which hash to `hash`) at every path in `paths`: kept in place when every path already holds
    /// them as one file (by `previous`, the index's hash, trusted without looking at the file
    /// unless a killed commit touched it; else by reading the files), staged otherwise (the
    /// first path written, the others hard links to it). A document's paths are always links
    /// of one file, so one stamp stands for all of them.
    fn place(
        &self,
        paths: &[String],
        previous: Option<DocumentFile>,
        bytes: &[u8],
        hash: blake3::Hash,
    ) -> Result<Placed> {
        let in_place = match (self.tree, self.index, previous) {
            (None, ..) => false,
            (Some(tree), Some(index), Some(file)) => {
                let touched = |path: &String| self.killed.is_some_and(|paths| paths.is_empty() || paths.contains(path));
                let trusted = |path: &String| file.gz.is_some() == self.gzip && !touched(path);
                let kept = |path: &String| trusted(path) || index.check_file(tree, path, &file, self.gzip).is_some();
                if file.hash.0 == hash && paths.iter().all(kept) {
                    return Ok(Placed { hash, staged: false, written: 0, from_index: true });
                }
                false
            }
            (Some(tree), ..) => same_file(tree, paths, bytes) && (!self.gzip || same_gz(tree, paths, bytes)),
        };
        if in_place {
            return Ok(Placed { hash, staged: false, written: 0, from_index: false });
        }
        let mut written = 0;
        let first = self.stage.join(&paths[0]);
        for (i, path) in paths.iter().enumerate() {
            let target = self.stage.join(path);
            if let Some(dir) = target.parent() {
                fsutil::create_dir_all(dir)?;
            }
            written += 1 + u32::from(self.gzip);
            if i == 0 {
                fsutil::write(&target, bytes)?;
            } else {
                std::fs::hard_link(&first, &target)
                    .with_context(|| format!("cannot link {} to {}", target.display(), first.display()))?;
            }
            if self.gzip {
                if i == 0 {
                    fsutil::write(&gz_path(&target), &gzip_bytes(bytes, flate2::Compression::best()))?;
                } else {
                    let (from, to) = (gz_path(&first), gz_path(&target));
                    std::fs::hard_link(&from, &to)
                        .with_context(|| format!("cannot link {} to {}", to.display(), from.display()))?;
                }
            }
        }
        Ok(Placed { hash, staged: true, written, from_index: false })
    }
}

/// True when every path of `paths` in `tree` is one file (one inode) holding `bytes`, read.
fn same_file(tree: &TreeDir, paths: &[String], bytes: &[u8]) -> bool {
    let first = tree.stamp(&paths[0]);
    first.is_some_and(|stamp| stamp.size == bytes.len() as u64)
        && paths.iter().all(|path| tree.stamp(path).map(|s| s.ino) == first.map(|s| s.ino))
        && tree.read(&paths[0], bytes.len() as u64).is_some_and(|old| old == bytes)
}

/// True when the `.gz` siblings of `paths` in `tree` are one file holding `bytes` compressed as
/// a build compresses them, read.
fn same_gz(tree: &TreeDir, paths: &[String], bytes: &[u8]) -> bool {
    let gz_paths: Vec<String> = paths.iter().map(|path| format!("{path}.gz")).collect();
    let Some(size) = tree.stamp(&gz_paths[0]).map(|s| s.size) else { return false };
    let packed = gzip_bytes(bytes, flate2::Compression::best());
    size == packed.len() as u64 && same_file(tree, &gz_paths, &packed)
}
