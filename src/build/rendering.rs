//! The render step of a build: which planned documents it renders (all, or in a partial build
//! those of what changed), yielded to a writer as a lazy stream of [`Document`]s
//! ([`Documents`]); and what a partial build finds changed since the previous one.
//!
//! The stream is the seam between rendering and writing: a writer (the write step's `Output`) takes
//! each document as it comes, and never sees how it was rendered.

mod chunked;

use super::index::{self, DocumentFile, Index};
use super::{PreviousBuild, openapi, plan, render};
use crate::data::recorded::{DataFiles, Place};
use crate::data::{data_path, load};
use crate::problem::{Problem, Problems};
use crate::progress::Progress;
use crate::tree::layout;
use crate::tree::manifest::BuildSettings;
use anyhow::Result;
pub(crate) use chunked::Chunked;
use rayon::prelude::*;
use std::collections::HashSet;
use std::sync::Mutex;

/// The render step: which planned documents this build renders (all, or those a partial
/// build needs), and their bytes, yielded as a stream ([`Rendering::documents`]).
pub(super) struct Rendering<'d> {
    pub(super) renderer: render::DocumentRenderer<'d>,
    dataset: &'d load::Dataset,
    settings: &'d BuildSettings,
    /// In a partial build: the data files whose hash changed, and the lists whose entries did.
    partial: Option<(HashSet<String>, HashSet<String>)>,
    /// In a partial build, until [`Rendering::take_back`]: the changed data files that existed
    /// before.
    existed: Option<Vec<String>>,
    /// In a partial build: what [`Changed`] found of the changed records' previous hashes.
    was: std::collections::BTreeMap<String, Vec<(i64, [u8; 32])>>,
    /// The resources whose records changed but whose extract did not (each record read anew
    /// gave the names entry and filter values it gave before, in the same list): their names
    /// documents and filters' files are kept ([`Rendering::keep_extracts`]).
    extracts_kept: HashSet<String>,
}

impl<'d> Rendering<'d> {
    /// Prepares rendering: every document, or in a partial build (`changed` given, with each
    /// list's hash now) those of what changed. Needs only the index's head, not its documents' table: see
    /// [`Rendering::take_back`], which a partial build calls once that table is read.
    pub(super) fn new(
        dataset: &'d load::Dataset,
        settings: &'d BuildSettings,
        previous: &PreviousBuild,
        changed: Option<(Changed, &std::collections::BTreeMap<String, String>)>,
    ) -> Rendering<'d> {
        let full = Rendering {
            renderer: render::DocumentRenderer::new(dataset, settings),
            dataset,
            settings,
            partial: None,
            existed: None,
            was: Default::default(),
            extracts_kept: HashSet::new(),
        };
        let (Some((changed, lists)), Some(index), Some(_)) = (changed, &previous.index, &previous.tree) else {
            return full;
        };
        let renderer = render::DocumentRenderer::new(dataset, settings);
        renderer.seed_schemas(index.schemas.clone());
        let lists_changed = lists
            .iter()
            .filter(|(segment, hash)| index.lists.get(*segment) != Some(hash))
            .map(|(segment, _)| segment.clone())
            .collect();
        let (partial, existed, was) = (Some((changed.files, lists_changed)), Some(changed.existed), changed.was);
        Rendering { renderer, dataset, settings, partial, existed, was, extracts_kept: HashSet::new() }
    }

    /// A partial build takes back from the schemas what the previous versions of the changed
    /// files showed them (read from the tree, by the index's documents' table). When it cannot,
    /// or the index is gone, every document is rendered instead: returns true then.
    pub(super) fn take_back(&mut self, previous: &PreviousBuild) -> bool {
        let Some(existed) = self.existed.take() else { return false };
        let taken = match (&previous.index, &previous.tree) {
            (Some(index), Some(output)) => {
                forget_previous(&self.renderer, index, &|path, max| output.read(path, max), &existed)
            }
            _ => false,
        };
        if !taken {
            self.renderer = render::DocumentRenderer::new(self.dataset, self.settings);
            self.partial = None;
        }
        !taken
    }
}

