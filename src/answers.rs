//! Every error answer of the API, worded once.
//!
//! `gen serve` calls these functions with the request's values; the host configurations call
//! the same functions with placeholders ([`template`]) and write the result in their own
//! syntax, so a body cannot drift between the two. The error schemas the OpenAPI document
//! quotes ([`error_schemas`]) live here too, below it, and are tested against every body here.
//! The HTTP reader's limits and the answers to the request heads it refuses are in [`reader`].

use crate::tree::layout::{API_PREFIX, DEFAULT_PAGE_SIZE};
use serde_json::{Value, json};
use std::fmt::Write as _;

pub(crate) mod reader;
pub(crate) use reader::{headers_too_large, target_too_long};

/// Methods answered, as the `Allow` header says.
pub(crate) const ALLOW: &str = "GET, HEAD, OPTIONS";

/// `Access-Control-Allow-Origin` on every answer: any page may read the API.
pub(crate) const ALLOW_ORIGIN: &str = "*";

/// `Access-Control-Allow-Methods` of a preflight (`OPTIONS`) answer.
pub(crate) const ALLOW_METHODS: &str = "GET, HEAD";

/// `Access-Control-Max-Age` of a preflight answer, in seconds.
pub(crate) const PREFLIGHT_MAX_AGE: u64 = 86_400;

/// `Vary` of a preflight answer: it echoes the request's `Access-Control-Request-Headers`.
pub(crate) const PREFLIGHT_VARY: &str = "Access-Control-Request-Headers";

/// Longest request path quoted in full in a 404 (longer ones are cut).
pub(crate) const MAX_SHOWN_PATH: usize = 200;

/// 400 for a malformed `limit` or `offset`. `value` is the value as sent, or `None` when the
/// answer cannot quote it (a static host that cannot escape it): then the body says the same
/// without it, and leaves out `value`.
pub(crate) fn bad_param(name: &str, value: Option<&str>, negative: bool) -> Value {
    let (what, example, default) = match name {
        "limit" => (
            "a number of entries",
            format!("limit={DEFAULT_PAGE_SIZE}"),
            format!("leave limit out, empty or 0 for {DEFAULT_PAGE_SIZE}"),
        ),
        _ => ("a position in the list", "offset=40".to_string(), "leave offset out or empty for 0".to_string()),
    };
    let quoted = match value {
        Some(value) => format!("{name}={value:?}"),
        None => name.to_string(),
    };
    let mut detail = format!("{quoted} is not {what}: send a whole number in digits only, e.g. ?{example} ({default})");
    if name == "limit" && negative {
        detail.push_str(
            ". The public API answers limit=-1 with every entry but the last; gen refuses it so that no entry \
             is lost without notice. To get every entry, send a limit of at least the count, e.g. limit=100000",
        );
    }
    let mut body = json!({
        "detail": detail,
        "parameter": name,
        "expected": format!("digits only (0-9), at most {}", u64::MAX),
    });
    if let Some(value) = value {
        body["value"] = json!(value);
    }
    body
}

/// 400 for a parameter of a list query that is none of the resource's declared filters.
pub(crate) fn not_a_filter(segment: &str, name: &str, declared: &[crate::filters::FilterField]) -> Value {
    let names: Vec<&str> = declared.iter().map(|f| f.name.as_str()).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    json!({
        "detail": format!(
            "{name:?} is not a filter of {segment}: its filters are {}; a list also takes limit, offset, q and format",
            quoted.join(", ")
        ),
        "parameter": name,
        "filters": names,
    })
}

fn not_found(detail: String) -> Value {
    json!({ "detail": format!("Not found: {detail}") })
}

/// 404 for a path under `/api/v2/` whose first segment is no resource of `segments` (sorted).
pub(crate) fn no_resource(segment: &str, segments: &[&str]) -> Value {
    not_found(format!("there is no resource {segment:?}; this API holds {} (see {API_PREFIX})", segments.join(", ")))
}

/// 404 for `/api/v2/<segment>/<record>/` when the resource has no such record.
pub(crate) fn no_record(segment: &str, record: &str) -> Value {
    not_found(format!("{segment} has no record with id or name {record:?} (see {API_PREFIX}{segment}/)"))
}

/// 404 for any other path: quoted (cut to [`MAX_SHOWN_PATH`] characters) when given.
pub(crate) fn not_a_document(path: Option<&str>) -> Value {
    let what = match path {
        Some(path) => format!("{:?}", path.chars().take(MAX_SHOWN_PATH).collect::<String>()),
        None => "the path".to_string(),
    };
    not_found(format!("{what} is not a document of this API; documents are at {API_PREFIX}<resource>/<id or name>/"))
}

/// 405 for a method other than GET, HEAD and OPTIONS.
pub(crate) fn method_not_allowed(method: &str) -> Value {
    json!({ "detail": format!("method {method:?} is not allowed: this API is read-only; use {ALLOW}") })
}

