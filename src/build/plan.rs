//! Plan: a pure function from the indexed dataset to the list of documents the tree holds,
//! each with every path it is published at. Nothing is rendered or written here.

use crate::build::extract::{Extracted, Extracts};
use crate::build::index::Place;
use crate::build::load::Dataset;
use crate::filters::FilterField;
use crate::paging::{self, LinkStyle, Page};
use crate::tree::layout::{self, META_PATH, ROOT_PATH};
use crate::tree::manifest::BuildSettings;
use std::collections::BTreeMap;

/// One document of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content<'a> {
    /// `api/v2/index.json`: every resource's list url.
    Root,
    /// `api/v2/meta/index.json`: what the tree holds.
    Meta,
    /// A record, by id and by name.
    Record {
        /// The resource.
        segment: &'a str,
        /// Its position in the resource's records.
        position: usize,
    },
    /// A record's sub-document, by id and by name.
    SubDoc {
        /// The resource.
        segment: &'a str,
        /// The record's position in the resource's records.
        position: usize,
        /// The sub-document's position in the record's.
        subdoc: usize,
    },
    /// A page of a list.
    Page {
        /// The resource.
        segment: &'a str,
        /// Which page.
        page: Page,
    },
    /// A resource's names document, for `?q=` (see [`crate::search`]).
    Names {
        /// The resource.
        segment: &'a str,
    },
    /// Shard `shard` of the names of a resource whose names document is split.
    NamesShard {
        /// The resource.
        segment: &'a str,
        /// The shard's number.
        shard: usize,
    },
    /// The values document of a resource's declared filter (its `field`th, see [`crate::filters`]).
    FilterValues {
        /// The resource.
        segment: &'a str,
        /// The filter's position among the resource's.
        field: usize,
    },
    /// A page of the list of the records whose `field`th filter takes its `value`th value.
    FilterPage {
        /// The resource.
        segment: &'a str,
        /// The filter's position among the resource's.
        field: usize,
        /// The value's position among the filter's values.
        value: usize,
        /// Which page.
        page: Page,
    },
}

impl<'a> Content<'a> {
    /// The resource this document belongs to, if any.
    pub fn segment(&self) -> Option<&'a str> {
        match *self {
            Content::Root | Content::Meta => None,
            Content::Record { segment, .. }
            | Content::SubDoc { segment, .. }
            | Content::Page { segment, .. }
            | Content::Names { segment }
            | Content::NamesShard { segment, .. }
            | Content::FilterValues { segment, .. }
            | Content::FilterPage { segment, .. } => Some(segment),
        }
    }
}

/// A document of the tree. A record's or sub-document's paths are derived when needed
/// ([`Output::paths`]), not held: a tree of a million records has millions of them. Other
/// documents list theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output<'a> {
    /// What the document holds.
    pub content: Content<'a>,
    /// The paths (relative to the output folder) of a document that is not a record's or
    /// sub-document's; empty for those.
    pub listed: Box<[String]>,
}

