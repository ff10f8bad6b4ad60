//! Configurations for static hosts (nginx, Caddy) that serve a built tree as `gen serve` does,
//! as far as a static host can; and the edge handlers ([`edge`]: Cloudflare Workers, Deno, Node,
//! CloudFront Functions), which answer everything `gen serve` answers, reading the tree from
//! object storage.
//!
//! A configuration is written for one built tree: it reads the tree's manifest, so each
//! resource's count and the page sizes are written into the rules (`limit` ≥ count at offset 0
//! → the whole list is a per-resource regular expression), and it must be generated again
//! after a build that changes them.
//!
//! What both configurations do, like `gen serve`:
//! - `/x` and `/x/` answer the folder's `index.json`, without redirects, and a document that is
//!   a file of its own (`api/v2/openapi.json`) answers at its path; nothing else of the tree
//!   is served (no `index.json` paths, `.gz` files, `manifest.json`);
//! - `Content-Type: application/json; charset=utf-8`, `Access-Control-Allow-Origin: *`,
//!   `Cache-Control: public, max-age=N` on documents and `no-store` on errors, an `ETag`
//!   (the host's own), gzip from the `.gz` siblings of `gen build --gzip` (else on the fly);
//! - `?limit=&offset=` in any order, read by the paging rules, mapped onto the page files,
//!   including the whole list for offset 0 and any limit ≥ count;
//! - 400, 404 and 405 with `gen serve`'s JSON bodies ([`crate::answers`]); OPTIONS preflights.
//!
//! What only `gen serve` does: pages the tree holds no file for (a static host answers them 404,
//! saying so), paths in other letter cases, and a few readings of unusual requests (see
//! `docs/deploy.md`, "What a static host cannot do").

mod archived;
mod caddy;
mod edge;
mod nginx;
mod project;

pub use edge::{CLOUDFRONT_MAX_BYTES, Edge};
pub use project::{ProjectReport, write_project};

use crate::tree::layout;
use crate::tree::manifest::Manifest;
use anyhow::{Context, Result, bail};
use std::path::Path;

/// A static host `gen config` can configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// nginx: a `server { }` block.
    Nginx,
    /// Caddy: a Caddyfile site block.
    Caddy,
    /// An edge runtime: the handler module ([`edge`]).
    Edge(Edge),
}

/// `Cache-Control: public, max-age=<secs>` on documents unless told otherwise: `gen serve`'s default.
pub const DEFAULT_MAX_AGE: u64 = 86_400;

/// The configuration for `host` serving the tree in `dir` on `listen`; documents may be
/// cached for `max_age` seconds.
pub fn render_config(host: Host, dir: &Path, listen: &str, max_age: u64) -> Result<String> {
    if crate::archive::is_archive(dir) {
        archived::refuse(host, dir)?;
    }
    let site = Site::new(dir, listen, max_age)?;
    Ok(match host {
        Host::Nginx => nginx::config(&site),
        Host::Caddy => caddy::config(&site),
        Host::Edge(edge) => edge::module(&site, edge)?,
    })
}

/// True when `path` can be written into a configuration as it is: no quote, backslash, `$`,
/// brace, backtick, `;`, `#` or control character.
pub(crate) fn is_plain(path: &str) -> bool {
    !path.chars().any(|c| c.is_control() || "\"'\\${}`;#".contains(c))
}

/// What a configuration is written from: the tree's facts and where to serve it.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    /// The tree's folder, absolute.
    pub(crate) root: String,
    pub(crate) listen: Listen,
    pub(crate) manifest: Manifest,
    /// Each resource's segment and count, sorted by segment.
    pub(crate) resources: Vec<(String, u64)>,
    /// Other names at the top of the API that answer a document (`meta`, `openapi.json`).
    pub(crate) singletons: Vec<String>,
    /// Documents that are files of their own rather than a folder's `index.json`
    /// (`api/v2/openapi.json`), served at their path.
    pub(crate) files: Vec<String>,
    /// The resources whose names document (`?q=`) the tree holds.
    pub(crate) searchable: Vec<String>,
    /// Page sizes whose pages are files (20 included), ascending.
    pub(crate) page_sizes: Vec<u64>,
    pub(crate) max_age: u64,
    /// Set when the folder is an archive (`gen build --archive`), not a tree.
    pub(crate) archive: Option<archived::Archived>,
}

