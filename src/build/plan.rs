//! Plan: a pure function from the indexed dataset to the list of documents the tree holds,
//! each with every path it is published at. Nothing is rendered or written here.

use crate::build::load::Dataset;
use crate::manifest::Settings;
use crate::paging::{self, ALL_PAGE, PAGES_DIR, Page};
use std::collections::BTreeMap;

/// One document of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content<'a> {
    /// `api/v2/index.json`: every resource's list url.
    Root,
    /// `api/v2/meta/index.json`: what the tree holds.
    Meta,
    /// A record, by id and by name.
    Record { segment: &'a str, index: usize },
    /// A record's sub-document, by id and by name.
    SubDoc { segment: &'a str, index: usize, subdoc: usize },
    /// A page of a list.
    Page { segment: &'a str, page: Page },
}

/// A document and the paths (relative to the output folder) it is published at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output<'a> {
    pub content: Content<'a>,
    pub paths: Vec<String>,
}

/// Relative path of the root index.
pub const ROOT_PATH: &str = "api/v2/index.json";
/// Relative path of the meta document.
pub const META_PATH: &str = "api/v2/meta/index.json";

/// Lists every document of the tree, in a deterministic order.
pub fn plan<'a>(dataset: &'a Dataset, options: &Settings) -> Vec<Output<'a>> {
    let mut outputs = vec![
        Output { content: Content::Root, paths: vec![ROOT_PATH.to_string()] },
        Output { content: Content::Meta, paths: vec![META_PATH.to_string()] },
    ];
    for (segment, resource) in &dataset.resources {
        let segment = segment.as_str();
        for (index, record) in resource.records.iter().enumerate() {
            let mut keys = vec![record.id.to_string()];
            keys.extend(resource.path_name(record).map(str::to_string));
            let paths = keys.iter().map(|key| format!("api/v2/{segment}/{key}/index.json")).collect();
            outputs.push(Output { content: Content::Record { segment, index }, paths });
            for (subdoc, sub) in record.subdocs.iter().enumerate() {
                let paths = keys.iter().map(|key| format!("api/v2/{segment}/{key}/{}/index.json", sub.name)).collect();
                outputs.push(Output { content: Content::SubDoc { segment, index, subdoc }, paths });
            }
        }
        let count = resource.records.len() as u64;
        for (page, paths) in page_files(segment, count, &options.page_sizes) {
            outputs.push(Output { content: Content::Page { segment, page }, paths });
        }
    }
    outputs
}

/// The page files of one list, grouped by content: the list root (offset 0, limit 20), every
/// page reachable by links for each page size, and the whole list. Pages that hold the whole
/// list have the same bytes whatever their limit, so they share one entry.
pub fn page_files(segment: &str, count: u64, page_sizes: &[u64]) -> BTreeMap<Page, Vec<String>> {
    let whole = Page { offset: 0, limit: count.max(1) };
    let normalize = |page: Page| if page.is_everything(count) { whole } else { page };
    let mut files: BTreeMap<Page, Vec<String>> = BTreeMap::new();
    files.entry(normalize(Page::requested(None, None))).or_default().push(format!("api/v2/{segment}/index.json"));
    files.entry(whole).or_default().push(format!("api/v2/{segment}/{PAGES_DIR}/{ALL_PAGE}/index.json"));
    for size in paging::page_sizes(page_sizes) {
        for page in paging::reachable_pages(count, size) {
            let path = format!("api/v2/{segment}/{}index.json", paging::page_dir(page));
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

    #[test]
    fn small_list_is_one_file_under_several_paths() {
        let files = page_files("berry", 5, &[20, 50]);
        assert_eq!(files.len(), 1);
        let paths = &files[&Page { offset: 0, limit: 5 }];
        assert!(paths.contains(&"api/v2/berry/index.json".to_string()));
        assert!(paths.contains(&"api/v2/berry/_pages/all/index.json".to_string()));
        assert!(paths.contains(&"api/v2/berry/_pages/20/0/index.json".to_string()));
        assert!(paths.contains(&"api/v2/berry/_pages/50/0/index.json".to_string()));
    }

    #[test]
    fn every_path_is_planned_once() {
        let files = page_files("x", 68, &[20, 50, 100]);
        let mut all: Vec<&String> = files.values().flatten().collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        // the chain of the shrinking last page is there
        assert!(files.contains_key(&Page { offset: 60, limit: 8 }));
        assert!(files.contains_key(&Page { offset: 52, limit: 8 }));
        assert!(files.contains_key(&Page { offset: 0, limit: 4 }));
    }

    #[test]
    fn empty_list() {
        let files = page_files("x", 0, &[20]);
        assert_eq!(files.len(), 1);
    }
}
