//! Where the served documents come from (issue 49): the files of a tree, listed by its
//! manifest, or an archive (docs/archive.md), read through its directory. The answers, lists,
//! `?q=`, filters and the cache ask only what is here: the hash of the document at a path
//! (none: not served), its size, its bytes checked, and a body to send a piece at a time; so
//! both sources give the same answers.
//!
//! An archive is opened by reading its `root` and its `manifest.json` document (the tree's
//! settings and resources, no files listed), and nothing else. A lookup then reads the
//! path's directory block (held within an eighth of `--cache-mb` more, see [`Cache::new`]) and the
//! document, checked against the hash the block names, which is the tree manifest's hash of the
//! same file (so the ETags are the tree's). A block or a document that cannot be read, or that
//! is not what names it (a damaged or truncated part, a part missing), is answered 503
//! `no-store`, as a tree's file that does not match its manifest, and logged with the part file
//! and the byte.

use super::cache::Cache;
use super::origin::Source;
use super::stream::{Body, Streamed};
use super::tree::{Key, ServedTree, ToCheck, Unserved, classify};
use crate::archive::{self, Folder, MANIFEST_KEY, Reader};
use crate::fsutil::show_dir;
use crate::tree::listing::{self, Unservable};
use crate::tree::manifest::{FORMAT, Manifest};
use anyhow::{Result, anyhow, bail};
use std::path::Path;
use std::sync::Arc;

/// Loads the tree or the archive in `dir` (see [`ServedTree::load_unchecked`]), with the files
/// of a small tree still to check whole (an archive's reads are each checked).
pub(crate) fn load_unchecked(dir: &Path, cache: Arc<Cache>, base_url: Option<&str>) -> Result<(ServedTree, ToCheck)> {
    if archive::is_archive(dir) {
        return load_archive(dir, cache, base_url).map(|tree| (tree, None));
    }
    ServedTree::load_unchecked(dir, cache, base_url)
}

/// [`load_unchecked`], a small tree checked whole ([`ServedTree::load_rebased`]).
pub(crate) fn load(dir: &Path, cache: Arc<Cache>, base_url: Option<&str>) -> Result<ServedTree> {
    match archive::is_archive(dir) {
        true => load_archive(dir, cache, base_url),
        false => ServedTree::load_rebased(dir, cache, base_url),
    }
}

/// Opens the archive in `dir` to serve it: its root, then its manifest document; an error that
/// says which file is wrong when either cannot be read.
pub(crate) fn load_archive(dir: &Path, cache: Arc<Cache>, base_url: Option<&str>) -> Result<ServedTree> {
    let (reader, manifest) = open_archive(dir, cache.block_bytes())?;
    let digest = blake3::Hash::from_bytes(reader.digest());
    Ok(ServedTree::new(dir, Source::Archive(Box::new(reader)), manifest, digest, cache, base_url))
}

/// The archive in `dir`, its reader holding at most `block_bytes` of directory blocks, and its
/// manifest document (settings and resources).
pub(crate) fn open_archive(dir: &Path, block_bytes: usize) -> Result<(Reader<Folder>, Manifest)> {
    let shown = show_dir(dir);
    let not_served = |e: archive::Error| anyhow!("cannot serve the archive {shown}: {e}");
    let reader = Reader::open(Folder(dir.to_path_buf())).map_err(not_served)?.with_block_cache(block_bytes);
    let Some(found) = reader.get(MANIFEST_KEY).map_err(not_served)? else {
        bail!(
            "the archive {shown} holds no {MANIFEST_KEY}: it is not a built API; write it with `gen build --archive`"
        );
    };
    let manifest = Manifest::from_bytes(&found.bytes)
        .map_err(|e| anyhow!("{MANIFEST_KEY} in the archive {shown} is not a manifest written by gen: {e}"))?;
    if manifest.settings.format != FORMAT {
        bail!(
            "{MANIFEST_KEY} in the archive {shown} has format {}, this gen reads format {FORMAT}: rebuild with this \
             version's `gen build --archive`",
            manifest.settings.format
        );
    }
    Ok((reader, manifest))
}

