//! The build index: what the tree in `out/` was made from, kept beside it as
//! `.<out>.gen-index` so that the next build does only the work the change needs.
//!
//! It records, for the tree whose manifest it names (by the manifest file's own stamp):
//! - the settings the tree was built with;
//! - every data file: its stamp (size, modification and change time, inode), its hash and,
//!   for a record, its name;
//! - each list's entries, as one hash per resource;
//! - what rendering saw for the schemas of `openapi.json`;
//! - every file of the tree: its hash, and the stamp it had when the build left it.
//!
//! Nothing in it is trusted blindly: a file, of the data or of the tree, is read again unless
//! its stamp is unchanged and it last changed well before the build that recorded it started
//! (see [`Index::trusted`]); a path of the tree it lists that no build writes makes the whole
//! index ignored; it is read only from a regular file, at most [`MAX_INDEX_BYTES`]. See
//! docs/builds.md.

use crate::build::schema::Inferred;
use crate::build::tree_fs::TreeDir;
use crate::fsutil::{self, NotRead};
use crate::fsutil::{Stamp, beside};
use crate::manifest::{FileList, MANIFEST_FILE, TreeSettings, WithFiles, is_tree_path};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version of the index's format; another version is ignored (the next build is a full one).
/// 2: the page files are the aligned pages of each size (docs/tree.md), so a tree indexed by an
/// earlier version is rendered whole once, not kept list by list with its old pages and links.
pub const FORMAT: u32 = 2;

/// How long before a build started a file must have last changed for its stamp to be trusted:
/// a file changed later may have changed again within the same tick of the file system's clock
/// (coarse clocks tick every few milliseconds; some file systems keep seconds or two).
pub const UNTRUSTED_WINDOW_NS: i64 = 2_000_000_000;

/// Largest build index read (4 GiB): the index of a tree of a million records is under 1 GB.
/// A larger file is not one gen wrote; it is ignored (and replaced) with a note.
pub const MAX_INDEX_BYTES: u64 = 4 << 30;

/// What a check of the tree against its index found (see [`Index::verify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    /// A file is not as the index says the build left it.
    Changed,
    /// Every file is; `rehashed` when some had to be read to tell (their stamps were too
    /// recent to trust), so that a new index would let the next build trust them.
    Intact { rehashed: bool },
}

/// A BLAKE3 hash, written as hex in the index (32 bytes in memory, not a 64-character string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hash(pub blake3::Hash);

impl Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.to_hex().as_str())
    }
}

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Hash, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        blake3::Hash::from_hex(text.as_bytes()).map(Hash).map_err(serde::de::Error::custom)
    }
}

/// One file of the data folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DataFile {
    pub stamp: Stamp,
    pub hash: Hash,
    /// A record's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One file of the tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TreeFile {
    /// BLAKE3 of its bytes, as in the manifest.
    pub hash: Hash,
    pub stamp: Stamp,
    /// The stamp of its `.gz` sibling, in a tree built with `--gzip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gz: Option<Stamp>,
}

/// The build index of one tree.
#[derive(Debug, Serialize, Deserialize)]
pub struct Index {
    pub format: u32,
    /// Stamp of the `manifest.json` this index describes: another manifest means the tree was
    /// changed after the index was written, and the index is ignored.
    pub manifest: Stamp,
    /// When the build that wrote the index started (nanoseconds since the epoch).
    pub started_ns: i64,
    pub settings: TreeSettings,
    /// Data files by path relative to the data folder.
    pub data: BTreeMap<String, DataFile>,
    /// Hash of each resource's list entries (ids and names, in list order).
    pub lists: BTreeMap<String, String>,
    /// What rendering saw, for the schemas: (segment, sub-document kind, inference).
    pub schemas: Vec<(String, Option<String>, Inferred)>,
    /// Files of the tree by path relative to it (the manifest excepted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, TreeFile>,
}

impl Index {
    /// Where the index of the tree in `out` is kept: beside it, so that nothing is published.
    pub fn path(out: &Path) -> PathBuf {
        beside(out, "gen-index")
    }

    /// Reads the index of the tree in `out`, if there is one that describes its current
    /// manifest. An index that is not a regular file, is larger than [`MAX_INDEX_BYTES`] or
    /// lists a path no build writes is ignored with a note (the build is then a full one).
    pub fn read(out: &Path) -> Option<Index> {
        use std::io::Read as _;
        let path = Index::path(out);
        let ignored = |why: String| {
            eprintln!("note: {why}: ignoring the build index; this build checks every file and writes a new index");
        };
        let file = match fsutil::open_regular_file(&path, MAX_INDEX_BYTES, false) {
            Ok(file) => file,
            Err(NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                ignored(fsutil::why_not_read(&path, MAX_INDEX_BYTES, &e));
                return None;
            }
        };
        let reader = std::io::BufReader::with_capacity(1 << 16, file.take(MAX_INDEX_BYTES));
        let index: Index = serde_json::from_reader(reader).ok()?;
        if let Some(bad) = index.files.keys().find(|path| !is_tree_path(path)) {
            ignored(format!("{} lists {bad:?}, which is not a path of a gen tree", path.display()));
            return None;
        }
        let manifest = Stamp::of_file(&out.join(MANIFEST_FILE))?;
        (index.format == FORMAT && index.manifest == manifest).then_some(index)
    }

