//! The controls of a list page in the HTML view: the count, previous/next, the search box, the
//! page form, the active filters and the filters' values as links.
//!
//! Every control keeps the list's state ([`ListState`]: the page size, `q` and the filters):
//! both forms carry what they do not ask for as hidden fields, and every link is the current
//! state with one thing changed, from the first page. A value link of a field a record takes
//! several values of (a path with `[]`, such as `types[].type.name`) adds its value to the
//! field's current ones (the records that take all of them, as `gen serve` answers two values
//! of one field); a value link of a field a record takes one value of replaces that field's
//! value (two values of it match nothing).

use super::html_escape::escape;
use super::route::{ListQuery, Target};
use super::tree::ServedTree;
use crate::filters::FilterField;
use crate::search::encode_query_value as encode;
use crate::tree::layout::{API_PREFIX, DEFAULT_PAGE_SIZE, PAGES_DIR};
use serde_json::Value;
use std::cmp::Ordering;
use std::fmt::Write as _;

/// What a list page asks for beyond the page: its page size, `q` and its filters.
struct ListState<'a> {
    segment: &'a str,
    limit: u64,
    q: String,
    /// `(field, value)` as given, each once.
    filters: Vec<(String, String)>,
}

impl ListState<'_> {
    /// True when the list is narrowed by `q` or a filter.
    fn narrowed(&self) -> bool {
        !self.q.is_empty() || !self.filters.is_empty()
    }

    /// The first page of the list with this page size, `q` and `filters`:
    /// `/api/v2/<segment>/?limit=&q=&FIELD=VALUE...` (`limit` left out when it is the default).
    fn url(&self, q: &str, filters: &[(String, String)]) -> String {
        self.url_at(&format!("{API_PREFIX}{}/", self.segment), q, filters)
    }

    /// `path` with this page size, `q` and `filters` as its query.
    fn url_at(&self, path: &str, q: &str, filters: &[(String, String)]) -> String {
        let mut params = Vec::new();
        if self.limit != DEFAULT_PAGE_SIZE {
            params.push(format!("limit={}", self.limit));
        }
        if !q.is_empty() {
            params.push(format!("q={}", encode(q)));
        }
        params.extend(filters.iter().map(|(name, value)| format!("{}={}", encode(name), encode(value))));
        let query = if params.is_empty() { String::new() } else { format!("?{}", params.join("&")) };
        format!("{path}{query}")
    }

    /// The page at `offset` of the list with this state: the page size the user asked for,
    /// kept (the JSON's `next` to a last page shrinks it, by the public API's rule).
    /// `?offset=&limit=` first, as the JSON's links write them, then `q` and the filters.
    fn page(&self, offset: u64) -> String {
        let mut query = format!("offset={offset}&limit={}", self.limit);
        if !self.q.is_empty() {
            let _ = write!(query, "&q={}", encode(&self.q));
        }
        for (name, value) in &self.filters {
            let _ = write!(query, "&{}={}", encode(name), encode(value));
        }
        format!("{API_PREFIX}{}/?{query}", self.segment)
    }

    /// The link that sets `field` to `value`: added to the field's values, or replacing them.
    fn with_value(&self, field: &FilterField, value: &str) -> String {
        let mut filters = self.filters.clone();
        if !takes_several(field) {
            filters.retain(|(name, _)| *name != field.name);
        }
        filters.push((field.name.clone(), value.to_string()));
        self.url(&self.q, &filters)
    }

    /// The link without the filter `(name, value)`.
    fn without(&self, name: &str, value: &str) -> String {
        let filters: Vec<_> = self.filters.iter().filter(|(n, v)| !(n == name && v == value)).cloned().collect();
        self.url(&self.q, &filters)
    }

    /// The hidden fields that carry the filters (and `q` when `with_q`) through a form.
    fn hidden(&self, with_q: bool) -> String {
        let mut out = String::new();
        let q = [("q".to_string(), self.q.clone())];
        let carried = q.iter().filter(|(_, q)| with_q && !q.is_empty()).chain(&self.filters);
        for (name, value) in carried {
            let _ = write!(out, "<input type=\"hidden\" name=\"{}\" value=\"{}\">", escape(name), escape(value));
        }
        out
    }
}

