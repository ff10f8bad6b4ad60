//! Write: renders the documents that changed into a staging folder beside the output folder,
//! then commits them into the tree (see [`write_tree`] and docs/builds.md). A build that fails
//! writes nothing into the tree; a killed one leaves files the next build repairs, and a
//! manifest that `gen serve` checks every file against.
//!
//! Files whose bytes are unchanged are not written, so they keep their modification time and
//! syncs to object storage skip them.

use crate::build::index::{Index, Place, TreeDocs, TreeFile, gz_path};
use crate::build::load::Dataset;
use crate::build::plan::Output;
use crate::build::tree_fs::TreeDir;
use crate::fsutil::{self, NotRead, gzip_bytes};
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest, is_tree_path};
use crate::problem::{Problem, Problems};
use crate::staging::{FolderLock, Staging};
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

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

/// What a write did, and every document of the tree with its hash and stamp, for the index.
pub struct Written {
    pub report: WriteReport,
    pub docs: TreeDocs,
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
    /// The dataset the outputs were planned from: a record's paths are derived from it.
    pub dataset: &'o Dataset,
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
    let mut docs = Docs { dataset: write.dataset, outputs: write.outputs, late: Vec::new() };
    let mut placed = stage_documents(&writer, &docs, write.documents, write.progress)?;
    for (path, bytes) in write.documents.finish() {
        let paths = vec![path];
        let previous = writer.index.and_then(|index| index.docs.other(&paths));
        placed.push(writer.place(&paths, previous, &bytes)?);
        docs.late.push(paths);
    }
    let manifest_bytes = write_manifest(write.manifest, &stage, &docs, &placed)?;
    let gone = gone_paths(previous, &docs);

    if target.exists {
        let staged = || docs.all().zip(&placed).filter(|(_, p)| p.staged).flat_map(|(doc, _)| docs.paths(doc));
        // Without --gzip, the .gz siblings a previous build left go too.
        let stale_gz: Vec<String> = if writer.gzip {
            Vec::new()
        } else {
            let with_gz = previous.index.into_iter().flat_map(|i| i.docs.paths()).filter(|(_, f)| f.gz.is_some());
            with_gz.map(|(path, _)| path).chain(previous.listed.iter().cloned()).collect()
        };
        let tree = tree.as_ref().expect("an existing tree is open");
        commit_in_place(tree, &stage, &staged, &gone, &stale_gz, writer.gzip)?;
    } else {
        target.hold(&stage)?;
        staging.commit()?;
        target.exists = true;
    }
    stamps_after_commit(&TreeDir::open(&out)?, previous, &docs, &placed, writer.gzip, manifest_bytes)
}

/// The documents of one write: the planned outputs, then the late ones (by their paths).
struct Docs<'a, 'o> {
    dataset: &'o Dataset,
    outputs: &'a [Output<'o>],
    late: Vec<Vec<String>>,
}

/// One document of [`Docs`].
#[derive(Clone, Copy)]
enum Doc<'a, 'o> {
    Planned(&'a Output<'o>),
    Late(&'a [String]),
}

impl<'a, 'o> Docs<'a, 'o> {
    fn all(&self) -> impl Iterator<Item = Doc<'_, 'o>> + '_ {
        let planned = self.outputs.iter().map(Doc::Planned);
        planned.chain(self.late.iter().map(|paths| Doc::Late(paths)))
    }

    /// The `i`-th document of [`Docs::all`].
    fn doc(&self, i: usize) -> Doc<'_, 'o> {
        match self.outputs.get(i) {
            Some(output) => Doc::Planned(output),
            None => Doc::Late(&self.late[i - self.outputs.len()]),
        }
    }

    fn paths(&self, doc: Doc<'_, 'o>) -> Vec<String> {
        match doc {
            Doc::Planned(output) => output.paths(self.dataset),
            Doc::Late(paths) => paths.to_vec(),
        }
    }

    fn place(&self, doc: Doc<'_, 'o>) -> Option<(Place<'o>, Option<&'o str>)> {
        match doc {
            Doc::Planned(output) => output.place(self.dataset),
            Doc::Late(_) => None,
        }
    }