impl Rendering<'_> {
    /// True when the documents made of the extract of `segment` (its names document and its
    /// filters' files) are rendered: in a partial build, when one of its records' files changed
    /// (not only a sub-document's) or its list did.
    pub(super) fn extract_dirty(&self, segment: &str) -> bool {
        let Some((changed, lists_changed)) = &self.partial else { return true };
        let record_of_segment = |file: &String| data_path::DataPath::is_list_input(file, segment);
        lists_changed.contains(segment) || changed.iter().any(record_of_segment)
    }

    /// True when the extract of `segment` is worth comparing with the previous build's: in a
    /// partial build, when its records changed but its list did not. If every changed record
    /// gives what it gave the previous build, its names document and filters' files are the same.
    pub(super) fn may_keep_extract(&self, segment: &str) -> bool {
        let Some((_, lists_changed)) = &self.partial else { return false };
        !lists_changed.contains(segment) && self.extract_dirty(segment)
    }

    /// The records of `segment` changed since the previous build, each with its data hash then,
    /// sorted by id: those the extract of a compared resource reads again, and compares with the
    /// kept rows of that data.
    pub(super) fn changed_records(&self, segment: &str) -> Vec<(i64, [u8; 32])> {
        self.was.get(segment).cloned().unwrap_or_default()
    }

    /// Keeps the names documents and filters' files of the resources whose extract
    /// `extracts` found unchanged (see [`Rendering::may_keep_extract`]) rather than render them.
    pub(super) fn keep_extracts(&mut self, extracts: &super::extract::Extracts) {
        let unchanged =
            extracts.iter().filter(|(segment, extracted)| extracted.unchanged && self.may_keep_extract(segment));
        self.extracts_kept = unchanged.map(|(segment, _)| segment.clone()).collect();
    }
}

impl Rendering<'_> {
    /// True when `output` must be rendered; otherwise it is kept as the previous build left it.
    fn dirty(&self, output: &plan::Output<'_>) -> bool {
        let Some((changed, lists_changed)) = &self.partial else { return true };
        let resources = &self.dataset.resources;
        match output.content {
            plan::Content::Root | plan::Content::Meta => true,
            plan::Content::Record { segment, position } => {
                let id = resources[segment].records[position].id;
                changed.contains(&Place { segment, kind: None, id }.data_file())
            }
            plan::Content::SubDoc { segment, position, subdoc } => {
                let record = &resources[segment].records[position];
                let kind = Some(&*record.subdocs[subdoc].name);
                changed.contains(&Place { segment, kind, id: record.id }.data_file())
            }
            plan::Content::Page { segment, .. } => lists_changed.contains(segment),
            plan::Content::Names { segment }
            | plan::Content::NamesShard { segment, .. }
            | plan::Content::FilterValues { segment, .. }
            | plan::Content::FilterPage { segment, .. } => {
                self.extract_dirty(segment) && !self.extracts_kept.contains(segment)
            }
        }
    }

    /// In a build that renders only some records: the positions in `plan` of the records and
    /// sub-documents that may need it, sorted. Those are visited, with every document that is
    /// not a record's (a few per list); every other record is the previous build's, as the
    /// index has it. `None`: every document is visited.
    fn visit(&self, plan: &plan::Plan<'_>) -> Option<Vec<usize>> {
        let (changed, _) = self.partial.as_ref()?;
        let mut visit = Vec::new();
        for rel in changed {
            let Some(place) = Place::of_data_file(rel) else { continue }; // gen.json, tables
            let Some(resource) = self.dataset.resources.get(place.segment) else { continue };
            let Some(position) = resource.by_id.get(&resource.records, place.id) else { continue };
            let record = &resource.records[position];
            let subdoc = match place.kind {
                None => None,
                Some(kind) => record.subdocs.iter().position(|s| *s.name == *kind),
            };
            visit.extend(plan.position_of(place.segment, position, subdoc));
            // an added record may take a shared name's path from another: those are visited too
            if place.kind.is_none() && !resource.shadowed.is_empty() && record.name.is_some() {
                let same_name = resource.records.iter().enumerate().filter(|(_, r)| r.name == record.name);
                for (position, other) in same_name {
                    visit.extend(plan.position_of(place.segment, position, None));
                    let subdocs = (0..other.subdocs.len()).map(|n| plan.position_of(place.segment, position, Some(n)));
                    visit.extend(subdocs.flatten());
                }
            }
        }
        visit.sort_unstable();
        visit.dedup();
        Some(visit)
    }
}

