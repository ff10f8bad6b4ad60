//! The tree's folder, written, read and cleaned without following a symbolic link inside it.
//!
//! A tree comes from anywhere (a clone, a download), and so do the paths its manifest, build
//! index and journal list. Each such path is checked with [`crate::tree::layout::is_tree_path`]
//! before it reaches this module (no `..`, no absolute path); here, every folder on the way to a
//! file is opened relative to the one above it with `O_NOFOLLOW`, so that a link inside the tree
//! (`out/api/v2/x -> /elsewhere`) never leads a write or a removal out of it. The tree's folder
//! itself may be a link: a symlinked `--out` is followed on purpose (see
//! [`crate::staging::FolderLock`]).
//!
//! What a link inside the tree means: gen never writes one, so it is not part of the tree. A
//! write below it removes the link itself (never what it points to) and makes a real folder in
//! its place, with a note; a removal below it has nothing to remove; stamps and reads find no
//! file there, so a tree holding one is never taken as intact. See docs/builds.md.

use crate::fsutil;
use crate::fsutil::Stamp;
use anyhow::{Context, Result};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The folder of a tree, open, for changes and reads relative to it.
pub(crate) struct TreeDir {
    path: PathBuf,
    root: OwnedFd,
}

impl TreeDir {
    /// Opens the tree's folder (a link to it is followed: see the module's doc).
    pub(crate) fn open(path: &Path) -> Result<TreeDir> {
        let file = std::fs::File::open(path).with_context(|| format!("cannot open the folder {}", path.display()))?;
        Ok(TreeDir { path: path.to_path_buf(), root: OwnedFd::from(file) })
    }

    /// The tree's folder.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The stamp of the regular file at `rel`, when every folder on its way is a real folder
    /// and it is a regular file itself (no link followed).
    pub(crate) fn stamp(&self, rel: &str) -> Option<Stamp> {
        let fd = self.open_beneath(rel, libc::O_PATH).ok()?;
        let meta = std::fs::File::from(fd).metadata().ok()?;
        meta.file_type().is_file().then(|| Stamp::of(&meta))
    }

    /// The bytes of the regular file at `rel` (at most `limit`), found as [`TreeDir::stamp`]
    /// finds it.
    pub(crate) fn read(&self, rel: &str, limit: u64) -> Option<Vec<u8>> {
        self.read_file(rel, limit).ok()
    }

    /// Like [`TreeDir::read`], saying why not: no such file, a link on the way, not a regular
    /// file, larger than `limit`.
    pub(crate) fn read_file(&self, rel: &str, limit: u64) -> io::Result<Vec<u8>> {
        let file = self.open_file(rel, limit)?;
        fsutil::read_bounded(file, limit).map_err(|e| io::Error::other(e.to_string()))
    }

    /// The regular file at `rel`, open for reading, found as [`TreeDir::read_file`] finds it
    /// (refused when larger than `limit`).
    pub(crate) fn open_file(&self, rel: &str, limit: u64) -> io::Result<std::fs::File> {
        // Non-blocking: a FIFO put in a file's place does not wait for a writer.
        let file = std::fs::File::from(self.open_beneath(rel, libc::O_RDONLY | libc::O_NONBLOCK)?);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        if meta.len() > limit {
            return Err(io::Error::other(format!("larger than {} MB", limit >> 20)));
        }
        Ok(file)
    }

