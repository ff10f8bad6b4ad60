//! The nginx configuration: one `server { }` block, to include inside `http { }`.
//!
//! How it reads a request, in nginx's terms: server-level `set`/`if` (the rewrite module, run
//! once per request before a location is chosen) read the method, the raw path and
//! `$arg_limit`/`$arg_offset` as `gen serve` does; each resource's list is a regex location that
//! rewrites to its page file; `location /` maps a folder to its `index.json` with `try_files`
//! (both slash forms, no redirect); errors go to named locations that word them as `gen serve`
//! does. Only `return`, `set` and `rewrite` are used inside `if`, the uses nginx documents as safe.

use super::{DOT_SEGMENT, RAW_PATH, SEGMENT_CHARS, Site, at_least, overflow};
use crate::answers::template::{self, Hole, SAFE_PATH, SAFE_VALUE, Template};
use crate::answers::{ALLOW, ALLOW_METHODS, ALLOW_ORIGIN, MAX_SHOWN_PATH, PREFLIGHT_MAX_AGE, PREFLIGHT_VARY};
use crate::tree::layout::{ALL_PAGE, API_PREFIX, DEFAULT_PAGE_SIZE, DOCUMENT_FILE, PAGES_DIR};
use std::fmt::Write as _;

/// The `server { }` block for `site`: its parts in the order nginx applies them.
pub(crate) fn config(site: &Site) -> String {
    let mut out = site.header(
        "nginx",
        "Include this block inside `http { }` (e.g. /etc/nginx/conf.d/gen.conf), then `nginx -t && nginx -s reload`.",
    );
    out.push_str(&server_settings(site));
    out.push_str(&request_checks(site));
    out.push_str(&paging_params());
    let _ = write!(
        out,
        "\n    location / {{\n        try_files $uri/{DOCUMENT_FILE} =404;\n    }}\n{files}{bulk}",
        files = file_locations(site),
        bulk = bulk_location(site),
    );
    out.push_str(&list_locations(site));
    out.push_str("\n    # Errors, worded as `gen serve` words them.\n");
    out.push_str(&errors(site));
    out.push_str("}\n");
    out
}

/// The server's own settings: where it listens, the root, the media type, compression, the
/// headers of every answer and the error pages.
fn server_settings(site: &Site) -> String {
    let listen = match (&site.listen.host, site.listen.port) {
        (host, port) if host.is_empty() => format!("{port}"),
        (host, port) if host.contains(':') => format!("[{host}]:{port}"),
        (host, port) => format!("{host}:{port}"),
    };
    let gzip = if site.manifest.settings.gzip {
        "    # The .gz sibling written by `gen build --gzip` is sent to clients that accept gzip.\n    \
         gzip_static on;\n    gzip_vary on;\n"
    } else {
        "    # The tree has no .gz siblings (`gen build --gzip` writes them): compress on the fly.\n    \
         gzip on;\n    gzip_types application/json;\n    gzip_min_length 200;\n    gzip_vary on;\n"
    };
    // nginx's `add_header` in a location replaces the server's: every block that adds headers
    // repeats these.
    let deploy = deploy_headers(site, "    ");
    // nginx names the charset apart from the type
    let (media_type, charset) =
        crate::tree::JSON_MEDIA_TYPE.split_once("; charset=").expect("the media type names its charset");
    format!(
        r#"server {{
    listen {listen};
    server_name _;
    root "{root}";

    # Every document is a folder's index.json, answered at /x and /x/ alike (no redirect).
    index {DOCUMENT_FILE};
    types {{ }}
    default_type {media_type};
    charset {charset};
    charset_types {media_type};
    etag on;
{gzip}    add_header Access-Control-Allow-Origin "{ALLOW_ORIGIN}" always;
{deploy}    add_header Cache-Control $gen_cache_control;
{link}
    error_page 400 @gen_400;
    error_page 404 @gen_404;
    error_page 405 @gen_405;
    error_page 418 = @gen_options;

"#,
        root = site.root,
        // sent when not empty: with the root (see `request_checks`)
        link = if site.root_link().is_some() { "    add_header Link $gen_link;\n" } else { "" },
    )
}

