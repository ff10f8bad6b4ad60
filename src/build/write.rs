//! Write: the second half of the seam between rendering and writing. A writer is an
//! [`Output`]: it takes the render step's stream of documents
//! ([`crate::build::rendering::Documents`]) and stores them, then commits. The tree is one
//! ([`TreeWriter`]); another output (issue 49's archive) is another implementation beside it.
//!
//! The tree writer places the documents that changed into a staging folder beside the output
//! folder, then commits them into the tree (see docs/builds.md). A build that fails writes
//! nothing into the tree; a killed one leaves files the next build repairs, and a manifest that
//! `gen serve` checks every file against. Files whose bytes are unchanged are not written, so
//! they keep their modification time and syncs to object storage skip them.
//!
//! Its parts: [`docs`] (the documents of one write), [`stage`] (place into the staging
//! folder), [`bulk`] (the bulk-data files, made from the record documents placed),
//! [`listing`] and [`patch`] (the manifest), [`commit`] (into an existing tree) and
//! [`journal`] (what a killed commit leaves for the next build).

mod archive;
mod archive_bulk;
mod bulk;
mod bulk_members;
mod commit;
mod docs;
mod handed;
mod journal;
mod listing;
mod patch;
mod stage;

pub(crate) use archive::ArchiveWriter;
pub(crate) use journal::{Journal, journal_path, read_journal};

use commit::{commit_in_place, gone_paths, stamps_after_commit};
use docs::Docs;
use listing::write_manifest;
use stage::{Placements, Stager};

use crate::build::index::{DocChanges, DocumentFiles, Index};
use crate::build::rendering::{Document, Documents};
use crate::staging::{FolderLock, Staging};
use crate::tree::dir::TreeDir;
use crate::tree::manifest::Manifest;
use anyhow::{Context, Result};

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Files in the tree (the manifest and `.gz` siblings included).
    pub files: usize,
    /// Bytes stored in the tree: each file once, however many paths (hard links) name it.
    pub bytes: u64,
    /// Files written because their bytes are new (the others were left as they were).
    pub written: usize,
    /// When the manifest was written by patching the previous one: the entries added, changed
    /// or removed (the others were copied as they were).
    pub(crate) manifest_patched: Option<usize>,
}

impl WriteReport {
    /// This report with the files and bytes of the documents (`totals`, see
    /// [`DocumentFiles::totals`]) added to the manifest's.
    pub(crate) fn with_totals(self, (files, bytes): (usize, u64)) -> WriteReport {
        WriteReport { files: self.files + files, bytes: self.bytes + bytes, ..self }
    }
}

/// What the previous build left in the output folder, as far as this write may use it.
#[derive(Default)]
pub(crate) struct Previous<'i> {
    /// The build index, when it describes the tree's manifest.
    pub(crate) index: Option<&'i Index>,
    /// Further paths known to be ours: the previous manifest's files when there is no index,
    /// and what a killed commit's journal lists. Only these and the index's files are ever
    /// deleted.
    pub(crate) listed: Vec<String>,
    /// After a killed commit, the paths its journal lists: only these of the index's files are
    /// read to be kept (all of them when the journal lists none). Every other file is trusted
    /// to be as the index says.
    pub(crate) killed: Option<std::collections::HashSet<String>>,
}

/// What a write did, and every document of the tree with its hash and stamp, for the index.
pub struct Written<'o> {
    /// What was written, kept and removed (the files and bytes of the manifest only: those of
    /// the documents are counted from the table, see [`NewDocs::table`]).
    pub(crate) report: WriteReport,
    /// Every document of the tree with its hash and stamp, or the changes to the previous
    /// build's table.
    pub(crate) docs: NewDocs<'o>,
}

/// The new tree's table of documents, for the index.
pub(crate) enum NewDocs<'o> {
    /// Every document, as a write that visited each one found it.
    Whole(DocumentFiles),
    /// What a partial write changed in the previous build's table.
    Changes(DocChanges<'o>),
}

