//! Replacing a folder safely: the lock that keeps two writers of one folder apart ([`FolderLock`]),
//! and a folder staged beside another and swapped in whole ([`Staging`]). Used by the build
//! and by `gen import`.

use crate::fsutil;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// The output folder of a build, locked against other builds and imports for as long as this
/// value lives (an advisory `flock` on the folder itself, or on its parent while it does not
/// exist yet: released by the kernel when the process ends, however it ends).
pub(crate) struct FolderLock {
    /// The folder the tree is in: a symlinked `--out` is followed to the folder it points to.
    pub(crate) dir: PathBuf,
    /// False when the folder does not exist yet: the tree is then staged beside it and renamed
    /// into place whole.
    pub(crate) exists: bool,
    locks: Vec<std::fs::File>,
}

impl FolderLock {
    /// Resolves and locks `out`. When another build or import holds the lock, says so on
    /// stderr and waits for it.
    pub(crate) fn open(out: &Path) -> Result<FolderLock> {
        loop {
            match std::fs::symlink_metadata(out) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let (parent, _) = split_out(out)?;
                    fsutil::create_dir_all(&parent)?;
                    let lock = lock(&parent, out)?;
                    if std::fs::symlink_metadata(out).is_ok() {
                        continue; // another build made it while we waited
                    }
                    return Ok(FolderLock { dir: out.to_path_buf(), exists: false, locks: vec![lock] });
                }
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", out.display())),
                Ok(meta) => {
                    let dir = if meta.file_type().is_symlink() {
                        std::fs::canonicalize(out).with_context(|| {
                            format!(
                                "--out {} is a symbolic link to a folder that does not exist: create that folder, \
                                 or choose another --out",
                                out.display()
                            )
                        })?
                    } else {
                        out.to_path_buf()
                    };
                    if !dir.is_dir() {
                        bail!("{} exists and is not a folder: choose another --out", out.display());
                    }
                    split_out(&dir)?;
                    let lock = lock(&dir, out)?;
                    return Ok(FolderLock { dir, exists: true, locks: vec![lock] });
                }
            }
        }
    }
}

impl FolderLock {
    /// Also locks `folder` (a staged tree about to be renamed into place as the target), so
    /// that the lock is held on the folder itself once it is the target.
    pub(crate) fn hold(&mut self, folder: &Path) -> Result<()> {
        let file = std::fs::File::open(folder)
            .and_then(|f| f.lock().map(|()| f))
            .with_context(|| format!("cannot lock {}", folder.display()))?;
        self.locks.push(file);
        Ok(())
    }
}

/// Takes the lock on `folder` (for `out`), waiting with a message while another process has it.
fn lock(folder: &Path, out: &Path) -> Result<std::fs::File> {
    let file = std::fs::File::open(folder).with_context(|| format!("cannot open {} to lock it", folder.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            say!(
                "waiting: another gen build or import is writing {} (it holds the lock on {}); \
                 this one goes on when it ends",
                out.display(),
                folder.display()
            );
            file.lock().with_context(|| format!("cannot lock {}", folder.display()))?;
            Ok(file)
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock {}", folder.display())),
    }
}

/// A folder beside `out` where a new version of it is written, then swapped in whole. It is a
/// sibling of `out` itself (`.<out>.gen-staging-<pid>`), not in the build's state folder: it is
/// renamed into place, or exchanged with `out`, and a rename stays within one filesystem.
/// Dropped without [`Staging::commit`], it is removed, leaving `out` as it was.
pub(crate) struct Staging {
    /// The folder to write into.
    pub(crate) dir: PathBuf,
    out: PathBuf,
    committed: bool,
    _lock: Option<FolderLock>,
}

impl Staging {
    /// Creates an empty staging folder beside `out`, after removing what killed runs left.
    /// The caller holds the lock on `out` (see [`FolderLock`]).
    pub(crate) fn begin_unlocked(out: &Path) -> Result<Staging> {
        let (parent, name) = split_out(out)?;
        remove_leftovers(&parent, &name);
        let dir = parent.join(format!(".{name}.gen-staging-{}", std::process::id()));
        fsutil::remove_dir_all(&dir)?;
        fsutil::create_dir_all(&dir)?;
        Ok(Staging { dir, out: out.to_path_buf(), committed: false, _lock: None })
    }

    /// Like [`Staging::begin_unlocked`], after taking the lock on `out` (held until the staging
    /// folder is committed or dropped): for writers of whole folders, such as `gen import`.
    pub(crate) fn begin(out: &Path) -> Result<Staging> {
        let lock = FolderLock::open(out)?;
        let mut staging = Staging::begin_unlocked(out)?;
        staging._lock = Some(lock);
        Ok(staging)
    }

    /// Puts the staging folder in place of `out` atomically and removes the previous version.
    pub(crate) fn commit(mut self) -> Result<()> {
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
    Ok((fsutil::parent_of(out), name))
}

/// Removes what killed runs left beside `out` (their staging folders); the caller holds the
/// lock on `out`.
pub(crate) fn clean_leftovers(out: &Path) {
    if let Ok((parent, name)) = split_out(out) {
        remove_leftovers(&parent, &name);
    }
}

/// Removes the staging folders that killed builds left beside `out`. Called only with the lock
/// on `out` held (see [`FolderLock`]), so no other build can be writing one: whatever is there is
/// left over, whoever left it (no process table is consulted, so this works on any Unix).
fn remove_leftovers(parent: &Path, name: &str) {
    let prefix = format!(".{name}.gen-staging-");
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
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
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes())?;
    let b = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    let result =
        unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if result == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
