//! `gen import table FILE --resource SEGMENT`: a CSV file, a JSON array or NDJSON → one
//! resource of a data folder, with ids kept from one import to the next (docs/data.md, "Your
//! own data in ten minutes").
//!
//! Everything is read and checked before anything is written: [`source`] reads the rows,
//! [`cells`] types them, [`ids`] gives the ids, [`records`] the names and labels, [`refs`]
//! the references; only a source without problems is [`write`]n.

pub(crate) mod cells;
pub(crate) mod ids;
pub(crate) mod records;
pub(crate) mod refs;
pub mod source;
mod write;

use crate::problem::{Problem, Problems};
use crate::staging::FolderLock;
use anyhow::{Result, bail};
use source::{Format, Source};
use std::path::{Path, PathBuf};

/// Options of `gen import table`.
#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    /// The resource to write (its path segment).
    pub resource: String,
    /// The source's format; `None` to go by the file's extension.
    pub format: Option<Format>,
    /// The integer field that is each record's id.
    pub id: Option<String>,
    /// The field whose value is each record's key, ids given and kept in the ids file.
    pub key: Option<String>,
    /// The field each record's name is slugged from.
    pub name: Option<String>,
    /// The field whose text is kept in `names`, where `?q=` searches it.
    pub label: Option<String>,
    /// The language `names` entries are given.
    pub label_language: String,
    /// `--types` specs, `FIELD=int|number|bool|string,...`.
    pub types: Vec<String>,
    /// `--ref` specs, `FIELD=SEGMENT:KEYFIELD`.
    pub refs: Vec<String>,
    /// Write a table (`<segment>.ndjson`) instead of a folder of record files.
    pub ndjson: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default)]
pub struct TableSummary {
    /// Records written.
    pub records: usize,
    /// The resource written: its folder or table.
    pub written: PathBuf,
    /// The ids file, with `--key`.
    pub ids_file: Option<PathBuf>,
    /// Keys given a new id, and the id.
    pub new_ids: Vec<(String, i64)>,
    /// Keys of the ids file that the source no longer holds: their ids stay reserved.
    pub removed: Vec<(String, i64)>,
}

/// Imports `file` into the data folder `data` as the resource `options.resource`, replacing
/// what the data folder held of it. On any problem nothing is written.
pub fn import_table(file: &Path, data: &Path, options: &TableOptions) -> Result<TableSummary> {
    let segment = options.resource.as_str();
    check_segment(segment)?;
    let format = match options.format.or_else(|| Format::of_path(file)) {
        Some(format) => format,
        None => {
            bail!("{}: cannot tell the format from the extension: pass --format csv, json or ndjson", file.display())
        }
    };
    let types = cells::parse_types(&options.types).map_err(anyhow::Error::msg)?;
    let refs =
        options.refs.iter().map(|r| refs::parse_ref(r)).collect::<Result<Vec<_>, _>>().map_err(anyhow::Error::msg)?;
    let by_key = match (&options.id, &options.key) {
        (Some(_), Some(_)) => bail!("pass --id or --key, not both"),
        (None, None) => bail!(
            "pass --id FIELD (an integer field that is each record's id) or --key FIELD (a field that names each \
             record, e.g. a code: ids are given to its values and kept in {}/{}/{segment}.json for the next import). \
             A row's position is no id: it changes from one release of the source to the next",
            data.display(),
            ids::IDS_FOLDER
        ),
        (None, Some(key)) => Some(key.as_str()),
        (Some(_), None) => None,
    };
    let _lock = FolderLock::open(data)?;
    let source = Source { path: file.to_path_buf(), format };
    let mut rows = source::read_rows(&source).map_err(Problems::all)?;
    let mut problems = Vec::new();
    cells::type_rows(&source, &mut rows, &types, &mut problems);
    let ids_path = ids::ids_file(data, segment);
    let kept = ids::load(&ids_path).map_err(|p| Problems::all(vec![p]))?;
    let (row_ids, ids_text, changes) = match (by_key, kept) {
        (Some(key), kept) => {
            let kept = kept.unwrap_or_else(|| ids::KeptIds { key: key.to_string(), ..Default::default() });
            refuse_other_key(&ids_path, &kept.key, key)?;
            let (row_ids, kept, changes) = ids::give_ids(&source, &rows, key, kept, &mut problems);
            (row_ids, Some((ids_path.clone(), ids::render(&kept))), changes)
        }
        (None, Some(kept)) => bail!(
            "{}: the ids of {segment} are given by --key {} and kept in this file: import with --key {}, or remove \
             the file to take the ids from --id",
            ids_path.display(),
            kept.key,
            kept.key
        ),
        (None, None) => {
            let field = options.id.as_deref().expect("--id given");
            (ids::read_ids(&source, &rows, field, &mut problems), None, ids::Changes::default())
        }
    };
    let shape = records::Shape {
        id: options.id.as_deref(),
        name: options.name.as_deref(),
        label: options.label.as_deref(),
        language: &options.label_language,
    };
    let mut records = records::make_records(&source, rows, &row_ids, shape, &mut problems);
    refs::resolve(&source, &mut records, &refs, data, segment, &mut problems);
    if !problems.is_empty() {
        return Err(sorted(problems).into());
    }
    records.sort_by_key(|r| r.id);
    let has_ids_file = ids_text.is_some();
    let output = write::Output { segment, records: &records, ndjson: options.ndjson, ids: ids_text };
    let written = write::write(data, &output)?;
    Ok(TableSummary {
        records: records.len(),
        written,
        ids_file: has_ids_file.then_some(ids_path),
        new_ids: changes.new,
        removed: changes.removed,
    })
}

/// Refuses a resource name that is not a segment or that the tree keeps for itself.
fn check_segment(segment: &str) -> Result<()> {
    if !crate::config::is_valid_segment(segment) {
        bail!(
            "--resource {segment:?}: a resource's name is lower-case letters, digits and '-' (its url's path segment)"
        );
    }
    if let Some(why) = crate::tree::layout::reserved_segment(segment) {
        bail!("--resource {segment:?}: a resource cannot be named so: {why}; choose another name");
    }
    Ok(())
}

/// Refuses a `--key` other than the one the ids file's ids were given by.
fn refuse_other_key(path: &Path, kept: &str, key: &str) -> Result<()> {
    if kept != key {
        bail!(
            "{}: the ids were given to the values of {kept:?}, and --key is {key:?}: import with --key {kept} \
             (another key would give every record a new id), or remove the file to start the ids anew",
            path.display()
        );
    }
    Ok(())
}

/// Problems in a stable order: by file and line (as numbers), then location.
fn sorted(mut problems: Vec<Problem>) -> Problems {
    problems.sort_by_key(|p| {
        let path = p.path.to_string_lossy().to_string();
        let (file, line) = match path.rsplit_once(':').map(|(f, l)| (f, l.parse::<u64>())) {
            Some((file, Ok(line))) => (file.to_string(), line),
            _ => (path, 0),
        };
        (file, line, p.location.clone(), p.message.clone())
    });
    Problems::all(problems)
}
