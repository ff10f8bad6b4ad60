//! The local tree a publish sends: its folder, read without following links, and its manifest.

use crate::tree::dir::TreeDir;
use crate::tree::listing::MAX_DOCUMENT_BYTES;
use crate::tree::manifest::Manifest;
use anyhow::Result;
use std::path::Path;

/// The local tree being published.
pub(crate) struct LocalTree<'a> {
    /// The tree's folder.
    pub(crate) dir: &'a Path,
    /// The same folder, read without following a link inside it (see [`LocalTree::read`]).
    pub(crate) files: &'a TreeDir,
    /// The tree's manifest.
    pub(crate) manifest: &'a Manifest,
    /// The manifest's bytes, uploaded last.
    pub(crate) manifest_bytes: &'a [u8],
}

impl LocalTree<'_> {
    /// The bytes of the tree's file at `path`, read as the build and `gen serve` read the tree:
    /// a regular file of at most 1 GiB, no link followed on the way, no wait on a pipe. A link
    /// to `/dev/zero` or a FIFO put into `out/` is refused, saying which file and what to do.
    pub(crate) fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.files.read_file(path, MAX_DOCUMENT_BYTES).map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::NotFound { "no such file".to_string() } else { e.to_string() };
            anyhow::anyhow!(
                "cannot read {} ({why}; a link, a pipe or a device is never read as a file of the tree): rebuild \
                 the tree with `gen build`, then publish again",
                self.dir.join(path).display()
            )
        })
    }
}