impl<'a> Output<'a> {
    fn listed(content: Content<'a>, paths: Vec<String>) -> Output<'a> {
        Output { content, listed: paths.into_boxed_slice() }
    }

    /// The record or sub-document this document is, and the name it is also published under.
    pub fn place(&self, dataset: &'a Dataset) -> Option<(Place<'a>, Option<&'a str>)> {
        let (segment, position, subdoc) = match self.content {
            Content::Record { segment, position } => (segment, position, None),
            Content::SubDoc { segment, position, subdoc } => (segment, position, Some(subdoc)),
            _ => return None,
        };
        let resource = &dataset.resources[segment];
        let record = &resource.records[position];
        let kind = subdoc.map(|s| record.subdocs[s].name.as_str());
        Some((Place { segment, kind, id: record.id }, resource.path_name(record)))
    }

    /// Every path this document is published at: by id then by name for a record or
    /// sub-document, as listed for the others.
    pub fn paths(&self, dataset: &'a Dataset) -> Vec<String> {
        match self.place(dataset) {
            Some((place, name)) => {
                std::iter::once(place.tree_path(place.id)).chain(name.map(|name| place.tree_path(name))).collect()
            }
            None => self.listed.to_vec(),
        }
    }
}

/// Lists every document of the tree, in a deterministic order. The files of a resource's
/// declared filters are those of its values in `extracts`.
pub fn plan<'a>(dataset: &'a Dataset, options: &BuildSettings, extracts: &Extracts) -> Vec<Output<'a>> {
    let pages: Vec<BTreeMap<Page, Vec<String>>> = dataset
        .resources
        .iter()
        .map(|(segment, r)| page_files(segment, r.records.len() as u64, &options.page_sizes, options.links))
        .collect();
    let documents: usize = dataset.resources.values().flat_map(|r| &r.records).map(|r| 1 + r.subdocs.len()).sum();
    // Sized exactly: a vector that grows by doubling holds up to twice a million entries.
    let names = dataset.resources.len();
    let mut outputs = Vec::with_capacity(2 + documents + names + pages.iter().map(BTreeMap::len).sum::<usize>());
    outputs.push(Output::listed(Content::Root, vec![ROOT_PATH.to_string()]));
    outputs.push(Output::listed(Content::Meta, vec![META_PATH.to_string()]));
    for ((segment, resource), pages) in dataset.resources.iter().zip(pages) {
        let segment = segment.as_str();
        for (position, record) in resource.records.iter().enumerate() {
            outputs.push(Output { content: Content::Record { segment, position }, listed: Box::default() });
            for subdoc in 0..record.subdocs.len() {
                outputs.push(Output { content: Content::SubDoc { segment, position, subdoc }, listed: Box::default() });
            }
        }
        for (page, paths) in pages {
            outputs.push(Output::listed(Content::Page { segment, page }, paths));
        }
        outputs.push(Output::listed(Content::Names { segment }, vec![layout::names_path(segment)]));
        for shard in 0..crate::search::names_shards(resource.records.len()) {
            outputs.push(Output::listed(
                Content::NamesShard { segment, shard },
                vec![layout::names_shard_path(segment, shard)],
            ));
        }
        if let (Some(declared), Some(extracted)) = (options.filters.get(segment), extracts.get(segment)) {
            plan_filters(&mut outputs, segment, declared, extracted, options);
        }
    }
    outputs
}

/// The files of the declared filters of `segment`: per field its values document, and per value
/// the page files of its list (as [`page_files`] names a list's).
fn plan_filters<'a>(
    outputs: &mut Vec<Output<'a>>,
    segment: &'a str,
    declared: &[FilterField],
    extracted: &Extracted,
    options: &BuildSettings,
) {
    for (field, (declared, values)) in declared.iter().zip(&extracted.fields).enumerate() {
        let values_path = layout::filter_values_path(segment, &declared.name);
        outputs.push(Output::listed(Content::FilterValues { segment, field }, vec![values_path]));
        for (value, (text, positions)) in values.iter().enumerate() {
            let list = layout::filter_list(segment, &declared.name, text);
            let count = positions.len() as u64;
            let whole = [layout::list_path(&list), layout::all_page_path(&list)];
            for (page, mut paths) in page_files(&list, count, &options.page_sizes, options.links) {
                // the whole list once, as `all` (and the first page when that is all of it): no
                // link names `_pages/<size>/0/` of a list it fits in, and no host maps a
                // filter's `?limit=` onto files
                if page.is_everything(count) {
                    paths.retain(|path| whole.contains(path));
                }
                outputs.push(Output::listed(Content::FilterPage { segment, field, value, page }, paths));
            }
        }
    }
}

