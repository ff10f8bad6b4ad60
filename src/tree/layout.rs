//! The tree's layout: where each document lives, as a path in the tree (`out/`), as a key (the
//! path without `/index.json`, what the server and the hosts look documents up by) and as a url.
//! Every other module asks here; no other module spells `api/v2` or `_pages`.
//!
//! ```text
//! api/v2/index.json                              the root index
//! api/v2/meta/index.json, api/v2/openapi.json    what the tree holds; its OpenAPI document
//!                                                (`meta` and `bulk-data` are no resource's: RESERVED_SEGMENTS)
//! api/v2/<segment>/index.json                    a list's first page (offset 0, limit 20)
//! api/v2/<segment>/_pages/<limit>/<offset>/...   precomputed pages; _pages/all/ the whole list
//! api/v2/<segment>/_names/index.json            the names document, for `?q=` (see `search`)
//! api/v2/<segment>/_filters/<field>/...          a declared filter's values and lists (see `filters`)
//! api/v2/<segment>/<id or name>/index.json       a record
//! api/v2/<segment>/<id or name>/<sub>/index.json a sub-document of a record
//! api/v2/bulk-data/index.json                    the bulk-data files of every resource (see `bulk`)
//! api/v2/bulk-data/<segment>-<hash>.ndjson.gz    one resource's records, gzip'd NDJSON
//! ```

use std::fmt::Display;

/// The folder of the API in the tree, and the key of the root index.
pub(crate) const API_ROOT: &str = "api/v2";

/// How every url path of the API starts.
pub(crate) const API_PREFIX: &str = "/api/v2/";

/// Folder, inside a resource's folder, that holds the precomputed page files. The underscore
/// cannot appear in a record name, so it never collides with a record path.
pub(crate) const PAGES_DIR: &str = "_pages";

/// Folder, inside a resource's folder, of its names document (see `src/search.rs`).
pub(crate) const NAMES_DIR: &str = "_names";

/// Folder, inside a resource's folder, of its declared filters' files (see `src/filters.rs`).
pub(crate) const FILTERS_DIR: &str = "_filters";

/// Name of the page file folder holding the whole list (offset 0 with any limit ≥ count).
pub(crate) const ALL_PAGE: &str = "all";

/// The page size when a request gives none (or 0), as the public API's.
pub(crate) const DEFAULT_PAGE_SIZE: u64 = 20;

/// The file every document of the tree is, inside its folder.
pub(crate) const DOCUMENT_FILE: &str = "index.json";

/// The file of the document served at `key` (`api/v2/berry/1` → `api/v2/berry/1/index.json`):
/// every document of the API is JSON in its folder's `index.json`, but the OpenAPI document
/// ([`OPENAPI_PATH`]). The one place that spells it; [`key_of`] is its inverse.
pub(crate) fn document_path(key: &str) -> String {
    format!("{key}/{DOCUMENT_FILE}")
}

/// The root index.
pub(crate) const ROOT_PATH: &str = "api/v2/index.json";

/// The segment of the meta document (`/api/v2/meta/`): no resource may take it.
pub(crate) const META_SEGMENT: &str = "meta";

/// The key of the meta document, which describes the tree (generator, data hash, build date).
pub(crate) const META_KEY: &str = "api/v2/meta";

/// The meta document.
pub(crate) const META_PATH: &str = "api/v2/meta/index.json";

/// The OpenAPI document of the tree (a file of its own, not a folder's `index.json`).
pub(crate) const OPENAPI_PATH: &str = "api/v2/openapi.json";

/// The segment of the bulk-data index (`/api/v2/bulk-data/`): no resource may take it.
pub(crate) const BULK_SEGMENT: &str = "bulk-data";

/// The names the tree takes for its own documents directly below `api/v2/`, each with what it
/// is there: a resource of that name would have its list written at that document's path (the
/// manifest would list the path twice), so the data check refuses them ([`reserved_segment`]).
/// The other names the layout writes below `api/v2/` (`index.json`, `openapi.json`) hold a `.`,
/// which no segment does.
pub(crate) const RESERVED_SEGMENTS: &[(&str, &str)] = &[
    (META_SEGMENT, "the tree's meta document (generator, data hash, build date)"),
    (BULK_SEGMENT, "the bulk-data index, which lists every resource's bulk-data file (docs/tree.md)"),
];

