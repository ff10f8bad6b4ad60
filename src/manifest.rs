//! The manifest: `out/manifest.json`, what a built tree holds. `gen serve` and the host
//! configs read it; comparing two manifests shows what a deploy will change.

use crate::paging::LinkStyle;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// File name of the manifest, at the top of the output folder (beside `api/`).
pub const MANIFEST_FILE: &str = "manifest.json";

/// The program and version, as written into trees.
pub const GENERATOR: &str = concat!("gen ", env!("CARGO_PKG_VERSION"));

/// Version of the manifest's format.
pub const FORMAT: u32 = 1;

/// Largest `manifest.json` read (1 GiB): a tree of a million records has a manifest of a few
/// hundred MB. The limit of a commit's journal too (it lists at most every file of a tree).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// True when `path` has the shape of a path a build writes: `/`-separated segments of
/// `[a-z0-9._-]`, none empty or made of dots only. The server and the host configurations
/// read only such paths of a manifest, so that no manifest can lead them outside the tree.
pub fn is_tree_path(path: &str) -> bool {
    path.split('/').all(|part| {
        let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b);
        !part.is_empty() && part.bytes().all(allowed) && !part.bytes().all(|b| b == b'.')
    })
}

/// The error for a `manifest.json` that is not a regular file of at most
/// [`MAX_MANIFEST_BYTES`]: what it is, and what to do.
pub(crate) fn not_read_manifest(path: &Path, e: &crate::fsutil::NotRead) -> String {
    format!(
        "{}: gen reads its manifest only from a regular file of at most {} MB; delete it and rebuild with `gen build`",
        crate::fsutil::why_not_read(path, MAX_MANIFEST_BYTES, e),
        MAX_MANIFEST_BYTES >> 20
    )
}

/// Everything a tree's bytes are decided by: the program, the options and the data's hash. Two
/// trees with equal settings have the same bytes, so "same build" is equality of this type.
/// The manifest embeds it (its fields sit at the manifest's top level); the renderer reads its
/// options from it; the meta document shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeSettings {
    /// Version of the manifest's format.
    pub format: u32,
    /// The program and version that built the tree.
    pub generator: String,
    /// Base URL every url of the tree starts with (no trailing slash).
    pub base_url: String,
    /// How list pages link to each other.
    pub links: LinkStyle,
    /// Whether documents are indented.
    pub pretty: bool,
    /// Whether every document has a precompressed `.gz` sibling.
    pub gzip: bool,
    /// Page sizes whose pages are precomputed (the default limit, 20, always among them).
    pub page_sizes: Vec<u64>,
    /// Hash of the data the tree was built from.
    pub data_hash: String,
    /// Build date recorded in the meta document (from `SOURCE_DATE_EPOCH`), if any.
    pub built_at: Option<String>,
}

impl TreeSettings {
    /// True when trees built with `self` and `other` from the same data have the same bytes:
    /// equal in everything but the data's hash.
    pub fn same_options(&self, other: &TreeSettings) -> bool {
        TreeSettings { data_hash: String::new(), ..self.clone() }
            == TreeSettings { data_hash: String::new(), ..other.clone() }
    }

    /// The settings a manifest's bytes state, when they are a manifest gen wrote (recognised by
    /// its own fields, not its file name: a web app's `manifest.json` is not one). Only the
    /// settings are built; the list of files is skipped.
    pub fn from_manifest_bytes(bytes: &[u8]) -> Option<TreeSettings> {
        let settings: TreeSettings = serde_json::from_slice(bytes).ok()?;
        let ours = settings.generator.starts_with("gen ")
            && settings.data_hash.len() == 64
            && settings.data_hash.bytes().all(|b| b.is_ascii_hexdigit());
        ours.then_some(settings)
    }
}

/// What a built tree holds: the settings it was built with, its resources and its files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    #[serde(flatten)]
    pub settings: TreeSettings,
    /// Each resource's segment and entry count.
    pub resources: BTreeMap<String, ResourceInfo>,
    /// Every file of the tree (path relative to the output folder, `/`-separated) with the
    /// BLAKE3 hash of its bytes. `.gz` siblings and the manifest itself are not listed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}

/// What the manifest says of one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceInfo {
    /// Number of records in its list.
    pub count: u64,
}

impl Manifest {
    /// Reads the manifest of the tree in `dir`.
    pub fn read(dir: &Path) -> Result<Manifest> {
        Manifest::read_with_bytes(dir).map(|(_, manifest)| manifest)
    }

