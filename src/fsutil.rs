//! File system helpers whose errors name the path they are about.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What `stat` says of a file, as far as telling a changed file goes: a file rewritten in
/// place, even with its old size and modification time restored, has a new change time
/// (`ctime`, which no user call can set), and a file replaced by rename has a new inode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    /// Size in bytes.
    pub(crate) size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub(crate) mtime_ns: i64,
    /// Change time, nanoseconds since the epoch.
    pub(crate) ctime_ns: i64,
    /// Inode number.
    pub(crate) ino: u64,
}

impl Stamp {
    /// The stamp of a file's metadata.
    pub(crate) fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            size: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            ino: meta.ino(),
        }
    }

    /// The stamp of what `rel` names under the open folder `dir` (links followed when
    /// `follow`), and whether it is a folder (a link to one is not, unless followed): one
    /// `fstatat`, the path resolved from the folder, not from the root, and no path made.
    /// `None` when there is nothing there or it cannot be stat'ed.
    pub(crate) fn at(dir: &std::fs::File, rel: &str, follow: bool) -> Option<(Stamp, bool)> {
        use std::os::fd::AsRawFd;
        if rel.as_bytes().contains(&0) {
            return None;
        }
        let (mut short, long);
        let name: *const libc::c_char = match rel.len() < 256 {
            true => {
                short = [0u8; 256];
                short[..rel.len()].copy_from_slice(rel.as_bytes());
                short.as_ptr().cast()
            }
            false => {
                long = std::ffi::CString::new(rel).ok()?;
                long.as_ptr()
            }
        };
        // SAFETY: `stat` is plain data, filled by the call.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated name (the buffer is zeroed past it, or a CString), an open
        // folder's descriptor, and a `stat` to fill.
        let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
        let done = unsafe { libc::fstatat(dir.as_raw_fd(), name, &mut stat, flags) };
        if done != 0 {
            return None;
        }
        let stamp = Stamp {
            size: stat.st_size as u64,
            mtime_ns: stat.st_mtime * 1_000_000_000 + stat.st_mtime_nsec,
            ctime_ns: stat.st_ctime * 1_000_000_000 + stat.st_ctime_nsec,
            ino: stat.st_ino,
        };
        Some((stamp, stat.st_mode & libc::S_IFMT == libc::S_IFDIR))
    }

    /// The stamp of whatever `path` names (links are followed), if it exists.
    pub(crate) fn of_path(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
    }

    /// The stamp of the regular file at `path` (links are not followed), if there is one.
    pub fn of_file(path: &Path) -> Option<Stamp> {
        std::fs::symlink_metadata(path).ok().filter(|m| m.file_type().is_file()).map(|m| Stamp::of(&m))
    }
}

/// A file beside the folder `out`: `.<name>.<what>` in its parent.
pub(crate) fn beside(out: &Path, what: &str) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    parent_of(out).join(format!(".{name}.{what}"))
}

/// The folder that holds `path`: its parent, or `.` for a bare name.
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A path as every message names it (problems, `gen serve --watch`'s lines, the summaries):
/// relative to where the user stands, the current directory, when it is under it
/// (`/home/me/site/data/berry/1.json`, run from `/home/me/site`, is `data/berry/1.json`, as
/// `--data data` would give it); else as given. The one rule: a path made absolute on the way
/// (`--watch` watches the absolute data folder) still reads as the user's.
pub(crate) fn shown(path: &Path) -> String {
    let relative = std::env::current_dir().ok().filter(|_| path.is_absolute()).and_then(|here| {
        let rel = path.strip_prefix(&here).ok()?;
        Some(if rel.as_os_str().is_empty() { ".".to_string() } else { rel.display().to_string() })
    });
    relative.unwrap_or_else(|| path.display().to_string())
}

/// A folder as messages show it ([`shown`]), with a trailing `/`: `out/`.
pub(crate) fn show_dir(dir: &Path) -> String {
    let shown = shown(dir);
    if shown.ends_with('/') { shown } else { format!("{shown}/") }
}

/// `file` relative to `dir`, with `/` separators, as messages and manifests name data files.
pub(crate) fn relative(dir: &Path, file: &Path) -> String {
    file.strip_prefix(dir).unwrap_or(file).to_string_lossy().replace('\\', "/")
}

/// Writes a whole file; the error names the file.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Creates a folder and its parents; the error names the folder.
pub(crate) fn create_dir_all(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("cannot create folder {}", path.display()))
}

