//! A write fed by many threads at once (docs/builds.md, "The archive writer"): each document is
//! compressed and hashed by the thread that hands it over, and its stored bytes go into a spool
//! file, so that memory holds keys and places, never bodies. Ended by a fresh write of every
//! document put ([`Stream::write`]), or by an edit of the archive in place that writes only what
//! differs from it ([`Stream::edit`]). Either way the bytes do not depend on the order the
//! documents came in, hence not on the number of threads.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::codec::{gunzip, gzip_at};
use super::write::{Spool, Staged, apply, level_of, write_full};
use super::{Error, Folder, Options, Reader, Written};

/// Where a document put went: its place in the spool, its hash and size. `Copy`, so that a
/// build's stream keeps it for each document (see `crate::build::rendering::Documents`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Receipt {
    at: u64,
    length: u64,
    /// BLAKE3 of the document's bytes.
    pub(crate) hash: [u8; 32],
    /// Its length in bytes.
    pub(crate) size: u64,
}

/// Documents handed over from many threads, spooled compressed, until the write or the edit.
pub(crate) struct Stream {
    spool: Mutex<Spool>,
    staged: Mutex<Vec<Staged>>,
}

impl Stream {
    /// A stream spooling into the file `spool` (removed when the stream ends).
    pub(crate) fn create(spool: PathBuf) -> Result<Stream, Error> {
        Ok(Stream { spool: Mutex::new(Spool::at(spool)?), staged: Mutex::default() })
    }

    /// Puts `bytes` under `keys`: compressed and hashed on the calling thread, then spooled.
    pub(crate) fn put(&self, keys: Vec<String>, bytes: &[u8]) -> Result<Receipt, Error> {
        let stored = gzip_at(bytes, level_of(&keys));
        let (hash, size) = (*blake3::hash(bytes).as_bytes(), bytes.len() as u64);
        let at = self.spool.lock().expect("no panic while spooling").push(&stored)?;
        Ok(self.staged(keys, Receipt { at, length: stored.len() as u64, hash, size }))
    }

    /// Puts the file at `path` under `keys`, streamed (never held whole) into one gzip member at
    /// the level its key takes (0 for a bulk-data file: a wrapper around its gzip).
    pub(crate) fn put_file(&self, keys: Vec<String>, path: &Path) -> Result<Receipt, Error> {
        let failed = |source| Error::Io { file: path.display().to_string(), source };
        let mut file = std::fs::File::open(path).map_err(failed)?;
        let level = level_of(&keys);
        let (mut hasher, mut size) = (blake3::Hasher::new(), 0u64);
        let mut spool = self.spool.lock().expect("no panic while spooling");
        let (at, length) = spool.append_with(|out| {
            let mut encoder = GzEncoder::new(out, Compression::new(level));
            let mut buffer = vec![0; 1 << 16];
            loop {
                let n = file.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
                size += n as u64;
                encoder.write_all(&buffer[..n])?;
            }
            encoder.finish().map(drop)
        })?;
        drop(spool);
        Ok(self.staged(keys, Receipt { at, length, hash: *hasher.finalize().as_bytes(), size }))
    }

    fn staged(&self, keys: Vec<String>, receipt: Receipt) -> Receipt {
        let media_type = keys.first().map_or("application/octet-stream", |k| crate::tree::media_type(k)).to_string();
        let Receipt { at, length, hash, size } = receipt;
        let staged = Staged { keys, hash, size, media_type, at, length };
        self.staged.lock().expect("no panic while spooling").push(staged);
        receipt
    }

    /// The bytes of a document put, read back from the spool and decompressed.
    pub(crate) fn read(&self, receipt: Receipt) -> Result<Vec<u8>, Error> {
        let stored = self.spool.lock().expect("no panic while spooling").get(receipt.at, receipt.length)?;
        let what = "a spooled document is not the gzip member written".to_string();
        gunzip(&stored, receipt.size as usize).ok_or(Error::Damaged { file: ".spool".into(), offset: receipt.at, what })
    }

    /// Writes a fresh archive of every document put into `dir`: parts, then the root, last.
    pub(crate) fn write(self, dir: &Path, options: &Options) -> Result<Written, Error> {
        let spool = self.spool.into_inner().expect("no panic while spooling");
        write_full(dir, &spool, self.staged.into_inner().expect("no panic while spooling"), options)
    }

    /// Makes the archive in `dir` hold exactly the documents put, writing only the change (by
    /// [`super::edit`]'s rules): the documents whose bytes differ from the archive's under one
    /// of their keys, or that it lacks, are put; the keys it has that were not put are removed.
    /// Nothing at all is written when it holds them already.
    pub(crate) fn edit(self, dir: &Path, options: &Options) -> Result<Written, Error> {
        let reader = Reader::open(Folder(dir.to_path_buf()))?;
        let mut spool = self.spool.into_inner().expect("no panic while spooling");
        let staged = self.staged.into_inner().expect("no panic while spooling");
        let mut keys: Vec<(&str, usize)> =
            staged.iter().enumerate().flat_map(|(i, d)| d.keys.iter().map(move |k| (k.as_str(), i))).collect();
        keys.sort_unstable();
        let (mut changed, mut removed) = (vec![false; staged.len()], BTreeSet::new());
        let mut new = keys.iter().peekable();
        // the archive's entries, a block at a time, against the keys put (both in key order)
        for block in 0..reader.root().blocks.len() {
            for entry in reader.block(block)?.iter() {
                while let Some((_, i)) = new.next_if(|(key, _)| *key < entry.key.as_str()) {
                    changed[*i] = true;
                }
                match new.next_if(|(key, _)| *key == entry.key) {
                    Some((_, i)) => changed[*i] |= staged[*i].hash != entry.hash,
                    None => drop(removed.insert(entry.key.clone())),
                }
            }
            // one block held at a time: the directory of a large archive is never held whole
            reader.forget_blocks();
        }
        for (_, i) in new {
            changed[*i] = true;
        }
        drop(keys);
        let puts: Vec<Staged> =
            staged.into_iter().zip(changed).filter(|(_, changed)| *changed).map(|(d, _)| d).collect();
        if puts.is_empty() && removed.is_empty() {
            return Ok(Written::default());
        }
        apply(dir, &reader, &mut spool, puts, &removed, options)
    }

    /// Applies to the archive in `dir` a change known beforehand (a partial build's, from its
    /// index): every document put is written, and the keys `removed` removed; the archive's
    /// directory is read only where the change touches it. Nothing is written when the change
    /// is empty.
    pub(crate) fn edit_known(
        self,
        dir: &Path,
        options: &Options,
        removed: &BTreeSet<String>,
    ) -> Result<Written, Error> {
        let staged = self.staged.into_inner().expect("no panic while spooling");
        if staged.is_empty() && removed.is_empty() {
            return Ok(Written::default());
        }
        let reader = Reader::open(Folder(dir.to_path_buf()))?;
        let mut spool = self.spool.into_inner().expect("no panic while spooling");
        apply(dir, &reader, &mut spool, staged, removed, options)
    }
}

/// The files of the archive in `dir` (the parts its root names, and the root) and their bytes.
pub(crate) fn totals(dir: &Path) -> Result<(usize, u64), Error> {
    let reader = Reader::open(Folder(dir.to_path_buf()))?;
    let files = reader.files();
    let mut bytes = 0;
    for file in &files {
        let failed = |source: io::Error| Error::Io { file: file.clone(), source };
        bytes += std::fs::metadata(dir.join(file)).map_err(failed)?.len();
    }
    Ok((files.len(), bytes))
}
