//! What a publish does, decided before anything is written (pure, unit-tested): which objects
//! to upload, in which order, and which to delete.
//!
//! Order, by links rather than by path: an object a new or changed document links to that is
//! not on the target yet (a new record, a new page) is uploaded in an earlier wave than the
//! document; documents that link to each other in a circle, all new, share one wave. Waves go
//! one after the other, the uploads of a wave `--jobs` at a time; `manifest.json` is the last
//! wave of its own; deletes of removed objects come only after the new manifest is in place. A
//! client following links from what is published never reaches an object that is not there
//! yet, and the remote manifest describes the old tree until every new object is in place.

use crate::tree::layout;
use crate::tree::manifest::MANIFEST_FILE;
use std::collections::{BTreeMap, BTreeSet};

/// True for the documents that must never be cached: `manifest.json`, `meta` and the
/// bulk-data index.
pub(crate) fn no_cache(path: &str) -> bool {
    path == MANIFEST_FILE || path == layout::META_PATH || path == layout::BULK_INDEX_PATH
}

/// What the target holds, as far as the plan goes.
#[derive(Debug, Default)]
pub(crate) struct Remote {
    /// The files its `manifest.json` lists (path → BLAKE3 hex), when it has one of gen's.
    pub(crate) manifest_files: Option<BTreeMap<String, String>>,
    /// True when its `manifest.json` has the same bytes as the new one.
    pub(crate) manifest_current: bool,
    /// Paths that a published manifest listed and an unfinished publish meant to delete.
    pub(crate) pending_deletes: BTreeSet<String>,
    /// When the target was listed and compared (no manifest, `--verify`, or an unfinished
    /// publish): the paths whose object holds the same bytes as the local file, and every path
    /// present. `None`: the remote manifest is trusted.
    pub(crate) listed: Option<Listed>,
}

/// The result of listing the target and comparing contents.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    /// Paths present on the target.
    pub(crate) present: BTreeSet<String>,
    /// Paths whose remote bytes equal the local file's.
    pub(crate) same: BTreeSet<String>,
}

/// The plan: uploads in order, the count left alone, deletes.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Paths to upload, wave after wave, by path within a wave (`manifest.json` last when it
    /// changed, a wave of its own).
    pub uploads: Vec<String>,
    /// How many of `uploads` each wave holds, in order.
    pub(crate) waves: Vec<usize>,
    /// Files of the tree whose object is already current.
    pub unchanged: usize,
    /// Paths to delete after the manifest: listed by a published manifest, gone from the tree.
    pub deletes: Vec<String>,
}

impl Plan {
    /// True when the publish writes nothing.
    pub fn is_empty(&self) -> bool {
        self.uploads.is_empty() && self.deletes.is_empty()
    }

    /// The uploads, wave by wave.
    pub(crate) fn upload_waves(&self) -> impl Iterator<Item = &[String]> {
        let mut start = 0;
        self.waves.iter().map(move |&len| {
            let wave = &self.uploads[start..start + len];
            start += len;
            wave
        })
    }
}

/// Decides the plan for publishing the tree whose `files` (path → BLAKE3 hex, the manifest
/// excepted) are given, onto `remote`. `links` gives the tree paths a file of the tree links to
/// ([`layout::linked_files`] of its bytes); it is asked only when an upload is new to the target.
/// Only tree files ([`layout::is_tree_file`]) are ever deleted, whatever the remote manifest or
/// the marker lists.
pub(crate) fn plan(files: &BTreeMap<String, String>, remote: &Remote, links: impl Fn(&str) -> Vec<String>) -> Plan {
    let mut uploads = Vec::new();
    let mut unchanged = 0;
    for (path, hash) in files {
        let current = match &remote.listed {
            Some(listed) => listed.same.contains(path),
            None => remote.manifest_files.as_ref().and_then(|old| old.get(path)) == Some(hash),
        };
        if current {
            unchanged += 1;
        } else {
            uploads.push(path.clone());
        }
    }
    let on_target = |path: &String| match &remote.listed {
        Some(listed) => listed.present.contains(path),
        None => remote.manifest_files.as_ref().is_some_and(|old| old.contains_key(path)),
    };
    let new: BTreeSet<&String> = uploads.iter().filter(|path| !on_target(path)).collect();
    let (mut uploads, mut waves) = if new.is_empty() {
        let count = uploads.len();
        (uploads, if count == 0 { vec![] } else { vec![count] })
    } else {
        // each upload's links to new uploads: those must be in place first
        let edges: Vec<Vec<usize>> = uploads
            .iter()
            .map(|path| {
                let targets = links(path);
                targets
                    .iter()
                    .filter(|target| *target != path && new.contains(target))
                    .filter_map(|target| uploads.binary_search(target).ok())
                    .collect()
            })
            .collect();
        // a names document goes with its list's `_pages/all`, which a query reads beside it
        let joins: Vec<Option<usize>> =
            uploads.iter().map(|path| names_list_file(path).and_then(|all| uploads.binary_search(&all).ok())).collect();
        in_waves(uploads, &edges, &joins)
    };
    if !remote.manifest_current {
        uploads.push(MANIFEST_FILE.to_string());
        waves.push(1);
    } else {
        unchanged += 1;
    }
    let old = remote.manifest_files.iter().flat_map(|old| old.keys());
    let candidates: BTreeSet<&String> =
        old.chain(&remote.pending_deletes).filter(|p| !files.contains_key(*p) && layout::is_tree_file(p)).collect();
    let deletes = candidates
        .into_iter()
        .filter(|path| remote.listed.as_ref().is_none_or(|listed| listed.present.contains(*path)))
        .cloned()
        .collect();
    Plan { uploads, waves, unchanged, deletes }
}

