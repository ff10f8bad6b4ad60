//! Where a build keeps its state between builds: one folder beside the tree, `.<out>.gen/`
//! (`.out.gen/` for `out/`), holding the build index (`index`), the bulk-data member table
//! (`bulk`), the kept extracts (`extract/`), a killed commit's journal (`journal`), and their
//! temporaries (`index.tmp`, `bulk.tmp`, `journal.tmp`, `extract/<segment>.tmp`), each in the
//! folder of the file it is renamed onto. Beside the tree rather than in it, so that nothing of
//! it is ever published, served or uploaded with the tree (docs/builds.md, "The build's state").
//!
//! The build's staging folder is not here: it stays a sibling of the tree itself
//! (`.out.gen-staging-<pid>`, see [`crate::staging`]), because a new tree is renamed into place
//! whole, or exchanged with the old one, and both must then be in one folder.
//!
//! Builds before this layout kept the same files as entries of their own beside the tree
//! (`.out.gen-index`, `.out.gen-bulk`, `.out.gen-extract/`, `.out.gen-journal`): the first build
//! that finds them moves them in ([`migrate`]).

use crate::fsutil;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The build index, in the state folder.
pub(crate) const INDEX: &str = "index";
/// The bulk-data member table, in the state folder.
pub(crate) const BULK: &str = "bulk";
/// The folder of the kept extracts, in the state folder.
pub(crate) const EXTRACT: &str = "extract";
/// A killed commit's journal, in the state folder.
pub(crate) const JOURNAL: &str = "journal";

/// The old layout: each state file's name beside the tree (`.<out>.<old>`) and its name now.
const OLD: [(&str, &str); 4] =
    [("gen-index", INDEX), ("gen-bulk", BULK), ("gen-extract", EXTRACT), ("gen-journal", JOURNAL)];

/// The old layout's temporaries beside the tree (`.<out>.<old>`): a killed build's leftovers.
const OLD_TEMPORARIES: [&str; 3] = ["gen-index.tmp", "gen-bulk.tmp", "gen-journal.tmp"];

/// The file whose stamp the build index records for the output in `out`: the tree's
/// `manifest.json`, or an archive's `root` (both are renamed into place last by a build).
pub(crate) fn commit_file(out: &Path) -> PathBuf {
    match crate::archive::is_archive(out) {
        true => out.join("root"),
        false => out.join(crate::tree::manifest::MANIFEST_FILE),
    }
}

/// The state folder of the tree in `out`: `.<out>.gen/` beside it.
pub(crate) fn folder(out: &Path) -> PathBuf {
    fsutil::beside(out, "gen")
}

/// The state file `name` ([`INDEX`], [`BULK`], [`EXTRACT`], [`JOURNAL`]) of the tree in `out`.
pub(crate) fn file(out: &Path, name: &str) -> PathBuf {
    folder(out).join(name)
}

/// The temporary file that is renamed onto the state file `name` of the tree in `out`: in the
/// same folder, so that the rename never crosses a filesystem.
pub(crate) fn temporary(out: &Path, name: &str) -> PathBuf {
    folder(out).join(format!("{name}.tmp"))
}

/// Makes the state folder of `out` a folder of its own, created if missing: anything else at
/// its name (a link to a folder elsewhere, a file) is removed first, so that no state is ever
/// written through a link. Returns the folder.
pub(crate) fn ensure(out: &Path) -> Result<PathBuf> {
    let dir = folder(out);
    own_folder(&dir).with_context(|| format!("cannot create folder {}", dir.display()))?;
    Ok(dir)
}

/// Makes `dir` a folder of its own, created if missing: anything else at its name (a link to a
/// folder elsewhere, a file) is removed first.
pub(crate) fn own_folder(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => std::fs::remove_file(dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir(dir)
}

/// Moves what a build of the old layout left beside the tree in `out` into its state folder,
/// once, each file under its new name and with its meaning unchanged (a rename: an up-to-date
/// tree stays up to date). A partial old layout (only an index, say) moves what there is. An
/// old file replaces a file of the new layout, as it can only have been written after it, by
/// an older gen; two journals are joined (each lists paths of a killed commit). The old
/// layout's temporaries are removed. Said in one note. Called with the lock on `out` held,
/// before any state is read; nothing is touched when there is no old file (not even looked for
/// beyond one `lstat` each).
pub(crate) fn migrate(out: &Path) {
    let exists = |what: &str| std::fs::symlink_metadata(fsutil::beside(out, what)).is_ok();
    for old in OLD_TEMPORARIES.into_iter().filter(|old| exists(old)) {
        let _ = std::fs::remove_file(fsutil::beside(out, old));
    }
    let found: Vec<(&str, &str)> = OLD.into_iter().filter(|(old, _)| exists(old)).collect();
    if found.is_empty() {
        return;
    }
    // shown as the user named them: `.out.gen-index`, not `./.out.gen-index`
    let shown = |path: PathBuf| path.strip_prefix(".").map(Path::to_path_buf).unwrap_or(path).display().to_string();
    let names: Vec<String> = found.iter().map(|(old, _)| shown(fsutil::beside(out, old))).collect();
    let moved = ensure(out).and_then(|_| found.iter().try_for_each(|(old, new)| move_in(out, old, new)));
    let dir = fsutil::show_dir(Path::new(&shown(folder(out))));
    match moved {
        Ok(()) => say!("note: moved the build's state {} into {dir}, where gen keeps it now", names.join(", ")),
        Err(e) => say!(
            "warning: {e:#}: the build's state could not be moved into {dir}; this build goes on without \
             what was not moved, and the next one tries again"
        ),
    }
}

/// Moves the old layout's `.<out>.<old>` to the state file `new`.
fn move_in(out: &Path, old: &str, new: &str) -> Result<()> {
    let (from, to) = (fsutil::beside(out, old), file(out, new));
    if new == JOURNAL && std::fs::symlink_metadata(&to).is_ok() {
        return join_journals(out, &from, &to);
    }
    match std::fs::symlink_metadata(&to) {
        Ok(meta) if meta.is_dir() => fsutil::remove_dir_all(&to)?,
        Ok(_) => std::fs::remove_file(&to).with_context(|| format!("cannot replace {}", to.display()))?,
        Err(_) => {}
    }
    fsutil::rename(&from, &to)
}

/// Two journals, the old layout's `from` and the state folder's `to`: one listing the paths of
/// both. One that cannot be read is kept as the journal (the build then checks every file of
/// the tree, which covers the other's paths).
fn join_journals(out: &Path, from: &Path, to: &Path) -> Result<()> {
    use crate::tree::manifest::MAX_MANIFEST_BYTES;
    let read = |path: &Path| fsutil::read_regular_file(path, MAX_MANIFEST_BYTES).ok();
    let (Some(old), Some(mut text)) = (read(from), read(to)) else {
        return match read(from) {
            None => fsutil::rename(from, to),
            Some(_) => std::fs::remove_file(from).with_context(|| format!("cannot remove {}", from.display())),
        };
    };
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(&old);
    let temporary = temporary(out, JOURNAL);
    fsutil::write_new(&temporary, &text)?;
    fsutil::rename(&temporary, to)?;
    std::fs::remove_file(from).with_context(|| format!("cannot remove {}", from.display()))
}
