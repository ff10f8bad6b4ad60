//! File system helpers whose errors name the path they are about.

use anyhow::{Context, Result};
use std::path::Path;

/// Reads a whole file; the error names the file.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Writes a whole file; the error names the file.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Creates a folder and its parents; the error names the folder.
pub fn create_dir_all(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("cannot create folder {}", path.display()))
}

/// Removes a folder and everything in it, if it exists; the error names the folder.
pub fn remove_dir_all(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Renames a file or folder; the error names both paths.
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))
}
