//! Writing an imported resource: staged in a hidden folder of the data folder, then moved into
//! place (the ids file first, then the resource), replacing the resource in either layout.

use super::records::Record;
use crate::data::data_path::DataPath;
use crate::fsutil;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// A staging folder, removed when dropped (whether its contents were moved out or not).
struct Stage(PathBuf);

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = fsutil::remove_dir_all(&self.0);
    }
}

/// What to write: the resource's records (sorted by id) in a layout, and the ids file's text.
pub(crate) struct Output<'a> {
    pub(crate) segment: &'a str,
    pub(crate) records: &'a [Record],
    pub(crate) ndjson: bool,
    /// The ids file and its new text (none with `--id`).
    pub(crate) ids: Option<(PathBuf, Vec<u8>)>,
}

/// Writes `output` into the data folder `data`: every file into `data/.gen-import-<segment>/`
/// first (a failed write leaves the data folder as it was), then the ids file renamed into
/// place, then the resource's folder and table (either layout) moved aside and the new one
/// renamed in. Returns the resource's path.
pub(crate) fn write(data: &Path, output: &Output<'_>) -> Result<PathBuf> {
    let segment = output.segment;
    fsutil::create_dir_all(data)?;
    let stage = Stage(data.join(format!(".gen-import-{segment}")));
    fsutil::remove_dir_all(&stage.0)?;
    fsutil::create_dir_all(&stage.0.join("old"))?;
    let name = if output.ndjson { DataPath::Table { segment }.file() } else { segment.to_string() };
    let new = stage.0.join(&name);
    if output.ndjson {
        let mut text = Vec::new();
        for record in output.records {
            serde_json::to_writer(&mut text, &record.fields)?;
            text.push(b'\n');
        }
        fsutil::write(&new, &text)?;
    } else {
        fsutil::create_dir_all(&new)?;
        for record in output.records {
            let mut text = serde_json::to_vec_pretty(&record.fields)?;
            text.push(b'\n');
            fsutil::write(&new.join(format!("{}.json", record.id)), &text)?;
        }
    }
    if let Some((path, text)) = &output.ids {
        let staged = stage.0.join("ids.json");
        fsutil::write(&staged, text)?;
        fsutil::create_dir_all(&fsutil::parent_of(path))?;
        fsutil::rename(&staged, path)?;
    }
    for old in [segment.to_string(), DataPath::Table { segment }.file()] {
        if std::fs::symlink_metadata(data.join(&old)).is_ok() {
            fsutil::rename(&data.join(&old), &stage.0.join("old").join(&old))?;
        }
    }
    let target = data.join(&name);
    fsutil::rename(&new, &target)?;
    Ok(target)
}