    /// True when the new tree has the file `path`.
    fn planned(&self, path: &str, others: &HashSet<&str>, names: &OnceLock<Names<'o>>) -> bool {
        if others.contains(path) {
            return true;
        }
        let rest = path.strip_prefix(crate::layout::API_ROOT).and_then(|r| r.strip_prefix('/'));
        let Some(rest) = rest.and_then(|r| r.strip_suffix("/index.json")) else {
            return false;
        };
        let mut parts = rest.split('/');
        let (Some(segment), Some(key), kind, None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let Some(resource) = self.dataset.resources.get(segment) else { return false };
        let record = match crate::config::parse_id(key) {
            Some(id) => resource.get(id),
            None => {
                let names = names.get_or_init(|| names_of(self.dataset));
                names.get(&(segment, key)).map(|&i| &resource.records[i])
            }
        };
        record.is_some_and(|record| kind.is_none_or(|kind| record.subdocs.iter().any(|s| s.name == kind)))
    }
}

/// Each record by (segment, path name).
type Names<'o> = HashMap<(&'o str, &'o str), usize>;

/// The records of `dataset` that have a name path, by (segment, name).
fn names_of(dataset: &Dataset) -> Names<'_> {
    let mut names = HashMap::new();
    for (segment, resource) in &dataset.resources {
        for (i, record) in resource.records.iter().enumerate() {
            if let Some(name) = resource.path_name(record) {
                names.insert((segment.as_str(), name), i);
            }
        }
    }
    names
}

/// Renders the dirty documents of `outputs` and places each (see [`TreeWriter::place`]), in
/// parallel; takes the others from the previous tree. Fails with every problem found.
fn stage_documents(
    writer: &TreeWriter<'_>,
    docs: &Docs<'_, '_>,
    documents: &dyn Documents,
    progress: &Progress,
) -> Result<Vec<Placed>> {
    let outputs = docs.outputs;
    progress.total.store(outputs.iter().filter(|o| documents.dirty(o)).count(), Ordering::Relaxed);
    // Failures are gathered aside, so that the results of a million documents are one vector of
    // small records, not of `Result`s.
    let problems: Mutex<Vec<Problem>> = Mutex::default();
    let error: Mutex<Option<anyhow::Error>> = Mutex::default();
    let failed = Placed { hash: blake3::Hash::from_bytes([0; 32]), staged: false, written: 0, from_index: false };
    let placed: Vec<Placed> = outputs
        .par_iter()
        .with_min_len(64)
        .map(|output| {
            let previous = writer.previous(docs, Doc::Planned(output));
            if !documents.dirty(output)
                && let Some(file) = previous
            {
                return Placed { hash: file.hash.0, staged: false, written: 0, from_index: true };
            }
            let placed = documents.render(output).map_err(DocumentFailure::Problems).and_then(|bytes| {
                let paths = output.paths(docs.dataset);
                writer.place(&paths, previous, &bytes).map_err(DocumentFailure::Error)
            });
            progress.done.fetch_add(1, Ordering::Relaxed);
            match placed {
                Ok(placed) => placed,
                Err(DocumentFailure::Problems(found)) => {
                    problems.lock().expect("no panic while writing").extend(found);
                    failed
                }
                Err(DocumentFailure::Error(e)) => {
                    error.lock().expect("no panic while writing").get_or_insert(e);
                    failed
                }
            }
        })
        .collect();
    if let Some(e) = error.into_inner().expect("no panic while writing") {
        return Err(e);
    }
    let mut problems = problems.into_inner().expect("no panic while writing");
    if !problems.is_empty() {
        problems.sort();
        return Err(Problems::all(problems).into());
    }
    Ok(placed)
}

/// Streams `manifest`, listing every path with its document's hash in path order, into the
/// staging folder `stage` (the manifest of a large tree is large: neither it nor the list of
/// its paths is ever held whole; see [`sorted_files`]). Returns its size.
fn write_manifest(mut manifest: Manifest, stage: &Path, docs: &Docs<'_, '_>, placed: &[Placed]) -> Result<u64> {
    manifest.files.clear();
    let path = stage.join(MANIFEST_FILE);
    let file = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut counting = CountingWriter { inner: file, bytes: 0 };
    manifest
        .write_sorted_listing(sorted_files(docs, placed), &mut counting)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(counting.bytes)
}