/// 404 from a static host for a page of a list that the tree holds no file for: the one
/// answer where a static host and `gen serve` differ (`gen serve` computes any page).
pub(crate) fn page_not_held(segment: &str, count: &str, offset: &str, limit: &str, page_sizes: &[u64]) -> Value {
    let mut sizes = String::new();
    for (i, size) in page_sizes.iter().enumerate() {
        let sep = match i {
            0 => "",
            i if i + 1 == page_sizes.len() => " or ",
            _ => ", ",
        };
        let _ = write!(sizes, "{sep}{size}");
    }
    not_found(format!(
        "?offset={offset}&limit={limit} is not a page of {segment} that this static host holds. It holds the \
         pages whose offset is a multiple of the limit, for limit {sizes}, the last page as next names it, \
         and the whole list (offset 0 and a limit of at least the count, {count}); gen serve answers any \
         offset and limit"
    ))
}

/// 400 for a list query with more than `max` different filter conditions (`FIELD=VALUE`).
pub(crate) fn too_many_filters(max: usize) -> Value {
    json!({ "detail": format!(
        "this list query has more than {max} different filters (FIELD=VALUE): a list answers at most {max} at \
         once, so that one request reads a bounded number of files; send fewer, and narrow the rest on your side"
    ) })
}

/// 503 for a document whose file on disk no longer matches the manifest the server holds (a
/// build may be replacing the tree, or the file was edited): `path` is the file in the tree.
pub(crate) fn tree_changed(path: &str) -> Value {
    json!({ "detail": format!(
        "the tree on disk changed: {path:?} does not match the manifest this server read (a build may be \
         replacing the tree, or the file was edited); retry in a moment, and if this goes on, repair \
         the tree with `gen build --verify`"
    ) })
}

/// The body of a 503 for a large document while the large answers in flight hold their whole
/// budget (`gen serve --cache-mb`).
pub(crate) fn busy() -> Value {
    json!({ "detail": "this server is sending as many large documents as its memory budget allows (--cache-mb): retry in a moment" })
}

/// A body's bytes, as every answer sends them (compact JSON).
pub(crate) fn to_bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).expect("a JSON value serialises")
}

