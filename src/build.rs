//! The build: `data/` → the tree. [`build`] reads top to bottom as its steps: open what the
//! previous build left (its [`index`], a killed commit's journal), [`load`] what changed,
//! decide `UpToDate | Partial | Full`, [`plan`] every document, [`render`] those that need it,
//! [`write`] them (staged, then committed), and record the new index.
//!
//! The modules, in the order the build calls them:

// The previous build: its state kept beside the tree (the index), and the tree opened without
// following links.
pub mod state;
pub mod index;

// Load (the data folder's room, [`crate::data`], lists and loads it): what the extract takes
// from each record.
pub mod extract;

// Decide: a build that finds every data file as the previous one left it does nothing.
mod up_to_date;

// Plan: every document and path of the tree, pure.
pub mod plan;

// Render: references checked and made absolute; schemas inferred; the OpenAPI document.
pub mod render;
pub mod schema;
pub mod openapi;

// Write: stage what changed beside the tree, then commit it.
pub mod write;

// A previous tree without an index: what its manifest lists.
mod previous;

// The dates a build gives its tree, from git when the data is committed.
mod dates;

// The render step: which documents a build renders, yielded as a stream to the writer, and
// what changed since the previous one.
pub mod rendering;
use rendering::{Changed, Rendering};

use crate::data::{listing, load, watched};
use crate::problem::Problems;
use crate::tree::manifest::{self, BuildSettings, GENERATOR, Manifest};
use crate::{config, date, fsutil, paging};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use write::Output;

/// Options of `gen build`, beyond the data folder's own settings: what the command line asks.
/// [`BuildOptions::settings`] turns them, with the data's settings, into the [`BuildSettings`] a
/// tree is built with.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Overrides the data's `base_url`.
    pub base_url: Option<String>,
    /// How list pages link to their neighbours; the data's `links` setting when `None`.
    pub links: Option<paging::LinkStyle>,
    /// Indent the JSON.
    pub pretty: bool,
    /// Also write a precompressed `.gz` sibling of every document.
    pub gzip: bool,
    /// Seconds since the epoch to record as the build date (from `SOURCE_DATE_EPOCH`).
    pub source_date_epoch: Option<i64>,
    /// Trust nothing of the previous build's index (`gen build --verify`): every data file is
    /// read, every document rendered and compared with the file in place by reading it. Not a
    /// setting of the tree: the tree built is the same.
    pub verify: bool,
    /// What a watcher of the data folder saw change since a build (`gen serve --watch`): when
    /// the tree's index is that build's, what it did not see change is not `stat`ed.
    pub watched: Option<std::sync::Arc<watched::WatchedChanges>>,
}

impl BuildOptions {
    /// The settings of a tree built with these options from data with `config` and `data_hash`.
    pub fn settings(&self, config: &config::DataSettings, data_hash: String) -> Result<BuildSettings> {
        let base_url = self.base_url.clone().unwrap_or_else(|| config.base_url.clone());
        config::check_base_url(&base_url).map_err(anyhow::Error::msg)?;
        config.deploy_headers.check().map_err(|e| anyhow::anyhow!("{}: {e}", config::CONFIG_FILE))?;
        Ok(BuildSettings {
            format: manifest::FORMAT,
            generator: GENERATOR.to_string(),
            base_url,
            links: self.links.unwrap_or(paging::LinkStyle::Query),
            pretty: self.pretty,
            gzip: self.gzip,
            page_sizes: paging::page_sizes(&config.page_sizes),
            data_hash,
            built_at: self.source_date_epoch.map(date::rfc3339),
            deploy_headers: config.deploy_headers.clone(),
            deploy_date: self.source_date_epoch.unwrap_or_else(date::now_epoch).to_string(),
            hash: String::new(),
            filters: config.filters.iter().map(|(segment, declared)| (segment.clone(), declared.fields())).collect(),
            bulk: config.bulk,
        }
        .with_hash())
    }

