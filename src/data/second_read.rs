//! The second read of a data file. The load reads each record and sub-document (a file, or a
//! line of a table), hashes it and records the hash in the index; the extract and the render
//! read it again, as the dataset holds no record's bytes (docs/builds.md, "What bounds a
//! build's memory"). That second read opens the file by the load's rules (a regular file only,
//! type checked before and after a non-blocking open, at most `max_document_mb`), and its bytes
//! must hash to what the load recorded: otherwise the file changed while the build read it, and
//! the build fails rather than publish bytes the index does not describe, which every later
//! build would trust (docs/builds.md, "A file changed during a build").

use crate::fsutil::NotRead;
use crate::problem::Problem;
use std::collections::BTreeMap;
use std::path::Path;

/// The first 8 bytes of a BLAKE3 hash: what a second read is checked against (a chance change
/// keeps them with odds of 2^-64; the index keeps the whole hash). 8, not 16: they are held for
/// every record, and a change made on purpose needs no collision (whoever can write the data
/// writes what they like).
pub(crate) type Short = [u8; 8];

/// The first 8 bytes of `hash`.
pub(crate) fn short(hash: &[u8; 32]) -> Short {
    hash[..8].try_into().expect("8 of 32 bytes")
}

/// The hash the load recorded of each record's and sub-document's data, by its place in the
/// dataset: 9 bytes a record and a sub-document, 4 more a record of a resource with
/// sub-documents. Made once the previous build's data table is let go, so that it never adds to
/// the load's peak (a build that finds the data unchanged never makes it).
#[derive(Debug, Default)]
pub(crate) struct LoadedHashes {
    pub(crate) resources: BTreeMap<String, ResourceHashes>,
}

/// One resource's hashes, in the order of its records.
#[derive(Debug, Default)]
pub(crate) struct ResourceHashes {
    /// Each record's, by its position in the list.
    pub(crate) records: Vec<Option<Short>>,
    /// Each record's sub-documents', in order, one record after the other.
    pub(crate) subdocs: Vec<Option<Short>>,
    /// The position in `subdocs` of each record's first sub-document (empty when the
    /// resource has none).
    pub(crate) first: Vec<u32>,
}

impl LoadedHashes {
    /// The hash recorded of the record at `position` in the list of `segment`.
    pub(crate) fn record(&self, segment: &str, position: usize) -> Option<Short> {
        *self.resources.get(segment)?.records.get(position)?
    }

    /// The hash recorded of the sub-document `subdoc` (its position among its record's) of the
    /// record at `position` in the list of `segment`.
    pub(crate) fn subdoc(&self, segment: &str, position: usize, subdoc: usize) -> Option<Short> {
        let hashes = self.resources.get(segment)?;
        *hashes.subdocs.get(*hashes.first.get(position)? as usize + subdoc)?
    }
}

/// How a second read of a source is held to the first: the size limit the load read it with,
/// and the hash of the bytes it read (`None` where there is none to check against, as in
/// `gen check`, which keeps no index).
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    /// At most this many bytes (`max_document_mb`).
    pub(crate) limit: u64,
    /// The first bytes of the hash the load recorded.
    pub(crate) hash: Option<Short>,
}

/// What a second read found, as the problem it is, at `at`: the source changed since the load
/// read it (or since the listing found it as the previous build recorded it).
pub(crate) fn changed(at: &Path, why: &str) -> Problem {
    Problem::new(at, "-", format!("changed while the build read it{why}: run the build again"))
}

/// Why the second read of a file found nothing it could read, as [`changed`] says it.
pub(crate) fn not_read(at: &Path, limit: u64, why: NotRead) -> Problem {
    match why {
        NotRead::NotRegular(kind) => {
            changed(at, &format!(" (it is now {kind}, not a regular file: data is read only from regular files)"))
        }
        NotRead::TooLarge(_) => changed(at, &format!(" (it is now larger than the {} MB limit)", limit >> 20)),
        NotRead::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => changed(at, " (it is now shorter)"),
        NotRead::Io(e) => changed(at, &format!(" (it cannot be read now: {e})")),
    }
}

/// Checks the bytes of a second read against what the load hashed.
pub(crate) fn check(at: &Path, bytes: &[u8], expected: Expected) -> Result<(), Problem> {
    match expected.hash {
        Some(hash) if short(blake3::hash(bytes).as_bytes()) != hash => {
            Err(changed(at, " (its bytes are not those the build loaded)"))
        }
        _ => Ok(()),
    }
}
