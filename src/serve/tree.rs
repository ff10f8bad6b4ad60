//! The served tree, in memory: every document of a built tree keyed by its request path, each
//! with its response bodies prepared once (the bytes, their gzip, their ETag), and each list's
//! entries so that any page can be rendered without JSON serialisation.
//!
//! Loading trusts nothing on disk beyond the manifest: only paths the manifest lists and that
//! have the shape of a tree path are read, symbolic links are never followed, and every file
//! read must hash to what the manifest says. A tree swapped in by `gen build` while it is being
//! read fails that check, and the load is retried; the server keeps answering from the tree it
//! has until a load succeeds whole.

use crate::layout::{self, API_PREFIX, API_ROOT, ROOT_PATH};
use crate::manifest::{MANIFEST_FILE, Manifest};
use crate::paging::{self, LinkStyle, Page};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// One response body, prepared for every way it is sent.
#[derive(Debug)]
pub struct Doc {
    pub body: Vec<u8>,
    /// The body gzip-compressed (when that is smaller), once [`Doc::compress`] has run.
    gzip: OnceLock<Option<Vec<u8>>>,
    /// Strong ETag of the body: its BLAKE3 hash, quoted.
    pub etag: String,
    /// ETag of the gzip-encoded representation (a different representation needs its own
    /// strong validator): the same hash with `-gz`.
    pub etag_gzip: String,
}

impl Doc {
    /// Prepares a body whose BLAKE3 hash (hex) is `hash`; it is compressed later, once
    /// ([`Tree::compress_all`]), so that loading a large tree is not held up by compression.
    pub fn new(body: Vec<u8>, hash: &str) -> Doc {
        Doc { body, gzip: OnceLock::new(), etag: format!("\"{hash}\""), etag_gzip: format!("\"{hash}-gz\"") }
    }

    /// Prepares a body computed here (hashed and compressed here).
    pub fn computed(body: Vec<u8>) -> Doc {
        let hash = blake3::hash(&body).to_hex();
        let doc = Doc::new(body, &hash);
        doc.compress();
        doc
    }

    /// The gzip-compressed body, when it is ready and smaller than the body. Never waits: until
    /// the body is compressed, clients get it uncompressed.
    pub fn gzip(&self) -> Option<&[u8]> {
        self.gzip.get().and_then(|gz| gz.as_deref())
    }

    /// Compresses the body, once.
    pub fn compress(&self) {
        self.gzip.get_or_init(|| {
            (self.body.len() >= MIN_GZIP).then(|| gzip(&self.body)).filter(|gz| gz.len() < self.body.len())
        });
    }

    fn bytes(&self) -> usize {
        self.body.len() + self.gzip().map_or(0, <[u8]>::len)
    }
}

/// Bodies shorter than this are not worth compressing.
const MIN_GZIP: usize = 200;

/// Computed pages kept in memory, at most this many bytes; past it the cache starts over.
const PAGE_CACHE_BYTES: usize = 64 << 20;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut compressed = crate::fsutil::gzip_bytes(bytes, flate2::Compression::default());
    compressed.shrink_to_fit(); // held for the life of the tree: no slack
    compressed
}

/// One resource's list.
#[derive(Debug)]
pub struct List {
    pub count: u64,
    /// The list url, `<base_url>/api/v2/<segment>/`.
    url: String,
    /// Each entry serialised as it appears inside a page.
    entries: Vec<Vec<u8>>,
    /// The precomputed page files, by page.
    pages: HashMap<Page, Arc<Doc>>,
    /// The whole list (`_pages/all`).
    all: Arc<Doc>,
}

/// A loaded tree.
#[derive(Debug)]
pub struct Tree {
    /// Documents by key (`api/v2/berry/1`, see [`super::route::normalize`]).
    docs: HashMap<String, Arc<Doc>>,
    /// Lists by segment.
    lists: HashMap<String, List>,
    links: LinkStyle,
    pretty: bool,
    /// The manifest's bytes, to tell whether a new manifest describes another tree.
    pub manifest_bytes: Vec<u8>,
    /// The base URL the answers carry: the tree's own, or the one it was rebased on at load.
    pub base_url: String,
    /// The base URL the tree was built with.
    built_base_url: String,
    /// Documents by the hash of their body, to reuse them in the next load.
    by_hash: HashMap<String, Arc<Doc>>,
    /// Pages computed on request, kept for the next request.
    computed: Mutex<PageCache>,
}

