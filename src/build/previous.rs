//! What the previous build left in `out/`, opened and locked for this one ([`PreviousBuild`]):
//! its index, a killed commit's journal, its tree. A tree that has no build index (or whose
//! index is not trusted): the files its manifest lists are what a build may replace or remove,
//! and a folder that is not a tree gen built is refused.

use super::{BuildOptions, Folders, index, state, up_to_date, write};
use crate::archive::{Folder, Reader};
use crate::data::recorded::DataFiles;
use crate::data::{listing, watched};
use crate::tree::layout;
use crate::tree::manifest::{self, BuildSettings, Manifest};
use anyhow::{Context, Result};
use std::path::Path;

/// What the previous build left in the output folder, opened (and locked) for this one.
pub(super) struct PreviousBuild {
    /// The output folder, locked against other builds until this one ends.
    pub(super) target: crate::staging::FolderLock,
    /// A killed commit's journal.
    pub(super) journal: write::Journal,
    /// The build index, when it describes the tree in place.
    pub(super) index: Option<index::Index>,
    /// Paths known to be ours besides the index's: the journal's, and the manifest's when
    /// there is no index.
    pub(super) listed: Vec<String>,
    /// The output in place (the tree, opened without following links inside it; or the
    /// archive), which a partial build reads previous documents from.
    pub(super) tree: Option<PreviousOutput>,
    /// The index's documents' table, until it is read ([`PreviousBuild::read_docs`]).
    pub(super) docs: Option<index::DeferredDocs>,
}

impl PreviousBuild {
    /// Locks `out` (waiting for another build) and reads what the previous build left there:
    /// its index only when `use_index` (else the build reads every file, as without one). An
    /// output of the other kind (a tree for an `archive` build, an archive for a tree build) is
    /// refused, and nothing of it touched.
    pub(super) fn open(out: &Path, use_index: bool, archive: bool) -> Result<PreviousBuild> {
        let target = crate::staging::FolderLock::open(out)?;
        state::migrate(&target.dir);
        if !target.exists {
            return Ok(PreviousBuild {
                target,
                journal: Default::default(),
                index: None,
                listed: Vec::new(),
                tree: None,
                docs: None,
            });
        }
        let dir = target.dir.clone();
        refuse_other_kind(&dir, archive)?;
        let journal = write::read_journal(&dir);
        let (index, docs) = match use_index.then(|| index::Index::read_deferred(&dir)).flatten() {
            Some((index, docs)) => (Some(index), Some(docs)),
            None => (None, None),
        };
        let mut listed = journal.paths.clone();
        if index.is_none() && !archive {
            listed.extend(previous_files(&dir, !journal.paths.is_empty())?);
        }
        let tree = match archive {
            // an archive stopped before its first root has no documents: every one is rendered
            true => Reader::open(Folder(dir.clone())).ok().map(|reader| PreviousOutput::Archive(Box::new(reader))),
            false => Some(PreviousOutput::Tree(crate::tree::dir::TreeDir::open(&dir)?)),
        };
        Ok(PreviousBuild { target, journal, index, listed, tree, docs })
    }

    /// Reads the index's documents' table (left unread by [`PreviousBuild::open`], so that the
    /// load does not hold it). One that cannot be used is noted, and the build goes on without
    /// the index: every document is rendered, and the previous manifest says what is ours.
    pub(super) fn read_docs(&mut self) -> Result<()> {
        let read = self.docs.take().map(|docs| docs.read());
        self.take_docs(read)
    }

    /// Runs `meanwhile` while the index's documents' table is read on a thread of its own,
    /// and keeps the table when `keep` says so of what `meanwhile` gave. Otherwise the table is
    /// let go (its memory given back: its thread's allocator would keep it), and
    /// [`PreviousBuild::read_docs`] reads it again later: an edit's extract that must read rows
    /// after all reads them first, so that the table is never held beside them.
    pub(super) fn read_docs_meanwhile<T>(
        &mut self,
        meanwhile: impl FnOnce() -> T,
        keep: impl FnOnce(&T) -> bool,
    ) -> Result<T> {
        let docs = self.docs.as_ref();
        let (gave, read) = std::thread::scope(|scope| {
            let reading = scope.spawn(|| docs.map(index::DeferredDocs::read));
            let gave = meanwhile();
            (gave, reading.join().expect("the documents' table is read without a panic"))
        });
        match read {
            Some(Some(table)) if !keep(&gave) => {
                drop(table);
                crate::data::parse_budget::give_back_freed_memory();
            }
            read => {
                self.docs = None;
                self.take_docs(read)?;
            }
        }
        Ok(gave)
    }

