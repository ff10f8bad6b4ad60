//! The public API's paging rules, as pure functions, and the page renderer shared by
//! `gen build` (precomputed page files) and `gen serve` (pages computed on request), so that
//! both give the same bytes.
//!
//! Rules: `limit` absent, empty or 0 means 20; `offset` absent or empty means 0. A page holds
//! entries `[offset, offset + limit)` of the list. `next` is null unless `count > offset + limit`,
//! else it points at `offset + limit` with limit `min(limit, count - offset - limit)` (the last
//! page's limit shrinks). `previous` is null when offset is 0, else it points at
//! `max(0, offset - limit)` with limit `min(limit, offset)`.
//!
//! Trees built with `--links path` link by the page files themselves, and there `next` keeps
//! the limit (`offset + limit`, limit `limit`): the last page's file is named by the page size,
//! so following `next` and `previous` from offset 0 never leaves the aligned pages
//! ([`precomputed_pages`]). Query links follow the public API exactly.

use crate::tree::layout::{self, DEFAULT_PAGE_SIZE};
use std::collections::BTreeSet;

/// One page of a list: entries `[offset, offset + limit)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Page {
    /// Position of the first entry.
    pub offset: u64,
    /// Most entries on the page.
    pub limit: u64,
}

impl Page {
    /// The page a request asks for, with the defaults applied (limit 0 means 20).
    pub(crate) fn requested(offset: Option<u64>, limit: Option<u64>) -> Page {
        let limit = match limit {
            None | Some(0) => DEFAULT_PAGE_SIZE,
            Some(limit) => limit,
        };
        Page { offset: offset.unwrap_or(0), limit }
    }

    /// The page `next` points to, if any, by the public API's rule (the last page's limit
    /// shrinks).
    pub fn next(self, count: u64) -> Option<Page> {
        let end = self.offset.saturating_add(self.limit);
        (count > end).then(|| Page { offset: end, limit: self.limit.min(count - end) })
    }

    /// The page `next` links to in a tree with links `style`: [`Page::next`] for query links;
    /// for path links the same offset with the limit kept, so the link names the page file of
    /// the aligned chain.
    pub(crate) fn next_linked(self, count: u64, style: LinkStyle) -> Option<Page> {
        let next = self.next(count)?;
        Some(match style {
            LinkStyle::Query => next,
            LinkStyle::Path => Page { limit: self.limit, ..next },
        })
    }

    /// The page `previous` points to, if any.
    pub fn previous(self) -> Option<Page> {
        (self.offset > 0)
            .then(|| Page { offset: self.offset.saturating_sub(self.limit), limit: self.limit.min(self.offset) })
    }

    /// True when this page holds the whole list and links nowhere: offset 0 and limit ≥ count.
    pub(crate) fn is_everything(self, count: u64) -> bool {
        self.offset == 0 && self.limit >= count
    }

    /// The index range of the entries this page holds, clamped to the list.
    pub fn range(self, count: u64) -> std::ops::Range<usize> {
        let start = self.offset.min(count);
        let end = self.offset.saturating_add(self.limit).min(count);
        start as usize..end as usize
    }
}

/// The pages of one page size that a tree holds as files: the aligned pages (offsets 0,
/// `size`, `2 × size`, ... up to the last entry, each with limit `size`) and, with query links,
/// the last page under the shrunken limit that `next` names (`offset=100000&limit=1` for
/// 100,001 entries and size 20).
///
/// Following `next` from offset 0 stays within these pages in either style, and so does
/// `previous` from every page except that shrunken last page (whose `previous`, by the public
/// API's rule, is not aligned). Their number is `ceil(count / size)` (at least one), plus the
/// shrunken page: it changes by at most two when one entry is added or removed, whatever the count.
pub fn precomputed_pages(count: u64, size: u64, style: LinkStyle) -> BTreeSet<Page> {
    let size = size.max(1);
    let aligned = count.div_ceil(size).max(1);
    let mut pages: BTreeSet<Page> = (0..aligned).map(|k| Page { offset: k * size, limit: size }).collect();
    if style == LinkStyle::Query {
        let last = Page { offset: (aligned - 1) * size, limit: size };
        if let Some(page) = last.previous().and_then(|p| p.next(count)) {
            pages.insert(page);
        }
    }
    pages
}

