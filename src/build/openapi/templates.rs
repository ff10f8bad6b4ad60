//! The fixed parts of the OpenAPI document: the shared schemas, parameters and error responses,
//! and the shape of one GET operation, as JSON literals. [`super`] assembles them with each
//! resource's paths and inferred schemas.

use super::ResourceDescription;
use crate::tree::layout::{ALL_PAGE, API_PREFIX, DEFAULT_PAGE_SIZE, PAGES_DIR};
use serde_json::{Map, Value, json};

/// The error responses, referring to [`crate::answers::error_schemas`].
pub(super) fn error_responses() -> Value {
    json!({
        "NotFound": {
            "description": "No such document.",
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
        },
        "BadParameter": {
            "description": "`limit` or `offset` is not a whole number in digits (0 to 18446744073709551615).",
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/BadParameter" } } }
        },
        "BadParameterOrFilter": {
            "description": "`limit` or `offset` is not a whole number in digits, or a parameter is none of the resource's declared filters.",
            "content": { "application/json": { "schema": { "oneOf": [
                { "$ref": "#/components/schemas/BadParameter" },
                { "$ref": "#/components/schemas/NotAFilter" }
            ] } } }
        }
    })
}

/// A list entry: `{"name", "url"}` when the resource is `named`, else `{"url"}`.
pub(super) fn entry_schema(named: bool) -> Value {
    json!({
        "type": "object",
        "description": "A list entry: the record's url, and its name.",
        "required": if named { json!(["name", "url"]) } else { json!(["url"]) },
        "properties": { "name": { "type": "string" }, "url": { "type": "string", "format": "uri" } }
    })
}

/// The OpenAPI document itself, as its own path answers it.
pub(super) fn openapi_document_schema() -> Value {
    json!({
        "type": "object",
        "description": "This document.",
        "required": ["openapi", "info", "paths"],
        "properties": { "openapi": { "type": "string" } }
    })
}

/// What the whole API is: paging, the page files, names, references and inferred schemas.
pub(super) fn info_description() -> String {
    format!(
        "A read-only JSON API, prebuilt as static files by gen. Every path is also served without its \
     trailing slash (`{API_PREFIX}berry` answers as `{API_PREFIX}berry/`). Lists are paged with `limit` (absent, \
     empty or 0 means {DEFAULT_PAGE_SIZE}) and `offset` (absent or empty means 0); `next` and `previous` link to the \
     neighbouring pages and are null at either end, and the last page's limit shrinks to what is left. \
     Pages whose offset is a multiple of their limit are also files at \
     `{API_PREFIX}<segment>/{PAGES_DIR}/<limit>/<offset>/` (and `{PAGES_DIR}/{ALL_PAGE}/`), which `next` and `previous` point \
     to in trees built with `--links path`; there `next` keeps the limit. \
     Records are served by id and, where they have one, by name. References between documents are \
     `{{\"name\", \"url\"}}` (or `{{\"url\"}}`) with an absolute url. Record schemas are inferred from \
     every record at build time: exact for the data, so every record validates against its schema; \
     objects stay open to new fields."
    )
}

/// A page of a list whose entries are the schema `entry`.
pub(super) fn page_schema(entry: &str) -> Value {
    let link = |what: &str| {
        json!({
            "type": ["string", "null"],
            "format": "uri",
            "description": format!("The url of the {what} page, or null when there is none.")
        })
    };
    json!({
        "type": "object",
        "description": "A page of a list.",
        "required": ["count", "next", "previous", "results"],
        "properties": {
            "count": { "type": "integer", "minimum": 0, "description": "Entries in the whole list." },
            "next": link("next"),
            "previous": link("previous"),
            "results": { "type": "array", "items": { "$ref": format!("#/components/schemas/{entry}") } }
        }
    })
}

/// The root document: every resource's list url.
pub(super) fn root_schema(resources: &[&ResourceDescription]) -> Value {
    let properties: Map<String, Value> =
        resources.iter().map(|r| (r.segment.to_string(), json!({ "type": "string", "format": "uri" }))).collect();
    let required: Vec<&str> = resources.iter().map(|r| r.segment).collect();
    json!({
        "type": "object",
        "description": "Each resource's segment and the url of its list.",
        "required": required,
        "properties": properties
    })
}