/// True when a record can take several values of `field`: its path steps into an array.
fn takes_several(field: &FilterField) -> bool {
    field.path.contains("[]")
}

/// The request as the view shows it: the path, then the query as sent, each name and value
/// percent-decoded (`/api/v2/creature/?type=fire&q=salamèche`, see [`ListQuery::shown`]).
pub(super) fn shown_request(path: &str, query: &ListQuery) -> String {
    if query.shown.is_empty() { path.to_string() } else { format!("{path}?{}", query.shown.join("&")) }
}

/// Count, previous/next, the forms, the active filters and (on a resource's own list) the
/// filters' values of a list page; `parts` are the key's segments, `map` the page's JSON, `href`
/// the link of a url of the tree.
pub(super) fn controls(
    tree: &ServedTree,
    target: &Target<'_>,
    parts: &[&str],
    segment: &str,
    map: &serde_json::Map<String, Value>,
    href: &dyn Fn(&str) -> Option<String>,
) -> String {
    let count = map.get("count").and_then(Value::as_u64).unwrap_or(0);
    let shown = map.get("results").and_then(Value::as_array).map_or(0, Vec::len) as u64;
    let (offset, limit) = page_asked(target, parts, count);
    let declared = tree.filters(segment);
    let state = state_of(target, segment, limit, declared);
    let mut out = String::new();
    let range = match shown {
        0 => "no entries".to_string(),
        1 => format!("entry {}", offset.saturating_add(1)),
        _ => format!("entries {}–{}", offset.saturating_add(1), offset.saturating_add(shown)),
    };
    // "1 of 58 matches", "2 of 58 match"
    let of_all = match tree.count(segment) {
        Some(all) if state.narrowed() => format!(" of {all} {}", if count == 1 { "matches" } else { "match" }),
        _ => " in all".to_string(),
    };
    let _ = write!(
        out,
        "<div class=\"list\">\n<p class=\"count\"><strong>{count}</strong>{of_all} · {range}</p>\n<p class=\"pager\">"
    );
    // on the list itself, the pager keeps the page size asked for (a value list's own links
    // name its pages)
    let own = |offset: u64| (parts.len() == 3).then(|| state.page(offset));
    let links = [own(offset.saturating_sub(limit)), own(offset.saturating_add(limit))];
    out.push_str(&pager_buttons(map, href, &links));
    out.push_str("</p>\n");
    // The search box (`?q=`, see docs/tree.md) keeps the page size and the filters; the page
    // form keeps `q` and the filters.
    let _ = write!(
        out,
        "<form class=\"search\" method=\"get\" action=\"{API_PREFIX}{segment}/\">\
         <label>name contains <input type=\"search\" name=\"q\" value=\"{}\" size=\"{size}\"></label> \
         <input type=\"hidden\" name=\"limit\" value=\"{limit}\">{}\
         <button type=\"submit\">search</button></form>\n\
         <form class=\"page\" method=\"get\" action=\"{API_PREFIX}{segment}/\">\
         <label>limit <input type=\"number\" name=\"limit\" min=\"0\" value=\"{limit}\"></label> \
         <label>offset <input type=\"number\" name=\"offset\" min=\"0\" value=\"{offset}\"></label> \
         {}<button type=\"submit\">show</button></form>\n",
        escape(&state.q),
        state.hidden(false),
        state.hidden(true),
        segment = escape(segment),
        // wide enough for its text (`Salamèche` and longer)
        size = state.q.chars().count().clamp(20, 80) + 2,
    );
    out.push_str(&active(&state));
    if parts.len() == 3 && !state.q.is_empty() {
        out.push_str(&super::html_match::matched_names(tree, &state.q, map, href));
    }
    if matches!(target.route, super::route::Route::List { .. }) {
        out.push_str(&ignored_note(declared, &target.query));
    }
    if parts.len() == 3 {
        out.push_str(&download_link(tree, segment, href));
    }
    out.push_str("</div>\n");
    if parts.len() == 3 {
        out.push_str(&filter_links(tree, &state));
    }
    out
}