    /// Opens `rel` below the tree's folder without following a link anywhere on the way: with
    /// `openat2` (Linux 5.6 and later), one call that refuses any link and any step outside
    /// the tree; else folder by folder, each opened with `O_NOFOLLOW`.
    fn open_beneath(&self, rel: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let name = cstring(rel)?;
        // SAFETY: `open_how` is plain data; every field is set below.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = flags as u64;
        how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_BENEATH;
        // SAFETY: a valid NUL-terminated path, an open folder descriptor and an `open_how` of
        // the size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.root.as_raw_fd(),
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(e);
        }
        let (dirs, name) = self.walk(rel, false)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let parent = dirs.last().map_or(self.root.as_raw_fd(), AsRawFd::as_raw_fd);
        // SAFETY: a valid NUL-terminated name and an open folder descriptor.
        let fd = check(unsafe { libc::openat(parent, cstring(name)?.as_ptr(), flags) })?;
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Renames the file `from` (outside the tree) to `rel` in the tree, making the folders on
    /// the way (a link among them is replaced by a real folder, see the module's doc).
    pub(crate) fn rename_into(&self, from: &Path, rel: &str) -> Result<()> {
        let shown = || format!("cannot rename {} to {}", from.display(), self.path.join(rel).display());
        let (dirs, name) = self.walk(rel, true).with_context(shown)?.expect("created folders are found");
        let parent = dirs.last().map_or(self.root.as_raw_fd(), AsRawFd::as_raw_fd);
        let (from_c, name_c) = (path_cstring(from).with_context(shown)?, cstring(name).with_context(shown)?);
        // SAFETY: valid NUL-terminated strings and an open folder descriptor, for the call.
        let rename = || check(unsafe { libc::renameat(libc::AT_FDCWD, from_c.as_ptr(), parent, name_c.as_ptr()) });
        match rename() {
            // a folder made by hand where the tree has a file (gen never writes one): an empty
            // one goes, as a link there would be replaced; one holding something is not removed
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                // SAFETY: a valid NUL-terminated name and an open folder descriptor.
                check(unsafe { libc::unlinkat(parent, name_c.as_ptr(), libc::AT_REMOVEDIR) }).with_context(|| {
                    format!(
                        "{}: a folder where the tree has a file (gen writes none there) and it is not empty: move it \
                         out of the tree and build again",
                        self.path.join(rel).display()
                    )
                })?;
                rename().with_context(shown)?;
            }
            done => {
                done.with_context(shown)?;
            }
        }
        Ok(())
    }

    /// Removes the file at `rel`, if the tree holds one there (a link at `rel` is removed
    /// itself; a folder is left alone, with a note). With `clean_folders`, the folders it
    /// leaves empty go too, up to (not including) the tree's folder.
    pub(crate) fn remove(&self, rel: &str, clean_folders: bool) -> Result<()> {
        let shown = || format!("cannot remove {}", self.path.join(rel).display());
        let Some((dirs, name)) = self.walk(rel, false).with_context(shown)? else {
            // A folder on the way is gone already (a build killed while it removed folders left
            // empty): the ones above it that are empty still go.
            match rel.rsplit_once('/') {
                Some((folder, _)) if clean_folders => return self.remove_empty_folder(folder),
                _ => return Ok(()),
            }
        };
        let parent = dirs.last().map_or(self.root.as_raw_fd(), AsRawFd::as_raw_fd);
        match kind_at(parent, name).with_context(shown)? {
            None => {}
            Some(libc::S_IFDIR) => say!(
                "note: {} is listed as a file of the tree but is a folder: left alone",
                self.path.join(rel).display()
            ),
            Some(_) => {
                let name_c = cstring(name).with_context(shown)?;
                // SAFETY: a valid NUL-terminated name and an open folder descriptor.
                check(unsafe { libc::unlinkat(parent, name_c.as_ptr(), 0) }).with_context(shown)?;
            }
        }
        if clean_folders {
            self.remove_empty_folders_on_the_way(&dirs, rel);
        }
        Ok(())
    }

    /// Removes the folder `rel` if it is empty, and then each folder above it left empty (the
    /// nearest folder that exists, when `rel` does not).
    fn remove_empty_folder(&self, rel: &str) -> Result<()> {
        let shown = || format!("cannot remove {}", self.path.join(rel).display());
        let Some((dirs, name)) = self.walk(rel, false).with_context(shown)? else {
            return match rel.rsplit_once('/') {
                Some((above, _)) => self.remove_empty_folder(above),
                None => Ok(()),
            };
        };
        let parent = dirs.last().map_or(self.root.as_raw_fd(), AsRawFd::as_raw_fd);
        let name_c = cstring(name).with_context(shown)?;
        // SAFETY: a valid NUL-terminated name and an open folder descriptor.
        let removed = check(unsafe { libc::unlinkat(parent, name_c.as_ptr(), libc::AT_REMOVEDIR) });
        // gone already, or removed now: the folders above may be empty
        if removed.as_ref().map_or_else(|e| e.kind() == io::ErrorKind::NotFound, |_| true) {
            self.remove_empty_folders_on_the_way(&dirs, rel);
        }
        Ok(())
    }

    /// Removes the folders `dirs` on the way to `rel` (top first) that are empty, nearest first,
    /// up to (not including) the tree's folder; stops at the first that is not.
    fn remove_empty_folders_on_the_way(&self, dirs: &[OwnedFd], rel: &str) {
        let names: Vec<&str> = rel.split('/').collect();
        for depth in (0..dirs.len()).rev() {
            let above = if depth == 0 { self.root.as_raw_fd() } else { dirs[depth - 1].as_raw_fd() };
            let Ok(name_c) = cstring(names[depth]) else { break };
            // SAFETY: a valid NUL-terminated name and an open folder descriptor.
            if unsafe { libc::unlinkat(above, name_c.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
                break; // not empty (a user's file), or gone
            }
        }
    }

    /// Opens the folders on the way to `rel`, each relative to the one above without following
    /// links: their descriptors, top first, and the file's name. With `create`, missing folders
    /// are made and links replaced by folders; without, `None` when one is missing or no folder.
    fn walk<'r>(&self, rel: &'r str, create: bool) -> io::Result<Option<(Vec<OwnedFd>, &'r str)>> {
        let mut parts: Vec<&str> = rel.split('/').collect();
        let name = parts.pop().unwrap_or_default();
        let mut dirs: Vec<OwnedFd> = Vec::with_capacity(parts.len());
        for (depth, part) in parts.iter().enumerate() {
            let parent = dirs.last().map_or(self.root.as_raw_fd(), AsRawFd::as_raw_fd);
            let opened = match open_dir_at(parent, part) {
                Ok(fd) => fd,
                Err(_) if !create => return Ok(None),
                Err(e) => {
                    match kind_at(parent, part)? {
                        None => {}
                        Some(libc::S_IFLNK) => {
                            let shown = self.path.join(parts[..=depth].join("/"));
                            say!(
                                "note: {} was a symbolic link inside the tree (gen never writes one): removed the \
                                 link, not what it points to, and made a folder in its place",
                                shown.display()
                            );
                            // SAFETY: a valid NUL-terminated name and an open folder descriptor.
                            check(unsafe { libc::unlinkat(parent, cstring(part)?.as_ptr(), 0) })?;
                        }
                        Some(_) => return Err(e),
                    }
                    // SAFETY: as above.
                    match check(unsafe { libc::mkdirat(parent, cstring(part)?.as_ptr(), 0o777) }) {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                        _ => {}
                    }
                    open_dir_at(parent, part)?
                }
            };
            dirs.push(opened);
        }
        Ok(Some((dirs, name)))
    }
}

