//! JSON Schema (2020-12) inference: what every value seen at each place of a set of documents
//! had in common, written as a schema that all of them validate against.
//!
//! Inference is exact for the data it saw: `type` lists exactly the JSON types observed (with
//! `integer` for numbers written without `.`, `e` or `E`, and `number` once any other number is
//! seen), `required` lists exactly the keys present in every object observed at that place,
//! `null` joins the type list when a value was null somewhere (`["string", "null"]`), array
//! `items` is the merged schema of every element of every array at that place, and objects
//! shaped like a reference (`{"name", "url"}` or `{"url"}`, `url` an absolute URI) become a
//! `$ref` to one shared definition, [`reference_schema`].
//!
//! What the schemas deliberately leave out, so that adding records never invalidates a client
//! that checks responses against an older document: no `additionalProperties: false` (a new field
//! in the data is an addition, not a break; every key seen is still listed under `properties`,
//! with its type), no `enum`/`const`, no numeric or length bounds, no `format` except a
//! reference's `uri`. Tightening those would be exact for today's data and wrong for tomorrow's.
//!
//! [`Inferred`] counts what it saw, so [`Inferred::merge`] is exact: inferring parts in parallel
//! and merging gives the same value as observing everything in one pass.

use crate::json::tape::{Kind as TapeKind, Node};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Where record schemas point for a reference (the OpenAPI document's shared `Reference`
/// component): pass it to [`Inferred::to_schema`].
pub(crate) const REFERENCE_REF: &str = "#/components/schemas/Reference";

/// What has been seen of a set of JSON values observed at one place. Serialisable, so that an
/// incremental build keeps it between builds (see [`Inferred::forget`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Inferred {
    /// Values observed.
    count: u64,
    nulls: u64,
    booleans: u64,
    /// Numbers written without a fraction or exponent (of any size).
    integers: u64,
    /// Other numbers.
    numbers: u64,
    strings: u64,
    arrays: Option<Box<Arrays>>,
    objects: Option<Box<Objects>>,
}

/// The arrays seen at one place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Arrays {
    count: u64,
    /// Every element of every array.
    items: Inferred,
}

/// The objects seen at one place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Objects {
    count: u64,
    /// How many of them had the shape of a reference.
    references: u64,
    /// Each key seen, with the values it held (its count is the number of objects that had it).
    properties: BTreeMap<String, Inferred>,
}

