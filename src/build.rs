//! The build: `data/` → the tree, as [`load`] → [`plan`] → [`render`] → [`write`], with the
//! [`index`] beside the tree telling what changed since the previous build.

pub mod dataset;
pub mod index;
pub mod load;
pub mod openapi;
pub mod plan;
pub mod render;
pub mod schema;
pub mod tree_fs;
pub mod validate;
pub mod walk;
pub mod write;

use crate::manifest::{self, GENERATOR, Manifest, TreeSettings};
use crate::problem::Problems;
use crate::{config, date, paging};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Options of `gen build`, beyond the data folder's own settings: what the command line asks.
/// [`BuildOptions::settings`] turns them, with the data's settings, into the [`TreeSettings`] a
/// tree is built with.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Overrides the data's `base_url`.
    pub base_url: Option<String>,
    pub links: Option<paging::LinkStyle>,
    pub pretty: bool,
    /// Also write a precompressed `.gz` sibling of every document.
    pub gzip: bool,
    /// Seconds since the epoch to record as the build date (from `SOURCE_DATE_EPOCH`).
    pub source_date_epoch: Option<i64>,
}

impl BuildOptions {
    /// The settings of a tree built with these options from data with `config` and `data_hash`.
    pub fn settings(&self, config: &config::DataSettings, data_hash: String) -> Result<TreeSettings> {
        let base_url = self.base_url.clone().unwrap_or_else(|| config.base_url.clone());
        config::check_base_url(&base_url).map_err(anyhow::Error::msg)?;
        Ok(TreeSettings {
            format: manifest::FORMAT,
            generator: GENERATOR.to_string(),
            base_url,
            links: self.links.unwrap_or(paging::LinkStyle::Query),
            pretty: self.pretty,
            gzip: self.gzip,
            page_sizes: paging::page_sizes(&config.page_sizes),
            data_hash,
            built_at: self.source_date_epoch.map(date::rfc3339),
        })
    }

    /// The options that build a tree like the one with `settings` again (as `gen serve --watch`
    /// rebuilds): its link style, indentation and gzip copies. `base_url` is left out on
    /// purpose: it comes from the data's `gen.json`, read anew by each rebuild, so that an edit
    /// of it takes effect. The build date is not a setting of the tree: `source_date_epoch` is
    /// `None`.
    pub fn of_tree(settings: &TreeSettings) -> BuildOptions {
        BuildOptions {
            base_url: None,
            links: Some(settings.links),
            pretty: settings.pretty,
            gzip: settings.gzip,
            source_date_epoch: None,
        }
    }
}

/// What a build did, for its summary line.
#[derive(Debug, Clone)]
pub struct BuildSummary {
    pub resources: usize,
    pub records: usize,
    pub report: write::WriteReport,
    /// True when the output already held this build and nothing was done.
    pub up_to_date: bool,
}

/// Loads and fully validates `data`, returning the dataset or every problem found.
pub fn check(data: &Path) -> Result<load::Dataset> {
    load::require_folder(data)?;
    let (dataset, mut problems) = load::load(data);
    let references_unchecked = !problems.is_empty();
    if problems.is_empty() {
        // References can only be checked once the whole index is known.
        let renderer = render::Renderer { dataset: &dataset, base_url: "", pretty: false };
        let files: Vec<&Path> = dataset
            .resources
            .values()
            .flat_map(|r| &r.records)
            .flat_map(|r| std::iter::once(r.file.as_path()).chain(r.subdocs.iter().map(|s| s.file.as_path())))
            .collect();
        use rayon::prelude::*;
        problems = files.par_iter().filter_map(|f| renderer.render_file(f).err()).flatten().collect();
        problems.sort();
    }
    if problems.is_empty() { Ok(dataset) } else { Err(Problems { list: problems, references_unchecked }.into()) }
}

