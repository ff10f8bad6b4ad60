//! The served tree's files: which paths the manifest lists (a compact index, about 48 bytes a
//! path), and reading one of them without following a link.

use crate::tree::manifest::MANIFEST_FILE;
use anyhow::{Result, bail};
use std::io;
use std::path::Path;

/// Largest document read (1 GiB): the whole list of a resource of millions of records is tens
/// of MB.
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 1 << 30;

/// The files the manifest lists that the server serves, each by a 128-bit hash of its path with
/// the BLAKE3 hash of its bytes, sorted: no string per path, so that the millions of files of a
/// large tree fit in a few hundred MB.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    entries: Vec<(u128, [u8; 32])>,
}

impl Listing {
    /// An empty listing with room for about `capacity` files.
    pub(crate) fn with_capacity(capacity: usize) -> Listing {
        Listing { entries: Vec::with_capacity(capacity) }
    }

    /// Adds a path (call [`Listing::finish`] once every path is in).
    pub(crate) fn push(&mut self, path: &str, hash: blake3::Hash) {
        self.entries.push((path_key(path), *hash.as_bytes()));
    }

    /// Sorts the listing for lookups. A path listed twice (which no build writes) is an error,
    /// which tells that path from the others ([`ListedTwice::is`]).
    pub(crate) fn finish(&mut self) -> Result<(), ListedTwice> {
        use rayon::slice::ParallelSliceMut as _;
        self.entries.par_sort_unstable_by_key(|(key, _)| *key);
        match self.entries.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            Some(pair) => Err(ListedTwice(pair[0].0)),
            None => Ok(()),
        }
    }

    /// The hash the manifest gives `path`, when it lists it.
    pub(crate) fn hash_of(&self, path: &str) -> Option<blake3::Hash> {
        let key = path_key(path);
        let at = self.entries.binary_search_by_key(&key, |(key, _)| *key).ok()?;
        Some(blake3::Hash::from_bytes(self.entries[at].1))
    }

    /// Number of files listed.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// A path a manifest lists twice (the listing keeps no path, only its key: the caller finds
/// which by reading the manifest again).
#[derive(Debug)]
pub(crate) struct ListedTwice(u128);

impl ListedTwice {
    /// True when `path` is the path listed twice.
    pub(crate) fn is(&self, path: &str) -> bool {
        path_key(path) == self.0
    }
}

/// A path's key in a [`Listing`]: 128 bits of its BLAKE3 hash (two paths of a tree never share
/// one by accident).
fn path_key(path: &str) -> u128 {
    let hash = blake3::hash(path.as_bytes());
    u128::from_le_bytes(hash.as_bytes()[..16].try_into().expect("16 bytes"))
}

/// Why a listed file cannot be served.
#[derive(Debug)]
pub(crate) enum Unservable {
    /// Missing, a link, not a regular file, or unreadable.
    NotRead(String),
    /// Its bytes do not hash to what the manifest says.
    Changed,
}

impl Unservable {
    /// The error for the file at `path` in `dir`, with what to do.
    pub(crate) fn explain(&self, dir: &Path, path: &str) -> String {
        let file = dir.join(path);
        match self {
            Unservable::NotRead(why) => format!(
                "{} is listed in {MANIFEST_FILE} but is missing or not a regular file (links are not followed): \
                 {why}; repair the tree with `gen build --verify`",
                file.display()
            ),
            Unservable::Changed => format!(
                "{} does not match its hash in {MANIFEST_FILE} (a build replaced the tree while it was read, or the \
                 file was edited: repair the tree with `gen build --verify`)",
                file.display()
            ),
        }
    }
}

/// The bytes of the listed file `path` (a tree path, checked by the manifest's reader) in
/// `dir`, when they hash to `hash`. Every folder on the way is opened relative to the one above
/// without following links, and so is the file, which must be a regular file of at most
/// [`MAX_DOCUMENT_BYTES`].
pub(crate) fn read_listed(dir: &Path, path: &str, hash: &blake3::Hash) -> Result<Vec<u8>, Unservable> {
    let bytes = read_no_follow(dir, path).map_err(|e| Unservable::NotRead(e.to_string()))?;
    if blake3::hash(&bytes) != *hash {
        return Err(Unservable::Changed);
    }
    Ok(bytes)
}

