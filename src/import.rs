//! `gen import api-data`: the public API's published static tree (the `api-data` repository's
//! `api/v2/` layout) → a data folder that `gen build` turns back into the same API.
//!
//! Each document is read, its urls renamed, and written on its own (in parallel), so memory
//! stays bounded by the index of ids, not by the size of the data. The data folder is staged
//! beside its destination and swapped in whole, like a build.
//!
//! What `--force` keeps of an existing data folder is in [`force`].

mod declared;
mod force;
mod scan;
pub mod table;
mod tables;

use crate::config::{CONFIG_FILE, DataSettings};
use crate::data::data_path::DataPath;
use crate::json::parse_json;
use crate::problem::{Problem, Problems};
use crate::staging::Staging;
use crate::tree::layout::{self, API_PREFIX, API_ROOT};
use crate::{fsutil, json};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use scan::{Scanned, list_dirs, refuse_output_overlapping_source, scan};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Published segment names that carry the brand word, and their neutral names.
pub(crate) const NEUTRAL_SEGMENTS: &[(&str, &str)] = &[
    ("pokemon", "creature"),
    ("pokemon-color", "creature-color"),
    ("pokemon-form", "creature-form"),
    ("pokemon-species", "creature-species"),
    ("pokemon-habitat", "creature-habitat"),
    ("pokemon-shape", "creature-shape"),
    ("pokeathlon-stat", "athlon-stat"),
];

/// Published folders that are not resources: `meta` is deploy information (the build writes
/// its own).
const SKIPPED: &[&str] = &["meta"];

/// Options of `gen import api-data`.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Keep the published segment names instead of the neutral ones.
    pub keep_segment_names: bool,
    /// Replace a destination folder that is not empty.
    pub force: bool,
    /// Write each resource as a table, `<segment>.ndjson`, instead of a folder of files.
    pub ndjson: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default)]
pub struct ImportSummary {
    /// Resources imported.
    pub resources: usize,
    /// Records imported.
    pub records: usize,
    /// Sub-documents imported.
    pub subdocs: usize,
    /// Segments referred to but not imported, declared external in `gen.json`.
    pub external: Vec<String>,
    /// With `--force` over a data folder: its entries replaced by the import (segment folders).
    pub replaced: Vec<String>,
    /// With `--force` over a data folder: its entries the import does not write, kept as they were.
    pub kept: Vec<String>,
    /// With `--force`: the folder's `gen.json` settings were kept ("external" updated).
    pub kept_settings: bool,
    /// Names that several records of a resource carry in the source, with their ids (sorted),
    /// by segment: declared in `gen.json`'s `shared_names`. The name path serves the lowest id.
    pub shared_names: BTreeMap<String, BTreeMap<String, Vec<i64>>>,
    /// The filters declared in `gen.json`, as the default data declares them, by segment: the
    /// parameter names (see [`declared`]). Empty when `--force` kept the folder's own `filters`.
    pub filters: BTreeMap<String, Vec<String>>,
}

/// The segment name to use for a published one.
pub(crate) fn rename_segment(segment: &str, keep: bool) -> &str {
    if keep {
        return segment;
    }
    NEUTRAL_SEGMENTS.iter().find(|(from, _)| *from == segment).map_or(segment, |(_, to)| to)
}

/// One document to import: where it is and where it goes.
struct Job {
    source: PathBuf,
    /// Path relative to the data folder.
    target: String,
    /// For records: the resource folder and the id the list gives it.
    record: Option<(String, i64)>,
}

/// Record names seen while importing: (folder, name, id).
type Names = Mutex<Vec<(String, String, i64)>>;

