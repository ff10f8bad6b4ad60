//! The commit's journal: the paths a commit into the tree replaces or removes, written before
//! it starts, so that the build after a killed one knows them as its own.

use crate::build::state;
use crate::fsutil::{self, NotRead};
use crate::tree::layout::is_tree_path;
use crate::tree::manifest::MAX_MANIFEST_BYTES;
use std::path::{Path, PathBuf};

/// The journal of a commit into the tree `out`: the paths it replaces or removes. It exists
/// only while a commit runs (and after a killed one, until the next build completes).
pub(crate) fn journal_path(out: &Path) -> PathBuf {
    state::file(out, state::JOURNAL)
}

/// What a killed commit's journal says.
#[derive(Debug, Default, Clone)]
pub(crate) struct Journal {
    /// True when there is a journal: a commit was killed, so the tree is not intact.
    pub(crate) killed: bool,
    /// The paths it lists that are paths of a gen tree.
    pub(crate) paths: Vec<String>,
}

/// Reads the journal of the tree `out`. A journal that is not a regular file of at most
/// [`MAX_MANIFEST_BYTES`], or a line that is no path of a gen tree, is ignored with a note
/// (the build then checks every file, and removes only what the manifest or index lists).
pub(crate) fn read_journal(out: &Path) -> Journal {
    let path = journal_path(out);
    let text = match fsutil::read_regular_file(&path, MAX_MANIFEST_BYTES) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Journal::default(),
        Err(e) => {
            let why = fsutil::why_not_read(&path, MAX_MANIFEST_BYTES, &e);
            say!("note: {why}: ignoring it; this build checks every file of the tree");
            return Journal { killed: true, paths: Vec::new() };
        }
    };
    let mut paths = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        match is_tree_path(line) {
            true => paths.push(line.to_string()),
            false => {
                say!("note: {} lists {line:?}, which is not a path of a gen tree: ignoring that line", path.display())
            }
        }
    }
    Journal { killed: true, paths }
}