/// How `next` and `previous` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkStyle {
    /// `<base>/api/v2/<segment>/?offset=O&limit=L`, as the public API writes them.
    Query,
    /// `<base>/api/v2/<segment>/_pages/L/O/`: the page files themselves, for hosts that ignore
    /// query strings (object storage).
    Path,
}

/// The url of `page` of the list at `list_url` (which ends in `/`).
pub fn page_url(list_url: &str, page: Page, style: LinkStyle) -> String {
    ListLinks::of_list(list_url, style).url(page)
}

/// The page sizes whose pages a tree holds as files: the configured ones and the default
/// limit, ascending, each once.
pub(crate) fn page_sizes(configured: &[u64]) -> Vec<u64> {
    let mut sizes = configured.to_vec();
    sizes.push(DEFAULT_PAGE_SIZE);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// How the pages of a list link to each other: the plain list's, or a filter's (whose query
/// links carry its condition and whose path links name its own page files).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListLinks<'a> {
    /// The url `?offset=&limit=` follows in a query link (`<base>/api/v2/berry/`).
    pub(crate) list_url: &'a str,
    /// What follows `?offset=&limit=` in a query link: empty for a list, `&type=fire` for a filter's.
    pub(crate) query_tail: &'a str,
    /// The url of the folder of the list's page files, which path links name.
    pub(crate) files_url: &'a str,
    /// How the page links to its neighbours.
    pub(crate) style: LinkStyle,
}

impl<'a> ListLinks<'a> {
    /// The links of the list at `list_url` itself.
    pub(crate) fn of_list(list_url: &'a str, style: LinkStyle) -> ListLinks<'a> {
        ListLinks { list_url, query_tail: "", files_url: list_url, style }
    }

    /// The url of `page`.
    pub(crate) fn url(&self, page: Page) -> String {
        match self.style {
            LinkStyle::Query => {
                format!("{}?offset={}&limit={}{}", self.list_url, page.offset, page.limit, self.query_tail)
            }
            LinkStyle::Path => format!("{}{}", self.files_url, layout::page_dir(page.limit, page.offset)),
        }
    }
}

/// Renders `page` of a list of `count` entries, given the entries it shows (`shown`, those of
/// `page.range(count)`, serialised as [`render_entry`] does), linking pages as `links` says:
/// the one function behind the page files of `gen build` and the pages `gen serve` computes,
/// so they cannot differ. The entries are taken one at a time: a list's `_pages/all` page is
/// not held twice (its entries, then the page).
pub(crate) fn render_shown_page<E: AsRef<[u8]>>(
    count: u64,
    shown: impl IntoIterator<Item = E>,
    links: &ListLinks,
    page: Page,
    pretty: bool,
) -> Vec<u8> {
    let shown = shown.into_iter();
    // room for entries of twice a usual size: room never written takes no memory, where a page
    // grown past its room is copied, both held meanwhile (at 1M records a 48 MB page of 600,000
    // entries outgrew 64 bytes an entry: a 60 MB spike, the fresh build's peak)
    let mut out = Vec::with_capacity(shown.size_hint().0 * 128 + 2 * links.list_url.len() + 128);
    render_shown_page_into(&mut out, count, shown, links, page, pretty);
    out
}

/// [`render_shown_page`] into `out` (a buffer, or a hash of the page: see [`PageSink`]).
pub(crate) fn render_shown_page_into<E: AsRef<[u8]>>(
    out: &mut impl PageSink,
    count: u64,
    shown: impl IntoIterator<Item = E>,
    links: &ListLinks,
    page: Page,
    pretty: bool,
) {
    let link = |p: Option<Page>| p.map(|p| links.url(p));
    let (next, previous) = (link(page.next_linked(count, links.style)), link(page.previous()));
    render_page(out, count, next.as_deref(), previous.as_deref(), shown, pretty);
}

/// Where a page is rendered to: a buffer, or a hash of its bytes (see [`render_page`]).
pub trait PageSink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
}