    /// Takes the index's documents' table as [`index::DeferredDocs::read`] gave it (`None`:
    /// there was none to read), read apart from [`PreviousBuild::read_docs`].
    pub(super) fn take_docs(&mut self, read: Option<Option<index::DocumentFiles>>) -> Result<()> {
        let (Some(index), Some(read)) = (self.index.as_mut(), read) else { return Ok(()) };
        match read {
            Some(docs) => index.docs = docs,
            None if crate::archive::is_archive(&self.target.dir) => self.index = None,
            None => {
                self.index = None;
                let dir = self.target.dir.clone();
                self.listed.extend(previous_files(&dir, !self.journal.paths.is_empty())?);
            }
        }
        Ok(())
    }

    /// What the data holds, when every file of it is as the build that left an intact tree
    /// recorded it, and the settings are the same: the tree is up to date.
    pub(super) fn unchanged(
        &self,
        data: &Path,
        listing: &listing::Listing,
        options: &BuildOptions,
    ) -> Option<up_to_date::Unchanged> {
        let index = self.index.as_ref().filter(|_| self.tree.is_some() && !self.journal.killed)?;
        up_to_date::unchanged(data, listing, index, |config| up_to_date::settings_of(options, index, config))
    }

    /// What a watcher saw change (`watched`), when it was counted from the build whose index
    /// this is: else it says nothing of the data since.
    pub(super) fn counted_from<'w>(
        &self,
        watched: Option<&'w watched::WatchedChanges>,
    ) -> Option<&'w watched::WatchedChanges> {
        watched.filter(|watched| self.index.as_ref().is_some_and(|index| index.started_ns == watched.base))
    }

    /// Lets go of the previous build's data table (a table line's or file's entry each), once
    /// what changed is known: the write needs only its document table, and holding both is
    /// the peak of an edit build.
    pub(super) fn forget_data_table(&mut self) {
        if let Some(index) = self.index.as_mut() {
            index.data = DataFiles::default();
        }
    }

    /// Ends a build that found the tree up to date: the stamps of data files touched without
    /// a change, or read because they had changed too shortly before the previous build, are
    /// recorded (with this build's start) so that the next build need not read them again; so
    /// are the folders, when some had to be read.
    /// Returns the start of the build the index then records (0 when it cannot be read).
    pub(super) fn record_up_to_date(&mut self, started_ns: i64, files: DataFiles, folders: Folders) -> i64 {
        if self.read_docs().is_err() {
            return 0;
        }
        let Some(index) = self.index.take() else { return 0 };
        let mut base = index.started_ns;
        let data_touched = !index.data.same_stamps(&files) || files.any_stamp(|stamp| !index.trusted(stamp));
        if data_touched || folders.read > 0 || folders.notes != index.folders {
            let index = index::Index { started_ns, data: files, folders: folders.notes, ..index };
            if index.write(&self.target.dir).is_ok() {
                base = started_ns;
            }
        }
        crate::staging::clean_leftovers(&self.target.dir);
        base
    }
}

/// The output a previous build left, as a partial build reads its documents back: the tree's
/// files, or the archive's documents by key (the tree's paths). The one seam between a build and
/// the kind of output in place; what it reads is checked against the index's hashes.
pub(super) enum PreviousOutput {
    /// A tree.
    Tree(crate::tree::dir::TreeDir),
    /// An archive (`gen build --archive`).
    Archive(Box<Reader<Folder>>),
}

impl PreviousOutput {
    /// The bytes of the document at `path` (at most `max` bytes from a tree), when it has one.
    pub(super) fn read(&self, path: &str, max: u64) -> Option<Vec<u8>> {
        match self {
            PreviousOutput::Tree(tree) => tree.read(path, max),
            PreviousOutput::Archive(reader) => reader.get(path).ok().flatten().map(|found| found.bytes),
        }
    }

