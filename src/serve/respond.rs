//! What to answer: a request's facts and the tree → a [`Reply`], and the reply's bytes.
//!
//! Pure: no sockets here. Response heads are written by hand into one buffer so that the head
//! and a small body leave in a single write; stored bodies are never serialised again.

use super::html::{self, Preview};
use super::item::Doc;
use super::list::{self, ListAnswer};
use super::route::{BadParam, Format, Route, Target, route};
use super::stream::Streamed;
use super::tree::ServedTree;
use super::view::{self, HtmlPage};
use crate::answers::{self, ALLOW, ALLOW_METHODS, ALLOW_ORIGIN, PREFLIGHT_MAX_AGE, PREFLIGHT_VARY};
use crate::tree::{JSON_MEDIA_TYPE, layout};
use std::io::Write as _;
use std::sync::Arc;

use crate::answers::reader::{MAX_HEADER_BYTES, MAX_HEADERS, MAX_TARGET};

/// The parts of a request that decide the answer.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    /// The method, as sent.
    pub method: &'a str,
    /// The request target as sent: path and query.
    pub target: &'a str,
    /// `Accept-Encoding`: gzip when it accepts it.
    pub accept_encoding: Option<&'a str>,
    /// `Accept`: a browser's gets the HTML view.
    pub accept: Option<&'a str>,
    /// `If-None-Match`: 304 when it names the current ETag.
    pub if_none_match: Option<&'a str>,
    /// `Access-Control-Request-Headers`, echoed by preflight answers.
    pub request_headers: Option<&'a str>,
    /// Number of headers and their total size (names and values).
    pub header_count: usize,
    /// Total size of the headers, names and values.
    pub header_bytes: usize,
}

/// The answer to a request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A document: 200, or 304 when the client's copy is current. `revalidate`: `meta` (and
    /// the bulk-data index), sent
    /// with `Cache-Control: no-cache` (as `gen publish` uploads it), so that a client checking
    /// for a new deploy (the public API's browser client's `invalidateCache()`) sees it at once.
    Doc {
        /// The document.
        doc: Arc<Doc>,
        /// Send its gzip body.
        gzip: bool,
        /// 304: the client's copy is current.
        not_modified: bool,
        /// Send `Cache-Control: no-cache`.
        revalidate: bool,
        /// The root document of a tree with bulk-data files: send the `Link` header that names
        /// the bulk-data index ([`crate::bulk::root_link`]), which the root does not list.
        link: bool,
        /// A list answer's [`crate::filters::IGNORED_HEADER`] value: the parameters it ignored.
        ignored: Option<String>,
    },
    /// An error with a JSON body; `allow` adds the `Allow` header (405).
    Error {
        /// The status.
        status: u16,
        /// The JSON body.
        body: Vec<u8>,
        /// Add the `Allow` header.
        allow: bool,
    },
    /// 204 to a CORS preflight, echoing the headers it asked for when they are plain tokens.
    Options {
        /// The headers echoed in `Access-Control-Allow-Headers`.
        allow_headers: Option<String>,
    },
    /// The HTML view of a document or an error, for a browser.
    Html {
        /// The status.
        status: u16,
        /// The page.
        body: Arc<HtmlPage>,
    },
    /// A document too large for the cache, sent from its file (see [`super::stream`]): 200, or
    /// 304 as for [`Reply::Doc`]; never gzip-compressed.
    Stream {
        /// The file being sent.
        stream: Arc<Streamed>,
        /// 304: the client's copy is current.
        not_modified: bool,
        /// Send `Cache-Control: no-cache`.
        revalidate: bool,
        /// A list answer's [`crate::filters::IGNORED_HEADER`] value: the parameters it ignored.
        ignored: Option<String>,
    },
}

/// Decides the answer to `request` from `tree`.
pub fn decide(tree: &ServedTree, request: &Request<'_>) -> Reply {
    decide_routed(tree, request, &route(request.target))
}

