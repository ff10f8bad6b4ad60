//! The documents of one write, in one order: the planned outputs, then the late ones (made
//! once every other is rendered), with their paths and places, and whether the new tree has
//! a given path (for what is gone from it).

use crate::build::plan::{Output, Plan};
use crate::data::load::Dataset;
use crate::data::recorded::Place;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// The documents of one write: the planned outputs, then the late ones (by their paths).
pub(super) struct Docs<'a, 'o> {
    pub(super) dataset: &'o Dataset,
    pub(super) outputs: &'a Plan<'o>,
    pub(super) late: Vec<Vec<String>>,
}

/// One document of [`Docs`].
#[derive(Clone)]
pub(super) enum Doc<'a, 'o> {
    Planned(Cow<'a, Output<'o>>),
    Late(&'a [String]),
}

impl<'a, 'o> Docs<'a, 'o> {
    pub(super) fn all(&self) -> impl Iterator<Item = Doc<'_, 'o>> + '_ {
        let planned = self.outputs.iter().map(Doc::Planned);
        planned.chain(self.late.iter().map(|paths| Doc::Late(paths)))
    }

    /// The number of documents.
    pub(super) fn count(&self) -> usize {
        self.outputs.len() + self.late.len()
    }

    /// The `i`-th document of [`Docs::all`].
    pub(super) fn doc(&self, i: usize) -> Doc<'_, 'o> {
        match i.checked_sub(self.outputs.len()) {
            None => Doc::Planned(self.outputs.get(i)),
            Some(late) => Doc::Late(&self.late[late]),
        }
    }

    pub(super) fn paths(&self, doc: &Doc<'_, 'o>) -> Vec<String> {
        match doc {
            Doc::Planned(output) => output.paths(self.dataset),
            Doc::Late(paths) => paths.to_vec(),
        }
    }

    pub(super) fn place(&self, doc: &Doc<'_, 'o>) -> Option<(Place<'o>, Option<&'o str>)> {
        match doc {
            Doc::Planned(output) => output.place(self.dataset),
            Doc::Late(_) => None,
        }
    }

    /// True when the new tree has the file `path`.
    pub(super) fn planned(&self, path: &str, others: &Others<'_>, names: &OnceLock<Names<'o>>) -> bool {
        if others.contains(path) {
            return true;
        }
        let Some((segment, key, kind)) = crate::tree::layout::record_document(path) else { return false };
        let Some(resource) = self.dataset.resources.get(segment) else { return false };
        let record = match crate::config::parse_id(key) {
            Some(id) => resource.get(id),
            None => {
                let names = names.get_or_init(|| names_of(self.dataset));
                names.get(&(segment, key)).map(|&i| &resource.records[i])
            }
        };
        record.is_some_and(|record| kind.is_none_or(|kind| record.subdocs.iter().any(|s| *s.name == *kind)))
    }
}

/// The paths of the documents planned that are not records' (hashed by [`Spread`]: SipHash
/// cost more than the lookups of a partial build's check of what is gone).
pub(super) type Others<'o> = HashSet<&'o str, std::hash::BuildHasherDefault<crate::data::dataset::Spread>>;

/// Each record by (segment, path name).
pub(super) type Names<'o> = HashMap<(&'o str, &'o str), usize>;

/// The records of `dataset` that have a name path, by (segment, name).
pub(super) fn names_of(dataset: &Dataset) -> Names<'_> {
    let mut names = HashMap::new();
    for (segment, resource) in &dataset.resources {
        for (i, record) in resource.records.iter().enumerate() {
            if let Some(name) = resource.path_name(record) {
                names.insert((segment.as_str(), name), i);
            }
        }
    }
    names
}
