//! `gen config cloudflare|deno|node`: the edge handler for a built tree, one JavaScript module
//! written once (`edge/handler.js` and the files it names) with the tree's facts baked in and a
//! thin wrapper per host.
//!
//! The facts (base URL, link style, pretty, page sizes, each list's count, the documents that are
//! files of their own, the error bodies of [`crate::answers`] as templates) are read from the
//! tree's manifest here, as the nginx and Caddy configurations are, so the handler reads nothing
//! but the documents and pages it answers: a rebuild that changes a count, a resource or the page
//! sizes needs the handler printed again (docs/deploy.md says so). For an archive (`gen build
//! --archive`) they are read from its `manifest.json` key and its directory (`super::archived`),
//! and the handler reads the documents out of the archive by byte ranges (`edge/archive.js`).

use super::Site;
use crate::answers::reader::{self, MAX_REQUEST_LINE, MAX_TARGET};
use crate::answers::template::{self, Part, Template};
use serde_json::{Value, json};

/// The handler, shared by every edge host: its entry (`handle`), then one file per Rust room it
/// ports (the router, the list answers, the paging, the replies), printed as one module.
const HANDLER: &str = concat!(
    include_str!("edge/handler.js"),
    "\n",
    include_str!("edge/route.js"),
    "\n",
    include_str!("edge/list.js"),
    "\n",
    include_str!("edge/paging.js"),
    "\n",
    include_str!("edge/reply.js"),
);
/// The origins the handler reads the tree from, printed after it: a tree's files, then an
/// archive's by byte ranges (used when the facts say `archive`).
const ORIGINS: &str = concat!(
    include_str!("edge/origin.js"),
    "\n",
    include_str!("edge/archive.js"),
    "\n",
    include_str!("edge/ranges.js")
);
const CLOUDFLARE: &str = include_str!("edge/cloudflare.js");
const DENO: &str = include_str!("edge/deno.js");
const NODE: &str = include_str!("edge/node.js");
/// The CloudFront Function: rewrites only (it cannot read the origin), so not the handler.
const CLOUDFRONT: &str = include_str!("edge/cloudfront.js");

/// CloudFront refuses a function larger than this many bytes.
pub const CLOUDFRONT_MAX_BYTES: usize = 10 * 1024;

/// An edge runtime `gen config` prints the handler for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// A Cloudflare Worker reading the tree from R2.
    Cloudflare,
    /// A Deno server.
    Deno,
    /// A Node.js server.
    Node,
    /// A CloudFront function in front of an S3 origin.
    Cloudfront,
}

/// The module for `edge` serving the tree `site` describes: facts, handler, wrapper.
pub(crate) fn module(site: &Site, edge: Edge) -> anyhow::Result<String> {
    let (name, wrapper) = match edge {
        Edge::Cloudflare => ("cloudflare", CLOUDFLARE),
        Edge::Deno => ("deno", DENO),
        Edge::Node => ("node", NODE),
        Edge::Cloudfront => {
            let function = cloudfront(site);
            if function.len() > CLOUDFRONT_MAX_BYTES {
                anyhow::bail!(
                    "the CloudFront Function for this tree is {} bytes, more than the {CLOUDFRONT_MAX_BYTES} CloudFront \
                     takes (each resource's name is in it): put the Lambda@Edge handler in front of the bucket \
                     instead (`gen config node`, docs/deploy.md)",
                    function.len()
                );
            }
            return Ok(function);
        }
    };
    let m = &site.manifest.settings;
    let mut facts = facts(site);
    // the deploy headers (none for a tree built before them), without the expose line the
    // handler writes itself
    let deploy = m.deploy_header_lines().map(|lines| lines[..2].to_vec()).unwrap_or_default();
    facts["extra_headers"] = json!(deploy);
    let facts = serde_json::to_string_pretty(&facts).expect("facts serialise");
    // One self-contained module: the handler's own exports become plain functions, so that
    // the host sees only the wrapper's.
    let handler = format!("{HANDLER}\n{ORIGINS}")
        .replace("\nexport async function ", "\nasync function ")
        .replace("\nexport function ", "\nfunction ");
    Ok(format!(
        "// `gen config {name}` for a tree built by {generator}: {n} resources, base URL {base}.\n\
         // Answers every request as `gen serve --keep-urls` does, reading the tree's files from its\n\
         // origin. Resource counts and page sizes are baked in below: run `gen config {name}` again\n\
         // after a build that adds or removes records, resources or page sizes, and deploy it with\n\
         // the tree.\n\n\
         /** The tree's facts, from its manifest. */\n\
         const FACTS = {facts};\n\n\
         {handler}\n\
         // The host's entry points. Last: the handler's constants are set when they run.\n\
         {wrapper}",
        generator = m.generator,
        n = site.resources.len(),
        base = m.base_url,
    ))
}

