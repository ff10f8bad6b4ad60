//! Assemble: the files the load found, made a dataset: each segment's records a resource
//! (sorted by id or by its order file, names checked, indexed by id), each record given its
//! sub-documents, and the resources declared external checked against the data.

use super::dataset::{Dataset, Record, Resource, SubDocs};
use super::validate::{apply_order, check_shared_names, check_unique_names};
use crate::problem::Problem;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Makes each segment's records a resource of `dataset`: sorted by id (or by its order file),
/// names checked, indexed by id.
pub(super) fn index_resources(
    dataset: &mut Dataset,
    records: BTreeMap<String, Vec<Record>>,
    mut orders: BTreeMap<String, (PathBuf, Value)>,
    config_path: &Path,
    problems: &mut Vec<Problem>,
) {
    for (segment, mut list) in records {
        // ids are unique (a file's is its name; a table's repeated id is a problem, its line
        // left out), so an unstable sort gives the order a stable one does, in place: a stable
        // sort holds a copy of the list, 64 bytes a record
        list.sort_unstable_by_key(|r| r.id);
        let shadowed = check_unique_names(&dataset.dir, &segment, &list, &dataset.config, problems);
        if let Some((file, order)) = orders.remove(&segment) {
            list = apply_order(&file, order, list, problems);
        }
        if list.first().is_some_and(|r| r.line.is_some()) {
            list.sort_unstable_by_key(|r| r.line.map(|span| span.line)); // a table's list is in line order
        }
        let by_id = super::dataset::ById::new(&list);
        dataset.resources.insert(segment, Resource { records: list, by_id, shadowed });
    }
    check_shared_names(config_path, dataset, problems);
    for (_, (file, _)) in orders {
        problems.push(Problem::whole(&file, "an order file in a folder without records: remove it or add records"));
    }
}

/// Gives each record its sub-documents, sorted by name; a sub-document without its record is a
/// problem.
pub(super) fn attach_subdocs(dataset: &mut Dataset, subdocs: SubDocs, problems: &mut Vec<Problem>) {
    for (segment, mut items) in subdocs {
        items.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
        let mut items = items.into_iter().peekable();
        while let Some((id, subdoc)) = items.next() {
            match dataset.resources.get_mut(&segment).and_then(|r| r.by_id.get(&r.records, id).map(|i| (r, i))) {
                Some((resource, i)) => {
                    // A record's sub-documents are adjacent: one vector of their number each
                    // (pushed one by one, each would hold room for four).
                    let mut run = vec![subdoc];
                    while let Some((_, next)) = items.next_if(|(i, _)| *i == id) {
                        run.push(next);
                    }
                    run.shrink_to_fit();
                    resource.records[i].subdocs = run.into_boxed_slice();
                }
                None => problems.push(Problem::whole(
                    &dataset.subdoc_source(&segment, id, &subdoc).problem_path(),
                    match subdoc.line {
                        Some(_) => format!(
                            "sub-document of {segment} {id}, which has no record: add it to {segment}.ndjson or remove the line"
                        ),
                        None => format!(
                            "sub-document of {segment} {id}, which has no record: add {segment}/{id}.json or remove the folder"
                        ),
                    },
                )),
            }
        }
    }
}

/// A resource declared external must not be in the data.
pub(super) fn check_external(dataset: &Dataset, config_path: &Path, problems: &mut Vec<Problem>) {
    for external in &dataset.config.external {
        if dataset.resources.contains_key(external) {
            problems.push(Problem::new(
                config_path,
                "$.external",
                format!(
                    "{external:?} is declared external but {} holds it: remove it from \"external\"",
                    crate::fsutil::show_dir(&dataset.dir)
                ),
            ));
        }
    }
}
