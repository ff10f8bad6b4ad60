//! Pruning the parts no root needs (docs/archive.md, "Pruning"): every commit keeps the root it
//! replaces as `root.previous`, and [`prune`] deletes from `parts/` every part named by neither
//! `root` nor `root.previous`, so that the folder holds two roots' parts at most, and a reader
//! still on the previous root (a server between reloads, a publish reading old blocks) finds
//! all of its parts.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;

use super::format::Root;
use super::{Error, FILLING, PREVIOUS_ROOT_FILE, ROOT_FILE, part_file};

/// What [`prune`] deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The part files deleted, relative to the archive's folder, in name order, then
    /// `parts/.filling` when a killed write left it.
    pub files: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
}

/// The part names the root file `file` in `dir` names; none when there is no such file.
fn named_by(dir: &Path, file: &str) -> Result<BTreeSet<[u8; 32]>, Error> {
    let stored = match fs::read(dir.join(file)) {
        Ok(stored) => stored,
        Err(e) if e.kind() == io::ErrorKind::NotFound && file != ROOT_FILE => return Ok(BTreeSet::new()),
        Err(source) => return Err(Error::Io { file: file.into(), source }),
    };
    let root = Root::decode(&stored).map_err(|what| Error::Damaged { file: file.into(), offset: 0, what })?;
    Ok(root.parts.iter().map(|p| p.name).collect())
}

/// Deletes the parts of the archive in `dir` that neither `root` nor `root.previous` names, and
/// the part a killed write left half filled (`parts/.filling`: a link there is removed, not
/// followed). Other files are left unless named like a part (64 lowercase hex digits); a
/// damaged root or previous root deletes nothing (the error says which). Call it with the
/// archive's folder locked against writers (a build holds it), never while a write is between
/// its parts and its root.
pub fn prune(dir: &Path) -> Result<Pruned, Error> {
    let mut keep = named_by(dir, ROOT_FILE)?;
    keep.extend(named_by(dir, PREVIOUS_ROOT_FILE)?);
    let keep: BTreeSet<String> = keep.iter().map(part_file).collect();
    let listing = fs::read_dir(dir.join("parts")).map_err(|source| Error::Io { file: "parts".into(), source })?;
    let mut doomed = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|source| Error::Io { file: "parts".into(), source })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_part = name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let file = format!("parts/{name}");
        if is_part && !keep.contains(&file) {
            doomed.push(file);
        }
    }
    doomed.sort();
    let mut pruned = Pruned::default();
    // the part a killed write was filling: no root names it, and no write is under way
    if let Ok(meta) = fs::symlink_metadata(dir.join(FILLING))
        && !meta.is_dir()
    {
        // a link is removed, never followed
        fs::remove_file(dir.join(FILLING)).map_err(|source| Error::Io { file: FILLING.into(), source })?;
        pruned.files.push(FILLING.into());
        pruned.bytes += meta.len();
    }
    for file in doomed {
        let path = dir.join(&file);
        let failed = |source| Error::Io { file: file.clone(), source };
        let bytes = fs::metadata(&path).map_err(failed)?.len();
        fs::remove_file(&path).map_err(failed)?;
        pruned.files.push(file);
        pruned.bytes += bytes;
    }
    Ok(pruned)
}