/// The CloudFront Function for the tree: its facts and the rewrite function, comments and
/// indentation left out (CloudFront takes at most [`CLOUDFRONT_MAX_BYTES`]).
fn cloudfront(site: &Site) -> String {
    let mut facts = facts(site);
    facts["errors"]["page_not_held"] = json!(parts(&template::page_not_held(&site.page_sizes)));
    facts["errors"].as_object_mut().expect("an object").remove("not_a_filter");
    // what a rewrite needs: no urls, headers or rendering
    let facts = facts.as_object_mut().expect("an object");
    for unused in [
        "base_url",
        "cache_control",
        "extra_headers",
        "pretty",
        "revalidated",
        "root_link",
        "searchable",
        "filters",
        "archive",
    ] {
        facts.remove(unused);
    }
    for unused in [
        "max_target",
        "max_request_line",
        "reader_headers",
        "max_conditions",
        "longest_key",
        "max_read_bytes",
        "debug_escaped",
    ] {
        facts.remove(unused);
    }
    let errors = facts["errors"].as_object_mut().expect("an object");
    errors.remove("target_too_long");
    errors.remove("request_line_too_long");
    errors.remove("too_many_filters");
    let code: Vec<&str> = CLOUDFRONT
        .lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty() && !line.starts_with("//") && !line.starts_with("/**") && !line.starts_with("*")
        })
        .collect();
    format!(
        "// `gen config cloudfront` for the tree in {root} (base URL {base}): a CloudFront Function,\n\
         // runtime cloudfront-js-2.0, viewer request. Print it again after a build that changes counts.\n\
         var FACTS = {facts};\n{code}\n",
        facts = Value::Object(facts.clone()),
        root = site.root,
        base = site.manifest.settings.base_url,
        code = code.join("\n"),
    )
}

/// What the handler knows about the tree, as a JSON object.
fn facts(site: &Site) -> Value {
    let m = &site.manifest.settings;
    let links = serde_json::to_value(m.links).expect("a link style serialises");
    let resources: serde_json::Map<String, Value> =
        site.resources.iter().map(|(segment, count)| (segment.clone(), json!(count))).collect();
    let segments: Vec<&str> = site.resources.iter().map(|(s, _)| s.as_str()).collect();
    let filters: serde_json::Map<String, Value> = m
        .filters
        .iter()
        .map(|(segment, declared)| (segment.clone(), json!(declared.iter().map(|f| &f.name).collect::<Vec<_>>())))
        .collect();
    let not_a_filter: serde_json::Map<String, Value> = m
        .filters
        .iter()
        .map(|(segment, declared)| (segment.clone(), json!(parts(&template::not_a_filter(segment, declared)))))
        .collect();
    json!({
        "base_url": m.base_url,
        "links": links,
        "pretty": m.pretty,
        "page_sizes": site.page_sizes,
        "default_limit": crate::tree::layout::DEFAULT_PAGE_SIZE,
        "resources": resources,
        "singletons": site.singletons,
        "files": site.files,
        // the resources with a names document (`?q=`): all of them in a tree of this gen
        "searchable": site.searchable,
        // the declared filters' names (`?FIELD=VALUE`) of each resource that has some, in order
        "filters": filters,
        "cache_control": format!("public, max-age={}", site.max_age),
        // bounds: the longest request target answered (longer: 414, as gen serve), the most
        // filter conditions of a list query (more: 400), the longest key the tree holds (a longer
        // one is never asked of the origin), the most bytes one origin read takes
        "max_target": MAX_TARGET,
        "max_request_line": MAX_REQUEST_LINE,
        // the headers of a request line refused before any header is read, as gen serve's
        // HTTP reader sends them
        "reader_headers": reader::REFUSAL_HEADERS.iter().map(|(name, value)| (name.to_string(), json!(value))).collect::<serde_json::Map<_, _>>(),
        "max_conditions": crate::filters::MAX_CONDITIONS,
        "longest_key": site.manifest.files.keys().map(String::len).max().unwrap_or(0),
        "max_read_bytes": max_read_bytes(site),
        // the characters past ASCII that Rust's `{:?}` writes as `\u{..}` (see debug_escaped)
        "debug_escaped": debug_escaped(),
        // answered with `Cache-Control: no-cache` (meta, the bulk-data index), as gen serve and
        // gen publish's upload do
        "revalidated": [crate::tree::layout::META_KEY, crate::tree::layout::BULK_KEY],
        // the `Link` header of the root answer, naming the bulk-data index the root does not
        // list (null for a tree without one), as gen serve sends it
        "root_link": site.root_link(),
        // the folder is an archive: the origin holds its root and parts/, read by ranges
        "archive": site.archive.is_some(),
        // [name, value] pairs sent with every answer (and named in Access-Control-Expose-Headers):
        // the deploy headers, set by `module`
        "extra_headers": Vec::<(String, String)>::new(),
        "errors": {
            "bad_limit_negative": parts(&template::bad_param("limit", true, true)),
            "bad_limit": parts(&template::bad_param("limit", true, false)),
            "bad_offset": parts(&template::bad_param("offset", true, false)),
            "no_resource": parts(&template::no_resource(&segments)),
            "no_record": parts(&template::no_record()),
            "not_a_document": parts(&template::not_a_document(true)),
            "method_not_allowed": parts(&template::method_not_allowed()),
            "target_too_long": parts(&template::target_too_long(MAX_TARGET)),
            // no hole: one text part, as gen serve's HTTP reader words it
            "request_line_too_long": [String::from_utf8(crate::answers::to_bytes(
                &reader::rejected(tiny_http::Rejected::RequestLineTooLong)
            )).expect("JSON is UTF-8")],
            // no hole: one text part
            "too_many_filters": [String::from_utf8(crate::answers::to_bytes(
                &crate::answers::too_many_filters(crate::filters::MAX_CONDITIONS)
            )).expect("JSON is UTF-8")],
            "not_a_filter": not_a_filter,
        },
    })
}

