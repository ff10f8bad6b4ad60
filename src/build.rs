//! The build: `data/` → the tree. [`build`] reads top to bottom as its steps, one call each:
//! open what the previous build left (its [`index`], a killed commit's journal), list the data
//! folder, [`load`] what changed, check the tree against the index (decide `UpToDate | Partial
//! | Full`), [`plan`] every document, render ([`rendering`]: the documents as a lazy stream),
//! [`write`](mod@write) them (a [`write::Output`] takes the stream: the tree writer stages,
//! then commits), and record the new index.
//!
//! Render and write meet at one seam: [`rendering::Documents`], a stream of
//! [`rendering::Document`]s (rendered, kept from the previous build, or late), taken by a
//! writer. What bounds the memory of the write is stated there: one rendered body per worker
//! at a time, and nothing kept of a document but a `Copy` receipt (docs/builds.md, "The steps,
//! and the seam between rendering and writing").
//!
//! The modules, in the order the build calls them:

// The previous build: its state kept beside the tree (the index), and the tree opened without
// following links.
pub(crate) mod state;
pub mod index;

// Load (the data folder's room, [`crate::data`], lists and loads it): what the extract takes
// from each record.
pub(crate) mod extract;

// Decide: a build that finds every data file as the previous one left it does nothing.
mod up_to_date;

// Plan: every document and path of the tree, pure.
pub(crate) mod plan;

// Render: references checked and made absolute; schemas inferred; the OpenAPI document.
pub mod render;
pub(crate) mod schema;
pub(crate) mod openapi;

// Write: the writer's trait, and the tree writer (stage what changed beside the tree, then
// commit it).
pub mod write;

// What the previous build left: its index, journal and tree, opened and locked; a previous
// tree without an index, by what its manifest lists.
mod previous;
use previous::PreviousBuild;

// The dates a build gives its tree, from git when the data is committed.
mod dates;

// The render step: which documents a build renders, yielded as a stream to the writer, and
// what changed since the previous one.
pub(crate) mod rendering;
use rendering::{Changed, Rendering};

use crate::data::recorded::{DataFile, DataFiles, FolderNotes};
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
    /// Write an archive (docs/archive.md, "A built API as an archive") in place of the tree
    /// (`gen build --archive`): `write::ArchiveWriter` takes the documents.
    pub archive: bool,
    /// What a watcher of the data folder saw change since a build (`gen serve --watch`): when
    /// the tree's index is that build's, what it did not see change is not `stat`ed.
    pub watched: Option<std::sync::Arc<watched::WatchedChanges>>,
}