impl Inferred {
    /// How many values were observed.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Adds one value (a whole record, or any JSON document).
    pub(crate) fn observe<'a>(&mut self, value: impl Shape<'a>) {
        self.count += 1;
        match value.shape() {
            Kind::Null => self.nulls += 1,
            Kind::Bool => self.booleans += 1,
            Kind::Number(n) if is_integer(n) => self.integers += 1,
            Kind::Number(_) => self.numbers += 1,
            Kind::String(_) => self.strings += 1,
            Kind::Array => {
                let arrays = self.arrays.get_or_insert_with(Default::default);
                arrays.count += 1;
                for item in value.items() {
                    arrays.items.observe(item);
                }
            }
            Kind::Object => {
                let objects = self.objects.get_or_insert_with(Default::default);
                objects.count += 1;
                objects.references += u64::from(is_reference(value));
                for (key, child) in value.members() {
                    match objects.properties.get_mut(key) {
                        Some(seen) => seen.observe(child),
                        None => {
                            let mut seen = Inferred::default();
                            seen.observe(child);
                            objects.properties.insert(key.to_string(), seen);
                        }
                    }
                }
            }
        }
    }

    /// Takes back one value observed before: the result equals never having observed it (the
    /// counts go down; places no longer seen anywhere are dropped). An incremental build forgets
    /// a changed record's previous version and observes the new one.
    pub(crate) fn forget<'a>(&mut self, value: impl Shape<'a>) {
        self.count -= 1;
        match value.shape() {
            Kind::Null => self.nulls -= 1,
            Kind::Bool => self.booleans -= 1,
            Kind::Number(n) if is_integer(n) => self.integers -= 1,
            Kind::Number(_) => self.numbers -= 1,
            Kind::String(_) => self.strings -= 1,
            Kind::Array => {
                let arrays = self.arrays.as_mut().expect("a forgotten array was observed");
                arrays.count -= 1;
                for item in value.items() {
                    arrays.items.forget(item);
                }
                if arrays.count == 0 {
                    self.arrays = None;
                }
            }
            Kind::Object => {
                let objects = self.objects.as_mut().expect("a forgotten object was observed");
                objects.count -= 1;
                objects.references -= u64::from(is_reference(value));
                for (key, child) in value.members() {
                    let seen = objects.properties.get_mut(key).expect("a forgotten key was observed");
                    seen.forget(child);
                    if seen.count == 0 {
                        objects.properties.remove(key);
                    }
                }
                if objects.count == 0 {
                    self.objects = None;
                }
            }
        }
    }

    /// Combines two inferences: the result equals observing both sets of values in one.
    #[cfg(test)]
    pub(crate) fn merge(&mut self, other: Inferred) {
        self.count += other.count;
        self.nulls += other.nulls;
        self.booleans += other.booleans;
        self.integers += other.integers;
        self.numbers += other.numbers;
        self.strings += other.strings;
        if let Some(theirs) = other.arrays {
            let ours = self.arrays.get_or_insert_with(Default::default);
            ours.count += theirs.count;
            ours.items.merge(theirs.items);
        }
        if let Some(theirs) = other.objects {
            let ours = self.objects.get_or_insert_with(Default::default);
            ours.count += theirs.count;
            ours.references += theirs.references;
            for (key, seen) in theirs.properties {
                ours.properties.entry(key).or_default().merge(seen);
            }
        }
    }

    /// The JSON Schema every observed value validates against. Objects that were references
    /// at every observation of a place become `{"$ref": reference_ref}` (point it at
    /// [`reference_schema`]). A place never observed (the items of arrays that were always
    /// empty) is `{}`, which accepts anything.
    pub(crate) fn to_schema(&self, reference_ref: &str) -> Value {
        if self.count == 0 {
            return Value::Object(Map::new());
        }
        let all_references = self.objects.as_ref().is_some_and(|o| o.references == o.count);
        let mut schema = Map::new();
        let mut types: Vec<&str> = Vec::new();
        if let Some(objects) = self.objects.as_deref().filter(|_| !all_references) {
            types.push("object");
            let properties: Map<String, Value> =
                objects.properties.iter().map(|(key, seen)| (key.clone(), seen.to_schema(reference_ref))).collect();
            let required: Vec<Value> = objects
                .properties
                .iter()
                .filter(|(_, seen)| seen.count == objects.count)
                .map(|(key, _)| Value::String(key.clone()))
                .collect();
            schema.insert("properties".into(), Value::Object(properties));
            if !required.is_empty() {
                schema.insert("required".into(), Value::Array(required));
            }
        }
        if let Some(arrays) = &self.arrays {
            types.push("array");
            schema.insert("items".into(), arrays.items.to_schema(reference_ref));
        }
        for (seen, name) in [(self.strings, "string"), (self.booleans, "boolean"), (self.nulls, "null")] {
            if name == "boolean" {
                // numbers sit between strings and booleans; `integer` is a subset of `number`
                if self.numbers > 0 {
                    types.push("number");
                } else if self.integers > 0 {
                    types.push("integer");
                }
            }
            if seen > 0 {
                types.push(name);
            }
        }
        let reference = json!({ "$ref": reference_ref });
        if types.is_empty() {
            return reference;
        }
        let type_value = match types.as_slice() {
            [one] => Value::String(one.to_string()),
            many => Value::Array(many.iter().map(|t| Value::String(t.to_string())).collect()),
        };
        schema.insert("type".into(), type_value);
        if all_references { json!({ "anyOf": [reference, Value::Object(schema)] }) } else { Value::Object(schema) }
    }
}

/// The shared definition of a reference: `{"name"?, "url"}`, `url` an absolute URI.
pub(crate) fn reference_schema() -> Value {
    json!({
        "type": "object",
        "description": "A reference to another document: its absolute url, and its name when it has one.",
        "required": ["url"],
        "properties": {
            "name": { "type": "string" },
            "url": { "type": "string", "format": "uri" }
        }
    })
}

/// True when a number is written as an integer: no fraction and no exponent, whatever its size.
/// (With `arbitrary_precision`, `1.0` and `1e2` keep their text, so they are not integers here;
/// a schema saying `number` accepts them either way.)
fn is_integer(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}