/// The page files of one list, grouped by content: the list root (offset 0, limit 20), the
/// pages of each page size that [`paging::precomputed_pages`] names for links `style`, and the
/// whole list. Pages that hold the whole list have the same bytes whatever their limit, so they
/// share one entry.
pub fn page_files(segment: &str, count: u64, page_sizes: &[u64], style: LinkStyle) -> BTreeMap<Page, Vec<String>> {
    let whole = Page { offset: 0, limit: count.max(1) };
    let normalize = |page: Page| if page.is_everything(count) { whole } else { page };
    let mut files: BTreeMap<Page, Vec<String>> = BTreeMap::new();
    files.entry(normalize(Page::requested(None, None))).or_default().push(layout::list_path(segment));
    files.entry(whole).or_default().push(layout::all_page_path(segment));
    for size in paging::page_sizes(page_sizes) {
        for page in paging::precomputed_pages(count, size, style) {
            let path = layout::page_path(segment, page.limit, page.offset);
            let paths = files.entry(normalize(page)).or_default();
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const STYLES: [LinkStyle; 2] = [LinkStyle::Query, LinkStyle::Path];

    /// Every path (file) the plan holds for one list.
    fn paths(count: u64, page_sizes: &[u64], style: LinkStyle) -> BTreeSet<String> {
        page_files("x", count, page_sizes, style).into_values().flatten().collect()
    }

    #[test]
    fn small_list_is_one_file_under_several_paths() {
        for style in STYLES {
            let files = page_files("berry", 5, &[20, 50], style);
            assert_eq!(files.len(), 1);
            let paths = &files[&Page { offset: 0, limit: 5 }];
            assert!(paths.contains(&"api/v2/berry/index.json".to_string()));
            assert!(paths.contains(&"api/v2/berry/_pages/all/index.json".to_string()));
            assert!(paths.contains(&"api/v2/berry/_pages/20/0/index.json".to_string()));
            assert!(paths.contains(&"api/v2/berry/_pages/50/0/index.json".to_string()));
        }
    }

    #[test]
    fn every_path_is_planned_once() {
        for style in STYLES {
            let files = page_files("x", 68, &[20, 50, 100], style);
            let mut all: Vec<&String> = files.values().flatten().collect();
            let n = all.len();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), n);
        }
    }

    #[test]
    fn the_aligned_pages_and_the_page_next_names_at_the_end() {
        // 68 entries, limit 20: offsets 0, 20, 40, 60 with limit 20; with query links `next`
        // from offset 40 names offset 60 with limit 8, which is a file too. The chain the
        // shrunken limit would lead back to (52, 44, ... with limit 8) is not.
        let query = page_files("x", 68, &[20], LinkStyle::Query);
        let path = page_files("x", 68, &[20], LinkStyle::Path);
        for offset in [0, 20, 40, 60] {
            assert!(query.contains_key(&Page { offset, limit: 20 }) && path.contains_key(&Page { offset, limit: 20 }));
        }
        assert!(query.contains_key(&Page { offset: 60, limit: 8 }));
        assert!(!path.contains_key(&Page { offset: 60, limit: 8 }));
        assert!(!query.contains_key(&Page { offset: 52, limit: 8 }));
        // 4 aligned pages, the shrunken last page, the whole list
        assert_eq!((query.len(), path.len()), (6, 5));
    }

    #[test]
    fn empty_list() {
        for style in STYLES {
            let files = page_files("x", 0, &[20], style);
            assert_eq!(files.len(), 1);
        }
    }

    /// The number of page files of a list of 99,990 to 100,010 entries, with the default page
    /// sizes: one entry more or less adds or removes at most two files per page size (the
    /// aligned page that starts holding or stops holding entries, and the shrunken last page
    /// under its new limit). Before, 100,001 entries had 108,003 page files, 99,999 had 213,318.
    #[test]
    fn one_entry_more_or_less_changes_the_page_files_by_at_most_two_per_page_size() {
        let sizes = [20, 50, 100];
        for style in STYLES {
            let mut counts = Vec::new();
            let mut before = paths(99_989, &sizes, style);
            for count in 99_990..=100_010u64 {
                let after = paths(count, &sizes, style);
                let changed = before.symmetric_difference(&after).count();
                assert!(changed <= 2 * sizes.len(), "{style:?}, {count} entries: {changed} files added or removed");
                // every aligned page of every size, the shrunken last pages, the root and `all`
                assert!(after.len() as u64 <= 2 + sizes.iter().map(|s| count.div_ceil(*s) + 1).sum::<u64>());
                counts.push((count, after.len()));
                before = after;
            }
            eprintln!("{style:?}: {counts:?}");
        }
        assert_eq!(paths(100_000, &sizes, LinkStyle::Query).len(), 8_002);
        assert_eq!(paths(100_001, &sizes, LinkStyle::Query).len(), 8_006);
        assert_eq!(paths(99_999, &sizes, LinkStyle::Query).len(), 8_005);
        assert_eq!(paths(100_001, &sizes, LinkStyle::Path).len(), 8_005);
    }
}