/// Builds the tree of `data` into `out`: load → plan → render → write, doing only the work that
/// the change since the previous build needs (docs/builds.md):
/// - data files whose stamp is unchanged (and old enough to trust) are not read again;
/// - when nothing changed and every file of the tree is as the previous build left it, nothing
///   is written at all;
/// - when records were changed or added (none removed or renamed) and the tree is intact, only
///   their documents, the lists whose entries changed, the root, meta and OpenAPI documents are
///   rendered; otherwise every document is;
/// - either way, only files whose bytes change are written, and only files gone are removed.
pub fn build(data: &Path, out: &Path, options: &BuildOptions, progress: &write::Progress) -> Result<BuildSummary> {
    use index::{DataFile, Index, Stamp};
    let started_ns = index::now_ns();
    load::require_folder(data)?;
    let mut target = crate::staging::FolderLock::open(out)?;
    let dir = target.dir.clone();
    let journal = if target.exists { write::read_journal(&dir) } else { write::Journal::default() };
    let previous = if target.exists { Index::read(&dir) } else { None };
    let mut listed = journal.paths.clone();
    if target.exists && previous.is_none() {
        listed.extend(previous_files(&dir, !journal.paths.is_empty())?);
    }
    let tree = if target.exists { Some(tree_fs::TreeDir::open(&dir)?) } else { None };

    // Load, reading only the files whose stamps say they may have changed.
    let stamps: std::sync::Mutex<std::collections::HashMap<String, Stamp>> = Default::default();
    let relative = |file: &Path| file.strip_prefix(data).unwrap_or(file).to_string_lossy().replace('\\', "/");
    if let Ok(meta) = std::fs::metadata(data.join(config::CONFIG_FILE)) {
        stamps.lock().expect("no panic while loading").insert(config::CONFIG_FILE.to_string(), Stamp::of(&meta));
    }
    let known = |file: &Path| -> Option<load::Known> {
        let stamp = Stamp::of(&std::fs::metadata(file).ok()?);
        let key = relative(file);
        let index = previous.as_ref();
        let old =
            index.and_then(|index| index.data.get(&key).filter(|old| old.stamp == stamp && index.trusted(&stamp)));
        stamps.lock().expect("no panic while loading").insert(key, stamp);
        Some(load::Known { name: old?.name.clone(), hash: old?.hash.0 })
    };
    let (dataset, problems, hashes) = load::load_reusing(data, &known);
    if !problems.is_empty() {
        return Err(Problems::before_references(problems).into());
    }
    let settings = options.settings(&dataset.config, dataset.data_hash.clone())?;
    let summary = |report, up_to_date| BuildSummary {
        resources: dataset.resources.len(),
        records: dataset.record_count(),
        report,
        up_to_date,
    };

    // What the data is now, for the index.
    let stamps = stamps.into_inner().expect("no panic while loading");
    let mut data_files: BTreeMap<String, DataFile> = hashes
        .into_iter()
        .map(|(rel, hash)| {
            let stamp = stamps.get(&rel).copied().unwrap_or(Stamp { size: 0, mtime_ns: 0, ctime_ns: i64::MAX, ino: 0 });
            (rel, DataFile { stamp, hash: index::Hash(hash), name: None })
        })
        .collect();
    drop(stamps);
    for record in dataset.resources.values().flat_map(|r| &r.records) {
        if let Some(file) = data_files.get_mut(&relative(&record.file)) {
            file.name.clone_from(&record.name);
        }
    }
    let lists = list_hashes(&dataset);

    // The tree is checked only when this build could reuse it (up to date, or in part): a
    // check may read every file the previous build wrote (see `Index::check_file`).
    let verified = match (&previous, &tree) {
        (Some(index), Some(tree))
            if !journal.killed
                && (index.settings == settings || only_changes_and_additions(index, &settings, &data_files)) =>
        {
            index.verify(tree)
        }
        _ => index::Verified::Changed,
    };
    let intact = previous.as_ref().filter(|_| verified != index::Verified::Changed);
    if let Some(index) = intact
        && index.settings == settings
    {
        // Up to date. Stamps of data files touched without a change are kept for next time, and
        // tree files read to be checked need not be read again.
        let data_touched =
            index.data.iter().any(|(rel, old)| data_files.get(rel).is_none_or(|new| new.stamp != old.stamp));
        if data_touched || verified == (index::Verified::Intact { rehashed: true }) {
            let index = Index { started_ns, data: data_files, ..clone_index(index) };
            let _ = index.write(&dir);
        }
        crate::staging::clean_leftovers(&dir);
        return Ok(summary(write::WriteReport::default(), true));
    }

    // Rendered in part, or whole (see `only_changes_and_additions`).
    let partial = intact.filter(|index| only_changes_and_additions(index, &settings, &data_files));
    let outputs = plan::plan(&dataset, &settings);
    let mut renderer = render::TreeRenderer::new(&dataset, &settings);
    let changed: std::collections::HashSet<&str> = data_files
        .iter()
        .filter(|(rel, new)| partial.and_then(|index| index.data.get(*rel)).is_none_or(|old| old.hash != new.hash))
        .map(|(rel, _)| rel.as_str())
        .collect();
    let partial = partial.filter(|index| {
        renderer.seed_schemas(index.schemas.clone());
        tree.as_ref().is_some_and(|tree| forget_previous(&renderer, index, tree, &changed))
    });
    if partial.is_none() {
        renderer = render::TreeRenderer::new(&dataset, &settings);
    }
    let lists_changed: std::collections::HashSet<&str> = lists
        .iter()
        .filter(|(segment, hash)| partial.and_then(|index| index.lists.get(*segment)) != Some(hash))
        .map(|(segment, _)| segment.as_str())
        .collect();
    let is_changed = |file: &Path| changed.contains(relative(file).as_str());
    let dirty = |output: &plan::Output<'_>| {
        partial.is_none()
            || match output.content {
                plan::Content::Root | plan::Content::Meta => true,
                plan::Content::Record { segment, index } => is_changed(&dataset.resources[segment].records[index].file),
                plan::Content::SubDoc { segment, index, subdoc } => {
                    is_changed(&dataset.resources[segment].records[index].subdocs[subdoc].file)
                }
                plan::Content::Page { segment, .. } => lists_changed.contains(segment),
            }
    };
    let manifest = Manifest {
        settings: settings.clone(),
        resources: dataset
            .resources
            .iter()
            .map(|(s, r)| (s.clone(), manifest::ResourceInfo { count: r.records.len() as u64 }))
            .collect(),
        files: Default::default(),
    };
    let written = write::write_tree(
        &mut target,
        &outputs,
        dirty,
        |o| renderer.render(&o.content),
        || vec![(openapi::OPENAPI_PATH.to_string(), openapi::document(&renderer))],
        manifest,
        &write::Previous { index: previous.as_ref(), listed },
        progress,
    )?;
    drop((previous, tree));
    let schemas = renderer.schemas();
    let resources = dataset.resources.len();
    let records = dataset.record_count();
    drop(renderer);
    let paths = outputs.iter().flat_map(|o| o.paths.iter().map(String::as_str)).chain([openapi::OPENAPI_PATH]);
    let files: Vec<(&str, &index::TreeFile)> = paths.zip(&written.files).collect();

    let index = Index {
        format: index::FORMAT,
        manifest: Stamp::of_file(&dir.join(manifest::MANIFEST_FILE))
            .with_context(|| format!("cannot read {}", dir.join(manifest::MANIFEST_FILE).display()))?,
        started_ns,
        settings: settings.clone(),
        data: data_files,
        lists,
        schemas,
        files: BTreeMap::new(),
    };
    match index.write_listing(&dir, &files) {
        Ok(()) => {
            let _ = std::fs::remove_file(write::journal_path(&dir));
        }
        Err(e) => eprintln!("warning: {e:#}: the next build renders every document again"),
    }
    Ok(BuildSummary { resources, records, report: written.report, up_to_date: false })
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
fn only_changes_and_additions(
    index: &index::Index,
    settings: &TreeSettings,
    data_files: &BTreeMap<String, index::DataFile>,
) -> bool {
    let config_hash = |files: &BTreeMap<String, index::DataFile>| files.get(config::CONFIG_FILE).map(|f| f.hash.0);
    index.settings.same_options(settings)
        && config_hash(&index.data) == config_hash(data_files)
        && index.data.iter().all(|(rel, old)| match data_files.get(rel) {
            Some(new) => new.name == old.name,
            None => rel.split('/').count() == 2 && rel.ends_with(&format!("/{}", config::ORDER_FILE)),
        })
}

