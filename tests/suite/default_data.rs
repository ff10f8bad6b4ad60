//! The default dataset in data/: it checks, builds, holds every resource the API must serve and
//! the neighbours they refer to, and every url in its tree resolves inside the tree. (Its facts
//! against the published data: tests/suite/facts.rs.)

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;

fn data_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

#[test]
fn default_data_checks_clean() {
    run(&["check", "--data", data_dir().to_str().unwrap()]).ok();
}

fn strings(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::String(s) => found.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, found)),
        Value::Object(map) => map.values().for_each(|v| strings(v, found)),
        _ => {}
    }
}

#[test]
fn default_tree_serves_every_resource_and_resolves_every_url() {
    let tmp = TempDir::new("default");
    let out = tmp.join("out");
    build(&data_dir(), &out, &[]).ok();
    let root = read_json(&out.join("api/v2/index.json"));
    for segment in common::RESOURCES.iter().chain(&common::NEIGHBOURS) {
        assert_eq!(root[segment], format!("http://127.0.0.1:8080/api/v2/{segment}/"), "{segment}");
        let list = read_json(&out.join(format!("api/v2/{segment}/index.json")));
        assert!(list["count"].as_u64().unwrap() > 0, "{segment} is empty");
    }
    // the well-known small sets are complete
    for (segment, count) in [
        ("berry", 68),
        ("berry-firmness", 5),
        ("berry-flavor", 5),
        ("nature", 25),
        ("creature-color", 10),
        ("gender", 3),
        ("creature-habitat", 9),
        ("athlon-stat", 5),
    ] {
        let list = read_json(&out.join(format!("api/v2/{segment}/index.json")));
        assert_eq!(list["count"], count, "{segment}");
    }
    let cheri = read_json(&out.join("api/v2/berry/cheri/index.json"));
    assert_eq!(cheri["firmness"]["name"], "soft");
    assert_eq!(cheri["growth_time"], 3);
    // ids 0 and -1, the nameless resource, a stated order
    assert!(out.join("api/v2/move-ailment/-1/index.json").is_file());
    assert!(out.join("api/v2/move-category/0/index.json").is_file());
    let effects = read_json(&out.join("api/v2/super-contest-effect/index.json"));
    assert!(effects["results"][0].get("name").is_none());
    // the fields that refer to the neighbours are there
    let bold = read_json(&out.join("api/v2/nature/bold/index.json"));
    assert!(!bold["athlon_stat_changes"].as_array().unwrap().is_empty());
    let bulbasaur = read_json(&out.join("api/v2/creature-species/bulbasaur/index.json"));
    for field in ["habitat", "evolution_chain"] {
        assert!(bulbasaur[field]["url"].as_str().is_some(), "{field}");
    }
    assert!(bulbasaur["gender_rate"].is_i64());

    let mut checked = 0;
    for (rel, bytes) in read_tree(&out.join("api")) {
        if rel.ends_with(".ndjson.gz") {
            continue; // a bulk-data file: gzip'd records (tests/suite/bulk.rs)
        }
        let mut value: Value = serde_json::from_slice(&bytes).unwrap();
        // the last page under a shrunken limit (`_pages/8/60/` of 68 entries): its previous,
        // by the public API's rule, is not a file of the tree (docs/tree.md, "Page files")
        let parts: Vec<&str> = rel.split('/').collect();
        if let [.., "_pages", limit, offset, _] = parts[..]
            && let (Ok(limit), Ok(offset)) = (limit.parse::<u64>(), offset.parse::<u64>())
            && !([20, 50, 100].contains(&limit) && offset % limit == 0)
        {
            assert_eq!(value["next"], Value::Null, "{rel}");
            value["previous"] = Value::Null;
        }
        let mut found = Vec::new();
        strings(&value, &mut found);
        for url in found.iter().filter_map(|s| s.strip_prefix("http://127.0.0.1:8080/")) {
            let file = match url.split_once('?') {
                Some((list, query)) => {
                    let get = |key: &str| query.split('&').find_map(|p| p.strip_prefix(key)).map(|v| v.to_string());
                    // a filter's condition (`type=fire`): its value's list, in the folders
                    // docs/tree.md names (the default data's values need no percent-decoding)
                    let condition = query.split('&').find(|p| !p.starts_with("limit=") && !p.starts_with("offset="));
                    let list = match condition.and_then(|c| c.split_once('=')) {
                        Some((name, value)) => {
                            format!("{list}_filters/{}/{}/", filter_folder(name), filter_folder(value))
                        }
                        None => list.to_string(),
                    };
                    match (get("limit="), get("offset=")) {
                        (Some(limit), Some(offset)) => out.join(format!("{list}_pages/{limit}/{offset}/index.json")),
                        _ => out.join(format!("{list}index.json")),
                    }
                }
                None if url.ends_with(".ndjson.gz") => out.join(url),
                None => out.join(url).join("index.json"),
            };
            assert!(file.is_file(), "{rel}: {url} does not resolve");
            checked += 1;
        }
    }
    assert!(checked > 5000, "{checked}");
}
