//! Extract: what the names document and the declared filters' files of a resource are made of,
//! read from its records in one pass before the plan (the plan needs each filter's values to
//! name their files). Each record's file is read again, as every data file is read (bounded, a
//! regular file), and must be the bytes the load hashed (`second_read`): a file that changed
//! since is a problem, and its row is not kept (the build fails, and the next one reads it). A
//! file that cannot be parsed is a problem its record's own document reports.

mod values;

use crate::build::index::{ExtractStore, Kept, Summary};
use crate::config::CONFIG_FILE;
use crate::data::dataset::Record;
use crate::data::load::Dataset;
use crate::filters::{FieldPath, FilterField};
use crate::json::tape::{Kind, Node, Tape};
use crate::paging::{self, ListLinks, Page};
use crate::problem::Problem;
use crate::search::{self, NameEntry};
use crate::tree::layout;
use crate::tree::manifest::BuildSettings;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use values::Values;

/// One resource's names and filter values.
#[derive(Debug, Default)]
pub(crate) struct Extracted {
    /// The names document's entries, in list order, serialised ([`search::entry_bytes`]);
    /// none when the extract was held ([`ExtractStore::held`]) and its names document is not
    /// rendered.
    pub(crate) names: Vec<Box<[u8]>>,
    /// For each declared field (in declared order): each value it takes, ascending, with the
    /// list positions of the records that take it, ascending.
    pub(crate) fields: Vec<Vec<(String, Vec<u32>)>>,
    /// For each declared field: the most values one record gives it, and that record's id.
    pub(crate) most_from_one: Vec<(usize, i64)>,
    /// Values that cannot be a folder name (too long), each at its record's file and location.
    pub(crate) problems: Vec<Problem>,
    /// True when the resource was compared ([`ExtractStore::compare`]) and every record read
    /// anew gave the names entry and values it gave the previous build: in the same list
    /// order, the names document and the filters' files are then the previous build's.
    pub(crate) unchanged: bool,
}

/// The extracts of the resources a build needs them of, by segment.
pub(crate) type Extracts = BTreeMap<String, Extracted>;

/// True when [`extract`] reads the resource `segment`: when its names and filter values are
/// `wanted`, or filters are declared for it (the plan needs their values).
pub(crate) fn is_extracted(settings: &BuildSettings, segment: &str, wanted: bool) -> bool {
    wanted || settings.filters.get(segment).is_some_and(|declared| !declared.is_empty())
}

/// The extracts of the resources [`extract`] reads that `store` holds without reading their
/// rows ([`extract_held`]), by segment: given to [`extract`], which reads the others.
pub(crate) fn held(
    dataset: &Dataset,
    settings: &BuildSettings,
    wanted: impl Fn(&str) -> bool,
    store: &ExtractStore,
) -> Extracts {
    let extracted = dataset.resources.keys().filter(|segment| is_extracted(settings, segment, wanted(segment)));
    let held = extracted.filter_map(|segment| {
        let declared = settings.filters.get(segment).map_or(&[][..], Vec::as_slice);
        Some((segment.clone(), extract_held(dataset, segment, declared, store, wanted(segment))?))
    });
    held.collect()
}

