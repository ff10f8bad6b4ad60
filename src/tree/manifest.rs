//! The manifest: `out/manifest.json`, what a built tree holds. `gen serve` and the host
//! configs read it; comparing two manifests shows what a deploy will change.

use crate::config::DeployHeaders;
use crate::paging::LinkStyle;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// File name of the manifest, at the top of the output folder (beside `api/`).
pub(crate) const MANIFEST_FILE: &str = "manifest.json";

pub(crate) use crate::GENERATOR;

/// Version of the manifest's format.
pub(crate) const FORMAT: u32 = 1;

/// Largest `manifest.json` read (1 GiB): a tree of a million records has a manifest of a few
/// hundred MB. The limit of a commit's journal too (it lists at most every file of a tree).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// The error for a `manifest.json` that is not a regular file of at most
/// [`MAX_MANIFEST_BYTES`]: what it is, and what to do.
pub(crate) fn not_read_manifest(path: &Path, e: &crate::fsutil::NotRead) -> String {
    format!(
        "{}: gen reads its manifest only from a regular file of at most {} MB; {REBUILD_ANEW}",
        crate::fsutil::why_not_read(path, MAX_MANIFEST_BYTES, e),
        MAX_MANIFEST_BYTES >> 20
    )
}

/// What repairs a tree whose manifest cannot be read or is not gen's: no build takes over such
/// a folder (it may not be a tree gen built: docs/builds.md), `--verify` neither.
const REBUILD_ANEW: &str = "a build refuses a folder whose manifest it cannot read (`gen build --verify` too, it \
     may not be a tree gen built): empty the folder, or move it away, and run `gen build`";

/// Everything a tree's bytes are decided by: the program, the options and the data's hash. Two
/// trees with equal settings have the same bytes, so "same build" is equality of this type.
/// The manifest embeds it (its fields sit at the manifest's top level); the renderer reads its
/// options from it; the meta document shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSettings {
    /// Version of the manifest's format.
    pub(crate) format: u32,
    /// The program and version that built the tree.
    pub(crate) generator: String,
    /// Base URL every url of the tree starts with (no trailing slash).
    pub base_url: String,
    /// How list pages link to each other.
    pub links: LinkStyle,
    /// Whether documents are indented.
    pub(crate) pretty: bool,
    /// Whether every document has a precompressed `.gz` sibling.
    pub(crate) gzip: bool,
    /// Page sizes whose pages are precomputed (the default limit, 20, always among them).
    pub(crate) page_sizes: Vec<u64>,
    /// Hash of the data the tree was built from.
    pub(crate) data_hash: String,
    /// Build date recorded in the meta document (from `SOURCE_DATE_EPOCH`), if any.
    pub(crate) built_at: Option<String>,
    /// Names of the two headers every host sends with the values below (`gen.json`).
    #[serde(default)]
    pub(crate) deploy_headers: DeployHeaders,
    /// When the tree was deployed, in Unix seconds as the public API writes it ("1786004122"):
    /// `SOURCE_DATE_EPOCH`, else the time of the build that wrote the tree (a rebuild that finds
    /// it up to date keeps it). Meta's `deploy_date`; the value of the date header.
    #[serde(default)]
    pub(crate) deploy_date: String,
    /// BLAKE3 of the data's hash and every other setting but the dates: trees with the same
    /// hash have the same documents (meta's dates aside). Meta's `hash`; the value of the
    /// hash header.
    #[serde(default)]
    pub(crate) hash: String,
    /// The declared filters of each resource that has some (`gen.json`'s `filters`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) filters: BTreeMap<String, Vec<crate::filters::FilterField>>,
    /// Whether the tree holds the bulk-data files (`gen.json`'s `bulk`); false for a tree
    /// written before they existed, so that the next build writes them.
    #[serde(default)]
    pub(crate) bulk: bool,
}

impl BuildSettings {
    /// True when trees built with `self` and `other` from the same data have the same bytes:
    /// equal in everything but the data's hash.
    pub(crate) fn same_options(&self, other: &BuildSettings) -> bool {
        self.without_data() == other.without_data()
    }

    /// True when `other` is these settings but for the deploy date: the same tree, deployed at
    /// another time.
    pub(crate) fn same_but_date(&self, other: &BuildSettings) -> bool {
        BuildSettings { deploy_date: String::new(), ..self.clone() }
            == BuildSettings { deploy_date: String::new(), ..other.clone() }
    }

