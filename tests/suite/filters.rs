//! Declared filters (`?FIELD=VALUE`, `gen.json`'s `filters`): the files the build writes for
//! them, `gen serve` answering them, `gen check` and the build refusing declarations that cannot
//! work. Expected answers are derived from the records written here (a direct scan of their
//! values, the paging rules), not from the server's output.

use crate::common;
use crate::parity;
use crate::serve_support;

use common::*;
use serde_json::{Value, json};
use serve_support::{BASE, Server};
use std::path::Path;

/// A record: (id, name, types, generation, is_baby).
type Creature<'a> = (i64, &'a str, &'a [&'a str], &'a str, bool);

const CREATURES: &[Creature] = &[
    (1, "bulb-seed", &["grass", "poison"], "generation-i", false),
    (2, "ember-fox", &["fire"], "generation-i", false),
    (3, "ember-cub", &["fire"], "generation-ii", true),
    (4, "sky-fox", &["fire", "flying"], "generation-ii", false),
    (5, "sea-otter", &["water"], "generation-i", true),
    (6, "odd/../one", &["../../manifest.json"], "generation-iii", false),
    (7, "leaf-owl", &["grass", "flying"], "generation-iii", false),
];

const FILTERS: &str = r#"{"creature": {"type": "types[].type.name", "generation": "generation.name", "baby": "is_baby", "form": "form.name"}}"#;

fn write_creatures(data: &Path, creatures: &[Creature], filters: &str) {
    let config = format!(r#"{{"base_url": "{BASE}", "page_sizes": [2], "filters": {filters}}}"#);
    let mut files = vec![("gen.json".to_string(), config)];
    for (id, name, types, generation, baby) in creatures {
        let types: Vec<Value> = types.iter().map(|t| json!({"slot": 1, "type": {"name": t}})).collect();
        // names with characters the data format refuses are left out: the entry is {"url"}
        let name = if name.contains('/') { Value::Null } else { json!(name) };
        // every record takes the form `standard`: its value list has the list's own entries
        let mut record = json!({"id": id, "types": types, "generation": {"name": generation}, "is_baby": baby, "form": {"name": "standard"}});
        if !name.is_null() {
            record["name"] = name;
        }
        files.push((format!("creature/{id}.json"), record.to_string()));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(data, &files);
}

/// The ids that take every `(field, value)` of `conditions`, in list (id) order.
fn scan(creatures: &[Creature], conditions: &[(&str, &str)]) -> Vec<i64> {
    creatures
        .iter()
        .filter(|(_, _, types, generation, baby)| {
            conditions.iter().all(|(field, value)| match *field {
                "type" => types.contains(value),
                "generation" => generation == value,
                "baby" => baby.to_string() == *value,
                "form" => *value == "standard",
                _ => unreachable!(),
            })
        })
        .map(|c| c.0)
        .collect()
}

fn entry(creatures: &[Creature], id: i64) -> Value {
    let name = creatures.iter().find(|c| c.0 == id).unwrap().1;
    let url = format!("{BASE}/api/v2/creature/{id}/");
    if name.contains('/') { json!({"url": url}) } else { json!({"name": name, "url": url}) }
}

fn built(label: &str, creatures: &[Creature]) -> (TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = TempDir::new(label);
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, creatures, FILTERS);
    build(&data, &out, &[]).ok();
    (tmp, data, out)
}

#[test]
fn the_build_writes_a_values_document_and_a_list_per_value_listed_in_the_manifest() {
    let (_tmp, _data, out) = built("filters-files", CREATURES);
    let manifest = read_json(&out.join("manifest.json"));
    let values = read_json(&out.join("api/v2/creature/_filters/type/index.json"));
    assert_eq!(values["name"], "type");
    assert_eq!(values["path"], "types[].type.name");
    let mut expected: Vec<&str> = CREATURES.iter().flat_map(|c| c.2.iter().copied()).collect();
    expected.sort_unstable();
    expected.dedup();
    let listed: Vec<&str> =
        values["results"].as_array().unwrap().iter().map(|v| v["value"].as_str().unwrap()).collect();
    assert_eq!(listed, expected, "every value once, ascending");
    assert_eq!(values["count"], expected.len());
    for result in values["results"].as_array().unwrap() {
        let value = result["value"].as_str().unwrap();
        assert_eq!(result["count"], scan(CREATURES, &[("type", value)]).len(), "{value}");
    }
    // a value list is a list: every page file listed in the manifest, the whole list in `_pages/all`
    let fire = read_json(&out.join("api/v2/creature/_filters/type/fire/_pages/all/index.json"));
    let ids = scan(CREATURES, &[("type", "fire")]);
    assert_eq!(fire["results"], Value::Array(ids.iter().map(|&id| entry(CREATURES, id)).collect()));
    for file in ["api/v2/creature/_filters/type/index.json", "api/v2/creature/_filters/type/fire/_pages/2/2/index.json"]
    {
        assert!(manifest["files"].get(file).is_some(), "{file} is listed");
    }
    // booleans are values `true` and `false`; the field's folder is the encoded name
    let baby = read_json(&out.join("api/v2/creature/_filters/baby/true/_pages/all/index.json"));
    assert_eq!(baby["count"], scan(CREATURES, &[("baby", "true")]).len());
    // a value that reads as a path stays one folder inside the tree
    let odd = out.join("api/v2/creature/_filters/type/_2e_2e_2f_2e_2e_2fmanifest_2ejson/index.json");
    assert_eq!(read_json(&odd)["count"], 1);
    for entry in walk_files(&out) {
        assert!(entry.starts_with(&out), "{}", entry.display());
    }
}

/// Every file under `dir`, recursively.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { out.extend(walk_files(&path)) } else { out.push(path) }
    }
    out
}