/// True when an object has the shape of a reference: exactly `{"name", "url"}` or `{"url"}`,
/// with a string `name` and an absolute URI `url`.
fn is_reference<'a>(object: impl Shape<'a>) -> bool {
    let (mut members, mut url_ok, mut name_ok) = (0, false, false);
    for (key, value) in object.members() {
        members += 1;
        match key {
            "url" => url_ok = matches!(value.shape(), Kind::String(url) if is_uri(&url)),
            "name" => name_ok = matches!(value.shape(), Kind::String(_)),
            _ => {}
        }
    }
    match members {
        1 => url_ok,
        2 => url_ok && name_ok,
        _ => false,
    }
}

/// What the inference reads of a value: its kind, its items and its members.
pub(crate) enum Kind<'a> {
    /// `null`
    Null,
    /// `true` or `false`
    Bool,
    /// A number, as written.
    Number(&'a str),
    /// A string.
    String(std::borrow::Cow<'a, str>),
    /// An array: [`Shape::items`].
    Array,
    /// An object: [`Shape::members`].
    Object,
}

/// A JSON value the inference reads: a [`Value`], a value of a parsed [`Tape`](crate::json::tape::Tape) or a document
/// rendered from one.
pub(crate) trait Shape<'a>: Copy {
    /// The value's kind.
    fn shape(self) -> Kind<'a>;
    /// An array's items (none for another kind).
    fn items(self) -> impl Iterator<Item = Self>;
    /// An object's members, in any order (none for another kind).
    fn members(self) -> impl Iterator<Item = (&'a str, Self)>;
}

impl<'a> Shape<'a> for &'a Value {
    fn shape(self) -> Kind<'a> {
        match self {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) => Kind::Number(n.as_str()),
            Value::String(text) => Kind::String(text.into()),
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }
    fn items(self) -> impl Iterator<Item = Self> {
        self.as_array().into_iter().flatten()
    }
    fn members(self) -> impl Iterator<Item = (&'a str, Self)> {
        self.as_object().into_iter().flatten().map(|(key, value)| (key.as_str(), value))
    }
}

impl<'a> Shape<'a> for Node<'a> {
    fn shape(self) -> Kind<'a> {
        match self.kind() {
            TapeKind::Null => Kind::Null,
            TapeKind::Bool(_) => Kind::Bool,
            TapeKind::Number(n) => Kind::Number(n),
            TapeKind::String(text) => Kind::String(text.into()),
            TapeKind::Array(_) => Kind::Array,
            TapeKind::Object(_) => Kind::Object,
        }
    }
    fn items(self) -> impl Iterator<Item = Self> {
        Node::items(self)
    }
    fn members(self) -> impl Iterator<Item = (&'a str, Self)> {
        Node::members(self)
    }
}