    /// The options that build a tree like the one with `settings` again (as `gen serve --watch`
    /// rebuilds): its link style, indentation and gzip copies. `base_url` is left out on
    /// purpose: it comes from the data's `gen.json`, read anew by each rebuild, so that an edit
    /// of it takes effect. The build date is not a setting of the tree: `source_date_epoch` is
    /// `None`.
    pub fn of_tree(settings: &BuildSettings) -> BuildOptions {
        BuildOptions {
            base_url: None,
            links: Some(settings.links),
            pretty: settings.pretty,
            gzip: settings.gzip,
            source_date_epoch: None,
            verify: false,
            watched: None,
        }
    }
}

/// What a build did, for its summary line.
#[derive(Debug, Clone)]
pub struct BuildSummary {
    /// Resources built.
    pub resources: usize,
    /// Records built.
    pub records: usize,
    /// What the write did: files written, kept and removed.
    pub report: write::WriteReport,
    /// True when the output already held this build and nothing was done.
    pub up_to_date: bool,
    /// The start of the build the tree's index now records (nanoseconds since the epoch): what
    /// a watcher counts its [`watched::WatchedChanges`] from.
    pub base: i64,
    /// True when the build took what a watcher saw change ([`BuildOptions::watched`]) and
    /// trusted the rest: the tree's index was the one the changes were counted from.
    pub told: bool,
}

impl BuildSummary {
    fn of(
        dataset: &load::Dataset,
        report: write::WriteReport,
        (up_to_date, base, told): (bool, i64, bool),
    ) -> BuildSummary {
        let (resources, records) = (dataset.resources.len(), dataset.record_count());
        BuildSummary { resources, records, report, up_to_date, base, told }
    }
}

/// Loads and fully validates `data`, returning the dataset or every problem found.
pub fn check(data: &Path) -> Result<load::Dataset> {
    load::require_folder(data)?;
    let (dataset, mut problems) = load::load(data);
    let references_unchecked = !problems.is_empty();
    if problems.is_empty() {
        // References can only be checked once the whole index is known.
        let renderer = render::Renderer { dataset: &dataset, base_url: "", pretty: false };
        let dataset_ref = &dataset;
        let files: Vec<load::Source> = dataset
            .resources
            .iter()
            .flat_map(|(segment, resource)| resource.records.iter().map(move |r| (segment, r)))
            .flat_map(|(segment, r)| {
                let subdocs = r.subdocs.iter().map(move |s| dataset_ref.subdoc_source(segment, r.id, s));
                std::iter::once(dataset_ref.record_source(segment, r)).chain(subdocs)
            })
            .collect();
        use rayon::prelude::*;
        problems = files.par_iter().filter_map(|f| renderer.render_file(f).err()).flatten().collect();
        // the declared filters: every path reaches a value somewhere
        let settings = BuildOptions::default().settings(&dataset.config, String::new())?;
        problems.extend(extract::extract(&dataset, &settings, |_| false, None).err().unwrap_or_default());
        problems.sort();
    }
    if problems.is_empty() { Ok(dataset) } else { Err(Problems { list: problems, references_unchecked }.into()) }
}