impl BuildOptions {
    /// The settings of a tree built with these options from data with `config` and `data_hash`.
    pub(crate) fn settings(&self, config: &config::DataSettings, data_hash: String) -> Result<BuildSettings> {
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
    pub(crate) fn of_tree(settings: &BuildSettings) -> BuildOptions {
        BuildOptions {
            base_url: None,
            links: Some(settings.links),
            pretty: settings.pretty,
            gzip: settings.gzip,
            source_date_epoch: None,
            verify: false,
            archive: false,
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
    pub(crate) base: i64,
    /// True when the build took what a watcher saw change ([`BuildOptions::watched`]) and
    /// trusted the rest: the tree's index was the one the changes were counted from.
    pub(crate) told: bool,
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
        problems.extend(
            extract::extract(&dataset, &settings, |_| false, None, Default::default()).err().unwrap_or_default(),
        );
        problems.sort();
    }
    if problems.is_empty() { Ok(dataset) } else { Err(Problems { list: problems, references_unchecked }.into()) }
}

/// Builds the tree of `data` into `out`, doing only the work that the change since the previous
/// build needs (docs/builds.md). Its steps, each one call: open what the previous build left,
/// list the data, load what changed, check the tree against the index (decide), plan every
/// document, render (a lazy stream), write (the tree writer takes the stream, then commits),
/// and record the new index.
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
    let mut previous = PreviousBuild::open(out, !options.verify, options.archive)?;
    timer.step("open the previous build (lock, index, journal)");
    let (told, listing) = list(data, &previous, options);
    timer.step("list the data (stat every file, read the folders that changed)");
    if let Some(found) = listing.as_ref().and_then(|listing| previous.unchanged(data, listing, options)) {
        crate::staging::clean_leftovers(&previous.target.dir);
        let (resources, records, base) = (found.resources, found.records, found.started_ns);
        let report = write::WriteReport::default();
        return Ok(BuildSummary { resources, records, report, up_to_date: true, base, told });
    }
    let mut loaded = load_changed(data, listing, previous.index.as_ref())?;
    timer.step("load (read what changed)");
    let (settings, bulk_dates) = settings_of(data, options, &previous, &loaded.dataset)?;
    let dataset = &loaded.dataset;
    let summary = |report, up_to_date| BuildSummary::of(dataset, report, up_to_date);
    let changed = match decide(&previous, &settings, &loaded.files) {
        Decision::UpToDate => {
            timer.step("decide (check the tree against the index)");
            let base = previous.record_up_to_date(started_ns, loaded.files, loaded.folders);
            timer.step("record");
            return Ok(summary(write::WriteReport::default(), (true, base, told)));
        }
        Decision::Partial(index) => Some(Changed::since(index, &loaded.files)),
        Decision::Full => None,
    };
    timer.step("decide (check the tree against the index)");
    let data = std::mem::take(&mut loaded.files);
    let planned = plan_documents(&mut previous, dataset, &settings, (changed, data, options.verify), &timer)?;
    let mut rendered = None; // an archive build says how many documents it rendered (`GEN_TIMINGS`)
    let written = if options.archive {
        let manifest = manifest_of(&settings, dataset);
        let (target, index, bulk_dates, fresh) =
            (&mut previous.target, previous.index.as_ref(), bulk_dates.as_ref(), options.verify);
        let writer = write::ArchiveWriter { target, manifest, lists: &planned.lists, bulk_dates, index, fresh };
        let documents = planned.rendering.documents(&planned.plan, index, progress);
        rendered = timer.on().then(|| documents.to_render());
        writer.write(&documents)?
    } else {
        let tree = tree_writer(&mut previous, &settings, dataset, &planned.lists, bulk_dates.as_ref());
        let documents = planned.rendering.documents(&planned.plan, tree.previous.index, progress);
        tree.write(&documents)?
    };
    let patched = written.report.manifest_patched.map(|n| format!(" (manifest patched: {n} entries changed)"));
    let patched = patched.or(rendered.map(|n| format!(" (archive: {n} documents rendered)")));
    timer.step(&format!("render, write and commit{}", patched.unwrap_or_default()));
    let report = record(previous, written, planned, (started_ns, &settings, loaded.folders.notes))?;
    timer.step("write the index");
    let summary = summary(report, (false, started_ns, told));
    drop_aside(loaded.dataset);
    Ok(summary)
}

/// Lets go of `value` on a thread of its own (or here, when no thread can be started): at the
/// end of a build, a million records' dataset and documents' table take a tenth of a second
/// to free, which the build need not wait for.
fn drop_aside<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new().name("gen-drop".into()).spawn(move || drop(value));
}

/// The list step: the data folder's files with their stamps, the folders that changed read
/// (`None` when it must be walked). Returns too whether a watcher's changes were taken (see
/// [`BuildOptions::watched`]).
fn list(data: &Path, previous: &PreviousBuild, options: &BuildOptions) -> (bool, Option<listing::Listing>) {
    let watched = previous.counted_from(options.watched.as_deref());
    let recorded = previous.index.as_ref().map(index::Index::data_recorded);
    (watched.is_some(), listing::list(data, recorded, watched))
}

/// The settings of the tree this build makes, and the bulk-data files' dates when git gave
/// them with the build's date.
fn settings_of(
    data: &Path,
    options: &BuildOptions,
    previous: &PreviousBuild,
    dataset: &load::Dataset,
) -> Result<(BuildSettings, Option<BTreeMap<String, i64>>)> {
    let mut settings = options.settings(&dataset.config, dataset.data_hash.clone())?;
    let bulk_dates = dates::from_git(data, &mut settings, options.source_date_epoch, previous.index.as_ref(), dataset);
    Ok((settings, bulk_dates))
}