/// The JSON Schemas of the bodies above, for the OpenAPI document (the tests check every body
/// against them):
/// `{"detail": ...}` for every error, as the public API answers, and for a malformed `limit` or
/// `offset` also the parameter, the value sent (when the server can quote it) and what is
/// expected.
pub(crate) fn error_schemas() -> [(&'static str, Value); 3] {
    [
        (
            "Error",
            json!({
                "type": "object",
                "description": "An error: what went wrong and what to do instead.",
                "required": ["detail"],
                "properties": { "detail": { "type": "string" } }
            }),
        ),
        (
            "BadParameter",
            json!({
                "type": "object",
                "description": "A malformed `limit` or `offset`.",
                "required": ["detail", "parameter", "expected"],
                "properties": {
                    "detail": { "type": "string" },
                    "parameter": { "type": "string", "enum": ["limit", "offset"] },
                    "value": {
                        "type": "string",
                        "description": "The value as sent, percent-decoded. gen serve always sends it; a static \
                                        host leaves it out when the value holds characters it cannot quote."
                    },
                    "expected": { "type": "string" }
                }
            }),
        ),
        (
            "NotAFilter",
            json!({
                "type": "object",
                "description": "A parameter of a list query that is none of the resource's declared filters.",
                "required": ["detail", "parameter", "filters"],
                "properties": {
                    "detail": { "type": "string" },
                    "parameter": { "type": "string", "description": "The parameter as sent, percent-decoded." },
                    "filters": { "type": "array", "items": { "type": "string" }, "description": "The declared filters." }
                }
            }),
        ),
    ]
}

/// The bodies as templates a static host fills in from the request.
///
/// A host config cannot JSON-escape a value, so each body is split into literal JSON text and
/// [`Hole`]s, and a config inserts a hole only where the value needs no escaping (see
/// [`SAFE_VALUE`], [`SAFE_PATH`]); otherwise it answers the variant without the value, which
/// says the same without quoting the request. The host parity tests (`tests/suite/hosts.rs`) compare
/// every body with `gen serve`'s answer.
pub(crate) mod template {
    use super::*;

    /// A part of the request a host inserts into a body.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Hole {
        /// The malformed `limit` or `offset` value, as sent.
        Value,
        /// The request path's resource segment.
        Segment,
        /// The request path's record segment.
        Record,
        /// The request path as sent (raw, before percent-decoding).
        Path,
        /// The request method.
        Method,
        /// The list's entry count (for a page the tree does not hold).
        Count,
        /// The requested offset and limit, normalised (digits, no leading zeros).
        Offset,
        /// The requested limit, normalised.
        Limit,
        /// The request target's length in bytes.
        Length,
    }

    /// Characters of a `limit`/`offset` value that every host passes through unchanged and
    /// that need no escaping in JSON (nor in `gen serve`'s `{:?}` quoting): no `%` (nginx does
    /// not decode), `+` and `;` (Go's query parser, in Caddy, reads them otherwise), `"`, `\`,
    /// braces.
    pub(crate) const SAFE_VALUE: &str = "[A-Za-z0-9._~:@!$'()*,/=?-]";

    /// Characters of a raw request path that need no escaping in JSON (nor in `{:?}` quoting):
    /// printable ASCII but `"` and `\`.
    pub(crate) const SAFE_PATH: &str = r"[!#-\[\]-~]";

    /// A body: literal JSON text and holes.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Template(pub Vec<Part>);

    #[derive(Debug, Clone, PartialEq, Eq)]
    /// A piece of a [`Template`].
    pub(crate) enum Part {
        /// Literal JSON text.
        Text(String),
        /// A value filled in per request.
        Hole(Hole),
    }

    impl Template {
        /// Writes the body in a host's syntax: `text` escapes literal text for the host's
        /// string syntax, `hole` names the host's variable for a hole.
        pub(crate) fn render(&self, text: impl Fn(&str) -> String, hole: impl Fn(Hole) -> String) -> String {
            let mut out = String::new();
            for part in &self.0 {
                match part {
                    Part::Text(t) => out.push_str(&text(t)),
                    Part::Hole(h) => out.push_str(&hole(*h)),
                }
            }
            out
        }

        /// The body with each hole replaced by a value (tests).
        #[cfg(test)]
        pub(crate) fn fill(&self, value: impl Fn(Hole) -> String) -> String {
            self.render(str::to_string, value)
        }
    }

    const HOLES: [Hole; 9] = [
        Hole::Value,
        Hole::Segment,
        Hole::Record,
        Hole::Path,
        Hole::Method,
        Hole::Count,
        Hole::Offset,
        Hole::Limit,
        Hole::Length,
    ];

    /// A placeholder for `hole` that survives `{:?}` quoting and JSON serialisation unchanged.
    fn marker(hole: Hole) -> String {
        let i = HOLES.iter().position(|h| *h == hole).expect("every hole is listed");
        format!("@@gen{i}@@")
    }

    /// Serialises `body` (built with [`marker`]s) as every answer is sent, and splits it at the
    /// markers.
    fn split(body: Value) -> Template {
        let mut text = String::from_utf8(to_bytes(&body)).expect("JSON is UTF-8");
        let mut parts = Vec::new();
        loop {
            let next = HOLES.iter().filter_map(|h| text.find(&marker(*h)).map(|at| (at, *h))).min_by_key(|(at, _)| *at);
            let Some((at, hole)) = next else { break };
            if at > 0 {
                parts.push(Part::Text(text[..at].to_string()));
            }
            parts.push(Part::Hole(hole));
            text = text[at + marker(hole).len()..].to_string();
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Template(parts)
    }

    /// [`super::bad_param`]; `echo`: the value is quoted (a [`Hole::Value`]).
    pub(crate) fn bad_param(name: &str, echo: bool, negative: bool) -> Template {
        split(super::bad_param(name, echo.then(|| marker(Hole::Value)).as_deref(), negative))
    }

    /// [`super::no_resource`].
    pub(crate) fn no_resource(segments: &[&str]) -> Template {
        split(super::no_resource(&marker(Hole::Segment), segments))
    }

    /// [`super::no_record`].
    pub(crate) fn no_record() -> Template {
        split(super::no_record(&marker(Hole::Segment), &marker(Hole::Record)))
    }

    /// [`super::not_a_document`]; `echo`: the path is quoted (a [`Hole::Path`]).
    pub(crate) fn not_a_document(echo: bool) -> Template {
        split(super::not_a_document(echo.then(|| marker(Hole::Path)).as_deref()))
    }

    /// [`super::not_a_filter`] of `segment`: the parameter's name is a [`Hole::Value`].
    pub(crate) fn not_a_filter(segment: &str, declared: &[crate::filters::FilterField]) -> Template {
        split(super::not_a_filter(segment, &marker(Hole::Value), declared))
    }

    /// [`super::method_not_allowed`].
    pub(crate) fn method_not_allowed() -> Template {
        split(super::method_not_allowed(&marker(Hole::Method)))
    }

    /// [`super::target_too_long`] for targets longer than `max` bytes.
    pub(crate) fn target_too_long(max: usize) -> Template {
        split(super::target_too_long(marker(Hole::Length), max))
    }

    /// [`super::page_not_held`].
    pub(crate) fn page_not_held(page_sizes: &[u64]) -> Template {
        let [segment, count, offset, limit] = [Hole::Segment, Hole::Count, Hole::Offset, Hole::Limit].map(marker);
        split(super::page_not_held(&segment, &count, &offset, &limit, page_sizes))
    }
}

/// The reason phrase of a status code.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::template::{Hole, Part};
    use super::*;

    /// Every body an answer can have, built with `value` for every request value.
    fn every_body(value: &str) -> Vec<(&'static str, Value)> {
        let refused = tiny_http::Rejected::ALL.map(|rejection| ("Error", reader::rejected(rejection)));
        let mut bodies = vec![
            ("BadParameter", bad_param("limit", Some(value), true)),
            ("BadParameter", bad_param("limit", None, false)),
            ("BadParameter", bad_param("offset", Some(value), false)),
            ("BadParameter", bad_param("offset", None, false)),
            ("Error", no_resource(value, &["a", "b"])),
            ("Error", no_record(value, value)),
            ("Error", not_a_document(Some(value))),
            ("Error", not_a_document(None)),
            ("Error", method_not_allowed(value)),
            ("Error", page_not_held(value, "1", "2", "3", &[20, 50])),
            ("Error", target_too_long(9000, 8192)),
            ("Error", headers_too_large(101, 5, 100, 16384)),
            ("Error", too_many_filters(8)),
            ("Error", tree_changed(value)),
            (
                "NotAFilter",
                not_a_filter(
                    "berry",
                    value,
                    &[crate::filters::FilterField { name: "firmness".into(), path: "firmness.name".into() }],
                ),
            ),
        ];
        bodies.extend(refused);
        bodies
    }

    #[test]
    fn every_body_fits_its_openapi_schema() {
        let schemas = error_schemas();
        for (name, body) in every_body("x\"1") {
            let schema = &schemas.iter().find(|(n, _)| *n == name).expect("a schema of that name").1;
            let object = body.as_object().expect("every body is an object");
            for required in schema["required"].as_array().unwrap() {
                assert!(object.contains_key(required.as_str().unwrap()), "{body} lacks {required} ({name})");
            }
            let properties = schema["properties"].as_object().unwrap();
            for (key, value) in object {
                let property = properties.get(key).unwrap_or_else(|| panic!("{body}: {key} is not in {name}"));
                if property["type"] == "array" {
                    assert_eq!(property["items"]["type"], "string", "{key}");
                    assert!(value.as_array().is_some_and(|a| a.iter().all(Value::is_string)), "{body}: {key}");
                    continue;
                }
                assert_eq!(property["type"], "string", "{key}");
                assert!(value.is_string(), "{body}: {key}");
                if let Some(allowed) = property["enum"].as_array() {
                    assert!(allowed.contains(value), "{body}: {key}");
                }
            }
        }
    }

    #[test]
    fn long_paths_are_cut() {
        let body = not_a_document(Some(&"a".repeat(1000)));
        assert!(body["detail"].as_str().unwrap().contains(&format!("\"{}\"", "a".repeat(MAX_SHOWN_PATH))));
        assert!(!body["detail"].as_str().unwrap().contains(&"a".repeat(MAX_SHOWN_PATH + 1)));
    }

    #[test]
    fn holes_are_split_out_in_order() {
        let t = template::no_record();
        assert_eq!(
            t.fill(|h| format!("<{h:?}>")),
            r#"{"detail":"Not found: <Segment> has no record with id or name \"<Record>\" (see /api/v2/<Segment>/)"}"#
        );
        assert!(t.0.contains(&Part::Hole(Hole::Record)));
    }

    #[test]
    fn templates_filled_with_safe_values_are_the_bodies_serve_sends() {
        let v = "x-1";
        for (template, body) in [
            (template::bad_param("limit", true, true), bad_param("limit", Some(v), true)),
            (template::bad_param("limit", false, false), bad_param("limit", None, false)),
            (template::bad_param("offset", true, false), bad_param("offset", Some(v), false)),
            (template::no_resource(&["a", "b"]), no_resource(v, &["a", "b"])),
            (template::no_record(), no_record(v, v)),
            (template::not_a_document(true), not_a_document(Some(v))),
            (template::not_a_document(false), not_a_document(None)),
            (template::method_not_allowed(), method_not_allowed(v)),
            (template::page_not_held(&[20, 50, 100]), page_not_held(v, v, v, v, &[20, 50, 100])),
        ] {
            assert_eq!(template.fill(|_| v.to_string()).into_bytes(), to_bytes(&body));
        }
        let body = template::bad_param("limit", false, false).fill(|_| unreachable!());
        assert!(!body.contains("value"), "{body}");
        assert!(template::page_not_held(&[20, 50, 100]).fill(|_| "1".into()).contains("limit 20, 50 or 100,"));
    }
}
