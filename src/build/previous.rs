//! A tree in `out/` that has no build index (or whose index is not trusted): the files its
//! manifest lists are what a build may replace or remove, and a folder that is not a tree gen
//! built is refused.

use crate::tree::layout;
use crate::tree::manifest::{self, BuildSettings, Manifest};
use anyhow::{Context, Result};
use std::path::Path;

/// The files of the tree in `dir` as its manifest lists them, when there is no index: what a
/// build may replace or remove. A folder that holds anything but gen's tree is refused (unless
/// `ours`: a killed commit's journal names it), so that a mistyped `--out` deletes nothing.
/// A listed path that no build writes (`../x`, `/x`) is left out, with a note; a manifest that
/// is not a regular file of at most [`manifest::MAX_MANIFEST_BYTES`] is an error.
pub(super) fn previous_files(dir: &Path, ours: bool) -> Result<Vec<String>> {
    let path = dir.join(manifest::MANIFEST_FILE);
    let bytes = match crate::fsutil::read_regular_file(&path, manifest::MAX_MANIFEST_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(crate::fsutil::NotRead::Io(_)) => None,
        Err(e) => anyhow::bail!("{}", manifest::not_read_manifest(&path, &e)),
    };
    if let Some(manifest) = bytes.as_deref().filter(|b| BuildSettings::from_manifest_bytes(b).is_some()) {
        let files = Manifest::from_bytes(manifest).map(|m| m.files).unwrap_or_default();
        let (paths, bad): (Vec<String>, Vec<String>) = files.into_keys().partition(|p| layout::is_tree_file(p));
        for bad in bad {
            say!(
                "note: {} lists {bad:?}, which is not a path of a gen tree: ignoring it (it is neither read, \
                 written nor removed)",
                path.display()
            );
        }
        return Ok(paths);
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().to_string()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    if names.is_empty() || ours {
        return Ok(Vec::new());
    }
    names.sort();
    let shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let what = if bytes.is_some() {
        format!("its {} was not written by gen", manifest::MANIFEST_FILE)
    } else {
        format!("it holds no {}", manifest::MANIFEST_FILE)
    };
    anyhow::bail!(
        "refusing to replace {}: it is not empty and {what}, so it is not a tree gen built (it holds {shown}{}); \
         choose another --out or empty the folder",
        dir.display(),
        if names.len() > 5 { ", ..." } else { "" }
    )
}