/// The meta document, as `render::DocumentRenderer` writes it.
pub(super) fn meta_schema() -> Value {
    json!({
        "type": "object",
        "description": "What the tree holds and how it was built.",
        "required": ["built_at", "bulk_data", "data_hash", "deploy_date", "generator", "hash", "links", "page_sizes", "records", "resources"],
        "properties": {
            "built_at": {
                "type": ["string", "null"],
                "format": "date-time",
                "description": "Build date, when the build was given SOURCE_DATE_EPOCH; else null."
            },
            "bulk_data": {
                "type": ["string", "null"],
                "format": "uri",
                "description": "The url of the bulk-data index (every resource's records in one file each), which the root does not list: the root lists resources only. null when the tree has no bulk-data files."
            },
            "data_hash": { "type": "string" },
            "deploy_date": {
                "type": "string",
                "pattern": "^-?[0-9]+$",
                "description": "When the tree was deployed, in Unix seconds (SOURCE_DATE_EPOCH, else the time of the last git commit of the data folder when it has no uncommitted change, else the time of the build that wrote it), as the public API writes it."
            },
            "generator": { "type": "string" },
            "hash": {
                "type": "string",
                "description": "Hash of the data and the build's settings: the same for trees with the same documents."
            },
            "links": { "type": "string", "enum": ["query", "path"] },
            "page_sizes": { "type": "array", "items": { "type": "integer", "minimum": 1 } },
            "records": { "type": "integer", "minimum": 0 },
            "resources": { "type": "integer", "minimum": 0 }
        }
    })
}

/// The names document of a resource (see [`crate::search`]).
pub(super) fn names_schema() -> Value {
    json!({
        "type": "object",
        "description": "Every record's id and its name and localized names, folded (NFKD, combining marks removed, case folded), each once, in list order: what `?q=` searches. One entry per line. `list` names the list it belongs to: its count and the SHA-256 of its `_pages/all/index.json` file (a reader that finds another list there refuses the pair). For a resource of more than 50,000 records, `shards` instead of `results`: each shard (at its `url`, `count` entries from list position `offset`) is a names document of its own, with the same `list`.",
        "required": ["count", "list"],
        "properties": {
            "count": { "type": "integer", "minimum": 0 },
            "offset": { "type": "integer", "minimum": 0 },
            "list": {
                "type": "object",
                "required": ["count", "sha256"],
                "properties": {
                    "count": { "type": "integer", "minimum": 0 },
                    "sha256": { "type": "string", "pattern": "^[0-9a-f]{64}$" }
                }
            },
            "shards": { "type": "array", "items": {
                "type": "object",
                "required": ["offset", "count", "url"],
                "properties": {
                    "offset": { "type": "integer", "minimum": 0 },
                    "count": { "type": "integer", "minimum": 0 },
                    "url": { "type": "string", "format": "uri" }
                }
            } },
            "results": { "type": "array", "items": {
                "type": "object",
                "required": ["id", "keys"],
                "properties": {
                    "id": { "type": "integer" },
                    "keys": { "type": "array", "items": { "type": "string" } }
                }
            } }
        }
    })
}

/// The values document of a declared filter.
pub(super) fn filter_values_schema() -> Value {
    json!({
        "type": "object",
        "description": "A declared filter's values, ascending, each with the number of records that take it, the url asking the list for them and the folder of their list.",
        "required": ["name", "path", "count", "results"],
        "properties": {
            "name": { "type": "string" },
            "path": { "type": "string" },
            "count": { "type": "integer", "minimum": 0 },
            "results": { "type": "array", "items": {
                "type": "object",
                "required": ["value", "count", "url", "list"],
                "properties": {
                    "value": { "type": "string" },
                    "count": { "type": "integer", "minimum": 1 },
                    "url": { "type": "string", "format": "uri" },
                    "list": { "type": "string", "format": "uri" }
                }
            } }
        }
    })
}