    /// Reads the manifest of the tree in `dir`: its bytes (to tell a new build from the one in
    /// hand) and what they say. Errors say what to do: build, or point at a built tree.
    pub fn read_with_bytes(dir: &Path) -> Result<(Vec<u8>, Manifest)> {
        let shown = crate::fsutil::show_dir(dir);
        if !dir.is_dir() {
            anyhow::bail!(
                "no tree in {shown}: {}; run `gen build` first, or point --dir at a built tree",
                if dir.exists() { "it is not a folder" } else { "the folder does not exist" }
            );
        }
        let path = dir.join(MANIFEST_FILE);
        let bytes = match crate::fsutil::read_regular_file(&path, MAX_MANIFEST_BYTES) {
            Ok(bytes) => bytes,
            Err(crate::fsutil::NotRead::Io(e)) => {
                return Err(e).with_context(|| {
                    format!("no tree in {shown}: {} cannot be read; run `gen build` first", path.display())
                });
            }
            Err(e) => anyhow::bail!("{}", not_read_manifest(&path, &e)),
        };
        let manifest = Manifest::from_bytes(&bytes).with_context(|| {
            format!("{} is not a manifest written by gen: rebuild with `gen build`", path.display())
        })?;
        if manifest.settings.format != FORMAT {
            anyhow::bail!(
                "{} has format {}, this gen reads format {FORMAT}: rebuild with this version's `gen build`",
                path.display(),
                manifest.settings.format
            );
        }
        Ok((bytes, manifest))
    }

    /// Parses a manifest: its settings and the rest are read as two views of the same bytes
    /// (each skips what the other holds), so nothing is buffered or spelled out twice.
    pub fn from_bytes(bytes: &[u8]) -> serde_json::Result<Manifest> {
        #[derive(Deserialize)]
        struct Rest {
            resources: BTreeMap<String, ResourceInfo>,
            #[serde(default)]
            files: BTreeMap<String, String>,
        }
        let settings: TreeSettings = serde_json::from_slice(bytes)?;
        let Rest { resources, files } = serde_json::from_slice(bytes)?;
        Ok(Manifest { settings, resources, files })
    }

    /// The manifest as written to disk: pretty, keys in a stable order, trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest always serialises");
        bytes.push(b'\n');
        bytes
    }

    /// The bytes of this manifest (whose `files` is empty) with `files` listing the given paths
    /// and hashes, sorted by path: the same bytes as [`Manifest::to_bytes`] with those files,
    /// without building a map of them (a tree of millions of files would need gigabytes).
    pub fn to_bytes_listing(&self, files: &mut [(&str, blake3::Hash)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_listing(files, &mut bytes).expect("writing to memory cannot fail");
        bytes
    }

    /// Writes what [`Manifest::to_bytes_listing`] returns to `out`, without holding it in memory.
    pub fn write_listing(&self, files: &mut [(&str, blake3::Hash)], out: impl std::io::Write) -> std::io::Result<()> {
        files.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.write_sorted_listing(files.iter().map(|(path, hash)| (*path, *hash)), out)
    }

    /// Writes this manifest (whose `files` is empty) with `files` listing the given paths and
    /// hashes, which come sorted by path: the files of a large tree are never all in memory.
    pub fn write_sorted_listing<P: AsRef<str>>(
        &self,
        files: impl Iterator<Item = (P, blake3::Hash)>,
        out: impl std::io::Write,
    ) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        let listing = WithFiles { head: self, files: FileStream { files: std::cell::RefCell::new(Some(files)) } };
        serde_json::to_writer_pretty(&mut out, &listing)?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// `head`'s fields, then `files`, written as they come.
#[derive(Serialize)]
#[serde(bound(serialize = "H: Serialize, F: Serialize"))]
struct WithFiles<'a, H, F> {
    #[serde(flatten)]
    head: &'a H,
    files: F,
}

/// A map of path to hash written from an iterator, once.
struct FileStream<I> {
    files: std::cell::RefCell<Option<I>>,
}

impl<P: AsRef<str>, I: Iterator<Item = (P, blake3::Hash)>> Serialize for FileStream<I> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let files = self.files.borrow_mut().take().into_iter().flatten();
        serializer.collect_map(files.map(|(path, hash)| (path.as_ref().to_string(), Hex(hash))))
    }
}

/// A BLAKE3 hash as the manifest writes it: hex.
struct Hex(blake3::Hash);

impl Serialize for Hex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.to_hex().as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_written_from_a_list_are_the_bytes_of_the_map() {
        let hashes = [blake3::hash(b"a"), blake3::hash(b"b"), blake3::hash(b"c")];
        let mut manifest = Manifest {
            settings: TreeSettings {
                format: FORMAT,
                generator: "gen test".into(),
                base_url: "http://x".into(),
                links: LinkStyle::Query,
                pretty: false,
                gzip: false,
                page_sizes: vec![20],
                data_hash: "d".into(),
                built_at: None,
            },
            resources: BTreeMap::from([("berry".to_string(), ResourceInfo { count: 2 })]),
            files: BTreeMap::new(),
        };
        let mut list = vec![("b/index.json", hashes[1]), ("a/index.json", hashes[0]), ("c.json", hashes[2])];
        let streamed = manifest.to_bytes_listing(&mut list);
        for (path, hash) in &list {
            manifest.files.insert(path.to_string(), hash.to_hex().to_string());
        }
        assert_eq!(String::from_utf8(streamed).unwrap(), String::from_utf8(manifest.to_bytes()).unwrap());
        let read = Manifest::from_bytes(&manifest.to_bytes()).unwrap();
        assert_eq!(read, manifest);
    }
}