/// The server-level reading of a request, as `gen serve` reads it: the method, the raw path, and
/// the documents revalidated on every use.
fn request_checks(site: &Site) -> String {
    format!(
        r#"    # Read the request as `gen serve` does. The raw path (before decoding) must be segments of
    # [A-Za-z0-9._-] or escapes of them: no empty or dots-only segments, no encoded slashes.
    set $gen_refused "";
    set $gen_list "";
    set $gen_count "";
    set $gen_value "";
    # (A named capture, as $1 copied by `set` comes out percent-escaped again.)
    if ($request_uri ~ "^(?<gen_raw_path>[^?]*)") {{
    }}
    if ($request_method !~ "^(?:GET|HEAD|OPTIONS)$") {{
        return 405;
    }}
    if ($request_method = OPTIONS) {{
        return 418;
    }}
    if ($gen_raw_path !~ "^{raw_path}$") {{
        set $gen_refused 1;
        return 404;
    }}
    if ($gen_raw_path ~ "{dot_segment}") {{
        set $gen_refused 1;
        return 404;
    }}
    # meta and the bulk-data index are revalidated on every use (`gen publish` uploads them so
    # too): a client checking for a new deploy sees it at once.
    set $gen_cache_control "public, max-age={max_age}";
    if ($gen_raw_path ~ "^{API_PREFIX}(?:meta|{bulk_segment})/?$") {{
        set $gen_cache_control "no-cache";
    }}
{link}"#,
        max_age = site.max_age,
        raw_path = RAW_PATH,
        dot_segment = DOT_SEGMENT,
        bulk_segment = crate::tree::layout::BULK_SEGMENT,
        link = site.root_link().map_or_else(String::new, |link| format!(
            "    # The root names the bulk-data index, which it does not list, in a Link header.\n    \
             set $gen_link \"\";\n    if ($gen_raw_path ~ \"^{API_PREFIX}?$\") {{\n        \
             set $gen_link '{link}';\n    }}\n"
        )),
    )
}

/// `?limit=` and `?offset=` read by the paging rules into `$gen_limit` and `$gen_offset`, and
/// `$gen_bad` naming the malformed one.
fn paging_params() -> String {
    format!(
        r#"    # ?limit= and ?offset=: absent or empty is {default} and 0, limit 0 is {default}, leading zeros
    # are dropped; anything but digits, or more than 2^64 - 1, is malformed (limit checked first).
    set $gen_offset $arg_offset;
    if ($gen_offset ~ "^0*([0-9]+)$") {{
        set $gen_offset $1;
    }}
    if ($gen_offset = "") {{
        set $gen_offset 0;
    }}
    set $gen_limit $arg_limit;
    if ($gen_limit ~ "^0*([0-9]+)$") {{
        set $gen_limit $1;
    }}
    if ($gen_limit ~ "^0?$") {{
        set $gen_limit {default};
    }}
    set $gen_bad "";
    if ($gen_offset !~ "^[0-9]+$") {{
        set $gen_bad offset;
    }}
    if ($gen_offset ~ "^(?:{overflow})$") {{
        set $gen_bad offset;
    }}
    if ($gen_limit !~ "^[0-9]+$") {{
        set $gen_bad limit;
    }}
    if ($gen_limit ~ "^(?:{overflow})$") {{
        set $gen_bad limit;
    }}
"#,
        default = DEFAULT_PAGE_SIZE,
        overflow = overflow(),
    )
}

/// Each resource's list: a regex location that rewrites `?limit=&offset=` to its page file.
fn list_locations(site: &Site) -> String {
    let mut out = String::from(
        "\n    # Each list: ?limit=&offset= onto its page file; offset 0 with limit >= count is the whole list.\n",
    );
    for (segment, count) in &site.resources {
        let _ = write!(
            out,
            r#"    location ~ "^{API_PREFIX}{segment}/?$" {{
        if ($gen_bad) {{
            return 400;
        }}
        set $gen_list {segment};
        set $gen_count {count};
        set $gen_page "$gen_limit/$gen_offset";
        if ($gen_page ~ "^(?:{everything})/0$") {{
            set $gen_page {ALL_PAGE};
        }}
        rewrite ^ "{API_PREFIX}{segment}/{PAGES_DIR}/$gen_page/" last;
    }}
"#,
            everything = at_least(&count.to_string()),
        );
    }
    out
}

