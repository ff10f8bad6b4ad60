//! The served tree: the manifest of a built tree, held compactly, and its documents read from
//! disk on first use, kept in a bounded [`Cache`].
//!
//! Loading reads only the manifest ([`Manifest::read_each_file`]): for each file it keeps a
//! key and the hash the manifest records (see [`Listing`]), nothing more. A document is read
//! when it is first asked for, only at a path the manifest lists and that has the shape of a
//! tree path, without following links, and served only when its bytes hash to what the
//! manifest says; its response bodies (the bytes rebased, their gzip, their ETag) are prepared
//! then, once, and cached. A list's entries are read from its `_pages/all` file the first time
//! a page that no file holds is asked for, and cached too.
//!
//! A tree of at most [`CHECK_AT_LOAD`] files is also checked whole when it is loaded (every
//! file read and hashed, nothing kept), so that a tree that does not match its manifest (a
//! build killed mid-commit, a build swapping the tree in while it is read) is refused: a
//! reload before it is swapped in (the previous tree is served meanwhile), the first load
//! while serving (see [`super::run`]).

use super::cache::Cache;
use super::item::{Doc, Item, Key as CacheKey, List};
use super::origin::Source;
use crate::paging::{self, LinkStyle, Page};
use crate::tree::layout::{self, API_PREFIX, ROOT_PATH};
use crate::tree::listing::{self, ListedTwice, Listing};
use crate::tree::manifest::{MANIFEST_FILE, Manifest};
use anyhow::{Result, bail};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Longest a read waits for room among the large bodies in flight before its request is
/// answered 503 (see [`super::budget`]).
pub(crate) const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The reads under way, by key, that other requests for the same file wait on; and the bodies
/// too large for the cache that answers still send, which a new request shares while they last.
#[derive(Debug, Default)]
struct Reads {
    reading: HashMap<CacheKey, Arc<Flight>>,
    sending: HashMap<CacheKey, std::sync::Weak<Doc>>,
    /// The lists too large for the cache that answers still use (see [`ServedTree::list`]).
    lists: HashMap<CacheKey, std::sync::Weak<List>>,
}

type Flights = std::sync::Mutex<Reads>;

/// One read under way: its outcome, once there is one, shared by every request waiting on it.
type Flight = std::sync::OnceLock<Result<Arc<Doc>, Unserved>>;

/// Trees of at most this many files are checked whole at load (see the module's doc).
pub(crate) const CHECK_AT_LOAD: usize = 100_000;

/// The files of a tree still to check whole, with their hashes, when it is small enough.
pub(crate) type ToCheck = Option<Vec<(String, blake3::Hash)>>;

/// A listed file that cannot be served as the manifest says.
#[derive(Debug, Clone)]
pub(crate) struct Unserved {
    /// The file, relative to the tree's folder.
    pub(crate) path: String,
    /// What is wrong, and what to do, for the server's log.
    pub(crate) detail: String,
    /// True when nothing is wrong with the file: the bodies in flight hold their whole budget
    /// (answered 503, retry).
    pub(crate) busy: bool,
}

/// A loaded tree: one build's manifest, and the cache its documents are read into.
#[derive(Debug)]
pub struct ServedTree {
    pub(super) dir: PathBuf,
    /// Where the documents come from: the tree's files and its manifest's listing, or an
    /// archive's parts and its directory (the questions they answer: `src/serve/source.rs`).
    pub(super) source: Source,
    /// Each list's entry count, by segment.
    pub(super) lists: HashMap<String, u64>,
    /// The declared filters of each resource that has some.
    pub(super) filters: HashMap<String, Vec<crate::filters::FilterField>>,
    pub(super) links: LinkStyle,
    pub(super) pretty: bool,
    /// The BLAKE3 hash of the manifest's bytes, to tell whether a new manifest describes
    /// another tree.
    pub(crate) digest: blake3::Hash,
    /// The base URL the answers carry: the tree's own, or the one it is rebased on.
    pub(crate) base_url: String,
    /// The base URL the tree was built with.
    pub(crate) built_base_url: String,
    /// Documents and lists read so far (shared with the trees loaded after this one).
    pub(crate) cache: Arc<Cache>,
    /// The deploy headers and the line exposing them, `Name: value\r\n` each, sent with every
    /// answer (empty for a tree built before them).
    pub(crate) deploy_head: String,
    /// Reads under way (see [`ServedTree::read`]).
    flights: Flights,
    /// Held while a list is parsed, or its `_pages/all` hashed for a search: one at a time, so
    /// that requests that all miss a list too large for the cache share one parse and one copy
    /// of it rather than each making its own.
    pub(super) list_parse: std::sync::Mutex<()>,
}