/// The `_pages/all` file of the list a names file (`_names/` or a shard of it) belongs to.
fn names_list_file(path: &str) -> Option<String> {
    let rest = path.strip_prefix(layout::API_PREFIX.trim_start_matches('/'))?;
    let (segment, names) = rest.split_once('/')?;
    names.starts_with(&format!("{}/", layout::NAMES_DIR)).then(|| layout::all_page_path(segment))
}

/// Orders `paths` (sorted) in waves so that every path comes in a later wave than the paths its
/// `edges` (indexes into `paths`) lead to; paths that lead to each other in a circle share a
/// wave; a path whose `joins` names another is not in an earlier wave than that one (nothing
/// links to the paths that join another). Returns the paths in order and the size of each wave.
fn in_waves(paths: Vec<String>, edges: &[Vec<usize>], joins: &[Option<usize>]) -> (Vec<String>, Vec<usize>) {
    let component = strongly_connected(edges);
    let count = component.iter().max().map_or(0, |c| c + 1);
    // Tarjan numbers components so that every edge leads to a component numbered lower or the
    // same: the wave of a component is one more than the highest wave it leads to.
    let mut wave = vec![0usize; count];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (node, &c) in component.iter().enumerate() {
        members[c].push(node);
    }
    for c in 0..count {
        let below = members[c]
            .iter()
            .flat_map(|&node| &edges[node])
            .map(|&target| component[target])
            .filter(|&other| other != c)
            .map(|other| wave[other] + 1)
            .max()
            .unwrap_or(0);
        wave[c] = below;
    }
    let wave_of = |node: usize| wave[component[node]];
    let joined = |node: usize| joins[node].map_or(wave_of(node), |other| wave_of(node).max(wave_of(other)));
    let mut order: Vec<(usize, usize)> = (0..paths.len()).map(|node| (joined(node), node)).collect();
    order.sort();
    let mut sizes = Vec::new();
    for (i, &(w, _)) in order.iter().enumerate() {
        if i == 0 || order[i - 1].0 != w {
            sizes.push(0);
        }
        *sizes.last_mut().expect("a wave was started") += 1;
    }
    let mut slots: Vec<Option<String>> = paths.into_iter().map(Some).collect();
    let ordered = order.iter().map(|&(_, node)| slots[node].take().expect("each path once")).collect();
    (ordered, sizes)
}

