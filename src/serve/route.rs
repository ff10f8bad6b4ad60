//! Routing: a request target (path and query, as the client sent them) → what it asks for.
//!
//! Pure and syntactic: no I/O and no tree. A path is accepted only when every segment, once
//! percent-decoded, is made of `[A-Za-z0-9_.-]` and is not all dots, so `.`, `..`, `%2e%2e`,
//! encoded slashes, backslashes, NUL and empty segments (`//`, absolute paths) can never name
//! a document: the result is a key into the in-memory index, never a file system path.

use crate::paging::Page;
use crate::tree::layout;

/// What a request target asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A document by its key: the path lower-cased, without slashes at either end
    /// (`api/v2/berry/1`, `api/v2/berry/_pages/20/40`, `api/v2/openapi.json`). The query is
    /// ignored.
    Doc(String),
    /// `/api/v2/<segment>/`: a list page, or (for `meta`) a document. `page` is the page the
    /// query asks for, or the parameter that is malformed.
    List {
        /// The resource.
        segment: String,
        /// The page asked for, or the malformed parameter.
        page: Result<Page, BadParam>,
    },
    /// Nothing the tree can hold: outside `/api/v2/`, or a segment with other characters.
    NotFound,
}

/// A malformed `limit` or `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParam {
    /// `limit` or `offset`.
    pub name: &'static str,
    /// The value as sent (percent-decoded).
    pub value: String,
}

/// Routes a request target such as `/api/v2/Berry/?limit=5&offset=10`.
pub fn route(target: &str) -> Route {
    let target = strip_origin(target);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let Some(key) = normalize(path) else { return Route::NotFound };
    let parts = key.split('/').count();
    // Segments of lists are `[a-z0-9-]`: a dotted third part is a file such as openapi.json.
    if parts == 3 && !key.contains('.') {
        let segment = layout::below_root(&key).to_string();
        return Route::List { segment, page: page_query(query) };
    }
    Route::Doc(key)
}

/// Drops `http://host:port` from an absolute-form target (which HTTP/1.1 servers must accept).
pub(crate) fn strip_origin(target: &str) -> &str {
    let lower = |n: usize| target.get(..n).map(str::to_ascii_lowercase);
    let scheme = if lower(7).as_deref() == Some("http://") {
        7
    } else if lower(8).as_deref() == Some("https://") {
        8
    } else {
        return target;
    };
    let rest = &target[scheme..];
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
        _ => "/",
    }
}

/// The index key of a path, or `None` when the path cannot name a document of the tree.
///
/// One trailing slash is optional; segments are percent-decoded one by one (so `%2F` stays
/// inside its segment and is refused) and lower-cased.
pub(crate) fn normalize(path: &str) -> Option<String> {
    let rest = path.strip_prefix('/')?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut key = String::with_capacity(rest.len());
    for (i, part) in rest.split('/').enumerate() {
        let decoded = percent_decode(part)?;
        let allowed = decoded.iter().all(|&b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !allowed || decoded.iter().all(|&b| b == b'.') {
            return None;
        }
        if i > 0 {
            key.push('/');
        }
        key.extend(decoded.iter().map(|b| char::from(b.to_ascii_lowercase())));
    }
    layout::is_api_key(&key).then_some(key)
}

/// Decodes `%XX` escapes; `None` when an escape is malformed.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Decodes a query key or value for comparison and display (malformed escapes stay as sent).
pub(crate) fn decode_lossy(text: &str) -> String {
    match percent_decode(text) {
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => text.to_string(),
    }
}

/// The page a list query asks for. Only `limit` and `offset` count (the last one given wins,
/// as the public API reads them); other parameters are ignored.
pub(crate) fn page_query(query: &str) -> Result<Page, BadParam> {
    let mut limit = None;
    let mut offset = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode_lossy(key).as_str() {
            "limit" => limit = Some(value),
            "offset" => offset = Some(value),
            _ => {}
        }
    }
    let limit = number("limit", limit)?;
    let offset = number("offset", offset)?;
    Ok(Page::requested(offset, limit))
}

/// The search text a list query asks for: the last `q` given, percent-decoded with `+` as a
/// space (as HTML forms send it); `None` when there is no `q` or it is empty (the whole list).
pub(crate) fn search_query(target: &str) -> Option<String> {
    let query = strip_origin(target).split_once('?').map_or("", |(_, q)| q);
    let mut q = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if decode_lossy(key) == "q" {
            q = Some(decode_lossy(&value.replace('+', " ")));
        }
    }
    q.filter(|q| !q.is_empty())
}

/// The parameters of a list query but `limit`, `offset`, `q` and `format`, in the order given, each name
/// and value percent-decoded (a value with `+` as a space, as HTML forms send it); a parameter
/// with an empty value is left out (as an empty `q` is the whole list).
pub(crate) fn filter_params(target: &str) -> Vec<(String, String)> {
    let query = strip_origin(target).split_once('?').map_or("", |(_, q)| q);
    let mut out = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode_lossy(key);
        let value = decode_lossy(&value.replace('+', " "));
        if !crate::filters::RESERVED.contains(&name.as_str()) && !value.is_empty() {
            out.push((name, value));
        }
    }
    out
}