/// The bytes of one document, or the problems found in its source.
pub(crate) type Rendered = Result<Vec<u8>, Vec<Problem>>;

/// One document of the stream the render step yields ([`Documents`]), as a writer takes it.
/// A document has one or more paths (a record's by id, then by name): one body stored under
/// each (in the tree, hard links of one file).
#[derive(Debug)]
pub(crate) enum Document {
    /// Rendered by this build.
    Rendered {
        /// Every path it is published at.
        paths: Vec<String>,
        /// Its bytes: dropped once the writer has placed them.
        bytes: Vec<u8>,
        /// BLAKE3 of `bytes`.
        hash: blake3::Hash,
        /// What the previous build's index records of it, when it had it (at the same paths).
        previous: Option<DocumentFile>,
    },
    /// Not rendered: kept as the previous build left it, which the index describes (its hash,
    /// its files). Only a partial build keeps documents.
    Kept {
        /// What the previous build's index records of it.
        previous: DocumentFile,
    },
    /// Made once every planned document is rendered, from what rendering saw (the OpenAPI
    /// document): at one path.
    Late {
        /// Its path.
        path: String,
        /// Its bytes.
        bytes: Vec<u8>,
        /// BLAKE3 of `bytes`.
        hash: blake3::Hash,
        /// What the previous build's index records of it.
        previous: Option<DocumentFile>,
    },
}

/// The documents of a build, as a lazy stream: nothing is rendered until a writer takes them
/// ([`Documents::place_each`]), and then each document is rendered by one worker and handed
/// to the writer at once.
///
/// What bounds the memory of a build's write: the stream holds one rendered body per worker
/// (rayon's, one per core), each for as long as the writer's `put` takes; what `put` returns
/// for a document is `Copy` (a hash, a few flags: it cannot own a body), and is all the stream
/// keeps of it. A writer must not keep bodies either: it writes each one out as it comes.
pub(crate) struct Documents<'s, 'd> {
    rendering: &'s Rendering<'d>,
    plan: &'s plan::Plan<'d>,
    /// The previous build's index, which knows the documents kept.
    index: Option<&'s Index>,
    progress: &'s Progress,
    /// The positions visited, sorted, when not every document is.
    visit: Option<Vec<usize>>,
}

impl Documents<'_, '_> {
    /// True when only some documents are visited (a partial build): the others are the
    /// previous build's, unchanged, as the index has them.
    pub(crate) fn partial(&self) -> bool {
        self.visit.is_some()
    }
}

/// What a writer returned for each document of the stream that it was handed, in plan order.
pub(crate) struct Visited<R> {
    /// What `put` returned, for each document visited.
    pub(crate) each: Chunked<R>,
    /// The position in the plan of each of `each`, when not every document was visited (the
    /// others are the previous build's, unchanged, as the index has them).
    pub(crate) at: Option<Vec<usize>>,
}

impl<'d> Rendering<'d> {
    /// The render step: the documents of `plan`, as a lazy stream (see [`Documents`]). `index`:
    /// the previous build's, when the tree in place is the one it describes.
    pub(super) fn documents<'s>(
        &'s self,
        plan: &'s plan::Plan<'d>,
        index: Option<&'s Index>,
        progress: &'s Progress,
    ) -> Documents<'s, 'd> {
        let visit = self.visit(plan).map(|records| {
            let mut visit: Vec<usize> = plan.listed_positions().map(|(i, _)| i).chain(records).collect();
            visit.sort_unstable();
            visit.dedup();
            visit
        });
        Documents { rendering: self, plan, index, progress, visit }
    }
}