/// The page asked for, as `(offset, limit)`: from the query (`?limit=&offset=`) or a page
/// file's path; the whole list otherwise.
fn page_asked(target: &Target<'_>, parts: &[&str], count: u64) -> (u64, u64) {
    match (&target.route, &target.query.page) {
        (super::route::Route::List { .. }, Ok(page)) => (page.offset, page.limit),
        _ => match parts {
            [_, _, _, PAGES_DIR, limit, offset] => {
                (offset.parse().unwrap_or(0), limit.parse().unwrap_or(DEFAULT_PAGE_SIZE))
            }
            _ => (0, count.max(1)),
        },
    }
}

/// The state of the list `target` asks for: its page size `limit`, `q` and its filters.
fn state_of<'a>(
    target: &Target<'_>,
    segment: &'a str,
    limit: u64,
    declared: &[crate::filters::FilterField],
) -> ListState<'a> {
    let mut filters: Vec<(String, String)> = Vec::new();
    // a parameter that is no declared filter was ignored (said on the page), not a filter
    for pair in target.query.conditions.iter().filter(|(name, _)| declared.iter().any(|f| f.name == *name)) {
        if !filters.contains(pair) {
            filters.push(pair.clone());
        }
    }
    ListState { segment, limit, q: target.query.q.clone().unwrap_or_default(), filters }
}

/// The previous and next buttons: links where the page names them (to `own`'s pages when
/// given, else to the page's own links), greyed out where not.
fn pager_buttons(
    map: &serde_json::Map<String, Value>,
    href: &dyn Fn(&str) -> Option<String>,
    own: &[Option<String>; 2],
) -> String {
    let mut out = String::new();
    for ((field, label, rel), own) in
        [("previous", "← previous", "prev"), ("next", "next →", "next")].into_iter().zip(own)
    {
        let link = map.get(field).and_then(Value::as_str).and_then(href);
        match link.map(|link| own.clone().unwrap_or(link)) {
            Some(href) => {
                let _ = write!(
                    out,
                    "<a class=\"button\" rel=\"{rel}\" id=\"{field}\" href=\"{}\">{label}</a> ",
                    escape(&href)
                );
            }
            None => {
                let _ = write!(out, "<span class=\"button disabled\">{label}</span> ");
            }
        }
    }
    out
}

/// The link to the resource's bulk-data file (every record in one file, docs/tree.md), from
/// the tree's bulk-data index; empty when the tree has none.
fn download_link(tree: &ServedTree, segment: &str, href: &dyn Fn(&str) -> Option<String>) -> String {
    let Ok(Some(index)) = tree.doc(crate::tree::layout::BULK_KEY) else { return String::new() };
    let entries = crate::bulk::read_index(&index.body).unwrap_or_default();
    let Some(entry) = entries.iter().find(|entry| entry.resource == segment) else { return String::new() };
    let Some(link) = href(&entry.download_url) else { return String::new() };
    format!(
        "<p class=\"download\"><a id=\"download\" href=\"{}\" download>download every record</a> \
         ({} in one gzip'd NDJSON file, {})</p>\n",
        escape(&link),
        counted(entry.records, "record", "records"),
        counted(entry.size, "byte", "bytes")
    )
}

/// The active `q` and filters, each with a link that removes it, and one that clears them all;
/// empty when the list is not narrowed.
fn active(state: &ListState) -> String {
    if !state.narrowed() {
        return String::new();
    }
    let mut out = String::from("<p class=\"active\" id=\"active\">Narrowed by: ");
    let mut chip = |label: String, href: String| {
        let _ = write!(
            out,
            "<span class=\"chip\">{label} <a class=\"remove\" href=\"{}\" title=\"remove\" aria-label=\"remove {label}\">×</a></span> ",
            escape(&href)
        );
    };
    if !state.q.is_empty() {
        chip(format!("name contains “{}”", escape(&state.q)), state.url("", &state.filters));
    }
    for (name, value) in &state.filters {
        chip(format!("{} = {}", escape(name), escape(value)), state.without(name, value));
    }
    let _ = writeln!(out, "· <a id=\"clear\" href=\"{}\">clear all</a></p>", escape(&state.url("", &[])));
    out
}