impl Site {
    fn new(dir: &Path, listen: &str, max_age: u64) -> Result<Site> {
        let (manifest, archive) = match crate::archive::is_archive(dir) {
            true => archived::read(dir).map(|(manifest, archive)| (manifest, Some(archive)))?,
            false => (Manifest::read(dir)?, None),
        };
        let absolute = std::path::absolute(dir).with_context(|| format!("cannot make {} absolute", dir.display()))?;
        let root = absolute
            .to_str()
            .filter(|s| is_plain(s))
            .with_context(|| {
                format!(
                    "the folder {} cannot be written into a host configuration (it holds a quote, backslash, \
                     $, brace, backtick, ;, # or a control character): move the tree to a plainer path",
                    absolute.display()
                )
            })?
            .trim_end_matches('/')
            .to_string();
        let listen = Listen::parse(listen)?;
        let resources: Vec<(String, u64)> =
            manifest.resources.iter().map(|(segment, info)| (segment.clone(), info.count)).collect();
        for (segment, _) in &resources {
            if !crate::config::is_valid_segment(segment) {
                bail!("the manifest names a resource {segment:?}, which is not a segment gen writes: rebuild the tree");
            }
        }
        // As `gen serve` reads the manifest ([`layout::key_of`]): `api/v2/<path>/index.json` is
        // the document at `/api/v2/<path>/`, any other `api/v2/<path>.json` the document at its
        // own path (its key is the path itself).
        let plain = crate::tree::layout::is_tree_path;
        let files: Vec<String> = manifest
            .files
            .keys()
            .filter(|path| layout::key_of(path) == Some(path.as_str()))
            .filter(|path| plain(path) && !layout::is_bulk_file(path))
            .cloned()
            .collect();
        let mut singletons: Vec<String> = manifest
            .files
            .keys()
            .filter_map(|path| {
                let key = layout::key_of(path)?;
                (key != path || files.contains(path)).then(|| layout::below_root(key))
            })
            .filter(|segment| !segment.contains('/') && plain(segment))
            .filter(|segment| !manifest.resources.contains_key(*segment))
            .map(str::to_string)
            .collect();
        singletons.sort();
        let page_sizes = crate::paging::page_sizes(&manifest.settings.page_sizes);
        let searchable: Vec<String> = resources
            .iter()
            .map(|(segment, _)| segment.clone())
            .filter(|segment| manifest.files.contains_key(&layout::names_path(segment)))
            .collect();
        Ok(Site { root, listen, manifest, resources, singletons, files, searchable, page_sizes, max_age, archive })
    }

    /// Resource segments as a regex alternation.
    fn resource_alternation(&self) -> String {
        self.resources.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join("|")
    }

    /// Resource and singleton segments as a regex alternation (dots escaped): every first
    /// segment that names something.
    fn segment_alternation(&self) -> String {
        let mut all: Vec<String> = self.resources.iter().map(|(s, _)| s.clone()).collect();
        all.extend(self.singletons.iter().map(|s| s.replace('.', r"\.")));
        all.join("|")
    }

    /// The comment at the top of every configuration.
    fn header(&self, host: &str, include: &str) -> String {
        let m = &self.manifest.settings;
        let sizes: Vec<String> = self.page_sizes.iter().map(u64::to_string).collect();
        format!(
            "# `gen config {host}` for the tree in {root}\n\
             # ({generator}: {n} resources, base URL {base}, links {links}, page sizes {sizes}, {gz}).\n\
             # {include}\n\
             # Resource counts and page sizes are written into the rules below: run `gen config {host}`\n\
             # again after a build that adds or removes records, resources or page sizes.\n\
             # The deploy headers carry this build's date and hash ({date}, {hash:.12}...): print the\n\
             # configuration again and reload after every build that changes the tree, or they go on\n\
             # naming the build before it.\n\
             # A static host answers every document and every page the tree holds as `gen serve` does;\n\
             # other pages (any offset and limit) and paths in other letter cases need `gen serve`.\n",
            root = self.root,
            generator = m.generator,
            n = self.resources.len(),
            base = m.base_url,
            links = serde_json::to_value(m.links).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
            sizes = sizes.join(", "),
            gz = if m.gzip { "with .gz siblings" } else { "no .gz siblings: compressed on the fly" },
            date = m.deploy_date,
            hash = m.hash,
        )
    }

    /// The deploy headers and the line exposing them (name, value), sent with every answer:
    /// none for a tree built before them.
    fn deploy_headers(&self) -> Vec<(String, String)> {
        self.manifest.settings.deploy_header_lines().map(Vec::from).unwrap_or_default()
    }

    /// The `Link` header of the root answer, naming the bulk-data index the root does not list
    /// ([`crate::bulk::root_link`]); none for a tree without that index.
    fn root_link(&self) -> Option<String> {
        self.manifest.files.contains_key(crate::tree::layout::BULK_INDEX_PATH).then(crate::bulk::root_link)
    }
}

/// Where a host listens: `HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listen {
    /// Address or name to bind, without brackets; empty for every interface.
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Listen {
    fn parse(text: &str) -> Result<Listen> {
        let bad = || {
            anyhow::anyhow!(
                "--listen {text:?} is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:80, or :8080 for \
                 every interface)"
            )
        };
        // the forms `gen serve --addr` takes too; a host needs a fixed port, not 0
        let (host, port) = crate::config::parse_listen(text).filter(|(_, port)| *port > 0).ok_or_else(bad)?;
        Ok(Listen { host, port })
    }

    /// True when the host is one address of every interface (or none is given).
    fn is_any(&self) -> bool {
        self.host.is_empty() || self.host == "0.0.0.0" || self.host == "::"
    }
}