/// Extracts every resource that `wanted` names or that declares filters (those `held` gives
/// are taken as they are). A filter declared for
/// a resource the data does not hold, or whose path reaches no value in any record, is a
/// problem of `gen.json`.
/// With a `store`, a record whose data is as a previous build's was is not read again: its
/// extract is the one that build kept; every record's extract is kept for the next build.
pub(crate) fn extract(
    dataset: &Dataset,
    settings: &BuildSettings,
    wanted: impl Fn(&str) -> bool,
    store: Option<&ExtractStore>,
    mut held: Extracts,
) -> Result<Extracts, Vec<Problem>> {
    let config_path = dataset.dir.join(CONFIG_FILE);
    let mut problems = Vec::new();
    for segment in settings.filters.keys().filter(|s| !dataset.resources.contains_key(*s)) {
        let at = crate::problem::json_path(&[crate::problem::Step::Key("filters"), crate::problem::Step::Key(segment)]);
        let message = format!(
            "filters are declared for {segment:?}, which the data has no folder of: declare them for one of {}",
            dataset.resources.keys().cloned().collect::<Vec<_>>().join(", ")
        );
        problems.push(Problem::new(&config_path, at, message));
    }
    let mut extracts = Extracts::new();
    for segment in dataset.resources.keys() {
        if !is_extracted(settings, segment, wanted(segment)) {
            continue;
        }
        let declared = settings.filters.get(segment).map_or(&[][..], Vec::as_slice);
        let held = held.remove(segment);
        let mut extracted = held.unwrap_or_else(|| extract_one(dataset, segment, declared, store));
        problems.append(&mut extracted.problems);
        for (i, (field, values)) in declared.iter().zip(&extracted.fields).enumerate() {
            let at = dataset.config.filters.get(segment).map_or_else(String::new, |d| d.location(segment, i));
            let bound = dataset.config.max_filter_values;
            if values.len() > bound {
                let (most, id) = extracted.most_from_one[i];
                let message = format!(
                    "the filter {:?} of {segment} takes {} values, more than the {bound} allowed (each value is a \
                     folder of files; {} gives it {most}): filter on a field with fewer values, or raise \
                     \"max_filter_values\" in {CONFIG_FILE}",
                    field.name,
                    values.len(),
                    dataset.record_file(segment, id).display(),
                );
                problems.push(Problem::new(&config_path, at.clone(), message));
            }
            if values.is_empty() {
                let n = dataset.resources[segment].records.len();
                let message = format!(
                    "the path {:?} reaches no value in any of the {n} records of {segment}: correct it (a value is a \
                     string, number or boolean; write [] after a key whose value is an array) or remove the filter",
                    field.path
                );
                problems.push(Problem::new(&config_path, at, message));
            }
        }
        extracts.insert(segment.clone(), extracted);
    }
    if problems.is_empty() { Ok(extracts) } else { Err(problems) }
}

/// Reads the records of `segment` for their names and the values of `declared` (those whose
/// extract `store` keeps for their data as it is are not read), and keeps them in `store`.
pub(crate) fn extract_one(
    dataset: &Dataset,
    segment: &str,
    declared: &[FilterField],
    store: Option<&ExtractStore>,
) -> Extracted {
    let paths: Vec<FieldPath> = declared.iter().filter_map(|f| FieldPath::parse(&f.path).ok()).collect();
    let records = &dataset.resources[segment].records;
    let declared_paths: Vec<String> = declared.iter().map(|f| f.path.clone()).collect();
    let store = store.filter(|_| paths.len() == declared.len());
    let (mut kept, before, whole) = match store {
        Some(store) => {
            let taken = store.take(segment, &declared_paths, &records.iter().map(|r| r.id).collect::<Vec<_>>());
            (taken.rows, taken.before, taken.whole)
        }
        None => (records.iter().map(|_| None).collect(), None, false),
    };
    let gathered = gather(dataset, segment, (declared, &paths), &mut kept, before.as_deref());
    drop(kept);
    let Gathered { names, problems, mut values, clean, unchanged } = gathered;
    let summary = values.summary();
    if let Some(store) = store.filter(|_| !whole) {
        // a record with a problem is read again by the next build, which reports it again
        let rows = records.iter().enumerate().filter(|&(position, _)| clean[position]);
        let ids = rows.clone().map(|(_, r)| r.id);
        let rows = rows.map(|(position, r)| (r.id, &names[position][..], values.of(position)));
        let every = clean.iter().all(|&clean| clean);
        store.keep(segment, &declared_paths, (ids, rows), every.then_some(&summary));
    }
    let Summary { fields, most: most_from_one } = summary;
    Extracted { names, fields, most_from_one, problems, unchanged }
}

/// What the records of a resource gave the extract, in list order.
struct Gathered {
    /// Each record's names entry, serialised.
    names: Vec<Box<[u8]>>,
    /// Every problem, record by record.
    problems: Vec<Problem>,
    values: Values,
    /// For each record: true when it gave no problem (its row is kept).
    clean: Vec<bool>,
    /// True when every record read anew gave what `before` holds of it.
    unchanged: bool,
}

/// What reading a record gave: its names entry, its values field by field, its problems, and
/// whether it was read anew (not a kept row).
type Read = (Box<[u8]>, Vec<Vec<String>>, Vec<Problem>, bool);

/// Records a chunk: read in parallel, then gathered (their values numbered) before the next.
const CHUNK: usize = 1 << 16;