#[test]
fn serve_answers_filters_with_the_matching_records_as_a_paged_list() {
    let (_tmp, _data, out) = built("filters-serve", CREATURES);
    let server = Server::start(&out, &[]);
    let cases: &[&[(&str, &str)]] = &[
        &[("type", "fire")],
        &[("type", "grass")],
        &[("generation", "generation-ii")],
        &[("baby", "true")],
        &[("baby", "false")],
        &[("type", "fire"), ("type", "flying")],
        &[("type", "fire"), ("baby", "true")],
        &[("type", "grass"), ("generation", "generation-iii")],
        &[("type", "fire"), ("generation", "generation-iii")],
        &[("type", "ice")],
        &[("type", "../../manifest.json")],
    ];
    for conditions in cases {
        let ids = scan(CREATURES, conditions);
        for (offset, limit) in [(0u64, 20u64), (0, 1), (1, 2), (2, 2), (5, 3)] {
            let query: Vec<String> = conditions.iter().map(|(f, v)| format!("{f}={}", v.replace('/', "%2F"))).collect();
            let target = format!("/api/v2/creature/?{}&offset={offset}&limit={limit}", query.join("&"));
            let page = server.get(&target).expect(200).json();
            assert_eq!(page["count"], ids.len(), "{target}");
            let shown: Vec<Value> =
                ids.iter().skip(offset as usize).take(limit as usize).map(|&id| entry(CREATURES, id)).collect();
            assert_eq!(page["results"], Value::Array(shown), "{target}");
            // links keep the conditions, in the order the filters are declared (by name: baby, form, generation, type)
            let end = offset + limit;
            if end < ids.len() as u64 {
                let next = page["next"].as_str().unwrap();
                assert!(next.starts_with(&format!("{BASE}/api/v2/creature/?offset={end}&limit=")), "{next}");
                for (field, value) in conditions.iter() {
                    assert!(next.contains(&format!("&{field}={}", value.replace('/', "%2F"))), "{next}");
                }
            } else {
                assert_eq!(page["next"], Value::Null, "{target}");
            }
        }
    }
    // one condition alone is the value's list: the file the build wrote, byte for byte
    assert_eq!(
        server.get("/api/v2/creature/?type=fire&limit=2&offset=2").expect(200).body,
        std::fs::read(out.join("api/v2/creature/_filters/type/fire/_pages/2/2/index.json")).unwrap()
    );
    // the order of the parameters does not change the answer
    assert_eq!(
        server.get("/api/v2/creature/?baby=false&type=fire&limit=1").expect(200).body,
        server.get("/api/v2/creature/?limit=1&type=fire&baby=false").expect(200).body
    );
    // with q: the records matching both
    let page = server.get("/api/v2/creature/?type=fire&q=FOX").expect(200).json();
    assert_eq!(page["results"], json!([entry(CREATURES, 2), entry(CREATURES, 4)]));
    // a value every record takes: its list has the list's own entries, and each keeps its links
    for (path, prefix) in [
        ("/api/v2/creature/?form=standard&offset=1&limit=3", "?offset=4&limit=3&form=standard"),
        ("/api/v2/creature/?offset=1&limit=3", "?offset=4&limit=3"),
        ("/api/v2/creature/?form=standard&offset=1&limit=3", "?offset=4&limit=3&form=standard"),
    ] {
        let page = server.get(path).expect(200).json();
        assert_eq!(page["next"], format!("{BASE}/api/v2/creature/{prefix}"), "{path}");
    }
    // an empty value is no condition: the list itself
    assert_eq!(
        server.get("/api/v2/creature/?type=").expect(200).body,
        std::fs::read(out.join("api/v2/creature/index.json")).unwrap()
    );
}

