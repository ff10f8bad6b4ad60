//! Rows made records: the `id` given, the `name` slugged from `--name`, the original text kept
//! in `names` (`--label`) where `?q=` searches it.

use super::source::{Place, Row, Source};
use crate::problem::Problem;
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};

/// A record ready to write: where it came from, its id, its fields (`id` among them).
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) place: Place,
    pub(crate) id: i64,
    pub(crate) fields: Map<String, Value>,
}

/// How rows become records: the fields `--id`/`--key`, `--name` and `--label` name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape<'a> {
    /// The field `--id` names (kept under its name too), or `None` with `--key`.
    pub(crate) id: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) label: Option<&'a str>,
    pub(crate) language: &'a str,
}

/// A record's name from a text: accents and other scripts folded to ASCII, lower-case,
/// apostrophes dropped, every other run of characters but letters and digits made one `-`,
/// `-` trimmed at both ends (`Côte d'Ivoire` → `cote-divoire`).
pub(crate) fn slug(text: &str) -> String {
    let ascii = deunicode::deunicode(text).to_ascii_lowercase();
    let mut out = String::with_capacity(ascii.len());
    for c in ascii.chars().filter(|c| !matches!(c, '\'' | '`')) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Makes each row a record with its id (`ids`, by row), name and labels. Problems: a field the
/// import sets that the source has too, a name that cannot be made or that two rows share.
pub(crate) fn make_records(
    source: &Source,
    rows: Vec<Row>,
    ids: &[i64],
    shape: Shape<'_>,
    problems: &mut Vec<Problem>,
) -> Vec<Record> {
    let mut names: HashMap<String, (Place, String)> = HashMap::new();
    let mut clashes = BTreeSet::new();
    let mut records = Vec::with_capacity(rows.len());
    for (row, &id) in rows.into_iter().zip(ids) {
        let mut fields = row.fields;
        for (field, set_by) in set_fields(shape) {
            if fields.contains_key(field) && clashes.insert(field) {
                let why = format!(
                    "the source has a field {field:?}, which the import sets ({set_by}): rename it in the source{}",
                    if field == "id" { ", or pass --id id to use it as the id" } else { "" }
                );
                problems.push(source.problem(row.place, Some(field), why));
            }
        }
        fields.insert("id".to_string(), Value::from(id));
        // the label's text before `name` (which may be its field) is slugged
        let label = shape.label.map(|field| match fields.get(field) {
            Some(Value::String(text)) if !text.is_empty() => vec![text.clone()],
            Some(Value::Number(n)) => vec![n.to_string()],
            _ => Vec::new(),
        });
        if let Some(field) = shape.name {
            match name_of(fields.get(field)) {
                Ok((name, text)) => {
                    if let Some((place, first)) = names.get(&name) {
                        let why = format!(
                            "the name {name:?} (from {text:?}) is the name of {} too (from {first:?}): names are \
                             unique within a resource; change one of the two values, or choose another --name field",
                            source.name(*place)
                        );
                        problems.push(source.problem(row.place, Some(field), why));
                    } else {
                        names.insert(name.clone(), (row.place, text));
                    }
                    fields.insert("name".to_string(), Value::from(name));
                }
                Err(why) => problems.push(source.problem(row.place, Some(field), format!("{why} (--name {field})"))),
            }
        }
        if let Some(label) = label {
            let names = label.into_iter().map(|text| json!({"name": text, "language": {"name": shape.language}}));
            fields.insert("names".to_string(), Value::Array(names.collect()));
        }
        records.push(Record { place: row.place, id, fields });
    }
    records
}

/// The fields the import sets, that a source field of the same name would clash with, and the
/// option that sets each.
fn set_fields(shape: Shape<'_>) -> Vec<(&'static str, &'static str)> {
    let mut set = Vec::new();
    if shape.id != Some("id") {
        set.push(("id", if shape.id.is_some() { "from --id" } else { "from --key" }));
    }
    if shape.name.is_some_and(|field| field != "name") {
        set.push(("name", "from --name"));
    }
    if shape.label.is_some_and(|field| field != "names") {
        set.push(("names", "from --label"));
    }
    set
}

/// The name slugged from a `--name` value, and the text it came from; or why there is none.
fn name_of(value: Option<&Value>) -> Result<(String, String), String> {
    let text = match value {
        Some(Value::String(text)) if !text.is_empty() => text.clone(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) => return Err("the name's field is empty: every record needs a name".to_string()),
        Some(Value::String(_)) => return Err("the name's field is empty: every record needs a name".to_string()),
        Some(other) => return Err(format!("a name is made from text, not {}", crate::json::kind_of(other))),
    };
    let name = slug(&text);
    if !crate::config::is_valid_name(&name) {
        return Err(format!(
            "{text:?} makes the name {name:?}, and a name needs a letter (an all-digit name would be an id's path)"
        ));
    }
    if name.len() > crate::config::MAX_NAME_BYTES {
        return Err(format!(
            "{text:?} makes a name of {} bytes: at most {}",
            name.len(),
            crate::config::MAX_NAME_BYTES
        ));
    }
    Ok((name, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_fold_accents_and_drop_apostrophes() {
        assert_eq!(slug("Côte d'Ivoire"), "cote-divoire");
        assert_eq!(slug("Côte d’Ivoire"), "cote-divoire");
        assert_eq!(slug("  Bosnia and Herzegovina "), "bosnia-and-herzegovina");
        assert_eq!(slug("Åland Islands"), "aland-islands");
        assert_eq!(slug("Straße -- Nord!"), "strasse-nord");
        assert_eq!(slug("Korea (Republic of)"), "korea-republic-of");
        assert_eq!(slug("!!!"), "");
    }
}
