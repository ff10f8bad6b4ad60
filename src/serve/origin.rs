//! What a served tree's documents come from (issue 49): a tree's folder with its manifest's
//! listing, or an archive's folder with its reader. Below the tree and the files that read
//! through it (`src/serve/source.rs`), so that none of them imports another in a circle.

use crate::archive::{self, Folder, Reader};
use crate::tree::listing::Listing;
use crate::tree::manifest::MANIFEST_FILE;
use std::path::{Path, PathBuf};

/// Where a served tree's documents come from.
pub(crate) enum Source {
    /// A tree's folder: the files its manifest lists, with their hashes.
    Tree(Listing),
    /// An archive's folder, its root read.
    Archive(Box<Reader<Folder>>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Tree(listing) => write!(f, "Tree({} files)", listing.len()),
            Source::Archive(reader) => write!(f, "Archive({} keys)", reader.len()),
        }
    }
}

impl Source {
    /// The documents served: the tree's files listed, or the archive's keys.
    pub(crate) fn len(&self) -> usize {
        match self {
            Source::Tree(listing) => listing.len(),
            Source::Archive(reader) => usize::try_from(reader.len()).unwrap_or(usize::MAX),
        }
    }
}

/// The file whose replacement commits a new build in `dir`: an archive's `root`, a tree's
/// manifest.
pub(crate) fn commit_file(dir: &Path) -> PathBuf {
    match archive::is_archive(dir) {
        true => dir.join(archive::ROOT_FILE),
        false => dir.join(MANIFEST_FILE),
    }
}
