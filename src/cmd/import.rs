//! `gen import api-data`: published tree → data folder.

use crate::cli::ImportApiDataArgs;
use anyhow::Result;
use std::time::Instant;

pub(crate) fn execute(args: ImportApiDataArgs) -> Result<()> {
    let started = Instant::now();
    let options = genapi::import::ImportOptions {
        keep_segment_names: args.keep_segment_names,
        force: args.force,
        ndjson: args.layout == crate::cli::DataLayout::Ndjson,
    };
    let summary = genapi::import::import_api_data(&args.src, &args.out, &options)?;
    super::say(&format!(
        "imported {} resources, {} records, {} sub-documents in {:.2} s → {}",
        summary.resources,
        summary.records,
        summary.subdocs,
        started.elapsed().as_secs_f64(),
        args.out.display()
    ));
    if !summary.replaced.is_empty() {
        super::say(&format!("--force replaced (from the source): {}", summary.replaced.join(", ")));
    }
    if !summary.kept.is_empty() {
        super::say(&format!("--force kept (not from the source): {}", summary.kept.join(", ")));
    }
    if summary.kept_settings {
        super::say(&format!("--force kept the settings in {}; \"external\" was updated", genapi::config::CONFIG_FILE));
    }
    if !summary.external.is_empty() {
        super::say(&format!("declared external (referred to, not imported): {}", summary.external.join(", ")));
    }
    if !summary.filters.is_empty() {
        let declared: Vec<String> =
            summary.filters.iter().map(|(segment, names)| format!("{segment} ({})", names.join(", "))).collect();
        super::say(&format!("declared filters (as the default data does): {}", declared.join(", ")));
    }
    for (segment, names) in &summary.shared_names {
        for (name, ids) in names {
            let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
            eprintln!(
                "warning: {segment}: records {} share the name {name:?}; declared in {}/gen.json \"shared_names\". \
                 References by id reach each of them; {} serves the lowest id, {}",
                ids.join(", "),
                args.out.display(),
                genapi::tree::layout::record_url("", segment, name),
                ids[0]
            );
        }
    }
    Ok(())
}
