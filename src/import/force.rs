//! `gen import api-data --force` over an existing data folder: the folders of the imported
//! segments are replaced whole (and only when they hold nothing but records), everything else
//! is carried over unchanged, and the settings are kept but for "external".

use crate::config::CONFIG_FILE;
use crate::data::data_path::DataPath;
use crate::{fsutil, json};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What `--force` does with an existing data folder.
pub(super) struct Kept {
    /// Entries the import replaces: the folders of the segments it writes.
    pub(crate) replaced: Vec<String>,
    /// Everything else (other segments' folders, the user's own files): linked into the new
    /// folder as they are.
    pub(crate) kept: Vec<String>,
    /// The folder's settings (`gen.json`), kept but for "external", which the import sets.
    pub(crate) settings: Option<serde_json::Map<String, Value>>,
}

/// With `--force`: the import replaces the folders of the segments it writes and gen.json's
/// "external"; everything else in `out` is carried into `staging` unchanged (hard links, so
/// `out` itself is untouched until the swap). Settings that are not a JSON object are refused.
pub(super) fn keep_what_is_not_imported(out: &Path, staging: &Path, imported: &BTreeSet<String>) -> Result<Kept> {
    let mut kept = Kept { replaced: Vec::new(), kept: Vec::new(), settings: None };
    // files of the user's inside a folder the import replaces: never deleted unsaid
    let mut theirs = Vec::new();
    let entries = std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?;
    let mut names: Vec<(String, PathBuf, bool)> = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", out.display()))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        names.push((entry.file_name().to_string_lossy().to_string(), entry.path(), is_dir));
    }
    names.sort();
    for (name, path, is_dir) in names {
        if name == CONFIG_FILE {
            let bytes = json::read_data_file(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
            let value: Option<Value> = serde_json::from_slice(&bytes).ok();
            match value {
                Some(Value::Object(settings)) => kept.settings = Some(settings),
                _ => bail!(
                    "--force keeps the settings in {}, but they are not a JSON object: fix or remove the file, then run again",
                    path.display()
                ),
            }
        } else if is_dir && imported.contains(&name) {
            theirs.extend(files_not_of_records(&path, &name)?);
            kept.replaced.push(format!("{name}/"));
        } else {
            link_tree(&path, &staging.join(&name))?;
            kept.kept.push(if is_dir { format!("{name}/") } else { name });
        }
    }
    if !theirs.is_empty() {
        let shown: Vec<String> = theirs.iter().take(10).map(|rel| out.join(rel).display().to_string()).collect();
        bail!(
            "--force replaces the folders of the imported segments whole, and {} in them {} not a record (yours, \
             not the import's):\n  {}{}\nnothing was changed: move {} out of {} (or delete {}), then run again",
            if theirs.len() == 1 { "this file" } else { "these files" },
            if theirs.len() == 1 { "is" } else { "are" },
            shown.join("\n  "),
            if theirs.len() > 10 { format!("\n  ... {} in all", theirs.len()) } else { String::new() },
            if theirs.len() == 1 { "it" } else { "them" },
            out.display(),
            if theirs.len() == 1 { "it" } else { "them" },
        );
    }
    Ok(kept)
}

/// The files and links under `folder` (an imported segment's folder of the data, `name`) that
/// are not records: anything but `<id>.json`, `order.json` and the `.json` sub-documents of
/// an `<id>/` folder. The import replaces the folder whole; these are the user's, and `--force`
/// refuses rather than delete them.
fn files_not_of_records(folder: &Path, name: &str) -> Result<Vec<String>> {
    let mut theirs = Vec::new();
    for entry in walkdir::WalkDir::new(folder).min_depth(1).sort_by_file_name() {
        let entry = entry.with_context(|| format!("cannot read {}", folder.display()))?;
        if entry.file_type().is_dir() {
            continue;
        }
        let rel = format!("{name}/{}", fsutil::relative(folder, entry.path()));
        let record = matches!(
            DataPath::parse(&rel, false),
            Ok(DataPath::Record { .. } | DataPath::Order { .. } | DataPath::SubDoc { .. })
        );
        if !record || !entry.file_type().is_file() {
            theirs.push(rel);
        }
    }
    Ok(theirs)
}

/// Recreates `from` at `to`: folders made anew, files hard-linked (copied if they cannot be),
/// symbolic links copied as links.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(from).with_context(|| format!("cannot read {}", from.display()))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).with_context(|| format!("cannot read {}", from.display()))?;
        std::os::unix::fs::symlink(target, to).with_context(|| format!("cannot write {}", to.display()))?;
    } else if meta.is_dir() {
        fsutil::create_dir_all(to)?;
        for entry in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
            let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
            link_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else if meta.is_file() {
        if std::fs::hard_link(from, to).is_err() {
            std::fs::copy(from, to).with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        }
    } else {
        bail!("{} is not a file, folder or link: --force cannot keep it; move it away, then run again", from.display());
    }
    Ok(())
}