impl NewDocs<'_> {
    /// The table: the whole one, or `previous` (the previous build's) with the changes made.
    pub(crate) fn table(self, previous: Option<DocumentFiles>) -> DocumentFiles {
        match self {
            NewDocs::Whole(table) => table,
            NewDocs::Changes(changes) => {
                let mut table = previous.expect("a partial write changes the previous build's table");
                table.apply(changes);
                table
            }
        }
    }
}

/// A writer of a build's documents (mdBook's `Renderer` is the model, without its `name`: a
/// build writes one output, chosen by the command line): it takes the render step's stream and
/// stores every document of it where readers find them, then commits. The tree
/// ([`TreeWriter`]) is one.
///
/// The memory a write may take is bounded at this seam: the stream hands over one document
/// per worker at a time, and keeps of each only what `put` returns for it, which is `Copy`
/// (see [`Documents`]); a writer writes each body out as it comes and keeps none.
pub(crate) trait Output {
    /// Writes every document of `documents` ([`Documents::place_each`], then
    /// [`Documents::late`]), then commits. Readers see the previous build's output until the
    /// commit; a write that fails leaves it as it was. Returns what was written, and every
    /// document with its hash and where it is, for the build index.
    fn write<'d>(self, documents: &Documents<'_, 'd>) -> Result<Written<'d>>;
}

/// The tree writer: one file per document, at each of its paths (hard links of one file),
/// with a `.gz` sibling under `--gzip`, and the manifest listing every file with its hash.
/// Only the documents whose bytes changed are written: staged beside the tree, then committed
/// in place (see [`Output::write`] below, and docs/builds.md).
pub(crate) struct TreeWriter<'a> {
    /// The output folder, locked for this build.
    pub(crate) target: &'a mut FolderLock,
    /// The new tree's manifest, its files listed by the write.
    pub(crate) manifest: Manifest,
    /// Each list's hash (as the build index records them): a bulk-data file is kept only when
    /// its list's is the previous build's.
    pub(crate) lists: &'a std::collections::BTreeMap<String, String>,
    /// The bulk-data files' dates by resource, when the build asked git for them with its
    /// deploy date (a resource left out takes the deploy date); `None`: the write asks.
    pub(crate) bulk_dates: Option<&'a std::collections::BTreeMap<String, i64>>,
    /// What the previous build left, reused where its bytes are the same.
    pub(crate) previous: Previous<'a>,
}

impl Output for TreeWriter<'_> {
    /// Writes the documents into the tree, then the late ones and the bulk-data files, then
    /// the manifest, listing every file with its hash.
    ///
    /// A document kept is not looked at: it is in the tree as the index describes it. A
    /// rendered document is written only when its bytes differ from the file in place (known
    /// by the index's hash, trusted; else, without an index, by reading the file).
    /// New bytes go to a staging folder beside the tree first: on any problem nothing in the
    /// tree changes. Then the commit: into a folder that does not exist, the staging folder is
    /// renamed into place; into an existing tree, each new file is renamed over its path, files
    /// gone from the tree are removed, and the manifest is renamed into place last.
    fn write<'d>(self, documents: &Documents<'_, 'd>) -> Result<Written<'d>> {
        let TreeWriter { target, manifest, lists, bulk_dates, previous } = self;
        write_tree(target, documents, manifest, (lists, bulk_dates), &previous)
    }
}