/// True when `text` is an absolute URI (RFC 3986): a scheme, `:`, then only characters a URI
/// may hold, with every `%` starting a two-digit hex escape. Conservative: a string that fails
/// here simply does not make its object a reference.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else { return false };
    let mut scheme_bytes = scheme.bytes();
    if !scheme_bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        || !scheme_bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    {
        return false;
    }
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            if !(i + 2 < bytes.len() && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
            continue;
        }
        let allowed = b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b);
        if !allowed {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const REF: &str = "#/$defs/Reference";

    fn value(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn infer(values: &[Value]) -> Inferred {
        let mut inferred = Inferred::default();
        for v in values {
            inferred.observe(v);
        }
        inferred
    }

    fn schema_of(texts: &[&str]) -> Value {
        let values: Vec<Value> = texts.iter().map(|t| value(t)).collect();
        let schema = infer(&values).to_schema(REF);
        for v in &values {
            if let Err(e) = validate(&schema, v) {
                panic!("{v} does not validate against {schema}: {e}");
            }
        }
        schema
    }

    /// A small JSON Schema 2020-12 validator for the keywords the inference writes, following
    /// the specification's semantics (e.g. `integer` is any number with a zero fraction). It
    /// panics on any keyword it does not know, so a keyword added to the output cannot go
    /// unchecked here. The real validator (Python `jsonschema`) runs in the integration tests.
    fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
        let Value::Object(schema) = schema else { panic!("schema {schema} is not an object") };
        for (keyword, arg) in schema {
            match keyword.as_str() {
                "$ref" => {
                    assert_eq!(arg, REF, "unexpected $ref");
                    validate(&reference_schema(), instance)?;
                }
                "type" => {
                    let names: Vec<&str> = match arg {
                        Value::String(s) => vec![s.as_str()],
                        Value::Array(list) => list.iter().map(|t| t.as_str().unwrap()).collect(),
                        _ => panic!("bad type {arg}"),
                    };
                    let mut unique = names.clone();
                    unique.sort();
                    unique.dedup();
                    assert_eq!(unique.len(), names.len(), "type names repeat: {arg}");
                    if !names.iter().any(|name| has_type(instance, name)) {
                        return Err(format!("{instance} is not of type {arg}"));
                    }
                }
                "properties" => {
                    if let Value::Object(map) = instance {
                        for (key, sub) in arg.as_object().unwrap() {
                            if let Some(child) = map.get(key) {
                                validate(sub, child).map_err(|e| format!(".{key}: {e}"))?;
                            }
                        }
                    }
                }
                "required" => {
                    if let Value::Object(map) = instance {
                        for key in arg.as_array().unwrap() {
                            if !map.contains_key(key.as_str().unwrap()) {
                                return Err(format!("missing required {key}"));
                            }
                        }
                    }
                }
                "items" => {
                    if let Value::Array(items) = instance {
                        for (i, item) in items.iter().enumerate() {
                            validate(arg, item).map_err(|e| format!("[{i}]: {e}"))?;
                        }
                    }
                }
                "anyOf" => {
                    let branches = arg.as_array().unwrap();
                    assert!(!branches.is_empty());
                    if !branches.iter().any(|b| validate(b, instance).is_ok()) {
                        return Err(format!("{instance} matches no branch of anyOf"));
                    }
                }
                "format" => {
                    assert_eq!(arg, "uri");
                    if let Value::String(s) = instance {
                        // independent of `is_uri`: the test data's URIs are http(s) urls
                        if !(s.starts_with("http://") || s.starts_with("https://")) {
                            return Err(format!("{s:?} is not a uri"));
                        }
                    }
                }
                "description" => {}
                other => panic!("the test validator does not know keyword {other:?}"),
            }
        }
        Ok(())
    }

    fn has_type(instance: &Value, name: &str) -> bool {
        match (name, instance) {
            ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => true,
            ("array", Value::Array(_)) | ("object", Value::Object(_)) | ("number", Value::Number(_)) => true,
            // the specification: a number whose fractional part is zero (as Python's validator
            // decides it, through a float)
            ("integer", Value::Number(n)) => n.as_f64().is_some_and(|f| f.fract() == 0.0),
            _ => false,
        }
    }

    #[test]
    fn scalars() {
        assert_eq!(schema_of(&["1", "-7", "0"]), json!({"type": "integer"}));
        assert_eq!(schema_of(&["1", "2.5"]), json!({"type": "number"}));
        assert_eq!(schema_of(&["1.0"]), json!({"type": "number"}));
        assert_eq!(schema_of(&["1e3"]), json!({"type": "number"}));
        assert_eq!(schema_of(&["1E3", "4"]), json!({"type": "number"}));
        assert_eq!(schema_of(&["123456789012345678901234567890", "-99999999999999999999"]), json!({"type": "integer"}));
        assert_eq!(schema_of(&["18446744073709551615", "-9223372036854775808"]), json!({"type": "integer"}));
        assert_eq!(schema_of(&["true", "false"]), json!({"type": "boolean"}));
        assert_eq!(schema_of(&["null"]), json!({"type": "null"}));
        assert_eq!(schema_of(&[r#""a""#, r#""""#]), json!({"type": "string"}));
        assert_eq!(schema_of(&[r#""a""#, "null"]), json!({"type": ["string", "null"]}));
        assert_eq!(schema_of(&["null", "3"]), json!({"type": ["integer", "null"]}));
        assert_eq!(
            schema_of(&["true", "1.5", r#""x""#, "null"]),
            json!({"type": ["string", "number", "boolean", "null"]})
        );
    }

    #[test]
    fn nothing_seen_accepts_anything() {
        assert_eq!(Inferred::default().to_schema(REF), json!({}));
        assert_eq!(schema_of(&["[]", "[]"]), json!({"type": "array", "items": {}}));
    }

    #[test]
    fn objects_required_and_nullable() {
        let schema = schema_of(&[
            r#"{"id": 1, "name": "a", "tag": null, "only_first": true}"#,
            r#"{"id": 2, "name": "b", "tag": "x"}"#,
            r#"{"id": 3, "tag": "y"}"#,
        ]);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": "string"},
                    "only_first": {"type": "boolean"},
                    "tag": {"type": ["string", "null"]}
                },
                "required": ["id", "tag"]
            })
        );
        assert!(validate(&schema, &value(r#"{"id": 4, "tag": null, "extra": [1]}"#)).is_ok(), "objects stay open");
        assert!(validate(&schema, &value(r#"{"id": 4}"#)).is_err(), "tag is required");
        assert!(validate(&schema, &value(r#"{"id": "4", "tag": null}"#)).is_err(), "id is an integer");
        assert!(validate(&schema, &value(r#"{"id": 4.5, "tag": null}"#)).is_err(), "id is an integer");
        assert!(validate(&schema, &value(r#"{"id": 4, "tag": null, "name": null}"#)).is_err(), "name was never null");
        assert!(validate(&schema, &value("[]")).is_err());
    }

    #[test]
    fn empty_objects_have_no_required() {
        assert_eq!(schema_of(&["{}"]), json!({"type": "object", "properties": {}}));
        assert_eq!(
            schema_of(&["{}", r#"{"a": 1}"#]),
            json!({"type": "object", "properties": {"a": {"type": "integer"}}})
        );
    }

    #[test]
    fn nested_arrays_and_objects() {
        let schema = schema_of(&[
            r#"{"list": [{"a": 1, "b": [1, 2]}, {"a": 2.5}], "grid": [[1], [], [null]]}"#,
            r#"{"list": [], "grid": []}"#,
        ]);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "grid": {"type": "array", "items": {"type": "array", "items": {"type": ["integer", "null"]}}},
                    "list": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "a": {"type": "number"},
                                "b": {"type": "array", "items": {"type": "integer"}}
                            },
                            "required": ["a"]
                        }
                    }
                },
                "required": ["grid", "list"]
            })
        );
        assert!(validate(&schema, &value(r#"{"list": [{"a": 1, "b": ["x"]}], "grid": []}"#)).is_err());
    }

    #[test]
    fn mixed_containers_at_one_place() {
        let schema = schema_of(&[r#"[1]"#, r#"{"k": "v"}"#, "null", r#""s""#]);
        assert_eq!(
            schema,
            json!({
                "type": ["object", "array", "string", "null"],
                "properties": {"k": {"type": "string"}},
                "required": ["k"],
                "items": {"type": "integer"}
            })
        );
    }

    #[test]
    fn references() {
        let named = r#"{"name": "soft", "url": "http://h/api/v2/berry-firmness/2/"}"#;
        let nameless = r#"{"url": "http://h/api/v2/evolution-chain/1/"}"#;
        assert_eq!(schema_of(&[named]), json!({"$ref": REF}));
        assert_eq!(schema_of(&[named, nameless]), json!({"$ref": REF}));
        assert_eq!(schema_of(&[named, "null"]), json!({"anyOf": [{"$ref": REF}, {"type": "null"}]}));
        assert_eq!(
            schema_of(&[&format!("[{named}, {nameless}]"), "[]"]),
            json!({"type": "array", "items": {"$ref": REF}})
        );
        assert_eq!(
            schema_of(&[named, "[1]"]),
            json!({"anyOf": [{"$ref": REF}, {"type": "array", "items": {"type": "integer"}}]})
        );
        // not references: other keys, a url that is not a URI, a name that is not a string
        for not_reference in [
            r#"{"name": "a", "url": "http://h/x/", "extra": 1}"#,
            r#"{"url": "/api/v2/berry/1/"}"#,
            r#"{"url": "not a uri"}"#,
            r#"{"name": null, "url": "http://h/x/"}"#,
            r#"{"name": "a", "link": "http://h/x/"}"#,
            r#"{"url": 5}"#,
            r#"{"name": "a"}"#,
        ] {
            let schema = schema_of(&[not_reference]);
            assert_eq!(schema["type"], "object", "{not_reference}: {schema}");
        }
        // a place where some objects are references and some are not is a plain object
        let schema = schema_of(&[named, r#"{"name": "x", "url": "http://h/y/", "note": "n"}"#]);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {"name": {"type": "string"}, "note": {"type": "string"}, "url": {"type": "string"}},
                "required": ["name", "url"]
            })
        );
    }

    #[test]
    fn reference_definition_accepts_both_shapes() {
        let schema = reference_schema();
        assert!(validate(&schema, &value(r#"{"name": "a", "url": "http://h/1/"}"#)).is_ok());
        assert!(validate(&schema, &value(r#"{"url": "https://h/1/"}"#)).is_ok());
        assert!(validate(&schema, &value(r#"{"name": "a"}"#)).is_err());
        assert!(validate(&schema, &value(r#"{"name": 1, "url": "http://h/1/"}"#)).is_err());
        assert!(validate(&schema, &value(r#"{"url": null}"#)).is_err());
    }

    #[test]
    fn uris() {
        for ok in ["http://127.0.0.1:8080/api/v2/berry/1/", "https://a.b/c?d=e&f=%20#g", "urn:isbn:0", "x+y.z-w:"] {
            assert!(is_uri(ok), "{ok}");
        }
        for bad in
            ["", "/api/v2/berry/1/", "http", "1http://a", "http://a b", "http://a/%2", "http://a/%zz", "http://é"]
        {
            assert!(!is_uri(bad), "{bad}");
        }
    }

    /// A small deterministic generator (xorshift), so the property tests need no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random JSON value over a small set of keys, so that values share places often and
    /// inference has to merge types, optional keys, nulls and references.
    fn random_value(rng: &mut Rng, depth: u32) -> Value {
        let leaf = depth == 0;
        match rng.below(if leaf { 7 } else { 10 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.below(2) == 0),
            2 => value(["0", "-1", "42", "18446744073709551616", "-123456789012345678901"][rng.below(5) as usize]),
            3 => value(["1.5", "1.0", "-0.25", "2e10", "3E-2"][rng.below(5) as usize]),
            4 => Value::String(["", "a", "http://x/", "/api/v2/a/1/"][rng.below(4) as usize].into()),
            5 => value(r#"{"name": "n", "url": "http://h/api/v2/a/1/"}"#),
            6 => value(r#"{"url": "https://h/api/v2/b/-1/"}"#),
            7 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth - 1)).collect()),
            _ => {
                let mut map = Map::new();
                for key in ["a", "b", "c", "name", "url"] {
                    if rng.below(3) > 0 {
                        map.insert(key.into(), random_value(rng, depth - 1));
                    }
                }
                Value::Object(map)
            }
        }
    }

    #[test]
    fn every_observed_value_validates() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..300 {
            let n = 1 + rng.below(12) as usize;
            let values: Vec<Value> = (0..n).map(|_| random_value(&mut rng, 4)).collect();
            let schema = infer(&values).to_schema(REF);
            for v in &values {
                if let Err(e) = validate(&schema, v) {
                    panic!("{v} does not validate against {schema}: {e}");
                }
            }
        }
    }

    #[test]
    fn merge_equals_observing_everything() {
        let mut rng = Rng(42);
        for _ in 0..200 {
            let n = rng.below(10) as usize;
            let values: Vec<Value> = (0..n).map(|_| random_value(&mut rng, 3)).collect();
            let whole = infer(&values);
            for split in 0..=n {
                let mut left = infer(&values[..split]);
                left.merge(infer(&values[split..]));
                assert_eq!(left, whole, "split at {split}");
                // merging the other way round gives the same schema too
                let mut right = infer(&values[split..]);
                right.merge(infer(&values[..split]));
                assert_eq!(right, whole, "split at {split}, reversed");
            }
            assert_eq!(whole.count(), n as u64);
        }
    }

    #[test]
    fn forgetting_equals_never_observing() {
        let mut rng = Rng(7);
        for _ in 0..200 {
            let n = 1 + rng.below(10) as usize;
            let values: Vec<Value> = (0..n).map(|_| random_value(&mut rng, 3)).collect();
            let gone = rng.below(n as u64) as usize;
            let mut forgotten = infer(&values);
            forgotten.forget(&values[gone]);
            let rest: Vec<Value> =
                values.iter().enumerate().filter(|(i, _)| *i != gone).map(|(_, v)| v.clone()).collect();
            assert_eq!(forgotten, infer(&rest), "forgetting {}", values[gone]);
            // and it survives the trip through the build index
            let text = serde_json::to_string(&forgotten).unwrap();
            assert_eq!(serde_json::from_str::<Inferred>(&text).unwrap(), forgotten);
        }
    }

    #[test]
    fn schemas_are_deterministic_text() {
        let values = [value(r#"{"z": 1, "a": {"y": [true], "b": null}}"#), value(r#"{"a": {"b": 2}}"#)];
        let one = serde_json::to_string(&infer(&values).to_schema(REF)).unwrap();
        let reversed: Vec<Value> = values.iter().rev().cloned().collect();
        let two = serde_json::to_string(&infer(&reversed).to_schema(REF)).unwrap();
        assert_eq!(one, two);
    }
}