/// Builds the tree of `data` into `out`: load → plan → render → write, doing only the work that
/// the change since the previous build needs (docs/builds.md):
/// - data files whose stamp is unchanged (and old enough to trust) are not read again;
/// - the tree in place is trusted to be as the previous build's index says: none of its files is
///   stat'ed or read, except the paths a killed commit's journal lists (`options.verify` reads
///   every one, and repairs what differs);
/// - when nothing changed, nothing is written at all;
/// - when records were changed or added (none removed or renamed), only their documents, the
///   lists whose entries changed, the root, meta and OpenAPI documents are rendered; otherwise
///   every document is;
/// - either way, only files whose bytes change (by the index's hashes) are written, and only
///   files gone are removed.
pub fn build(
    data: &Path,
    out: &Path,
    options: &BuildOptions,
    progress: &crate::progress::Progress,
) -> Result<BuildSummary> {
    let started_ns = index::now_ns();
    let timer = crate::progress::StepTimer::from_env();
    load::require_folder(data)?;
    require_out_beside(data, out)?;
    let mut previous = PreviousBuild::open(out, !options.verify)?;
    timer.step("open the previous build (lock, index, journal)");
    let watched = previous.counted_from(options.watched.as_deref());
    let (told, listing) =
        (watched.is_some(), listing::list(data, previous.index.as_ref().map(index::Index::data_recorded), watched));
    timer.step("list the data (stat every file, read the folders that changed)");
    if let Some(found) = listing.as_ref().and_then(|listing| previous.unchanged(data, listing, options)) {
        crate::staging::clean_leftovers(&previous.target.dir);
        let (resources, records, base) = (found.resources, found.records, found.started_ns);
        let report = write::WriteReport::default();
        return Ok(BuildSummary { resources, records, report, up_to_date: true, base, told });
    }
    let mut loaded = load_changed(data, listing, previous.index.as_ref())?;
    timer.step("load (read what changed)");
    let mut settings = options.settings(&loaded.dataset.config, loaded.dataset.data_hash.clone())?;
    let bulk_dates =
        dates::from_git(data, &mut settings, options.source_date_epoch, previous.index.as_ref(), &loaded.dataset);
    let dataset = &loaded.dataset;
    let summary = |report, up_to_date| BuildSummary::of(dataset, report, up_to_date);
    let decision = decide(&previous, &settings, &loaded.files);
    timer.step("decide (check the tree against the index)");
    if let Decision::UpToDate = decision {
        let base = previous.record_up_to_date(started_ns, loaded.files, loaded.folders);
        timer.step("record");
        return Ok(summary(write::WriteReport::default(), (true, base, told)));
    }
    let changed = match decision {
        Decision::Partial(index) => Some(Changed::since(index, &loaded.files)),
        _ => None,
    };
    let data = std::mem::take(&mut loaded.files);
    let (mut rendering, extracts, index_writer) =
        extract_then_read_docs(&mut previous, dataset, &settings, changed, data, options.verify)?;
    timer.step("extract (names and filter values)");
    let outputs = plan::plan(dataset, &settings, &extracts);
    rendering.renderer.set_extracts(extracts);
    timer.step("plan");
    let lists = list_hashes(dataset);
    let documents = rendering.documents(&outputs, previous.index.as_ref(), progress);
    let tree = write::TreeWriter {
        target: &mut previous.target,
        manifest: manifest_of(&settings, dataset),
        lists: &lists,
        bulk_dates: bulk_dates.as_ref(),
        previous: write::Previous {
            index: previous.index.as_ref(),
            listed: std::mem::take(&mut previous.listed),
            killed: previous.journal.killed.then(|| previous.journal.paths.iter().cloned().collect()),
        },
    };
    let written = tree.write(&documents)?;
    let patched = written.report.manifest_patched.map(|n| format!(" (manifest patched: {n} entries changed)"));
    timer.step(&format!("render, write and commit{}", patched.unwrap_or_default()));
    let dir = previous.target.dir.clone();
    let docs = written.docs.table(previous.index.take().map(|index| index.docs));
    let report = written.report.with_totals(docs.totals());
    drop(previous);
    drop(outputs);
    let schemas = rendering.renderer.schemas();
    let (manifest, data) = (manifest_stamp(&dir)?, index::DataFiles::default()); // data: written already
    let folders = loaded.folders.notes;
    let index = index::Index { manifest, started_ns, settings, lists, schemas, data, folders, docs };
    record_index(&dir, index_writer, &index);
    timer.step("write the index");
    Ok(summary(report, (false, started_ns, told)))
}