#[derive(Debug, Default)]
struct PageCache {
    pages: HashMap<(String, Page), Arc<Doc>>,
    bytes: usize,
}

impl Tree {
    /// Loads the tree in `dir` whose manifest is `manifest` (read from `manifest_bytes`),
    /// reusing the documents of `previous` whose hash is unchanged.
    pub fn load(dir: &Path, manifest_bytes: Vec<u8>, manifest: Manifest, previous: Option<&Tree>) -> Result<Tree> {
        Tree::load_rebased(dir, manifest_bytes, manifest, previous, None)
    }

    /// [`Tree::load`], with every url that starts with the tree's base URL made to start with
    /// `base_url` instead (see [`rebase`]), once per document, before anything is served.
    /// `previous` must have been loaded with the same `base_url`.
    pub(crate) fn load_rebased(
        dir: &Path,
        manifest_bytes: Vec<u8>,
        manifest: Manifest,
        previous: Option<&Tree>,
        base_url: Option<&str>,
    ) -> Result<Tree> {
        let built_base = manifest.settings.base_url.as_str();
        let rebase_to = base_url.filter(|to| *to != built_base);
        // A document is reused only when it was rebased the same way.
        let served_base = rebase_to.unwrap_or(built_base);
        let previous = previous.filter(|p| p.base_url == served_base && p.built_base_url == built_base);
        let by_path = served_files(&manifest)?;
        check_present(dir, &by_path)?;
        let by_hash = read_bodies(dir, &by_path, previous, built_base, rebase_to)?;
        let docs: HashMap<String, Arc<Doc>> =
            by_path.into_iter().map(|(_, hash, key)| (key, by_hash[hash].clone())).collect();
        if !docs.contains_key(API_ROOT) {
            bail!("{MANIFEST_FILE} lists no {ROOT_PATH}: rebuild with `gen build`");
        }
        let lists = load_lists(dir, &docs, &manifest, served_base)?;
        Ok(Tree {
            docs,
            lists,
            links: manifest.settings.links,
            pretty: manifest.settings.pretty,
            manifest_bytes,
            base_url: served_base.to_string(),
            built_base_url: built_base.to_string(),
            by_hash,
            computed: Mutex::default(),
        })
    }

    /// Compresses every stored document not compressed yet, across all cores. Until a document
    /// is compressed it is sent uncompressed, so a large tree is compressed in the background
    /// once it is served ([`Tree::compress_now`] says when to do it at once).
    pub fn compress_all(&self) {
        self.by_hash.par_iter().for_each(|(_, doc)| doc.compress());
    }

    /// True when the bodies are small enough (under 64 MiB in all) to compress before serving:
    /// well under a second, and every answer is compressed from the first request on.
    pub(crate) fn compress_now(&self) -> bool {
        self.by_hash.values().map(|doc| doc.body.len()).sum::<usize>() < 64 << 20
    }

    /// Number of paths served.
    pub fn documents(&self) -> usize {
        self.docs.len()
    }

    /// Number of lists.
    pub fn resources(&self) -> usize {
        self.lists.len()
    }

    /// The number of entries in the list of `segment`.
    pub fn count(&self, segment: &str) -> Option<u64> {
        self.lists.get(segment).map(|list| list.count)
    }

    /// The document at `key`.
    pub fn doc(&self, key: &str) -> Option<&Arc<Doc>> {
        self.docs.get(key)
    }

    /// True when `segment` is a list of this tree.
    pub(crate) fn has_list(&self, segment: &str) -> bool {
        self.lists.contains_key(segment)
    }

    /// Every list segment, sorted, for messages.
    pub fn segments(&self) -> Vec<&str> {
        let mut segments: Vec<&str> = self.lists.keys().map(String::as_str).collect();
        segments.sort_unstable();
        segments
    }