/// How the names of the folders the layout writes inside a resource's folder start
/// ([`PAGES_DIR`], [`NAMES_DIR`], [`FILTERS_DIR`]): no segment, record name or sub-document
/// name may start so (their `[a-z0-9-]` never does).
pub(crate) const RESERVED_PREFIX: &str = "_";

/// Why `segment` cannot name a resource, when the tree reserves it: what the tree keeps at
/// `/api/v2/<segment>/` ([`RESERVED_SEGMENTS`]), or that names starting with
/// [`RESERVED_PREFIX`] are the layout's own folders. The one rule the data check applies.
pub(crate) fn reserved_segment(segment: &str) -> Option<String> {
    if let Some((_, what)) = RESERVED_SEGMENTS.iter().find(|(name, _)| *name == segment) {
        return Some(format!("{API_PREFIX}{segment}/ is {what}"));
    }
    segment.starts_with(RESERVED_PREFIX).then(|| {
        format!(
            "names starting with {RESERVED_PREFIX:?} are the folders gen writes inside a resource \
             ({PAGES_DIR}, {NAMES_DIR}, {FILTERS_DIR})"
        )
    })
}

/// The key of the bulk-data index.
pub(crate) const BULK_KEY: &str = "api/v2/bulk-data";

/// The bulk-data index: one entry per resource, with its file's url, size and hash.
pub(crate) const BULK_INDEX_PATH: &str = "api/v2/bulk-data/index.json";

/// How a bulk-data file's name ends.
pub(crate) const BULK_SUFFIX: &str = ".ndjson.gz";

/// A resource's bulk-data file, named by its content's hash (`hash16`: the first 16 hex digits
/// of the SHA-256 of its bytes): `api/v2/bulk-data/<segment>-<hash16>.ndjson.gz`.
pub(crate) fn bulk_file_path(segment: &str, hash16: &str) -> String {
    format!("{BULK_KEY}/{segment}-{hash16}{BULK_SUFFIX}")
}

/// True when `path` (a tree path, or a key: they are the same for these files) names a
/// bulk-data file: `api/v2/bulk-data/<name>.ndjson.gz`, one level below the folder.
pub(crate) fn is_bulk_file(path: &str) -> bool {
    path.strip_prefix(BULK_KEY)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|name| !name.contains('/') && name.len() > BULK_SUFFIX.len() && name.ends_with(BULK_SUFFIX))
}

/// The key of a resource's list: `api/v2/<segment>`.
pub(crate) fn list_key(segment: &str) -> String {
    format!("{API_ROOT}/{segment}")
}

/// A list's first page: `api/v2/<segment>/index.json`.
pub(crate) fn list_path(segment: &str) -> String {
    document_path(&list_key(segment))
}

/// A record, by id or by name: `api/v2/<segment>/<key>/index.json`.
pub(crate) fn record_path(segment: &str, key: impl Display) -> String {
    document_path(&format!("{API_ROOT}/{segment}/{key}"))
}

/// A record's sub-document: `api/v2/<segment>/<key>/<name>/index.json`.
pub(crate) fn sub_document_path(segment: &str, key: impl Display, name: &str) -> String {
    document_path(&format!("{API_ROOT}/{segment}/{key}/{name}"))
}

/// The folder of a list's page files: `api/v2/<segment>/_pages/`.
#[cfg(test)]
pub(crate) fn pages_prefix(segment: &str) -> String {
    format!("{API_ROOT}/{segment}/{PAGES_DIR}/")
}

/// The key of the page file holding a whole list: `api/v2/<segment>/_pages/all`.
pub(crate) fn all_page_key(segment: &str) -> String {
    format!("{API_ROOT}/{segment}/{PAGES_DIR}/{ALL_PAGE}")
}

/// The page file holding a whole list.
pub(crate) fn all_page_path(segment: &str) -> String {
    document_path(&all_page_key(segment))
}

/// The key of a resource's names document: `api/v2/<segment>/_names`.
pub(crate) fn names_key(segment: &str) -> String {
    format!("{API_ROOT}/{segment}/{NAMES_DIR}")
}

/// The file of a resource's names document: `api/v2/<segment>/_names/index.json`.
pub(crate) fn names_path(segment: &str) -> String {
    document_path(&names_key(segment))
}