/// Imports the published tree at `src` into the data folder `out`, in three steps: [`scan()`]
/// the source (every problem of its layout at once), [`write_documents`] into a staging folder
/// beside `out`, then [`write_settings`], and swap the staging folder in.
pub fn import_api_data(src: &Path, out: &Path, options: &ImportOptions) -> Result<ImportSummary> {
    let root = src.join(API_ROOT);
    if !root.is_dir() {
        bail!(
            "{} is not an api-data checkout: {} is missing (expected the published layout {})",
            src.display(),
            root.display(),
            layout::list_path("<segment>")
        );
    }
    let source = refuse_output_overlapping_source(src, out)?;
    if out.exists() && !options.force && std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} is not empty: choose an empty --out folder, or pass --force to replace it", out.display());
    }
    tables::refuse_force(options)?;
    let scanned = scan(&root, &source, options.keep_segment_names)?;
    let staging = Staging::begin(out).context("cannot stage the data folder beside its destination")?;
    let written = write_documents(&scanned, &staging.dir, options.keep_segment_names)?;
    let mut summary = ImportSummary {
        resources: scanned.resources,
        records: scanned.records,
        subdocs: scanned.subdocs,
        shared_names: shared_names(written.names),
        ..ImportSummary::default()
    };
    write_settings(out, &staging.dir, options, written.referenced, written.filters, &mut summary)?;
    tables::write_layout(options, &staging.dir)?;
    staging.commit()?;
    Ok(summary)
}

/// What [`write_documents`] saw while writing: the segments referred to, the record names and
/// the filters to declare.
struct Written {
    referenced: BTreeSet<String>,
    names: Vec<(String, String, i64)>,
    filters: BTreeMap<String, crate::config::FilterDeclaration>,
}

/// Reads, renames and writes every planned document into the staging folder `dir`, in
/// parallel, then the order files. Fails with every problem of the documents, or with the one
/// error of a write that fails (a full disk).
fn write_documents(scanned: &Scanned, dir: &Path, keep: bool) -> Result<Written> {
    let referenced = Mutex::new(BTreeSet::new());
    let names = Names::default();
    let folders: BTreeSet<&str> = scanned.jobs.iter().filter_map(|job| Some(job.record.as_ref()?.0.as_str())).collect();
    let filters = declared::Declared::new(folders);
    let failures: Vec<DocFailure> = scanned
        .jobs
        .par_iter()
        .filter_map(|job| import_document(job, dir, keep, (&referenced, &names), &filters).err())
        .collect();
    // A write that fails (a full disk) is one error about the destination, not a data problem
    // per document.
    let mut problems = scanned.refused.clone();
    for failure in failures {
        match failure {
            DocFailure::Data(problem) => problems.push(problem),
            DocFailure::Write(error) => return Err(error.context("cannot write the data folder; nothing was changed")),
        }
    }
    problems.sort();
    if !problems.is_empty() {
        return Err(Problems::all(problems).into());
    }
    for (folder, ids) in &scanned.orders {
        let bytes = serde_json::to_vec(ids).expect("ids serialise");
        fsutil::write(&dir.join(DataPath::Order { segment: folder }.file()), &bytes)?;
    }
    Ok(Written {
        referenced: referenced.into_inner().expect("no panics"),
        names: names.into_inner().expect("no panics"),
        filters: filters.finish(),
    })
}