    /// Writes the index of the tree in `out` (beside it, then renamed into place).
    pub fn write(&self, out: &Path) -> Result<()> {
        self.write_listing(out, &[])
    }

    /// Writes this index with `files` listed besides its own (the new tree's files, given as a
    /// list of references: a map of a million paths would cost far more memory).
    pub fn write_listing(&self, out: &Path, files: &[(&str, &TreeFile)]) -> Result<()> {
        let path = Index::path(out);
        // One writer at a time (the build holds the lock on the tree): a fixed name, so that a
        // killed build's leftover is simply overwritten by the next one.
        let temporary = beside(out, "gen-index.tmp");
        let written = (|| -> std::io::Result<()> {
            use std::io::Write as _;
            let file = fsutil::create_new(&temporary).map_err(std::io::Error::other)?;
            let mut file = std::io::BufWriter::with_capacity(1 << 16, file);
            let listing =
                WithFiles { head: self, files: FileList { pairs: files, value: |file| *file, skip_empty: true } };
            serde_json::to_writer(&mut file, &listing)?;
            file.flush()
        })();
        written
            .and_then(|()| std::fs::rename(&temporary, &path))
            .with_context(|| format!("cannot write the build index {}", path.display()))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&temporary);
            })
    }

    /// True when a file whose stamp is unchanged since this index recorded it can be taken as
    /// unchanged: it last changed well before that build started. A file that changed just
    /// before or during that build is hashed again, whatever its stamp says. The same rule
    /// holds for data files and for the tree's own files (whose stamps are taken after the
    /// build's commit, so every file a build wrote is read once more by the next build).
    pub fn trusted(&self, stamp: &Stamp) -> bool {
        stamp.ctime_ns < self.started_ns - UNTRUSTED_WINDOW_NS && stamp.mtime_ns < self.started_ns - UNTRUSTED_WINDOW_NS
    }

    /// Whether every file of the tree is as this index says the build left it (see
    /// [`Index::check_file`]).
    pub fn verify(&self, tree: &TreeDir) -> Verified {
        use rayon::prelude::*;
        let files: Vec<(&String, &TreeFile)> = self.files.iter().collect();
        let rehashed = std::sync::atomic::AtomicBool::new(false);
        let intact = files.par_iter().all(|(path, file)| match self.check_file(tree, path, file, self.settings.gzip) {
            Some(read) => {
                if read {
                    rehashed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                true
            }
            None => false,
        });
        match intact {
            true => Verified::Intact { rehashed: rehashed.into_inner() },
            false => Verified::Changed,
        }
    }

    /// Whether the file at `path` in `tree` is as `file` says the build left it, with its `.gz`
    /// sibling when `gzip` wants one (and without one otherwise): `None` when it is not;
    /// `Some(true)` when telling took reading it. A stamp is enough only when it is unchanged
    /// and [`Index::trusted`]: a file changed just before its stamp was taken (during the
    /// commit, say) may have changed again within the same clock tick, so its bytes are read
    /// and checked against its hash (and its `.gz` sibling's, unpacked, against them).
    pub fn check_file(&self, tree: &TreeDir, path: &str, file: &TreeFile, gzip: bool) -> Option<bool> {
        let gz_rel = || format!("{path}.gz");
        let same_gz = match file.gz {
            Some(gz) => gzip && tree.stamp(&gz_rel()) == Some(gz),
            None => !gzip,
        };
        if !same_gz || tree.stamp(path) != Some(file.stamp) {
            return None;
        }
        let gz_trusted = file.gz.is_none_or(|gz| self.trusted(&gz));
        if self.trusted(&file.stamp) && gz_trusted {
            return Some(false);
        }
        let bytes = tree.read(path, file.stamp.size)?;
        if blake3::hash(&bytes) != file.hash.0 {
            return None;
        }
        if let Some(gz) = file.gz.filter(|_| !gz_trusted) {
            use std::io::Read as _;
            let packed = tree.read(&gz_rel(), gz.size)?;
            let mut unpacked = Vec::with_capacity(bytes.len() + 1);
            let decoder = flate2::read::GzDecoder::new(&packed[..]);
            decoder.take(bytes.len() as u64 + 1).read_to_end(&mut unpacked).ok()?;
            if unpacked != bytes {
                return None;
            }
        }
        (tree.stamp(path) == Some(file.stamp)).then_some(true)
    }
}

/// The `.gz` sibling of a file of the tree.
pub fn gz_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".gz");
    PathBuf::from(name)
}

/// Nanoseconds since the epoch, now.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}
