//! The HTML view for browsers, as Django REST framework's browsable API: a request whose
//! `Accept` prefers `text/html` gets the JSON indented, with every url of the API a link,
//! breadcrumbs, and for lists the count, previous/next buttons and a limit/offset form.
//!
//! One small template, no JavaScript, no external assets. Everything that comes from the data
//! or the request is escaped ([`escape`]): a record's string is never markup. JSON clients never
//! get here ([`wants_html`]), so their answers stay byte for byte what the tree holds.

use super::html_escape::escape;
use super::route::{Target, normalize};
use super::tree::ServedTree;
use crate::tree::layout::{API_PREFIX, API_ROOT, BULK_KEY, META_KEY, OPENAPI_PATH, url_path};
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::RwLock;

/// What the HTML view shows beyond the tree.
///
/// The view's own links (breadcrumbs, urls of the tree, previous/next, the page form) are
/// root-relative (`/api/v2/berry/`): they work whatever host name the browser used
/// (`localhost`, `127.0.0.1`, the machine's name when bound to `0.0.0.0`), and the Host header
/// is never trusted to write them. The JSON answers keep their absolute urls.
#[derive(Debug, Default)]
pub(crate) struct Preview {
    /// The problems of the last `--watch` rebuild, as `gen check` prints them, while they last.
    pub(crate) problems: RwLock<Option<String>>,
}

impl Preview {
    /// A view with no problems to show.
    pub(crate) fn new() -> Preview {
        Preview::default()
    }

    /// Sets (or with `None` clears) the problems shown at the top of every page.
    pub(crate) fn set_problems(&self, problems: Option<String>) {
        *self.problems.write().expect("problems lock") = problems;
    }
}

/// True when a request's `Accept` names `text/html` with a higher quality than JSON gets
/// (browsers; not curl's `*/*` nor `application/json`): it gets the HTML view, unless its query
/// asks for `format=json` ([`super::route::Format`]).
pub(crate) fn wants_html(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    let (mut html, mut json, mut any) = (None, None, None);
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let quality = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "text/html" | "application/xhtml+xml" => html = Some(html.map_or(quality, |h: f32| h.max(quality))),
            "application/json" => json = Some(quality),
            "application/*" => any = Some(any.map_or(quality, |a: f32| a.max(quality))),
            "*/*" => any = Some(any.map_or(quality, |a: f32| a.max(quality))),
            _ => {}
        }
    }
    let json = json.or(any).unwrap_or(0.0);
    html.is_some_and(|html| html > 0.0 && html > json)
}

/// The page at `/`: links to the index, every resource, `meta` and `openapi.json`.
pub(crate) fn root(tree: &ServedTree, preview: &Preview) -> Vec<u8> {
    let mut main = String::new();
    let _ = write!(
        main,
        "<h1>API preview</h1>\n<p>Served by <code>gen serve</code>; every url in the answers starts with \
         <code>{}</code>.</p>\n<ul class=\"index\">\n<li><a href=\"{API_PREFIX}\">{API_PREFIX}</a> \
         <span class=\"note\">the index of resources</span></li>\n",
        escape(&tree.base_url),
    );
    for segment in tree.segments() {
        let count = tree.count(segment).unwrap_or(0);
        let _ = writeln!(
            main,
            "<li><a href=\"{API_PREFIX}{s}/\">{API_PREFIX}{s}/</a> <span class=\"note\">{}</span></li>",
            super::html_list::counted(count, "entry", "entries"),
            s = escape(segment),
        );
    }
    main.push_str(&extras(tree));
    main.push_str("</ul>\n");
    layout(preview, "API preview", &crumbs(&[]), 200, &main)
}

/// Links to the documents the index does not list, where the tree has them.
fn extras(tree: &ServedTree) -> String {
    let mut out = String::new();
    if tree.has_doc(META_KEY) {
        let _ = writeln!(
            out,
            "<li><a href=\"{meta}\">{meta}</a> <span class=\"note\">what the tree holds: generator, data hash, build date</span></li>",
            meta = url_path(META_KEY),
        );
    }
    if tree.has_doc(OPENAPI_PATH) {
        let _ = writeln!(
            out,
            "<li><a href=\"/{OPENAPI_PATH}\">/{OPENAPI_PATH}</a> <span class=\"note\">the OpenAPI description</span></li>"
        );
    }
    // no resource, so not in the index: found here, in meta and in the root's Link header
    if tree.has_doc(BULK_KEY) {
        let _ = writeln!(
            out,
            "<li><a id=\"bulk-data\" href=\"{bulk}\">{bulk}</a> <span class=\"note\">the bulk-data index: every \
             resource's records in one file each</span></li>",
            bulk = url_path(BULK_KEY),
        );
    }
    out
}