/// The tree writer's write (see [`TreeWriter`]).
fn write_tree<'d>(
    target: &mut FolderLock,
    documents: &Documents<'_, 'd>,
    manifest: Manifest,
    bulk: (&std::collections::BTreeMap<String, String>, Option<&std::collections::BTreeMap<String, i64>>),
    previous: &Previous<'_>,
) -> Result<Written<'d>> {
    let out = target.dir.clone();
    let staging = Staging::begin_unlocked(&out).context("cannot stage the new tree beside the output folder")?;
    let stage = staging.dir.clone();
    let tree = if target.exists { Some(TreeDir::open(&out)?) } else { None };
    let writer = Stager {
        tree: tree.as_ref(),
        stage: &stage,
        index: previous.index,
        gzip: manifest.settings.gzip,
        killed: previous.killed.as_ref(),
        out: &out,
    };
    let mut docs = Docs { dataset: documents.dataset(), outputs: documents.plan(), late: Vec::new() };
    let mut placed = Placements::from(documents.place_each(|document| writer.put(document))?);
    let mut late = documents.late();
    if let Some(bulk) = bulk::stage_bulk(&writer, &docs, documents, &placed, &manifest.settings, bulk)? {
        for (path, file) in bulk.files {
            placed.push(docs.count(), file);
            docs.late.push(vec![path]);
        }
        late.push(bulk.index);
    }
    for document in late {
        let Document::Late { path, .. } = &document else { unreachable!("a late document") };
        let paths = vec![path.clone()];
        placed.push(docs.count(), writer.put(document)?);
        docs.late.push(paths);
    }
    let gone = gone_paths(previous, &docs, &placed);
    let patched = match (tree.as_ref(), previous.index) {
        (Some(tree), Some(index)) if previous.killed.is_none() && previous.listed.is_empty() => {
            match manifest_changes(&docs, &placed, &gone) {
                Some(changes) => patch::patch_manifest(&manifest, tree, index.manifest, &changes, &stage)?
                    .map(|bytes| (bytes, changes.len())),
                None => None,
            }
        }
        _ => None,
    };
    let manifest_bytes = match patched {
        Some((bytes, _)) => bytes,
        None => {
            let previous_hash = |i: usize| writer.previous(&docs, &docs.doc(i)).map(|file| file.hash.0);
            write_manifest(manifest, &stage, &docs, &placed.whole_list(docs.count(), previous_hash)?)?
        }
    };

    if target.exists {
        // Only the staged documents are looked up in the plan (not every one of a large tree).
        let staged = || placed.visited().filter(|(_, p)| p.staged).flat_map(|(i, _)| docs.paths(&docs.doc(i)));
        // Without --gzip, the .gz siblings a previous build left go too.
        let stale_gz: Vec<String> = if writer.gzip {
            Vec::new()
        } else {
            // (a tree built without them has none: its paths are not made)
            let gzipped = previous.index.filter(|index| index.docs.gzipped());
            let with_gz = gzipped.into_iter().flat_map(|i| i.docs.paths()).filter(|(_, f)| f.gz.is_some());
            with_gz.map(|(path, _)| path).chain(previous.listed.iter().cloned()).collect()
        };
        let tree = tree.as_ref().expect("an existing tree is open");
        commit_in_place(tree, &stage, &staged, &gone, &stale_gz, writer.gzip)?;
    } else {
        target.hold(&stage)?;
        staging.commit()?;
        target.exists = true;
    }
    let mut written =
        stamps_after_commit(&TreeDir::open(&out)?, previous, &docs, &placed, writer.gzip, manifest_bytes)?;
    written.report.manifest_patched = patched.map(|(_, changes)| changes);
    Ok(written)
}

/// The entries of the manifest that differ from the previous build's, sorted by path: the
/// paths of every document not taken unchanged from the index (with its hash), and the paths
/// gone (without). A document taken from the index has the same paths and hash as before.
/// `None` when more than half the documents changed: the manifest is then written whole,
/// without holding every changed path at once.
fn manifest_changes(docs: &Docs<'_, '_>, placed: &Placements, gone: &[String]) -> Option<Vec<patch::Change>> {
    if placed.visited().filter(|(_, placed)| !placed.from_index).count() + gone.len() > docs.count() / 2 {
        return None;
    }
    let changed = placed.visited().filter(|(_, placed)| !placed.from_index);
    let paths = |(i, placed): (usize, &stage::Placed)| {
        let hash = placed.hash;
        docs.paths(&docs.doc(i)).into_iter().map(move |path| (path, Some(hash)))
    };
    let mut changes: Vec<patch::Change> = changed.flat_map(paths).collect();
    changes.extend(gone.iter().map(|path| (path.clone(), None)));
    changes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Some(changes)
}
