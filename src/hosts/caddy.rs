//! The Caddy configuration: one Caddyfile site block.
//!
//! How it reads a request, in Caddy's terms: `map` reads `{query.limit}`/`{query.offset}` by
//! the paging rules; one `route` checks the method and the raw path, sets `vars` for a list
//! request, turns a malformed value into `error 400`, rewrites a list request to its page file,
//! and maps a folder to its `index.json` with `try_files` (`file_server` with
//! `disable_canonical_uris`, so neither slash form redirects); `handle_errors` words every
//! error as `gen serve` does.

use super::{DOT_SEGMENT, RAW_PATH, SEGMENT_CHARS, Site, at_least, overflow};
use crate::answers::template::{self, Hole, SAFE_PATH, SAFE_VALUE, Template};
use crate::answers::{ALLOW, ALLOW_METHODS, ALLOW_ORIGIN, MAX_SHOWN_PATH, PREFLIGHT_MAX_AGE, PREFLIGHT_VARY};
use crate::tree::JSON_MEDIA_TYPE;
use crate::tree::layout::{ALL_PAGE, API_PREFIX, DEFAULT_PAGE_SIZE, DOCUMENT_FILE, PAGES_DIR};
use std::fmt::Write as _;

/// The site block for `site`: its parts in the order Caddy applies them.
pub(crate) fn config(site: &Site) -> String {
    let mut out = site.header(
        "caddy",
        "Add this site block to your Caddyfile (HTTP only; for HTTPS write your domain as the site address).",
    );
    out.push_str(&site_settings(site));
    out.push_str(&paging_maps());
    out.push_str(&matchers(site));
    out.push_str(&route_checks());
    out.push_str(&list_rewrites(site));
    out.push_str(&route_files(site));
    out
}

/// The site's address, root and the headers of every answer (meta and the bulk-data index
/// revalidated).
fn site_settings(site: &Site) -> String {
    let bind = if site.listen.is_any() { String::new() } else { format!("\tbind {}\n", site.listen.host) };
    let deploy: String =
        site.deploy_headers().iter().map(|(name, value)| format!("\t\t{name} \"{value}\"\n")).collect();
    format!(
        r#"http://:{port} {{
{bind}	root * "{root}"
	header {{
		Access-Control-Allow-Origin "{ALLOW_ORIGIN}"
{deploy}		Content-Type "{JSON_MEDIA_TYPE}"
		Cache-Control "public, max-age={max_age}"
	}}
	# meta and the bulk-data index are revalidated on every use (`gen publish` uploads them so
	# too): a client checking for a new deploy sees it at once.
	@gen_meta path {API_PREFIX}meta {API_PREFIX}meta/ {API_PREFIX}{bulk_segment} {API_PREFIX}{bulk_segment}/
	header @gen_meta {{
		Cache-Control "no-cache"
		defer
	}}
{link}
"#,
        port = site.listen.port,
        root = site.root,
        max_age = site.max_age,
        bulk_segment = crate::tree::layout::BULK_SEGMENT,
        link = site.root_link().map_or_else(String::new, |link| format!(
            "\t# The root names the bulk-data index, which it does not list, in a Link header.\n\
             \t@gen_root path {root} {API_PREFIX}\n\theader @gen_root Link `{link}`\n",
            root = API_PREFIX.trim_end_matches('/'),
        )),
    )
}

/// `?limit=` and `?offset=` read by the paging rules into `{gen_limit}` and `{gen_offset}`
/// (`bad` when malformed), and the raw path into `{gen_raw_path}`.
fn paging_maps() -> String {
    format!(
        r#"	# ?limit= and ?offset=: absent or empty is {default} and 0, limit 0 is {default}, leading zeros are
	# dropped; anything but digits, or more than 2^64 - 1, is malformed.
	map {{query.limit}} {{gen_limit}} {{
		~^0*$ {default}
		~^0*(?:{overflow})$ bad
		~^0*([0-9]+)$ ${{1}}
		default bad
	}}
	# The path as sent, before percent-decoding, for 404 messages.
	map {{http.request.uri}} {{gen_raw_path}} {{
		~^([^?]*) ${{1}}
	}}
	map {{query.offset}} {{gen_offset}} {{
		~^$ 0
		~^0*(?:{overflow})$ bad
		~^0*([0-9]+)$ ${{1}}
		default bad
	}}

"#,
        default = DEFAULT_PAGE_SIZE,
        overflow = overflow(),
    )
}

