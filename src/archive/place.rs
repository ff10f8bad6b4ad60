//! Where a write's bytes go (docs/archive.md, "Writing"): the spool that holds documents
//! compressed until they are placed, the parts they are placed into (each named by its hash when
//! full), the directory blocks cut a block at a time, and the root, written last.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::{BlockRef, Entry, PartRef, Root, encode_block};
use super::{Error, FILLING, Options, PREVIOUS_ROOT_FILE, ROOT_FILE, part_file};

/// What a write or an edit wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The files written, relative to the archive's folder, in the order written: the root last.
    pub files: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
    /// True when an edit was written as a full write of the edited set (a merge).
    pub merged: bool,
}

/// A scratch file in the archive's folder holding the compressed documents until they are
/// placed, so that memory holds no document. Removed when dropped.
pub(super) struct Spool {
    path: PathBuf,
    file: File,
    len: u64,
}

impl Spool {
    /// A spool in the archive's folder (`.spool`), its `parts/` folder made.
    pub(super) fn create(dir: &Path) -> Result<Spool, Error> {
        fs::create_dir_all(dir.join("parts")).map_err(|source| Error::Io { file: "parts".into(), source })?;
        Spool::at(dir.join(".spool"))
    }

    /// A spool at `path` (outside the archive's folder: a build keeps it in its state folder).
    pub(super) fn at(path: PathBuf) -> Result<Spool, Error> {
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path);
        let file = file.map_err(|source| Error::Io { file: path.display().to_string(), source })?;
        Ok(Spool { path, file, len: 0 })
    }

    /// Appends whatever `fill` writes through the spool's end, returning where it starts and
    /// its length (a large document is streamed in, never held).
    pub(super) fn append_with(
        &mut self,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(u64, u64), Error> {
        use std::io::{Seek, SeekFrom};
        let at = self.len;
        let failed = |source| Error::Io { file: ".spool".into(), source };
        self.file.seek(SeekFrom::Start(at)).map_err(failed)?;
        let mut out = io::BufWriter::new(&self.file);
        fill(&mut out).map_err(failed)?;
        out.flush().map_err(failed)?;
        drop(out);
        self.len = self.file.metadata().map_err(failed)?.len();
        Ok((at, self.len - at))
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<u64, Error> {
        self.file.write_all_at(bytes, self.len).map_err(|source| Error::Io { file: ".spool".into(), source })?;
        self.len += bytes.len() as u64;
        Ok(self.len - bytes.len() as u64)
    }

    /// A scratch file's path beside the spool (`<spool>.<what>`): the ledger, sort runs.
    pub(super) fn scratch(&self, what: &str) -> PathBuf {
        PathBuf::from(format!("{}.{what}", self.path.display()))
    }

    pub(super) fn get(&self, at: u64, length: u64) -> Result<Vec<u8>, Error> {
        let mut out = vec![0; length as usize];
        self.file.read_exact_at(&mut out, at).map_err(|source| Error::Io { file: ".spool".into(), source })?;
        Ok(out)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// The gzip level a document is stored at: 0 (stored blocks, a gzip wrapper) for a bulk-data
/// file, which is gzip already; 6 for every other (docs/archive.md, "Deterministic gzip").
pub(super) fn level_of(keys: &[String]) -> u32 {
    if keys.first().is_some_and(|key| crate::tree::layout::is_bulk_file(key)) { 0 } else { 6 }
}

/// Parts being filled: a part is written, named by its hash, when the next blob would take it
/// past the bound.
pub(super) struct Parts<'w> {
    dir: &'w Path,
    limit: u64,
    index: bool,
    delta: bool,
    /// The part being filled: written through to a temporary file as it comes (a part is up to
    /// 64 MiB: held in memory, it was a sixth of a 1M-record build's peak), hashed on the way.
    filling: Option<Filling>,
    done: Vec<PartRef>,
    written: &'w mut Written,
}

/// A part being written: its temporary file, its hash so far, its length.
struct Filling {
    out: io::BufWriter<File>,
    hasher: blake3::Hasher,
    len: u64,
}

impl<'w> Parts<'w> {
    pub(super) fn new(
        dir: &'w Path,
        options: &Options,
        index: bool,
        delta: bool,
        written: &'w mut Written,
    ) -> Parts<'w> {
        Parts { dir, limit: options.part_bytes, index, delta, filling: None, done: Vec::new(), written }
    }

    /// Appends a blob: the position its part will have among the parts written, and its offset.
    pub(super) fn place(&mut self, blob: &[u8]) -> Result<(usize, u64), Error> {
        let failed = |source| Error::Io { file: FILLING.into(), source };
        if self.filling.as_ref().is_some_and(|f| f.len > 0 && f.len + blob.len() as u64 > self.limit) {
            self.flush()?;
        }
        let filling = match &mut self.filling {
            Some(filling) => filling,
            None => {
                fs::create_dir_all(self.dir.join("parts"))
                    .map_err(|source| Error::Io { file: "parts".into(), source })?;
                let file = File::create(self.dir.join(FILLING)).map_err(failed)?;
                let out = io::BufWriter::with_capacity(1 << 20, file);
                self.filling.insert(Filling { out, hasher: blake3::Hasher::new(), len: 0 })
            }
        };
        filling.out.write_all(blob).map_err(failed)?;
        filling.hasher.update(blob);
        filling.len += blob.len() as u64;
        Ok((self.done.len(), filling.len - blob.len() as u64))
    }

    /// Ends the part being filled: synced, then renamed to its name (left out when a part of
    /// that name and size is there already: its bytes are these).
    fn flush(&mut self) -> Result<(), Error> {
        let Some(Filling { out, hasher, len }) = self.filling.take() else { return Ok(()) };
        let name = *hasher.finalize().as_bytes();
        let file = part_file(&name);
        let path = self.dir.join(&file);
        let failed = |source| Error::Io { file: file.clone(), source };
        let done = out.into_inner().map_err(io::IntoInnerError::into_error).map_err(failed)?;
        if fs::metadata(&path).is_ok_and(|m| m.len() == len) {
            fs::remove_file(self.dir.join(FILLING)).map_err(failed)?;
        } else {
            done.sync_all().map_err(failed)?;
            fs::rename(self.dir.join(FILLING), &path).map_err(failed)?;
        }
        self.written.files.push(file);
        self.written.bytes += len;
        self.done.push(PartRef { name, size: len, index: self.index, delta: self.delta });
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<Vec<PartRef>, Error> {
        self.flush()?;
        Ok(self.done)
    }
}

/// Writes `bytes` at `path` under a temporary name, synced, then renamed over it.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut file = File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

/// Cuts entries given in key order into directory blocks of at most `options.block_entries`,
/// each encoded into the index parts as soon as it is full: one block held at a time.
pub(super) struct BlockCutter<'w> {
    parts: Parts<'w>,
    per: usize,
    block: Vec<Entry>,
    /// Each block placed, and the position among the index parts of the part it went into
    /// (named when that part is written).
    placed: Vec<(BlockRef, usize)>,
}

impl<'w> BlockCutter<'w> {
    pub(super) fn new(parts: Parts<'w>, options: &Options) -> BlockCutter<'w> {
        let per = options.block_entries.max(1);
        BlockCutter { parts, per, block: Vec::with_capacity(per), placed: Vec::new() }
    }

    pub(super) fn push(&mut self, entry: Entry) -> Result<(), Error> {
        self.block.push(entry);
        if self.block.len() == self.per { self.place() } else { Ok(()) }
    }

    /// How many blocks were placed so far.
    pub(super) fn blocks(&self) -> usize {
        self.placed.len()
    }

    /// Ends the block being filled here, even if not full (an edit's blocks end where the old
    /// block they replace ended).
    pub(super) fn place(&mut self) -> Result<(), Error> {
        if self.block.is_empty() {
            return Ok(());
        }
        let stored = encode_block(&self.block);
        let (seq, offset) = self.parts.place(&stored)?;
        let data: BTreeSet<[u8; 32]> = self.block.iter().map(|e| e.part).collect();
        let (first, count) = (self.block[0].key.clone(), self.block.len() as u64);
        let hash = *blake3::hash(&stored).as_bytes();
        let (part, length, refs) = ([0; 32], stored.len() as u64, data.into_iter().collect());
        self.placed.push((BlockRef { first, part, offset, length, hash, entries: count, refs }, seq));
        self.block.clear();
        Ok(())
    }

    /// The root's references to the blocks, in order, and the index parts written.
    pub(super) fn finish(mut self) -> Result<(Vec<BlockRef>, Vec<PartRef>), Error> {
        self.place()?;
        let refs = self.parts.finish()?;
        let blocks = self.placed.into_iter().map(|(block, seq)| BlockRef { part: refs[seq].name, ..block });
        Ok((blocks.collect(), refs))
    }
}

/// Writes the root, last: the commit point. The root it replaces is kept as `root.previous`
/// (a link to its bytes), whose parts [`super::prune`] keeps.
pub(super) fn commit(dir: &Path, root: &Root, written: &mut Written) -> Result<(), Error> {
    let stored = root.encode();
    keep_previous(dir).map_err(|source| Error::Io { file: PREVIOUS_ROOT_FILE.into(), source })?;
    replace(&dir.join(ROOT_FILE), &stored).map_err(|source| Error::Io { file: ROOT_FILE.into(), source })?;
    written.files.push(ROOT_FILE.into());
    written.bytes += stored.len() as u64;
    Ok(())
}

/// Links the current root, if any, as `root.previous` (by a rename over it: atomic).
fn keep_previous(dir: &Path) -> io::Result<()> {
    let temporary = dir.join("root.previous.tmp");
    let _ = fs::remove_file(&temporary);
    match fs::hard_link(dir.join(ROOT_FILE), &temporary) {
        Ok(()) => fs::rename(&temporary, dir.join(PREVIOUS_ROOT_FILE)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
