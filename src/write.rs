//! Write: renders the plan into a staging folder beside the output folder, then swaps it in
//! with one atomic rename. A build that fails or is killed leaves the previous tree as it was;
//! the next build removes what a killed one left behind.
//!
//! Files whose bytes are unchanged since the previous build are hard-linked from it instead of
//! written, so they keep their modification time and syncs to object storage skip them.

use crate::fsutil;
use crate::manifest::{MANIFEST_FILE, Manifest};
use crate::plan::Output;
use crate::problem::{Problem, Problems};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts documents as they are written, for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicUsize,
    pub total: AtomicUsize,
}

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Files in the tree (the manifest and `.gz` siblings included).
    pub files: usize,
    /// Bytes in the tree.
    pub bytes: u64,
    /// Files written because their bytes are new.
    pub written: usize,
}

/// The rendered bytes of one planned document, or the problems found in its source.
pub type Rendered = Result<Vec<u8>, Vec<Problem>>;

/// Writes `outputs` to `out`, rendering each with `render`, and swaps the new tree in.
/// `manifest.files` is filled here. On any problem or error, `out` is left untouched.
pub fn write_tree<'a>(
    out: &Path,
    outputs: &[Output<'a>],
    render: impl Fn(&Output<'a>) -> Rendered + Sync,
    mut manifest: Manifest,
    progress: &Progress,
) -> Result<WriteReport> {
    check_replaceable(out)?;
    let previous = if out.exists() { Manifest::read(out).ok() } else { None };
    let previous_files = previous.as_ref().map(|m| &m.files);
    let reuse_gzip = previous.as_ref().is_some_and(|m| m.gzip);
    let staging = Staging::begin(out).context("cannot stage the new tree beside the output folder")?;
    let stage = staging.dir.as_path();
    progress.total.store(outputs.len(), Ordering::Relaxed);

    let gzip = manifest.gzip;
    let results: Vec<Result<Vec<(String, String, u64, bool)>, Failure>> = outputs
        .par_iter()
        .map(|output| {
            let bytes = render(output).map_err(Failure::Problems)?;
            let hash = blake3::hash(&bytes).to_hex().to_string();
            let mut files = Vec::with_capacity(output.paths.len());
            for path in &output.paths {
                let unchanged = previous_files.and_then(|f| f.get(path)) == Some(&hash);
                let target = stage.join(path);
                if let Some(dir) = target.parent() {
                    fsutil::create_dir_all(dir).map_err(Failure::Error)?;
                }
                let mut written = !(unchanged && std::fs::hard_link(out.join(path), &target).is_ok());
                if written {
                    fsutil::write(&target, &bytes).map_err(Failure::Error)?;
                }
                let mut size = bytes.len() as u64;
                if gzip {
                    let gz_path = format!("{path}.gz");
                    let gz_target = stage.join(&gz_path);
                    if written || !reuse_gzip || std::fs::hard_link(out.join(&gz_path), &gz_target).is_err() {
                        let compressed = gzip_bytes(&bytes);
                        fsutil::write(&gz_target, &compressed).map_err(Failure::Error)?;
                        size += compressed.len() as u64;
                        written = true;
                    } else {
                        size += std::fs::metadata(&gz_target).map(|m| m.len()).unwrap_or(0);
                    }
                }
                files.push((path.clone(), hash.clone(), size, written));
            }
            progress.done.fetch_add(1, Ordering::Relaxed);
            Ok(files)
        })
        .collect();

    let mut problems = Vec::new();
    let mut report = WriteReport::default();
    for result in results {
        match result {
            Ok(files) => {
                for (path, hash, size, written) in files {
                    report.files += if gzip { 2 } else { 1 };
                    report.bytes += size;
                    report.written += usize::from(written);
                    manifest.files.insert(path, hash);
                }
            }
            Err(Failure::Problems(found)) => problems.extend(found),
            Err(Failure::Error(e)) => return Err(e),
        }
    }
    if !problems.is_empty() {
        problems.sort();
        return Err(Problems(problems).into());
    }
    let manifest_bytes = manifest.to_bytes();
    if previous.as_ref().map(Manifest::to_bytes).as_deref() == Some(&manifest_bytes[..])
        && std::fs::hard_link(out.join(MANIFEST_FILE), stage.join(MANIFEST_FILE)).is_ok()
    {
        // unchanged: linked
    } else {
        fsutil::write(&stage.join(MANIFEST_FILE), &manifest_bytes)?;
        report.written += 1;
    }
    report.files += 1;
    report.bytes += manifest_bytes.len() as u64;

    staging.commit()?;
    Ok(report)
}

enum Failure {
    Problems(Vec<Problem>),
    Error(anyhow::Error),
}

/// Compresses bytes with gzip, deterministically (no name, no timestamp).
pub fn gzip_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("writing to memory cannot fail");
    encoder.finish().expect("writing to memory cannot fail")
}