/// The named matchers: the method, a refused raw path, what is not a document, a malformed
/// query, and each resource's list and whole-list request.
fn matchers(site: &Site) -> String {
    let mut out = format!(
        r#"	@options method OPTIONS
	@not_allowed not method GET HEAD OPTIONS
	@asks_headers header Access-Control-Request-Headers *
	# The raw path must be segments of [A-Za-z0-9._-] or escapes of them: no empty or dots-only
	# segments, no encoded slashes (as `gen serve` reads paths).
	@refused expression `!{{http.request.uri}}.matches("^{raw_path}(?:[?].*)?$") || {{http.request.uri}}.matches("^[^?]*{dot_segment}")`
	@not_a_document {{
		not file {{path}}/{DOCUMENT_FILE}
{not_files}	}}
	@bad_query expression `{{http.vars.gen_list}} != "" && ({{gen_limit}} == "bad" || {{gen_offset}} == "bad")`
"#,
        not_files = site.files.iter().map(|f| format!("\t\tnot path /{f}\n")).collect::<String>(),
        raw_path = RAW_PATH,
        dot_segment = DOT_SEGMENT.replace('\\', "\\\\").replace("(?:/|$)", "(?:/|[?]|$)"),
    );
    for (segment, count) in &site.resources {
        let _ = write!(
            out,
            r#"	@list_{segment} path {API_PREFIX}{segment} {API_PREFIX}{segment}/
	@all_{segment} {{
		path {API_PREFIX}{segment} {API_PREFIX}{segment}/
		expression `{{gen_offset}} == "0" && {{gen_limit}}.matches("^(?:{everything})$")`
	}}
"#,
            everything = at_least(&count.to_string()),
        );
    }
    out
}

/// The route's first checks: the preflight, the method, a refused path, and the bulk-data files.
fn route_checks() -> String {
    format!(
        r#"
	route {{
		handle @options {{
			header {{
				Allow "{allow}"
				Access-Control-Allow-Methods "{ALLOW_METHODS}"
				Access-Control-Max-Age {PREFLIGHT_MAX_AGE}
				Vary {PREFLIGHT_VARY}
				-Content-Type
				-Cache-Control
				-Link
			}}
			header @asks_headers Access-Control-Allow-Headers {{http.request.header.Access-Control-Request-Headers}}
			respond 204
		}}
		error @not_allowed 405
		vars {{
			gen_list ""
			gen_count ""
			gen_refused ""
		}}
		vars @refused gen_refused 1
		error @refused 404

		# Bulk-data files: gzip already, sent as they are (never compressed again, whatever the
		# client accepts), cached forever (their names change with their bytes).
		@gen_bulk path_regexp ^/{bulk_key}/[a-z0-9-]+{bulk_suffix}$
		handle @gen_bulk {{
			header {{
				Content-Type "{bulk_type}"
				Content-Encoding "{bulk_encoding}"
				Cache-Control "{bulk_cache}"
			}}
			file_server
		}}

"#,
        allow = ALLOW,
        bulk_key = crate::tree::layout::BULK_KEY,
        bulk_suffix = crate::tree::layout::BULK_SUFFIX.replace('.', "\\."),
        bulk_type = crate::bulk::CONTENT_TYPE,
        bulk_encoding = crate::bulk::CONTENT_ENCODING,
        bulk_cache = crate::bulk::CACHE_CONTROL,
    )
}

/// Each list request: its `vars`, the 400 of a malformed query, and the rewrite to its page file.
fn list_rewrites(site: &Site) -> String {
    let mut out = String::from(
        "\t\t# Each list: ?limit=&offset= onto its page file; offset 0 with limit >= count is the whole list.\n",
    );
    for (segment, count) in &site.resources {
        let _ = write!(
            out,
            r#"		vars @list_{segment} {{
			gen_list {segment}
			gen_count {count}
		}}
"#
        );
    }
    out.push_str("\t\terror @bad_query 400\n");
    for (segment, _) in &site.resources {
        let _ = write!(
            out,
            "\t\trewrite @all_{segment} {API_PREFIX}{segment}/{PAGES_DIR}/{ALL_PAGE}/\n\
             \t\trewrite @list_{segment} {API_PREFIX}{segment}/{PAGES_DIR}/{{gen_limit}}/{{gen_offset}}/\n"
        );
    }
    out
}