impl ServedTree {
    /// Loads the tree in `dir`, reading its documents into `cache` as they are asked for.
    pub fn load(dir: &Path, cache: Arc<Cache>) -> Result<ServedTree> {
        ServedTree::load_rebased(dir, cache, None)
    }

    /// [`ServedTree::load`], with every url that starts with the tree's base URL made to start with
    /// `base_url` instead (see [`rebase`]), once per document as it is read.
    pub(crate) fn load_rebased(dir: &Path, cache: Arc<Cache>, base_url: Option<&str>) -> Result<ServedTree> {
        let (tree, to_check) = ServedTree::load_unchecked(dir, cache, base_url)?;
        if let Some(paths) = to_check {
            listing::check_all(dir, &paths)?;
        }
        Ok(tree)
    }

    /// [`ServedTree::load_rebased`] without checking the files: the tree, and the files to check
    /// whole when it has at most [`CHECK_AT_LOAD`] (see [`listing::check_all`]).
    pub(crate) fn load_unchecked(
        dir: &Path,
        cache: Arc<Cache>,
        base_url: Option<&str>,
    ) -> Result<(ServedTree, ToCheck)> {
        let estimate = std::fs::metadata(dir.join(MANIFEST_FILE)).map_or(0, |m| m.len() / 100) as usize;
        let mut listing = Listing::with_capacity(estimate.min(1 << 26));
        let mut checked: Option<Vec<(String, blake3::Hash)>> = Some(Vec::new());
        let (manifest, digest) = Manifest::read_each_file(dir, |path, hash| {
            match classify(path) {
                Key::Refuse => {
                    return Err(format!("{MANIFEST_FILE} lists {path:?}, which is not a path of a gen tree: {REPAIR}"));
                }
                Key::Skip => {}
                Key::Serve(_) => {
                    listing.push(path, hash);
                    if let Some(paths) = checked.as_mut() {
                        paths.push((path.to_string(), hash));
                    }
                    if listing.len() > CHECK_AT_LOAD {
                        checked = None;
                    }
                }
            }
            Ok(())
        })?;
        listing.finish().map_err(|twice| listed_twice(dir, &twice))?;
        if listing.hash_of(ROOT_PATH).is_none() {
            bail!("{MANIFEST_FILE} lists no {ROOT_PATH}: {REPAIR}");
        }
        for segment in manifest.resources.keys() {
            let all = layout::all_page_path(segment);
            if listing.hash_of(&all).is_none() {
                bail!("{MANIFEST_FILE} lists the resource {segment} but not {all}: {REPAIR}");
            }
        }
        let tree = ServedTree::new(dir, Source::Tree(listing), manifest, digest, cache, base_url);
        Ok((tree, checked))
    }

    /// The served tree of the build `manifest` (its files not listed) describes, whose documents
    /// come from `source`; `digest` tells it from another build.
    pub(super) fn new(
        dir: &Path,
        source: Source,
        manifest: Manifest,
        digest: blake3::Hash,
        cache: Arc<Cache>,
        base_url: Option<&str>,
    ) -> ServedTree {
        let deploy_head = manifest
            .settings
            .deploy_header_lines()
            .map(|lines| lines.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect())
            .unwrap_or_default();
        let built_base = manifest.settings.base_url;
        let served_base = base_url.unwrap_or(&built_base).to_string();
        ServedTree {
            dir: dir.to_path_buf(),
            source,
            lists: manifest.resources.into_iter().map(|(segment, info)| (segment, info.count)).collect(),
            filters: manifest.settings.filters.into_iter().collect(),
            links: manifest.settings.links,
            pretty: manifest.settings.pretty,
            digest,
            base_url: served_base,
            built_base_url: built_base,
            cache,
            deploy_head,
            flights: Flights::default(),
            list_parse: std::sync::Mutex::new(()),
        }
    }

    /// Number of files served (for an archive: its keys).
    pub(crate) fn documents(&self) -> usize {
        self.source.len()
    }