/// The deploy headers as `add_header` lines, each led by `indent`.
fn deploy_headers(site: &Site, indent: &str) -> String {
    site.deploy_headers()
        .iter()
        .map(|(name, value)| format!("{indent}add_header {name} \"{value}\" always;\n"))
        .collect()
}

/// Documents that are files of their own (`openapi.json`), at their path with or without a slash.
fn file_locations(site: &Site) -> String {
    let mut out = String::new();
    if !site.files.is_empty() {
        out.push_str("    # Documents that are files of their own, at /x and /x/ alike.\n");
    }
    for file in &site.files {
        let _ = write!(
            out,
            "    location = /{file} {{\n        try_files /{file} =404;\n    }}\n    \
             location = /{file}/ {{\n        try_files /{file} =404;\n    }}\n"
        );
    }
    out
}

/// The bulk-data files: gzip already, so sent as they are (never compressed again, and with
/// `Content-Encoding: gzip` whatever the client accepts), cached forever (their names change
/// with their bytes).
fn bulk_location(site: &Site) -> String {
    use crate::bulk::{CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE};
    let deploy = deploy_headers(site, "        ");
    format!(
        "    # Bulk-data files: gzip already, sent as they are, cached forever.\n    \
         location ~ \"^/{key}/[a-z0-9-]+{suffix}$\" {{\n        \
         gzip off;\n        gzip_static off;\n        types {{ }}\n        default_type {CONTENT_TYPE};\n        \
         charset off;\n        \
         add_header Content-Encoding {CONTENT_ENCODING} always;\n        \
         add_header Access-Control-Allow-Origin \"{ALLOW_ORIGIN}\" always;\n{deploy}        \
         add_header Cache-Control \"{CACHE_CONTROL}\" always;\n        \
         try_files $uri =404;\n    }}\n",
        key = crate::tree::layout::BULK_KEY,
        suffix = crate::tree::layout::BULK_SUFFIX.replace('.', "\\."),
    )
}

/// The named locations that answer errors, in the order of the `error_page` lines.
fn errors(site: &Site) -> String {
    let deploy = deploy_headers(site, "        ");
    let headers = format!(
        "        add_header Access-Control-Allow-Origin \"{ALLOW_ORIGIN}\" always;\n{deploy}        \
                   add_header Cache-Control \"no-store\" always;\n"
    );
    let mut out = bad_request_location(&headers);
    out.push_str(&not_found_location(site, &headers));
    out.push_str(&method_locations(&headers, &deploy));
    out
}

/// `@gen_400`: the malformed `limit` or `offset`, worded by whether its value can be shown.
fn bad_request_location(headers: &str) -> String {
    let value = |h: Hole| match h {
        Hole::Value => "${gen_value}".to_string(),
        other => panic!("no {other:?} in a 400"),
    };
    format!(
        r#"    location @gen_400 {{
{headers}        set $gen_value $arg_offset;
        if ($gen_bad = limit) {{
            set $gen_value $arg_limit;
        }}
        set $gen_case "$gen_bad:$gen_value";
        if ($gen_case ~ "^limit:-{safe}*$") {{
            return 400 '{limit_negative}';
        }}
        if ($gen_case ~ "^limit:{safe}+$") {{
            return 400 '{limit}';
        }}
        if ($gen_case ~ "^limit:-") {{
            return 400 '{limit_negative_generic}';
        }}
        if ($gen_case ~ "^limit:") {{
            return 400 '{limit_generic}';
        }}
        if ($gen_case ~ "^offset:{safe}+$") {{
            return 400 '{offset}';
        }}
        if ($gen_case ~ "^offset:") {{
            return 400 '{offset_generic}';
        }}
        return 400 '{{"detail":"Bad request."}}';
    }}
