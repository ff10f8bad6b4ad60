//! Declared filters (`?FIELD=VALUE`): the fields `gen.json` declares per resource, the values a
//! record takes for each, and the names of the files a build writes for them, so that the build,
//! `gen serve` and the edge handlers (which port [`folder_name`] and [`query_tail`]) agree.
//!
//! A field is a JSON path into a record: keys joined by `.`, a key followed by `[]` stepping into
//! each element of an array (`types[].type.name`, `generation.name`, `is_baby`). The values a
//! record takes are the strings, numbers (as JSON writes them) and booleans (`true`, `false`) the
//! path reaches; `null`, objects and arrays reached without `[]` are no value. A record matches
//! `?FIELD=VALUE` when `VALUE` is one of its values, compared exactly.
//!
//! The files (docs/tree.md, "Filters"), per resource `<segment>`, field and value:
//!
//! ```text
//! api/v2/<segment>/_filters/<field>/index.json            the values and their counts
//! api/v2/<segment>/_filters/<field>/<value>/index.json    the records with the value: a list,
//! api/v2/<segment>/_filters/<field>/<value>/_pages/...    paged as the resource's list is
//! ```
//!
//! where `<field>` and `<value>` are [`folder_name`]s.

use crate::json::tape::{Kind, Node};
use crate::paging::Page;
pub(crate) use crate::tree::layout::folder_name;
use serde::{Deserialize, Serialize};

/// A declared filter of a resource: the query parameter and the JSON path it reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilterField {
    /// The query parameter (`type` in `?type=fire`).
    pub(crate) name: String,
    /// The JSON path into each record (`types[].type.name`).
    pub(crate) path: String,
}

/// Most different filter conditions one list query may hold (more get a 400): each is one read
/// of its value's list, which the edge handler makes from its origin (docs/deploy.md).
pub(crate) const MAX_CONDITIONS: usize = 8;

/// Query parameters a filter cannot be named: they are the list's own (`format=json`, which the
/// public API's clients send, is taken and ignored).
pub(crate) const RESERVED: [&str; 4] = ["limit", "offset", "q", "format"];

/// The response header of a list answer that ignored query parameters (docs/serve.md, "Ignored
/// parameters"): `Gen-Ignored: type, colour; declared: color, habitat`.
pub(crate) const IGNORED_HEADER: &str = "Gen-Ignored";

/// Most ignored parameters [`ignored_header`] names; the others are counted (`(3 more)`).
pub(crate) const MAX_IGNORED_NAMED: usize = 16;

/// Longest name, percent-encoded, [`ignored_header`] writes; a longer one is counted, not named.
pub(crate) const MAX_IGNORED_NAME: usize = 64;

/// The parameters of a list query that the answer ignored: of `params` (every name but the
/// list's own, [`RESERVED`], each once, see `ListQuery::params`), those that are not a
/// `declared` filter's name, in the order given.
pub(crate) fn ignored<'a>(declared: &[FilterField], params: &'a [String]) -> Vec<&'a str> {
    params.iter().map(String::as_str).filter(|name| !declared.iter().any(|f| f.name == *name)).collect()
}

/// The value of the [`IGNORED_HEADER`] for `ignored` parameters of a list that declares the
/// filters `declared`; `None` when none was ignored. Each name is percent-encoded as a query
/// value is ([`crate::search::encode_query_value`]), so `,` `;` and spaces never appear in one:
/// at most [`MAX_IGNORED_NAMED`] names of at most [`MAX_IGNORED_NAME`] characters, then
/// `(N more)` for the others; `declared: (none)` for a list without filters.
pub(crate) fn ignored_header(declared: &[FilterField], ignored: &[&str]) -> Option<String> {
    if ignored.is_empty() {
        return None;
    }
    let mut named: Vec<String> = Vec::new();
    let mut more = 0;
    for name in ignored {
        let encoded = crate::search::encode_query_value(name);
        if named.len() < MAX_IGNORED_NAMED && encoded.len() <= MAX_IGNORED_NAME {
            named.push(encoded);
        } else {
            more += 1;
        }
    }
    if more > 0 {
        named.push(format!("({more} more)"));
    }
    let declared = if declared.is_empty() {
        "(none)".to_string()
    } else {
        declared.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
    };
    Some(format!("{}; declared: {declared}", named.join(", ")))
}