    /// `page` of the list of `segment`: the precomputed file when there is one, else rendered
    /// from the list's entries (byte for byte as the build would have written it) and kept.
    pub fn page(&self, segment: &str, page: Page) -> Option<Arc<Doc>> {
        let list = self.lists.get(segment)?;
        if page.is_everything(list.count) {
            return Some(list.all.clone());
        }
        if let Some(doc) = list.pages.get(&page) {
            return Some(doc.clone());
        }
        let key = (segment.to_string(), page);
        if let Some(doc) = self.computed.lock().expect("page cache lock").pages.get(&key) {
            return Some(doc.clone());
        }
        let doc = Arc::new(Doc::computed(render(list, page, self.links, self.pretty)));
        let mut cache = self.computed.lock().expect("page cache lock");
        if cache.bytes + doc.bytes() > PAGE_CACHE_BYTES {
            *cache = PageCache::default();
        }
        cache.bytes += doc.bytes();
        cache.pages.insert(key, doc.clone());
        Some(doc)
    }
}

/// The files of the manifest the server serves, as (path, hash, key); a path no build writes
/// refuses the whole tree.
fn served_files(manifest: &Manifest) -> Result<Vec<(&str, &str, String)>> {
    let mut by_path = Vec::with_capacity(manifest.files.len());
    for (path, hash) in &manifest.files {
        match classify(path) {
            Key::Serve(key) => by_path.push((path.as_str(), hash.as_str(), key)),
            Key::Skip => {}
            Key::Refuse => {
                bail!("{MANIFEST_FILE} lists {path:?}, which is not a path of a gen tree: rebuild with `gen build`")
            }
        }
    }
    Ok(by_path)
}

/// Fails when a served file is missing or not a regular file (links are not followed).
fn check_present(dir: &Path, by_path: &[(&str, &str, String)]) -> Result<()> {
    let present = regular_files(dir)?;
    if let Some((path, _, _)) = by_path.iter().find(|(path, _, _)| !present.contains(*path)) {
        bail!(
            "{} is listed in {MANIFEST_FILE} but is missing or not a regular file (links are not followed)",
            dir.join(path).display()
        );
    }
    Ok(())
}

/// Every distinct body by hash: reused from `previous` when it has it, else read once (a
/// record's id and name paths share their bytes), checked against its hash, and rebased from
/// `built_base` to `rebase_to` when given.
fn read_bodies(
    dir: &Path,
    by_path: &[(&str, &str, String)],
    previous: Option<&Tree>,
    built_base: &str,
    rebase_to: Option<&str>,
) -> Result<HashMap<String, Arc<Doc>>> {
    let mut first_path: HashMap<&str, &str> = HashMap::new();
    for (path, hash, _) in by_path {
        first_path.entry(hash).or_insert(path);
    }
    let reused: HashMap<&str, Arc<Doc>> = first_path
        .keys()
        .filter_map(|hash| previous.and_then(|p| p.by_hash.get(*hash)).map(|doc| (*hash, doc.clone())))
        .collect();
    let to_read: Vec<(&str, &str)> =
        first_path.iter().filter(|(hash, _)| !reused.contains_key(*hash)).map(|(h, p)| (*h, *p)).collect();
    let read: Vec<(&str, Arc<Doc>)> = to_read
        .par_iter()
        .map(|&(hash, path)| {
            let file = dir.join(path);
            let body = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            if blake3::hash(&body).to_hex().as_str() != hash {
                bail!(
                    "{} does not match its hash in {MANIFEST_FILE} (a build replaced the tree while it was read, \
                     or the file was edited: rebuild with `gen build`)",
                    file.display()
                );
            }
            let doc = match rebase_to.and_then(|to| rebase(&body, built_base, to)) {
                Some(rebased) => Doc::new(rebased.clone(), &blake3::hash(&rebased).to_hex()),
                None => Doc::new(body, hash),
            };
            Ok((hash, Arc::new(doc)))
        })
        .collect::<Result<_>>()?;
    Ok(reused.into_iter().chain(read).map(|(hash, doc)| (hash.to_string(), doc)).collect())
}