/// Every path of the tree with its document's hash, sorted by path, one resource at a time:
/// the documents outside resources one by one, and each resource's paths sorted by the key
/// they start with (a record's id or name, `_pages`, ...), so that only one resource's keys
/// are in memory at once.
fn sorted_files<'d>(docs: &'d Docs<'_, '_>, placed: &'d [Placed]) -> impl Iterator<Item = (String, blake3::Hash)> + 'd {
    enum Group {
        Path(String, blake3::Hash),
        Resource(std::ops::Range<usize>),
    }
    let mut groups: Vec<(String, Group)> = Vec::new();
    let mut i = 0;
    let count = docs.outputs.len() + docs.late.len();
    while i < count {
        let segment = match docs.doc(i) {
            Doc::Planned(output) => output.content.segment(),
            Doc::Late(_) => None,
        };
        match segment {
            Some(segment) => {
                let start = i;
                while i < count && matches!(docs.doc(i), Doc::Planned(o) if o.content.segment() == Some(segment)) {
                    i += 1;
                }
                groups.push((format!("{}/{segment}/", crate::layout::API_ROOT), Group::Resource(start..i)));
            }
            None => {
                for path in docs.paths(docs.doc(i)) {
                    groups.push((path.clone(), Group::Path(path, placed[i].hash)));
                }
                i += 1;
            }
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    groups.into_iter().flat_map(move |(_, group)| -> Box<dyn Iterator<Item = (String, blake3::Hash)>> {
        match group {
            Group::Path(path, hash) => Box::new(std::iter::once((path, hash))),
            Group::Resource(range) => Box::new(resource_files(docs, &placed[range.clone()], range.start)),
        }
    })
}

/// The paths of one resource's documents (`placed[0]` is output `first`), sorted: grouped by
/// the key that follows the segment (`<id>/`, `<name>/`, or the whole rest for list pages),
/// keys sorted, and each record's paths sorted within its key.
fn resource_files<'d>(
    docs: &'d Docs<'_, '_>,
    placed: &'d [Placed],
    first: usize,
) -> impl Iterator<Item = (String, blake3::Hash)> + 'd {
    let outputs = &docs.outputs[first..first + placed.len()];
    let mut keys: Vec<(String, usize)> = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        match output.place(docs.dataset) {
            Some((place, name)) if place.kind.is_none() => {
                keys.push((format!("{}/", place.id), i));
                if let Some(name) = name {
                    keys.push((format!("{name}/"), i));
                }
            }
            Some(_) => {}
            None => keys.extend(output.listed.iter().map(|path| (path.clone(), i))),
        }
    }
    keys.sort_unstable();
    keys.into_iter().flat_map(move |(key, i)| {
        let output = &outputs[i];
        let mut files: Vec<(String, blake3::Hash)> = match output.place(docs.dataset) {
            None => vec![(key, placed[i].hash)],
            Some((place, _)) => {
                let key = key.trim_end_matches('/');
                let record = std::iter::once((place.tree_path(key), placed[i].hash));
                let subdocs = (i + 1..outputs.len())
                    .map_while(|j| {
                        outputs[j].place(docs.dataset).filter(|(p, _)| p.kind.is_some()).map(|(p, _)| (j, p))
                    })
                    .map(|(j, p)| (p.tree_path(key), placed[j].hash));
                record.chain(subdocs).collect()
            }
        };
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        files
    })
}