#[test]
fn an_undeclared_parameter_is_a_400_naming_the_declared_filters() {
    let (_tmp, _data, out) = built("filters-400", CREATURES);
    let server = Server::start(&out, &[]);
    for target in [
        "/api/v2/creature/?typo=fire",
        "/api/v2/creature/?type=fire&Type=fire",
        "/api/v2/creature/?types[].type.name=fire",
    ] {
        let body = server.get(target).expect(400).json();
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(r#""baby", "form", "generation", "type""#), "declared, by name: {detail}");
        assert_eq!(body["filters"], json!(["baby", "form", "generation", "type"]), "{body}");
    }
    // the list's own parameters, and format=json, are not filters
    server.get("/api/v2/creature/?limit=2&offset=1&q=e&format=json").expect(200);
    // bad paging is still the paging 400
    assert_eq!(server.get("/api/v2/creature/?type=fire&limit=x").expect(400).json()["parameter"], "limit");
}

#[test]
fn more_than_8_different_conditions_are_a_400_saying_the_bound() {
    let (_tmp, _data, out) = built("filters-bound", CREATURES);
    let server = Server::start(&out, &[]);
    let types = |n: usize| (1..=n).map(|i| format!("type=t{i}")).collect::<Vec<_>>().join("&");
    // 8 conditions, and 8 with one repeated (counted once), are answered
    server.get(&format!("/api/v2/creature/?{}", types(8))).expect(200);
    server.get(&format!("/api/v2/creature/?{}&type=t3&q=e", types(8))).expect(200);
    for target in [format!("/api/v2/creature/?{}", types(9)), format!("/api/v2/creature/?{}", types(497))] {
        let body = server.get(&target).expect(400).json();
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains("more than 8 different filters"), "{detail}");
        assert!(detail.contains("send fewer"), "{detail}");
    }
    // an undeclared parameter is still named first
    assert_eq!(server.get(&format!("/api/v2/creature/?{}&typo=x", types(9))).expect(400).json()["parameter"], "typo");
}