/// A folder beside `out` where a new version of it is written, then swapped in whole.
/// Dropped without [`Staging::commit`], it is removed, leaving `out` as it was.
pub struct Staging {
    /// The folder to write into.
    pub dir: PathBuf,
    out: PathBuf,
    committed: bool,
}

impl Staging {
    /// Creates an empty staging folder beside `out`, after removing what killed runs left.
    pub fn begin(out: &Path) -> Result<Staging> {
        let (parent, name) = split_out(out)?;
        remove_leftovers(&parent, &name);
        let dir = parent.join(format!(".{name}.gen-staging-{}", std::process::id()));
        fsutil::remove_dir_all(&dir)?;
        fsutil::create_dir_all(&dir)?;
        Ok(Staging { dir, out: out.to_path_buf(), committed: false })
    }

    /// Puts the staging folder in place of `out` atomically and removes the previous version.
    pub fn commit(mut self) -> Result<()> {
        swap_in(&self.dir, &self.out)?;
        self.committed = true;
        // `dir` now holds the previous version, if there was one.
        fsutil::remove_dir_all(&self.dir)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fsutil::remove_dir_all(&self.dir);
        }
    }
}

fn split_out(out: &Path) -> Result<(PathBuf, String)> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .filter(|n| n != "." && n != "..")
        .with_context(|| format!("--out {} must name a folder, e.g. --out out", out.display()))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Refuses to replace a folder that is not a tree written by gen, so that a mistyped `--out`
/// never deletes a user's files.
fn check_replaceable(out: &Path) -> Result<()> {
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        bail!("{} exists and is not a folder: choose another --out", out.display());
    }
    let empty = std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?.next().is_none();
    if !empty && !out.join(MANIFEST_FILE).is_file() {
        bail!(
            "refusing to replace {}: it is not empty and holds no {MANIFEST_FILE}, so it was not written by gen; \
             choose another --out or remove the folder",
            out.display()
        );
    }
    Ok(())
}

/// Removes staging folders that killed builds left beside `out`, unless their process lives.
fn remove_leftovers(parent: &Path, name: &str) {
    let prefix = format!(".{name}.gen-staging-");
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = file_name.strip_prefix(&prefix) else { continue };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = fsutil::remove_dir_all(&entry.path());
        }
    }
}

/// Puts `stage` in place of `out` atomically; afterwards `stage` holds the previous tree, if any.
fn swap_in(stage: &Path, out: &Path) -> Result<()> {
    if !out.exists() {
        return fsutil::rename(stage, out);
    }
    if exchange(stage, out).is_ok() {
        return Ok(());
    }
    // No atomic exchange on this system: two renames, restoring the old tree if the second fails.
    let old = stage.with_extension("old");
    fsutil::rename(out, &old)?;
    if let Err(e) = fsutil::rename(stage, out) {
        let _ = std::fs::rename(&old, out);
        return Err(e);
    }
    fsutil::rename(&old, stage)
}

#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::{CString, c_char, c_int, c_uint};
    use std::os::unix::ffi::OsStrExt;
    unsafe extern "C" {
        fn renameat2(
            olddirfd: c_int,
            oldpath: *const c_char,
            newdirfd: c_int,
            newpath: *const c_char,
            flags: c_uint,
        ) -> c_int;
    }
    const AT_FDCWD: c_int = -100;
    const RENAME_EXCHANGE: c_uint = 2;
    let a = CString::new(a.as_os_str().as_bytes())?;
    let b = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    let result = unsafe { renameat2(AT_FDCWD, a.as_ptr(), AT_FDCWD, b.as_ptr(), RENAME_EXCHANGE) };
    if result == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
