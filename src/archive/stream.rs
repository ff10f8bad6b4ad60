//! A write fed by many threads at once (docs/builds.md, "The archive writer"): each document is
//! compressed and hashed by the thread that hands it over, its stored bytes go into a spool
//! file and its record into a ledger, so that memory holds neither. Ended by a fresh write of
//! every document put ([`Stream::write`]), or by an edit of the archive in place that writes only what
//! differs from it ([`Stream::edit`]). Either way the bytes do not depend on the order the
//! documents came in, hence not on the number of threads.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::codec::{gunzip, gzip_at};
use super::full::write_full;
use super::ledger::{Ledger, Source, Staged};
use super::place::{Spool, Written, level_of};
use super::sort::{self, Sorter};
use super::write::apply;
use super::{Error, Folder, Options, Reader};

/// Where a document put went: its place in the spool and its size (24 bytes; its hash is the
/// caller's). `Copy`, so that a build's stream keeps it for each document (see
/// `crate::build::rendering::Documents`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Receipt {
    at: u64,
    length: u64,
    /// Its length in bytes.
    pub(crate) size: u64,
}

impl Receipt {
    /// The receipt of a document not put (the archive holds it already): its size alone.
    pub(crate) fn kept(size: u64) -> Receipt {
        Receipt { at: 0, length: 0, size }
    }
}

/// Documents handed over from many threads, spooled compressed, until the write or the edit.
pub(crate) struct Stream {
    spool: Mutex<Spooled>,
}

/// The spool and its ledger, written together under one lock.
struct Spooled {
    spool: Spool,
    ledger: Ledger,
}

impl Stream {
    /// A stream spooling into the file `spool` (removed when the stream ends), with its ledger
    /// and scratch files beside it.
    pub(crate) fn create(spool: PathBuf) -> Result<Stream, Error> {
        let spool = Spool::at(spool)?;
        let ledger = Ledger::create(spool.scratch("ledger"))?;
        Ok(Stream { spool: Mutex::new(Spooled { spool, ledger }) })
    }

    /// Puts `bytes` under `keys`: compressed and hashed on the calling thread, then spooled.
    pub(crate) fn put(&self, keys: Vec<String>, bytes: &[u8]) -> Result<Receipt, Error> {
        let stored = gzip_at(bytes, level_of(&keys));
        let (hash, size) = (*blake3::hash(bytes).as_bytes(), bytes.len() as u64);
        let mut spooled = self.spool.lock().expect("no panic while spooling");
        let at = spooled.spool.push(&stored)?;
        let receipt = Receipt { at, length: stored.len() as u64, size };
        spooled.record(keys, receipt, hash)?;
        Ok(receipt)
    }