/// The folder a declared filter's name or value is written under (see `src/filters.rs`): its bytes `a-z`, `0-9` and `-` as they
/// are, every other byte (`_` and `.` too) as `_` and two lower-case hex digits, and the empty
/// text as `_`. Different texts have different folders, and no folder is `.` or `..` or holds a
/// `/`: a value such as `../../etc` is the folder `_2e_2e_2f_2e_2e_2fetc`.
pub(crate) fn folder_name(text: &str) -> String {
    if text.is_empty() {
        return "_".to_string();
    }
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

/// The key of the values document of `segment`'s filter `field`:
/// `api/v2/<segment>/_filters/<field>` (the field's [`folder_name`]).
pub(crate) fn filter_values_key(segment: &str, field: &str) -> String {
    format!("{API_ROOT}/{segment}/{FILTERS_DIR}/{}", folder_name(field))
}

/// The file of the values document of `segment`'s filter `field`.
pub(crate) fn filter_values_path(segment: &str, field: &str) -> String {
    document_path(&filter_values_key(segment, field))
}

/// The list of the records of `segment` whose `field` takes `value`, named as a list below
/// `api/v2/` (`<segment>/_filters/<field>/<value>`): every function here that takes a segment
/// ([`list_path`], [`page_path`], [`all_page_path`], [`list_url`]) takes it too.
pub(crate) fn filter_list(segment: &str, field: &str, value: &str) -> String {
    format!("{segment}/{FILTERS_DIR}/{}/{}", folder_name(field), folder_name(value))
}

/// Shard `k` of a split names document: `api/v2/<segment>/_names/<k>/index.json`.
pub(crate) fn names_shard_path(segment: &str, k: usize) -> String {
    document_path(&format!("{}/{k}", names_key(segment)))
}

/// The url of shard `k` of a split names document: `<origin>/api/v2/<segment>/_names/<k>/`.
pub(crate) fn names_shard_url(origin: &str, segment: &str, k: usize) -> String {
    format!("{origin}{API_PREFIX}{segment}/{NAMES_DIR}/{k}/")
}

/// The folder of the page of `limit` entries from `offset`, relative to the resource's folder:
/// `_pages/<limit>/<offset>/`.
pub(crate) fn page_dir(limit: u64, offset: u64) -> String {
    format!("{PAGES_DIR}/{limit}/{offset}/")
}

/// One page's file: `api/v2/<segment>/_pages/<limit>/<offset>/index.json`.
pub(crate) fn page_path(segment: &str, limit: u64, offset: u64) -> String {
    document_path(&format!("{API_ROOT}/{segment}/{PAGES_DIR}/{limit}/{offset}"))
}

/// The key a tree path is served under (the path without `/index.json`), when the path is a
/// document of the API: a JSON file under `api/v2/`, or a bulk-data file (its own key).
pub(crate) fn key_of(path: &str) -> Option<&str> {
    let under_api = path.strip_prefix(API_ROOT).is_some_and(|rest| rest.starts_with('/'));
    let served = path.ends_with(".json") || is_bulk_file(path);
    (under_api && served).then(|| path.strip_suffix(DOCUMENT_FILE).and_then(|p| p.strip_suffix('/')).unwrap_or(path))
}

/// The resource, key and sub-document name of the document at `path`, when `path` has the shape
/// of a record's or a sub-document's ([`record_path`], [`sub_document_path`]; their inverse):
/// `api/v2/berry/3/index.json` → `("berry", "3", None)`,
/// `api/v2/creature/132/encounters/index.json` → `("creature", "132", Some("encounters"))`;
/// `None` for a path of any other shape. The shape only: the layout's own folders of that shape
/// (`_names/`, `_pages/all/`, `_filters/<field>/`) give their folder as the key, which is no
/// record's id nor name.
pub(crate) fn record_document(path: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = path.strip_prefix(API_ROOT)?.strip_prefix('/')?.strip_suffix(DOCUMENT_FILE)?.strip_suffix('/')?;
    let mut parts = rest.split('/');
    let (segment, key, name) = (parts.next()?, parts.next()?, parts.next());
    parts.next().is_none().then_some((segment, key, name))
}

/// True when `path` has the shape of a path a build writes: `/`-separated segments of
/// `[a-z0-9._-]`, none empty or made of dots only. The server and the host configurations
/// read only such paths of a manifest, so that no manifest can lead them outside the tree.
pub(crate) fn is_tree_path(path: &str) -> bool {
    path.split('/').all(|part| {
        let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b);
        !part.is_empty() && part.bytes().all(allowed) && !part.bytes().all(|b| b == b'.')
    })
}