    /// Number of lists.
    pub(crate) fn resources(&self) -> usize {
        self.lists.len()
    }

    /// The number of entries in the list of `segment`.
    pub(crate) fn count(&self, segment: &str) -> Option<u64> {
        self.lists.get(segment).copied()
    }

    /// The declared filters of `segment` (none for a resource without them).
    pub(crate) fn filters(&self, segment: &str) -> &[crate::filters::FilterField] {
        self.filters.get(segment).map_or(&[], Vec::as_slice)
    }

    /// True when `segment` is a list of this tree.
    pub(crate) fn has_list(&self, segment: &str) -> bool {
        self.lists.contains_key(segment)
    }

    /// Every list segment, sorted, for messages.
    pub(crate) fn segments(&self) -> Vec<&str> {
        let mut segments: Vec<&str> = self.lists.keys().map(String::as_str).collect();
        segments.sort_unstable();
        segments
    }

    /// The file of the document at `key` (`api/v2/berry/1`, see [`super::route::normalize`]),
    /// when the manifest lists it: `<key>/index.json`, or the key itself for another JSON file
    /// (`api/v2/openapi.json`). An error when an archive's directory block cannot be read.
    pub(super) fn file_of(&self, key: &str) -> Result<Option<(String, blake3::Hash)>, Unserved> {
        let index = layout::document_path(key);
        if let Some(hash) = self.hash_of(&index)? {
            return Ok(Some((index, hash)));
        }
        if layout::key_of(key) != Some(key) {
            return Ok(None);
        }
        Ok(self.hash_of(key)?.map(|own| (key.to_string(), own)))
    }

    /// True when the tree holds a document at `key` (no document is read), or when an archive's
    /// directory block that would say cannot be read (its document is then answered 503).
    pub(crate) fn has_doc(&self, key: &str) -> bool {
        !matches!(self.file_of(key), Ok(None))
    }

    /// The document at `key`, read on first use; `Ok(None)` when the tree holds none.
    pub(crate) fn doc(&self, key: &str) -> Result<Option<Arc<Doc>>, Unserved> {
        match self.file_of(key)? {
            Some((path, hash)) => self.read(&path, &hash).map(Some),
            None => Ok(None),
        }
    }

