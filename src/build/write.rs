//! Write: renders the documents that changed into a staging folder beside the output folder,
//! then commits them into the tree (see [`write_tree`] and docs/builds.md). A build that fails
//! writes nothing into the tree; a killed one leaves files the next build repairs, and a
//! manifest that `gen serve` checks every file against.
//!
//! Files whose bytes are unchanged are not written, so they keep their modification time and
//! syncs to object storage skip them.

use crate::build::index::{Index, TreeFile, gz_path};
use crate::build::plan::Output;
use crate::build::tree_fs::TreeDir;
use crate::fsutil::{self, NotRead, gzip_bytes};
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest, is_tree_path};
use crate::problem::{Problem, Problems};
use crate::staging::{FolderLock, Staging};
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts documents as they are written, for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicUsize,
    pub total: AtomicUsize,
}

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Files in the tree (the manifest and `.gz` siblings included).
    pub files: usize,
    /// Bytes in the tree.
    pub bytes: u64,
    /// Files written because their bytes are new (the others were left as they were).
    pub written: usize,
}

/// The rendered bytes of one planned document, or the problems found in its source.
pub type Rendered = Result<Vec<u8>, Vec<Problem>>;

/// What the previous build left in the output folder, as far as this write may use it.
#[derive(Default)]
pub struct Previous<'i> {
    /// The build index, when it describes the tree's manifest.
    pub index: Option<&'i Index>,
    /// Further paths known to be ours: the previous manifest's files when there is no index,
    /// and what a killed commit's journal lists. Only these and the index's files are ever
    /// deleted.
    pub listed: Vec<String>,
}

/// What a write did, and every file of the tree with its hash and stamp, for the index: in the
/// order of the outputs' paths, then of the paths `finish` returned.
pub struct Written {
    pub report: WriteReport,
    pub files: Vec<TreeFile>,
}