/// A copy of an index.
fn clone_index(index: &index::Index) -> index::Index {
    index::Index {
        format: index.format,
        manifest: index.manifest,
        started_ns: index.started_ns,
        settings: index.settings.clone(),
        data: index.data.clone(),
        lists: index.lists.clone(),
        schemas: index.schemas.clone(),
        files: index.files.clone(),
    }
}

/// The files of the tree in `dir` as its manifest lists them, when there is no index: what a
/// build may replace or remove. A folder that holds anything but gen's tree is refused (unless
/// `ours`: a killed commit's journal names it), so that a mistyped `--out` deletes nothing.
/// A listed path that no build writes (`../x`, `/x`) is left out, with a note; a manifest that
/// is not a regular file of at most [`manifest::MAX_MANIFEST_BYTES`] is an error.
fn previous_files(dir: &Path, ours: bool) -> Result<Vec<String>> {
    let path = dir.join(manifest::MANIFEST_FILE);
    let bytes = match crate::fsutil::read_regular_file(&path, manifest::MAX_MANIFEST_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(crate::fsutil::NotRead::Io(_)) => None,
        Err(e) => anyhow::bail!("{}", manifest::not_read_manifest(&path, &e)),
    };
    if let Some(manifest) = bytes.as_deref().filter(|b| TreeSettings::from_manifest_bytes(b).is_some()) {
        let files = Manifest::from_bytes(manifest).map(|m| m.files).unwrap_or_default();
        let (paths, bad): (Vec<String>, Vec<String>) = files.into_keys().partition(|p| manifest::is_tree_path(p));
        for bad in bad {
            eprintln!(
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

/// Takes back from the schemas what the previous versions of the changed records and
/// sub-documents showed them, reading those versions from the tree (each checked against its
/// hash in the index). False when one cannot be: the build then renders every document.
fn forget_previous(
    renderer: &render::TreeRenderer<'_>,
    index: &index::Index,
    tree: &tree_fs::TreeDir,
    changed: &std::collections::HashSet<&str>,
) -> bool {
    for rel in changed.iter().filter(|rel| index.data.contains_key(**rel)) {
        // `<segment>/<id>.json` is a record, `<segment>/<id>/<name>.json` a sub-document.
        let parts: Vec<&str> = rel.trim_end_matches(".json").split('/').collect();
        let (segment, subdoc, path) = match parts.as_slice() {
            [segment, id] if config::parse_id(id).is_some() => {
                (*segment, None, format!("api/v2/{segment}/{id}/index.json"))
            }
            [segment, id, name] => (*segment, Some(*name), format!("api/v2/{segment}/{id}/{name}/index.json")),
            _ => continue, // gen.json, order files
        };
        let Some(entry) = index.files.get(&path) else { return false };
        let Some(bytes) = tree.read(&path, entry.stamp.size) else { return false };
        if blake3::hash(&bytes) != entry.hash.0 || renderer.forget(segment, subdoc, &bytes).is_err() {
            return false;
        }
    }
    true
}