    /// These settings without what the data and the build's date decide.
    fn without_data(&self) -> BuildSettings {
        BuildSettings { data_hash: String::new(), hash: String::new(), deploy_date: String::new(), ..self.clone() }
    }

    /// Fills in [`BuildSettings::hash`]: BLAKE3 of every other setting but the dates.
    pub(crate) fn with_hash(self) -> BuildSettings {
        let unhashed =
            BuildSettings { hash: String::new(), deploy_date: String::new(), built_at: None, ..self.clone() };
        let bytes = serde_json::to_vec(&unhashed).expect("settings serialise");
        BuildSettings { hash: blake3::hash(&bytes).to_hex().to_string(), ..self }
    }

    /// The deploy header lines (`Name: value`) and the `Access-Control-Expose-Headers` line
    /// naming them, as every host sends them. None for a tree built before deploy headers.
    pub(crate) fn deploy_header_lines(&self) -> Option<[(String, String); 3]> {
        let date_ok = !self.deploy_date.is_empty()
            && self.deploy_date.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit());
        let hash_ok = !self.hash.is_empty() && self.hash.bytes().all(|b| b.is_ascii_hexdigit());
        if !date_ok || !hash_ok || self.deploy_headers.check().is_err() {
            return None;
        }
        let names = &self.deploy_headers;
        Some([
            (names.date.clone(), self.deploy_date.clone()),
            (names.hash.clone(), self.hash.clone()),
            ("Access-Control-Expose-Headers".to_string(), format!("{}, {}", names.date, names.hash)),
        ])
    }

    /// The settings a manifest's bytes state, when they are a manifest gen wrote (recognised by
    /// its own fields, not its file name: a web app's `manifest.json` is not one). Only the
    /// settings are built; the list of files is skipped.
    pub(crate) fn from_manifest_bytes(bytes: &[u8]) -> Option<BuildSettings> {
        let settings: BuildSettings = serde_json::from_slice(bytes).ok()?;
        let ours = settings.generator.starts_with("gen ")
            && settings.data_hash.len() == 64
            && settings.data_hash.bytes().all(|b| b.is_ascii_hexdigit());
        ours.then_some(settings)
    }
}

/// What a built tree holds: the settings it was built with, its resources and its files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// The settings the tree was built with.
    #[serde(flatten)]
    pub settings: BuildSettings,
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
    pub(crate) count: u64,
}

impl Manifest {
    /// Reads the manifest of the tree in `dir`.
    pub fn read(dir: &Path) -> Result<Manifest> {
        Manifest::read_with_bytes(dir).map(|(_, manifest)| manifest)
    }

    /// Reads the manifest of the tree in `dir`: its bytes (to tell a new build from the one in
    /// hand) and what they say. Errors say what to do: build, or point at a built tree.
    pub(crate) fn read_with_bytes(dir: &Path) -> Result<(Vec<u8>, Manifest)> {
        let path = manifest_path(dir)?;
        let bytes = match crate::fsutil::read_regular_file(&path, MAX_MANIFEST_BYTES) {
            Ok(bytes) => bytes,
            Err(e) => return Err(not_read(dir, &path, e)),
        };
        let manifest = Manifest::from_bytes(&bytes).with_context(|| not_ours(&path))?;
        check_format(&path, &manifest.settings)?;
        Ok((bytes, manifest))
    }

    /// Reads the manifest of the tree in `dir` without building its list of files: each listed
    /// file is handed to `on_file` (path, hash) in the order written, and what is returned is
    /// the manifest without files, with the BLAKE3 hash of its bytes (to tell a new build from
    /// the one in hand). The bytes are held once, while they are parsed (parsing from memory is
    /// three times as fast as from a reader: a tree of a million records has a manifest of
    /// about 400 MB). An error of `on_file` ends the read.
    pub(crate) fn read_each_file(
        dir: &Path,
        mut on_file: impl FnMut(&str, blake3::Hash) -> std::result::Result<(), String>,
    ) -> Result<(Manifest, blake3::Hash)> {
        let path = manifest_path(dir)?;
        let bytes = crate::fsutil::read_regular_file(&path, MAX_MANIFEST_BYTES).map_err(|e| not_read(dir, &path, e))?;
        let mut json = serde_json::Deserializer::from_slice(&bytes);
        let manifest = serde::Deserializer::deserialize_map(&mut json, Streamed { on_file: &mut on_file })
            .and_then(|manifest| json.end().map(|()| manifest))
            .with_context(|| not_ours(&path))?;
        check_format(&path, &manifest.settings)?;
        Ok((manifest, blake3::hash(&bytes)))
    }