#[test]
fn gen_check_names_gen_json_and_the_path_that_reaches_no_value() {
    let tmp = TempDir::new("filters-check");
    let data = tmp.join("data");
    write_creatures(&data, CREATURES, r#"{"creature": {"type": "types[].type.name", "color": "colour.name"}}"#);
    let run = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1);
    let text = run.stderr();
    let config = data.join("gen.json");
    assert!(text.contains(&format!("{}: $.filters.creature.color:", config.display())), "{text}");
    assert!(text.contains(r#""colour.name" reaches no value in any of the 7 records of creature"#), "{text}");
    assert!(!text.contains("creature.type"), "the good path is not a problem: {text}");
    // the build refuses it too, and leaves the previous tree in place
    let out = tmp.join("out");
    write_creatures(&data, CREATURES, FILTERS);
    build(&data, &out, &[]).ok();
    let before = std::fs::read(out.join("manifest.json")).unwrap();
    write_creatures(&data, CREATURES, r#"{"creature": ["types.type.name"]}"#);
    let failed = build(&data, &out, &[]).fails_with(1);
    assert!(failed.stderr().contains("$.filters.creature[0]"), "{}", failed.stderr());
    assert!(failed.stderr().contains("write [] after a key whose value is an array"), "{}", failed.stderr());
    assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), before);
}

#[test]
fn a_value_too_long_for_a_folder_name_is_a_data_problem_naming_the_record_the_value_and_the_limit() {
    let tmp = TempDir::new("filters-long-value");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    // each upper-case letter is `_xx` in a folder name: 85 make 255 bytes, the most allowed
    let longest = "A".repeat(85);
    let mut creatures = CREATURES.to_vec();
    let types: &[&str] = &["fire", &longest];
    creatures[3].2 = types;
    write_creatures(&data, &creatures, FILTERS);
    run(&["check", "--data", data.to_str().unwrap()]).ok();
    build(&data, &out, &[]).ok();
    let before = std::fs::read(out.join("manifest.json")).unwrap();
    // 86 make 258 bytes: `gen check` and `gen build` say which record, where, the value and the limit
    let too_long = "A".repeat(86);
    let types: &[&str] = &["fire", &too_long];
    creatures[3].2 = types;
    write_creatures(&data, &creatures, FILTERS);
    let checked = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1);
    let built = build(&data, &out, &[]).fails_with(1);
    for text in [checked.stderr(), built.stderr()] {
        let at = format!("{}: $.types[1].type.name: ", data.join("creature/4.json").display());
        assert!(text.contains(&at), "{text}");
        assert!(text.contains(&format!("the value {:?}", &too_long[..60])), "{text}");
        assert!(text.contains("\"type\" makes a folder name of 258 bytes"), "{text}");
        assert!(text.contains("a folder name is at most 255 bytes"), "{text}");
        assert!(!text.contains(".staging") && !text.contains("os error"), "{text}");
    }
    assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), before, "the previous tree is left as it was");
}

#[test]
fn a_filter_of_more_values_than_max_filter_values_is_a_data_problem_saying_how_to_raise_it() {
    let tmp = TempDir::new("filters-many-values");
    let data = tmp.join("data");
    let write = |settings: &str, tags: usize| {
        let record = json!({"id": 1, "tags": (0..tags).map(|i| format!("t{i}")).collect::<Vec<_>>()});
        let config = format!(r#"{{"filters": {{"creature": {{"tag": "tags[]"}}}}{settings}}}"#);
        write_files(&data, &[("gen.json", config), ("creature/1.json", record.to_string())]);
    };
    // the default bound: 10,000 values pass, 10,001 are a problem of gen.json's filter
    write(", \"max_filter_values\": 10000", 10_000);
    run(&["check", "--data", data.to_str().unwrap()]).ok();
    write("", 10_001);
    let text = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1).stderr();
    assert!(text.contains(&format!("{}: $.filters.creature.tag: ", data.join("gen.json").display())), "{text}");
    assert!(text.contains("\"tag\" of creature takes 10001 values, more than the 10000 allowed"), "{text}");
    assert!(text.contains(&format!("{} gives it 10001", data.join("creature/1.json").display())), "{text}");
    assert!(text.contains("raise \"max_filter_values\" in gen.json"), "{text}");
    let failed = build(&data, &tmp.join("out"), &[]).fails_with(1);
    assert!(failed.stderr().contains("more than the 10000 allowed"), "{}", failed.stderr());
    assert!(!tmp.join("out").join("api").exists(), "nothing is written");
    // raised, the same data passes; lowered, fewer values are refused
    write(", \"max_filter_values\": 20000", 10_001);
    run(&["check", "--data", data.to_str().unwrap()]).ok();
    write(", \"max_filter_values\": 3", 4);
    let text = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1).stderr();
    assert!(text.contains("takes 4 values, more than the 3 allowed"), "{text}");
}