/// The page of a document or an error: `body` is the JSON answer for `target` with `status`.
pub(crate) fn document(tree: &ServedTree, preview: &Preview, read: &Target<'_>, status: u16, body: &[u8]) -> Vec<u8> {
    let target = read.text;
    let path = target.split(['?', '#']).next().unwrap_or(target);
    let key = normalize(path);
    let parts: Vec<&str> = key.as_deref().map(|k| k.split('/').collect()).unwrap_or_default();
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let links = Links { tree_base: &tree.base_url };
    let mut main = String::new();
    // The request with its query, as the heading and the status line show it.
    let title = match &key {
        Some(key) => super::html_list::shown_request(&format!("/{key}/"), &read.query),
        None => path.chars().take(200).collect(),
    };
    let _ = writeln!(main, "<h1>{}</h1>", escape(&title));
    let _ = write!(
        main,
        "<p class=\"status s{}\">GET {} · {status} {}",
        status / 100,
        escape(&title),
        crate::answers::reason(status)
    );
    if status < 400 {
        let json_href = with_format_json(target);
        let _ = write!(main, " · <a href=\"{}\">as JSON</a>", escape(&json_href));
    }
    main.push_str("</p>\n");
    if status >= 400 {
        let detail = value.as_ref().and_then(|v| v.get("detail")).and_then(Value::as_str).unwrap_or("");
        let _ = writeln!(main, "<p class=\"error\">{}</p>", escape(detail));
    }
    if let Some(Value::Object(map)) = &value
        && status == 200
        && map.contains_key("count")
        && map.contains_key("results")
        && let [_, _, segment, ..] = parts.as_slice()
    {
        match (parts.as_slice(), key.as_deref()) {
            // a filter's values document: every value a link that keeps the list's state
            ([_, _, _, crate::tree::layout::FILTERS_DIR, _], Some(key)) => {
                main.push_str(&super::html_list::all_values(tree, read, segment, key));
            }
            _ => main.push_str(&super::html_list::controls(tree, read, &parts, segment, map, &|url| links.href(url))),
        }
    }
    main.push_str("<pre class=\"json\">");
    match &value {
        Some(value) => json(&mut main, value, 0, &links),
        None => main.push_str(&escape(&String::from_utf8_lossy(body))),
    }
    main.push_str("</pre>\n");
    if key.as_deref() == Some(API_ROOT) && status == 200 {
        let more = extras(tree);
        if !more.is_empty() {
            let _ = write!(main, "<h2>Also served</h2>\n<ul class=\"index\">\n{more}</ul>\n");
        }
    }
    layout(preview, &title, &crumbs(&parts), status, &main)
}

/// The page of a document too large for the view (`bytes` of JSON, more than the cache keeps):
/// its size, and a link to it as JSON.
pub(crate) fn too_large(preview: &Preview, target: &str, bytes: u64) -> Vec<u8> {
    let path = target.split(['?', '#']).next().unwrap_or(target);
    let key = normalize(path);
    let parts: Vec<&str> = key.as_deref().map(|k| k.split('/').collect()).unwrap_or_default();
    let title = key.as_deref().map_or_else(|| path.chars().take(200).collect(), |key| format!("/{key}/"));
    let json_href = escape(&with_format_json(target));
    let main = format!(
        "<h1>{title}</h1>\n<p class=\"status s2\">GET {title} · 200 OK · <a href=\"{json_href}\">as JSON</a></p>\n\
         <p>This document is {bytes} bytes of JSON: more than the HTML view shows (it shows the documents the \
         cache keeps, up to half of <code>--cache-mb</code>). Open it <a href=\"{json_href}\">as JSON</a>, or \
         restart <code>gen serve</code> with a larger <code>--cache-mb</code>.</p>\n",
        title = escape(&title),
    );
    layout(preview, &title, &crumbs(&parts), 200, &main)
}