/// What the plan step gives the render step: every document planned, how they are rendered,
/// and each list's hash; and the new index, begun.
struct Planned<'d> {
    rendering: Rendering<'d>,
    plan: plan::Plan<'d>,
    lists: BTreeMap<String, String>,
    index_writer: Result<index::IndexWriter>,
}

/// The plan step: the names and filter values extracted (see [`extract_then_read_docs`]),
/// then every document of the tree planned.
fn plan_documents<'d>(
    previous: &mut PreviousBuild,
    dataset: &'d load::Dataset,
    settings: &'d BuildSettings,
    (changed, data, verify): (Option<Changed>, DataFiles, bool),
    timer: &crate::progress::StepTimer,
) -> Result<Planned<'d>> {
    let lists = list_hashes(dataset);
    let (mut rendering, extracts, index_writer) =
        extract_then_read_docs(previous, (dataset, settings, &lists), (changed, data, verify), timer)?;
    timer.step("extract (names and filter values)");
    let plan = plan::plan(dataset, settings, &extracts);
    rendering.renderer.set_extracts(extracts);
    timer.step("plan");
    Ok(Planned { rendering, plan, lists, index_writer })
}

/// The writer of this build's output: the tree, in the output folder `previous` holds locked.
fn tree_writer<'a>(
    previous: &'a mut PreviousBuild,
    settings: &BuildSettings,
    dataset: &load::Dataset,
    lists: &'a BTreeMap<String, String>,
    bulk_dates: Option<&'a BTreeMap<String, i64>>,
) -> write::TreeWriter<'a> {
    write::TreeWriter {
        target: &mut previous.target,
        manifest: manifest_of(settings, dataset),
        lists,
        bulk_dates,
        previous: write::Previous {
            index: previous.index.as_ref(),
            listed: std::mem::take(&mut previous.listed),
            killed: previous.journal.killed.then(|| previous.journal.paths.iter().cloned().collect()),
        },
    }
}

/// The record step: the new build index, written beside the tree for the next build (what the
/// write left, the documents' table with it); returns the write's report with its totals.
fn record(
    mut previous: PreviousBuild,
    written: write::Written<'_>,
    planned: Planned<'_>,
    (started_ns, settings, folders): (i64, &BuildSettings, Option<FolderNotes>),
) -> Result<write::WriteReport> {
    let dir = previous.target.dir.clone();
    let docs = written.docs.table(previous.index.take().map(|index| index.docs));
    // an archive's report counts its own files (its documents are not files)
    let archive =
        previous.tree.as_ref().is_some_and(|output| output.archive().is_some()) || crate::archive::is_archive(&dir);
    let report = if archive { written.report } else { written.report.with_totals(docs.totals()) };
    drop(previous);
    let Planned { rendering, plan, lists, index_writer } = planned;
    drop(plan);
    let schemas = rendering.renderer.schemas();
    let (manifest, data) = (manifest_stamp(&dir)?, DataFiles::default()); // data: written already
    let settings = settings.clone();
    let member_table = crate::bulk::members::Table::recorded(&state::file(&dir, state::BULK));
    let index = index::Index { manifest, started_ns, settings, lists, schemas, data, folders, member_table, docs };
    record_index(&dir, index_writer, &index);
    drop_aside(index);
    Ok(report)
}