/// Reads past this many bytes are refused, whatever the tree: twice its largest file leaves
/// room for a record that grows in a later build.
const MIN_READ_BYTES: u64 = 1 << 20;

/// The most bytes the handler takes from one origin read: twice the largest file of the tree
/// (a record may grow before the handler is printed again), at least [`MIN_READ_BYTES`]. A body
/// past it is cut off and answered as an origin fault (docs/deploy.md).
fn max_read_bytes(site: &Site) -> u64 {
    let root = std::path::Path::new(&site.root);
    let files =
        // a bulk-data file is streamed, never read whole
        site.manifest.files.keys().filter(|path| !crate::tree::layout::is_bulk_file(path));
    let largest: Box<dyn Iterator<Item = u64>> = match &site.archive {
        Some(archive) => Box::new(files.filter_map(|path| archive.sizes.get(path).copied())),
        None => Box::new(files.filter_map(|path| std::fs::metadata(root.join(path)).ok()).map(|m| m.len())),
    };
    largest.max().unwrap_or(0).saturating_mul(2).max(MIN_READ_BYTES)
}

/// The characters past ASCII that Rust's `{:?}` quoting of a string writes as `\u{..}` (those
/// that are not printable or extend a grapheme, by the tables of the Rust that built this gen, so
/// `gen serve`'s own): as runs, `[gap, length, gap, length, ...]`, each gap counted from the end
/// of the run before (from U+0080 for the first).
fn debug_escaped() -> Vec<u32> {
    let escaped = |u: u32| char::from_u32(u).is_none_or(|c| c.escape_debug().next() == Some('\\'));
    let mut runs = Vec::new();
    let mut end = 0x80;
    let mut u = 0x80;
    while u <= 0x10FFFF {
        if !escaped(u) {
            u += 1;
            continue;
        }
        let start = u;
        while u <= 0x10FFFF && escaped(u) {
            u += 1;
        }
        runs.extend([start - end, u - start]);
        end = u;
    }
    runs
}

/// A body template as the handler's `fill` reads it: JSON text at even places, hole names at
/// odd ones (empty text between two holes, or at either end).
fn parts(template: &Template) -> Vec<String> {
    // always an odd number of parts: the last one is text
    let mut out = vec![String::new()];
    for part in &template.0 {
        match part {
            Part::Text(text) => out.last_mut().expect("never empty").push_str(text),
            Part::Hole(hole) => out.extend([format!("{hole:?}"), String::new()]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_alternate_text_and_holes() {
        let t = template::no_record();
        let p = parts(&t);
        assert_eq!(p.len() % 2, 1, "{p:?}");
        for (i, part) in p.iter().enumerate() {
            if i % 2 == 1 {
                assert!(["Segment", "Record"].contains(&part.as_str()), "{p:?}");
            }
        }
        let filled: String = p.iter().enumerate().map(|(i, s)| if i % 2 == 1 { "x" } else { s.as_str() }).collect();
        assert_eq!(filled, t.fill(|_| "x".into()));
    }
}