/// Decides the answer to `request`, whose target the router read as `target`.
fn decide_routed(tree: &ServedTree, request: &Request<'_>, target: &Target<'_>) -> Reply {
    if request.target.len() > MAX_TARGET {
        return error(414, answers::target_too_long(request.target.len(), MAX_TARGET));
    }
    if request.header_count > MAX_HEADERS || request.header_bytes > MAX_HEADER_BYTES {
        return error(
            431,
            answers::headers_too_large(request.header_count, request.header_bytes, MAX_HEADERS, MAX_HEADER_BYTES),
        );
    }
    match request.method {
        "GET" | "HEAD" => {}
        "OPTIONS" => return Reply::Options { allow_headers: request.request_headers.and_then(echoable) },
        other => {
            return Reply::Error {
                status: 405,
                body: answers::to_bytes(&answers::method_not_allowed(other)),
                allow: true,
            };
        }
    }
    let mut revalidate = false;
    let mut ignored = None;
    let found = match &target.route {
        Route::List { segment } if tree.has_list(segment) => match &target.query.page {
            Ok(page) => {
                ignored = list::ignored_header(tree, segment, &target.query);
                match list::answer(tree, segment, &target.query, *page) {
                    ListAnswer::Refused(body) => return error(400, body),
                    ListAnswer::Whole(key) => match streamed(tree, &key, request, false) {
                        Some(reply) => return reply.noting(ignored),
                        None => tree.doc(&key),
                    },
                    ListAnswer::Page(found) => found,
                }
            }
            Err(bad) => return bad_param(bad),
        },
        Route::List { segment } => {
            let key = layout::list_key(segment);
            revalidate = key.eq_ignore_ascii_case(layout::META_KEY) || key.eq_ignore_ascii_case(layout::BULK_KEY);
            if let Some(reply) = streamed(tree, &key, request, revalidate) {
                return reply;
            }
            tree.doc(&key)
        }
        Route::Doc(key) if layout::is_bulk_file(key) => match tree.streamed_bulk(key) {
            Some(Ok(stream)) => {
                let not_modified = request.if_none_match.is_some_and(|tags| names_etag(tags, &stream.etag, None));
                return Reply::Stream { stream, not_modified, revalidate: false, ignored: None };
            }
            Some(Err(unserved)) => return unserved_reply(&unserved),
            None => Ok(None),
        },
        Route::Doc(key) => {
            revalidate = key.eq_ignore_ascii_case(layout::META_KEY) || key.eq_ignore_ascii_case(layout::BULK_KEY);
            if let Some(reply) = streamed(tree, key, request, revalidate) {
                return reply;
            }
            tree.doc(key)
        }
        Route::NotFound => Ok(None),
    };
    match found {
        Ok(Some(doc)) => {
            let gzip = accepts_gzip(request.accept_encoding) && tree.gzip_of(&doc).is_some();
            let not_modified = request.if_none_match.is_some_and(|tags| etag_matches(tags, &doc));
            let link = matches!(&target.route, Route::Doc(key) if key.eq_ignore_ascii_case(layout::API_ROOT))
                && tree.has_doc(layout::BULK_KEY);
            Reply::Doc { doc, gzip, not_modified, revalidate, link, ignored }
        }
        Ok(None) => not_found(tree, request.target),
        Err(unserved) => unserved_reply(&unserved),
    }
}

/// The answer for the document at `key` when it is too large for the cache: sent from its file.
fn streamed(tree: &ServedTree, key: &str, request: &Request<'_>, revalidate: bool) -> Option<Reply> {
    Some(match tree.streamed(key)? {
        Ok(stream) => {
            let not_modified = request.if_none_match.is_some_and(|tags| names_etag(tags, &stream.etag, None));
            Reply::Stream { stream, not_modified, revalidate, ignored: None }
        }
        Err(unserved) => unserved_reply(&unserved),
    })
}

fn unserved_reply(unserved: &super::tree::Unserved) -> Reply {
    say!("gen serve: {}", unserved.detail);
    match unserved.busy {
        true => error(TREE_CHANGED, answers::busy()),
        false => error(TREE_CHANGED, answers::tree_changed(&unserved.path)),
    }
}

/// The status of an answer from a tree whose file does not match its manifest.
const TREE_CHANGED: u16 = 503;