/// Checks the listed file `path` against `hash` as [`read_listed`] does, reading it a piece at a
/// time (a bulk-data file is never held whole).
fn check_streamed(dir: &Path, path: &str, hash: &blake3::Hash) -> Result<(), Unservable> {
    let not_read = |e: &dyn std::fmt::Display| Unservable::NotRead(e.to_string());
    let tree = crate::tree::dir::TreeDir::open(dir).map_err(|e| not_read(&e))?;
    let file = tree.open_file(path, MAX_DOCUMENT_BYTES).map_err(|e| not_read(&e))?;
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(file).map_err(|e| not_read(&e))?;
    if hasher.finalize() != *hash {
        return Err(Unservable::Changed);
    }
    Ok(())
}

fn read_no_follow(dir: &Path, path: &str) -> io::Result<Vec<u8>> {
    let tree = crate::tree::dir::TreeDir::open(dir).map_err(io::Error::other)?;
    tree.read_file(path, MAX_DOCUMENT_BYTES)
}

/// Checks the listed file `path` against `hash` as [`read_listed`] does, without keeping it.
fn check_one(dir: &Path, path: &str, hash: &blake3::Hash) -> Result<(), Unservable> {
    match crate::tree::layout::is_bulk_file(path) {
        true => check_streamed(dir, path, hash),
        false => read_listed(dir, path, hash).map(drop),
    }
}

/// Reads every listed file of `listing` and checks it against its hash, across all cores,
/// keeping nothing: a tree that does not match its manifest is refused whole. `paths` are the
/// listed paths (the caller checks only small trees so: reading every file costs the whole
/// tree's bytes).
pub(crate) fn check_all(dir: &Path, paths: &[(String, blake3::Hash)]) -> Result<()> {
    use rayon::prelude::*;
    let bad = paths.par_iter().find_map_any(|(path, hash)| check_one(dir, path, hash).err().map(|e| (path, e)));
    if let Some((path, e)) = bad {
        bail!("{}", e.explain(dir, path));
    }
    Ok(())
}

/// Every file of `paths` that does not match its hash as [`read_listed`] reads it (missing, a
/// link, not a regular file, edited), sorted by path: [`check_all`] that finds them all.
pub(crate) fn damaged(dir: &Path, paths: &[(String, blake3::Hash)]) -> Vec<(String, Unservable)> {
    use rayon::prelude::*;
    let mut bad: Vec<(String, Unservable)> = paths
        .par_iter()
        .filter_map(|(path, hash)| check_one(dir, path, hash).err().map(|e| (path.clone(), e)))
        .collect();
    bad.sort_by(|a, b| a.0.cmp(&b.0));
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_finds_what_was_pushed_and_refuses_a_path_listed_twice() {
        let mut listing = Listing::default();
        let (a, b, c) = (blake3::hash(b"a"), blake3::hash(b"b"), blake3::hash(b"c"));
        listing.push("api/v2/y/index.json", b);
        listing.push("api/v2/x/index.json", a);
        listing.finish().unwrap();
        assert_eq!(listing.len(), 2);
        assert_eq!(listing.hash_of("api/v2/x/index.json"), Some(a));
        assert_eq!(listing.hash_of("api/v2/y/index.json"), Some(b));
        assert_eq!(listing.hash_of("api/v2/z/index.json"), None);
        listing.push("api/v2/x/index.json", c);
        let twice = listing.finish().unwrap_err();
        assert!(twice.is("api/v2/x/index.json") && !twice.is("api/v2/y/index.json"));
    }

    #[test]
    fn reads_refuse_links_and_changed_bytes() {
        let dir = std::env::temp_dir().join(format!("gen-files-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("api/v2/x")).unwrap();
        std::fs::write(dir.join("api/v2/x/index.json"), b"{}").unwrap();
        std::fs::write(dir.join("outside.json"), b"{}").unwrap();
        std::os::unix::fs::symlink(dir.join("outside.json"), dir.join("api/v2/link.json")).unwrap();
        std::os::unix::fs::symlink(dir.join("api/v2/x"), dir.join("api/v2/y")).unwrap();
        let hash = blake3::hash(b"{}");
        assert_eq!(read_listed(&dir, "api/v2/x/index.json", &hash).unwrap(), b"{}");
        assert!(matches!(read_listed(&dir, "api/v2/link.json", &hash), Err(Unservable::NotRead(_))));
        assert!(matches!(read_listed(&dir, "api/v2/y/index.json", &hash), Err(Unservable::NotRead(_))));
        assert!(matches!(read_listed(&dir, "api/v2/z/index.json", &hash), Err(Unservable::NotRead(_))));
        let other = blake3::hash(b"[]");
        assert!(matches!(read_listed(&dir, "api/v2/x/index.json", &other), Err(Unservable::Changed)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