/// Writes `gen.json` into the staging folder `staging`: `external` (the segments referred to
/// but not present), `shared_names` from `summary` and `filters`; with `--force` over an
/// existing `out`, first carries over what the import does not write (other folders, the user's
/// files and settings, their `filters` included when they declare some), noting it in `summary`.
fn write_settings(
    out: &Path,
    staging: &Path,
    options: &ImportOptions,
    referenced: BTreeSet<String>,
    filters: BTreeMap<String, crate::config::FilterDeclaration>,
    summary: &mut ImportSummary,
) -> Result<()> {
    let imported: BTreeSet<String> = list_dirs(staging)?.into_iter().collect();
    let declared: BTreeMap<String, Vec<String>> =
        summary.shared_names.iter().map(|(folder, names)| (folder.clone(), names.keys().cloned().collect())).collect();
    let mut present = imported.clone();
    let mut settings = None;
    if options.force && out.exists() {
        let kept = force::keep_what_is_not_imported(out, staging, &imported)?;
        present.extend(kept.kept.iter().map(|name| name.trim_end_matches('/').to_string()));
        (summary.replaced, summary.kept, settings) = (kept.replaced, kept.kept, kept.settings);
    }
    summary.external = referenced.difference(&present).cloned().collect();
    let mut config_bytes = match settings {
        Some(mut settings) => {
            summary.kept_settings = true;
            settings.insert("external".to_string(), Value::from(summary.external.clone()));
            if options.keep_segment_names && !settings.contains_key("deploy_headers") {
                let names = serde_json::to_value(deploy_headers(options)).expect("names serialise");
                settings.insert("deploy_headers".to_string(), names);
            }
            if !settings.contains_key("filters") && !filters.is_empty() {
                settings.insert("filters".to_string(), serde_json::to_value(&filters).expect("filters serialise"));
                summary.filters = filter_names(&filters);
            }
            if declared.is_empty() {
                settings.remove("shared_names");
            } else {
                settings.insert("shared_names".to_string(), serde_json::to_value(&declared).expect("names serialise"));
            }
            // Valid settings are written as a fresh import writes them (the same keys in the same
            // order); anything else is kept as it was, for `gen check` to report.
            match crate::config::parse(Value::Object(settings.clone())) {
                Ok(config) => serde_json::to_vec_pretty(&config),
                Err(_) => serde_json::to_vec_pretty(&settings),
            }
            .expect("settings serialise")
        }
        None => {
            let config = DataSettings {
                external: summary.external.clone(),
                shared_names: declared,
                deploy_headers: deploy_headers(options),
                filters,
                ..DataSettings::default()
            };
            summary.filters = filter_names(&config.filters);
            serde_json::to_vec_pretty(&config).expect("settings serialise")
        }
    };
    config_bytes.push(b'\n');
    fsutil::write(&staging.join(CONFIG_FILE), &config_bytes)
}

/// The parameter names of `filters`, by segment.
fn filter_names(filters: &BTreeMap<String, crate::config::FilterDeclaration>) -> BTreeMap<String, Vec<String>> {
    filters.iter().map(|(segment, d)| (segment.clone(), d.fields().into_iter().map(|f| f.name).collect())).collect()
}

/// The deploy headers of an imported tree: the public API's names when its segment names are
/// kept (its clients, such as its browser client, read them), else the neutral ones.
fn deploy_headers(options: &ImportOptions) -> crate::config::DeployHeaders {
    if options.keep_segment_names {
        crate::config::DeployHeaders::public_api()
    } else {
        crate::config::DeployHeaders::default()
    }
}

/// Why one document was not imported.
enum DocFailure {
    /// A problem of the source document.
    Data(Problem),
    /// Writing it failed (e.g. the disk is full): an error of the destination, not of the data.
    Write(anyhow::Error),
}

impl From<Problem> for DocFailure {
    fn from(problem: Problem) -> DocFailure {
        DocFailure::Data(problem)
    }
}

/// The names carried by more than one record of a resource, with their ids, sorted.
fn shared_names(mut seen: Vec<(String, String, i64)>) -> BTreeMap<String, BTreeMap<String, Vec<i64>>> {
    seen.sort();
    let mut shared: BTreeMap<String, BTreeMap<String, Vec<i64>>> = BTreeMap::new();
    for pair in seen.windows(2) {
        let [(folder, name, first), (next_folder, next_name, id)] = pair else { unreachable!() };
        if folder == next_folder && name == next_name {
            let ids = shared.entry(folder.clone()).or_default().entry(name.clone()).or_default();
            if ids.is_empty() {
                ids.push(*first);
            }
            ids.push(*id);
        }
    }
    shared
}