impl PageSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Renders a list page in the API's key order (`count`, `next`, `previous`, `results`) into
/// `out`.
///
/// `entries` are the list entries already serialised (compact, or pretty at nesting depth 2
/// when `pretty`), so rendering a page is concatenation, never JSON serialisation. They are
/// taken one at a time: a whole list's page can be hashed without being held.
pub fn render_page<E: AsRef<[u8]>>(
    out: &mut impl PageSink,
    count: u64,
    next: Option<&str>,
    previous: Option<&str>,
    entries: impl IntoIterator<Item = E>,
    pretty: bool,
) {
    let (open, sep, colon, nl, indent) =
        if pretty { ("{\n", ",\n", ": ", "\n", "  ") } else { ("{", ",", ":", "", "") };
    out.put(open.as_bytes());
    let field = |out: &mut dyn PageSink, key: &str| {
        out.put(indent.as_bytes());
        out.put(b"\"");
        out.put(key.as_bytes());
        out.put(b"\"");
        out.put(colon.as_bytes());
    };
    field(out, "count");
    out.put(count.to_string().as_bytes());
    out.put(sep.as_bytes());
    for (key, link) in [("next", next), ("previous", previous)] {
        field(out, key);
        match link {
            Some(url) => out.put(json_string(url).as_bytes()),
            None => out.put(b"null"),
        }
        out.put(sep.as_bytes());
    }
    field(out, "results");
    let mut entries = entries.into_iter().peekable();
    if entries.peek().is_none() {
        out.put(b"[]");
    } else {
        out.put(b"[");
        for (i, entry) in entries.enumerate() {
            if i > 0 {
                out.put(b",");
            }
            if pretty {
                out.put(b"\n    ");
            }
            out.put(entry.as_ref());
        }
        out.put(nl.as_bytes());
        out.put(indent.as_bytes());
        out.put(b"]");
    }
    out.put(nl.as_bytes());
    out.put(b"}");
}

