//! Reading the published tree before anything is written: every list, every record folder it
//! names, and every link checked to stay inside the source, with every problem of the source's
//! layout reported at once.

use super::{Job, SKIPPED, rename_segment};
use crate::config::parse_id;
use crate::data::data_path::DataPath;
use crate::json;
use crate::problem::{Problem, Problems};
use crate::tree::layout::{API_PREFIX, DOCUMENT_FILE};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What [`scan`] found in the source: the documents to import and each list's order.
pub(super) struct Scanned {
    pub(super) jobs: Vec<Job>,
    /// Documents refused for where a link leads them (outside the source): reported with the
    /// problems found reading the others, so that one run shows them all.
    pub(super) refused: Vec<Problem>,
    /// The folders whose list is not in id order, with their ids in list order.
    pub(super) orders: BTreeMap<String, Vec<i64>>,
    pub(super) resources: usize,
    pub(super) records: usize,
    pub(super) subdocs: usize,
}

/// Reads every list of the published tree at `root` (resolved: `source`) and plans one job per
/// record and sub-document. Fails with every problem of the source's layout: a list naming a
/// missing record, a record folder no list names, a link leading outside the source.
pub(super) fn scan(root: &Path, source: &Path, keep: bool) -> Result<Scanned> {
    let mut problems = Vec::new();
    let mut scanned = Scanned {
        jobs: Vec::new(),
        refused: Vec::new(),
        orders: BTreeMap::new(),
        resources: 0,
        records: 0,
        subdocs: 0,
    };
    for segment in list_dirs(root).with_context(|| format!("cannot read {}", root.display()))? {
        if SKIPPED.contains(&segment.as_str()) {
            continue;
        }
        let folder = rename_segment(&segment, keep).to_string();
        let Some(ids) = read_list(root, &segment, source, &mut problems) else { continue };
        let listed: BTreeSet<i64> = ids.iter().copied().collect();
        for id in &ids {
            scan_record(&root.join(&segment), &folder, *id, source, &mut scanned, &mut problems);
        }
        for stray in list_dirs(&root.join(&segment)).unwrap_or_default() {
            if parse_id(&stray).is_none_or(|id| !listed.contains(&id)) {
                problems.push(Problem::new(
                    &root.join(&segment).join(&stray),
                    "-",
                    format!("not named by {segment}/index.json: the list and the record folders disagree"),
                ));
            }
        }
        scanned.resources += 1;
        scanned.records += ids.len();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        if sorted != ids {
            scanned.orders.insert(folder, ids);
        }
    }
    if !problems.is_empty() {
        problems.append(&mut scanned.refused);
        problems.sort();
        return Err(Problems::all(problems).into());
    }
    Ok(scanned)
}

/// Plans the jobs of record `id` of the published resource folder `dir`, and of its
/// sub-documents, into `scanned`; or notes why it cannot be imported.
pub(super) fn scan_record(
    dir: &Path,
    folder: &str,
    id: i64,
    source: &Path,
    scanned: &mut Scanned,
    problems: &mut Vec<Problem>,
) {
    let record_dir = dir.join(id.to_string());
    let record = record_dir.join(DOCUMENT_FILE);
    // anything there is read (and refused if it is not a regular file)
    if !record.exists() {
        problems.push(Problem::new(
            &dir.join(DOCUMENT_FILE),
            "$.results",
            format!("the list names record {id}, but {} is missing", record.display()),
        ));
        return;
    }
    let sub_documents = list_dirs(&record_dir).unwrap_or_default().into_iter().filter_map(|sub| {
        let path = record_dir.join(&sub).join(DOCUMENT_FILE);
        path.exists().then(|| (path, DataPath::SubDoc { segment: folder, id, name: &sub }.file(), None))
    });
    let record_job = (record, DataPath::Record { segment: folder, id }.file(), Some((folder.to_string(), id)));
    for (path, target, record) in std::iter::once(record_job).chain(sub_documents) {
        scanned.subdocs += usize::from(record.is_none());
        match inside_source(&path, source) {
            Ok(()) => scanned.jobs.push(Job { source: path, target, record }),
            Err(problem) => scanned.refused.push(problem),
        }
    }
}

