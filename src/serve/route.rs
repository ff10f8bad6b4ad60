//! Routing: a request target (path and query, as the client sent them) → what it asks for.
//!
//! Pure and syntactic: no I/O and no tree. A path is accepted only when every segment, once
//! percent-decoded, is made of `[A-Za-z0-9_.-]` and is not all dots, so `.`, `..`, `%2e%2e`,
//! encoded slashes, backslashes, NUL and empty segments (`//`, absolute paths) can never name
//! a document: the result is a key into the in-memory index, never a file system path.

use crate::paging::Page;
use crate::tree::layout;

/// A request target, read once: where it goes, and what its query asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    /// The target as the client sent it: path and query.
    pub(crate) text: &'a str,
    /// Where it goes.
    pub route: Route,
    /// What the query asks for (a document ignores it but for `format`; the HTML view shows it).
    pub(crate) query: ListQuery,
}

/// Where a request target goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A document by its key: the path lower-cased, without slashes at either end
    /// (`api/v2/berry/1`, `api/v2/berry/_pages/20/40`, `api/v2/openapi.json`). The query is
    /// ignored.
    Doc(String),
    /// `/api/v2/<segment>/`: a list page (what it asks is the target's [`ListQuery`]), or (for
    /// `meta`) a document.
    List {
        /// The list's segment (`berry`), lower-cased.
        segment: String,
    },
    /// Nothing the tree can hold: outside `/api/v2/`, or a segment with other characters.
    NotFound,
}

/// A list's whole query, from one pass over the parameters: the page, `q`, the filters and the
/// format asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListQuery {
    /// The page asked for, or the parameter that is malformed (answered 400).
    pub(crate) page: Result<Page, BadParam>,
    /// The search text: the last `q` given, percent-decoded with `+` as a space (as HTML forms
    /// send it); `None` when there is no `q` or it is empty (the whole list).
    pub(crate) q: Option<String>,
    /// The filter parameters: every parameter but `limit`, `offset`, `q` and `format`, in the
    /// order given, each name and value percent-decoded (a value with `+` as a space); one with
    /// an empty value is left out (as an empty `q` is the whole list). The list matches them
    /// against its declared filters ([`crate::filters::order_conditions`]).
    pub(crate) conditions: Vec<(String, String)>,
    /// The names of the parameters that are not the list's own (`limit`, `offset`, `q`,
    /// `format`, `format=json` in any case), whatever their value (empty too), percent-decoded,
    /// each once, in the order first given, an empty name left out: those that are no declared
    /// filter are the ones the answer ignored ([`crate::filters::ignored`]).
    pub(crate) params: Vec<String>,
    /// `format=json`, or the format `Accept` chooses.
    pub(crate) format: Format,
    /// The parameters as the HTML view shows them: those before any `#`, each `name=value`
    /// percent-decoded (a value with `+` as a space), in the order sent.
    pub(crate) shown: Vec<String>,
}

/// The format a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Chosen by the request's `Accept` (a browser gets the HTML view).
    Negotiated,
    /// `format=json` (as sent, in any case): JSON, even for a browser.
    Json,
}

/// A malformed `limit` or `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadParam {
    /// `limit` or `offset`.
    pub(crate) name: &'static str,
    /// The value as sent (percent-decoded).
    pub(crate) value: String,
}

/// Routes a request target such as `/api/v2/Berry/?limit=5&offset=10`, reading its query once.
pub fn route(target: &str) -> Target<'_> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = list_query(query, path.contains('#'));
    let route = match normalize(strip_origin(path)) {
        // Segments of lists are `[a-z0-9-]`: a dotted third part is a file such as openapi.json.
        Some(key) if key.split('/').count() == 3 && !key.contains('.') => {
            Route::List { segment: layout::below_root(&key).to_string() }
        }
        Some(key) => Route::Doc(key),
        None => Route::NotFound,
    };
    Target { text: target, route, query }
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

/// Decodes `%XX` escapes; `None` when an escape is malformed (not `%` and two hex digits).
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // two hex digits (RFC 3986): `from_str_radix` alone would take `%+7` too
            let hex = bytes.get(i + 1..i + 3).filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
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

/// Everything `query` asks for, in one pass over its parameters. Only `limit` and `offset` make
/// the page (the last one given wins, as the public API reads them). `hidden`: the path holds a
/// `#`, so the view shows no parameter.
fn list_query(query: &str, hidden: bool) -> ListQuery {
    let (mut limit, mut offset, mut q) = (None, None, None);
    let mut conditions = Vec::new();
    let mut params: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut format = Format::Negotiated;
    let mut shown = Vec::new();
    let mut shows = !hidden;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        if pair.eq_ignore_ascii_case("format=json") {
            format = Format::Json;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode_lossy(key);
        let text = decode_lossy(&value.replace('+', " "));
        if shows {
            // the view shows what comes before a fragment
            let before = pair.split('#').next().unwrap_or("");
            shows = before.len() == pair.len();
            if !before.is_empty() {
                shown.push(shown_pair(before));
            }
        }
        match name.as_str() {
            "limit" => limit = Some(value),
            "offset" => offset = Some(value),
            "q" => q = Some(text),
            _ if crate::filters::RESERVED.contains(&name.as_str()) => {}
            _ => {
                // `FORMAT=JSON` is `format=json`, taken; a parameter without a name is not named
                if !name.is_empty() && !pair.eq_ignore_ascii_case("format=json") && seen.insert(name.clone()) {
                    params.push(name.clone());
                }
                if !text.is_empty() {
                    conditions.push((name, text));
                }
            }
        }
    }
    let page = number("limit", limit).and_then(|limit| Ok(Page::requested(number("offset", offset)?, limit)));
    ListQuery { page, q: q.filter(|q| !q.is_empty()), conditions, params, format, shown }
}

/// A parameter as the HTML view shows it: `name=value` (or `name`), percent-decoded.
fn shown_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some((key, value)) => format!("{}={}", decode_lossy(key), decode_lossy(&value.replace('+', " "))),
        None => decode_lossy(pair),
    }
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

    #[test]
    fn keys_are_what_the_tree_uses() {
        // a tree file api/v2/<...>/index.json is found under the key api/v2/<...>
        assert_eq!(normalize("/api/v2/berry/1/").as_deref(), Some("api/v2/berry/1"));
        assert_eq!(normalize("/api/v2/berry/_pages/all/").as_deref(), Some("api/v2/berry/_pages/all"));
    }

    #[test]
    fn the_view_shows_the_parameters_before_a_fragment() {
        let shown = |target| route(target).query.shown;
        assert_eq!(shown("/api/v2/x/?q=salam%C3%A8che+x&type=fire&flag"), ["q=salamèche x", "type=fire", "flag"]);
        assert_eq!(shown("/api/v2/x/?a=1&b#c&d"), ["a=1", "b"]);
        assert_eq!(shown("/api/v2/x/?a=1&#c"), ["a=1"]);
        assert!(shown("/api/v2/x/#f?a=1").is_empty());
        assert_eq!(route("/api/v2/x/?a=1&b#c&d").query.conditions, [("a".to_string(), "1".to_string())]);
    }
}