#[test]
fn gen_json_refuses_filters_that_cannot_work_saying_where() {
    let tmp = TempDir::new("filters-config");
    let data = tmp.join("data");
    for (filters, location, says) in [
        (r#"{"creature": {"q": "name"}}"#, "$.filters.creature.q", "is a parameter of every list"),
        (r#"{"creature": {"limit": "name"}}"#, "$.filters.creature.limit", "is a parameter of every list"),
        (r#"{"creature": {"Type": "name"}}"#, "$.filters.creature.Type", "is not a filter name"),
        (r#"{"creature": ["types[0].name"]}"#, "$.filters.creature[0]", "keys joined by '.'"),
        (r#"{"creature": ["a..b"]}"#, "$.filters.creature[0]", "keys joined by '.'"),
        (r#"{"creature": "type"}"#, "$.filters", "declared per resource"),
        (r#"{"no-such": ["name"]}"#, r#"$.filters["no-such"]"#, "which the data has no folder of"),
    ] {
        write_creatures(&data, CREATURES, filters);
        let run = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1);
        let text = run.stderr();
        assert!(text.contains(location) && text.contains(says), "{filters}: {text}");
        assert!(text.contains("gen.json"), "{filters}: {text}");
    }
}

#[test]
fn a_changed_added_or_removed_record_changes_the_next_builds_answers() {
    let (_tmp, data, out) = built("filters-rebuild", CREATURES);
    let mut edited: Vec<Creature> = CREATURES.to_vec();
    edited[1] = (2, "ember-fox", &["water"], "generation-i", false); // a value changes
    edited.remove(2); // removed
    edited.push((8, "frost-fox", &["ice", "fire"], "generation-iv", true)); // added
    edited.retain(|c| c.0 != 6); // the one record with its type
    std::fs::remove_dir_all(&data).unwrap();
    write_creatures(&data, &edited, FILTERS);
    build(&data, &out, &[]).ok();
    let server = Server::start(&out, &[]);
    for conditions in [
        &[("type", "fire")][..],
        &[("type", "water")],
        &[("type", "ice")],
        &[("baby", "true")],
        &[("generation", "generation-ii")],
    ] {
        let ids = scan(&edited, conditions);
        let query: Vec<String> = conditions.iter().map(|(f, v)| format!("{f}={v}")).collect();
        let page = server.get(&format!("/api/v2/creature/?{}&limit=100", query.join("&"))).expect(200).json();
        assert_eq!(page["results"], Value::Array(ids.iter().map(|&id| entry(&edited, id)).collect()), "{query:?}");
    }
    assert!(
        out.join("api/v2/creature/_filters/generation/generation-iv/index.json").is_file(),
        "the added value's list"
    );
    let gone = out.join("api/v2/creature/_filters/type/_2e_2e_2f_2e_2e_2fmanifest_2ejson");
    assert!(!gone.exists(), "the list of a value no record takes any more is removed");
}

#[test]
fn under_serve_watch_an_edited_value_is_found_under_its_new_value() {
    let tmp = TempDir::new("filters-watch");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES, FILTERS);
    let server = Server::start_preview(&out, &["--quiet", "--watch", "--data", data.to_str().unwrap()]);
    let count = |q: &str| server.get(&format!("/api/v2/creature/?{q}")).expect(200).json()["count"].as_u64();
    assert_eq!(count("type=water"), Some(1));
    assert_eq!(count("type=ice"), Some(0));
    let mut edited: Vec<Creature> = CREATURES.to_vec();
    edited[4] = (5, "sea-otter", &["ice", "water"], "generation-i", true);
    write_creatures(&data, &edited, FILTERS);
    assert!(
        serve_support::eventually(std::time::Duration::from_secs(30), || count("type=ice") == Some(1)),
        "the rebuilt tree's value list is served"
    );
    assert_eq!(count("type=ice&type=water"), Some(1));
}

#[test]
fn filters_on_the_published_fixture_equal_a_scan_of_the_data() {
    let Some((tmp, data)) = parity::fixture_data("filters-fixture") else { return };
    parity::declare_fixture_filters(&data);
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let config = read_json(&data.join("gen.json"));
    let server = Server::start(&out, &[]);
    let root = server.get("/api/v2/").expect(200).json();
    let (segment, url) = root.as_object().unwrap().iter().next().unwrap();
    let base = url.as_str().unwrap().strip_suffix(&format!("/api/v2/{segment}/")).unwrap().to_string();
    let lists = parity::expected_lists(&data, &base);
    let mut rng = Rng(seed("filters-fixture", 0x0f11_7e25));
    // (segment, parameter, path)
    let mut declared: Vec<(String, String, String)> = Vec::new();
    for (segment, fields) in config["filters"].as_object().unwrap() {
        match fields {
            Value::Array(paths) => declared.extend(
                paths.iter().map(|p| (segment.clone(), p.as_str().unwrap().into(), p.as_str().unwrap().into())),
            ),
            Value::Object(named) => declared
                .extend(named.iter().map(|(n, p)| (segment.clone(), n.clone(), p.as_str().unwrap().to_string()))),
            _ => unreachable!(),
        }
    }
    // the value a record takes at a path of keys with optional [] (a direct reading of the JSON)
    fn values_at(record: &Value, path: &str) -> Vec<String> {
        let mut reached = vec![record.clone()];
        for step in path.split('.') {
            let key = step.trim_end_matches("[]");
            reached = reached.iter().filter_map(|v| v.get(key).cloned()).collect();
            if step.ends_with("[]") {
                reached = reached.iter().filter_map(|v| v.as_array().cloned()).flatten().collect();
            }
        }
        reached
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Bool(b) => Some(b.to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect()
    }
    for _ in 0..200 {
        let (segment, name, path) = rng.pick(&declared).clone();
        let list = &lists[&segment];
        let records: Vec<Value> = list
            .iter()
            .map(|entry| {
                let id = entry["url"].as_str().unwrap().trim_end_matches('/').rsplit('/').next().unwrap().to_string();
                read_json(&data.join(&segment).join(format!("{id}.json")))
            })
            .collect();
        let record = rng.pick(&records);
        let values = values_at(record, &path);
        let Some(value) = values.first().cloned() else { continue };
        let matched: Vec<usize> =
            (0..records.len()).filter(|&i| values_at(&records[i], &path).contains(&value)).collect();
        let limit = 1 + rng.below(30) as u64;
        let offset = rng.below(matched.len() + 3) as u64;
        let encoded = query_escape(&value);
        let target = format!("/api/v2/{segment}/?{name}={encoded}&limit={limit}&offset={offset}");
        let page = server.get(&target).expect(200).json();
        assert_eq!(page["count"], matched.len(), "{target}");
        let expected: Vec<Value> =
            matched.iter().skip(offset as usize).take(limit as usize).map(|&i| list[i].clone()).collect();
        assert_eq!(page["results"], Value::Array(expected), "{target}");
    }
}

#[test]
fn the_html_view_of_a_list_links_each_value_with_its_count() {
    let (_tmp, _data, out) = built("filters-html", CREATURES);
    let server = Server::start(&out, &[]);
    let browser = ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
    let page = server.request("GET", "/api/v2/creature/", &[browser]).expect(200).text();
    let fire = scan(CREATURES, &[("type", "fire")]).len();
    let counted =
        format!(r#"<span class="n" title="records of the whole list with type = fire: {fire}">({fire})</span>"#);
    assert!(page.contains(&format!(r#"<a href="/api/v2/creature/?type=fire">fire</a>&nbsp;{counted}"#)), "{page}");
    assert!(page.contains(r#"href="/api/v2/creature/?baby=true""#), "{page}");
    // a value that needs escaping is escaped in the link
    assert!(page.contains(r#"href="/api/v2/creature/?type=..%2F..%2Fmanifest.json""#), "{page}");
    // the link answers in JSON as the filter does
    let json = server.get("/api/v2/creature/?type=fire").expect(200).json();
    assert_eq!(json["count"], fire);
}