/// The files of the previous tree that the new one no longer has, sorted: only files the
/// previous index, manifest or journal lists are ever removed.
fn gone_paths(previous: &Previous<'_>, docs: &Docs<'_, '_>) -> Vec<String> {
    let had_files = previous.index.is_some_and(|index| !index.docs.is_empty()) || !previous.listed.is_empty();
    if !had_files {
        return Vec::new(); // a first build: nothing can be gone
    }
    let others: HashSet<&str> = docs
        .outputs
        .iter()
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
fn stamps_after_commit(
    committed: &TreeDir,
    previous: &Previous<'_>,
    docs: &Docs<'_, '_>,
    placed: &[Placed],
    gzip: bool,
    manifest_bytes: u64,
) -> Result<Written> {
    let mut report = WriteReport { files: 1, bytes: manifest_bytes, written: 1 };
    let mut index = TreeDocs::default();
    index.reserve(placed.len());
    for (doc, output) in docs.all().zip(placed) {
        report.written += output.written;
        let kept = previous.index.filter(|_| output.from_index).and_then(|index| previous_file(index, docs, doc));
        let (paths_count, place) = match docs.place(doc) {
            Some((place, name)) => (1 + usize::from(name.is_some()), Some((place, name))),
            None => (docs.paths(doc).len(), None),
        };
        let file = match kept {
            Some(kept) => kept,
            None => {
                let first = match place {
                    Some((place, _)) => place.tree_path(place.id),
                    None => docs.paths(doc).swap_remove(0),
                };
                let shown = || format!("cannot read {}", committed.path().join(&first).display());
                let stamp = committed.stamp(&first).with_context(shown)?;
                let gz = if gzip { committed.stamp(&format!("{first}.gz")) } else { None };
                TreeFile { hash: crate::build::index::Hash(output.hash), stamp, gz }
            }
        };
        report.files += paths_count * (1 + usize::from(file.gz.is_some()));
        report.bytes += paths_count as u64 * (file.stamp.size + file.gz.map_or(0, |gz| gz.size));
        match place {
            Some((place, name)) => index.push_keyed(&place, name, file),
            None => index.push_other(docs.paths(doc), file),
        }
    }
    index.finish();
    Ok(Written { report, docs: index })
}

/// The previous tree's file of `doc`, as `index` describes it, when it is published at the
/// same paths (its stamps are checked before a build trusts the index).
fn previous_file(index: &Index, docs: &Docs<'_, '_>, doc: Doc<'_, '_>) -> Option<TreeFile> {
    match (doc, docs.place(doc)) {
        (_, Some((place, name))) => index.docs.keyed(&place, name),
        (Doc::Planned(output), None) => index.docs.other(&output.listed),
        (Doc::Late(paths), None) => index.docs.other(paths),
    }
}

/// Moves the staged files over their paths in `tree`, removes the files gone from the tree,
/// and puts the manifest in place last. The paths touched are first written to a journal
/// beside the tree, so that the next build knows them as ours if this one is killed. No link
/// inside the tree is followed (see [`TreeDir`]).
fn commit_in_place<I: Iterator<Item = String>>(
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
    // For the tests that kill a build during its commit (tests/killed.rs): a pause after each
    // file, so that kills land inside the commit rather than around it.
    let pause = std::env::var("GEN_TEST_COMMIT_PAUSE_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(std::time::Duration::from_micros);
    for path in staged() {
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        let from = stage.join(&path);
        tree.rename_into(&from, &path)?;
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
#[derive(Clone, Copy)]
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
    /// The previous tree's file of `doc` (see [`previous_file`]).
    fn previous(&self, docs: &Docs<'_, '_>, doc: Doc<'_, '_>) -> Option<TreeFile> {
        previous_file(self.index?, docs, doc)
    }

    /// Places `bytes` at every path in `paths`: kept in place when every path already holds
    /// them as one file (by `previous`, the index's verified hash and stamp, else by reading the
    /// files), staged otherwise (the first path written, the others hard links to it). A
    /// document's paths are always links of one file, so one stamp stands for all of them.
    fn place(&self, paths: &[String], previous: Option<TreeFile>, bytes: &[u8]) -> Result<Placed> {
        let hash = blake3::hash(bytes);
        let in_place = match (self.tree, self.index, previous) {
            (None, ..) => false,
            (Some(tree), Some(index), Some(file)) => {
                file.hash.0 == hash && paths.iter().all(|path| index.check_file(tree, path, &file, self.gzip).is_some())
            }
            (Some(tree), ..) => {
                let first = tree.stamp(&paths[0]);
                !self.gzip
                    && first.is_some_and(|stamp| stamp.size == bytes.len() as u64)
                    && paths.iter().all(|path| tree.stamp(path).map(|s| s.ino) == first.map(|s| s.ino))
                    && tree.read(&paths[0], bytes.len() as u64).is_some_and(|old| old == bytes)
            }
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