    /// Parses a manifest: its settings and the rest are read as two views of the same bytes
    /// (each skips what the other holds), so nothing is buffered or spelled out twice.
    pub(crate) fn from_bytes(bytes: &[u8]) -> serde_json::Result<Manifest> {
        #[derive(Deserialize)]
        struct Rest {
            resources: BTreeMap<String, ResourceInfo>,
            #[serde(default)]
            files: BTreeMap<String, String>,
        }
        let settings: BuildSettings = serde_json::from_slice(bytes)?;
        let Rest { resources, files } = serde_json::from_slice(bytes)?;
        Ok(Manifest { settings, resources, files })
    }

    /// The manifest as written to disk: pretty, keys in a stable order, trailing newline.
    #[cfg(test)]
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest always serialises");
        bytes.push(b'\n');
        bytes
    }

    /// The bytes of this manifest (whose `files` is empty) with `files` listing the given paths
    /// and hashes, sorted by path: the same bytes as [`Manifest::to_bytes`] with those files,
    /// without building a map of them (a tree of millions of files would need gigabytes).
    #[cfg(test)]
    pub(crate) fn to_bytes_listing(&self, files: &mut [(&str, blake3::Hash)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_listing(files, &mut bytes).expect("writing to memory cannot fail");
        bytes
    }

    /// Writes what [`Manifest::to_bytes_listing`] returns to `out`, without holding it in memory.
    #[cfg(test)]
    pub(crate) fn write_listing(
        &self,
        files: &mut [(&str, blake3::Hash)],
        out: impl std::io::Write,
    ) -> std::io::Result<()> {
        files.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.write_sorted_listing(files.iter().map(|(path, hash)| (*path, *hash)), out)
    }

    /// Writes this manifest (whose `files` is empty) with `files` listing the given paths and
    /// hashes, which come sorted by path: the files of a large tree are never all in memory.
    pub(crate) fn write_sorted_listing<P: AsRef<str>>(
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

/// The path of the manifest of the tree in `dir`, once `dir` proves to be a folder.
fn manifest_path(dir: &Path) -> Result<std::path::PathBuf> {
    if !dir.is_dir() {
        anyhow::bail!(
            "no tree in {}: {}; run `gen build` first, or point --dir at a built tree",
            crate::fsutil::show_dir(dir),
            if dir.exists() { "it is not a folder" } else { "the folder does not exist" }
        );
    }
    Ok(dir.join(MANIFEST_FILE))
}

/// The error for a manifest that could not be opened or read.
fn not_read(dir: &Path, path: &Path, e: crate::fsutil::NotRead) -> anyhow::Error {
    match e {
        crate::fsutil::NotRead::Io(e) => anyhow::Error::new(e).context(format!(
            "no tree in {}: {} cannot be read; run `gen build` first (if the folder holds a tree whose manifest \
             was removed, no build takes it over: empty the folder, or move it away, first)",
            crate::fsutil::show_dir(dir),
            path.display()
        )),
        e => anyhow::anyhow!("{}", not_read_manifest(path, &e)),
    }
}

fn not_ours(path: &Path) -> String {
    format!("{} is not a manifest written by gen: {REBUILD_ANEW}", path.display())
}

fn check_format(path: &Path, settings: &BuildSettings) -> Result<()> {
    if settings.format != FORMAT {
        anyhow::bail!(
            "{} has format {}, this gen reads format {FORMAT}: rebuild with this version's `gen build`",
            path.display(),
            settings.format
        );
    }
    Ok(())
}

/// The manifest's top level, read by [`Manifest::read_each_file`]: `files` goes to `on_file` entry by
/// entry, `resources` is kept, everything else is the settings.
struct Streamed<'f, F> {
    on_file: &'f mut F,
}

impl<'de, F: FnMut(&str, blake3::Hash) -> std::result::Result<(), String>> serde::de::Visitor<'de> for Streamed<'_, F> {
    type Value = Manifest;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a manifest object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Manifest, A::Error> {
        use serde::de::Error as _;
        let mut settings = serde_json::Map::new();
        let mut resources = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "files" => map.next_value_seed(FilesSeed { on_file: &mut *self.on_file })?,
                "resources" => resources = Some(map.next_value()?),
                _ => {
                    settings.insert(key, map.next_value()?);
                }
            }
        }
        let settings = serde_json::from_value(serde_json::Value::Object(settings)).map_err(A::Error::custom)?;
        let resources = resources.ok_or_else(|| A::Error::missing_field("resources"))?;
        Ok(Manifest { settings, resources, files: BTreeMap::new() })
    }
}