"#,
        safe = SAFE_VALUE,
        limit_negative = quote(&template::bad_param("limit", true, true), value),
        limit = quote(&template::bad_param("limit", true, false), value),
        limit_negative_generic = quote(&template::bad_param("limit", false, true), value),
        limit_generic = quote(&template::bad_param("limit", false, false), value),
        offset = quote(&template::bad_param("offset", true, false), value),
        offset_generic = quote(&template::bad_param("offset", false, false), value),
    )
}

/// `@gen_404`: a page the list does not hold, a missing record, an unknown resource, or any
/// other path that is not a document.
fn not_found_location(site: &Site, headers: &str) -> String {
    let segments: Vec<&str> = site.resources.iter().map(|(s, _)| s.as_str()).collect();
    let page = |h: Hole| match h {
        Hole::Segment => "${gen_list}".to_string(),
        Hole::Count => "${gen_count}".to_string(),
        Hole::Offset => "${gen_offset}".to_string(),
        Hole::Limit => "${gen_limit}".to_string(),
        other => panic!("no {other:?} in a page 404"),
    };
    let captures = |h: Hole| match h {
        Hole::Segment => "$1".to_string(),
        Hole::Record => "$2".to_string(),
        other => panic!("no {other:?} in a path 404"),
    };
    let path = |h: Hole| match h {
        Hole::Path => "${gen_raw_path}".to_string(),
        other => panic!("no {other:?} in a path 404"),
    };
    format!(
        r#"    location @gen_404 {{
{headers}        if ($gen_list) {{
            return 404 '{page}';
        }}
        set $gen_key "$gen_refused:$uri";
        if ($gen_key ~ "^:{API_PREFIX}({resources})/([{chars}]+)/?$") {{
            return 404 '{no_record}';
        }}
        if ($gen_key ~ "^:{API_PREFIX}(?!(?:{known})(?:/|$))([{chars}]+)(?:/[{chars}]+)*/?$") {{
            return 404 '{no_resource}';
        }}
        if ($gen_raw_path ~ "^{safe_path}{{1,{max}}}$") {{
            return 404 '{not_a_document}';
        }}
        return 404 '{not_a_document_generic}';
    }}
"#,
        page = quote(&template::page_not_held(&site.page_sizes), page),
        resources = site.resource_alternation(),
        known = site.segment_alternation(),
        chars = SEGMENT_CHARS,
        no_record = quote(&template::no_record(), captures),
        no_resource = quote(&template::no_resource(&segments), captures),
        safe_path = SAFE_PATH,
        max = MAX_SHOWN_PATH,
        not_a_document = quote(&template::not_a_document(true), path),
        not_a_document_generic = quote(&template::not_a_document(false), path),
    )
}

/// `@gen_405` for a method not served, and `@gen_options`, the answer to a preflight.
fn method_locations(headers: &str, deploy: &str) -> String {
    format!(
        r#"    location @gen_405 {{
{headers}        add_header Allow "{allow}" always;
        return 405 '{method}';
    }}
    location @gen_options {{
        add_header Access-Control-Allow-Origin "{ALLOW_ORIGIN}" always;
{deploy}        add_header Allow "{allow}" always;
        add_header Access-Control-Allow-Methods "{ALLOW_METHODS}" always;
        add_header Access-Control-Allow-Headers $http_access_control_request_headers always;
        add_header Access-Control-Max-Age {PREFLIGHT_MAX_AGE} always;
        add_header Vary {PREFLIGHT_VARY} always;
        return 204;
    }}
"#,
        allow = ALLOW,
        method = quote(&template::method_not_allowed(), |h| match h {
            Hole::Method => "${request_method}".to_string(),
            other => panic!("no {other:?} in a 405"),
        }),
    )
}

/// A body as the inside of an nginx single-quoted string: `\` and `'` escaped, holes as variables.
fn quote(template: &Template, hole: impl Fn(Hole) -> String) -> String {
    template.render(
        |text| {
            assert!(!text.contains('$'), "nginx cannot write a literal $ in a string: {text}");
            text.replace('\\', "\\\\").replace('\'', "\\'")
        },
        hole,
    )
}
