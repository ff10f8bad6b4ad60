//! `genapi`: turns a folder of reference-data records into a prebuilt, read-only JSON API
//! (the shape of pokeapi.co), and serves it.
//!
//! The build is a pipeline of four stages, each its own module:
//! [`load`] (data/ → an index of ids and names) → [`render`] (validate references and make urls
//! absolute) → [`plan`] (every document and path of the tree, pure) → [`write`] (stage the tree
//! beside the old one, swap it in atomically).

pub mod answers;
pub mod config;
pub mod date;
pub mod fsutil;
pub mod hosts;
pub mod import;
pub mod load;
pub mod manifest;
pub mod openapi;
pub mod paging;
pub mod plan;
pub mod problem;
pub mod render;
pub mod schema;
pub mod serve;
pub mod write;

use anyhow::Result;
use manifest::Manifest;
use problem::Problems;
use std::path::Path;

/// The program and version, as written into trees.
pub const GENERATOR: &str = concat!("gen ", env!("CARGO_PKG_VERSION"));

/// Options of `gen build`, beyond the data folder's own settings.
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

/// Builds the tree of `data` into `out`: load → validate → plan → write.
///
/// When `out` already holds the tree of the same data built with the same options, nothing is
/// written at all (the data is read and hashed, not parsed).
pub fn build(data: &Path, out: &Path, options: &BuildOptions, progress: &write::Progress) -> Result<BuildSummary> {
    if let Some(summary) = up_to_date(data, out, options) {
        write::clean_leftovers(out);
        return Ok(summary);
    }
    load::require_folder(data)?;
    let (dataset, problems) = load::load(data);
    if !problems.is_empty() {
        return Err(Problems::before_references(problems).into());
    }
    let base_url = options.base_url.clone().unwrap_or_else(|| dataset.config.base_url.clone());
    config::check_base_url(&base_url).map_err(anyhow::Error::msg)?;
    let page_sizes = paging::page_sizes(&dataset.config.page_sizes);
    let tree = plan::TreeOptions {
        base_url,
        links: options.links.unwrap_or(paging::LinkStyle::Query),
        pretty: options.pretty,
        page_sizes,
    };
    let info =
        render::BuildInfo { generator: GENERATOR.to_string(), built_at: options.source_date_epoch.map(date::rfc3339) };
    let outputs = plan::plan(&dataset, &tree);
    let renderer = render::TreeRenderer::new(&dataset, &tree, &info);
    let manifest = Manifest {
        format: manifest::FORMAT,
        generator: GENERATOR.to_string(),
        base_url: tree.base_url.clone(),
        links: tree.links,
        pretty: tree.pretty,
        gzip: options.gzip,
        page_sizes: tree.page_sizes.clone(),
        data_hash: dataset.data_hash.clone(),
        built_at: info.built_at.clone(),
        resources: dataset
            .resources
            .iter()
            .map(|(s, r)| (s.clone(), manifest::ResourceInfo { count: r.records.len() as u64 }))
            .collect(),
        files: Default::default(),
    };
    let report = write::write_tree(
        out,
        &outputs,
        |o| renderer.render(&o.content),
        || vec![(openapi::OPENAPI_PATH.to_string(), renderer.openapi())],
        manifest,
        progress,
    )?;
    Ok(BuildSummary { resources: dataset.resources.len(), records: dataset.record_count(), report, up_to_date: false })
}

/// The summary of a build that has nothing to do, if `out` holds the tree `build` would write.
fn up_to_date(data: &Path, out: &Path, options: &BuildOptions) -> Option<BuildSummary> {
    let previous = Manifest::read_head(out).ok()?;
    let data_hash = load::data_hash(data)?;
    let config: config::SiteConfig = load::read_json(&data.join(config::CONFIG_FILE))
        .ok()
        .and_then(|(value, _)| serde_json::from_value(value).ok())
        .unwrap_or_default();
    let wanted = Manifest {
        format: manifest::FORMAT,
        generator: GENERATOR.to_string(),
        base_url: options.base_url.clone().unwrap_or(config.base_url),
        links: options.links.unwrap_or(paging::LinkStyle::Query),
        pretty: options.pretty,
        gzip: options.gzip,
        page_sizes: paging::page_sizes(&config.page_sizes),
        data_hash,
        built_at: options.source_date_epoch.map(date::rfc3339),
        resources: Default::default(),
        files: Default::default(),
    };
    if !previous.same_build(&wanted) {
        return None;
    }
    Some(BuildSummary {
        resources: previous.resources.len(),
        records: previous.resources.values().map(|r| r.count as usize).sum(),
        report: write::WriteReport::default(),
        up_to_date: true,
    })
}