/// Largest published list read (1 GiB): a list is a line per record, so it grows with the
/// resource (a list of 600,000 records is about 60 MB), unlike a record, which is bounded by
/// the document size limit.
const MAX_LIST_BYTES: u64 = 1 << 30;

/// Reads a published list and returns its ids in order.
pub(super) fn read_list(root: &Path, segment: &str, source: &Path, problems: &mut Vec<Problem>) -> Option<Vec<i64>> {
    let path = root.join(segment).join(DOCUMENT_FILE);
    if let Err(problem) = inside_source(&path, source) {
        problems.push(problem);
        return None;
    }
    let value = match json::read_json_limited(&path, MAX_LIST_BYTES) {
        Ok(value) => value,
        Err(problem) => {
            problems.push(problem);
            return None;
        }
    };
    let Some(results) = value.get("results").and_then(Value::as_array) else {
        problems.push(Problem::whole(&path, "a published list is an object with a \"results\" array"));
        return None;
    };
    let prefix = format!("{API_PREFIX}{segment}/");
    let mut ids = Vec::with_capacity(results.len());
    let mut seen = std::collections::HashSet::new();
    for (i, entry) in results.iter().enumerate() {
        let id = entry
            .get("url")
            .and_then(Value::as_str)
            .and_then(|url| url.strip_prefix(&prefix))
            .and_then(|rest| rest.strip_suffix('/'))
            .and_then(parse_id);
        match id {
            Some(id) if !seen.insert(id) => problems.push(Problem::new(
                &path,
                format!("$.results[{i}].url"),
                format!("record {id} is listed twice: a list names each record once"),
            )),
            Some(id) => ids.push(id),
            None => problems.push(Problem::new(
                &path,
                format!("$.results[{i}].url"),
                format!("expected a url of the form {prefix}<id>/"),
            )),
        }
    }
    Some(ids)
}

/// Refuses an output folder that is the source, holds it, or lies inside it: replacing it would
/// delete the source (`--out "$PWD" --force` in the folder that holds the checkout), and writing
/// inside it would change the source (`--out SRC/api/v2`). Links are resolved first, so a link
/// to any of these is refused too. Returns the source's resolved path.
pub(super) fn refuse_output_overlapping_source(src: &Path, out: &Path) -> Result<PathBuf> {
    let src = std::fs::canonicalize(src).with_context(|| format!("cannot read {}", src.display()))?;
    // `out` may not exist yet: resolve its nearest existing ancestor.
    let mut existing = out.to_path_buf();
    let mut rest = Vec::new();
    let resolved = loop {
        match std::fs::canonicalize(&existing) {
            Ok(path) => break rest.iter().rev().fold(path, |path: PathBuf, part| path.join(part)),
            Err(_) => match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name);
                    existing = if parent.as_os_str().is_empty() { PathBuf::from(".") } else { parent.to_path_buf() };
                }
                _ => return Ok(src),
            },
        }
    };
    if src.starts_with(&resolved) {
        bail!(
            "--out {} holds the source {}: importing would replace the source; choose an --out folder outside it, e.g. --out data",
            out.display(),
            src.display()
        );
    }
    if resolved.starts_with(&src) {
        bail!(
            "--out {} is inside the source {}: importing would write into the source; choose an --out folder outside it, e.g. --out data",
            out.display(),
            src.display()
        );
    }
    Ok(src)
}

/// Refuses a source file that a link leads outside the source folder (`source`, resolved):
/// whatever it holds would be imported and published.
pub(super) fn inside_source(path: &Path, source: &Path) -> Result<(), Problem> {
    match std::fs::canonicalize(path) {
        Ok(resolved) if !resolved.starts_with(source) => Err(Problem::whole(
            path,
            format!(
                "links outside the source, to {}: copy the file into the source or remove the link, then run again",
                resolved.display()
            ),
        )),
        // a file that cannot be resolved is reported when it is read
        _ => Ok(()),
    }
}

/// Names of the sub-folders of `dir`, sorted.
pub(super) fn list_dirs(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        // a link to a folder is followed (and refused later if it leads outside the source)
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().to_string());
        }
    }
    names.sort();
    Ok(names)
}
