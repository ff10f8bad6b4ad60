//! What the serve cache holds, and under which key: a response body prepared for every way it
//! is sent ([`Doc`]), or a list's entries ([`List`]). Its own file, below both the cache and
//! the tree that fills it, so that neither imports the other's types.

use crate::paging::Page;
use std::sync::{Arc, OnceLock};

/// What an entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// A file of the tree, by its hash.
    Doc([u8; 32]),
    /// The entries of a list, by the hash of its `_pages/all` file and that file's path.
    List([u8; 32]),
    /// A page computed from that list.
    Page([u8; 32], Page),
    /// A `?q=` page: the BLAKE3 hash of the names document's and the list's hashes, the page
    /// and the search text.
    Search([u8; 32]),
}

/// A cached value.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    /// A document.
    Doc(Arc<Doc>),
    /// A list's entries.
    List(Arc<List>),
}

/// One response body, prepared for every way it is sent.
#[derive(Debug)]
pub struct Doc {
    /// The bytes sent.
    pub body: Vec<u8>,
    /// The body gzip-compressed (when that is smaller), once a client has asked for it.
    pub(super) gzip: OnceLock<Option<Vec<u8>>>,
    /// Strong ETag of the body: its BLAKE3 hash, quoted.
    pub(crate) etag: String,
    /// ETag of the gzip-encoded representation (a different representation needs its own
    /// strong validator): the same hash with `-gz`.
    pub(crate) etag_gzip: String,
    /// Its key in the cache, to count its gzip body there once it is compressed.
    pub(super) cached_as: Option<Key>,
    /// For a body the cache does not hold: its bytes in the budget of answers in flight,
    /// given back when the last answer sending it is done.
    pub(super) in_flight: Option<super::budget::Permit>,
}

impl Doc {
    /// Prepares a body whose BLAKE3 hash is `hash` (compressed later, see [`Doc::compress`]).
    pub(crate) fn new(body: Vec<u8>, hash: &blake3::Hash) -> Doc {
        let hash = hash.to_hex();
        let (etag, etag_gzip) = (format!("\"{hash}\""), format!("\"{hash}-gz\""));
        Doc { body, gzip: OnceLock::new(), etag, etag_gzip, cached_as: None, in_flight: None }
    }

    /// Prepares a body whose BLAKE3 hash is `hash` with `stored`, its gzip member as an archive
    /// stores it, as its gzip body when the tree's would be sent so (see [`Doc::compress`]): the
    /// archive and the tree compress alike (deterministic gzip, level 6), so they are the same
    /// bytes.
    pub(crate) fn with_gzip(body: Vec<u8>, hash: &blake3::Hash, stored: Vec<u8>) -> Doc {
        let doc = Doc::new(body, hash);
        let gzip = (doc.body.len() >= MIN_GZIP && stored.len() < doc.body.len()).then_some(stored);
        let _ = doc.gzip.set(gzip);
        doc
    }

    /// Prepares a body computed here (hashed here).
    pub(crate) fn computed(body: Vec<u8>) -> Doc {
        let hash = blake3::hash(&body);
        Doc::new(body, &hash)
    }

    /// The gzip-compressed body, once compressed, when it is smaller than the body.
    pub(crate) fn gzip(&self) -> Option<&[u8]> {
        self.gzip.get().and_then(|gz| gz.as_deref())
    }

    /// Compresses the body, once; the bytes this call added (0 when it was done before).
    pub(crate) fn compress(&self) -> usize {
        let mut added = 0;
        self.gzip.get_or_init(|| {
            let gz = (self.body.len() >= MIN_GZIP).then(|| gzip(&self.body)).filter(|gz| gz.len() < self.body.len());
            added = gz.as_ref().map_or(0, Vec::len);
            gz
        });
        added
    }

    /// Bytes held: the body and its gzip.
    pub(super) fn bytes(&self) -> usize {
        self.body.len() + self.gzip().map_or(0, <[u8]>::len)
    }
}

/// Bodies shorter than this are not worth compressing.
const MIN_GZIP: usize = 200;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut compressed = crate::fsutil::gzip_bytes(bytes, flate2::Compression::default());
    compressed.shrink_to_fit(); // held in the cache: no slack
    compressed
}

/// The entries of one resource's list, each serialised as it appears inside a page, end to end
/// in one buffer.
#[derive(Debug)]
pub(crate) struct List {
    /// The list url, `<base_url>/api/v2/<segment>/`.
    pub(super) url: String,
    pub(super) entries: Vec<u8>,
    /// Where each entry ends in `entries`.
    pub(super) ends: Vec<usize>,
    /// The SHA-256 (hex) of the `_pages/all` file, once a search has checked a names document
    /// against it (see [`crate::search::ListStamp`]).
    pub(super) sha256: OnceLock<String>,
}

impl List {
    pub(super) fn count(&self) -> u64 {
        self.ends.len() as u64
    }

    pub(super) fn entry(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.entries[start..self.ends[i]]
    }

    pub(super) fn bytes(&self) -> usize {
        self.entries.len() + self.ends.len() * std::mem::size_of::<usize>() + self.url.len()
    }
}