    /// The listed file `path` whose hash is `hash`, from the cache or read now: once for all the
    /// requests that ask for it meanwhile (they wait for that read and share its body).
    pub(super) fn read(&self, path: &str, hash: &blake3::Hash) -> Result<Arc<Doc>, Unserved> {
        let key = CacheKey::Doc(*hash.as_bytes());
        if let Some(Item::Doc(doc)) = self.cache.get(&key) {
            return Ok(doc);
        }
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // a body too large for the cache that an answer still sends: shared, not read again
            if let Some(doc) = flights.sending.get(&key).and_then(std::sync::Weak::upgrade) {
                return Ok(doc);
            }
            flights.reading.entry(key).or_default().clone()
        };
        let read = flight.get_or_init(|| self.read_now(path, hash, key)).clone();
        let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if flights.reading.get(&key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            flights.reading.remove(&key);
            if let Ok(doc) = read.as_ref()
                && doc.in_flight.is_some()
            {
                flights.sending.retain(|_, sent| sent.strong_count() > 0);
                flights.sending.insert(key, Arc::downgrade(doc));
            }
        }
        read
    }

    /// Reads, checks and prepares the listed file `path`, holding it in the cache, or, when it
    /// is too large for the cache, counting it in the budget of bodies in flight (waiting for
    /// room at most [`IN_FLIGHT_WAIT`]).
    fn read_now(&self, path: &str, hash: &blake3::Hash, key: CacheKey) -> Result<Arc<Doc>, Unserved> {
        let size = self.size_of(path);
        let in_flight = match self.cache.would_hold(size) {
            true => None,
            false => Some(self.cache.in_flight.acquire(size, IN_FLIGHT_WAIT).ok_or_else(|| Unserved {
                path: path.to_string(),
                detail: format!(
                    "{} ({size} bytes) waited {} s for room among the large answers in flight (--cache-mb): \
                     answered 503; a larger --cache-mb lets more be sent at once",
                    self.dir.join(path).display(),
                    IN_FLIGHT_WAIT.as_secs()
                ),
                busy: true,
            })?),
        };
        let (body, stored) = self.read_source(path, hash)?;
        let rebased =
            (self.base_url != self.built_base_url).then(|| rebase(&body, &self.built_base_url, &self.base_url));
        let mut doc = match (rebased.flatten(), stored) {
            (Some(rebased), _) => Doc::computed(rebased),
            (None, Some(stored)) => Doc::with_gzip(body, hash, stored),
            (None, None) => Doc::new(body, hash),
        };
        doc.cached_as = Some(key);
        doc.in_flight = in_flight;
        let doc = Arc::new(doc);
        self.cache.insert(key, Item::Doc(doc.clone()), doc.bytes());
        Ok(doc)
    }

    /// The gzip body of `doc`, compressed now when it was not yet (and counted in the cache).
    pub(crate) fn gzip_of<'d>(&self, doc: &'d Doc) -> Option<&'d [u8]> {
        let added = doc.compress();
        if let Some(key) = doc.cached_as.filter(|_| added > 0) {
            self.cache.charge(&key, added);
        }
        doc.gzip()
    }

    /// The entries of the list of `segment`, from its `_pages/all` file (`all_path`, whose hash
    /// is `all_hash`): cached, or read and checked now.
    pub(super) fn list(
        &self,
        segment: &str,
        count: Option<u64>,
        all_path: &str,
        all_hash: &blake3::Hash,
    ) -> Result<Arc<List>, Unserved> {
        // by path too: two lists may have the same entries (a filter's value that every record
        // takes) but not the same url
        let mut hasher = blake3::Hasher::new();
        hasher.update(all_hash.as_bytes()).update(all_path.as_bytes());
        let key = CacheKey::List(*hasher.finalize().as_bytes());
        if let Some(Item::List(list)) = self.cache.get(&key) {
            return Ok(list);
        }
        let shared = || {
            let flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            flights.lists.get(&key).and_then(std::sync::Weak::upgrade)
        };
        if let Some(list) = shared() {
            return Ok(list);
        }
        let _parsing = self.list_parse.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(list) = self.cache.get(&key).and_then(|item| if let Item::List(l) = item { Some(l) } else { None })
        {
            return Ok(list);
        }
        if let Some(list) = shared() {
            return Ok(list);
        }
        let all = self.read(all_path, all_hash)?;
        let url = layout::list_url(&self.base_url, segment);
        let list = parse_list(&all.body, url, count, self.links, self.pretty).map_err(|why| Unserved {
            path: all_path.to_string(),
            detail: format!("{}: {why}", self.dir.join(all_path).display()),
            busy: false,
        })?;
        let list = Arc::new(list);
        if self.cache.would_hold(list.bytes()) {
            self.cache.insert(key, Item::List(list.clone()), list.bytes());
        } else {
            let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            flights.lists.retain(|_, held| held.strong_count() > 0);
            flights.lists.insert(key, Arc::downgrade(&list));
        }
        Ok(list)
    }
}

/// What repairs a tree whose manifest the server refuses: a plain build trusts the tree it left
/// (docs/builds.md), `--verify` writes every file the data gives and the manifest anew.
const REPAIR: &str = "repair the tree with `gen build --verify` (a plain `gen build` trusts the tree in place)";

/// The error for a manifest of `dir` that lists a path twice ([`ListedTwice`]): which path, and
/// why. The one way a build wrote that was a resource named as a document the tree keeps
/// itself (`meta`), which `gen check` now refuses: then the resource is named.
fn listed_twice(dir: &Path, twice: &ListedTwice) -> anyhow::Error {
    let mut found = None;
    let read = Manifest::read_each_file(dir, |path, _| {
        if found.is_none() && twice.is(path) {
            found = Some(path.to_string());
        }
        Ok(())
    });
    let resources = read.map(|(manifest, _)| manifest.resources).unwrap_or_default();
    let manifest = dir.join(MANIFEST_FILE);
    let Some(path) = found else {
        return anyhow::anyhow!("{} lists a file twice, which no build does: {REPAIR}", manifest.display());
    };
    let reserved = layout::RESERVED_SEGMENTS
        .iter()
        .find(|(segment, _)| layout::list_path(segment) == path && resources.contains_key(*segment));
    match reserved {
        Some((segment, what)) => anyhow::anyhow!(
            "{} lists {path} twice: the tree was built from data holding a resource named {segment:?}, whose list \
             took the path of {what}. gen refuses that name now (`gen check` reports it at data/{segment}): \
             rename the resource (e.g. {segment}-records), then run `gen build --verify`",
            manifest.display()
        ),
        None => anyhow::anyhow!(
            "{} lists {path} twice, which no build does (edited by hand, or written by another tool): {REPAIR}",
            manifest.display()
        ),
    }
}