/// Prepares a build's rendering, and extracts the names and filter values it needs. What
/// changed is known: the previous data table goes first; the new one (`data`) goes into the
/// index begun here before the extract (which keeps only the hashes of the records it reads,
/// 40 bytes each, beside a resource's kept rows), and the previous documents' table is read
/// last, so that no two of these tables are held at once.
fn extract_then_read_docs<'d>(
    previous: &mut PreviousBuild,
    dataset: &'d load::Dataset,
    settings: &'d BuildSettings,
    changed: Option<Changed>,
    data: index::DataFiles,
    verify: bool,
) -> Result<(Rendering<'d>, extract::Extracts, Result<index::IndexWriter>)> {
    previous.forget_data_table();
    // every later read of a record is held to the hash the load recorded (docs/builds.md, "A
    // file changed during a build"), kept apart from `data`, which goes before the extract
    dataset.expect_loaded(|segment, kind, id| data.hash_of(&index::Place { segment, kind, id }));
    let mut rendering = Rendering::new(dataset, settings, previous, changed);
    // The extract needs only the hashes of the records it reads: the data table goes into the
    // new index now, and is let go.
    let extracted = dataset.resources.keys().filter(|s| extract::is_extracted(settings, s, rendering.extract_dirty(s)));
    let store = index::ExtractStore::new(&previous.target.dir, &data, extracted.map(String::as_str), !verify);
    let index_writer = index::IndexWriter::begin(&previous.target.dir, &data);
    drop(data);
    let mut extracts = extract::extract(dataset, settings, |segment| rendering.extract_dirty(segment), Some(&store))
        .map_err(Problems::all)?;
    drop(store);
    previous.read_docs()?;
    if rendering.take_back(previous) {
        // Every document is rendered after all (the documents' table or a changed record's
        // previous document could not be used): so is every resource's extract (read anew:
        // the kept rows were checked against the data table let go).
        rendering = Rendering::new(dataset, settings, previous, None);
        extracts = extract::extract(dataset, settings, |_| true, None).map_err(Problems::all)?;
    }
    Ok((rendering, extracts, index_writer))
}

/// Refuses an output folder inside the data folder: every later build would read it as data.
fn require_out_beside(data: &Path, out: &Path) -> Result<()> {
    if crate::fsutil::is_inside(out, data) {
        anyhow::bail!(
            "--out {} is inside --data {}: every later build would read the tree's own files as data and fail; \
             write the tree beside the data folder instead (e.g. --out out)",
            out.display(),
            data.display()
        );
    }
    Ok(())
}

