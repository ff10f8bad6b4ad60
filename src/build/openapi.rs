//! The OpenAPI 3.1 document of a tree (`api/v2/openapi.json`): every path the tree serves, with
//! each resource's record schema inferred from its data ([`crate::build::schema`]), the paging
//! parameters and responses, and the error bodies `gen serve` answers with.
//!
//! Pure: a description of the tree in, a JSON value out. Component and operation names are
//! derived from segments (`berry-firmness` → `BerryFirmness`, `getBerryFirmness`); names that
//! would collide with the shared components or with each other get a suffix, deterministically.
//!
//! The fixed JSON literals (shared schemas, parameters, error responses, the shape of an
//! operation) are in [`templates`]; this file assembles them with each resource's paths.

mod templates;

use crate::build::schema;
use crate::tree::layout::{self, API_PREFIX, META_KEY, OPENAPI_PATH};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use templates::operation;

/// What the document describes.
#[derive(Debug, Clone)]
pub(crate) struct ApiDescription<'a> {
    /// Scheme, host and optional path prefix the tree is served from, e.g. `http://127.0.0.1:8080`.
    pub(crate) base_url: &'a str,
    /// The document's `info.title`.
    pub(crate) title: &'a str,
    /// The document's `info.version`.
    pub(crate) version: &'a str,
    /// The resources of the tree.
    pub(crate) resources: Vec<ResourceDescription<'a>>,
}

/// One resource of the tree.
#[derive(Debug, Clone)]
pub(crate) struct ResourceDescription<'a> {
    /// Path segment, e.g. `berry-firmness`.
    pub(crate) segment: &'a str,
    /// Number of records (entries of its list).
    pub(crate) count: u64,
    /// True when every record has a name: list entries are `{"name", "url"}` and records are
    /// served by name too. False: entries are `{"url"}` (a name, where present, still optional).
    pub(crate) named: bool,
    /// The schema of its records, from `Inferred::to_schema(REFERENCE_REF)`.
    pub(crate) record_schema: Value,
    /// Sub-document name (e.g. `encounters`) → its schema, inferred over every record that has it.
    pub(crate) subdocs: Vec<(&'a str, Value)>,
    /// Its declared filters (`?FIELD=VALUE`), each a query parameter of its list.
    pub(crate) filters: &'a [crate::filters::FilterField],
}

/// Component names used by the document itself; resources never take them.
const SHARED_SCHEMAS: [&str; 13] = [
    "BadParameter",
    "Error",
    "FilterValues",
    "NotAFilter",
    "ListEntry",
    "Meta",
    "NamedListEntry",
    "NamedPage",
    "NamesDocument",
    "OpenApiDocument",
    "Page",
    "Reference",
    "Root",
];

/// The OpenAPI document of the tree `renderer` has rendered, from everything it has seen: call
/// it once every record has been rendered.
pub(crate) fn document(renderer: &super::render::DocumentRenderer<'_>) -> Vec<u8> {
    let dataset = renderer.records.dataset;
    let resources = dataset
        .resources
        .iter()
        .map(|(segment, resource)| ResourceDescription {
            segment,
            count: resource.records.len() as u64,
            named: resource.records.iter().all(|r| r.name.is_some()),
            record_schema: renderer.inferred_schema(segment, None),
            subdocs: renderer
                .subdoc_kinds(segment)
                .into_iter()
                .map(|sub| (sub, renderer.inferred_schema(segment, Some(sub))))
                .collect(),
            filters: renderer.options.filters.get(segment).map_or(&[], Vec::as_slice),
        })
        .collect();
    let description = ApiDescription {
        base_url: &renderer.options.base_url,
        title: "Reference data API",
        version: env!("CARGO_PKG_VERSION"),
        resources,
    };
    let mut document = openapi(&description);
    if renderer.options.bulk {
        crate::bulk::describe_in_openapi(&mut document);
    }
    renderer.records.serialize(&document)
}