/// The target with `format=json` added to its query.
fn with_format_json(target: &str) -> String {
    let target = target.split('#').next().unwrap_or(target);
    let path_start = target.find("/api/").unwrap_or(0);
    let target = &target[path_start..];
    if target.contains('?') { format!("{target}&format=json") } else { format!("{target}?format=json") }
}

/// How urls of the tree become links: a string that starts with the tree's base URL and
/// `/api/v2/` links to the same path on this server, root-relative.
struct Links<'a> {
    tree_base: &'a str,
}

impl Links<'_> {
    fn href(&self, text: &str) -> Option<String> {
        let rest = text.strip_prefix(self.tree_base)?;
        rest.starts_with(API_PREFIX).then(|| rest.to_string())
    }
}

/// Writes `value` indented by two spaces per level (as `gen build --pretty` does), escaped,
/// with urls of the tree as links.
fn json(out: &mut String, value: &Value, depth: usize, links: &Links) {
    let pad = |out: &mut String, depth: usize| out.extend(std::iter::repeat_n("  ", depth));
    match value {
        Value::Null => out.push_str("<span class=\"l\">null</span>"),
        Value::Bool(b) => {
            let _ = write!(out, "<span class=\"l\">{b}</span>");
        }
        Value::Number(n) => {
            let _ = write!(out, "<span class=\"n\">{}</span>", escape(&n.to_string()));
        }
        Value::String(s) => {
            let quoted = escape(&serde_json::to_string(s).unwrap_or_default());
            match links.href(s) {
                Some(href) => {
                    let _ = write!(out, "<span class=\"s\"><a href=\"{}\">{quoted}</a></span>", escape(&href));
                }
                None => {
                    let _ = write!(out, "<span class=\"s\">{quoted}</span>");
                }
            }
        }
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(out, depth + 1);
                json(out, item, depth + 1, links);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("{\n");
            for (i, (key, item)) in map.iter().enumerate() {
                pad(out, depth + 1);
                let _ = write!(
                    out,
                    "<span class=\"k\">{}</span>: ",
                    escape(&serde_json::to_string(key).unwrap_or_default())
                );
                json(out, item, depth + 1, links);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push('}');
        }
    }
}

/// Breadcrumbs `api / v2 / berry / 1`, each a link but the last.
fn crumbs(parts: &[&str]) -> String {
    let mut out = String::from("<nav class=\"crumbs\" aria-label=\"breadcrumbs\">");
    if parts.is_empty() {
        out.push_str("<span>api</span>");
    } else {
        out.push_str("<a href=\"/\">api</a>");
    }
    let mut path = String::new();
    for (i, part) in parts.iter().enumerate().skip(1) {
        let _ = write!(path, "/{}", if i == 1 { API_ROOT } else { part });
        let shown = escape(part);
        if i + 1 == parts.len() {
            let _ = write!(out, " / <span>{shown}</span>");
        } else {
            let _ = write!(out, " / <a href=\"{}/\">{shown}</a>", escape(&path));
        }
    }
    out.push_str("</nav>");
    out
}

/// The one template: head, style, breadcrumbs, the problems of the data if any, the content.
fn layout(preview: &Preview, title: &str, crumbs: &str, status: u16, main: &str) -> Vec<u8> {
    let problems = preview.problems.read().expect("problems lock").clone();
    let mut out = String::with_capacity(main.len() + STYLE.len() + 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>{} · {status} · gen serve</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<header>{crumbs}</header>\n<main>\n",
        escape(title)
    );
    if let Some(problems) = problems {
        let _ = writeln!(
            out,
            "<section class=\"problems\" id=\"problems\"><h2>The data has problems: still serving the last good build</h2>\
             <pre>{}</pre><p>Fix them and save: the preview rebuilds.</p></section>",
            escape(&problems)
        );
    }
    let _ = write!(out, "{main}</main>\n</body>\n</html>\n");
    out.into_bytes()
}