/// The documents a write takes, from the render step: which planned documents need rendering,
/// their bytes, and the documents made last from what rendering saw (the OpenAPI document).
pub trait Documents: Sync {
    /// True when `output` must be rendered; otherwise it is taken from the previous tree.
    fn dirty(&self, output: &Output<'_>) -> bool;
    /// The bytes of `output`, or the problems found in its source.
    fn render(&self, output: &Output<'_>) -> Rendered;
    /// The documents made once every other is rendered: (path, bytes).
    fn finish(&self) -> Vec<(String, Vec<u8>)>;
}

/// One write of a tree: what [`write_tree`] writes, and what it may reuse.
pub struct TreeWrite<'a, 'o> {
    /// Every planned document, in plan order.
    pub outputs: &'a [Output<'o>],
    pub documents: &'a dyn Documents,
    /// The new tree's manifest, its files listed by the write.
    pub manifest: Manifest,
    pub previous: Previous<'a>,
    pub progress: &'a Progress,
}

/// Writes the documents of `write.outputs` into `target`, then those `finish` returns, then the
/// manifest, listing every file with its hash.
///
/// Only the documents that are dirty are rendered: the others are taken from the previous tree
/// as the index describes it. A rendered document is written only when its bytes differ from
/// the file in place (known by the index's hash and stamp, or else by reading the file).
/// New bytes go to a staging folder beside the tree first: on any problem nothing in the tree
/// changes. Then the commit: into a folder that does not exist, the staging folder is renamed
/// into place; into an existing tree, each new file is renamed over its path, files gone from
/// the tree are removed, and the manifest is renamed into place last. See docs/builds.md.
pub fn write_tree(target: &mut FolderLock, write: TreeWrite<'_, '_>) -> Result<Written> {
    let out = target.dir.clone();
    let staging = Staging::begin_unlocked(&out).context("cannot stage the new tree beside the output folder")?;
    let stage = staging.dir.clone();
    let tree = if target.exists { Some(TreeDir::open(&out)?) } else { None };
    let previous = &write.previous;
    let writer =
        TreeWriter { tree: tree.as_ref(), stage: &stage, index: previous.index, gzip: write.manifest.settings.gzip };
    let mut placed = stage_documents(&writer, write.outputs, write.documents, write.progress)?;
    let late: Vec<(String, Vec<u8>)> = write.documents.finish();
    let late_paths: Vec<Vec<String>> = late.iter().map(|(path, _)| vec![path.clone()]).collect();
    for ((_, bytes), paths) in late.iter().zip(&late_paths) {
        placed.push(writer.place(paths, bytes)?);
    }
    drop(late);
    let all_paths: Vec<&[String]> =
        write.outputs.iter().map(|o| &o.paths[..]).chain(late_paths.iter().map(|p| &p[..])).collect();
    let manifest_bytes = write_manifest(write.manifest, &stage, &all_paths, &placed)?;
    let gone = gone_paths(previous, &all_paths);

    if target.exists {
        let staged: Vec<&str> = all_paths
            .iter()
            .zip(&placed)
            .filter(|(_, p)| p.staged)
            .flat_map(|(paths, _)| paths.iter().map(String::as_str))
            .collect();
        // Without --gzip, the .gz siblings a previous build left go too.
        let stale_gz: Vec<&str> = if writer.gzip {
            Vec::new()
        } else {
            let with_gz = previous.index.into_iter().flat_map(|i| &i.files).filter(|(_, f)| f.gz.is_some());
            with_gz.map(|(path, _)| path.as_str()).chain(previous.listed.iter().map(String::as_str)).collect()
        };
        let tree = tree.as_ref().expect("an existing tree is open");
        commit_in_place(tree, &stage, &staged, &gone, &stale_gz, writer.gzip)?;
    } else {
        target.hold(&stage)?;
        staging.commit()?;
        target.exists = true;
    }
    stamps_after_commit(&TreeDir::open(&out)?, previous, &all_paths, &placed, writer.gzip, manifest_bytes)
}

/// Renders the dirty documents of `outputs` and places each (see [`TreeWriter::place`]), in
/// parallel; takes the others from the previous tree. Fails with every problem found.
fn stage_documents(
    writer: &TreeWriter<'_>,
    outputs: &[Output<'_>],
    documents: &dyn Documents,
    progress: &Progress,
) -> Result<Vec<Placed>> {
    progress.total.store(outputs.iter().filter(|o| documents.dirty(o)).count(), Ordering::Relaxed);
    let results: Vec<Result<Placed, DocumentFailure>> = outputs
        .par_iter()
        .map(|output| {
            if !documents.dirty(output)
                && let Some(kept) = writer.kept(&output.paths)
            {
                return Ok(kept);
            }
            let bytes = documents.render(output).map_err(DocumentFailure::Problems)?;
            let placed = writer.place(&output.paths, &bytes).map_err(DocumentFailure::Error)?;
            progress.done.fetch_add(1, Ordering::Relaxed);
            Ok(placed)
        })
        .collect();
    let mut problems = Vec::new();
    let mut placed = Vec::with_capacity(results.len());
    for result in results {
        match result {
            Ok(output) => placed.push(output),
            Err(DocumentFailure::Problems(found)) => problems.extend(found),
            Err(DocumentFailure::Error(e)) => return Err(e),
        }
    }
    if !problems.is_empty() {
        problems.sort();
        return Err(Problems::all(problems).into());
    }
    Ok(placed)
}

/// Streams `manifest`, listing every path with its document's hash, into the staging folder
/// `stage` (the manifest of a large tree is large: it is never held whole). Returns its size.
fn write_manifest(mut manifest: Manifest, stage: &Path, all_paths: &[&[String]], placed: &[Placed]) -> Result<u64> {
    let mut files: Vec<(&str, blake3::Hash)> = Vec::new();
    for (paths, output) in all_paths.iter().zip(placed) {
        files.extend(paths.iter().map(|path| (path.as_str(), output.hash)));
    }
    manifest.files.clear();
    let path = stage.join(MANIFEST_FILE);
    let file = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut counting = CountingWriter { inner: file, bytes: 0 };
    manifest.write_listing(&mut files, &mut counting).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(counting.bytes)
}

/// The files of the previous tree that the new one no longer has, sorted: only files the
/// previous index, manifest or journal lists are ever removed.
fn gone_paths<'p>(previous: &'p Previous<'_>, all_paths: &[&[String]]) -> Vec<&'p str> {
    let had_files = previous.index.is_some_and(|index| !index.files.is_empty()) || !previous.listed.is_empty();
    if !had_files {
        return Vec::new(); // a first build: nothing can be gone
    }
    let planned: HashSet<&str> = all_paths.iter().flat_map(|paths| paths.iter().map(String::as_str)).collect();
    let mut gone: Vec<&str> = previous
        .index
        .into_iter()
        .flat_map(|index| index.files.keys())
        .chain(&previous.listed)
        .map(String::as_str)
        .filter(|path| !planned.contains(path))
        .collect();
    gone.sort_unstable();
    gone.dedup();
    gone
}

/// Every file of the committed tree with its hash and stamp, for the index (stamps as the
/// commit left them: renames and new links change a file's change time), and the write's
/// report. `manifest_bytes`: the size of the manifest written.
fn stamps_after_commit(
    committed: &TreeDir,
    previous: &Previous<'_>,
    all_paths: &[&[String]],
    placed: &[Placed],
    gzip: bool,
    manifest_bytes: u64,
) -> Result<Written> {
    let mut report = WriteReport { files: 1, bytes: manifest_bytes, written: 1 };
    let mut files = Vec::with_capacity(all_paths.iter().map(|paths| paths.len()).sum());
    for (paths, output) in all_paths.iter().zip(placed) {
        report.written += output.written;
        let hash = crate::build::index::Hash(output.hash);
        for path in paths.iter() {
            let kept = previous.index.filter(|_| output.from_index).and_then(|index| index.files.get(path));
            let file = match kept {
                Some(kept) => TreeFile { hash, stamp: kept.stamp, gz: kept.gz },
                None => {
                    let shown = || format!("cannot read {}", committed.path().join(path).display());
                    let stamp = committed.stamp(path).with_context(shown)?;
                    let gz = if gzip { committed.stamp(&format!("{path}.gz")) } else { None };
                    TreeFile { hash, stamp, gz }
                }
            };
            report.files += 1 + usize::from(file.gz.is_some());
            report.bytes += file.stamp.size + file.gz.map_or(0, |gz| gz.size);
            files.push(file);
        }
    }
    Ok(Written { report, files })
}

/// Moves the staged files over their paths in `tree`, removes the files gone from the tree,
/// and puts the manifest in place last. The paths touched are first written to a journal
/// beside the tree, so that the next build knows them as ours if this one is killed. No link
/// inside the tree is followed (see [`TreeDir`]).
fn commit_in_place(
    tree: &TreeDir,
    stage: &Path,
    staged: &[&str],
    gone: &[&str],
    stale_gz: &[&str],
    gzip: bool,
) -> Result<()> {
    let mut text = String::new();
    for path in staged.iter().chain(gone) {
        text.push_str(path);
        text.push('\n');
    }
    // Written whole, then renamed into place: a build killed while writing it leaves no
    // journal with a cut line, only a leftover the next journal replaces.
    let journal = journal_path(tree.path());
    let temporary = fsutil::beside(tree.path(), "gen-journal.tmp");
    fsutil::write_new(&temporary, text.as_bytes())?;
    std::fs::rename(&temporary, &journal).with_context(|| format!("cannot write {}", journal.display()))?;
    // For the tests that kill a build during its commit (tests/killed.rs): a pause after each
    // file, so that kills land inside the commit rather than around it.
    let pause = std::env::var("GEN_TEST_COMMIT_PAUSE_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(std::time::Duration::from_micros);
    for path in staged {
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        let from = stage.join(path);
        tree.rename_into(&from, path)?;
        if gzip {
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

/// The journal of a commit into the tree `out`: the paths it replaces or removes. It exists
/// only while a commit runs (and after a killed one, until the next build completes).
pub fn journal_path(out: &Path) -> PathBuf {
    fsutil::beside(out, "gen-journal")
}

/// What a killed commit's journal says.
#[derive(Debug, Default, Clone)]
pub struct Journal {
    /// True when there is a journal: a commit was killed, so the tree is not intact.
    pub killed: bool,
    /// The paths it lists that are paths of a gen tree.
    pub paths: Vec<String>,
}

/// Reads the journal of the tree `out`. A journal that is not a regular file of at most
/// [`MAX_MANIFEST_BYTES`], or a line that is no path of a gen tree, is ignored with a note
/// (the build then checks every file, and removes only what the manifest or index lists).
pub fn read_journal(out: &Path) -> Journal {
    let path = journal_path(out);
    let text = match fsutil::read_regular_file(&path, MAX_MANIFEST_BYTES) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Journal::default(),
        Err(e) => {
            let why = fsutil::why_not_read(&path, MAX_MANIFEST_BYTES, &e);
            eprintln!("note: {why}: ignoring it; this build checks every file of the tree");
            return Journal { killed: true, paths: Vec::new() };
        }
    };
    let mut paths = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        match is_tree_path(line) {
            true => paths.push(line.to_string()),
            false => eprintln!(
                "note: {} lists {line:?}, which is not a path of a gen tree: ignoring that line",
                path.display()
            ),
        }
    }
    Journal { killed: true, paths }
}

/// Places documents: taken from the previous tree when unchanged, staged otherwise.
struct TreeWriter<'w> {
    /// The tree in place, when there is one.
    tree: Option<&'w TreeDir>,
    stage: &'w Path,
    index: Option<&'w Index>,
    gzip: bool,
}

/// One document, placed at all its paths.
struct Placed {
    hash: blake3::Hash,
    /// True when its new bytes are in the staging folder.
    staged: bool,
    /// Files written anew, at each path (with `.gz` siblings): a document's paths share one
    /// file's bytes through hard links, as in every build.
    written: usize,
    /// True when it was taken from the index unchanged: its stamps are the index's.
    from_index: bool,
}

impl TreeWriter<'_> {
    /// The document at `paths` as the index describes it, when it is in the index at each path
    /// with one hash (its stamps are checked before a build trusts the index).
    fn kept(&self, paths: &[String]) -> Option<Placed> {
        let index = self.index?;
        let files: Vec<&TreeFile> = paths.iter().map(|p| index.files.get(p)).collect::<Option<_>>()?;
        let hash = files.first()?.hash.0;
        if files.iter().any(|f| f.hash.0 != hash) {
            return None;
        }
        Some(Placed { hash, staged: false, written: 0, from_index: true })
    }

    /// Places `bytes` at every path in `paths`: kept in place when every path already holds
    /// them (by the index's verified hash, else by reading the file), staged otherwise (the
    /// first path written, the others hard links to it).
    fn place(&self, paths: &[String], bytes: &[u8]) -> Result<Placed> {
        let hash = blake3::hash(bytes);
        let in_place = |path: &String| {
            let Some(tree) = self.tree else { return false };
            match self.index.and_then(|index| Some((index, index.files.get(path)?))) {
                Some((index, file)) => file.hash.0 == hash && index.check_file(tree, path, file, self.gzip).is_some(),
                None => {
                    !self.gzip
                        && tree.stamp(path).is_some_and(|stamp| stamp.size == bytes.len() as u64)
                        && tree.read(path, bytes.len() as u64).is_some_and(|old| old == bytes)
                }
            }
        };
        if paths.iter().all(in_place) {
            return Ok(Placed { hash, staged: false, written: 0, from_index: false });
        }
        let mut written = 0;
        let first = self.stage.join(&paths[0]);
        for (i, path) in paths.iter().enumerate() {
            let target = self.stage.join(path);
            if let Some(dir) = target.parent() {
                fsutil::create_dir_all(dir)?;
            }
            written += 1 + usize::from(self.gzip);
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

/// Writes through to a file, counting the bytes.
struct CountingWriter {
    inner: std::fs::File,
    bytes: u64,
}

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Why a document was not placed: problems in its source, or an error writing it.
enum DocumentFailure {
    Problems(Vec<Problem>),
    Error(anyhow::Error),
}