impl<'d> Documents<'_, 'd> {
    /// Every planned document (those not visited included), in plan order.
    pub(crate) fn plan(&self) -> &plan::Plan<'d> {
        self.plan
    }

    /// The dataset the documents are made of.
    pub(crate) fn dataset(&self) -> &'d load::Dataset {
        self.rendering.dataset
    }

    /// How many documents [`Documents::place_each`] renders (those visited that need it).
    pub(crate) fn to_render(&self) -> usize {
        let dirty = |i: usize| self.rendering.dirty(&self.plan.get(i));
        match &self.visit {
            Some(visit) => visit.iter().filter(|&&i| dirty(i)).count(),
            None => (0..self.plan.len()).filter(|&i| dirty(i)).count(),
        }
    }

    /// Renders the documents that need it and hands every document visited to `put`, in
    /// parallel (each on one worker, in no order), as a [`Document::Rendered`] or
    /// [`Document::Kept`]; a document dropped when `put` returns. Returns what `put` returned
    /// for each, in plan order. Fails with every problem found in the sources (then `put` saw
    /// only the documents that rendered), or the first error `put` returned.
    pub(crate) fn place_each<R: Copy + Send + Default>(
        &self,
        put: impl Fn(Document) -> Result<R> + Sync,
    ) -> Result<Visited<R>> {
        self.progress.set_total(self.to_render() as u64);
        // Failures are gathered aside, so that what is returned for a million documents is one
        // vector of small records, not of `Result`s.
        let problems: Mutex<Vec<Problem>> = Mutex::default();
        let error: Mutex<Option<anyhow::Error>> = Mutex::default();
        let each = |at: usize| {
            let put = match self.document(at) {
                Ok(kept @ Document::Kept { .. }) => return put(kept).unwrap_or_else(|e| failed(&error, e)),
                Ok(rendered) => put(rendered),
                Err(found) => {
                    problems.lock().expect("no panic while rendering").extend(found);
                    Ok(R::default())
                }
            };
            self.progress.inc(1);
            put.unwrap_or_else(|e| failed(&error, e))
        };
        // The documents made of the extracts go first, and the extracts are let go of before
        // the others fill the vector of what `put` returned: at 1M records, 148 MB and 115 MB
        // that were held together at the end (BENCHMARKS.md, issue 49).
        let visited = |k: usize| self.visit.as_ref().map_or(k, |visit| visit[k]);
        let count = self.visit.as_ref().map_or(self.plan.len(), Vec::len);
        let first: Vec<usize> = self.made_of_extracts();
        let firsts: Vec<R> = first.par_iter().map(|&k| each(visited(k))).collect();
        self.rendering.renderer.release_extracts();
        let mut each =
            Chunked::make(count, |k| if first.binary_search(&k).is_ok() { R::default() } else { each(visited(k)) });
        for (k, r) in first.into_iter().zip(firsts) {
            each.set(k, r);
        }
        if let Some(e) = error.into_inner().expect("no panic while rendering") {
            return Err(e);
        }
        let mut problems = problems.into_inner().expect("no panic while rendering");
        if !problems.is_empty() {
            problems.sort();
            return Err(Problems::all(problems).into());
        }
        Ok(Visited { each, at: self.visit.clone() })
    }

    /// Where the documents made of the extracts are among those visited (their positions in the
    /// plan when every document is visited), ascending: only listed documents are.
    fn made_of_extracts(&self) -> Vec<usize> {
        let listed = self.plan.listed_positions().filter(|(_, output)| output.content.is_made_of_extracts());
        match &self.visit {
            None => listed.map(|(i, _)| i).collect(),
            Some(visit) => listed.filter_map(|(i, _)| visit.binary_search(&i).ok()).collect(),
        }
    }

    /// The document at position `at` of the plan: kept when it need not be rendered and the
    /// previous build had it, else rendered.
    fn document(&self, at: usize) -> Result<Document, Vec<Problem>> {
        let output = self.plan.get(at);
        let dataset = self.rendering.dataset;
        let previous = self.index.and_then(|index| previous_document(index, dataset, &output));
        if !self.rendering.dirty(&output)
            && let Some(previous) = previous
        {
            return Ok(Document::Kept { previous });
        }
        let bytes = self.rendering.renderer.render(&output.content)?;
        let hash = blake3::hash(&bytes);
        Ok(Document::Rendered { paths: output.paths(dataset), bytes, hash, previous })
    }

    /// The late documents (the OpenAPI document), made from what rendering saw: to be taken
    /// once every planned document is placed. Lets go of the extracts first.
    pub(crate) fn late(&self) -> Vec<Document> {
        let renderer = &self.rendering.renderer;
        renderer.release_extracts();
        let (path, bytes) = (layout::OPENAPI_PATH.to_string(), openapi::document(renderer));
        let previous = self.index.and_then(|index| index.docs.other(std::slice::from_ref(&path)));
        vec![Document::Late { hash: blake3::hash(&bytes), path, bytes, previous }]
    }

    /// The bytes of the planned document at `at` rendered once more, seen by nothing (the
    /// schemas saw it already): for a writer that cannot read back what it placed.
    pub(crate) fn render_again(&self, at: usize) -> Rendered {
        self.rendering.renderer.render_unobserved(&self.plan.get(at).content)
    }
}