/// A list entry (`{"name", "url"}`, or `{"url"}` for a nameless record) serialised as it
/// appears inside a page: compact, or pretty and indented for nesting depth 2.
pub fn render_entry(name: Option<&str>, url: &str, pretty: bool) -> Vec<u8> {
    let name = name.map(json_string);
    let url = json_string(url);
    let text = match (pretty, name) {
        (false, Some(name)) => format!("{{\"name\":{name},\"url\":{url}}}"),
        (false, None) => format!("{{\"url\":{url}}}"),
        (true, Some(name)) => {
            format!("{{\n      \"name\": {name},\n      \"url\": {url}\n    }}")
        }
        (true, None) => format!("{{\n      \"url\": {url}\n    }}"),
    };
    text.into_bytes()
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_count_5_limit_2_offset_2() {
        let page = Page { offset: 2, limit: 2 };
        assert_eq!(page.next(5), Some(Page { offset: 4, limit: 1 }));
        assert_eq!(page.previous(), Some(Page { offset: 0, limit: 2 }));
    }

    #[test]
    fn defaults_and_limit_zero() {
        assert_eq!(Page::requested(None, None), Page { offset: 0, limit: 20 });
        assert_eq!(Page::requested(Some(7), Some(0)), Page { offset: 7, limit: 20 });
    }

    #[test]
    fn first_and_last_pages() {
        assert_eq!(Page { offset: 0, limit: 20 }.previous(), None);
        assert_eq!(Page { offset: 60, limit: 20 }.next(68), None);
        assert_eq!(Page { offset: 40, limit: 20 }.next(68), Some(Page { offset: 60, limit: 8 }));
        // previous from a page past the end still follows the rule
        assert_eq!(Page { offset: 100, limit: 20 }.previous(), Some(Page { offset: 80, limit: 20 }));
        assert_eq!(Page { offset: 3, limit: 20 }.previous(), Some(Page { offset: 0, limit: 3 }));
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let page = Page { offset: u64::MAX, limit: u64::MAX };
        assert_eq!(page.next(10), None);
        assert_eq!(page.range(10), 10..10);
        assert!(Page { offset: 0, limit: u64::MAX }.is_everything(10));
    }

    /// The links a page file of `style` holds, as [`render_shown_page`] writes them.
    fn links(page: Page, count: u64, style: LinkStyle) -> Vec<Page> {
        page.next_linked(count, style).into_iter().chain(page.previous()).collect()
    }

    #[test]
    fn path_links_never_leave_the_precomputed_pages() {
        for count in [0u64, 1, 5, 19, 20, 21, 68, 99, 1000, 1021, 100_001] {
            for size in [1u64, 2, 3, 7, 20, 50, 100] {
                let pages = precomputed_pages(count, size, LinkStyle::Path);
                assert!(pages.contains(&Page { offset: 0, limit: size }));
                assert!(pages.iter().all(|p| p.limit == size && p.offset % size == 0), "{count} {size}");
                for page in &pages {
                    for linked in links(*page, count, LinkStyle::Path) {
                        assert!(pages.contains(&linked), "{count} {size}: {page:?} links {linked:?}, not a file");
                    }
                }
            }
        }
    }

    #[test]
    fn query_links_leave_them_only_by_previous_of_the_shrunken_last_page() {
        for count in [0u64, 1, 5, 19, 20, 21, 68, 99, 1000, 1021, 100_001] {
            for size in [1u64, 2, 3, 7, 20, 50, 100] {
                let pages = precomputed_pages(count, size, LinkStyle::Query);
                for page in &pages {
                    for linked in links(*page, count, LinkStyle::Query) {
                        let shrunken = page.limit < size;
                        assert!(pages.contains(&linked) || shrunken, "{count} {size}: {page:?} links {linked:?}");
                    }
                }
                // next from offset 0 walks the list within the pages, as the public API links it
                let mut page = Some(Page { offset: 0, limit: size });
                while let Some(p) = page {
                    assert!(pages.contains(&p), "{count} {size}: {p:?}");
                    page = p.next(count);
                }
            }
        }
        let pages = precomputed_pages(100_001, 20, LinkStyle::Query);
        assert_eq!(pages.len(), 5_001 + 1);
        assert!(pages.contains(&Page { offset: 100_000, limit: 1 }));
        assert!(pages.contains(&Page { offset: 100_000, limit: 20 }));
    }

    #[test]
    fn one_entry_more_or_less_changes_the_pages_by_at_most_two() {
        for style in [LinkStyle::Query, LinkStyle::Path] {
            for size in [1u64, 3, 20, 50, 100] {
                let mut before = precomputed_pages(99_890, size, style);
                for count in 99_891..=100_110 {
                    let after = precomputed_pages(count, size, style);
                    assert!(before.symmetric_difference(&after).count() <= 2, "{style:?} {size} {count}");
                    before = after;
                }
            }
        }
    }

    #[test]
    fn following_next_covers_the_list_once() {
        for count in [0u64, 1, 5, 68, 1021] {
            let mut page = Some(Page { offset: 0, limit: 20 });
            let mut seen = 0;
            while let Some(p) = page {
                let range = p.range(count);
                assert_eq!(range.start as u64, seen);
                seen = range.end as u64;
                page = p.next(count);
            }
            assert_eq!(seen, count);
            // path links cover it the same way, with the limit kept
            let (mut page, mut seen) = (Some(Page { offset: 0, limit: 20 }), 0);
            while let Some(p) = page {
                assert_eq!((p.range(count).start as u64, p.limit), (seen, 20));
                seen = p.range(count).end as u64;
                page = p.next_linked(count, LinkStyle::Path);
            }
            assert_eq!(seen, count);
        }
    }

    #[test]
    fn pretty_page_matches_serde_json_pretty() {
        let entries = vec![render_entry(Some("a"), "u/1/", true), render_entry(None, "u/2/", true)];
        let mut out = Vec::new();
        render_page(&mut out, 2, Some("n"), None, &entries, true);
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["results"][1]["url"], "u/2/");
        // serde_json's pretty printer sorts keys, so compare against a manual expectation of the
        // same layout instead: two-space indent, API key order.
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("{\n  \"count\": 2,\n  \"next\": \"n\",\n  \"previous\": null,\n"));
        assert!(text.ends_with("\n    }\n  ]\n}"));
        let mut compact = Vec::new();
        let entries: Vec<Vec<u8>> = vec![];
        render_page(&mut compact, 0, None, None, &entries, false);
        assert_eq!(compact, br#"{"count":0,"next":null,"previous":null,"results":[]}"#);
    }
}
