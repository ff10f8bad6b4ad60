//! `gen serve`'s error bodies, as templates a static host fills in from the request.
//!
//! `gen serve` words its errors after the request (`limit="abc" is not a number ...`,
//! `berry has no record with id or name "999"`). A host config cannot JSON-escape a value, so
//! each body is split here into literal JSON text and [`Hole`]s, and a config inserts a hole
//! only where the value needs no escaping (see [`SAFE_VALUE`], [`SAFE_PATH`]); otherwise it
//! answers the `generic` variant, which says the same without quoting the request.
//!
//! The wording mirrors `src/serve/respond.rs`; the host parity tests (`tests/hosts.rs`) compare
//! every body with `gen serve`'s answer, so a change on either side fails them.

use std::fmt::Write as _;

/// A part of the request a host inserts into a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hole {
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
    Limit,
}

/// Characters of a `limit`/`offset` value that every host passes through unchanged and that
/// need no escaping in JSON (nor in `gen serve`'s `{:?}` quoting): no `%` (nginx does not
/// decode), `+` and `;` (Go's query parser, in Caddy, reads them otherwise), `"`, `\`, braces.
pub const SAFE_VALUE: &str = "[A-Za-z0-9._~:@!$'()*,/=?-]";

/// Characters of a raw request path that need no escaping in JSON (nor in `{:?}` quoting):
/// printable ASCII but `"` and `\`.
pub const SAFE_PATH: &str = r"[!#-\[\]-~]";

/// Longest path `gen serve` quotes in full (it cuts longer ones).
pub const MAX_SHOWN_PATH: usize = 200;

/// A body: literal JSON text and holes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(pub Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Hole(Hole),
}

impl Template {
    /// Writes the body in a host's syntax: `text` escapes literal text for the host's string
    /// syntax, `hole` names the host's variable for a hole.
    pub fn render(&self, text: impl Fn(&str) -> String, hole: impl Fn(Hole) -> String) -> String {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(t) => out.push_str(&text(t)),
                Part::Hole(h) => out.push_str(&hole(*h)),
            }
        }
        out
    }

    /// The body with each hole replaced by a value (tests, documentation).
    pub fn fill(&self, value: impl Fn(Hole) -> String) -> String {
        self.render(str::to_string, value)
    }
}

const HOLES: [Hole; 8] =
    [Hole::Value, Hole::Segment, Hole::Record, Hole::Path, Hole::Method, Hole::Count, Hole::Offset, Hole::Limit];

/// A marker that survives `{:?}` quoting and JSON serialisation unchanged.
fn marker(hole: Hole) -> String {
    let i = HOLES.iter().position(|h| *h == hole).expect("every hole is listed");
    format!("@@gen{i}@@")
}

/// Serialises `value` (built with [`marker`]s) as `gen serve` does, and splits it at the markers.
fn template(value: serde_json::Value) -> Template {
    let mut text = serde_json::to_string(&value).expect("a JSON value serialises");
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

/// 400 for a malformed `limit` or `offset`. `echo`: the value is quoted (a [`Hole::Value`]);
/// `negative`: it starts with `-` (only `limit` says more then).
pub fn bad_param(name: &str, echo: bool, negative: bool) -> Template {
    let (what, example, default) = match name {
        "limit" => ("a number of entries", "limit=20", "leave limit out, empty or 0 for 20"),
        _ => ("a position in the list", "offset=40", "leave offset out or empty for 0"),
    };
    let value = marker(Hole::Value);
    let quoted = if echo { format!("{name}={value:?}") } else { name.to_string() };
    let mut detail = format!("{quoted} is not {what}: send a whole number in digits only, e.g. ?{example} ({default})");
    if name == "limit" && negative {
        detail.push_str(
            ". The public API answers limit=-1 with every entry but the last; gen refuses it so that no entry \
             is lost without notice. To get every entry, send a limit of at least the count, e.g. limit=100000",
        );
    }
    let mut body = serde_json::json!({
        "detail": detail,
        "parameter": name,
        "value": value,
        "expected": format!("digits only (0-9), at most {}", u64::MAX),
    });
    if !echo {
        body.as_object_mut().expect("an object").remove("value");
    }
    template(body)
}

fn not_found(detail: String) -> Template {
    template(serde_json::json!({ "detail": format!("Not found: {detail}") }))
}

/// 404 for a path under `/api/v2/` whose first segment is no resource of `segments` (sorted).
pub fn no_resource(segments: &[&str]) -> Template {
    let segment = marker(Hole::Segment);
    not_found(format!("there is no resource {segment:?}; this API holds {} (see /api/v2/)", segments.join(", ")))
}

/// 404 for `/api/v2/<segment>/<record>/` when the resource has no such record.
pub fn no_record() -> Template {
    let (segment, record) = (marker(Hole::Segment), marker(Hole::Record));
    not_found(format!("{segment} has no record with id or name {record:?} (see /api/v2/{segment}/)"))
}

/// 404 for any other path: quoted when `echo`.
pub fn not_a_document(echo: bool) -> Template {
    let what = if echo { format!("{:?}", marker(Hole::Path)) } else { "the path".to_string() };
    not_found(format!("{what} is not a document of this API; documents are at /api/v2/<resource>/<id or name>/"))
}

/// 405 for a method other than GET, HEAD and OPTIONS.
pub fn method_not_allowed() -> Template {
    let method = marker(Hole::Method);
    template(serde_json::json!({
        "detail": format!("method {method:?} is not allowed: this API is read-only; use {ALLOW}")
    }))
}

/// Methods answered, as `gen serve`'s `Allow` header says.
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// 404 for a page of a list that the tree holds no file for: the one answer where a static
/// host and `gen serve` differ (`gen serve` computes any page).
pub fn page_not_held(page_sizes: &[u64]) -> Template {
    let [segment, count, offset, limit] = [Hole::Segment, Hole::Count, Hole::Offset, Hole::Limit].map(marker);
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
         pages that next and previous lead to from offset 0 with limit {sizes}, and the whole list (offset 0 \
         and a limit of at least the count, {count}); gen serve answers any offset and limit"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(t: &Template) -> String {
        t.fill(|h| format!("<{h:?}>"))
    }

    #[test]
    fn holes_are_split_out_in_order() {
        let t = no_record();
        assert_eq!(
            fill(&t),
            r#"{"detail":"Not found: <Segment> has no record with id or name \"<Record>\" (see /api/v2/<Segment>/)"}"#
        );
        assert!(t.0.contains(&Part::Hole(Hole::Record)));
    }

    #[test]
    fn bodies_are_json_once_filled_with_safe_values() {
        for t in [
            bad_param("limit", true, true),
            bad_param("limit", false, false),
            bad_param("offset", true, false),
            no_resource(&["a", "b"]),
            no_record(),
            not_a_document(true),
            not_a_document(false),
            method_not_allowed(),
            page_not_held(&[20, 50, 100]),
        ] {
            let body = t.fill(|_| "x-1".to_string());
            serde_json::from_str::<serde_json::Value>(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
        }
        let body = bad_param("limit", false, false).fill(|_| unreachable!());
        assert!(!body.contains("value"), "{body}");
        assert!(page_not_held(&[20, 50, 100]).fill(|_| "1".into()).contains("limit 20, 50 or 100,"));
    }
}