/// Reads the records of `segment` (those `kept` holds a row of are not read), a chunk at a time,
/// and gathers what they give: a chunk's values are held as strings only until they are
/// numbered. `before`: the rows of the changed records' previous data, to compare with.
fn gather(
    dataset: &Dataset,
    segment: &str,
    (declared, paths): (&[FilterField], &[FieldPath]),
    kept: &mut [Option<Kept>],
    before: Option<&[(i64, Kept)]>,
) -> Gathered {
    let records = &dataset.resources[segment].records;
    let mut gathered = Gathered {
        names: Vec::with_capacity(records.len()),
        problems: Vec::new(),
        values: Values::new(paths.len(), records.len()),
        clean: Vec::with_capacity(records.len()),
        unchanged: before.is_some(),
    };
    // what the previous build kept of record `id`'s previous data
    let gave = |id: i64| {
        let before = before?;
        before.binary_search_by_key(&id, |(id, _)| *id).ok().map(|at| &before[at].1)
    };
    for start in (0..records.len()).step_by(CHUNK) {
        let end = records.len().min(start + CHUNK);
        let read: Vec<Read> = records[start..end]
            .par_iter()
            .zip(kept[start..end].par_iter_mut())
            .with_min_len(64)
            .map(|(record, kept)| match kept.take() {
                Some((entry, values)) => (entry, values, Vec::new(), false),
                None => {
                    let (entry, values, problems) = read_record(dataset, segment, record, declared, paths);
                    (entry, values, problems, true)
                }
            })
            .collect();
        for (position, (entry, values, problems, anew)) in (start..).zip(read) {
            let record = &records[position];
            if anew && gathered.unchanged {
                let same = gave(record.id).is_some_and(|(was, were)| **was == *entry && *were == values);
                gathered.unchanged = same;
            }
            gathered.clean.push(problems.is_empty());
            gathered.values.add(position, record.id, values);
            gathered.names.push(entry);
            gathered.problems.extend(problems);
        }
    }
    gathered
}

/// The extract of `segment` when `store` keeps one that needs no row read but those of its
/// changed records ([`ExtractStore::held`]), and each of those gives again what it gave the
/// previous build: its filters' values are the kept summary's, and its names entries are not
/// read (`names` empty) unless `wanted` (of a resource not compared, they are then read:
/// `None`). `None` too when the kept extract cannot stand for the resource's.
fn extract_held(
    dataset: &Dataset,
    segment: &str,
    declared: &[FilterField],
    store: &ExtractStore,
    wanted: bool,
) -> Option<Extracted> {
    let paths: Vec<FieldPath> = declared.iter().filter_map(|f| FieldPath::parse(&f.path).ok()).collect();
    if paths.len() != declared.len() {
        return None;
    }
    let records = &dataset.resources[segment].records;
    let declared_paths: Vec<String> = declared.iter().map(|f| f.path.clone()).collect();
    let held = store.held(segment, &declared_paths, &records.iter().map(|r| r.id).collect::<Vec<_>>(), wanted)?;
    let same = held.before.par_iter().all(|(position, (was, were))| {
        let (entry, values, problems) = read_record(dataset, segment, &records[*position], declared, &paths);
        problems.is_empty() && *entry == **was && values == *were
    });
    if !same {
        return None;
    }
    let unchanged = store.compares(segment);
    let Summary { fields, most } = store.renew(segment, held);
    Some(Extracted { names: Vec::new(), fields, most_from_one: most, problems: Vec::new(), unchanged })
}

/// The names entry of `record` and the values it takes for each of `paths`, read from its data
/// (a record that cannot be read as JSON has none), with the values too long to be a folder
/// name as problems.
fn read_record(
    dataset: &Dataset,
    segment: &str,
    record: &Record,
    declared: &[FilterField],
    paths: &[FieldPath],
) -> (Box<[u8]>, Vec<Vec<String>>, Vec<Problem>) {
    let source = dataset.record_source(segment, record);
    let file = source.problem_path();
    // held from before the read until the values are taken: the tape is several times the text
    let _share = crate::data::parse_budget::hold(source.size());
    let (bytes, changed) = match source.read() {
        Ok(bytes) => (Some(bytes), None),
        Err(problem) => (None, Some(problem)),
    };
    // numbers as written (a filter's value is its text)
    let tape = bytes.as_deref().and_then(|bytes| Tape::parse(bytes).ok());
    let value = tape.as_ref().map(Tape::root).filter(|root| matches!(root.kind(), Kind::Object(_)));
    let names = value.map(search::localized_names).unwrap_or_default();
    let values: Vec<Vec<String>> = paths.iter().map(|p| value.map(|v| p.values(v)).unwrap_or_default()).collect();
    let mut too_long = value.map(|v| too_long(&file, v, declared, paths, &values)).unwrap_or_default();
    too_long.extend(changed);
    let entry = NameEntry { id: record.id, name: record.name.as_deref().map(str::to_string), names };
    (search::entry_bytes(&entry).into_boxed_slice(), values, too_long)
}

