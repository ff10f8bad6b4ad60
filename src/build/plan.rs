//! Plan: a pure function from the indexed dataset to the list of documents the tree holds,
//! each with every path it is published at. Nothing is rendered or written here.

use crate::build::extract::{Extracted, Extracts};
use crate::data::load::{Dataset, Record};
use crate::data::recorded::Place;
use crate::filters::FilterField;
use crate::paging::{self, LinkStyle, Page};
use crate::tree::layout::{self, META_PATH, ROOT_PATH};
use crate::tree::manifest::BuildSettings;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// One document of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Content<'a> {
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
    pub(crate) fn segment(&self) -> Option<&'a str> {
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

    /// True for the documents made of the extracts (names and filter values): the names
    /// documents, and the filters' values and pages.
    pub(crate) fn is_made_of_extracts(&self) -> bool {
        matches!(
            self,
            Content::Names { .. }
                | Content::NamesShard { .. }
                | Content::FilterValues { .. }
                | Content::FilterPage { .. }
        )
    }
}

/// A document of the tree. A record's or sub-document's paths are derived when needed
/// ([`Output::paths`]), not held: a tree of a million records has millions of them. Other
/// documents list theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Output<'a> {
    /// What the document holds.
    pub(crate) content: Content<'a>,
    /// The paths (relative to the output folder) of a document that is not a record's or
    /// sub-document's; empty for those.
    pub(crate) listed: Box<[String]>,
}

impl<'a> Output<'a> {
    fn listed(content: Content<'a>, paths: Vec<String>) -> Output<'a> {
        Output { content, listed: paths.into_boxed_slice() }
    }

    /// The record or sub-document this document is, and the name it is also published under.
    pub(crate) fn place(&self, dataset: &'a Dataset) -> Option<(Place<'a>, Option<&'a str>)> {
        let (segment, position, subdoc) = match self.content {
            Content::Record { segment, position } => (segment, position, None),
            Content::SubDoc { segment, position, subdoc } => (segment, position, Some(subdoc)),
            _ => return None,
        };
        let resource = &dataset.resources[segment];
        let record = &resource.records[position];
        let kind = subdoc.map(|s| &*record.subdocs[s].name);
        Some((Place { segment, kind, id: record.id }, resource.path_name(record)))
    }

    /// Every path this document is published at: by id then by name for a record or
    /// sub-document, as listed for the others.
    pub(crate) fn paths(&self, dataset: &'a Dataset) -> Vec<String> {
        match self.place(dataset) {
            Some((place, name)) => {
                std::iter::once(place.tree_path(place.id)).chain(name.map(|name| place.tree_path(name))).collect()
            }
            None => self.listed.to_vec(),
        }
    }
}

/// Every document of the tree, in a deterministic order (see [`plan`]). A resource's records
/// and sub-documents are one run, held as each record's first position in it (4 bytes a
/// record): their [`Output`]s are made when asked for ([`Plan::get`]), not held, as a million
/// records would need a hundred MB of them. The other documents are held.
#[derive(Debug, Default)]
pub(crate) struct Plan<'a> {
    parts: Vec<Part<'a>>,
    /// The position of each part's first document.
    starts: Vec<usize>,
    len: usize,
}

#[derive(Debug)]
enum Part<'a> {
    One(Output<'a>),
    /// The records of `segment` in list order, each followed by its sub-documents: record `i`
    /// is the run's document `firsts[i]`.
    Records {
        segment: &'a str,
        firsts: Vec<u32>,
    },
}

impl<'a> Plan<'a> {
    fn push(&mut self, output: Output<'a>) {
        self.starts.push(self.len);
        self.parts.push(Part::One(output));
        self.len += 1;
    }

    fn push_records(&mut self, segment: &'a str, records: &[Record]) {
        let mut firsts = Vec::with_capacity(records.len());
        let mut len = 0usize;
        for record in records {
            firsts.push(u32::try_from(len).expect("fewer than 4 billion documents in a resource"));
            len += 1 + record.subdocs.len();
        }
        self.starts.push(self.len);
        self.parts.push(Part::Records { segment, firsts });
        self.len += len;
    }

    /// The number of documents.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The `i`-th document, `i < len()`.
    pub(crate) fn get(&self, i: usize) -> Cow<'_, Output<'a>> {
        let part = self.starts.partition_point(|&start| start <= i) - 1;
        match &self.parts[part] {
            Part::One(output) => Cow::Borrowed(output),
            Part::Records { segment, firsts } => {
                let at = (i - self.starts[part]) as u32;
                let index = firsts.partition_point(|&first| first <= at) - 1;
                let segment = *segment;
                let content = match (at - firsts[index]) as usize {
                    0 => Content::Record { segment, position: index },
                    n => Content::SubDoc { segment, position: index, subdoc: n - 1 },
                };
                Cow::Owned(Output { content, listed: Box::default() })
            }
        }
    }