/// The route's end: the documents that are files of their own, every other document a folder's
/// `index.json`, compression; then the error answers, and the site block closed.
fn route_files(site: &Site) -> String {
    let compression = if site.manifest.settings.gzip {
        "\t\t\t# The .gz sibling written by `gen build --gzip` is sent to clients that accept gzip.\n\
         \t\t\tprecompressed gzip\n"
    } else {
        ""
    };
    let encode = if site.manifest.settings.gzip {
        ""
    } else {
        "\t\t# The tree has no .gz siblings (`gen build --gzip` writes them): compress on the fly.\n\
         \t\tencode gzip\n"
    };
    format!(
        r#"
{file_rewrites}
		# Every document is a folder's index.json, answered at /x and /x/ alike (no redirect);
		# nothing else is served.
		error @not_a_document 404
		try_files {{path}}/{DOCUMENT_FILE}
{encode}		file_server {{
			index {DOCUMENT_FILE}
			disable_canonical_uris
{compression}		}}
	}}

	# Errors, worded as `gen serve` words them.
{errors}}}
"#,
        errors = errors(site),
        file_rewrites = site
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| format!("\t\t@file_{i} path /{f}/\n\t\trewrite @file_{i} /{f}\n"))
            .collect::<String>(),
    )
}

/// One error answer of `handle_errors`: when its matcher holds, `body` with `status`.
struct Answer {
    name: &'static str,
    /// The matcher's definition: what follows `@name ` (one line, or a `{ }` block).
    matcher: String,
    body: String,
    status: u16,
}

/// The `handle_errors` block: each error answered as `gen serve` words it, the first answer
/// whose matcher holds.
fn errors(site: &Site) -> String {
    let mut answers = vec![method_answer()];
    answers.extend(bad_request_answers());
    answers.extend(not_found_answers(site));

    let mut out = format!(
        "\thandle_errors {{\n\t\theader {{\n\t\t\tCache-Control \"no-store\"\n\t\t\t\
         Content-Type \"{JSON_MEDIA_TYPE}\"\n\t\t\t-ETag\n\t\t\t-Last-Modified\n\t\t\t-Link\n\t\t}}\n",
    );
    for answer in &answers {
        let _ = writeln!(out, "\t\t@{} {}", answer.name, answer.matcher);
    }
    let _ = writeln!(out, "\t\troute {{\n\t\t\theader @e405 Allow \"{}\"", ALLOW);
    for answer in &answers {
        let _ = writeln!(out, "\t\t\trespond @{} `{}` {}", answer.name, answer.body, answer.status);
    }
    // anything else the server itself refuses
    out.push_str(
        "\t\t\trespond `\\{\"detail\":\"{http.error.status_text}\"\\}` {http.error.status_code}\n\t\t}\n\t}\n",
    );
    out
}

/// `{http.error.status_code} == status` as a Caddy expression's condition.
fn status_is(status: u16) -> String {
    format!("{{http.error.status_code}} == {status}")
}

/// An `expression` matcher of `condition`.
fn expression(condition: String) -> String {
    format!("expression `{condition}`")
}

/// The 405 of a method not served.
fn method_answer() -> Answer {
    Answer {
        name: "e405",
        matcher: expression(status_is(405)),
        body: quote(&template::method_not_allowed(), |h| match h {
            Hole::Method => "{http.request.method}".to_string(),
            other => panic!("no {other:?} in a 405"),
        }),
        status: 405,
    }
}