/// The path parameter of a filter value's list: the value's folder name.
pub(super) fn filter_value_parameter() -> Value {
    json!([{
        "name": "value",
        "in": "path",
        "required": true,
        "description": "The value's folder name: its bytes a-z, 0-9 and '-' as they are, any other as '_' and two hex digits (docs/tree.md).",
        "schema": { "type": "string", "pattern": "^[a-z0-9_-]+$" }
    }])
}

/// The path parameter of a names shard: its number.
pub(super) fn shard_parameter() -> Value {
    json!([{
        "name": "shard", "in": "path", "required": true,
        "schema": { "type": "integer", "minimum": 0 }
    }])
}

/// The query parameters of `resource`'s declared filters, inline in its list operation.
pub(super) fn filter_parameters(resource: &ResourceDescription) -> Vec<Value> {
    let segment = resource.segment;
    resource
        .filters
        .iter()
        .map(|field| {
            let values = format!("{API_PREFIX}{segment}/_filters/{}/", crate::filters::folder_name(&field.name));
            json!({
                "name": field.name,
                "in": "query",
                "required": false,
                "description": format!(
                    "Only the records whose `{}` takes this value (a string, a number as JSON writes it, true or \
                     false), exactly; the values and their counts: {values}. Empty: no condition.",
                    field.path
                ),
                "schema": { "type": "string" }
            })
        })
        .collect()
}

/// The shared parameters: paging, search and the record id.
pub(super) fn parameters() -> Value {
    let id_description = "The record's id";
    json!({
        "Limit": {
            "name": "limit",
            "in": "query",
            "required": false,
            "description": format!("Entries per page; absent, empty or 0 means {DEFAULT_PAGE_SIZE}."),
            "schema": { "type": "integer", "minimum": 0, "default": DEFAULT_PAGE_SIZE }
        },
        "Offset": {
            "name": "offset",
            "in": "query",
            "required": false,
            "description": "Index of the first entry; absent or empty means 0. Past the end, results are empty.",
            "schema": { "type": "integer", "minimum": 0, "default": 0 }
        },
        "Search": {
            "name": "q",
            "in": "query",
            "required": false,
            "description": "Only the records whose name or a localized name contains this text, case-folded (accents kept); limit and offset apply to the matches. Absent or empty: the whole list.",
            "schema": { "type": "string" }
        },
        "Id": {
            "name": "id",
            "in": "path",
            "required": true,
            "description": format!("{id_description}."),
            "schema": { "type": "integer" }
        },
        "IdOrName": {
            "name": "id",
            "in": "path",
            "required": true,
            "description": format!("{id_description} or its name."),
            "schema": {
                "anyOf": [
                    { "type": "integer" },
                    { "type": "string", "pattern": "^[a-z0-9-]*[a-z-][a-z0-9-]*$" }
                ]
            }
        }
    })
}

/// A path item with one GET operation answering `schema` with 200, plus the error responses
/// that apply: 400 with the paging parameters, 404 with an id.
pub(super) fn operation(id: &str, tag: Option<&str>, summary: &str, schema: &str, parameters: &[&str]) -> Value {
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": "OK",
            "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
        }),
    );
    if parameters.contains(&"Limit") {
        responses.insert("400".into(), json!({ "$ref": "#/components/responses/BadParameter" }));
    }
    if parameters.iter().any(|p| p.starts_with("Id")) {
        responses.insert("404".into(), json!({ "$ref": "#/components/responses/NotFound" }));
    }
    let mut get = Map::new();
    get.insert("operationId".into(), id.into());
    get.insert("summary".into(), summary.into());
    if let Some(tag) = tag {
        get.insert("tags".into(), json!([tag]));
    }
    if !parameters.is_empty() {
        let refs: Vec<Value> =
            parameters.iter().map(|p| json!({ "$ref": format!("#/components/parameters/{p}") })).collect();
        get.insert("parameters".into(), Value::Array(refs));
    }
    get.insert("responses".into(), Value::Object(responses));
    json!({ "get": get })
}