/// The strongly connected component of each node (Tarjan's algorithm, without recursion):
/// components are numbered in the order they are completed, so an edge never leads to a
/// component numbered higher.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<usize> {
    const UNSEEN: usize = usize::MAX;
    let n = edges.len();
    let (mut index, mut low, mut component) = (vec![UNSEEN; n], vec![0; n], vec![UNSEEN; n]);
    let (mut on_stack, mut stack) = (vec![false; n], Vec::new());
    let (mut next_index, mut next_component) = (0, 0);
    for start in 0..n {
        if index[start] != UNSEEN {
            continue;
        }
        // (node, next edge to follow)
        let mut calls = vec![(start, 0usize)];
        index[start] = next_index;
        low[start] = next_index;
        next_index += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(top) = calls.last_mut() {
            let node = top.0;
            if let Some(&target) = edges[node].get(top.1) {
                top.1 += 1;
                if index[target] == UNSEEN {
                    index[target] = next_index;
                    low[target] = next_index;
                    next_index += 1;
                    stack.push(target);
                    on_stack[target] = true;
                    calls.push((target, 0));
                } else if on_stack[target] {
                    low[node] = low[node].min(index[target]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component[member] = next_component;
                    if member == node {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(p, h)| (p.to_string(), h.to_string())).collect()
    }

    fn no_links(_: &str) -> Vec<String> {
        Vec::new()
    }

    #[test]
    fn only_the_manifest_and_meta_are_never_cached() {
        assert!(no_cache("manifest.json") && no_cache("api/v2/meta/index.json"));
        assert!(!no_cache("api/v2/berry/index.json"));
    }

    #[test]
    fn a_names_document_goes_in_the_wave_of_its_lists_whole_page() {
        // a new record: the whole list links to it and waits; the names document and its shard,
        // which link to nothing a publish adds, wait with the list they belong to
        let new = files(&[
            ("api/v2/a/1/index.json", "a1"),
            ("api/v2/a/2/index.json", "a2"),
            ("api/v2/a/_names/0/index.json", "s2"),
            ("api/v2/a/_names/index.json", "n2"),
            ("api/v2/a/_pages/all/index.json", "all2"),
            ("api/v2/b/_names/index.json", "bn2"),
        ]);
        let old = files(&[
            ("api/v2/a/1/index.json", "a1"),
            ("api/v2/a/_names/0/index.json", "s1"),
            ("api/v2/a/_names/index.json", "n1"),
            ("api/v2/a/_pages/all/index.json", "all1"),
            ("api/v2/b/_names/index.json", "bn1"),
        ]);
        let remote = Remote { manifest_files: Some(old), ..Remote::default() };
        let links = |path: &str| -> Vec<String> {
            match path {
                "api/v2/a/_pages/all/index.json" => {
                    vec!["api/v2/a/1/index.json".into(), "api/v2/a/2/index.json".into()]
                }
                _ => vec![],
            }
        };
        let plan = plan(&new, &remote, links);
        let waves: Vec<&[String]> = plan.upload_waves().collect();
        assert_eq!(
            waves,
            [
                &["api/v2/a/2/index.json", "api/v2/b/_names/index.json"][..],
                &["api/v2/a/_names/0/index.json", "api/v2/a/_names/index.json", "api/v2/a/_pages/all/index.json"],
                &["manifest.json"],
            ]
        );
        assert_eq!(names_list_file("api/v2/a/_names/7/index.json").as_deref(), Some("api/v2/a/_pages/all/index.json"));
        assert_eq!(names_list_file("api/v2/a/_pages/all/index.json"), None);
        assert_eq!(names_list_file("api/v2/_names/index.json"), None);
    }

    #[test]
    fn what_links_to_a_new_object_waits_for_it_and_circles_share_a_wave() {
        let new = files(&[
            ("api/v2/index.json", "r2"),
            ("api/v2/a/index.json", "la2"),
            ("api/v2/a/1/index.json", "a1"),
            ("api/v2/a/2/index.json", "a2"),
            ("api/v2/b/index.json", "lb"),
            ("api/v2/b/1/index.json", "b1"),
            ("api/v2/b/2/index.json", "b2"),
        ]);
        let old = files(&[("api/v2/index.json", "r1"), ("api/v2/a/index.json", "la1"), ("api/v2/a/1/index.json", "x")]);
        let remote = Remote { manifest_files: Some(old), ..Remote::default() };
        // a/1 changed and links to the new a/2; b is a new segment whose records link to each
        // other; the root links to the new list b.
        let links = |path: &str| -> Vec<String> {
            let to: &[&str] = match path {
                "api/v2/index.json" => &["api/v2/a/index.json", "api/v2/b/index.json"],
                "api/v2/a/index.json" => &["api/v2/a/1/index.json", "api/v2/a/2/index.json"],
                "api/v2/a/1/index.json" => &["api/v2/a/2/index.json", "api/v2/b/1/index.json"],
                "api/v2/b/index.json" => &["api/v2/b/1/index.json", "api/v2/b/2/index.json"],
                "api/v2/b/1/index.json" => &["api/v2/b/2/index.json", "api/v2/b/1/index.json"],
                "api/v2/b/2/index.json" => &["api/v2/b/1/index.json"],
                _ => &[],
            };
            to.iter().map(|s| s.to_string()).collect()
        };
        let plan = plan(&new, &remote, links);
        let waves: Vec<&[String]> = plan.upload_waves().collect();
        assert_eq!(
            waves,
            [
                &["api/v2/a/2/index.json", "api/v2/b/1/index.json", "api/v2/b/2/index.json"][..],
                &["api/v2/a/1/index.json", "api/v2/a/index.json", "api/v2/b/index.json"],
                &["api/v2/index.json"],
                &["manifest.json"],
            ]
        );
    }

    #[test]
    fn nothing_but_tree_files_is_ever_deleted() {
        let tree = files(&[("api/v2/index.json", "r")]);
        let old = files(&[
            ("api/v2/index.json", "r"),
            ("api/v2/gone/index.json", "g"),
            ("index.html", "h"),
            ("Site/Index.HTML", "h"),
            (".gen-publish.json", "m"),
        ]);
        let remote = Remote {
            manifest_files: Some(old),
            manifest_current: true,
            pending_deletes: ["foreign.txt", "other-site/app.js", "api/v2/killed/index.json", "api/v2/../x.json"]
                .map(String::from)
                .into(),
            listed: None,
        };
        let plan = plan(&tree, &remote, no_links);
        assert_eq!(plan.deletes, ["api/v2/gone/index.json", "api/v2/killed/index.json"]);
    }

    #[test]
    fn a_changed_tree_uploads_what_changed_in_order_and_deletes_what_is_gone() {
        let new = files(&[
            ("api/v2/index.json", "r2"),
            ("api/v2/berry/index.json", "l2"),
            ("api/v2/berry/1/index.json", "a"),
            ("api/v2/berry/2/index.json", "b2"),
            ("api/v2/berry/3/index.json", "c"),
        ]);
        let old = files(&[
            ("api/v2/index.json", "r1"),
            ("api/v2/berry/index.json", "l1"),
            ("api/v2/berry/1/index.json", "a"),
            ("api/v2/berry/2/index.json", "b1"),
            ("api/v2/berry/9/index.json", "z"),
        ]);
        let remote = Remote { manifest_files: Some(old), ..Remote::default() };
        let plan = plan(&new, &remote, no_links);
        assert_eq!(
            plan.uploads,
            [
                "api/v2/berry/2/index.json",
                "api/v2/berry/3/index.json",
                "api/v2/berry/index.json",
                "api/v2/index.json",
                "manifest.json"
            ]
        );
        assert_eq!(plan.unchanged, 1);
        assert_eq!(plan.deletes, ["api/v2/berry/9/index.json"]);
    }

    #[test]
    fn an_unchanged_tree_writes_nothing() {
        let tree = files(&[("api/v2/index.json", "r"), ("api/v2/berry/1/index.json", "a")]);
        let remote = Remote { manifest_files: Some(tree.clone()), manifest_current: true, ..Remote::default() };
        let plan = plan(&tree, &remote, no_links);
        assert!(plan.is_empty(), "{plan:?}");
        assert_eq!(plan.unchanged, 3);
    }

    #[test]
    fn a_listing_decides_and_only_manifest_paths_are_deleted() {
        let tree = files(&[("api/v2/index.json", "r"), ("api/v2/berry/1/index.json", "a")]);
        let old =
            files(&[("api/v2/index.json", "r"), ("api/v2/berry/1/index.json", "a"), ("api/v2/gone/index.json", "g")]);
        let listed = Listed {
            present: ["api/v2/index.json", "api/v2/berry/1/index.json", "api/v2/gone/index.json", "other/file.txt"]
                .map(String::from)
                .into(),
            same: ["api/v2/index.json".to_string()].into(),
        };
        let remote = Remote {
            manifest_files: Some(old),
            manifest_current: true,
            pending_deletes: ["api/v2/killed/index.json", "api/v2/index.json", "manifest.json"]
                .map(String::from)
                .into(),
            listed: Some(listed),
        };
        let plan = plan(&tree, &remote, no_links);
        // the damaged record is repaired even though the manifest names its hash
        assert_eq!(plan.uploads, ["api/v2/berry/1/index.json"]);
        // other/file.txt was never in a manifest; the pending delete is not present any more
        assert_eq!(plan.deletes, ["api/v2/gone/index.json"]);
    }
}