/// The `files` object of a streamed manifest, handed entry by entry to `on_file`.
struct FilesSeed<'f, F> {
    on_file: &'f mut F,
}

impl<'de, F: FnMut(&str, blake3::Hash) -> std::result::Result<(), String>> serde::de::DeserializeSeed<'de>
    for FilesSeed<'_, F>
{
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, F: FnMut(&str, blake3::Hash) -> std::result::Result<(), String>> serde::de::Visitor<'de>
    for FilesSeed<'_, F>
{
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object of paths and BLAKE3 hashes")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error as _;
        let (mut path, mut hex) = (String::new(), String::new());
        while let Some(()) = map.next_key_seed(Reuse(&mut path))? {
            map.next_value_seed(Reuse(&mut hex))?;
            let hash = blake3::Hash::from_hex(&hex)
                .map_err(|_| A::Error::custom(format!("{path:?} has the hash {hex:?}, which is not a BLAKE3 hash")))?;
            (self.on_file)(&path, hash).map_err(A::Error::custom)?;
        }
        Ok(())
    }
}

/// A string read into a buffer that is reused, so that millions of paths cost no allocation.
struct Reuse<'s>(&'s mut String);

impl<'de> serde::de::DeserializeSeed<'de> for Reuse<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Reuse<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
        self.0.clear();
        self.0.push_str(text);
        Ok(())
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

/// A manifest without files whose one resource `segment` has `count` records, with plain test
/// settings (for unit tests here and in the build's writer).
#[cfg(test)]
pub(crate) fn test_manifest(segment: &str, count: u64) -> Manifest {
    Manifest {
        settings: BuildSettings {
            format: FORMAT,
            generator: "gen test".into(),
            base_url: "http://x".into(),
            links: LinkStyle::Query,
            pretty: false,
            gzip: false,
            page_sizes: vec![20],
            data_hash: "d".into(),
            built_at: None,
            deploy_headers: DeployHeaders::default(),
            deploy_date: String::new(),
            hash: String::new(),
            filters: BTreeMap::new(),
            bulk: true,
        },
        resources: BTreeMap::from([(segment.to_string(), ResourceInfo { count })]),
        files: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_written_from_a_list_are_the_bytes_of_the_map() {
        let hashes = [blake3::hash(b"a"), blake3::hash(b"b"), blake3::hash(b"c")];
        let mut manifest = test_manifest("berry", 2);
        let mut list = vec![("b/index.json", hashes[1]), ("a/index.json", hashes[0]), ("c.json", hashes[2])];
        let streamed = manifest.to_bytes_listing(&mut list);
        for (path, hash) in &list {
            manifest.files.insert(path.to_string(), hash.to_hex().to_string());
        }
        assert_eq!(String::from_utf8(streamed).unwrap(), String::from_utf8(manifest.to_bytes()).unwrap());
        let read = Manifest::from_bytes(&manifest.to_bytes()).unwrap();
        assert_eq!(read, manifest);

        // read file by file: the same settings, resources and files, and the hash of the bytes
        let dir = std::env::temp_dir().join(format!("gen-manifest-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), manifest.to_bytes()).unwrap();
        let mut files = BTreeMap::new();
        let (streamed, digest) = Manifest::read_each_file(&dir, |path, hash| {
            files.insert(path.to_string(), hash.to_hex().to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!(Manifest { files, ..streamed }, manifest);
        assert_eq!(digest, blake3::hash(&manifest.to_bytes()));
        let refused = Manifest::read_each_file(&dir, |path, _| Err(format!("no {path}"))).unwrap_err();
        assert!(format!("{refused:#}").contains("no a/index.json"), "{refused:#}");
        std::fs::write(dir.join(MANIFEST_FILE), b"{\"files\": {\"a\": \"nothex\"}}").unwrap();
        let refused = Manifest::read_each_file(&dir, |_, _| Ok(())).unwrap_err();
        assert!(format!("{refused:#}").contains("not a manifest written by gen"), "{refused:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