/// Removes a folder and everything in it, if it exists; the error names the folder.
pub(crate) fn remove_dir_all(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Renames a file or folder; the error names both paths.
pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))
}

/// Why [`read_regular_file`] read nothing.
#[derive(Debug)]
pub(crate) enum NotRead {
    /// Not a regular file (after following links): what it is, e.g. "a named pipe (FIFO)".
    NotRegular(&'static str),
    /// More than the limit: the bytes found, at least limit + 1.
    TooLarge(u64),
    /// The file could not be opened or read.
    Io(std::io::Error),
}

impl std::fmt::Display for NotRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRead::NotRegular(kind) => write!(
                f,
                "is {kind}, not a regular file: data is read only from regular files (or symbolic links to them); \
                 put a file with the content in its place"
            ),
            NotRead::TooLarge(bytes) => write!(f, "larger than {bytes} bytes"),
            NotRead::Io(e) => write!(f, "cannot read: {e}"),
        }
    }
}

/// Reads a data file: only a regular file (a symbolic link is followed to one), and at most
/// `limit` bytes of it whatever its metadata says (a file that grows while it is read, or a
/// file system that reports no size). A device, FIFO or socket is refused without reading it,
/// so that `/dev/zero` is not read for ever and a FIFO does not wait for a writer.
pub(crate) fn read_regular_file(path: &Path, limit: u64) -> std::result::Result<Vec<u8>, NotRead> {
    read_bounded(open_regular_file(path, limit, false)?, limit)
}

/// Opens a regular file for reading, refusing without reading anything what is not one (see
/// [`read_regular_file`]) or is larger than `limit` by its metadata. With `no_follow`, a
/// symbolic link in the last component is refused too (the error is then `Io`, `ELOOP`).
/// Read the file through `take(limit + 1)` (as [`read_bounded`] does) to bound the read.
pub(crate) fn open_regular_file(
    path: &Path,
    limit: u64,
    no_follow: bool,
) -> std::result::Result<std::fs::File, NotRead> {
    if !no_follow {
        let meta = std::fs::metadata(path).map_err(NotRead::Io)?;
        if let Some(kind) = kind_of(&meta) {
            return Err(NotRead::NotRegular(kind));
        }
    }
    // Non-blocking open: a file swapped for a FIFO since the check above does not wait for a
    // writer (the flag means nothing for regular files).
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | if no_follow { libc::O_NOFOLLOW } else { 0 });
    }
    let file = options.open(path).map_err(NotRead::Io)?;
    let meta = file.metadata().map_err(NotRead::Io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(NotRead::NotRegular(kind));
    }
    if meta.len() > limit {
        return Err(NotRead::TooLarge(meta.len()));
    }
    Ok(file)
}

/// Opens a table of the data folder (`data/<segment>.ndjson`) as a record file is opened (see
/// [`open_regular_file`]: a regular file or a link to one, its type checked before and after
/// opening, opened without blocking), and gives its size then: the most its reader reads, so
/// that a table that grows while it is read (or claims no end) is read to that size only.
pub(crate) fn open_table(path: &Path) -> std::result::Result<(std::fs::File, u64), NotRead> {
    let file = open_regular_file(path, u64::MAX, false)?;
    let size = file.metadata().map_err(NotRead::Io)?.len();
    Ok((file, size))
}