/// The OpenAPI 3.1 document of the tree described by `description`.
pub(crate) fn openapi(description: &ApiDescription) -> Value {
    let mut resources: Vec<&ResourceDescription> = description.resources.iter().collect();
    resources.sort_by_key(|r| r.segment);

    let mut names = Names::default();
    let mut schemas = shared_schemas(&resources);
    let mut paths = Map::new();
    paths.insert(API_PREFIX.into(), operation("getRoot", None, "Every resource's list url.", "Root", &[]));
    paths.insert(layout::url_path(META_KEY), operation("getMeta", None, "What the tree holds.", "Meta", &[]));
    paths.insert(
        format!("/{OPENAPI_PATH}"),
        operation("getOpenApiDocument", None, "This OpenAPI document.", "OpenApiDocument", &[]),
    );
    for resource in &resources {
        add_resource(resource, &mut names, &mut schemas, &mut paths);
    }

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": description.title,
            "version": description.version,
            "description": templates::info_description(),
        },
        "servers": [{ "url": description.base_url }],
        "tags": resources.iter().map(|r| json!({ "name": r.segment })).collect::<Vec<_>>(),
        "paths": paths,
        "components": {
            "schemas": schemas,
            "parameters": templates::parameters(),
            "responses": templates::error_responses(),
        }
    })
}

/// The schemas every document holds, whatever its resources: [`SHARED_SCHEMAS`].
fn shared_schemas(resources: &[&ResourceDescription]) -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert("Reference".into(), schema::reference_schema());
    for (name, schema) in crate::answers::error_schemas() {
        schemas.insert(name.into(), schema);
    }
    schemas.insert("NamedListEntry".into(), templates::entry_schema(true));
    schemas.insert("ListEntry".into(), templates::entry_schema(false));
    for (page, entry) in [("NamedPage", "NamedListEntry"), ("Page", "ListEntry")] {
        schemas.insert(page.into(), templates::page_schema(entry));
    }
    schemas.insert("NamesDocument".into(), templates::names_schema());
    schemas.insert("FilterValues".into(), templates::filter_values_schema());
    schemas.insert("Root".into(), templates::root_schema(resources));
    schemas.insert("Meta".into(), templates::meta_schema());
    schemas.insert("OpenApiDocument".into(), templates::openapi_document_schema());
    schemas
}

/// `resource`'s record schema and its paths: the list, its filters, its names, the record and
/// its sub-documents.
fn add_resource(
    resource: &ResourceDescription,
    names: &mut Names,
    schemas: &mut Map<String, Value>,
    paths: &mut Map<String, Value>,
) {
    let segment = resource.segment;
    let name = names.take(&pascal_case(segment), "Record");
    let mut record_schema = resource.record_schema.clone();
    describe(
        &mut record_schema,
        format!("A record of {API_PREFIX}{segment}/, inferred from its {} records.", resource.count),
    );
    schemas.insert(name.clone(), record_schema);
    let id = if resource.named { "IdOrName" } else { "Id" };
    let page = if resource.named { "NamedPage" } else { "Page" };
    paths.insert(
        format!("{API_PREFIX}{segment}/"),
        operation(
            &format!("list{name}"),
            Some(segment),
            &format!("A page of the {segment} list ({} entries).", resource.count),
            page,
            &["Limit", "Offset", "Search"],
        ),
    );
    add_filters(resource, &name, page, paths);
    add_names(resource, &name, paths);
    paths.insert(
        format!("{API_PREFIX}{segment}/{{id}}/"),
        operation(&format!("get{name}"), Some(segment), &format!("A {segment} record."), &name, &[id]),
    );
    let mut subdocs: Vec<&(&str, Value)> = resource.subdocs.iter().collect();
    subdocs.sort_by_key(|(sub, _)| *sub);
    for (sub, sub_schema) in subdocs {
        let sub_name = names.take(&format!("{name}{}", pascal_case(sub)), "Document");
        let mut sub_schema = sub_schema.clone();
        describe(&mut sub_schema, format!("The {sub} sub-document of a {segment} record."));
        schemas.insert(sub_name.clone(), sub_schema);
        paths.insert(
            format!("{API_PREFIX}{segment}/{{id}}/{sub}/"),
            operation(
                &format!("get{sub_name}"),
                Some(segment),
                &format!("The {sub} of a {segment} record (records without one answer 404)."),
                &sub_name,
                &[id],
            ),
        );
    }
}