/// Reads one published document, renames its urls, checks a record's id, notes its name, and
/// writes it.
fn import_document(
    job: &Job,
    dir: &Path,
    keep: bool,
    (referenced, names): (&Mutex<BTreeSet<String>>, &Names),
    filters: &declared::Declared,
) -> Result<(), DocFailure> {
    let bytes = json::read_data_file(&job.source)?;
    let mut value = parse_json(&job.source, &bytes)?;
    if let Some((folder, id)) = &job.record {
        let found = value.get("id").and_then(Value::as_i64);
        if found != Some(*id) {
            return Err(DocFailure::Data(Problem::new(
                &job.source,
                "$.id",
                format!("the record's id is {found:?} but its folder and the list say {id}"),
            )));
        }
        if let Some(name) = value.get("name").and_then(Value::as_str) {
            names.lock().expect("no panics").push((folder.clone(), name.to_string(), *id));
        }
    }
    let mut segments = BTreeSet::new();
    rename_urls(&mut value, keep, &mut segments);
    referenced.lock().expect("no panics").extend(segments);
    let target = dir.join(&job.target);
    let mut out = serde_json::to_vec_pretty(&value).expect("a parsed document serialises");
    out.push(b'\n');
    if let Some((folder, _)) = &job.record {
        filters.note(folder, &out);
    }
    let write = || -> Result<()> {
        fsutil::create_dir_all(target.parent().expect("a target has a folder"))?;
        fsutil::write(&target, &out)
    };
    write().map_err(DocFailure::Write)
}

/// Renames the segment of every url (any string that starts with `/api/v2/`) and records
/// which segments are referred to.
fn rename_urls(value: &mut Value, keep: bool, segments: &mut BTreeSet<String>) {
    match value {
        Value::String(text) => {
            if let Some(rest) = text.strip_prefix(API_PREFIX) {
                let segment = rest.split('/').next().unwrap_or_default();
                let renamed = rename_segment(segment, keep);
                segments.insert(renamed.to_string());
                if renamed != segment {
                    *text = format!("{API_PREFIX}{renamed}{}", &rest[segment.len()..]);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_urls(v, keep, segments)),
        Value::Object(map) => map.values_mut().for_each(|v| rename_urls(v, keep, segments)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_names_are_those_of_several_records() {
        let seen = vec![
            ("item".to_string(), "b".to_string(), 9),
            ("item".to_string(), "a".to_string(), 1),
            ("item".to_string(), "b".to_string(), 2),
            ("berry".to_string(), "a".to_string(), 3),
            ("item".to_string(), "b".to_string(), 5),
        ];
        let shared = shared_names(seen);
        assert_eq!(shared.len(), 1);
        assert_eq!(shared["item"]["b"], [2, 5, 9]);
    }

    #[test]
    fn renames_urls_but_not_field_names_or_other_values() {
        let mut value = serde_json::json!({
            "pokemon": {"name": "pokemon-x", "url": "/api/v2/pokemon/1/"},
            "form": "/api/v2/pokemon-form/3/",
            "sub": "/api/v2/pokemon/132/encounters",
            "other": "/api/v2/pokemonx/1/",
            "text": "pokemon",
        });
        let mut segments = BTreeSet::new();
        rename_urls(&mut value, false, &mut segments);
        assert_eq!(value["pokemon"]["url"], "/api/v2/creature/1/");
        assert_eq!(value["pokemon"]["name"], "pokemon-x");
        assert_eq!(value["form"], "/api/v2/creature-form/3/");
        assert_eq!(value["sub"], "/api/v2/creature/132/encounters");
        assert_eq!(value["other"], "/api/v2/pokemonx/1/");
        assert_eq!(value["text"], "pokemon");
        assert_eq!(segments.into_iter().collect::<Vec<_>>(), ["creature", "creature-form", "pokemonx"]);
        let mut kept = serde_json::json!({"u": "/api/v2/pokeathlon-stat/1/"});
        rename_urls(&mut kept, true, &mut BTreeSet::new());
        assert_eq!(kept["u"], "/api/v2/pokeathlon-stat/1/");
    }
}