/// The parameters of `query` the list ignored, in words, with what it takes instead (as its
/// `Gen-Ignored` header says it, [`crate::filters::ignored_header`]); empty when none was.
fn ignored_note(declared: &[FilterField], query: &ListQuery) -> String {
    let ignored = crate::filters::ignored(declared, &query.params);
    if ignored.is_empty() {
        return String::new();
    }
    let code = |name: &str| format!("<code>{}</code>", escape(name));
    let shown = crate::filters::MAX_IGNORED_NAMED;
    let mut names: Vec<String> = ignored.iter().take(shown).map(|name| code(name)).collect();
    if ignored.len() > shown {
        names.push(format!("{} more", ignored.len() - shown));
    }
    let takes = match declared {
        [] => "<code>limit</code>, <code>offset</code> and <code>q</code>, and declares no filters".to_string(),
        [one] => format!("<code>limit</code>, <code>offset</code>, <code>q</code> and the filter {}", code(&one.name)),
        _ => format!(
            "<code>limit</code>, <code>offset</code>, <code>q</code> and the filters {}",
            declared.iter().map(|f| code(&f.name)).collect::<Vec<_>>().join(", ")
        ),
    };
    let (what, not) =
        if ignored.len() == 1 { ("parameter", "not a parameter") } else { ("parameters", "not parameters") };
    format!(
        "<p class=\"note ignored\" id=\"ignored\">Ignored {what}: {} ({not} of this list: it takes {takes}).</p>\n",
        names.join(", ")
    )
}

/// Most values of one filter the HTML view links to (the values document lists them all).
const MAX_FILTER_LINKS: usize = 60;

/// The declared filters of the list as links, one per value with its count in the whole list,
/// from the values documents (`?FIELD=VALUE`, see docs/tree.md), numbers in numeric order; an
/// active value is marked, with a link that removes it. Empty for a resource without filters.
fn filter_links(tree: &ServedTree, state: &ListState) -> String {
    tree.filters(state.segment).iter().map(|field| value_line(tree, state, field, Some(MAX_FILTER_LINKS))).collect()
}

/// The page of every value of the filter whose values document is `key` (the "more" link of
/// [`filter_links`]), each value a link that keeps the list's state as `target`'s query gives
/// it; empty when `key` is no declared filter's values document.
pub(super) fn all_values(tree: &ServedTree, target: &Target<'_>, segment: &str, key: &str) -> String {
    let filters = tree.filters(segment);
    let Some(field) = filters.iter().find(|f| crate::tree::layout::filter_values_key(segment, &f.name) == key) else {
        return String::new();
    };
    let limit = target.query.page.as_ref().map_or(DEFAULT_PAGE_SIZE, |page| page.limit);
    let state = state_of(target, segment, limit, filters);
    let back = state.url(&state.q, &state.filters);
    format!(
        "<div class=\"list\">\n<p class=\"count\">every value of <strong>{name}</strong> · \
         <a id=\"back\" href=\"{}\">back to the list</a></p>\n{}</div>\n",
        escape(&back),
        value_line(tree, &state, field, None),
        name = escape(&field.name),
    )
}