/// A regular expression (no anchors, no braces) matching the decimal numbers written without
/// leading zeros (`0`, or `[1-9][0-9]*`) that are at least `n`, given the same way.
pub(crate) fn at_least(n: &str) -> String {
    assert!(n == "0" || (!n.starts_with('0') && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())), "{n}");
    let digits = n.len();
    let any = "[0-9]";
    // longer numbers
    let mut alternatives = vec![format!("[1-9]{}{any}*", any.repeat(digits))];
    // as long: the same first i digits, then a greater one, then anything
    for (i, d) in n.bytes().enumerate() {
        let d = d - b'0';
        if d < 9 {
            let class = if d == 8 { "9".to_string() } else { format!("[{}-9]", d + 1) };
            alternatives.push(format!("{}{class}{}", &n[..i], any.repeat(digits - i - 1)));
        }
    }
    alternatives.push(n.to_string());
    alternatives.join("|")
}

/// `2^64` in decimal: the least value `gen serve` refuses as too large.
const U64_OVERFLOW: &str = "18446744073709551616";

/// Regex of the digit strings (leading zeros removed) too large for `gen serve`.
fn overflow() -> String {
    at_least(U64_OVERFLOW)
}

/// Regex (unanchored) of the raw paths `gen serve` reads: `/`-separated segments of
/// `[A-Za-z0-9._-]` or percent-escapes of them, one optional trailing slash. Such a path that
/// also has a segment of dots only ([`DOT_SEGMENT`]) is refused too.
const RAW_PATH: &str =
    "(?:/(?:[A-Za-z0-9._-]|%(?:2[DdEe]|3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|5[Ff]|6[1-9A-Fa-f]|7[0-9Aa]))+)+/?";

/// Regex (unanchored) of a segment made of dots only, raw (`/./`, `/../`, `/%2e%2e`), at the end
/// of a path or before a `/`.
const DOT_SEGMENT: &str = r"/(?:\.|%2[Ee])+(?:/|$)";

/// Characters of a decoded, lower-case path segment, as a regex class body: the 404 messages
/// that name a segment are worded for paths of these.
const SEGMENT_CHARS: &str = "a-z0-9._-";

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(re: &str, text: &str) -> bool {
        // The expressions are simple alternations of literal digits, classes and `*`: check them
        // with a tiny backtracking matcher rather than a regex crate.
        fn m(pattern: &[u8], text: &[u8]) -> bool {
            if pattern.is_empty() {
                return text.is_empty();
            }
            let (atom, rest): (Box<dyn Fn(u8) -> bool>, &[u8]) = if pattern[0] == b'[' {
                let end = pattern.iter().position(|&b| b == b']').unwrap();
                let class = pattern[1..end].to_vec();
                (Box::new(move |c| c >= class[0] && c <= class[2]), &pattern[end + 1..])
            } else {
                let p = pattern[0];
                (Box::new(move |c| c == p), &pattern[1..])
            };
            if rest.first() == Some(&b'*') {
                let rest = &rest[1..];
                let mut i = 0;
                loop {
                    if m(rest, &text[i..]) {
                        return true;
                    }
                    if i < text.len() && atom(text[i]) {
                        i += 1;
                    } else {
                        return false;
                    }
                }
            }
            !text.is_empty() && atom(text[0]) && m(rest, &text[1..])
        }
        re.split('|').any(|alt| m(alt.as_bytes(), text.as_bytes()))
    }

    #[test]
    fn at_least_matches_exactly_the_numbers_at_or_above() {
        for n in [0u64, 1, 5, 9, 10, 19, 20, 64, 99, 100, 137, 199, 200, 909, 990, 1000, 1021, 2090] {
            let re = at_least(&n.to_string());
            assert!(!re.contains('{'), "{re}");
            for k in 0..3000u64 {
                assert_eq!(matches(&re, &k.to_string()), k >= n, "{n}: {k} against {re}");
            }
            assert!(matches(&re, "100000000000000000000000"));
        }
        let re = overflow();
        assert!(!matches(&re, &u64::MAX.to_string()));
        assert!(matches(&re, U64_OVERFLOW));
        assert!(matches(&re, "18446744073709551617"));
        assert!(matches(&re, "99999999999999999999"));
        assert!(!matches(&re, "9999999999999999999"));
    }

    #[test]
    fn listen_forms() {
        let l = |h: &str, p| Listen { host: h.to_string(), port: p };
        assert_eq!(Listen::parse("127.0.0.1:8080").unwrap(), l("127.0.0.1", 8080));
        assert_eq!(Listen::parse("[::1]:80").unwrap(), l("::1", 80));
        assert_eq!(Listen::parse(":8080").unwrap(), l("", 8080));
        assert_eq!(Listen::parse("8080").unwrap(), l("", 8080));
        assert_eq!(Listen::parse("localhost:8080").unwrap(), l("localhost", 8080));
        for bad in ["", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "::1:80", "[x]:80", "a b:80", "h:p"] {
            assert!(Listen::parse(bad).is_err(), "{bad}");
        }
    }
}