/// A parameter's value: absent or empty is `None`; otherwise digits only, fitting a u64.
fn number(name: &'static str, value: Option<&str>) -> Result<Option<u64>, BadParam> {
    let Some(value) = value.map(decode_lossy).filter(|v| !v.is_empty()) else { return Ok(None) };
    if value.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = value.parse::<u64>()
    {
        return Ok(Some(n));
    }
    Err(BadParam { name, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(segment: &str, offset: u64, limit: u64) -> Route {
        Route::List { segment: segment.to_string(), page: Ok(Page { offset, limit }) }
    }

    fn bad(segment: &str, name: &'static str, value: &str) -> Route {
        Route::List { segment: segment.to_string(), page: Err(BadParam { name, value: value.to_string() }) }
    }

    fn doc(key: &str) -> Route {
        Route::Doc(key.to_string())
    }

    #[test]
    fn routes() {
        let table: Vec<(&str, Route)> = vec![
            // root, with and without the slash, query ignored
            ("/api/v2/", doc("api/v2")),
            ("/api/v2", doc("api/v2")),
            ("/api/v2/?limit=abc", doc("api/v2")),
            ("/API/V2/", doc("api/v2")),
            // lists
            ("/api/v2/berry/", list("berry", 0, 20)),
            ("/api/v2/berry", list("berry", 0, 20)),
            ("/api/v2/Berry/", list("berry", 0, 20)),
            ("/api/v2/meta/", list("meta", 0, 20)),
            ("/api/v2/berry/?limit=5", list("berry", 0, 5)),
            ("/api/v2/berry/?offset=40", list("berry", 40, 20)),
            ("/api/v2/berry/?offset=2&limit=2", list("berry", 2, 2)),
            ("/api/v2/berry/?limit=2&offset=2", list("berry", 2, 2)),
            ("/api/v2/berry?limit=2&offset=2", list("berry", 2, 2)),
            ("/api/v2/berry/?limit=0", list("berry", 0, 20)),
            ("/api/v2/berry/?limit=&offset=", list("berry", 0, 20)),
            ("/api/v2/berry/?limit&offset", list("berry", 0, 20)),
            ("/api/v2/berry/?limit=007", list("berry", 0, 7)),
            ("/api/v2/berry/?format=json&limit=3&x", list("berry", 0, 3)),
            ("/api/v2/berry/?limit=3&limit=4", list("berry", 0, 4)),
            ("/api/v2/berry/?limit=100000", list("berry", 0, 100000)),
            ("/api/v2/berry/?offset=18446744073709551615", list("berry", u64::MAX, 20)),
            ("/api/v2/berry/?%6cimit=%35", list("berry", 0, 5)),
            ("/api/v2/berry/?LIMIT=5", list("berry", 0, 20)),
            ("/api/v2/berry/?", list("berry", 0, 20)),
            ("/api/v2/berry/?&&limit=1&&", list("berry", 0, 1)),
            // malformed parameters
            ("/api/v2/berry/?limit=abc", bad("berry", "limit", "abc")),
            ("/api/v2/berry/?limit=-1", bad("berry", "limit", "-1")),
            ("/api/v2/berry/?limit=1e3", bad("berry", "limit", "1e3")),
            ("/api/v2/berry/?limit=10abc", bad("berry", "limit", "10abc")),
            ("/api/v2/berry/?limit=+5", bad("berry", "limit", "+5")),
            ("/api/v2/berry/?limit=%2B5", bad("berry", "limit", "+5")),
            ("/api/v2/berry/?limit=%20", bad("berry", "limit", " ")),
            ("/api/v2/berry/?limit=1.0", bad("berry", "limit", "1.0")),
            ("/api/v2/berry/?limit=18446744073709551616", bad("berry", "limit", "18446744073709551616")),
            ("/api/v2/berry/?offset=-5", bad("berry", "offset", "-5")),
            ("/api/v2/berry/?offset=x&limit=y", bad("berry", "limit", "y")),
            ("/api/v2/berry/?limit=%zz", bad("berry", "limit", "%zz")),
            // records and other documents
            ("/api/v2/berry/1/", doc("api/v2/berry/1")),
            ("/api/v2/berry/1", doc("api/v2/berry/1")),
            ("/api/v2/berry/1/?limit=abc", doc("api/v2/berry/1")),
            ("/api/v2/Berry/CHERI", doc("api/v2/berry/cheri")),
            ("/api/v2/move/-1/", doc("api/v2/move/-1")),
            ("/api/v2/move/0/", doc("api/v2/move/0")),
            ("/api/v2/creature/7/encounters", doc("api/v2/creature/7/encounters")),
            ("/api/v2/berry/_pages/20/40/", doc("api/v2/berry/_pages/20/40")),
            ("/api/v2/berry/_pages/all", doc("api/v2/berry/_pages/all")),
            ("/api/v2/openapi.json", doc("api/v2/openapi.json")),
            ("/api/v2/OpenAPI.json/?limit=x", doc("api/v2/openapi.json")),
            ("/api/v2/berry/1/index.json", doc("api/v2/berry/1/index.json")),
            ("/api/v2/berry/%63heri/", doc("api/v2/berry/cheri")),
            // absolute-form targets
            ("http://example.org/api/v2/berry/", list("berry", 0, 20)),
            ("HTTP://example.org:8080/api/v2/berry/1", doc("api/v2/berry/1")),
            ("http://example.org", Route::NotFound),
            // outside the API, or not a path the tree can hold
            ("/", Route::NotFound),
            ("", Route::NotFound),
            ("*", Route::NotFound),
            ("/api/", Route::NotFound),
            ("/api/v1/berry/", Route::NotFound),
            ("/api/v2x/", Route::NotFound),
            ("/favicon.ico", Route::NotFound),
            ("api/v2/", Route::NotFound),
            ("/api/v2//", Route::NotFound),
            ("/api/v2/berry//", Route::NotFound),
            ("//api/v2/", Route::NotFound),
            ("/api/v2/.../", Route::NotFound),
            // traversal attempts
            ("/api/v2/../../etc/passwd", Route::NotFound),
            ("/api/v2/berry/../../manifest", Route::NotFound),
            ("/api/v2/berry/..", Route::NotFound),
            ("/api/v2/berry/../", Route::NotFound),
            ("/api/v2/berry/%2e", Route::NotFound),
            ("/api/v2/berry/.", Route::NotFound),
            ("/api/v2/%2e%2e/%2e%2e/etc/passwd", Route::NotFound),
            ("/api/v2/%2E%2E/", Route::NotFound),
            ("/api/v2/berry%2f..%2f..%2fmanifest", Route::NotFound),
            ("/api/v2/berry%2F1", Route::NotFound),
            ("/api/v2/berry\\..\\..\\manifest", Route::NotFound),
            ("/api/v2/berry/%5c..%5cmanifest", Route::NotFound),
            ("/api/v2/berry/1%00", Route::NotFound),
            ("/api/v2/berry/1\0", Route::NotFound),
            ("/api/v2/berry/%", Route::NotFound),
            ("/api/v2/berry/%4", Route::NotFound),
            ("/etc/passwd", Route::NotFound),
            ("/api/v2/berry/%c3%a9/", Route::NotFound),
            ("/api/v2/berry/é/", Route::NotFound),
            ("/api/v2/berry/a b/", Route::NotFound),
            ("/api/v2/berry/1#x", Route::NotFound),
        ];
        for (target, expected) in table {
            assert_eq!(route(target), expected, "{target:?}");
        }
    }

    #[test]
    fn filter_parameters() {
        let pairs = |target: &str| -> Vec<(String, String)> { filter_params(target) };
        assert!(pairs("/api/v2/x/?limit=2&offset=1&q=a").is_empty());
        assert_eq!(
            pairs("/api/v2/x/?type=fire&limit=2&t%5B%5D.n=a+b%2F..&empty=&flag"),
            [("type".to_string(), "fire".to_string()), ("t[].n".to_string(), "a b/..".to_string())]
        );
    }

    #[test]
    fn search_text() {
        assert_eq!(search_query("/api/v2/berry/"), None);
        assert_eq!(search_query("/api/v2/berry/?q="), None);
        assert_eq!(search_query("/api/v2/berry/?q"), None);
        assert_eq!(search_query("/api/v2/berry/?q=ch&limit=2").as_deref(), Some("ch"));
        assert_eq!(search_query("/api/v2/berry/?q=a&q=b").as_deref(), Some("b"));
        assert_eq!(search_query("/api/v2/berry/?q=a+b%2Bc").as_deref(), Some("a b+c"));
        assert_eq!(search_query("/api/v2/berry/?q=%C3%A9%2F..%2F").as_deref(), Some("é/../"));
        assert_eq!(search_query("/api/v2/berry/?%71=x").as_deref(), Some("x"));
        assert_eq!(search_query("/api/v2/berry/?Q=x"), None);
        assert_eq!(search_query("http://h/api/v2/berry/?q=x").as_deref(), Some("x"));
    }

    #[test]
    fn keys_are_what_the_tree_uses() {
        // a tree file api/v2/<...>/index.json is found under the key api/v2/<...>
        assert_eq!(normalize("/api/v2/berry/1/").as_deref(), Some("api/v2/berry/1"));
        assert_eq!(normalize("/api/v2/berry/_pages/all/").as_deref(), Some("api/v2/berry/_pages/all"));
    }
}
