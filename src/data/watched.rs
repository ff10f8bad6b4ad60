//! What a watcher of the data folder saw change since a build (`gen serve --watch`): with it, a
//! rebuild lists only what changed, and takes the rest from the previous build's index without
//! a `stat` (docs/builds.md, "A rebuild under a watcher").
//!
//! A path the watcher saw created, removed, renamed or changed in its metadata changes its
//! folder's entries: that folder is read again, and everything at or under the path is listed
//! as without a previous build. A path whose contents were written is stat'ed. Anything else is
//! as the previous build recorded it.

use std::collections::HashSet;
use std::path::Path;

/// The paths of a data folder that changed since the build whose index records `base` as its
/// start, by a watcher that has watched the folder since before that build began.
#[derive(Debug, Clone, Default)]
pub struct WatchedChanges {
    /// The start of the build these changes are counted from ([`BuildSummary::base`](crate::BuildSummary::base)):
    /// a rebuild uses them only when the tree's index is that build's.
    pub(crate) base: i64,
    /// Every path seen changed, relative to the data folder.
    paths: HashSet<String>,
    /// Paths seen created, removed or renamed (or of an unknown change): at and under each,
    /// nothing is trusted.
    moved: HashSet<String>,
    /// The folders whose entries changed: the folders of the paths in `moved`.
    folders: HashSet<String>,
}

impl WatchedChanges {
    /// No change yet since the build that recorded `base`.
    pub(crate) fn since(base: i64) -> WatchedChanges {
        WatchedChanges { base, ..WatchedChanges::default() }
    }

    /// Notes `path` (relative to the data folder) as changed: its contents only when
    /// `contents_only` (a write), else its entry too (created, removed, renamed, its metadata
    /// changed). False when the path cannot be noted (not UTF-8, or the data folder itself):
    /// the caller then lists everything.
    pub(crate) fn note(&mut self, path: &Path, contents_only: bool) -> bool {
        let Some(rel) = path.to_str().filter(|rel| !rel.is_empty()) else { return false };
        let rel = rel.trim_end_matches('/').to_string();
        if !contents_only {
            let folder = rel.rsplit_once('/').map_or("", |(folder, _)| folder);
            self.folders.insert(folder.to_string());
            self.moved.insert(rel.clone());
        }
        self.paths.insert(rel);
        true
    }

    /// Number of paths noted.
    pub(crate) fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when the file `rel` is as the previous build found it (its stamp too).
    pub(crate) fn file_unchanged(&self, rel: &str) -> bool {
        !self.paths.contains(rel) && !self.under_moved(rel)
    }

    /// True when the folder `rel` ("" for the data folder) holds the entries the previous build
    /// found in it.
    pub(crate) fn folder_unchanged(&self, rel: &str) -> bool {
        !self.folders.contains(rel) && !self.under_moved(rel)
    }

    /// True when `rel` or a folder it is in was created, removed or renamed.
    fn under_moved(&self, rel: &str) -> bool {
        let mut ends = rel.match_indices('/').map(|(at, _)| at).chain(std::iter::once(rel.len()));
        ends.any(|end| self.moved.contains(&rel[..end]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_changes_its_file_only_and_a_rename_its_folder_and_everything_under_it() {
        let mut changes = WatchedChanges::since(1);
        assert!(changes.note(Path::new("berry/1.json"), true));
        assert!(!changes.file_unchanged("berry/1.json"));
        assert!(changes.file_unchanged("berry/2.json"));
        assert!(changes.folder_unchanged("berry"));

        assert!(changes.note(Path::new("creature/7"), false));
        assert!(!changes.folder_unchanged("creature"), "its folder's entries changed");
        assert!(!changes.folder_unchanged("creature/7"));
        assert!(!changes.file_unchanged("creature/7/encounters.json"));
        assert!(changes.file_unchanged("creature/70/encounters.json"), "a name that starts the same is apart");
        assert!(changes.folder_unchanged("creature/70"));
        assert!(changes.folder_unchanged(""));

        assert!(changes.note(Path::new("gen.json"), false));
        assert!(!changes.folder_unchanged(""), "the data folder's entries changed");
        assert!(!changes.note(Path::new(""), false), "the data folder itself: list everything");
        assert_eq!(changes.len(), 3);
    }
}