/// Reads at most `limit` bytes of an open file: more is an error, however the file grew.
pub(crate) fn read_bounded(file: std::fs::File, limit: u64) -> std::result::Result<Vec<u8>, NotRead> {
    use std::io::Read as _;
    let size = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::with_capacity(size.min(limit) as usize + 1);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(NotRead::Io)?;
    if bytes.len() as u64 > limit {
        return Err(NotRead::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file is when it is not a regular file (`None` for a regular file).
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    match () {
        _ if t.is_file() => None,
        _ if t.is_dir() => Some("a folder"),
        _ if t.is_fifo() => Some("a named pipe (FIFO)"),
        _ if t.is_char_device() => Some("a character device (such as /dev/zero)"),
        _ if t.is_block_device() => Some("a block device"),
        _ if t.is_socket() => Some("a socket"),
        _ => Some("not a file"),
    }
}

/// Creates the file at `path` anew for writing: whatever is there (a file, a FIFO, a symbolic
/// link) is removed first, never followed or opened, so that a link beside the tree cannot
/// make gen write elsewhere and a FIFO cannot make it wait. The error names the file.
pub(crate) fn create_new(path: &Path) -> Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot replace {}", path.display()));
        }
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes a whole file created anew (see [`create_new`]); the error names the file.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    create_new(path)?.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Why one of gen's own files (the manifest, the build index, a journal) was not read, as the
/// start of a message naming it; `limit` is the size limit it was read with.
pub(crate) fn why_not_read(path: &Path, limit: u64, e: &NotRead) -> String {
    match e {
        NotRead::NotRegular(kind) => format!("{} is {kind}, not a regular file", path.display()),
        NotRead::TooLarge(_) => {
            format!("{} is larger than {} MB, the most gen reads of it", path.display(), limit >> 20)
        }
        NotRead::Io(e) => format!("cannot read {}: {e}", path.display()),
    }
}

/// Compresses bytes with gzip at `level`, deterministically (no name, no timestamp).
pub(crate) fn gzip_bytes(bytes: &[u8], level: flate2::Compression) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4 + 64), level);
    encoder.write_all(bytes).expect("writing to memory cannot fail");
    encoder.finish().expect("writing to memory cannot fail")
}

/// True when the folder `path` is `folder` or lies inside it, links resolved (`path` itself
/// may not exist yet: then its nearest existing folder is resolved). A tree is never written
/// into its own data.
pub(crate) fn is_inside(path: &Path, folder: &Path) -> bool {
    let Ok(folder) = folder.canonicalize() else { return false };
    let Ok(path) = std::path::absolute(path) else { return false };
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return false,
        }
    }
    let Ok(mut resolved) = existing.canonicalize() else { return false };
    resolved.extend(rest.iter().rev());
    resolved.starts_with(&folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_fifos_are_refused_and_reads_are_bounded() {
        let refused = read_regular_file(Path::new("/dev/zero"), 1 << 20);
        assert!(matches!(refused, Err(NotRead::NotRegular(kind)) if kind.contains("character device")));
        assert!(matches!(read_regular_file(Path::new("/"), 1 << 20), Err(NotRead::NotRegular("a folder"))));
        let dir = std::env::temp_dir().join(format!("gen-fsutil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo.json");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
        if made {
            assert!(matches!(read_regular_file(&fifo, 100), Err(NotRead::NotRegular(kind)) if kind.contains("FIFO")));
        }
        let file = dir.join("ten.json");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_regular_file(&file, 10).unwrap(), b"0123456789");
        assert!(matches!(read_regular_file(&file, 9), Err(NotRead::TooLarge(10))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn paths_are_shown_from_the_current_directory_when_under_it() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(shown(&here.join("data/berry/1.json")), "data/berry/1.json");
        assert_eq!(shown(&here), ".");
        assert_eq!(show_dir(&here.join("mydata")), "mydata/");
        assert_eq!(shown(Path::new("data/berry/1.json")), "data/berry/1.json");
        assert_eq!(shown(Path::new("../elsewhere/data")), "../elsewhere/data");
        let outside = here.parent().map_or(PathBuf::from("/"), |p| p.join("not-under-here-gen-test"));
        assert_eq!(shown(&outside), outside.display().to_string());
    }
}
