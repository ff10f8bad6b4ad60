//! Values' types: a CSV cell's type inferred from its text, or the type `--types` gives a field
//! (in any format). The rules are stated in docs/data.md ("Types").

use super::source::{Format, Row, Source};
use crate::problem::Problem;
use serde_json::Value;
use std::collections::BTreeMap;

/// A type `--types` gives a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An integer (`-12`).
    Int,
    /// A number, integer or decimal, kept as written (`1.50`).
    Number,
    /// `true` or `false`.
    Bool,
    /// Text as it is (an empty CSV cell stays `""`).
    String,
}

/// Parses `--types FIELD=int|number|bool|string,...` (several `--types` add up).
pub(crate) fn parse_types(specs: &[String]) -> Result<BTreeMap<String, Kind>, String> {
    let mut types = BTreeMap::new();
    for spec in specs.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
        let (field, kind) = spec
            .split_once('=')
            .ok_or_else(|| format!("--types {spec:?}: write FIELD=TYPE, the type int, number, bool or string"))?;
        let kind = match kind.trim() {
            "int" => Kind::Int,
            "number" => Kind::Number,
            "bool" => Kind::Bool,
            "string" => Kind::String,
            other => return Err(format!("--types {spec:?}: unknown type {other:?}: use int, number, bool or string")),
        };
        if types.insert(field.trim().to_string(), kind).is_some() {
            return Err(format!("--types names the field {:?} twice", field.trim()));
        }
    }
    Ok(types)
}

/// Types every row's fields in place: a CSV cell by `types` or by inference; a JSON value by
/// `types` only. Problems name the row and the field.
pub(crate) fn type_rows(
    source: &Source,
    rows: &mut [Row],
    types: &BTreeMap<String, Kind>,
    problems: &mut Vec<Problem>,
) {
    for row in rows {
        for (field, value) in row.fields.iter_mut() {
            let typed = match (types.get(field), source.format) {
                (Some(kind), _) => convert(value, *kind),
                (None, Format::Csv) => Ok(infer(value.as_str().unwrap_or_default())),
                (None, _) => continue,
            };
            match typed {
                Ok(typed) => *value = typed,
                Err(why) => problems.push(source.problem(row.place, Some(field), why)),
            }
        }
    }
}

/// A CSV cell's value by inference: empty → `null`; an integer (`-?(0|[1-9][0-9]*)`, in 64
/// bits) → a number; a decimal (`-?(0|[1-9][0-9]*)\.[0-9]+`) → a number as written; `true`,
/// `false` → a boolean; anything else (`007`, `1e5`, `TRUE`, ` 12`) → the text.
pub(crate) fn infer(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    match text {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match digits.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (digits, None),
    };
    let whole_ok = whole == "0" || (whole.starts_with(|c: char| ('1'..='9').contains(&c)) && all_digits(whole));
    match fraction {
        _ if !whole_ok => Value::from(text),
        None if text.parse::<i64>().is_ok() => number(text),
        Some(fraction) if !fraction.is_empty() && all_digits(fraction) => number(text),
        _ => Value::from(text),
    }
}

fn all_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A JSON number kept as written, exponent too (`1e5` stays `1e5`), or `None` when `text` is
/// not one.
fn number_as_written(text: &str) -> Option<Value> {
    match crate::json::numbers::from_text(text.as_bytes()) {
        Ok(value @ Value::Number(_)) if text.bytes().all(|b| !b.is_ascii_whitespace()) => Some(value),
        _ => None,
    }
}

/// A JSON number kept as written (the text is a JSON number).
fn number(text: &str) -> Value {
    number_as_written(text).expect("a JSON number")
}

/// `value` as `kind`, or why not. `null` stays `null`, as does an empty string but for
/// `string`; a string holding a value of the kind is read as one (a CSV cell always is).
pub(crate) fn convert(value: &Value, kind: Kind) -> Result<Value, String> {
    let text = match value {
        Value::Null => return Ok(Value::Null),
        Value::String(text) if text.is_empty() && kind != Kind::String => return Ok(Value::Null),
        Value::String(text) => Some(text.as_str()),
        _ => None,
    };
    let bad = |what: &str| match text {
        Some(text) => format!("{text:?} is not {what}"),
        None => format!("{} is not {what}", crate::json::kind_of(value)),
    };
    match kind {
        Kind::String => Ok(match value {
            Value::String(_) => value.clone(),
            Value::Number(n) => Value::from(n.to_string()),
            Value::Bool(b) => Value::from(b.to_string()),
            _ => return Err(bad("text (--types string)")),
        }),
        Kind::Bool => match (value, text) {
            (Value::Bool(_), _) => Ok(value.clone()),
            (_, Some("true")) => Ok(Value::Bool(true)),
            (_, Some("false")) => Ok(Value::Bool(false)),
            _ => Err(bad("true or false (--types bool)")),
        },
        Kind::Int => match (value, text) {
            (Value::Number(_), _) if crate::json::is_integer_text(value) => Ok(value.clone()),
            (_, Some(text)) if all_digits(text.strip_prefix('-').unwrap_or(text)) && text.parse::<i64>().is_ok() => {
                Ok(Value::from(text.parse::<i64>().expect("checked")))
            }
            _ => Err(bad("an integer (--types int)")),
        },
        Kind::Number => match (value, text) {
            (Value::Number(_), _) => Ok(value.clone()),
            (_, Some(text)) => number_as_written(text)
                .ok_or_else(|| bad("a number (--types number; written as JSON writes one: 1.5, -2, 1e5)")),
            _ => Err(bad("a number (--types number)")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inference_keeps_codes_as_text() {
        assert_eq!(infer(""), Value::Null);
        assert_eq!(infer("12").to_string(), "12");
        assert_eq!(infer("-3").to_string(), "-3");
        assert_eq!(infer("1.50").to_string(), "1.50");
        assert_eq!(infer("true"), Value::Bool(true));
        for text in ["007", "1e5", "TRUE", " 12", "1.", ".5", "-", "99999999999999999999", "1,5", "0x1"] {
            assert_eq!(infer(text), Value::from(text), "{text}");
        }
    }

    #[test]
    fn types_convert_or_say_why() {
        assert_eq!(convert(&Value::from("007"), Kind::Int).unwrap(), Value::from(7));
        assert_eq!(convert(&Value::from(""), Kind::Int).unwrap(), Value::Null);
        assert_eq!(convert(&Value::from(""), Kind::String).unwrap(), Value::from(""));
        assert_eq!(convert(&Value::from(36), Kind::String).unwrap(), Value::from("36"));
        assert_eq!(convert(&Value::from("1e5"), Kind::Number).unwrap().to_string(), "1e5");
        assert_eq!(convert(&Value::from("x"), Kind::Int).unwrap_err(), "\"x\" is not an integer (--types int)");
        assert!(convert(&Value::from("1.5"), Kind::Int).is_err());
        assert!(convert(&Value::from("yes"), Kind::Bool).is_err());
        assert_eq!(parse_types(&["a=int, b=bool".to_string()]).unwrap().len(), 2);
        assert!(parse_types(&["a=float".to_string()]).is_err());
    }
}