    /// The archive, when the output is one.
    pub(super) fn archive(&self) -> Option<&Reader<Folder>> {
        match self {
            PreviousOutput::Tree(_) => None,
            PreviousOutput::Archive(reader) => Some(reader),
        }
    }
}

/// The files of the tree in `dir` as its manifest lists them, when there is no index: what a
/// build may replace or remove. A folder that holds anything but gen's tree is refused (unless
/// `ours`: a killed commit's journal names it), so that a mistyped `--out` deletes nothing.
/// A listed path that no build writes (`../x`, `/x`) is left out, with a note; a manifest that
/// is not a regular file of at most [`manifest::MAX_MANIFEST_BYTES`] is an error.
pub(super) fn previous_files(dir: &Path, ours: bool) -> Result<Vec<String>> {
    let path = dir.join(manifest::MANIFEST_FILE);
    let bytes = match crate::fsutil::read_regular_file(&path, manifest::MAX_MANIFEST_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(crate::fsutil::NotRead::Io(_)) => None,
        Err(e) => anyhow::bail!("{}", manifest::not_read_manifest(&path, &e)),
    };
    if let Some(manifest) = bytes.as_deref().filter(|b| BuildSettings::from_manifest_bytes(b).is_some()) {
        let files = Manifest::from_bytes(manifest).map(|m| m.files).unwrap_or_default();
        let (paths, bad): (Vec<String>, Vec<String>) = files.into_keys().partition(|p| layout::is_tree_file(p));
        for bad in bad {
            say!(
                "note: {} lists {bad:?}, which is not a path of a gen tree: ignoring it (it is neither read, \
                 written nor removed)",
                path.display()
            );
        }
        return Ok(paths);
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().to_string()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    if names.is_empty() || ours {
        return Ok(Vec::new());
    }
    names.sort();
    let shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let what = if bytes.is_some() {
        format!("its {} was not written by gen", manifest::MANIFEST_FILE)
    } else {
        format!("it holds no {}", manifest::MANIFEST_FILE)
    };
    anyhow::bail!(
        "refusing to replace {}: it is not empty and {what}, so it is not a tree gen built (it holds {shown}{}); \
         choose another --out or empty the folder",
        dir.display(),
        if names.len() > 5 { ", ..." } else { "" }
    )
}

/// Refuses to write an archive over a tree, a tree over an archive, or an archive into a
/// folder that holds anything but an archive: a build never deletes an output of the other
/// kind, nor files that are not its own.
fn refuse_other_kind(dir: &Path, archive: bool) -> Result<()> {
    let shown = dir.display();
    if archive && dir.join(manifest::MANIFEST_FILE).exists() {
        anyhow::bail!(
            "refusing to write an archive into {shown}: it holds a tree ({} is there), and `gen build --archive` \
             never deletes a tree; choose another --out for the archive, or remove the tree first if you mean to \
             replace it (or build the tree again without --archive)",
            manifest::MANIFEST_FILE
        );
    }
    if !archive && crate::archive::is_archive(dir) {
        anyhow::bail!(
            "refusing to write a tree into {shown}: it holds an archive (its root and parts/, written by `gen build \
             --archive`); build it again with --archive, or choose another --out for the tree (or remove the \
             archive first if you mean to replace it)"
        );
    }
    if archive && !crate::archive::is_archive(dir) {
        let names = std::fs::read_dir(dir).with_context(|| format!("cannot read {shown}"))?;
        let mut others: Vec<String> = Vec::new();
        for name in names {
            let name = name.with_context(|| format!("cannot read {shown}"))?.file_name().to_string_lossy().to_string();
            // an archive stopped before its first root: its parts are ours
            if name != "parts" {
                others.push(name);
            }
        }
        if !others.is_empty() {
            others.sort();
            anyhow::bail!(
                "refusing to write an archive into {shown}: it is not empty and holds no archive root, so it is not an \
                 archive gen built (it holds {}); choose another --out or empty the folder",
                others.into_iter().take(5).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(())
}