/// One filter's values as links (at most `cap`, then a link to the page of them all), from
/// its values document; empty when the tree has none.
fn value_line(tree: &ServedTree, state: &ListState, field: &FilterField, cap: Option<usize>) -> String {
    let segment = state.segment;
    let mut out = String::new();
    let key = crate::tree::layout::filter_values_key(segment, &field.name);
    let Ok(Some(doc)) = tree.doc(&key) else { return out };
    let Ok(values) = serde_json::from_slice::<Value>(&doc.body) else { return out };
    let mut results: Vec<(&str, u64)> = values["results"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|v| (v["value"].as_str().unwrap_or(""), v["count"].as_u64().unwrap_or(0)))
        .collect();
    results.sort_by(|a, b| value_order(a.0, b.0));
    let how = if takes_several(field) { "adds to the current ones" } else { "replaces the current one" };
    let _ = write!(
        out,
        "<p class=\"filters\" data-field=\"{name}\"><strong>{name}</strong> \
         <span class=\"note\">(counts: records of the whole list, not of the current matches; a value {how})</span>: ",
        name = escape(&field.name),
    );
    for (text, count) in results.iter().take(cap.unwrap_or(usize::MAX)) {
        let title = format!("records of the whole list with {} = {text}: {count}", field.name);
        let count = format!("<span class=\"n\" title=\"{}\">({count})</span>", escape(&title));
        if state.filters.iter().any(|(name, value)| *name == field.name && value == text) {
            let _ = write!(
                out,
                "<span class=\"chip\"><strong class=\"active\" aria-current=\"true\">{t}</strong>&nbsp;{count} \
                 <a class=\"remove\" href=\"{}\" title=\"remove\" aria-label=\"remove {n} = {t}\">×</a></span> ",
                escape(&state.without(&field.name, text)),
                t = escape(text),
                n = escape(&field.name),
            );
        } else {
            let href = state.with_value(field, text);
            let _ = write!(out, "<a href=\"{}\">{}</a>&nbsp;{count} ", escape(&href), escape(text));
        }
    }
    if let Some(more) = cap.and_then(|cap| results.len().checked_sub(cap)).filter(|&more| more > 0) {
        // every value reachable: the page of them all, keeping the state
        let href = state.url_at(&crate::tree::layout::url_path(&key), &state.q, &state.filters);
        let _ = write!(
            out,
            "<span class=\"more\"><a id=\"more-{}\" href=\"{}\">… {}</a></span>",
            escape(&field.name),
            escape(&href),
            counted(more as u64, "more value", "more values")
        );
    }
    out.push_str("</p>\n");
    out
}

/// `n` and the noun that goes with it: `1 entry`, `2 entries`.
pub(super) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The view's order of filter values: numbers first, by value (`9` before `10`), then the rest
/// in byte order (the values document's order).
fn value_order(a: &str, b: &str) -> Ordering {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y).then_with(|| a.cmp(b)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// A value as a number, when it is written as JSON writes one (`-1`, `2.5`, `1e3`).
fn number(text: &str) -> Option<f64> {
    let looks = text.bytes().next().is_some_and(|b| b == b'-' || b.is_ascii_digit())
        && text.bytes().all(|b| b.is_ascii_digit() || b"-+.eE".contains(&b));
    looks.then(|| text.parse::<f64>().ok()).flatten().filter(|n| n.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_sort_as_numbers_then_text() {
        let mut values = vec!["10", "9", "true", "-1", "2.5", "abc", "1e3", "false", "100"];
        values.sort_by(|a, b| value_order(a, b));
        assert_eq!(values, ["-1", "2.5", "9", "10", "100", "1e3", "abc", "false", "true"]);
    }

    #[test]
    fn links_keep_the_state() {
        let several = FilterField { name: "type".into(), path: "types[].type.name".into() };
        let one = FilterField { name: "generation".into(), path: "generation.name".into() };
        let state = ListState {
            segment: "creature",
            limit: 2,
            q: "a b".into(),
            filters: vec![("type".into(), "fire".into()), ("generation".into(), "generation-i".into())],
        };
        assert_eq!(
            state.with_value(&several, "flying"),
            "/api/v2/creature/?limit=2&q=a%20b&type=fire&generation=generation-i&type=flying"
        );
        assert_eq!(
            state.with_value(&one, "generation-ii"),
            "/api/v2/creature/?limit=2&q=a%20b&type=fire&generation=generation-ii"
        );
        assert_eq!(state.without("type", "fire"), "/api/v2/creature/?limit=2&q=a%20b&generation=generation-i");
        assert_eq!(state.url("", &[]), "/api/v2/creature/?limit=2");
        let plain = ListState { segment: "creature", limit: DEFAULT_PAGE_SIZE, q: String::new(), filters: vec![] };
        assert_eq!(plain.url("", &[]), "/api/v2/creature/");
        let query = super::super::route::route("/api/v2/x/?q=salam%C3%A8che+x&type=fire&flag").query;
        assert_eq!(shown_request("/api/v2/x/", &query), "/api/v2/x/?q=salamèche x&type=fire&flag");
    }
}
