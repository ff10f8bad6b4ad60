//! The render step of a build: which planned documents it renders (all, or in a partial build
//! those of what changed, see [`write::Documents::visit`]), and their bytes; and what a partial
//! build finds changed since the previous one.

use super::index;
use super::{PreviousBuild, list_hashes, openapi, plan, render, write};
use crate::data::recorded::{DataFiles, Place};
use crate::data::{data_path, load};
use crate::tree::layout;
use crate::tree::manifest::BuildSettings;
use std::collections::HashSet;

/// The render step: which planned documents this build renders (all, or those a partial
/// build needs), and their bytes. The writer asks for each document as it goes, so that no
/// rendered body is held longer than it takes to place it.
pub(super) struct Rendering<'d> {
    pub(super) renderer: render::DocumentRenderer<'d>,
    dataset: &'d load::Dataset,
    settings: &'d BuildSettings,
    /// In a partial build: the data files whose hash changed, and the lists whose entries did.
    partial: Option<(HashSet<String>, HashSet<String>)>,
    /// In a partial build, until [`Rendering::take_back`]: the changed data files that existed
    /// before.
    existed: Option<Vec<String>>,
}

impl<'d> Rendering<'d> {
    /// Prepares rendering: every document, or in a partial build (`changed` given) those of
    /// what changed. Needs only the index's head, not its documents' table: see
    /// [`Rendering::take_back`], which a partial build calls once that table is read.
    pub(super) fn new(
        dataset: &'d load::Dataset,
        settings: &'d BuildSettings,
        previous: &PreviousBuild,
        changed: Option<Changed>,
    ) -> Rendering<'d> {
        let full = Rendering {
            renderer: render::DocumentRenderer::new(dataset, settings),
            dataset,
            settings,
            partial: None,
            existed: None,
        };
        let (Some(changed), Some(index), Some(_)) = (changed, &previous.index, &previous.tree) else { return full };
        let renderer = render::DocumentRenderer::new(dataset, settings);
        renderer.seed_schemas(index.schemas.clone());
        let lists_changed = list_hashes(dataset)
            .into_iter()
            .filter(|(segment, hash)| index.lists.get(segment) != Some(hash))
            .map(|(segment, _)| segment)
            .collect();
        let (partial, existed) = (Some((changed.files, lists_changed)), Some(changed.existed));
        Rendering { renderer, dataset, settings, partial, existed }
    }

    /// A partial build takes back from the schemas what the previous versions of the changed
    /// files showed them (read from the tree, by the index's documents' table). When it cannot,
    /// or the index is gone, every document is rendered instead: returns true then.
    pub(super) fn take_back(&mut self, previous: &PreviousBuild) -> bool {
        let Some(existed) = self.existed.take() else { return false };
        let taken = match (&previous.index, &previous.tree) {
            (Some(index), Some(tree)) => forget_previous(&self.renderer, index, tree, &existed),
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
}

impl write::Documents for Rendering<'_> {
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
            | plan::Content::FilterPage { segment, .. } => self.extract_dirty(segment),
        }
    }

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

    fn render(&self, output: &plan::Output<'_>) -> write::Rendered {
        self.renderer.render(&output.content)
    }

    fn render_again(&self, output: &plan::Output<'_>) -> write::Rendered {
        self.renderer.render_unobserved(&output.content)
    }

    fn finish(&self) -> Vec<(String, Vec<u8>)> {
        self.renderer.release_extracts();
        vec![(layout::OPENAPI_PATH.to_string(), openapi::document(&self.renderer))]
    }
}

/// The data files a partial build finds changed or added since the build an index describes.
pub(super) struct Changed {
    /// Every data file whose hash changed, or that is new.
    files: HashSet<String>,
    /// Those the previous build had (changed, not added).
    existed: Vec<String>,
}

impl Changed {
    pub(super) fn since(index: &index::Index, files: &DataFiles) -> Changed {
        let files: HashSet<String> = files.changed_since(&index.data).into_iter().collect();
        let existed = files.iter().filter(|rel| index.data.get(rel).is_some()).cloned().collect();
        Changed { files, existed }
    }
}

/// Takes back from the schemas what the previous versions of the changed records and
/// sub-documents (`existed`: the data files changed that the previous build had) showed them,
/// reading those versions from the tree (each checked against its hash in the index). False
/// when one cannot be: the build then renders every document.
fn forget_previous(
    renderer: &render::DocumentRenderer<'_>,
    index: &index::Index,
    tree: &crate::tree::dir::TreeDir,
    existed: &[String],
) -> bool {
    for rel in existed {
        let Some(place) = Place::of_data_file(rel) else { continue }; // gen.json, order files, tables
        let (segment, subdoc, path) = (place.segment, place.kind, place.tree_path(place.id));
        let Some(entry) = index.docs.file(&path) else { return false };
        let Some(bytes) = tree.read(&path, entry.stamp.size) else { return false };
        if blake3::hash(&bytes) != entry.hash.0 || renderer.forget(segment, subdoc, &bytes).is_err() {
            return false;
        }
    }
    true
}