    /// The position of the document of record `position` of `segment` (its sub-document
    /// `subdoc`'s, when given), found without walking the plan.
    pub(crate) fn position_of(&self, segment: &str, position: usize, subdoc: Option<usize>) -> Option<usize> {
        self.parts.iter().zip(&self.starts).find_map(|(part, start)| match part {
            Part::Records { segment: s, firsts } if *s == segment => {
                Some(start + *firsts.get(position)? as usize + subdoc.map_or(0, |n| n + 1))
            }
            _ => None,
        })
    }

    /// The positions of the records of `segment` (not their sub-documents), in list order.
    pub(crate) fn record_positions(&self, segment: &str) -> Vec<usize> {
        let run = self.parts.iter().zip(&self.starts).find_map(|(part, start)| match part {
            Part::Records { segment: s, firsts } if *s == segment => Some((start, firsts)),
            _ => None,
        });
        run.map_or_else(Vec::new, |(start, firsts)| firsts.iter().map(|&first| start + first as usize).collect())
    }

    /// The documents that list their paths, with their positions.
    pub(crate) fn listed_positions(&self) -> impl Iterator<Item = (usize, &Output<'a>)> + '_ {
        self.parts.iter().zip(&self.starts).filter_map(|(part, &start)| match part {
            Part::One(output) => Some((start, output)),
            Part::Records { .. } => None,
        })
    }

    /// Every document, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Cow<'_, Output<'a>>> + '_ {
        (0..self.len).map(|i| self.get(i))
    }

    /// The documents that list their paths (all but records and sub-documents).
    pub(crate) fn listed(&self) -> impl Iterator<Item = &Output<'a>> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::One(output) => Some(output),
            Part::Records { .. } => None,
        })
    }
}

/// Lists every document of the tree, in a deterministic order. The files of a resource's
/// declared filters are those of its values in `extracts`.
pub(crate) fn plan<'a>(dataset: &'a Dataset, options: &BuildSettings, extracts: &Extracts) -> Plan<'a> {
    let mut plan = Plan::default();
    plan.push(Output::listed(Content::Root, vec![ROOT_PATH.to_string()]));
    plan.push(Output::listed(Content::Meta, vec![META_PATH.to_string()]));
    for (segment, resource) in &dataset.resources {
        let segment = segment.as_str();
        plan.push_records(segment, &resource.records);
        for (page, paths) in page_files(segment, resource.records.len() as u64, &options.page_sizes, options.links) {
            plan.push(Output::listed(Content::Page { segment, page }, paths));
        }
        plan.push(Output::listed(Content::Names { segment }, vec![layout::names_path(segment)]));
        for shard in 0..crate::search::names_shards(resource.records.len()) {
            plan.push(Output::listed(
                Content::NamesShard { segment, shard },
                vec![layout::names_shard_path(segment, shard)],
            ));
        }
        if let (Some(declared), Some(extracted)) = (options.filters.get(segment), extracts.get(segment)) {
            plan_filters(&mut plan, segment, declared, extracted, options);
        }
    }
    plan
}

/// The files of the declared filters of `segment`: per field its values document, and per value
/// the page files of its list (as [`page_files`] names a list's).
fn plan_filters<'a>(
    plan: &mut Plan<'a>,
    segment: &'a str,
    declared: &[FilterField],
    extracted: &Extracted,
    options: &BuildSettings,
) {
    for (field, (declared, values)) in declared.iter().zip(&extracted.fields).enumerate() {
        let values_path = layout::filter_values_path(segment, &declared.name);
        plan.push(Output::listed(Content::FilterValues { segment, field }, vec![values_path]));
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
                plan.push(Output::listed(Content::FilterPage { segment, field, value, page }, paths));
            }
        }
    }
}

/// The page files of one list, grouped by content: the list root (offset 0, limit 20), the
/// pages of each page size that [`paging::precomputed_pages`] names for links `style`, and the
/// whole list. Pages that hold the whole list have the same bytes whatever their limit, so they
/// share one entry.
pub(crate) fn page_files(
    segment: &str,
    count: u64,
    page_sizes: &[u64],
    style: LinkStyle,
) -> BTreeMap<Page, Vec<String>> {
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