/// True when `path` names a file a build writes into the tree: a tree path
/// ([`is_tree_path`]) under `api/v2/`. The rule for every path a manifest or
/// a publish marker lists: `manifest.json`, the publish marker and whatever else lies beside
/// the API (`index.html`, `other-site/app.js`) are never such a path, so no manifest can list
/// them and no publish deletes them.
pub(crate) fn is_tree_file(path: &str) -> bool {
    is_tree_path(path) && path.strip_prefix(API_ROOT).is_some_and(|rest| rest.starts_with('/'))
}

/// The tree paths of the documents a document links to: every url path under `/api/v2/` in its
/// bytes (`"/api/v2/berry/3/"`, or after the base URL), as the file that answers it
/// (`api/v2/berry/3/index.json`); a query string or fragment is dropped. Only paths that pass
/// [`is_tree_file`] are kept.
pub(crate) fn linked_files(document: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = document;
    while let Some(at) = find(rest, API_PREFIX.as_bytes()) {
        let after = &rest[at + 1..];
        let end = after.iter().position(|b| b"\"?#\\ ".contains(b)).unwrap_or(after.len());
        let link = String::from_utf8_lossy(&after[..end]);
        let path = if link.ends_with('/') { format!("{link}{DOCUMENT_FILE}") } else { link.into_owned() };
        if is_tree_file(&path) {
            found.push(path);
        }
        rest = &after[end..];
    }
    found.sort();
    found.dedup();
    found
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// True when `key` is the root's key or a key under it (`api/v2`, `api/v2/berry`; not `api/v22`).
pub(crate) fn is_api_key(key: &str) -> bool {
    key == API_ROOT || key.strip_prefix(API_ROOT).is_some_and(|rest| rest.starts_with('/'))
}

/// The part of a key below the root (`api/v2/berry/3` → `berry/3`; the root gives "").
pub(crate) fn below_root(key: &str) -> &str {
    key.strip_prefix(API_ROOT).map_or(key, |rest| rest.trim_start_matches('/'))
}

/// The url of the root index on `origin` (a base URL or a served address): `<origin>/api/v2/`.
pub fn root_url(origin: &str) -> String {
    format!("{origin}{API_PREFIX}")
}

/// The url of a list: `<origin>/api/v2/<segment>/`.
pub(crate) fn list_url(origin: &str, segment: &str) -> String {
    format!("{origin}{API_PREFIX}{segment}/")
}

/// The url of a record: `<origin>/api/v2/<segment>/<key>/`.
pub fn record_url(origin: &str, segment: &str, key: impl Display) -> String {
    format!("{origin}{API_PREFIX}{segment}/{key}/")
}

/// The url path of a key: `api/v2/berry` → `/api/v2/berry/`.
pub(crate) fn url_path(key: &str) -> String {
    format!("/{key}/")
}

/// The media type of a JSON document, as every host sends it: the tree's documents, and the
/// error bodies and lock files that are not files of the tree.
pub(crate) const JSON_MEDIA_TYPE: &str = "application/json; charset=utf-8";

/// The media type a host sends with the tree's file at `path` (its `.gz` sibling is the same
/// document, sent with `Content-Encoding: gzip`): [`JSON_MEDIA_TYPE`] for a `.json` file, as
/// every file the tree lists is; `application/octet-stream` for anything else.
pub(crate) fn media_type(path: &str) -> &'static str {
    let path = path.strip_suffix(".gz").unwrap_or(path);
    if path.ends_with(".json") { JSON_MEDIA_TYPE } else { "application/octet-stream" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_keys_and_urls_agree() {
        assert_eq!(record_path("berry", 3), "api/v2/berry/3/index.json");
        assert_eq!(record_path("berry", "cheri"), "api/v2/berry/cheri/index.json");
        assert_eq!(sub_document_path("creature", 132, "encounters"), "api/v2/creature/132/encounters/index.json");
        assert_eq!(list_path("berry"), "api/v2/berry/index.json");
        assert_eq!(page_path("berry", 20, 40), "api/v2/berry/_pages/20/40/index.json");
        assert_eq!(all_page_path("berry"), "api/v2/berry/_pages/all/index.json");
        assert!(page_path("berry", 20, 40).starts_with(&pages_prefix("berry")));
        for path in [record_path("berry", 3), list_path("berry"), page_path("berry", 20, 40), ROOT_PATH.into()] {
            let key = key_of(&path).unwrap();
            assert_eq!(format!("{key}/{DOCUMENT_FILE}"), path);
            assert_eq!(url_path(key), format!("/{key}/"));
            assert!(is_api_key(key));
        }
        assert_eq!(key_of(META_PATH), Some(META_KEY));
        assert_eq!(key_of(OPENAPI_PATH), Some(OPENAPI_PATH));
        assert_eq!(key_of(&list_path("berry")), Some(list_key("berry").as_str()));
        assert_eq!(record_url("http://h", "berry", 3), "http://h/api/v2/berry/3/");
        assert_eq!(list_url("http://h", "berry"), "http://h/api/v2/berry/");
        assert_eq!(root_url("http://h"), "http://h/api/v2/");
        assert_eq!(below_root("api/v2/berry/3"), "berry/3");
        assert_eq!(below_root(API_ROOT), "");
    }

    #[test]
    fn a_record_or_sub_document_is_read_back_from_its_path() {
        for key in ["3", "-7", "cheri"] {
            assert_eq!(record_document(&record_path("berry", key)), Some(("berry", key, None)));
            let path = sub_document_path("creature", key, "encounters");
            assert_eq!(record_document(&path), Some(("creature", key, Some("encounters"))));
        }
        for path in [
            ROOT_PATH,
            META_PATH,
            OPENAPI_PATH,
            &list_path("berry"),
            &page_path("berry", 20, 40),
            &bulk_file_path("berry", "0123"),
            "api/v2/berry/3/encounters/x/index.json",
            "api/v2/berry/3/index.jsonx",
            "api/v2/berry/3index.json",
            "api/v22/berry/3/index.json",
            "berry/3/index.json",
        ] {
            assert_eq!(record_document(path), None, "{path}");
        }
    }

    #[test]
    fn tree_files_are_under_the_api_and_links_name_them() {
        for path in [ROOT_PATH, META_PATH, OPENAPI_PATH, "api/v2/berry/_pages/20/40/index.json"] {
            assert!(is_tree_file(path), "{path}");
        }
        for path in ["manifest.json", ".gen-publish.json", "index.html", "foreign.txt", "other-site/app.js"] {
            assert!(!is_tree_file(path), "{path}");
        }
        for path in ["api/v2", "api/v2/", "api/v22/x.json", "api/v2/../x.json", "api/v2/Site/Index.HTML"] {
            assert!(!is_tree_file(path), "{path}");
        }
        let doc = br#"{"url": "http://h/api/v2/berry/3/", "next": "/api/v2/berry/_pages/20/20/",
            "list": "/api/v2/berry/?offset=20&limit=20", "spec": "/api/v2/openapi.json", "up": "/api/v2/../x/"}"#;
        assert_eq!(
            linked_files(doc),
            [
                "api/v2/berry/3/index.json",
                "api/v2/berry/_pages/20/20/index.json",
                "api/v2/berry/index.json",
                "api/v2/openapi.json"
            ]
        );
    }

    #[test]
    fn every_name_the_tree_takes_below_the_root_is_reserved_or_no_segment() {
        for path in [ROOT_PATH, META_PATH, OPENAPI_PATH, BULK_INDEX_PATH, &bulk_file_path("berry", "0123")] {
            let first = below_root(path).split('/').next().unwrap();
            let segment = first.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            assert!(!segment || reserved_segment(first).is_some(), "{path}: {first} is free to a resource");
        }
        assert_eq!(list_key(META_SEGMENT), META_KEY);
        assert_eq!(list_key(BULK_SEGMENT), BULK_KEY);
        assert_eq!(list_path(META_SEGMENT), META_PATH);
        for dir in [PAGES_DIR, NAMES_DIR, FILTERS_DIR] {
            assert!(reserved_segment(dir).is_some(), "{dir}");
        }
        for free in ["berry", "metadata", "openapi", "index", "bulk"] {
            assert_eq!(reserved_segment(free), None, "{free}");
        }
    }

    #[test]
    fn only_documents_under_the_api_have_keys() {
        for path in ["manifest.json", "api/v2x/a/index.json", "api/index.json", "api/v2/berry/notes.txt", "api/v2"] {
            assert_eq!(key_of(path), None, "{path}");
        }
        assert!(is_api_key("api/v2") && is_api_key("api/v2/berry"));
        assert!(!is_api_key("api/v22") && !is_api_key("api") && !is_api_key("api/v2x/berry"));
        for key in ["", "api", "api/v22", "apix/v2", "/api/v2"] {
            assert!(!is_api_key(key), "{key}");
        }
    }
}