impl ServedTree {
    /// The hash of the document at `path` when it is served; an error when an archive's
    /// directory block cannot be read.
    pub(super) fn hash_of(&self, path: &str) -> Result<Option<blake3::Hash>, Unserved> {
        match &self.source {
            Source::Tree(listing) => Ok(listing.hash_of(path)),
            // the paths a tree's listing holds, and no other key (`manifest.json`)
            Source::Archive(_) if !matches!(classify(path), Key::Serve(_)) => Ok(None),
            Source::Archive(reader) => reader
                .with_entry(path, |entry| blake3::Hash::from_bytes(entry.hash))
                .map_err(|e| self.archive_error(path, &e)),
        }
    }

    /// The size of the document at `path` (0 when it cannot be told).
    pub(super) fn size_of(&self, path: &str) -> usize {
        match &self.source {
            Source::Tree(_) => std::fs::symlink_metadata(self.dir.join(path)).map_or(0, |m| m.len() as usize),
            Source::Archive(reader) => reader.with_entry(path, |entry| entry.size as usize).ok().flatten().unwrap_or(0),
        }
    }

    /// The bytes of the document at `path`, checked against `hash`, with its stored gzip
    /// member when it comes from an archive.
    pub(super) fn read_source(&self, path: &str, hash: &blake3::Hash) -> Result<(Vec<u8>, Option<Vec<u8>>), Unserved> {
        let reader = match &self.source {
            Source::Tree(_) => {
                let body = listing::read_listed(&self.dir, path, hash).map_err(|e| self.unserved(path, &e))?;
                return Ok((body, None));
            }
            Source::Archive(reader) => reader,
        };
        let found = reader.get(path).map_err(|e| self.archive_error(path, &e))?;
        let gone = || Unservable::NotRead("the archive's directory no longer holds it".into());
        let found = found.ok_or_else(|| self.unserved(path, &gone()))?;
        if found.entry.hash != *hash.as_bytes() {
            return Err(self.unserved(path, &Unservable::Changed));
        }
        Ok((found.bytes, Some(found.stored)))
    }

    /// The body of the document at `path`, open to be sent a piece at a time ([`Streamed`]).
    pub(super) fn open_body(&self, path: &str) -> Result<Body, Unservable> {
        let reader = match &self.source {
            Source::Tree(_) => return Streamed::open_file(&self.dir, path),
            Source::Archive(reader) => reader,
        };
        let not_read = |e: &dyn std::fmt::Display| Unservable::NotRead(e.to_string());
        let entry = reader.entry(path).map_err(|e| not_read(&e))?.ok_or_else(|| not_read(&"not in the archive"))?;
        let part = archive::part_file(&entry.part);
        let file = std::fs::File::open(self.dir.join(&part)).map_err(|e| not_read(&format!("{part}: {e}")))?;
        let len = file.metadata().map_err(|e| not_read(&format!("{part}: {e}")))?.len();
        if entry.offset.saturating_add(entry.length) > len {
            let wanted = format!("{} bytes at byte {}", entry.length, entry.offset);
            return Err(not_read(&format!("{part} is truncated: {wanted} wanted, the file has {len} bytes")));
        }
        Ok(Body::Member { file, offset: entry.offset, length: entry.length })
    }

    /// The error for the document at `path` that cannot be served as `why` says.
    pub(super) fn unserved(&self, path: &str, why: &Unservable) -> Unserved {
        let detail = match (&self.source, why) {
            (Source::Tree(_), why) => why.explain(&self.dir, path),
            (Source::Archive(_), Unservable::NotRead(e)) => {
                format!("the archive {}, key {path}: cannot be read: {e}; write the archive again", show_dir(&self.dir))
            }
            (Source::Archive(_), Unservable::Changed) => format!(
                "the archive {}, key {path}: its bytes are not the ones its directory names (a damaged part): \
                 write the archive again",
                show_dir(&self.dir)
            ),
        };
        Unserved { path: path.to_string(), detail, busy: false }
    }

    /// The error for the document at `path` of an archive that said `e` (names the part file).
    fn archive_error(&self, path: &str, e: &archive::Error) -> Unserved {
        let detail = format!("the archive {}, key {path}: {e}", show_dir(&self.dir));
        Unserved { path: path.to_string(), detail, busy: false }
    }
}