/// What `index` records of the planned document `output`, when the previous build had it at
/// the same paths.
pub(crate) fn previous_document(
    index: &Index,
    dataset: &load::Dataset,
    output: &plan::Output<'_>,
) -> Option<DocumentFile> {
    match output.place(dataset) {
        Some((place, name)) => index.docs.keyed(&place, name),
        None => index.docs.other(&output.listed),
    }
}

/// Notes the first error a writer returned; what stands for its document then.
fn failed<R: Default>(error: &Mutex<Option<anyhow::Error>>, e: anyhow::Error) -> R {
    error.lock().expect("no panic while rendering").get_or_insert(e);
    R::default()
}

/// The data files a partial build finds changed or added since the build an index describes.
pub(super) struct Changed {
    /// Every data file whose hash changed, or that is new.
    files: HashSet<String>,
    /// Those the previous build had (changed, not added).
    existed: Vec<String>,
    /// Of the records changed that the previous build had: each one's data hash then, by
    /// segment, sorted by id (what says which kept extract rows are that build's).
    was: std::collections::BTreeMap<String, Vec<(i64, [u8; 32])>>,
}

impl Changed {
    pub(super) fn since(index: &index::Index, files: &DataFiles) -> Changed {
        let files: HashSet<String> = files.changed_since(&index.data).into_iter().collect();
        let (mut existed, mut was) = (Vec::new(), std::collections::BTreeMap::<String, Vec<_>>::new());
        for rel in &files {
            let Some(old) = index.data.get(rel) else { continue }; // added
            if let Some(place) = Place::of_data_file(rel).filter(|place| place.kind.is_none()) {
                was.entry(place.segment.to_string()).or_default().push((place.id, *old.hash.0.as_bytes()));
            }
            existed.push(rel.clone());
        }
        was.values_mut().for_each(|hashes| hashes.sort_unstable());
        Changed { files, existed, was }
    }
}

/// Takes back from the schemas what the previous versions of the changed records and
/// sub-documents (`existed`: the data files changed that the previous build had) showed them,
/// reading those versions with `read` from the output in place, tree or archive (each checked against its hash in the index). False
/// when one cannot be: the build then renders every document.
fn forget_previous(
    renderer: &render::DocumentRenderer<'_>,
    index: &index::Index,
    read: &dyn Fn(&str, u64) -> Option<Vec<u8>>,
    existed: &[String],
) -> bool {
    if index.docs.is_empty() {
        return false; // an archive an older gen wrote: its index has no documents' table
    }
    for rel in existed {
        let Some(place) = Place::of_data_file(rel) else { continue }; // gen.json, order files, tables
        let (segment, subdoc, path) = (place.segment, place.kind, place.tree_path(place.id));
        let Some(entry) = index.docs.file(&path) else { return false };
        let Some(bytes) = read(&path, entry.stamp.size) else { return false };
        if blake3::hash(&bytes) != entry.hash.0 || renderer.forget(segment, subdoc, &bytes).is_err() {
            return false;
        }
    }
    true
}
