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

/// Writes `outputs` to `out`, rendering each with `render`, then the documents `finish`
/// returns (computed from what rendering saw, e.g. schemas), and swaps the new tree in.
/// The manifest is written with every file and its hash. On any problem or error, `out` is
/// left untouched.
pub fn write_tree<'a>(
    out: &Path,
    outputs: &[Output<'a>],
    render: impl Fn(&Output<'a>) -> Rendered + Sync,
    finish: impl FnOnce() -> Vec<(String, Vec<u8>)>,
    mut manifest: Manifest,
    progress: &Progress,
) -> Result<WriteReport> {
    check_replaceable(out)?;
    let previous = if out.exists() { Manifest::read(out).ok() } else { None };
    let staging = Staging::begin(out).context("cannot stage the new tree beside the output folder")?;
    let writer = TreeWriter { out, stage: &staging.dir, previous: previous.as_ref(), gzip: manifest.gzip };
    progress.total.store(outputs.len(), Ordering::Relaxed);

    let results: Vec<Result<Placed, Failure>> = outputs
        .par_iter()
        .map(|output| {
            let bytes = render(output).map_err(Failure::Problems)?;
            let placed = writer.place_all(&output.paths, &bytes).map_err(Failure::Error)?;
            progress.done.fetch_add(1, Ordering::Relaxed);
            Ok(placed)
        })
        .collect();

    let mut problems = Vec::new();
    let mut placed = Vec::with_capacity(results.len());
    for result in results {
        match result {
            Ok(output) => placed.push(output),
            Err(Failure::Problems(found)) => problems.extend(found),
            Err(Failure::Error(e)) => return Err(e),
        }
    }
    if !problems.is_empty() {
        problems.sort();
        return Err(Problems::all(problems).into());
    }
    let late: Vec<(String, Vec<u8>)> = finish();
    let mut late_placed = Vec::with_capacity(late.len());
    for (path, bytes) in &late {
        late_placed.push(writer.place_all(std::slice::from_ref(path), bytes)?);
    }
    let mut report = WriteReport::default();
    let mut files: Vec<(&str, blake3::Hash)> = Vec::new();
    let all_paths = outputs.iter().map(|o| &o.paths[..]).chain(late.iter().map(|(path, _)| std::slice::from_ref(path)));
    for (paths, output) in all_paths.zip(placed.iter().chain(&late_placed)) {
        report.files += output.files;
        report.bytes += output.bytes;
        report.written += output.written;
        files.extend(paths.iter().map(|path| (path.as_str(), output.hash)));
    }
    // The manifest of a large tree is large: it is streamed to its file, never held whole.
    manifest.files.clear();
    let manifest_path = staging.dir.join(MANIFEST_FILE);
    let file =
        std::fs::File::create(&manifest_path).with_context(|| format!("cannot write {}", manifest_path.display()))?;
    let mut counting = CountingWriter { inner: file, bytes: 0 };
    manifest
        .write_with(&mut files, &mut counting)
        .with_context(|| format!("cannot write {}", manifest_path.display()))?;
    drop(files);
    report.files += 1;
    report.bytes += counting.bytes;
    // Always new: a build only gets here when the data or the options differ from the previous
    // tree's (an up-to-date tree is left alone before anything is written), and the manifest
    // records both.
    report.written += 1;

    staging.commit()?;
    Ok(report)
}

/// Places documents in the staging folder: linked from the previous tree when unchanged,
/// written otherwise.
struct TreeWriter<'w> {
    out: &'w Path,
    stage: &'w Path,
    previous: Option<&'w Manifest>,
    gzip: bool,
}

/// One document placed in the staging folder, at all its paths.
struct Placed {
    hash: blake3::Hash,
    /// Files on disk for it (with `.gz` siblings).
    files: usize,
    bytes: u64,
    /// Files actually written (not linked from the previous tree).
    written: usize,
}

impl TreeWriter<'_> {
    /// Places `bytes` at every path in `paths`. The first path is written (or linked from the
    /// previous tree when its bytes are unchanged); the others are hard links to it.
    fn place_all(&self, paths: &[String], bytes: &[u8]) -> Result<Placed> {
        let hash = blake3::hash(bytes);
        let hex = hash.to_hex();
        let unchanged = |path: &str| self.previous.and_then(|m| m.files.get(path)).map(String::as_str) == Some(&hex);
        let reuse_gzip = self.previous.is_some_and(|m| m.gzip);
        let mut compressed: Option<Vec<u8>> = None;
        let mut placed = Placed { hash, files: 0, bytes: 0, written: 0 };
        let linked = |from: &Path, to: &Path| std::fs::hard_link(from, to).is_ok();
        let first = paths.first().map(|p| self.stage.join(p));
        for (i, path) in paths.iter().enumerate() {
            let target = self.stage.join(path);
            if let Some(dir) = target.parent() {
                fsutil::create_dir_all(dir)?;
            }
            let first = first.as_deref().filter(|_| i > 0);
            let mut written = 0;
            let done = (unchanged(path) && linked(&self.out.join(path), &target))
                || first.is_some_and(|first| linked(first, &target));
            if !done {
                fsutil::write(&target, bytes)?;
                written += 1;
            }
            placed.bytes += bytes.len() as u64;
            placed.files += 1;
            if self.gzip {
                let gz = format!("{path}.gz");
                let gz_target = self.stage.join(&gz);
                let first_gz = first.map(|f| f.with_extension("json.gz"));
                let done = (written == 0 && reuse_gzip && unchanged(path) && linked(&self.out.join(&gz), &gz_target))
                    || first_gz.as_deref().is_some_and(|f| linked(f, &gz_target));
                if !done {
                    let bytes = compressed.get_or_insert_with(|| gzip_bytes(bytes, flate2::Compression::best()));
                    fsutil::write(&gz_target, bytes)?;
                    written += 1;
                }
                placed.bytes += std::fs::metadata(&gz_target).with_context(|| format!("cannot read {gz}"))?.len();
                placed.files += 1;
            }
            placed.written += written;
        }
        Ok(placed)
    }
}

/// Writes through to a file, counting the bytes.
struct CountingWriter {
    inner: std::fs::File,
    bytes: u64,
}

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

enum Failure {
    Problems(Vec<Problem>),
    Error(anyhow::Error),
}

/// Compresses bytes with gzip at `level`, deterministically (no name, no timestamp).
pub fn gzip_bytes(bytes: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4 + 64), level);
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

/// Removes what killed runs left beside `out` (their staging folders).
pub fn clean_leftovers(out: &Path) {
    if let Ok((parent, name)) = split_out(out) {
        remove_leftovers(&parent, &name);
    }
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
