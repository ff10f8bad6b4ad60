//! `gen import table`: a CSV file, a JSON array or NDJSON → one resource of a data folder.

use crate::cli::{DataLayout, ImportTableArgs, TableFormat};
use anyhow::Result;
use genapi::import::table::source::Format;

pub(crate) fn execute(args: ImportTableArgs) -> Result<()> {
    let options = genapi::import::table::TableOptions {
        resource: args.resource,
        format: args.format.map(|format| match format {
            TableFormat::Csv => Format::Csv,
            TableFormat::Json => Format::Json,
            TableFormat::Ndjson => Format::Ndjson,
        }),
        id: args.id,
        key: args.key,
        name: args.name,
        label: args.label,
        label_language: args.label_language,
        types: args.types,
        refs: args.refs,
        ndjson: args.layout == DataLayout::Ndjson,
    };
    let summary = genapi::import::table::import_table(&args.file, &args.out, &options)?;
    super::say(&format!(
        "imported {} records from {} → {}",
        summary.records,
        args.file.display(),
        summary.written.display()
    ));
    if let Some(ids_file) = &summary.ids_file {
        let shown =
            |keys: &[(String, i64)]| keys.iter().map(|(key, id)| format!("{key} {id}")).collect::<Vec<_>>().join(", ");
        let mut line = format!("ids kept in {}: {} new", ids_file.display(), summary.new_ids.len());
        if !summary.new_ids.is_empty() && summary.new_ids.len() <= 20 {
            line.push_str(&format!(" ({})", shown(&summary.new_ids)));
        }
        if !summary.removed.is_empty() {
            line.push_str(&format!(
                "; {} no longer in the source, removed, their ids reserved ({})",
                summary.removed.len(),
                shown(&summary.removed[..summary.removed.len().min(20)])
            ));
        }
        super::say(&line);
    }
    Ok(())
}