    /// Puts the file at `path` under `keys`, streamed (never held whole) into one gzip member at
    /// the level its key takes (0 for a bulk-data file: a wrapper around its gzip).
    pub(crate) fn put_file(&self, keys: Vec<String>, path: &Path) -> Result<Receipt, Error> {
        let failed = |source| Error::Io { file: path.display().to_string(), source };
        let mut file = std::fs::File::open(path).map_err(failed)?;
        let level = level_of(&keys);
        let (mut hasher, mut size) = (blake3::Hasher::new(), 0u64);
        let mut spooled = self.spool.lock().expect("no panic while spooling");
        let (at, length) = spooled.spool.append_with(|out| {
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
        let receipt = Receipt { at, length, size };
        spooled.record(keys, receipt, *hasher.finalize().as_bytes())?;
        Ok(receipt)
    }

    /// The bytes of a document put, read back from the spool and decompressed.
    pub(crate) fn read(&self, receipt: Receipt) -> Result<Vec<u8>, Error> {
        let stored = self.spool.lock().expect("no panic while spooling").spool.get(receipt.at, receipt.length)?;
        let what = "a spooled document is not the gzip member written".to_string();
        gunzip(&stored, receipt.size as usize).ok_or(Error::Damaged { file: ".spool".into(), offset: receipt.at, what })
    }

    /// Writes a fresh archive of every document put into `dir`: parts, then the root, last.
    pub(crate) fn write(self, dir: &Path, options: &Options) -> Result<Written, Error> {
        let Spooled { spool, mut ledger } = self.spool.into_inner().expect("no panic while spooling");
        write_full(dir, &spool, &mut ledger, None, options)
    }

    /// Makes the archive in `dir` hold exactly the documents put, writing only the change (by
    /// [`super::edit`]'s rules): the documents whose bytes differ from the archive's under one
    /// of their keys, or that it lacks, are put; the keys it has that were not put are removed.
    /// Nothing at all is written when it holds them already. The keys put are sorted on disk
    /// and walked beside the archive's entries, a block at a time: both in key order.
    pub(crate) fn edit(self, dir: &Path, options: &Options) -> Result<Written, Error> {
        let reader = Reader::open(Folder(dir.to_path_buf()))?;
        let Spooled { spool, mut ledger } = self.spool.into_inner().expect("no panic while spooling");
        let mut keys = Sorter::new(spool.scratch("keys"), sort::BUDGET);
        let mut item = Vec::new();
        for (i, staged) in ledger.records()?.enumerate() {
            let staged = staged?;
            for key in &staged.keys {
                item.clear();
                item.extend_from_slice(key.as_bytes());
                item.push(0);
                item.extend_from_slice(&(i as u64).to_be_bytes());
                item.extend_from_slice(&staged.hash);
                keys.push(&item)?;
            }
        }
        let (mut changed, mut removed) = (vec![false; ledger.len() as usize], BTreeSet::new());
        let mut new = keys.finish()?.map(|item| item.map(|item| split_item(&item))).peekable();
        for block in 0..reader.root().blocks.len() {
            for entry in reader.block(block)?.iter() {
                let mut found = false;
                while let Some(next) = new.peek() {
                    let order = match next {
                        Ok((key, ..)) => key.as_slice().cmp(entry.key.as_bytes()),
                        Err(_) => return Err(new.next().and_then(Result::err).expect("an error")),
                    };
                    if order.is_gt() {
                        break;
                    }
                    let (_, i, hash) = new.next().expect("peeked")?;
                    changed[i] |= order.is_lt() || hash != entry.hash;
                    found |= order.is_eq();
                }
                if !found {
                    removed.insert(entry.key.clone());
                }
            }
            // one block held at a time: the directory of a large archive is never held whole
            reader.forget_blocks();
        }
        for rest in new {
            changed[rest?.1] = true;
        }
        if !changed.contains(&true) && removed.is_empty() {
            return Ok(Written::default());
        }
        let mut puts = Ledger::create(spool.scratch("puts"))?;
        for (staged, changed) in ledger.records()?.zip(changed) {
            if changed {
                puts.push(&staged?)?;
            }
        }
        drop(ledger);
        apply(dir, &reader, &spool, puts, &removed, options)
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
        let Spooled { spool, ledger } = self.spool.into_inner().expect("no panic while spooling");
        if ledger.len() == 0 && removed.is_empty() {
            return Ok(Written::default());
        }
        let reader = Reader::open(Folder(dir.to_path_buf()))?;
        apply(dir, &reader, &spool, ledger, removed, options)
    }
}

impl Spooled {
    /// Records the document just spooled in the ledger, with the media type its first key takes.
    fn record(&mut self, keys: Vec<String>, receipt: Receipt, hash: [u8; 32]) -> Result<(), Error> {
        let media_type = keys.first().map_or("application/octet-stream", |k| crate::tree::media_type(k)).to_string();
        let Receipt { at, length, size } = receipt;
        self.ledger.push(&Staged { keys, hash, size, media_type, source: Source::Spool(at), length })
    }
}

/// A sorted key of [`Stream::edit`]: the key, its document's position in the ledger, its hash.
fn split_item(item: &[u8]) -> (Vec<u8>, usize, [u8; 32]) {
    let (key, rest) = item.split_at(item.len() - 41);
    let at = u64::from_be_bytes(rest[1..9].try_into().expect("8 bytes")) as usize;
    (key.to_vec(), at, rest[9..].try_into().expect("32 bytes"))
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