/// Prepares a build's rendering, and extracts the names and filter values it needs. What
/// changed is known: the previous data table goes first; the new one (`data`) goes into the
/// index begun here before the extract (which keeps only the hashes of the records it reads,
/// 40 bytes each, beside a resource's kept rows), and the previous documents' table is read
/// while the extract runs, once both data tables are let go: no two of these tables are held
/// at once.
fn extract_then_read_docs<'d>(
    previous: &mut PreviousBuild,
    (dataset, settings, lists): (&'d load::Dataset, &'d BuildSettings, &BTreeMap<String, String>),
    (changed, data, verify): (Option<Changed>, DataFiles, bool),
    timer: &crate::progress::StepTimer,
) -> Result<(Rendering<'d>, extract::Extracts, Result<index::IndexWriter>)> {
    previous.forget_data_table();
    // every later read of a record is held to the hash the load recorded (docs/builds.md, "A
    // file changed during a build"), kept apart from `data`, which goes before the extract
    dataset.expect_loaded(|segment| {
        let mut cursor = data.cursor(segment);
        move |kind: Option<&str>, id| cursor.hash(kind, id)
    });
    let mut rendering = Rendering::new(dataset, settings, previous, changed.map(|changed| (changed, lists)));
    // The extract needs only the hashes of the records it reads: the data table goes into the
    // new index now, and is let go.
    let extracted = dataset.resources.keys().filter(|s| extract::is_extracted(settings, s, rendering.extract_dirty(s)));
    let mut store = index::ExtractStore::new(&previous.target.dir, &data, extracted.map(String::as_str), !verify);
    for segment in dataset.resources.keys().filter(|segment| rendering.may_keep_extract(segment)) {
        store.compare(segment, rendering.changed_records(segment));
    }
    timer.step("  the extract's record hashes");
    let index_writer = index::IndexWriter::begin(&previous.target.dir, &data);
    drop(data);
    timer.step("  the index's data table written");
    // The previous documents' table is read meanwhile, unless rows are to be read (see
    // [`PreviousBuild::read_docs_meanwhile`]).
    let wanted = |segment: &str| rendering.extract_dirty(segment);
    let every = dataset.resources.keys().filter(|s| extract::is_extracted(settings, s, wanted(s))).count();
    let held = previous
        .read_docs_meanwhile(|| extract::held(dataset, settings, wanted, &store), |held| held.len() == every)?;
    let mut extracts = extract::extract(dataset, settings, wanted, Some(&store), held).map_err(Problems::all)?;
    drop(store);
    previous.read_docs()?;
    timer.step("  extracted, and the previous documents' table read");
    if rendering.take_back(previous) {
        // Every document is rendered after all (the documents' table or a changed record's
        // previous document could not be used): so is every resource's extract (read anew:
        // the kept rows were checked against the data table let go).
        rendering = Rendering::new(dataset, settings, previous, None);
        extracts = extract::extract(dataset, settings, |_| true, None, Default::default()).map_err(Problems::all)?;
    } else {
        rendering.keep_extracts(&extracts);
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

/// The stamp of the manifest (of an archive: the root) just committed into `dir`, for the index.
fn manifest_stamp(dir: &Path) -> Result<fsutil::Stamp> {
    let path = state::commit_file(dir);
    fsutil::Stamp::of_file(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// The data as this build loaded it: the dataset, and each data file's stamp, hash and name
/// for the index.
struct Loaded {
    dataset: load::Dataset,
    files: DataFiles,
    folders: Folders,
}

/// What the listing of the data folder found of its folders, for the index.
struct Folders {
    /// What the listing noted of them (`None` when the data folder was walked, not listed).
    notes: Option<FolderNotes>,
    /// How many folders it read rather than trusted.
    read: usize,
}

/// Loads `data`, reading only the files whose stamps say they may have changed since the
/// build `previous` describes: the files `listing` found (when the data folder could be listed;
/// else it is walked, and each file stat'ed). Fails with the problems found before references
/// are checked.
fn load_changed(data: &Path, listing: Option<listing::Listing>, previous: Option<&index::Index>) -> Result<Loaded> {
    use crate::fsutil::Stamp;
    let known = |old: DataFile| load::Known { name: old.name, hash: old.hash.0 };
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
fn decide<'i>(previous: &'i PreviousBuild, settings: &BuildSettings, files: &DataFiles) -> Decision<'i> {
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
    use rayon::prelude::*;
    dataset
        .resources
        .par_iter()
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
fn only_changes_and_additions(index: &index::Index, settings: &BuildSettings, data_files: &DataFiles) -> bool {
    let config_hash = |files: &DataFiles| files.get(config::CONFIG_FILE).map(|f| f.hash.0);
    index.settings.same_options(settings)
        && config_hash(&index.data) == config_hash(data_files)
        && data_files.keeps_every_file_and_name_of(&index.data)
}