/// `resource`'s declared filters: their parameters on its list, each filter's values document
/// and the list of each value. `name` is the record's component name, `page` its page schema's.
fn add_filters(resource: &ResourceDescription, name: &str, page: &str, paths: &mut Map<String, Value>) {
    let segment = resource.segment;
    if !resource.filters.is_empty() {
        let list = &mut paths[&format!("{API_PREFIX}{segment}/")]["get"];
        list["parameters"]
            .as_array_mut()
            .expect("the list's parameters")
            .extend(templates::filter_parameters(resource));
        list["responses"]["400"] = json!({ "$ref": "#/components/responses/BadParameterOrFilter" });
        list["description"] = json!(format!(
            "Declared filters: {}. A filter's parameter repeated, or several filters given, narrow the list to \
             the records matching every one; any other parameter but limit, offset, q and format is a 400.",
            resource.filters.iter().map(|f| format!("`{}` ({})", f.name, f.path)).collect::<Vec<_>>().join(", ")
        ));
    }
    for (i, field) in resource.filters.iter().enumerate() {
        let folder = format!("{API_PREFIX}{segment}/_filters/{}/", crate::filters::folder_name(&field.name));
        let values_summary = format!("The values of the filter `{}` of {segment} and their counts.", field.name);
        paths.insert(
            folder.clone(),
            operation(&format!("filter{name}{i}Values"), Some(segment), &values_summary, "FilterValues", &[]),
        );
        let mut list = operation(
            &format!("filter{name}{i}List"),
            Some(segment),
            &format!(
                "A page of the {segment} records whose `{}` takes a value: the list `?{}=VALUE` answers.",
                field.path, field.name
            ),
            page,
            &[],
        );
        list["get"]["parameters"] = templates::filter_value_parameter();
        // a value no record takes has no list
        list["get"]["responses"]["404"] = json!({ "$ref": "#/components/responses/NotFound" });
        paths.insert(format!("{folder}{{value}}/"), list);
    }
}

/// `resource`'s names document, and its shards when it has them.
fn add_names(resource: &ResourceDescription, name: &str, paths: &mut Map<String, Value>) {
    let segment = resource.segment;
    paths.insert(
        format!("{API_PREFIX}{segment}/_names/"),
        operation(
            &format!("names{name}"),
            Some(segment),
            &format!("Every {segment} record's id, name and localized names, in list order: what `q` searches."),
            "NamesDocument",
            &[],
        ),
    );
    if crate::search::names_shards(resource.count as usize) > 0 {
        let mut shard = operation(
            &format!("names{name}Shard"),
            Some(segment),
            &format!("A shard of the {segment} names: the entries from its list position `offset`."),
            "NamesDocument",
            &[],
        );
        shard["get"]["parameters"] = templates::shard_parameter();
        shard["get"]["responses"]["404"] = json!({ "$ref": "#/components/responses/NotFound" });
        paths.insert(format!("{API_PREFIX}{segment}/_names/{{shard}}/"), shard);
    }
}

/// Adds a description to a schema object that has none.
fn describe(schema: &mut Value, text: String) {
    if let Value::Object(map) = schema {
        map.entry("description").or_insert(Value::String(text));
    }
}