/// Decides the answer as [`decide`] does, except that a browser (see [`html::wants_html`]) gets
/// the HTML view of the same answer, and `/` a page linking every resource.
pub(crate) fn decide_browsable(tree: &ServedTree, request: &Request<'_>, settings: &ResponsePolicy) -> Reply {
    let target = route(request.target);
    let browsing = matches!(request.method, "GET" | "HEAD")
        && request.target.len() <= MAX_TARGET
        && target.query.format == Format::Negotiated
        && html::wants_html(request.accept);
    if !browsing {
        return decide_routed(tree, request, &target);
    }
    let path = super::route::strip_origin(request.target);
    let path = path.split(['?', '#']).next().unwrap_or(path);
    if path == "/" || path.is_empty() {
        return Reply::Html { status: 200, body: HtmlPage::unheld(html::root(tree, &settings.preview)) };
    }
    // The page shows the document itself, whatever copy the browser holds.
    let plain = Request { if_none_match: None, accept_encoding: None, ..request.clone() };
    match decide_routed(tree, &plain, &target) {
        Reply::Doc { doc, .. } => html_reply(200, view::document(tree, &settings.preview, &target, 200, &doc.body)),
        Reply::Error { status: status @ (400 | 404), body, .. } => {
            html_reply(status, view::document(tree, &settings.preview, &target, status, &body))
        }
        // a bulk-data file is downloaded, not shown
        Reply::Stream { stream, .. } if stream.bulk => decide(tree, request),
        Reply::Stream { stream, .. } => {
            let page = html::too_large(&settings.preview, request.target, stream.len);
            Reply::Html { status: 200, body: HtmlPage::unheld(page) }
        }
        other => other,
    }
}

/// The HTML view's page with `status`, or 503 when it found no room (see [`view::document`]).
fn html_reply(status: u16, page: Option<Arc<HtmlPage>>) -> Reply {
    match page {
        Some(body) => Reply::Html { status, body },
        None => error(503, answers::busy()),
    }
}

fn error(status: u16, body: serde_json::Value) -> Reply {
    Reply::Error { status, body: answers::to_bytes(&body), allow: false }
}

/// The 400 of a malformed `limit` or `offset`.
pub(super) fn bad_param(bad: &BadParam) -> Reply {
    let BadParam { name, value } = bad;
    error(400, answers::bad_param(name, Some(value), value.starts_with('-')))
}

fn not_found(tree: &ServedTree, target: &str) -> Reply {
    let path = target.split('?').next().unwrap_or(target);
    let key = super::route::normalize(path);
    let parts: Vec<&str> = key.as_deref().map(|key| key.split('/').skip(2).collect()).unwrap_or_default();
    let body = match parts.as_slice() {
        [segment, ..] if !tree.has_list(segment) && !tree.has_doc(&layout::list_key(segment)) => {
            answers::no_resource(segment, &tree.segments())
        }
        [segment, record] if tree.has_list(segment) => answers::no_record(segment, record),
        _ => answers::not_a_document(Some(path)),
    };
    error(404, body)
}

/// True when `Accept-Encoding` allows gzip (`gzip` or `*` with a non-zero quality).
pub(crate) fn accepts_gzip(header: Option<&str>) -> bool {
    let Some(header) = header else { return false };
    let mut gzip = None;
    let mut any = None;
    for item in header.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        let mut quality_ok = true;
        for param in parts {
            let param = param.trim();
            if let Some(q) = param.strip_prefix("q=").or_else(|| param.strip_prefix("Q=")) {
                quality_ok = q.trim().parse::<f32>().is_ok_and(|q| q > 0.0);
            }
        }
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            gzip = Some(quality_ok);
        } else if coding == "*" {
            any = Some(quality_ok);
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// True when an `If-None-Match` list names this document's ETag (either encoding) or is `*`.
/// The comparison is weak, as RFC 9110 asks for `If-None-Match`.
pub(crate) fn etag_matches(header: &str, doc: &Doc) -> bool {
    names_etag(header, &doc.etag, Some(&doc.etag_gzip))
}

/// True when an `If-None-Match` list names `etag` or `other` (weakly compared) or is `*`.
fn names_etag(header: &str, etag: &str, other: Option<&str>) -> bool {
    header.split(',').map(str::trim).any(|tag| {
        let tag = tag.strip_prefix("W/").unwrap_or(tag);
        tag == "*" || tag == etag || Some(tag) == other
    })
}

/// The requested headers when they are a plain list of tokens, safe to echo.
fn echoable(headers: &str) -> Option<String> {
    let headers = headers.trim();
    let plain = !headers.is_empty()
        && headers.len() <= 1024
        && headers.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_, \t".contains(&b));
    plain.then(|| headers.to_string())
}

/// How the connection goes on after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connection {
    /// HTTP/1.1 default: nothing to say.
    KeepAlive,
    /// HTTP/1.0 client that asked for keep-alive: say so.
    KeepAlive10,
    /// The client asked to close, or speaks HTTP/1.0 without keep-alive.
    Close,
}