/// The 400s of a malformed `limit` or `offset`, worded by whether its value can be shown.
// A table literal, one `Answer` per error in the order Caddy tries them.
fn bad_request_answers() -> Vec<Answer> {
    let safe = SAFE_VALUE;
    let value = |name: &'static str| {
        move |h: Hole| match h {
            Hole::Value => format!("{{query.{name}}}"),
            other => panic!("no {other:?} in a 400"),
        }
    };
    let bad =
        |name: &'static str, test: &str| expression(format!(r#"{} && {{gen_{name}}} == "bad"{test}"#, status_is(400)));
    vec![
        Answer {
            name: "e400_limit_negative",
            matcher: bad("limit", &format!(r#" && {{query.limit}}.matches("^-{safe}*$")"#)),
            body: quote(&template::bad_param("limit", true, true), value("limit")),
            status: 400,
        },
        Answer {
            name: "e400_limit",
            matcher: bad("limit", &format!(r#" && {{query.limit}}.matches("^{safe}+$")"#)),
            body: quote(&template::bad_param("limit", true, false), value("limit")),
            status: 400,
        },
        Answer {
            name: "e400_limit_negative_unquoted",
            matcher: bad("limit", r#" && {query.limit}.startsWith("-")"#),
            body: quote(&template::bad_param("limit", false, true), value("limit")),
            status: 400,
        },
        Answer {
            name: "e400_limit_unquoted",
            matcher: bad("limit", ""),
            body: quote(&template::bad_param("limit", false, false), value("limit")),
            status: 400,
        },
        Answer {
            name: "e400_offset",
            matcher: bad("offset", &format!(r#" && {{query.offset}}.matches("^{safe}+$")"#)),
            body: quote(&template::bad_param("offset", true, false), value("offset")),
            status: 400,
        },
        Answer {
            name: "e400_offset_unquoted",
            matcher: expression(status_is(400)),
            body: quote(&template::bad_param("offset", false, false), value("offset")),
            status: 400,
        },
    ]
}

/// The 404s: a page the list does not hold, a missing record, an unknown resource, any other
/// path.
// A table literal, one `Answer` per error in the order Caddy tries them.
fn not_found_answers(site: &Site) -> Vec<Answer> {
    let segments: Vec<&str> = site.resources.iter().map(|(s, _)| s.as_str()).collect();
    let not_refused = format!(r#"{} && {{http.vars.gen_refused}} == """#, status_is(404));
    vec![
        Answer {
            name: "e404_page",
            matcher: expression(format!(r#"{} && {{http.vars.gen_list}} != """#, status_is(404))),
            body: quote(&template::page_not_held(&site.page_sizes), |h| match h {
                Hole::Segment => "{http.vars.gen_list}".to_string(),
                Hole::Count => "{http.vars.gen_count}".to_string(),
                Hole::Offset => "{gen_offset}".to_string(),
                Hole::Limit => "{gen_limit}".to_string(),
                other => panic!("no {other:?} in a page 404"),
            }),
            status: 404,
        },
        Answer {
            name: "e404_record",
            matcher: format!(
                "{{\n\t\t\t{}\n\t\t\tpath_regexp record ^{API_PREFIX}({})/([{SEGMENT_CHARS}]+)/?$\n\t\t}}",
                expression(not_refused.clone()),
                site.resource_alternation()
            ),
            body: quote(&template::no_record(), |h| match h {
                Hole::Segment => "{re.record.1}".to_string(),
                Hole::Record => "{re.record.2}".to_string(),
                other => panic!("no {other:?} in a record 404"),
            }),
            status: 404,
        },
        Answer {
            name: "e404_resource",
            matcher: format!(
                "{{\n\t\t\t{}\n\t\t\tpath_regexp resource ^{API_PREFIX}([{SEGMENT_CHARS}]+)(?:/[{SEGMENT_CHARS}]+)*/?$\n\t\t\t\
                 not path_regexp ^{API_PREFIX}(?:{})(?:/|$)\n\t\t}}",
                expression(not_refused),
                site.segment_alternation()
            ),
            body: quote(&template::no_resource(&segments), |h| match h {
                Hole::Segment => "{re.resource.1}".to_string(),
                other => panic!("no {other:?} in a resource 404"),
            }),
            status: 404,
        },
        Answer {
            name: "e404_path",
            matcher: expression(format!(
                r#"{} && size({{gen_raw_path}}) <= {MAX_SHOWN_PATH} && {{gen_raw_path}}.matches("^{}+$")"#,
                status_is(404),
                SAFE_PATH.replace('\\', "\\\\"),
            )),
            body: quote(&template::not_a_document(true), |h| match h {
                Hole::Path => "{gen_raw_path}".to_string(),
                other => panic!("no {other:?} in a path 404"),
            }),
            status: 404,
        },
        Answer {
            name: "e404_path_unquoted",
            matcher: expression(status_is(404)),
            body: quote(&template::not_a_document(false), |h| panic!("no {h:?} in a path 404")),
            status: 404,
        },
    ]
}

/// A body as a Caddyfile backtick token: literal braces escaped (`\{`, so that they are not read
/// as placeholders), holes as placeholders.
fn quote(template: &Template, hole: impl Fn(Hole) -> String) -> String {
    template.render(
        |text| {
            assert!(!text.contains('`'), "a Caddyfile backtick token cannot hold a backtick: {text}");
            text.replace('{', "\\{").replace('}', "\\}")
        },
        hole,
    )
}