/// The values of `record` (in `file`) too long to be a folder name, each a problem at its JSON
/// location: a value is a folder of the tree (`_filters/<field>/<value>/`).
fn too_long(
    file: &std::path::Path,
    record: Node<'_>,
    declared: &[FilterField],
    paths: &[FieldPath],
    values: &[Vec<String>],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for ((field, path), values) in declared.iter().zip(paths).zip(values) {
        for value in values {
            let bytes = layout::folder_name(value).len();
            if bytes <= MAX_FOLDER_BYTES {
                continue;
            }
            let at = path.locate(record, value).unwrap_or_else(|| "$".to_string());
            let message = format!(
                "the value {} of the filter {:?} makes a folder name of {bytes} bytes (each character other \
                 than a-z, 0-9 and '-' takes 3), and a folder name is at most {MAX_FOLDER_BYTES} bytes: shorten \
                 the value, or filter on another field",
                shown(value),
                field.name
            );
            problems.push(Problem::new(file, at, message));
        }
    }
    problems
}

/// The longest folder name in the tree, in bytes (file systems allow 255).
const MAX_FOLDER_BYTES: usize = crate::config::MAX_NAME_BYTES;

/// `value` quoted for a message, its first 60 characters when it is longer.
fn shown(value: &str) -> String {
    match value.char_indices().nth(60) {
        Some((end, _)) => format!("{:?}... ({} bytes)", &value[..end], value.len()),
        None => format!("{value:?}"),
    }
}

/// The values document of a filter: `{"name", "path", "count", "results": [{"value", "count",
/// "url", "list"}]}`, a result per value, ascending; `url` asks the list for the value's records
/// (`?name=value`), `list` is the folder of their list's files (for a client of a bare store).
pub(crate) fn values_document(
    settings: &BuildSettings,
    segment: &str,
    field: &FilterField,
    values: &[(String, Vec<u32>)],
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Document<'a> {
        name: &'a str,
        path: &'a str,
        count: usize,
        results: Vec<Value<'a>>,
    }
    #[derive(Serialize)]
    struct Value<'a> {
        value: &'a str,
        count: usize,
        url: String,
        list: String,
    }
    let list_url = layout::list_url(&settings.base_url, segment);
    let results = values
        .iter()
        .map(|(value, positions)| Value {
            value,
            count: positions.len(),
            url: format!("{list_url}?{}", &crate::filters::query_tail([(field.name.as_str(), value.as_str())])[1..]),
            list: layout::list_url(&settings.base_url, &layout::filter_list(segment, &field.name, value)),
        })
        .collect();
    let document = Document { name: &field.name, path: &field.path, count: values.len(), results };
    let bytes = if settings.pretty { serde_json::to_vec_pretty(&document) } else { serde_json::to_vec(&document) };
    bytes.expect("a values document serialises")
}

/// `page` of the list of the `count` records of `segment` whose `field` takes `value` (`shown`:
/// the entries of the page): query links keep the condition, path links name the value's own
/// page files.
pub(crate) fn filter_page(
    settings: &BuildSettings,
    segment: &str,
    count: u64,
    shown: impl Iterator<Item = Vec<u8>>,
    (field, value): (&FilterField, &str),
    page: Page,
) -> Vec<u8> {
    let list_url = layout::list_url(&settings.base_url, segment);
    let files_url = layout::list_url(&settings.base_url, &layout::filter_list(segment, &field.name, value));
    let tail = crate::filters::query_tail([(field.name.as_str(), value)]);
    let links = ListLinks { list_url: &list_url, query_tail: &tail, files_url: &files_url, style: settings.links };
    paging::render_shown_page(count, shown, &links, page, settings.pretty)
}