/// Fixed settings of the responses.
#[derive(Debug, Clone)]
pub(crate) struct ResponsePolicy {
    /// `Cache-Control` of documents.
    pub(crate) cache_control: String,
    /// What the HTML view links to and shows beyond the tree.
    pub(crate) preview: std::sync::Arc<Preview>,
}

/// Writes the deploy header lines `deploy`, and the [`crate::filters::IGNORED_HEADER`] with
/// `ignored` when there is one (named in the expose line too).
fn write_deploy(out: &mut Vec<u8>, deploy: &str, ignored: Option<&str>) {
    match ignored {
        Some(value) => {
            let name = crate::filters::IGNORED_HEADER;
            let _ = write!(out, "{name}: {value}\r\n");
            out.extend_from_slice(exposing(deploy, name).as_bytes());
        }
        None => out.extend_from_slice(deploy.as_bytes()),
    }
}

/// The deploy header lines `deploy` with `name` added to their `Access-Control-Expose-Headers`
/// line (one line, as the edge handler sends it), or that line when they hold none.
fn exposing(deploy: &str, name: &str) -> String {
    const EXPOSE: &str = "Access-Control-Expose-Headers: ";
    match deploy.find(EXPOSE) {
        Some(at) => {
            let end = deploy[at..].find("\r\n").map_or(deploy.len(), |n| at + n);
            format!("{}, {name}{}", &deploy[..end], &deploy[end..])
        }
        None => format!("{deploy}{EXPOSE}{name}\r\n"),
    }
}

impl Reply {
    /// The reply with `ignored` as its [`crate::filters::IGNORED_HEADER`] value, when it is a
    /// document (a list answer).
    fn noting(mut self, value: Option<String>) -> Reply {
        if let Reply::Doc { ignored, .. } | Reply::Stream { ignored, .. } = &mut self {
            *ignored = value;
        }
        self
    }

    /// The parameters a list answer ignored: its [`crate::filters::IGNORED_HEADER`] value.
    pub(crate) fn ignored(&self) -> Option<&str> {
        match self {
            Reply::Doc { ignored, .. } | Reply::Stream { ignored, .. } => ignored.as_deref(),
            _ => None,
        }
    }

    /// True for the answer of a tree whose file does not match its manifest (see
    /// [`answers::tree_changed`]).
    pub(crate) fn is_tree_changed(&self) -> bool {
        matches!(self, Reply::Error { status: TREE_CHANGED, .. })
    }

    /// Status code.
    pub fn status(&self) -> u16 {
        match self {
            Reply::Doc { not_modified: true, .. } | Reply::Stream { not_modified: true, .. } => 304,
            Reply::Doc { .. } | Reply::Stream { .. } => 200,
            Reply::Error { status, .. } | Reply::Html { status, .. } => *status,
            Reply::Options { .. } => 204,
        }
    }

    /// The body a GET gets from memory (empty for 304 and 204, and for a body sent from its
    /// file: see [`Reply::body_len`]).
    pub(crate) fn body(&self) -> &[u8] {
        match self {
            Reply::Doc { not_modified: true, .. } | Reply::Options { .. } | Reply::Stream { .. } => &[],
            Reply::Doc { doc, gzip: true, .. } => doc.gzip().unwrap_or(&doc.body),
            Reply::Doc { doc, .. } => &doc.body,
            Reply::Error { body, .. } => body,
            Reply::Html { body, .. } => &body.bytes,
        }
    }

    /// The length of the body a GET gets.
    pub(crate) fn body_len(&self) -> u64 {
        match self {
            Reply::Stream { stream, not_modified: false, .. } => stream.len,
            _ => self.body().len() as u64,
        }
    }