/// A parsed field path: each key, and how many `[]` follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldPath {
    steps: Vec<(String, usize)>,
}

/// The form of a field path, for messages.
pub(crate) const PATH_FORM: &str = "a path is keys joined by '.', a key followed by [] for each element of an array, \
     e.g. \"types[].type.name\" or \"generation.name\"";

impl FieldPath {
    /// Parses `text`; `Err` says what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<FieldPath, String> {
        if text.is_empty() {
            return Err(format!("the path is empty: {PATH_FORM}"));
        }
        let mut steps = Vec::new();
        for part in text.split('.') {
            let key = part.trim_end_matches("[]");
            let each = (part.len() - key.len()) / 2;
            let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b));
            if !key_ok {
                return Err(format!("{text:?} has {part:?} as a step: {PATH_FORM}"));
            }
            steps.push((key.to_string(), each));
        }
        Ok(FieldPath { steps })
    }

    /// The values `record` takes at this path, sorted, each once.
    pub(crate) fn values(&self, record: Node<'_>) -> Vec<String> {
        let mut reached = vec![record];
        for (key, each) in &self.steps {
            reached = reached.into_iter().filter_map(|v| v.get(key)).collect();
            for _ in 0..*each {
                reached = reached.into_iter().flat_map(Node::items).collect();
            }
        }
        let mut values: Vec<String> = reached.into_iter().filter_map(value_text).collect();
        values.sort_unstable();
        values.dedup();
        values
    }
}

impl FieldPath {
    /// The JSON location (`$.types[1].type.name`) of the first place in `record` where this path
    /// reaches `value`, if any.
    pub(crate) fn locate(&self, record: Node<'_>, value: &str) -> Option<String> {
        use crate::problem::{Step, json_path};
        let mut reached: Vec<(Node, String)> = vec![(record, "$".to_string())];
        for (key, each) in &self.steps {
            let key_step = &json_path(&[Step::Key(key)])[1..];
            let mut next = Vec::new();
            for (v, at) in reached {
                if let Some(child) = v.get(key) {
                    next.push((child, format!("{at}{key_step}")));
                }
            }
            for _ in 0..*each {
                let mut items = Vec::new();
                for (v, at) in next {
                    items.extend(v.items().enumerate().map(|(i, item)| (item, format!("{at}[{i}]"))));
                }
                next = items;
            }
            reached = next;
        }
        reached.into_iter().find(|(v, _)| value_text(*v).as_deref() == Some(value)).map(|(_, at)| at)
    }
}

/// The text of a value a path reaches: a string as is, a number as JSON writes it, a boolean as
/// `true` or `false`; `None` for anything else.
fn value_text(value: Node<'_>) -> Option<String> {
    match value.kind() {
        Kind::String(s) | Kind::Number(s) => Some(s.to_string()),
        Kind::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The query string's tail that carries `conditions` (`&type=fire&generation=generation-i`), each
/// name and value percent-encoded as [`crate::search::encode_query_value`] does.
pub(crate) fn query_tail<'a>(conditions: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    use crate::search::encode_query_value as encode;
    conditions.into_iter().map(|(name, value)| format!("&{}={}", encode(name), encode(value))).collect()
}

/// The url of `page` of the list at `list_url` (ending in `/`) narrowed by `q` (when not empty)
/// and `conditions`: always query links, `?offset=&limit=` then `q` then the conditions.
pub(crate) fn query_page_url<'a>(
    list_url: &str,
    q: &str,
    conditions: impl IntoIterator<Item = (&'a str, &'a str)>,
    page: Page,
) -> String {
    let q = if q.is_empty() { String::new() } else { format!("&q={}", crate::search::encode_query_value(q)) };
    format!("{list_url}?offset={}&limit={}{q}{}", page.offset, page.limit, query_tail(conditions))
}