/// `berry-firmness` → `BerryFirmness`, `move-2` → `Move2`.
pub(crate) fn pascal_case(segment: &str) -> String {
    segment
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// Component names handed out so far: each name is unique, and none is a shared component's.
#[derive(Default)]
struct Names {
    taken: BTreeSet<String>,
}

impl Names {
    /// `wanted`, or `wanted` + `suffix` when that is taken, or then `wanted` + `suffix` + 2, 3, ...
    fn take(&mut self, wanted: &str, suffix: &str) -> String {
        let free = |name: &str, taken: &BTreeSet<String>| !taken.contains(name) && !SHARED_SCHEMAS.contains(&name);
        let mut name = wanted.to_string();
        if !free(&name, &self.taken) {
            name = format!("{wanted}{suffix}");
            let mut n = 2;
            while !free(&name, &self.taken) {
                name = format!("{wanted}{suffix}{n}");
                n += 1;
            }
        }
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::schema::{Inferred, REFERENCE_REF};

    fn record_schema(records: &[Value]) -> Value {
        let mut inferred = Inferred::default();
        for r in records {
            inferred.observe(r);
        }
        inferred.to_schema(REFERENCE_REF)
    }

    fn sample() -> Value {
        let berry = record_schema(&[json!({
            "id": 1, "name": "cheri", "firmness": { "name": "soft", "url": "http://h/api/v2/berry-firmness/2/" }
        })]);
        let chain = record_schema(&[json!({ "id": 1, "chain": [] })]);
        let creature = record_schema(&[json!({ "id": 132, "name": "ditto" })]);
        let encounters = record_schema(&[json!([{ "location_area": { "name": "a", "url": "http://h/x/1/" } }])]);
        openapi(&ApiDescription {
            base_url: "http://127.0.0.1:8080",
            title: "gen",
            version: "0.1.0",
            resources: vec![
                ResourceDescription {
                    segment: "evolution-chain",
                    count: 1,
                    named: false,
                    record_schema: chain,
                    subdocs: vec![],
                    filters: &[],
                },
                ResourceDescription {
                    segment: "berry",
                    count: 64,
                    named: true,
                    record_schema: berry,
                    subdocs: vec![],
                    filters: Box::leak(Box::new([crate::filters::FilterField {
                        name: "firmness".into(),
                        path: "firmness.name".into(),
                    }])),
                },
                ResourceDescription {
                    segment: "creature",
                    count: 1,
                    named: true,
                    record_schema: creature,
                    subdocs: vec![("encounters", encounters)],
                    filters: &[],
                },
            ],
        })
    }

    /// Resolves a local `$ref` (`#/a/b`) in `doc`.
    fn resolve<'v>(doc: &'v Value, reference: &str) -> Option<&'v Value> {
        doc.pointer(reference.strip_prefix('#')?)
    }

    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("$ref", Value::String(r)) => out.push(r.clone()),
                        _ => refs(child, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| refs(i, out)),
            _ => {}
        }
    }

    #[test]
    fn every_served_form_has_a_path() {
        let doc = sample();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["servers"], json!([{ "url": "http://127.0.0.1:8080" }]));
        let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
        assert_eq!(
            paths,
            vec![
                "/api/v2/",
                "/api/v2/berry/",
                "/api/v2/berry/_filters/firmness/",
                "/api/v2/berry/_filters/firmness/{value}/",
                "/api/v2/berry/_names/",
                "/api/v2/berry/{id}/",
                "/api/v2/creature/",
                "/api/v2/creature/_names/",
                "/api/v2/creature/{id}/",
                "/api/v2/creature/{id}/encounters/",
                "/api/v2/evolution-chain/",
                "/api/v2/evolution-chain/_names/",
                "/api/v2/evolution-chain/{id}/",
                "/api/v2/meta/",
                "/api/v2/openapi.json",
            ]
        );
        for (path, item) in doc["paths"].as_object().unwrap() {
            let get = &item["get"];
            assert!(get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].is_string(), "{path}");
            assert_eq!(item.as_object().unwrap().len(), 1, "{path}: GET only");
        }
    }

    #[test]
    fn parameters_and_error_responses() {
        let doc = sample();
        let get = |path: &str| doc["paths"][path]["get"].clone();
        let params = |path: &str| -> Vec<Value> {
            get(path)["parameters"]
                .as_array()
                .map(|ps| {
                    let resolved =
                        |p: &Value| p["$ref"].as_str().map_or(p.clone(), |r| resolve(&doc, r).unwrap().clone());
                    ps.iter().map(resolved).collect()
                })
                .unwrap_or_default()
        };
        let list = params("/api/v2/berry/");
        let names: Vec<&str> = list.iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["limit", "offset", "q", "firmness"], "berry declares the filter firmness");
        assert_eq!(list[3]["in"], "query");
        assert!(list[3]["description"].as_str().unwrap().contains("/api/v2/berry/_filters/firmness/"));
        let creature: Vec<Value> = params("/api/v2/creature/");
        assert_eq!(creature.len(), 3, "creature declares none");
        assert_eq!(list[2]["schema"]["type"], "string");
        for p in &list[..2] {
            assert_eq!(p["in"], "query");
            assert_eq!(p["schema"]["type"], "integer");
            assert_eq!(p["schema"]["minimum"], 0);
        }
        assert!(get("/api/v2/berry/")["responses"]["400"].is_object());
        assert!(get("/api/v2/berry/")["responses"]["404"].is_null());

        let named = params("/api/v2/berry/{id}/");
        assert_eq!(named.len(), 1, "one path parameter for id and name");
        assert_eq!(
            (&named[0]["name"], &named[0]["in"], &named[0]["required"]),
            (&json!("id"), &json!("path"), &json!(true))
        );
        let branches: Vec<&Value> =
            named[0]["schema"]["anyOf"].as_array().unwrap().iter().map(|b| &b["type"]).collect();
        assert_eq!(branches, [&json!("integer"), &json!("string")]);
        let nameless = params("/api/v2/evolution-chain/{id}/");
        assert_eq!(nameless[0]["schema"], json!({ "type": "integer" }));
        assert_eq!(params("/api/v2/creature/{id}/encounters/")[0]["name"], "id");

        for path in ["/api/v2/berry/{id}/", "/api/v2/creature/{id}/encounters/"] {
            let not_found = resolve(&doc, get(path)["responses"]["404"]["$ref"].as_str().unwrap()).unwrap();
            assert_eq!(not_found["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Error");
        }
    }

    #[test]
    fn name_pattern_accepts_names_and_not_ids() {
        // The pattern is `[a-z0-9-]*[a-z-][a-z0-9-]*`: mirror it by hand with config's rule.
        let doc = sample();
        let pattern = doc["components"]["parameters"]["IdOrName"]["schema"]["anyOf"][1]["pattern"].as_str().unwrap();
        assert_eq!(pattern, "^[a-z0-9-]*[a-z-][a-z0-9-]*$");
        let matches = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && s.bytes().any(|b| b.is_ascii_lowercase() || b == b'-')
        };
        for name in ["cheri", "-", "mr-mime", "porygon2", "10-percent", "123", "", "Cheri", "a_b"] {
            assert_eq!(matches(name), crate::config::is_valid_name(name), "{name}");
        }
    }

    #[test]
    fn paging_schema() {
        let doc = sample();
        let list_ref = doc["paths"]["/api/v2/evolution-chain/"]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"]["$ref"]
            .as_str()
            .unwrap();
        let page = resolve(&doc, list_ref).unwrap();
        assert_eq!(page["required"], json!(["count", "next", "previous", "results"]));
        assert_eq!(page["properties"]["count"]["type"], "integer");
        for link in ["next", "previous"] {
            assert_eq!(page["properties"][link]["type"], json!(["string", "null"]));
            assert_eq!(page["properties"][link]["format"], "uri");
        }
        let entry = resolve(&doc, page["properties"]["results"]["items"]["$ref"].as_str().unwrap()).unwrap();
        assert_eq!(entry["required"], json!(["url"]));
        let named_ref =
            doc["paths"]["/api/v2/berry/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .unwrap();
        let named = resolve(&doc, named_ref).unwrap();
        let entry = resolve(&doc, named["properties"]["results"]["items"]["$ref"].as_str().unwrap()).unwrap();
        assert_eq!(entry["required"], json!(["name", "url"]));
    }

    #[test]
    fn components_and_refs_resolve() {
        let doc = sample();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in ["Berry", "Creature", "CreatureEncounters", "EvolutionChain", "Reference", "Error", "Root", "Meta"]
        {
            assert!(schemas.contains_key(name), "{name}");
        }
        assert_eq!(schemas["Berry"]["properties"]["firmness"], json!({ "$ref": REFERENCE_REF }));
        assert_eq!(schemas["CreatureEncounters"]["items"]["properties"]["location_area"]["$ref"], REFERENCE_REF);
        assert_eq!(schemas["Root"]["required"], json!(["berry", "creature", "evolution-chain"]));
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 10);
        for r in all {
            assert!(resolve(&doc, &r).is_some(), "{r} does not resolve");
        }
        let mut ids: Vec<&str> =
            doc["paths"].as_object().unwrap().values().map(|i| i["get"]["operationId"].as_str().unwrap()).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "operation ids are unique");
    }

    #[test]
    fn names_never_collide() {
        assert_eq!(pascal_case("berry-firmness"), "BerryFirmness");
        assert_eq!(pascal_case("super-contest-effect"), "SuperContestEffect");
        assert_eq!(pascal_case("move-2"), "Move2");
        let resource = |segment: &'static str, subdocs: Vec<(&'static str, Value)>| ResourceDescription {
            segment,
            count: 1,
            named: true,
            record_schema: json!({ "type": "object" }),
            subdocs,
            filters: &[],
        };
        let doc = openapi(&ApiDescription {
            base_url: "http://h",
            title: "t",
            version: "1",
            resources: vec![
                resource("page", vec![]),
                resource("reference", vec![]),
                resource("a-1", vec![]),
                resource("a1", vec![]),
                resource("a", vec![("1", json!({}))]),
            ],
        });
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        // the shared components keep their meaning
        assert_eq!(schemas["Page"]["required"], json!(["count", "next", "previous", "results"]));
        assert_eq!(schemas["Reference"], schema::reference_schema());
        // sorted: a, its sub-document 1 (A1), a-1 (A1 taken), a1 (A1 and A1Record taken)
        for name in ["PageRecord", "ReferenceRecord", "A", "A1", "A1Record", "A1Record2"] {
            assert!(schemas.contains_key(name), "{name} in {:?}", schemas.keys().collect::<Vec<_>>());
        }
        assert_eq!(doc["paths"]["/api/v2/page/{id}/"]["get"]["operationId"], "getPageRecord");
    }

    #[test]
    fn deterministic() {
        assert_eq!(serde_json::to_string(&sample()).unwrap(), serde_json::to_string(&sample()).unwrap());
    }
}
