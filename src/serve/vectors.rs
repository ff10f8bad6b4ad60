//! The rule vectors (`tests/vectors/*.json`, written from docs/serve.md, docs/tree.md and the
//! paging rules) checked against the Rust side: the router ([`super::route`]), the paging rules
//! ([`crate::paging`]), the folder names, Rust's `{:?}` escape, the search folding and the ignored
//! parameters ([`crate::filters::ignored_header`]), and the list answer over a small tree
//! ([`super::respond::decide`], which calls [`super::list::answer`]). The edge
//! handler and the CloudFront Function check the same tables (`tests/tools/vectors.mjs`, run by
//! tests/suite/edge.rs).

use super::respond::bad_param;
use super::route::{Route, route};
use crate::paging::{LinkStyle, Page, precomputed_pages};
use serde_json::{Value, json};

/// The cases of a table.
fn cases(table: &str) -> Vec<Value> {
    let table: Value = serde_json::from_str(table).expect("a vectors table is JSON");
    table["cases"].as_array().expect("a table has cases").clone()
}

/// `OFFSET/LIMIT` as a page.
fn page(text: &str) -> Page {
    let (offset, limit) = text.split_once('/').expect("OFFSET/LIMIT");
    Page { offset: offset.parse().expect("an offset"), limit: limit.parse().expect("a limit") }
}

/// A page as the tables write it, `null` for none.
fn written(page: Option<Page>) -> Value {
    page.map_or(Value::Null, |p| json!(format!("{}/{}", p.offset, p.limit)))
}

#[test]
fn targets_route_as_the_vectors_say() {
    for case in cases(include_str!("../../tests/vectors/route.json")) {
        let target = case["target"].as_str().expect("a target");
        let read = route(target);
        let mut got = match (&read.route, &read.query.page) {
            (Route::NotFound, _) => json!({ "target": target, "none": true }),
            (Route::Doc(key), _) => json!({ "target": target, "doc": key }),
            (Route::List { segment }, Err(bad)) => {
                let reply = bad_param(bad);
                let body: Value = serde_json::from_slice(reply.body()).expect("a JSON body");
                let error = json!({ "status": reply.status(), "parameter": body["parameter"], "value": body["value"],
                    "detail": body["detail"] });
                json!({ "target": target, "list": segment, "error": error })
            }
            (Route::List { segment }, Ok(page)) => json!({ "target": target, "list": segment,
                "page": written(Some(*page)), "q": read.query.q, "conditions": read.query.conditions }),
        };
        if case["error"].is_object() && case["error"].get("detail").is_none() {
            got["error"].as_object_mut().expect("an error").remove("detail");
        }
        assert_eq!(got, case, "{target:?}");
    }
}

#[test]
fn pages_link_and_are_held_as_the_vectors_say() {
    for case in cases(include_str!("../../tests/vectors/paging.json")) {
        let count = case["count"].as_u64().expect("a count");
        let asked = page(case["page"].as_str().expect("a page"));
        let style: LinkStyle = serde_json::from_value(case["style"].clone()).expect("a link style");
        let sizes: Vec<u64> = serde_json::from_value(case["sizes"].clone()).expect("page sizes");
        let held = sizes.iter().any(|&size| precomputed_pages(count, size, style).contains(&asked));
        let file = if asked.is_everything(count) {
            json!("_pages/all/")
        } else if held {
            json!(format!("_pages/{}/{}/", asked.limit, asked.offset))
        } else {
            Value::Null
        };
        let got = json!({ "count": count, "page": case["page"], "style": case["style"], "sizes": sizes,
            "next": written(asked.next_linked(count, style)), "previous": written(asked.previous()), "file": file });
        assert_eq!(got, case);
    }
}

#[test]
fn texts_fold_escape_and_name_folders_as_the_vectors_say() {
    for case in cases(include_str!("../../tests/vectors/text.json")) {
        let text = case["text"].as_str().expect("a text");
        let quoted = format!("{text:?}");
        let got = json!({ "text": text, "folder": crate::tree::layout::folder_name(text),
            "escape": &quoted[1..quoted.len() - 1], "fold": crate::search::fold(text) });
        assert_eq!(got, case, "{text:?}");
    }
}

#[test]
fn ignored_parameters_are_named_as_the_vectors_say() {
    for case in cases(include_str!("../../tests/vectors/ignored.json")) {
        let target = case["target"].as_str().expect("a target");
        let names: Vec<String> = serde_json::from_value(case["declared"].clone()).expect("declared names");
        let declared: Vec<crate::filters::FilterField> =
            names.iter().map(|name| crate::filters::FilterField { name: name.clone(), path: "x".into() }).collect();
        let query = route(target).query;
        let ignored = crate::filters::ignored(&declared, &query.params);
        let header = crate::filters::ignored_header(&declared, &ignored);
        let got = json!({ "target": target, "declared": names, "ignored": ignored, "header": header });
        assert_eq!(got, case, "{target:?}");
    }
}

/// A list answer as `tests/vectors/list.json` writes it: status, and the count, entry ids, next
/// and previous of a page, or the body of a 400 or 404.
fn list_case(target: &str, status: u16, body: &[u8]) -> Value {
    let body: Value = serde_json::from_slice(body).expect("a JSON body");
    if status != 200 {
        return json!({ "target": target, "status": status, "body": body });
    }
    let ids: Vec<u64> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|entry| {
            let url = entry["url"].as_str().expect("an entry's url");
            url.trim_end_matches('/').rsplit('/').next().and_then(|id| id.parse().ok()).expect("an id")
        })
        .collect();
    json!({ "target": target, "status": status, "count": body["count"], "ids": ids, "next": body["next"],
        "previous": body["previous"] })
}

#[test]
fn lists_answer_as_the_vectors_say() {
    let table: Value = serde_json::from_str(include_str!("../../tests/vectors/list.json")).expect("JSON");
    let dir = std::env::temp_dir().join(format!("gen-list-vectors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    for (path, record) in table["data"].as_object().expect("the data folder") {
        let file = data.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("a data folder");
        std::fs::write(&file, serde_json::to_vec(record).expect("JSON")).expect("a record");
    }
    let out = dir.join("out");
    crate::build::build(&data, &out, &crate::build::BuildOptions::default(), &Default::default()).expect("a build");
    let tree =
        super::tree::ServedTree::load(&out, std::sync::Arc::new(super::cache::Cache::new(1 << 20))).expect("the tree");
    for case in cases(include_str!("../../tests/vectors/list.json")) {
        let target = case["target"].as_str().expect("a target");
        let reply =
            super::respond::decide(&tree, &super::respond::Request { method: "GET", target, ..Default::default() });
        assert_eq!(list_case(target, reply.status(), reply.body()), case, "{target:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
