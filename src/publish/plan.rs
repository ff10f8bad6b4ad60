//! What a publish does, decided before anything is written (pure, unit-tested): which objects
//! to upload, in which order, and which to delete.
//!
//! Order: records, sub-documents and page files first; then the documents that lead to them
//! (list roots, the root index, `meta`, `openapi.json`); `manifest.json` last; deletes of
//! removed objects only after the new manifest is in place. A client that follows links never
//! reaches an object that is not there yet, and the remote manifest describes the old tree until
//! every new object is in place.

use crate::layout;
use crate::manifest::MANIFEST_FILE;
use std::collections::{BTreeMap, BTreeSet};

/// The three steps of the uploads, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Records, sub-documents, page files: what nothing new links to yet.
    Leaves,
    /// List roots, the root index, `meta` and `openapi.json`: what leads to the leaves.
    Roots,
    /// `manifest.json`, which says the new tree is complete.
    Manifest,
}

/// The phase a file of the tree is uploaded in.
pub fn phase(path: &str) -> Phase {
    if path == MANIFEST_FILE {
        return Phase::Manifest;
    }
    // The root index, `openapi.json`, and one document per segment (a list root, `meta`) are
    // directly below the root; records, sub-documents and pages are deeper.
    match layout::key_of(path).map(layout::below_root) {
        Some(below) if !below.contains('/') => Phase::Roots,
        _ => Phase::Leaves,
    }
}

/// True for the documents that must never be cached: `manifest.json` and `meta`.
pub fn no_cache(path: &str) -> bool {
    path == MANIFEST_FILE || path == layout::META_PATH
}

/// What the target holds, as far as the plan goes.
#[derive(Debug, Default)]
pub struct Remote {
    /// The files its `manifest.json` lists (path → BLAKE3 hex), when it has one of gen's.
    pub manifest_files: Option<BTreeMap<String, String>>,
    /// True when its `manifest.json` has the same bytes as the new one.
    pub manifest_current: bool,
    /// Paths that a published manifest listed and an unfinished publish meant to delete.
    pub pending_deletes: BTreeSet<String>,
    /// When the target was listed and compared (no manifest, `--verify`, or an unfinished
    /// publish): the paths whose object holds the same bytes as the local file, and every path
    /// present. `None`: the remote manifest is trusted.
    pub listed: Option<Listed>,
}

/// The result of listing the target and comparing contents.
#[derive(Debug, Default)]
pub struct Listed {
    /// Paths present on the target.
    pub present: BTreeSet<String>,
    /// Paths whose remote bytes equal the local file's.
    pub same: BTreeSet<String>,
}

/// The plan: uploads in order, the count left alone, deletes.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Paths to upload, sorted by phase, then path (`manifest.json` last when it changed).
    pub uploads: Vec<String>,
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

    /// The uploads of one phase.
    pub fn uploads_in(&self, which: Phase) -> impl Iterator<Item = &String> {
        self.uploads.iter().filter(move |path| phase(path) == which)
    }
}

/// Decides the plan for publishing the tree whose `files` (path → BLAKE3 hex, the manifest
/// excepted) are given, onto `remote`.
pub fn plan(files: &BTreeMap<String, String>, remote: &Remote) -> Plan {
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
    if !remote.manifest_current {
        uploads.push(MANIFEST_FILE.to_string());
    } else {
        unchanged += 1;
    }
    uploads.sort_by(|a, b| (phase(a), a).cmp(&(phase(b), b)));
    let old = remote.manifest_files.iter().flat_map(|old| old.keys());
    let candidates: BTreeSet<&String> =
        old.chain(&remote.pending_deletes).filter(|p| !files.contains_key(*p) && *p != MANIFEST_FILE).collect();
    let deletes = candidates
        .into_iter()
        .filter(|path| remote.listed.as_ref().is_none_or(|listed| listed.present.contains(*path)))
        .cloned()
        .collect();
    Plan { uploads, unchanged, deletes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(p, h)| (p.to_string(), h.to_string())).collect()
    }

    #[test]
    fn phases_put_leaves_first_and_the_manifest_last() {
        assert_eq!(phase("api/v2/berry/1/index.json"), Phase::Leaves);
        assert_eq!(phase("api/v2/creature/7/encounters/index.json"), Phase::Leaves);
        assert_eq!(phase("api/v2/berry/_pages/20/20/index.json"), Phase::Leaves);
        assert_eq!(phase("api/v2/berry/index.json"), Phase::Roots);
        assert_eq!(phase("api/v2/meta/index.json"), Phase::Roots);
        assert_eq!(phase("api/v2/index.json"), Phase::Roots);
        assert_eq!(phase("api/v2/openapi.json"), Phase::Roots);
        assert_eq!(phase("manifest.json"), Phase::Manifest);
        assert!(no_cache("manifest.json") && no_cache("api/v2/meta/index.json"));
        assert!(!no_cache("api/v2/berry/index.json"));
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
        let plan = plan(&new, &remote);
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
        let plan = plan(&tree, &remote);
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
        let plan = plan(&tree, &remote);
        // the damaged record is repaired even though the manifest names its hash
        assert_eq!(plan.uploads, ["api/v2/berry/1/index.json"]);
        // other/file.txt was never in a manifest; the pending delete is not present any more
        assert_eq!(plan.deletes, ["api/v2/gone/index.json"]);
    }
}
