//! What a search result matched, in the HTML view: `?q=ar` lists bulbasaur because its French
//! name `Bulbizarre` contains `ar`, so the page says so. The names document holds only the
//! folded names ([`crate::search`]); the names as written are read from each record shown.

use super::html_escape::escape;
use super::route::normalize;
use super::tree::ServedTree;
use crate::search::fold;
use serde_json::Value;
use std::fmt::Write as _;

/// Most results of one page whose matched name the view shows (each one a record read).
const MAX_MATCHED: usize = 100;

/// The name each result of a `?q=` page matched, as written in its record (its name, or the
/// localized name and its language), one line per result; empty when none is found.
pub(super) fn matched_names(
    tree: &ServedTree,
    q: &str,
    map: &serde_json::Map<String, Value>,
    href: &dyn Fn(&str) -> Option<String>,
) -> String {
    let folded = fold(q);
    let results = map.get("results").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut lines = String::new();
    for entry in results.iter().take(MAX_MATCHED) {
        let Some(link) = entry.get("url").and_then(Value::as_str).and_then(href) else { continue };
        let Some(key) = normalize(&link) else { continue };
        let Ok(Some(doc)) = tree.doc(&key) else { continue };
        let Ok(record) = serde_json::from_slice::<Value>(&doc.body) else { continue };
        let shown = entry.get("name").and_then(Value::as_str).map_or_else(|| key.clone(), str::to_string);
        let matched = match matched(&record, &folded) {
            Some((name, None)) => format!("its name “{}”", escape(&name)),
            Some((name, Some(language))) => {
                format!("“<strong>{}</strong>” <span class=\"note\">({})</span>", escape(&name), escape(&language))
            }
            None => continue,
        };
        let _ = writeln!(lines, "<li><a href=\"{}\">{}</a> matched {matched}</li>", escape(&link), escape(&shown));
    }
    if lines.is_empty() {
        return lines;
    }
    format!("<ul class=\"matched\" id=\"matched\" aria-label=\"the names matched\">\n{lines}</ul>\n")
}

/// The first of a record's names (its name, then its localized names by language, as the
/// build's names document takes them: the first per language) that contains `folded` once
/// folded, with its language (`None` for the record's own name).
fn matched(record: &Value, folded: &str) -> Option<(String, Option<String>)> {
    if let Some(name) = record.get("name").and_then(Value::as_str)
        && fold(name).contains(folded)
    {
        return Some((name.to_string(), None));
    }
    let mut seen: Vec<&str> = Vec::new();
    for entry in record.get("names").and_then(Value::as_array).map_or(&[][..], Vec::as_slice) {
        let name = entry.get("name").and_then(Value::as_str);
        let language = entry.get("language").map(|l| l.get("name").unwrap_or(l)).and_then(Value::as_str);
        let (Some(name), Some(language)) = (name, language) else { continue };
        if seen.contains(&language) {
            continue;
        }
        seen.push(language);
        if fold(name).contains(folded) {
            return Some((name.to_string(), Some(language.to_string())));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_that_contains_q_folded() {
        let record = serde_json::json!({"name": "bulbasaur", "names": [
            {"name": "Bulbasaur", "language": {"name": "en"}},
            {"name": "Bulbizarre", "language": {"name": "fr"}},
            {"name": "Other", "language": {"name": "fr"}},
            {"name": "フシギダネ", "language": "ja"}
        ]});
        assert_eq!(matched(&record, &fold("AR")), Some(("Bulbizarre".into(), Some("fr".into()))));
        assert_eq!(matched(&record, "bulb"), Some(("bulbasaur".into(), None)));
        assert_eq!(matched(&record, &fold("シギ")), Some(("フシギダネ".into(), Some("ja".into()))));
        // only the first name of a language is searched, as the names document holds it
        assert_eq!(matched(&record, "other"), None);
    }
}