    /// Writes the status line and headers (through the blank line) into `out`; `deploy` is the
    /// tree's deploy header lines ([`ServedTree::deploy_head`]), sent with every answer.
    pub(crate) fn write_head(
        &self,
        out: &mut Vec<u8>,
        connection: Connection,
        date: &str,
        settings: &ResponsePolicy,
        deploy: &str,
    ) {
        let status = self.status();
        let _ = write!(out, "HTTP/1.1 {status} {}\r\n", crate::answers::reason(status));
        match self {
            Reply::Doc { doc, gzip, not_modified, revalidate, link, .. } => {
                if !not_modified {
                    let _ = write!(out, "Content-Type: {JSON_MEDIA_TYPE}\r\nContent-Length: {}\r\n", self.body().len());
                    if *gzip {
                        out.extend_from_slice(b"Content-Encoding: gzip\r\n");
                    }
                }
                let etag = if *gzip { &doc.etag_gzip } else { &doc.etag };
                let cache_control = if *revalidate { "no-cache" } else { &settings.cache_control };
                let _ = write!(out, "ETag: {etag}\r\nCache-Control: {cache_control}\r\n");
                if *link {
                    let _ = write!(out, "Link: {}\r\n", crate::bulk::root_link());
                }
                // A browser asking for the same url gets the HTML view.
                out.extend_from_slice(b"Vary: Accept-Encoding, Accept\r\n");
            }
            Reply::Stream { stream, not_modified, .. } if stream.bulk => {
                if !not_modified {
                    let _ = write!(out, "Content-Type: {}\r\n", crate::bulk::CONTENT_TYPE);
                    let _ = write!(out, "Content-Encoding: {}\r\n", crate::bulk::CONTENT_ENCODING);
                    let _ = write!(out, "Content-Length: {}\r\n", stream.len);
                }
                let _ = write!(out, "ETag: {}\r\nCache-Control: {}\r\n", stream.etag, crate::bulk::CACHE_CONTROL);
            }
            Reply::Stream { stream, not_modified, revalidate, .. } => {
                if !not_modified {
                    let _ = write!(out, "Content-Type: {JSON_MEDIA_TYPE}\r\nContent-Length: {}\r\n", stream.len);
                }
                let cache_control = if *revalidate { "no-cache" } else { &settings.cache_control };
                let _ = write!(out, "ETag: {}\r\nCache-Control: {cache_control}\r\n", stream.etag);
                out.extend_from_slice(b"Vary: Accept-Encoding, Accept\r\n");
            }
            Reply::Html { body, .. } => {
                out.extend_from_slice(b"Content-Type: text/html; charset=utf-8\r\n");
                let _ =
                    write!(out, "Content-Length: {}\r\nCache-Control: no-store\r\nVary: Accept\r\n", body.bytes.len());
                // The page holds no script and loads nothing: a defence behind the escaping.
                out.extend_from_slice(
                    b"Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; form-action 'self'\r\n",
                );
            }
            Reply::Error { body, allow, .. } => {
                let _ = write!(
                    out,
                    "Content-Type: {JSON_MEDIA_TYPE}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n",
                    body.len()
                );
                if *allow {
                    let _ = write!(out, "Allow: {ALLOW}\r\n");
                }
            }
            Reply::Options { allow_headers } => {
                let _ = write!(out, "Allow: {ALLOW}\r\nAccess-Control-Allow-Methods: {ALLOW_METHODS}\r\n");
                if let Some(headers) = allow_headers {
                    let _ = write!(out, "Access-Control-Allow-Headers: {headers}\r\n");
                }
                let _ = write!(out, "Access-Control-Max-Age: {PREFLIGHT_MAX_AGE}\r\nVary: {PREFLIGHT_VARY}\r\n");
            }
        }
        let _ = write!(out, "Access-Control-Allow-Origin: {ALLOW_ORIGIN}\r\n");
        write_deploy(out, deploy, self.ignored());
        let _ = write!(out, "Date: {date}\r\n");
        match connection {
            Connection::KeepAlive => {}
            Connection::KeepAlive10 => out.extend_from_slice(b"Connection: keep-alive\r\n"),
            Connection::Close => out.extend_from_slice(b"Connection: close\r\n"),
        }
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary folder, removed with what the build left beside the tree in it when dropped.
    struct Removed(std::path::PathBuf);

    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A tree built from a small data folder: berry (5 named records, one with a
    /// sub-document) and note (nameless, ids -1 and 0), with its folder (removed when dropped).
    fn sample_tree() -> (ServedTree, Removed) {
        let dir = std::env::temp_dir().join(format!("gen-respond-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let data = dir.join("data");
        std::fs::create_dir_all(data.join("berry/1")).unwrap();
        std::fs::create_dir_all(data.join("note")).unwrap();
        std::fs::write(data.join("gen.json"), r#"{"base_url": "http://x.test"}"#).unwrap();
        for (id, name) in [(1, "cheri"), (2, "chesto"), (3, "pecha"), (4, "rawst"), (5, "aspear")] {
            std::fs::write(data.join(format!("berry/{id}.json")), format!(r#"{{"id": {id}, "name": "{name}"}}"#))
                .unwrap();
        }
        std::fs::write(data.join("berry/1/flavor.json"), r#"{"text": "spicy"}"#).unwrap();
        for id in [-1, 0] {
            std::fs::write(data.join(format!("note/{id}.json")), format!(r#"{{"id": {id}}}"#)).unwrap();
        }
        let out = dir.join("out");
        crate::build::build(&data, &out, &crate::build::BuildOptions::default(), &Default::default()).unwrap();
        (ServedTree::load(&out, Arc::new(super::super::cache::Cache::new(1 << 20))).unwrap(), Removed(dir))
    }

    fn get(target: &str) -> Request<'_> {
        Request { method: "GET", target, ..Default::default() }
    }

    #[test]
    fn decisions() {
        let (tree, _folder) = sample_tree();
        let page =
            |offset, limit| tree.page("berry", crate::paging::Page { offset, limit }).unwrap().unwrap().body.clone();
        let doc = |key: &str| tree.doc(key).unwrap().unwrap().body.clone();
        let long = "/api/v2/".repeat(2000);
        // (request, status, body when it is a document)
        let table: Vec<(Request, u16, Option<Vec<u8>>)> = vec![
            (get("/api/v2/"), 200, Some(doc("api/v2"))),
            (get("/api/v2"), 200, Some(doc("api/v2"))),
            (get("/api/v2/meta/"), 200, Some(doc("api/v2/meta"))),
            (get("/api/v2/berry/"), 200, Some(page(0, 20))),
            (get("/api/v2/BERRY?offset=2&limit=2"), 200, Some(page(2, 2))),
            (get("/api/v2/berry/?limit=abc"), 400, None),
            (get("/api/v2/berry/1/"), 200, Some(doc("api/v2/berry/1"))),
            (get("/api/v2/berry/Cheri"), 200, Some(doc("api/v2/berry/1"))),
            (get("/api/v2/berry/cheri/flavor"), 200, Some(doc("api/v2/berry/1/flavor"))),
            (get("/api/v2/note/-1/"), 200, Some(doc("api/v2/note/-1"))),
            (get("/api/v2/note/0"), 200, Some(doc("api/v2/note/0"))),
            (get("/api/v2/note/?limit=-1"), 400, None),
            (get("/api/v2/nothing/"), 404, None),
            (get("/api/v2/nothing/?limit=abc"), 404, None),
            (get("/api/v2/berry/6/"), 404, None),
            (get("/api/v2/../manifest.json"), 404, None),
            (get("/"), 404, None),
            (Request { method: "HEAD", target: "/api/v2/berry/1/", ..Default::default() }, 200, None),
            (Request { method: "POST", target: "/api/v2/berry/1/", ..Default::default() }, 405, None),
            (Request { method: "OPTIONS", target: "/anything", ..Default::default() }, 204, None),
            (Request { method: "GET", target: &long, ..Default::default() }, 414, None),
            (Request { header_count: 101, ..get("/api/v2/") }, 431, None),
            (Request { header_bytes: 20_000, ..get("/api/v2/") }, 431, None),
        ];
        for (request, status, body) in &table {
            let reply = decide(&tree, request);
            assert_eq!(reply.status(), *status, "{request:?}");
            if let Some(body) = body {
                assert_eq!(reply.body(), &body[..], "{request:?}");
            }
        }
        // the worked example, rendered (no precomputed file holds it)
        let example: serde_json::Value = serde_json::from_slice(&page(2, 2)).unwrap();
        assert_eq!(example["next"], "http://x.test/api/v2/berry/?offset=4&limit=1");
        assert_eq!(example["previous"], "http://x.test/api/v2/berry/?offset=0&limit=2");
        // gzip and 304 are chosen from the request's headers
        let big = tree.page("berry", crate::paging::Page { offset: 0, limit: 5 }).unwrap().unwrap();
        let etag = big.etag.clone();
        let reply = decide(&tree, &Request { if_none_match: Some(&etag), ..get("/api/v2/berry/") });
        assert_eq!(reply.status(), 304);
        let reply = decide(&tree, &Request { accept_encoding: Some("gzip"), ..get("/api/v2/berry/") });
        assert!(matches!(reply, Reply::Doc { gzip: true, .. }));
    }

    #[test]
    fn gzip_negotiation() {
        for (header, expected) in [
            (None, false),
            (Some(""), false),
            (Some("gzip"), true),
            (Some("GZIP"), true),
            (Some("x-gzip"), true),
            (Some("gzip, deflate, br"), true),
            (Some("deflate, br"), false),
            (Some("br;q=1.0, gzip;q=0.8, *;q=0.1"), true),
            (Some("gzip;q=0"), false),
            (Some("gzip;q=0.000"), false),
            (Some("*"), true),
            (Some("*;q=0"), false),
            (Some("gzip;q=0, *"), false),
            (Some("identity"), false),
            (Some("gzip;q=abc"), false),
        ] {
            assert_eq!(accepts_gzip(header), expected, "{header:?}");
        }
    }

    #[test]
    fn etags() {
        let doc = Doc::computed(vec![b'x'; 1000]);
        let tag = doc.etag.clone();
        assert!(etag_matches(&tag, &doc));
        assert!(etag_matches(&format!("W/{tag}"), &doc));
        assert!(etag_matches(&format!("\"other\", {}", doc.etag_gzip), &doc));
        assert!(etag_matches("*", &doc));
        assert!(!etag_matches("\"other\"", &doc));
        assert!(!etag_matches(tag.trim_matches('"'), &doc));
    }

    #[test]
    fn preflight_headers_are_echoed_only_when_plain() {
        assert_eq!(echoable("Content-Type, X-Requested-With").as_deref(), Some("Content-Type, X-Requested-With"));
        assert_eq!(echoable("a\nb"), None);
        assert_eq!(echoable("a\rSet-Cookie: x"), None);
        assert_eq!(echoable(""), None);
    }

    #[test]
    fn heads() {
        let settings = ResponsePolicy { cache_control: "public, max-age=60".into(), preview: Default::default() };
        let doc = Arc::new(Doc::computed(vec![b'x'; 1000]));
        doc.compress();
        let reply = Reply::Doc {
            doc: doc.clone(),
            gzip: true,
            not_modified: false,
            revalidate: false,
            link: false,
            ignored: None,
        };
        let mut out = Vec::new();
        reply.write_head(&mut out, Connection::Close, "D", &settings, "");
        let head = String::from_utf8(out).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains(&format!("Content-Length: {}\r\n", doc.gzip().unwrap().len())));
        assert!(head.contains("Content-Encoding: gzip\r\n"));
        assert!(head.contains(&format!("ETag: {}\r\n", doc.etag_gzip)));
        assert!(head.contains("Cache-Control: public, max-age=60\r\n"));
        assert!(head.contains("Connection: close\r\n"));
        assert!(head.ends_with("Date: D\r\nConnection: close\r\n\r\n"));

        let reply = Reply::Doc { doc, gzip: false, not_modified: true, revalidate: false, link: false, ignored: None };
        let mut out = Vec::new();
        reply.write_head(&mut out, Connection::KeepAlive, "D", &settings, "");
        let head = String::from_utf8(out).unwrap();
        assert!(head.starts_with("HTTP/1.1 304 Not Modified\r\n"));
        assert!(!head.contains("Content-Length"));
        assert!(reply.body().is_empty());
    }
}
