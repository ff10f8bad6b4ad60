//! Writing the build index in two parts: the data table as soon as the build has no more use
//! for it (a million records' table is about a hundred MB, then no longer held), the documents'
//! table and the head once the tree is committed; in the state folder beside the tree, then renamed
//! into place.

use super::Index;
use crate::build::state;
use crate::data::recorded::DataFiles;
use crate::data::recorded::codec::Checksummed;
use crate::fsutil;
use anyhow::{Context, Result};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// An index being written: its data table is in the temporary file. Dropped unfinished, the
/// temporary file is removed (the index in place is left as it was).
pub(crate) struct IndexWriter {
    temporary: PathBuf,
    path: PathBuf,
    out: Option<BufWriter<Checksummed<std::fs::File>>>,
}

impl IndexWriter {
    /// Starts the index of the tree in `out` with the data table `data`.
    pub(crate) fn begin(out: &Path, data: &DataFiles) -> Result<IndexWriter> {
        // One writer at a time (the build holds the lock on the tree): a fixed name, so that a
        // killed build's leftover is simply replaced by the next one.
        let temporary = state::temporary(out, state::INDEX);
        let mut writer = IndexWriter { temporary, path: Index::path(out), out: None };
        state::ensure(out).with_context(|| writer.failed())?;
        let file = fsutil::create_new(&writer.temporary)?;
        // Buffered before the checksum, so that it is taken of large blocks.
        let mut buffered = BufWriter::with_capacity(1 << 20, Checksummed::new(file));
        Index::encode_data(data, &mut buffered).with_context(|| writer.failed())?;
        writer.out = Some(buffered);
        Ok(writer)
    }

    /// Ends the index with the documents and head of `index` (its data table is the one begun
    /// with), and puts it in place.
    pub(crate) fn finish(mut self, index: &Index) -> Result<()> {
        let mut out = self.out.take().expect("an index is finished once");
        let written = (|| -> std::io::Result<()> {
            index.encode_rest(&mut out)?;
            let (mut file, sum) = out.into_inner().map_err(|e| e.into_error())?.finish();
            file.write_all(sum.as_bytes())
        })();
        let done = written.and_then(|()| std::fs::rename(&self.temporary, &self.path)).with_context(|| self.failed());
        if done.is_err() {
            let _ = std::fs::remove_file(&self.temporary);
        }
        done
    }

    fn failed(&self) -> String {
        format!("cannot write the build index {}", self.path.display())
    }
}

impl Drop for IndexWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}