/// Opens the folder `name` in `dir`, refusing a link.
fn open_dir_at(dir: RawFd, name: &str) -> io::Result<OwnedFd> {
    let name = cstring(name)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid NUL-terminated name and an open folder descriptor.
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), flags) })?;
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The type bits (`S_IFREG`, `S_IFDIR`, `S_IFLNK`, ...) of `name` in `dir`, not following a
/// link; `None` when there is nothing there.
fn kind_at(dir: RawFd, name: &str) -> io::Result<Option<libc::mode_t>> {
    let name = cstring(name)?;
    // SAFETY: `stat` is plain data, filled by the call.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated name, an open folder descriptor and a `stat` to fill.
    match check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW) }) {
        Ok(_) => Ok(Some(stat.st_mode & libc::S_IFMT)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn cstring(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn path_cstring(path: &Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The result of a system call: negative is the error in `errno`.
fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(result) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build killed while it removed the folders a gone file left empty: the file and the
    /// deepest folders are gone, the empty ones above them stay. Removing the file again (the
    /// journal lists it) removes those, and stops at a folder that holds something.
    #[test]
    fn removing_a_gone_file_again_removes_the_empty_folders_left_above_it() {
        let dir = std::env::temp_dir().join(format!("gen-dir-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("api/item/_filters/v/3/_pages")).unwrap();
        std::fs::create_dir_all(dir.join("api/item/_filters/v/4")).unwrap();
        std::fs::write(dir.join("api/item/_filters/v/4/index.json"), "{}").unwrap();
        let tree = TreeDir::open(&dir).unwrap();
        tree.remove("api/item/_filters/v/3/_pages/20/0/index.json", true).unwrap();
        assert!(!dir.join("api/item/_filters/v/3").exists(), "the empty folders above the gone ones are removed");
        assert!(dir.join("api/item/_filters/v/4/index.json").exists(), "a folder that holds a file stays");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
