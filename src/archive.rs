//! The archive (issue 49, docs/archive.md): the built API's documents in a few content-named,
//! immutable parts and one small root, read by byte ranges. A record takes at most two range
//! reads cold (its directory block, then the document) and one warm; an edit writes a part with
//! the documents it changed, a part with the directory blocks it changed, and a new root.
//!
//! - [`write`] writes a fresh archive from documents given in any order, deterministically;
//! - [`edit`] applies changes to an archive at the cost of the change (merging when deltas pile
//!   up past [`Options::merge_after`]);
//! - [`Reader`] finds a key over any [`RangeSource`] ([`Folder`] for a local folder), checks
//!   every byte it returns, and counts the reads it made;
//! - [`prune`] deletes the parts named by neither the root nor the previous one.

mod codec;
mod diff;
mod format;
mod full;
mod ledger;
mod place;
mod prune;
mod read;
mod sort;
mod stream;
mod write;

use std::fmt;
use std::io;

pub use diff::{BlockAt, RootFiles, block_keys, changed_keys};
pub use place::Written;
pub use prune::{Pruned, prune};
pub use read::{DEFAULT_BLOCK_CACHE, Folder, Found, RangeSource, Reader};
pub use write::{edit, write};

pub(crate) use stream::{Receipt, Stream, totals};

/// The file every reader opens first: the commit point, replaced last by a write or an edit.
pub(crate) const ROOT_FILE: &str = "root";

/// The root a commit replaced, kept beside `root` so that [`prune`] leaves its parts for the
/// readers still on it (docs/archive.md, "Pruning").
pub const PREVIOUS_ROOT_FILE: &str = "root.previous";

/// The file a write fills a part through before renaming it to its name: a write killed midway
/// leaves it, and [`prune`] removes it (docs/archive.md, "Writing").
pub(crate) const FILLING: &str = "parts/.filling";

/// The key of a built archive's manifest: the tree's `manifest.json` (its settings and
/// resources) with no files listed, since the archive's directory is its listing
/// (docs/archive.md, "A built API as an archive").
pub const MANIFEST_KEY: &str = "manifest.json";

/// True when `dir` holds an archive (a `root` file) and not a tree (no `manifest.json`).
pub fn is_archive(dir: &std::path::Path) -> bool {
    dir.join(ROOT_FILE).is_file() && !dir.join(MANIFEST_KEY).exists()
}

/// The file name of the part named by the BLAKE3 hash `name`, relative to the archive's folder.
pub fn part_file(name: &[u8; 32]) -> String {
    format!("parts/{}", codec::hex(name))
}

/// One document to store: its bytes (uncompressed), the keys it answers to (its paths: by id
/// and by name, say), and the media type a host sends it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// The keys it is found under; at least one.
    pub keys: Vec<String>,
    /// The document as a client receives it, decompressed.
    pub bytes: Vec<u8>,
    /// The media type a host sends it with.
    pub(crate) media_type: String,
}

impl Document {
    /// A document under `keys`, with the media type the tree's hosts give its first key
    /// ([`crate::tree::media_type`]).
    pub fn new(keys: Vec<String>, bytes: Vec<u8>) -> Document {
        let media_type = keys.first().map_or("application/octet-stream", |k| crate::tree::media_type(k)).to_string();
        Document { keys, bytes, media_type }
    }
}

/// One change an [`edit`] applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The document under its keys, added or replacing what they held.
    Put(Document),
    /// The key no longer answers (its document stays for its other keys).
    Remove(String),
}

/// The bounds a write keeps (docs/archive.md, "Writing").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A part is cut before a document or a block would take it past this many bytes.
    pub part_bytes: u64,
    /// A directory block holds at most this many entries.
    pub block_entries: usize,
    /// An edit is written as a full write when the archive already has this many edits since
    /// its last full write (or when its delta parts outweigh half of its other parts).
    pub merge_after: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options { part_bytes: 64 << 20, block_entries: 1024, merge_after: 16 }
    }
}

/// Why an archive could not be read or written. A reader returns this rather than bytes it
/// could not check.
#[derive(Debug)]
pub enum Error {
    /// A file could not be read or written.
    Io {
        /// The file, relative to the archive.
        file: String,
        /// What the system said.
        source: io::Error,
    },
    /// The root names a part that is not there.
    Missing {
        /// The part's file.
        file: String,
    },
    /// A file ends before the bytes the root or a block says are there.
    Truncated {
        /// The file.
        file: String,
        /// Where the read started.
        offset: u64,
        /// How many bytes were expected, and how many came.
        wanted: u64,
        /// How many bytes came.
        got: u64,
    },
    /// Bytes that are not what the root or a block names: damaged, or not this format.
    Damaged {
        /// The file.
        file: String,
        /// Where the bad bytes start.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The documents or changes given cannot be written (a key given to two documents).
    Input(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { file, source } => write!(f, "archive file {file}: {source}"),
            Error::Missing { file } => {
                write!(f, "archive part {file} is missing: the root names it; publish or copy the whole archive again")
            }
            Error::Truncated { file, offset, wanted, got } => write!(
                f,
                "archive file {file} is truncated: {wanted} bytes wanted at byte {offset}, {got} there; write the archive again"
            ),
            Error::Damaged { file, offset, what } => {
                write!(f, "archive file {file} is damaged at byte {offset}: {what}; write the archive again")
            }
            Error::Input(what) => write!(f, "cannot write the archive: {what}"),
        }
    }
}

impl std::error::Error for Error {}
