//! `gen import api-data --layout ndjson`: the imported folders, each rewritten as a table
//! (`<segment>.ndjson`, one record a line in list order) and its sub-documents as
//! `<segment>.<name>.ndjson` (one `{"id": …, "document": …}` a line, in list order).

use super::ImportOptions;
use crate::data::data_path::DataPath;
use crate::fsutil;
use anyhow::{Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Refuses `--layout ndjson` with `--force`: it writes a new data folder.
pub(crate) fn refuse_force(options: &ImportOptions) -> Result<()> {
    if options.ndjson && options.force {
        anyhow::bail!(
            "--layout ndjson writes a new data folder: choose an empty --out folder (--force is for the files layout)"
        );
    }
    Ok(())
}

/// Writes the staged data folder `dir` in the layout `options` asks: with `ndjson`, each resource
/// folder rewritten as tables.
pub(crate) fn write_layout(options: &ImportOptions, dir: &Path) -> Result<()> {
    if options.ndjson { folders_to_tables(dir) } else { Ok(()) }
}

/// Rewrites every resource folder of the data folder `dir` as tables, then removes the folder.
fn folders_to_tables(dir: &Path) -> Result<()> {
    let read = |path: &Path| std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()));
    let mut segments: Vec<String> = Vec::new();
    for entry in read(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            segments.push(entry.file_name().to_string_lossy().to_string());
        }
    }
    segments.sort();
    for segment in segments {
        folder_to_tables(dir, &segment)?;
    }
    Ok(())
}

/// Rewrites the resource folder `segment` of `dir` as tables.
fn folder_to_tables(dir: &Path, segment: &str) -> Result<()> {
    let folder = dir.join(segment);
    let mut ids = Vec::new();
    let mut order = None;
    let mut subdoc_names = std::collections::BTreeSet::new();
    for entry in walkdir::WalkDir::new(&folder).min_depth(1).max_depth(2) {
        let entry = entry?;
        let rel = fsutil::relative(dir, entry.path());
        match DataPath::parse(&rel, entry.file_type().is_dir()) {
            Ok(DataPath::Record { id, .. }) => ids.push(id),
            Ok(DataPath::Order { .. }) => order = Some(entry.path().to_path_buf()),
            Ok(DataPath::SubDoc { name, .. }) => {
                subdoc_names.insert(name.to_string());
            }
            _ => {}
        }
    }
    ids.sort_unstable();
    if let Some(order) = order {
        let bytes = std::fs::read(&order).with_context(|| format!("cannot read {}", order.display()))?;
        ids = serde_json::from_slice(&bytes).with_context(|| format!("cannot read {}", order.display()))?;
    }
    let mut records = Vec::new();
    let mut subdocs: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for &id in &ids {
        records.extend(line(&dir.join(DataPath::Record { segment, id }.file()))?);
        for name in &subdoc_names {
            let file = dir.join(DataPath::SubDoc { segment, id, name }.file());
            if file.exists() {
                let document: Value = read_json(&file)?;
                let entry = serde_json::json!({ "id": id, "document": document });
                let out = subdocs.entry(name.clone()).or_default();
                out.extend(serde_json::to_vec(&entry).expect("a JSON value serialises"));
                out.push(b'\n');
            }
        }
    }
    write(&dir.join(DataPath::Table { segment }.file()), &records)?;
    for (name, bytes) in &subdocs {
        write(&dir.join(DataPath::SubDocTable { segment, name }.file()), bytes)?;
    }
    std::fs::remove_dir_all(&folder).with_context(|| format!("cannot remove {}", folder.display()))
}

/// A JSON file's value on one line, with its newline.
fn line(file: &Path) -> Result<Vec<u8>> {
    let value = read_json(file)?;
    let mut bytes = serde_json::to_vec(&value).expect("a JSON value serialises");
    bytes.push(b'\n');
    Ok(bytes)
}

fn read_json(file: &Path) -> Result<Value> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("cannot read {}", file.display()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
}