/// The conditions of a query, in the order links name them: by the field's place among the
/// declared ones, then as given; a condition given twice counts once. `Err` names the first
/// parameter that is not a declared field.
pub(crate) fn order_conditions<'a>(
    declared: &[FilterField],
    given: &'a [(String, String)],
) -> Result<Vec<(usize, &'a str)>, &'a str> {
    let mut out: Vec<(usize, &str)> = Vec::with_capacity(given.len());
    for (name, value) in given {
        let field = declared.iter().position(|f| f.name == *name).ok_or(name.as_str())?;
        if !out.contains(&(field, value.as_str())) {
            out.push((field, value));
        }
    }
    out.sort_by_key(|(field, _)| *field);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_reach_scalars_through_arrays() {
        let record = json!({
            "is_baby": false,
            "order": 7,
            "weight": 6.5,
            "generation": {"name": "generation-i"},
            "types": [{"type": {"name": "grass"}}, {"type": {"name": "poison"}}, {"type": {"name": "grass"}}],
            "grid": [[1, 2], [2, 3]],
            "none": null,
            "obj": {"a": 1}
        });
        let text = record.to_string();
        let tape = crate::json::tape::Tape::parse(text.as_bytes()).unwrap();
        let values = |p: &str| FieldPath::parse(p).unwrap().values(tape.root());
        assert_eq!(values("is_baby"), ["false"]);
        assert_eq!(values("order"), ["7"]);
        assert_eq!(values("weight"), ["6.5"]);
        assert_eq!(values("generation.name"), ["generation-i"]);
        assert_eq!(values("types[].type.name"), ["grass", "poison"]);
        assert_eq!(values("grid[][]"), ["1", "2", "3"]);
        assert!(values("grid[]").is_empty(), "arrays are no value");
        assert!(values("types").is_empty(), "an array needs []");
        assert!(values("obj").is_empty() && values("none").is_empty() && values("missing.x").is_empty());
        assert!(values("types.type.name").is_empty(), "a key of an array is nothing");
        let locate = |p: &str, v: &str| FieldPath::parse(p).unwrap().locate(tape.root(), v);
        assert_eq!(locate("types[].type.name", "poison").as_deref(), Some("$.types[1].type.name"));
        assert_eq!(locate("grid[][]", "3").as_deref(), Some("$.grid[1][1]"));
        assert_eq!(locate("order", "7").as_deref(), Some("$.order"));
        assert_eq!(locate("order", "8"), None);
    }

    #[test]
    fn bad_paths_say_the_form() {
        for bad in ["", ".", "a..b", "a.", "[]", "a.[]", "a[", "a b", "a/b", "a[0]"] {
            let message = FieldPath::parse(bad).expect_err(bad);
            assert!(message.contains("keys joined by '.'"), "{bad}: {message}");
        }
    }

    #[test]
    fn folder_names_are_tree_segments_and_distinct() {
        let texts = ["fire", "generation-i", "", "_", "_5f", ".", "..", "../../etc", "a/b", "Fire", "é", "1", "true"];
        let folders: Vec<String> = texts.iter().map(|t| folder_name(t)).collect();
        assert_eq!(folders[0], "fire");
        assert_eq!(folders[1], "generation-i");
        assert_eq!(folders[7], "_2e_2e_2f_2e_2e_2fetc");
        for folder in &folders {
            assert!(crate::tree::layout::is_tree_path(folder) && !folder.contains('/'), "{folder}");
        }
        let mut unique = folders.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), texts.len(), "{folders:?}");
    }

    #[test]
    fn conditions_are_ordered_as_declared_and_undeclared_ones_named() {
        let declared = [
            FilterField { name: "type".into(), path: "types[].type.name".into() },
            FilterField { name: "baby".into(), path: "is_baby".into() },
        ];
        let given = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
        };
        let pairs = given(&[("baby", "true"), ("type", "fire"), ("type", "flying"), ("type", "fire")]);
        assert_eq!(order_conditions(&declared, &pairs).unwrap(), [(0, "fire"), (0, "flying"), (1, "true")]);
        let pairs = given(&[("type", "fire"), ("color", "red")]);
        assert_eq!(order_conditions(&declared, &pairs), Err("color"));
        assert_eq!(
            query_page_url("h/api/v2/x/", "a b", [("type", "fire"), ("t[]", "a&b")], Page { offset: 2, limit: 1 }),
            "h/api/v2/x/?offset=2&limit=1&q=a%20b&type=fire&t%5B%5D=a%26b"
        );
        assert_eq!(query_page_url("u/", "", [], Page { offset: 0, limit: 5 }), "u/?offset=0&limit=5");
        assert_eq!(
            query_page_url("https://h/api/v2/berry/", "ch e", [], Page { offset: 20, limit: 10 }),
            "https://h/api/v2/berry/?offset=20&limit=10&q=ch%20e"
        );
    }
}