/// Every resource's list, by segment, with its urls starting with `base_url`.
fn load_lists(
    dir: &Path,
    docs: &HashMap<String, Arc<Doc>>,
    manifest: &Manifest,
    base_url: &str,
) -> Result<HashMap<String, List>> {
    let mut lists = HashMap::new();
    for (segment, info) in &manifest.resources {
        let list = load_list(docs, manifest, base_url, segment, info.count)
            .with_context(|| format!("cannot serve the list of {segment} in {}", crate::fsutil::show_dir(dir)))?;
        lists.insert(segment.clone(), list);
    }
    Ok(lists)
}

/// Renders a page of `list` as `gen build` does.
fn render(list: &List, page: Page, links: LinkStyle, pretty: bool) -> Vec<u8> {
    paging::render_list_page(&list.entries, &list.url, page, links, pretty)
}

/// The whole list of one resource, from its `_pages/all` document, and its page files.
fn load_list(
    docs: &HashMap<String, Arc<Doc>>,
    manifest: &Manifest,
    base_url: &str,
    segment: &str,
    count: u64,
) -> Result<List> {
    #[derive(serde::Deserialize)]
    struct AllPage {
        count: u64,
        results: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        name: Option<String>,
        url: String,
    }
    let all_key = layout::all_page_key(segment);
    let all = docs.get(&all_key).with_context(|| format!("{all_key}/index.json is missing"))?.clone();
    let parsed: AllPage =
        serde_json::from_slice(&all.body).with_context(|| format!("{all_key}/index.json is not a list page"))?;
    if parsed.count != count || parsed.results.len() as u64 != count {
        bail!(
            "{all_key}/index.json holds {} entries (count {}) but {MANIFEST_FILE} says {count}",
            parsed.results.len(),
            parsed.count
        );
    }
    let entries: Vec<Vec<u8>> = parsed
        .results
        .iter()
        .map(|e| paging::render_entry(e.name.as_deref(), &e.url, manifest.settings.pretty))
        .collect();
    let url = layout::list_url(base_url, segment);

    let prefix = layout::pages_prefix(segment);
    let mut pages = HashMap::new();
    for (key, doc) in docs {
        let Some(rest) = key.strip_prefix(&prefix) else { continue };
        let Some((limit, offset)) = rest.split_once('/') else { continue };
        if let (Ok(limit), Ok(offset)) = (limit.parse(), offset.parse()) {
            pages.insert(Page { offset, limit }, doc.clone());
        }
    }
    let list = List { count, url, entries, pages, all };
    // Pages computed here must be the bytes the build writes: check on the whole list.
    let whole =
        render(&list, Page { offset: 0, limit: count.max(1) }, manifest.settings.links, manifest.settings.pretty);
    if whole != list.all.body {
        bail!(
            "{all_key}/index.json is not laid out as this gen renders pages: rebuild with this version's `gen build`"
        );
    }
    Ok(list)
}

/// `body` with each JSON string that starts with `from` followed by `/api/v2/` (a url of the
/// tree), or that is exactly `from` (the OpenAPI document's server), starting with `to`
/// instead; `None` when there is none. Strings are matched from their opening quote, so a
/// base URL in the middle of a string is left alone; base URLs hold no character JSON escapes.
pub(crate) fn rebase(body: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
    let from = from.as_bytes();
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(quote) = body[i..].iter().position(|&b| b == b'"') {
        let start = i + quote + 1;
        i = start;
        let Some(rest) = body[start..].strip_prefix(from) else { continue };
        if !(rest.starts_with(API_PREFIX.as_bytes()) || rest.starts_with(b"\"")) {
            continue;
        }
        let out = out.get_or_insert_with(|| Vec::with_capacity(body.len() + 1024));
        out.extend_from_slice(&body[copied..start]);
        out.extend_from_slice(to.as_bytes());
        copied = start + from.len();
        i = copied;
    }
    let mut out = out?;
    out.extend_from_slice(&body[copied..]);
    Some(out)
}

/// What the server does with a file the manifest lists.
#[derive(Debug, PartialEq, Eq)]
pub enum Key {
    /// Serves it under this key: `api/v2/berry/1/index.json` → `api/v2/berry/1`, other JSON
    /// files (`api/v2/openapi.json`) by their own path.
    Serve(String),
    /// Leaves it out: not JSON, or not under `api/v2/`.
    Skip,
    /// Refuses the whole tree: a path no build writes (`..`, empty or odd segments), so that no
    /// manifest can make the server read outside the tree.
    Refuse,
}