/// The entries of a list from its whole-list page `all`, checked: `count` entries (when given:
/// the manifest's count of a resource), and laid out as this gen renders pages (so that the pages
/// computed from it are the bytes a build writes).
fn parse_list(all: &[u8], url: String, count: Option<u64>, links: LinkStyle, pretty: bool) -> Result<List, String> {
    #[derive(serde::Deserialize)]
    struct AllPage<'a> {
        count: u64,
        #[serde(borrow)]
        results: Vec<Entry<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Entry<'a> {
        #[serde(borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        url: std::borrow::Cow<'a, str>,
    }
    let parsed: AllPage = serde_json::from_slice(all).map_err(|e| format!("not a list page: {e}; {REPAIR}"))?;
    let count = count.unwrap_or(parsed.count);
    if parsed.count != count || parsed.results.len() as u64 != count {
        return Err(format!(
            "holds {} entries (count {}) but {MANIFEST_FILE} says {count}: {REPAIR}",
            parsed.results.len(),
            parsed.count
        ));
    }
    let mut list = List {
        url,
        entries: Vec::with_capacity(all.len()),
        ends: Vec::with_capacity(parsed.results.len()),
        sha256: std::sync::OnceLock::new(),
    };
    for entry in &parsed.results {
        list.entries.extend_from_slice(&paging::render_entry(entry.name.as_deref(), &entry.url, pretty));
        list.ends.push(list.entries.len());
    }
    list.entries.shrink_to_fit();
    if render(&list, Page { offset: 0, limit: count.max(1) }, links, pretty) != all {
        return Err("not laid out as this gen renders pages: rebuild with this version's `gen build`".to_string());
    }
    Ok(list)
}

/// Renders a page of `list` as `gen build` does (see [`paging::render_shown_page`]).
pub(super) fn render(list: &List, page: Page, links: LinkStyle, pretty: bool) -> Vec<u8> {
    render_linked(list, page, &paging::ListLinks::of_list(&list.url, links), pretty)
}

/// Renders a page of `list` linked as `links` says, as `gen build` does.
pub(super) fn render_linked(list: &List, page: Page, links: &paging::ListLinks, pretty: bool) -> Vec<u8> {
    let count = list.count();
    paging::render_shown_page(count, page.range(count).map(|i| list.entry(i)), links, page, pretty)
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
pub(crate) enum Key<'a> {
    /// Serves it under this key: `api/v2/berry/1/index.json` → `api/v2/berry/1`, other JSON
    /// files (`api/v2/openapi.json`) by their own path.
    Serve(&'a str),
    /// Leaves it out: not JSON, or not under `api/v2/`.
    Skip,
    /// Refuses the whole tree: a path no build writes (`..`, empty or odd segments), so that no
    /// manifest can make the server read outside the tree.
    Refuse,
}

/// Classifies a path listed in the manifest: refused unless it has the shape of a tree path,
/// else served under its [`layout::key_of`] when it has one.
pub(crate) fn classify(path: &str) -> Key<'_> {
    if !crate::tree::layout::is_tree_path(path) {
        return Key::Refuse;
    }
    match layout::key_of(path) {
        Some(key) => Key::Serve(key),
        None => Key::Skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_tree_paths() {
        let serve = Key::Serve;
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
        assert_eq!(doc.compress(), 0);
        assert!(doc.gzip().is_none());
        let body = vec![b'a'; 10_000];
        let big = Doc::new(body.clone(), &blake3::hash(&body));
        assert!(big.gzip().is_none(), "not compressed until asked");
        assert!(big.compress() > 0);
        assert_eq!(big.compress(), 0, "once");
        assert!(big.gzip().unwrap().len() < 1000);
        assert_ne!(big.etag, big.etag_gzip);
        assert_eq!(big.etag, format!("\"{}\"", blake3::hash(&big.body).to_hex()));
    }
}