const STYLE: &str = r#"
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --panel: #f6f8fa;
  --border: #d1d9e0; --link: #0550ae; --key: #953800; --str: #0a3069; --num: #0550ae; --lit: #8250df;
  --bad-bg: #ffebe9; --bad-fg: #82071e; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --panel: #161b22; --border: #3d444d;
    --link: #79c0ff; --key: #ffa657; --str: #a5d6ff; --num: #79c0ff; --lit: #d2a8ff;
    --bad-bg: #3c1618; --bad-fg: #ffa198; }
}
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
header, main { max-width: 72rem; margin: 0 auto; padding: 0.75rem 1.25rem; }
header { border-bottom: 1px solid var(--border); }
a { color: var(--link); }
h1 { font-size: 1.4rem; margin: 0.5rem 0; word-break: break-all; }
h2 { font-size: 1.1rem; }
.crumbs { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.status, .note, .count { color: var(--muted); }
.error { background: var(--bad-bg); color: var(--bad-fg); padding: 0.5rem 0.75rem; border-radius: 6px;
  overflow-wrap: anywhere; }
.problems { background: var(--bad-bg); color: var(--bad-fg); border-radius: 6px; padding: 0.25rem 1rem; }
.problems pre { white-space: pre-wrap; overflow-wrap: anywhere; }
pre.json { background: var(--panel); border: 1px solid var(--border); border-radius: 6px; padding: 1rem;
  overflow-x: auto; font: 14px/1.45 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.k { color: var(--key); } .s { color: var(--str); } .n { color: var(--num); } .l { color: var(--lit); }
.s a { color: inherit; }
.pager, form.page { display: inline-block; margin: 0 1rem 0.5rem 0; }
.chip { display: inline-block; padding: 0 0.4rem; border: 1px solid var(--border); border-radius: 6px;
  background: var(--panel); }
.chip .remove { text-decoration: none; padding: 0 0.2rem; } strong.active { color: var(--key); }
.button, button { display: inline-block; padding: 0.25rem 0.75rem; border: 1px solid var(--border);
  border-radius: 6px; background: var(--panel); color: var(--link); text-decoration: none; font: inherit; }
.button.disabled { color: var(--muted); }
input { width: 6rem; font: inherit; padding: 0.15rem 0.3rem; background: var(--bg); color: var(--fg);
  border: 1px solid var(--border); border-radius: 4px; }
input[type=search] { width: auto; max-width: 100%; box-sizing: border-box; }
ul.matched { padding-left: 1.25rem; }
ul.index { padding-left: 1.25rem; } ul.index a { font-family: ui-monospace, Menlo, Consolas, monospace; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_gets_html() {
        let chromium = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";
        let firefox = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(wants_html(Some(chromium)));
        assert!(wants_html(Some(firefox)));
        let format = |target| super::super::route::route(target).query.format;
        assert_eq!(format("/api/v2/berry/?limit=5"), super::super::route::Format::Negotiated);
        assert_eq!(format("/api/v2/berry/?limit=5&FORMAT=Json"), super::super::route::Format::Json);
        assert_eq!(format("/api/v2/?format=json"), super::super::route::Format::Json);
        for json in
            [None, Some("*/*"), Some("application/json"), Some("application/json, text/html"), Some("text/html;q=0")]
        {
            assert!(!wants_html(json), "{json:?}");
        }
        assert!(!wants_html(Some("text/html;q=0.5, application/json")));
        assert!(wants_html(Some("text/html, application/json;q=0.9")));
    }

    #[test]
    fn escaping_and_links() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        let links = Links { tree_base: "https://api.example.org" };
        assert_eq!(links.href("https://api.example.org/api/v2/berry/1/").as_deref(), Some("/api/v2/berry/1/"));
        assert_eq!(links.href("https://api.example.org/other"), None);
        assert_eq!(links.href("see https://api.example.org/api/v2/"), None);
        let value: Value = serde_json::from_str(
            r#"{"a": "<script>x</script>", "b": [1.50, null], "u": "https://api.example.org/api/v2/x/"}"#,
        )
        .unwrap();
        let mut out = String::new();
        json(&mut out, &value, 0, &links);
        assert!(out.contains("&quot;&lt;script&gt;x&lt;/script&gt;&quot;"), "{out}");
        assert!(!out.contains("<script"), "{out}");
        assert!(out.contains(">1.50<"), "{out}");
        assert!(out.contains("<a href=\"/api/v2/x/\">"), "{out}");
    }

    #[test]
    fn crumbs_link_every_level_but_the_last() {
        let out = crumbs(&["api", "v2", "berry", "1"]);
        assert!(out.contains("<a href=\"/\">api</a>"));
        assert!(out.contains("<a href=\"/api/v2/\">v2</a>"));
        assert!(out.contains("<a href=\"/api/v2/berry/\">berry</a>"));
        assert!(out.ends_with(" / <span>1</span></nav>"));
    }
}