/// Classifies a path listed in the manifest: refused unless it has the shape of a tree path,
/// else served under its [`layout::key_of`] when it has one.
pub(crate) fn classify(path: &str) -> Key {
    if !crate::manifest::is_tree_path(path) {
        return Key::Refuse;
    }
    match layout::key_of(path) {
        Some(key) => Key::Serve(key.to_string()),
        None => Key::Skip,
    }
}

/// Every regular file under `dir/api`, relative to `dir`, found without following links.
fn regular_files(dir: &Path) -> Result<HashSet<String>> {
    let mut files = HashSet::new();
    let api = dir.join("api");
    for entry in walkdir::WalkDir::new(&api).follow_links(false) {
        let entry = entry.with_context(|| format!("cannot read the tree in {}", crate::fsutil::show_dir(dir)))?;
        if entry.file_type().is_file()
            && let Ok(rel) = entry.path().strip_prefix(dir)
            && let Some(rel) = rel.to_str()
        {
            files.insert(rel.replace(std::path::MAIN_SEPARATOR, "/"));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_tree_paths() {
        let serve = |key: &str| Key::Serve(key.to_string());
        assert_eq!(classify("api/v2/index.json"), serve("api/v2"));
        assert_eq!(classify("api/v2/berry/-1/index.json"), serve("api/v2/berry/-1"));
        assert_eq!(classify("api/v2/berry/_pages/20/40/index.json"), serve("api/v2/berry/_pages/20/40"));
        assert_eq!(classify("api/v2/openapi.json"), serve("api/v2/openapi.json"));
        for skipped in ["api/v2/openapi.yaml", "robots.txt", "api/v3/index.json", "api/v2/berry/index.json.gz"] {
            assert_eq!(classify(skipped), Key::Skip, "{skipped}");
        }
        for bad in [
            "api/v2/../../etc/passwd/index.json",
            "api/v2/../../etc/passwd.json",
            "api/v2/./index.json",
            "/etc/index.json",
            "api/v2//index.json",
            "api/v2/Berry/index.json",
            "api/v2/a\\b/index.json",
            "api/v2/a b/index.json",
        ] {
            assert_eq!(classify(bad), Key::Refuse, "{bad}");
        }
    }

    #[test]
    fn rebase_replaces_tree_urls_only() {
        let from = "https://api.example.org";
        let to = "http://127.0.0.1:9";
        let body = br#"{"a":"https://api.example.org/api/v2/berry/1/","b":"see https://api.example.org/api/v2/x/","c":"https://api.example.org","d":"https://api.example.org/docs","e":"https://api.example.org.evil/api/v2/"}"#;
        let rebased = String::from_utf8(rebase(body, from, to).unwrap()).unwrap();
        assert_eq!(
            rebased,
            r#"{"a":"http://127.0.0.1:9/api/v2/berry/1/","b":"see https://api.example.org/api/v2/x/","c":"http://127.0.0.1:9","d":"https://api.example.org/docs","e":"https://api.example.org.evil/api/v2/"}"#
        );
        assert_eq!(rebase(br#"{"a":"x"}"#, from, to), None);
        let pretty = b"{\n  \"url\": \"https://api.example.org/api/v2/\"\n}";
        assert_eq!(rebase(pretty, from, to).unwrap(), b"{\n  \"url\": \"http://127.0.0.1:9/api/v2/\"\n}");
    }

    #[test]
    fn small_bodies_are_not_compressed_and_etags_differ_by_encoding() {
        let doc = Doc::computed(b"{}".to_vec());
        assert!(doc.gzip().is_none());
        let body = vec![b'a'; 10_000];
        let big = Doc::new(body.clone(), &blake3::hash(&body).to_hex());
        assert!(big.gzip().is_none(), "not compressed until asked");
        big.compress();
        assert!(big.gzip().unwrap().len() < 1000);
        assert_ne!(big.etag, big.etag_gzip);
        assert_eq!(big.etag, format!("\"{}\"", blake3::hash(&big.body).to_hex()));
    }
}