/// The stamp of the manifest just committed into `dir`, for the index.
fn manifest_stamp(dir: &Path) -> Result<fsutil::Stamp> {
    let path = dir.join(manifest::MANIFEST_FILE);
    fsutil::Stamp::of_file(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// What the previous build left in the output folder, opened (and locked) for this one.
struct PreviousBuild {
    /// The output folder, locked against other builds until this one ends.
    target: crate::staging::FolderLock,
    /// A killed commit's journal.
    journal: write::Journal,
    /// The build index, when it describes the tree in place.
    index: Option<index::Index>,
    /// Paths known to be ours besides the index's: the journal's, and the manifest's when
    /// there is no index.
    listed: Vec<String>,
    /// The tree in place, opened without following links inside it.
    tree: Option<crate::tree::dir::TreeDir>,
    /// The index's documents' table, until it is read ([`PreviousBuild::read_docs`]).
    docs: Option<index::DeferredDocs>,
}

impl PreviousBuild {
    /// Locks `out` (waiting for another build) and reads what the previous build left there:
    /// its index only when `use_index` (else the build reads every file, as without one).
    fn open(out: &Path, use_index: bool) -> Result<PreviousBuild> {
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
        let journal = write::read_journal(&dir);
        let (index, docs) = match use_index.then(|| index::Index::read_deferred(&dir)).flatten() {
            Some((index, docs)) => (Some(index), Some(docs)),
            None => (None, None),
        };
        let mut listed = journal.paths.clone();
        if index.is_none() {
            listed.extend(previous::previous_files(&dir, !journal.paths.is_empty())?);
        }
        let tree = Some(crate::tree::dir::TreeDir::open(&dir)?);
        Ok(PreviousBuild { target, journal, index, listed, tree, docs })
    }

    /// Reads the index's documents' table (left unread by [`PreviousBuild::open`], so that the
    /// load does not hold it). One that cannot be used is noted, and the build goes on without
    /// the index: every document is rendered, and the previous manifest says what is ours.
    fn read_docs(&mut self) -> Result<()> {
        let (Some(index), Some(docs)) = (self.index.as_mut(), self.docs.take()) else { return Ok(()) };
        match docs.read() {
            Some(docs) => index.docs = docs,
            None => {
                self.index = None;
                let dir = self.target.dir.clone();
                self.listed.extend(previous::previous_files(&dir, !self.journal.paths.is_empty())?);
            }
        }
        Ok(())
    }

    /// What the data holds, when every file of it is as the build that left an intact tree
    /// recorded it, and the settings are the same: the tree is up to date.
    fn unchanged(
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
    fn counted_from<'w>(&self, watched: Option<&'w watched::WatchedChanges>) -> Option<&'w watched::WatchedChanges> {
        watched.filter(|watched| self.index.as_ref().is_some_and(|index| index.started_ns == watched.base))
    }

    /// Lets go of the previous build's data table (a table line's or file's entry each), once
    /// what changed is known: the write needs only its document table, and holding both is
    /// the peak of an edit build.
    fn forget_data_table(&mut self) {
        if let Some(index) = self.index.as_mut() {
            index.data = index::DataFiles::default();
        }
    }

    /// Ends a build that found the tree up to date: the stamps of data files touched without
    /// a change, or read because they had changed too shortly before the previous build, are
    /// recorded (with this build's start) so that the next build need not read them again; so
    /// are the folders, when some had to be read.
    /// Returns the start of the build the index then records (0 when it cannot be read).
    fn record_up_to_date(&mut self, started_ns: i64, files: index::DataFiles, folders: Folders) -> i64 {
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

/// The data as this build loaded it: the dataset, and each data file's stamp, hash and name
/// for the index.
struct Loaded {
    dataset: load::Dataset,
    files: index::DataFiles,
    folders: Folders,
}

/// What the listing of the data folder found of its folders, for the index.
struct Folders {
    /// What the listing noted of them (`None` when the data folder was walked, not listed).
    notes: Option<index::FolderNotes>,
    /// How many folders it read rather than trusted.
    read: usize,
}

/// Loads `data`, reading only the files whose stamps say they may have changed since the
/// build `previous` describes: the files `listing` found (when the data folder could be listed;
/// else it is walked, and each file stat'ed). Fails with the problems found before references
/// are checked.
fn load_changed(data: &Path, listing: Option<listing::Listing>, previous: Option<&index::Index>) -> Result<Loaded> {
    use crate::fsutil::Stamp;
    let known = |old: index::DataFile| load::Known { name: old.name, hash: old.hash.0 };
    let seen = |file: &Path, listed: Option<&listing::FileStat>| -> load::Seen {
        if let Some(listed) = listed {
            let known = previous.zip(listed.entry()).map(|(index, number)| known(index.data.file_at(number)));
            return load::Seen { stamp: Some(listed.stamp), known };
        }
        let Some(stamp) = std::fs::metadata(file).ok().map(|meta| Stamp::of(&meta)) else {
            return load::Seen::default();
        };
        let old = previous.and_then(|index| {
            let old = index.data.get(&fsutil::relative(data, file))?;
            (old.stamp == stamp && index.trusted(&stamp)).then_some(old)
        });
        load::Seen { stamp: Some(stamp), known: old.map(known) }
    };
    let folders = match &listing {
        Some(listing) => Folders { notes: Some(listing.notes.clone()), read: listing.folders_read },
        None => Folders { notes: None, read: 0 },
    };
    let files = listing.map(|listing| listing.blocks);
    let (dataset, problems, files) = load::load_reusing(data, &seen, files, previous.map(|index| &index.data));
    if !problems.is_empty() {
        return Err(Problems::before_references(problems).into());
    }
    Ok(Loaded { dataset, files, folders })
}

/// What a build does, given what the previous one left.
#[derive(Clone, Copy)]
enum Decision<'i> {
    /// The tree is intact and was built from the same data and settings: nothing to write.
    UpToDate,
    /// The tree is intact, and records were only changed or added since the build this index
    /// describes: only their documents (and the lists, root and meta) are rendered.
    Partial(&'i index::Index),
    /// Every document is rendered.
    Full,
}

/// Decides what this build does. The tree in place is trusted to be as the previous build's
/// index says it left it: no file of it is looked at here (see docs/builds.md, "What a build
/// trusts"); `gen build --verify` reads every one.
fn decide<'i>(previous: &'i PreviousBuild, settings: &BuildSettings, files: &index::DataFiles) -> Decision<'i> {
    let (Some(index), Some(_)) = (&previous.index, &previous.tree) else { return Decision::Full };
    let same = index.settings == *settings;
    let partial = only_changes_and_additions(index, settings, files);
    if previous.journal.killed || !(same || partial) {
        return Decision::Full;
    }
    if same { Decision::UpToDate } else { Decision::Partial(index) }
}

/// Records the build index beside the tree in `dir` (its data table written already by
/// `writer`), for the next build, and removes the journal of the commit: the tree is whole. An
/// index that cannot be written is a warning (the next build renders every document).
fn record_index(dir: &Path, writer: Result<index::IndexWriter>, index: &index::Index) {
    match writer.and_then(|writer| writer.finish(index)) {
        Ok(()) => {
            let _ = std::fs::remove_file(write::journal_path(dir));
        }
        Err(e) => say!("warning: {e:#}: the next build renders every document again"),
    }
}

/// The manifest of a tree built with `settings` from `dataset`, its files not yet listed.
fn manifest_of(settings: &BuildSettings, dataset: &load::Dataset) -> Manifest {
    let resources = dataset
        .resources
        .iter()
        .map(|(segment, resource)| (segment.clone(), manifest::ResourceInfo { count: resource.records.len() as u64 }))
        .collect();
    Manifest { settings: settings.clone(), resources, files: Default::default() }
}

/// Each list's entries (ids and names, in order) as one hash: a list whose hash is unchanged
/// has the same pages.
fn list_hashes(dataset: &load::Dataset) -> BTreeMap<String, String> {
    dataset
        .resources
        .iter()
        .map(|(segment, resource)| {
            let mut hasher = blake3::Hasher::new();
            for record in &resource.records {
                hasher.update(&record.id.to_le_bytes());
                hasher.update(record.name.as_deref().unwrap_or("\0").as_bytes());
                hasher.update(b"\0");
            }
            (segment.clone(), hasher.finalize().to_hex().to_string())
        })
        .collect()
}

/// True when, since the build `index` describes, the data changed only by records and
/// sub-documents changed or added (and list order), with the same options and `gen.json`:
/// then only their documents need rendering. A removed or renamed record may be referred to by
/// any other, so it needs every document checked again.
fn only_changes_and_additions(index: &index::Index, settings: &BuildSettings, data_files: &index::DataFiles) -> bool {
    let config_hash = |files: &index::DataFiles| files.get(config::CONFIG_FILE).map(|f| f.hash.0);
    index.settings.same_options(settings)
        && config_hash(&index.data) == config_hash(data_files)
        && data_files.keeps_every_file_and_name_of(&index.data)
}
