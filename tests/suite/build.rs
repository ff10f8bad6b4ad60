//! `gen build`: the tree it writes, its paging, its determinism and its atomicity.

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const BASE: &str = "http://127.0.0.1:8080";

/// The ids of a sample resource in list order, as the sample data defines them.
fn berry_ids() -> Vec<i64> {
    (1..=120).chain(1001..=1017).collect()
}

#[test]
fn writes_root_records_names_lists_and_meta() {
    let tmp = TempDir::new("layout");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    let run = build(&tmp.join("data"), &out, &[]).ok();
    assert!(run.stdout().contains("built 6 resources, 155 records"), "{}", run.stdout());

    let root = read_json(&out.join("api/v2/index.json"));
    // the resources only: meta names the bulk-data index (tests/suite/bulk.rs)
    let expected: serde_json::Map<String, Value> = ["ailment", "berry", "creature", "effect", "firmness", "form"]
        .iter()
        .map(|s| (s.to_string(), Value::String(format!("{BASE}/api/v2/{s}/"))))
        .collect();
    assert_eq!(root, Value::Object(expected));

    // a record by id and by name: same bytes, urls absolute, other values as written
    let by_id = std::fs::read(out.join("api/v2/berry/7/index.json")).unwrap();
    let by_name = std::fs::read(out.join("api/v2/berry/berry-7/index.json")).unwrap();
    assert_eq!(by_id, by_name);
    let text = String::from_utf8(by_id).unwrap();
    assert!(text.contains(r#""size":7.5"#), "{text}");
    let record: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["firmness"]["url"], format!("{BASE}/api/v2/firmness/3/"));
    assert_eq!(record["item"]["url"], format!("{BASE}/api/v2/item/7/"));
    // Unicode is kept as is
    let firmness = std::fs::read_to_string(out.join("api/v2/firmness/1/index.json")).unwrap();
    assert!(firmness.contains("Fest 1 ü"), "{firmness}");

    // ids 0 and -1, nameless records
    assert!(out.join("api/v2/ailment/-1/index.json").is_file());
    assert!(out.join("api/v2/ailment/0/index.json").is_file());
    assert!(out.join("api/v2/ailment/ailment0/index.json").is_file());
    assert!(out.join("api/v2/effect/2/index.json").is_file());

    // sub-documents by id and by name, urls rewritten everywhere
    let creature = read_json(&out.join("api/v2/creature/7/index.json"));
    assert_eq!(creature["encounters"], format!("{BASE}/api/v2/creature/7/encounters"));
    for key in ["7", "squirt"] {
        let sub = read_json(&out.join(format!("api/v2/creature/{key}/encounters/index.json")));
        assert_eq!(sub[0]["area"]["url"], format!("{BASE}/api/v2/ailment/0/"));
    }

    // the list root is the first page
    let list = read_json(&out.join("api/v2/berry/index.json"));
    assert_eq!(list["count"], 137);
    assert_eq!(list["next"], format!("{BASE}/api/v2/berry/?offset=20&limit=20"));
    assert_eq!(list["previous"], Value::Null);
    let results = list["results"].as_array().unwrap();
    assert_eq!(results.len(), 20);
    assert_eq!(results[0], serde_json::json!({"name": "berry-1", "url": format!("{BASE}/api/v2/berry/1/")}));
    // nameless entries are {"url"} only
    let effects = read_json(&out.join("api/v2/effect/index.json"));
    assert_eq!(effects["results"][0], serde_json::json!({"url": format!("{BASE}/api/v2/effect/1/")}));
    // stated order
    let forms = read_json(&out.join("api/v2/form/index.json"));
    let ids: Vec<&str> = forms["results"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(ids, ["form-1", "form-10001", "form-2", "form-10002", "form-3"]);
    // id order with negative ids first
    let ailments = read_json(&out.join("api/v2/ailment/index.json"));
    assert_eq!(ailments["results"][0]["url"], format!("{BASE}/api/v2/ailment/-1/"));

    let meta = read_json(&out.join("api/v2/meta/index.json"));
    assert_eq!(meta["generator"], format!("gen {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(meta["data_hash"].as_str().unwrap().len(), 64);
    let manifest = read_json(&out.join("manifest.json"));
    assert_eq!(manifest["resources"]["berry"]["count"], 137);
    assert_eq!(manifest["base_url"], BASE);
}

/// Maps a link to the page file that answers it, as `gen serve` and host configs do; a filter's
/// condition (`&firmness=firm-1`) to the page file of its value's list.
fn page_file(out: &Path, link: &str) -> std::path::PathBuf {
    let rest = link.strip_prefix(BASE).unwrap().trim_start_matches('/');
    if let Some((list, query)) = rest.split_once('?') {
        let (mut offset, mut limit) = (None, None);
        let mut folder = list.to_string();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("offset", v)) => offset = Some(v.parse::<u64>().unwrap()),
                Some(("limit", v)) => limit = Some(v.parse::<u64>().unwrap()),
                Some((name, value)) if folder == list => {
                    // the sample data's filter values need no percent-decoding
                    assert!(!value.contains('%') && !name.contains('%'), "{query}");
                    folder = format!("{list}_filters/{}/{}/", filter_folder(name), filter_folder(value));
                }
                _ => panic!("unexpected query {query}"),
            }
        }
        match (limit, offset) {
            (Some(limit), Some(offset)) => out.join(format!("{folder}_pages/{limit}/{offset}/index.json")),
            // a values document's `url`: the first page
            (None, None) => out.join(format!("{folder}index.json")),
            _ => panic!("a link names both limit and offset, or neither: {link}"),
        }
    } else if rest.ends_with(".ndjson.gz") {
        out.join(rest) // a bulk-data file: a file of its own
    } else {
        out.join(rest).join("index.json")
    }
}

/// True when `file` is an aligned page of one of `sizes` (`_pages/L/O/index.json` with `L` a
/// page size and `O` a multiple of it), or a list's root: a page whose `previous`, in either
/// links style, names a page file of the tree. The other page files are the last pages under a
/// shrunken limit (query links), whose `previous` (by the public API's rule) is not a file.
fn is_aligned_page_file(file: &Path, sizes: &[u64]) -> bool {
    let parts: Vec<String> = file.iter().map(|p| p.to_string_lossy().to_string()).collect();
    match parts.as_slice() {
        [.., pages, limit, offset, _] if pages == "_pages" => {
            let (limit, offset): (u64, u64) = (limit.parse().unwrap(), offset.parse().unwrap());
            sizes.contains(&limit) && offset % limit == 0
        }
        _ => true,
    }
}

fn full_list(out: &Path, segment: &str) -> Vec<Value> {
    let all = read_json(&out.join(format!("api/v2/{segment}/_pages/all/index.json")));
    assert_eq!(all["next"], Value::Null);
    all["results"].as_array().unwrap().clone()
}

#[test]
fn following_next_from_every_page_size_walks_the_whole_list() {
    for links in ["query", "path"] {
        let tmp = TempDir::new("walk");
        sample_data(&tmp.join("data"));
        let out = tmp.join("out");
        build(&tmp.join("data"), &out, &["--links", links]).ok();
        let berries = full_list(&out, "berry");
        let expected: Vec<String> = berry_ids().iter().map(|id| format!("{BASE}/api/v2/berry/{id}/")).collect();
        let urls: Vec<&str> = berries.iter().map(|e| e["url"].as_str().unwrap()).collect();
        assert_eq!(urls, expected);
        for segment in ["ailment", "berry", "creature", "effect", "firmness", "form"] {
            let all = full_list(&out, segment);
            for size in [20u64, 50, 100] {
                let mut path = if size == 20 {
                    out.join(format!("api/v2/{segment}/index.json"))
                } else {
                    out.join(format!("api/v2/{segment}/_pages/{size}/0/index.json"))
                };
                let mut walked = Vec::new();
                let mut seen = BTreeSet::new();
                loop {
                    assert!(seen.insert(path.clone()), "{links}: loop at {}", path.display());
                    let page = read_json(&path);
                    assert_eq!(page["count"], all.len());
                    walked.extend(page["results"].as_array().unwrap().iter().cloned());
                    // previous resolves to a file too, except (query links) from the last page
                    // when its limit shrank: the public API's previous of it is not aligned
                    if let Some(previous) = page["previous"].as_str() {
                        if links == "path" {
                            assert!(previous.contains("/_pages/"), "{previous}");
                        }
                        let shrunken = page["next"].is_null() && !is_aligned_page_file(&path, &[20, 50, 100]);
                        assert!(
                            page_file(&out, previous).is_file() || (links == "query" && shrunken),
                            "{links}: previous {previous} of {}",
                            path.display()
                        );
                    }
                    match page["next"].as_str() {
                        Some(next) => path = page_file(&out, next),
                        None => break,
                    }
                }
                assert_eq!(walked, all, "{links} {segment} size {size}");
            }
        }
    }
}

#[test]
fn pages_follow_the_paging_rules() {
    let tmp = TempDir::new("rules");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    build(&tmp.join("data"), &out, &[]).ok();
    let all = full_list(&out, "berry");
    let count = all.len() as u64;
    for entry in walkdir::WalkDir::new(out.join("api/v2/berry/_pages")) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(out.join("api/v2/berry/_pages")).unwrap().to_string_lossy().to_string();
        let parts: Vec<&str> = rel.split('/').collect();
        if parts.len() != 3 {
            continue;
        }
        let (limit, offset): (u64, u64) = (parts[0].parse().unwrap(), parts[1].parse().unwrap());
        let page = read_json(entry.path());
        let end = (offset + limit).min(count);
        assert_eq!(page["results"].as_array().unwrap()[..], all[offset as usize..end as usize], "{rel}");
        let next = (count > offset + limit).then(|| {
            format!("{BASE}/api/v2/berry/?offset={}&limit={}", offset + limit, limit.min(count - offset - limit))
        });
        let previous = (offset > 0).then(|| {
            format!("{BASE}/api/v2/berry/?offset={}&limit={}", offset.saturating_sub(limit), limit.min(offset))
        });
        assert_eq!(page["next"].as_str().map(str::to_string), next, "{rel}");
        assert_eq!(page["previous"].as_str().map(str::to_string), previous, "{rel}");
    }
    // the last page of size 20 shrinks: 137 = 6 * 20 + 17
    let page = read_json(&out.join("api/v2/berry/_pages/20/100/index.json"));
    assert_eq!(page["next"], format!("{BASE}/api/v2/berry/?offset=120&limit=17"));
}

/// Collects every string that starts with the base URL.
fn urls_in(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::String(s) if s.starts_with(BASE) => found.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| urls_in(v, found)),
        Value::Object(map) => map.values().for_each(|v| urls_in(v, found)),
        _ => {}
    }
}

#[test]
fn every_url_in_the_tree_resolves_to_a_file_of_the_tree() {
    for links in ["query", "path"] {
        let tmp = TempDir::new("urls");
        sample_data(&tmp.join("data"));
        let out = tmp.join("out");
        build(&tmp.join("data"), &out, &["--links", links]).ok();
        let mut checked = 0;
        for (rel, bytes) in read_tree(&out.join("api")) {
            if rel == "v2/openapi.json" || rel.ends_with(".ndjson.gz") {
                // openapi.json holds the base URL as a server and path templates, tested on its
                // own; a bulk-data file is gzip'd records (tests/suite/bulk.rs)
                continue;
            }
            let mut value: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{rel}: {e}"));
            if links == "query" && !is_aligned_page_file(&out.join("api").join(&rel), &[20, 50, 100]) {
                // the last page under a shrunken limit: its previous is not a file, by design
                // (see following_next_from_every_page_size_walks_the_whole_list)
                assert_eq!(value["next"], Value::Null, "{rel}");
                value["previous"] = Value::Null;
            }
            let mut urls = Vec::new();
            urls_in(&value, &mut urls);
            for url in urls {
                if url.contains("/api/v2/item/") {
                    continue; // declared external
                }
                let file = page_file(&out, &url);
                assert!(file.is_file(), "{rel}: {url} does not resolve ({})", file.display());
                checked += 1;
            }
        }
        assert!(checked > 1000, "only {checked} urls checked");
    }
}

#[test]
fn same_data_and_options_give_the_same_bytes() {
    let tmp = TempDir::new("determinism");
    sample_data(&tmp.join("data"));
    build(&tmp.join("data"), &tmp.join("a"), &[]).ok();
    build(&tmp.join("data"), &tmp.join("b"), &[]).ok();
    let a = read_tree(&tmp.join("a"));
    assert!(a.len() > 300);
    assert_eq!(a, read_tree(&tmp.join("b")));
    // other options give other bytes, but the same files
    build(&tmp.join("data"), &tmp.join("c"), &["--pretty", "--base-url", "https://example.org"]).ok();
    let c = read_tree(&tmp.join("c"));
    // (a bulk-data file's name is its bytes' hash: the urls in it differ)
    fn documents(tree: &BTreeMap<String, Vec<u8>>) -> Vec<&str> {
        tree.keys().map(|k| if k.ends_with(".ndjson.gz") { &k[..k.len() - 27] } else { k.as_str() }).collect()
    }
    assert_eq!(documents(&a), documents(&c));
    let record = std::fs::read_to_string(tmp.join("c/api/v2/berry/1/index.json")).unwrap();
    assert!(record.starts_with("{\n  \""), "{record}");
    assert!(record.contains("https://example.org/api/v2/firmness/2/"));
    // pretty pages are the same JSON as compact ones, links aside
    let compact = read_json(&tmp.join("a/api/v2/berry/_pages/50/50/index.json"));
    let pretty = read_json(&tmp.join("c/api/v2/berry/_pages/50/50/index.json"));
    assert_eq!(compact.to_string().replace(BASE, "https://example.org"), pretty.to_string());
    // SOURCE_DATE_EPOCH sets the date, reproducibly
    for out in ["d", "e"] {
        let status = gen_bin()
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .args(["build", "--quiet", "--data"])
            .arg(tmp.join("data"))
            .arg("--out")
            .arg(tmp.join(out))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let meta = read_json(&tmp.join("d/api/v2/meta/index.json"));
    assert_eq!(meta["built_at"], "2023-11-14T22:13:20Z");
    assert_eq!(read_tree(&tmp.join("d")), read_tree(&tmp.join("e")));
}

fn mtimes(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    read_tree(dir)
        .keys()
        .map(|rel| (rel.clone(), std::fs::metadata(dir.join(rel)).unwrap().modified().unwrap()))
        .collect()
}

#[test]
fn rebuild_rewrites_only_changed_files() {
    let tmp = TempDir::new("rebuild");
    let data = tmp.join("data");
    sample_data(&data);
    let out = tmp.join("out");
    build(&data, &out, &["--gzip"]).ok();
    let before = mtimes(&out);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let run = build(&data, &out, &["--gzip"]).ok();
    assert!(run.stdout().contains("(0 written)"), "{}", run.stdout());
    assert_eq!(mtimes(&out), before);

    // change one record: only its two paths (and .gz siblings), the meta and the manifest change,
    // and of the files of the declared filters only those its new value touches: the values
    // document of `size` and the new value's list (the old value's list, of this record alone,
    // is removed)
    let old = read_tree(&out);
    // (same shape, so the inferred schemas and the OpenAPI document stay as they were)
    let mut record = read_json(&data.join("berry/3.json"));
    record["size"] = serde_json::json!(99.25);
    std::fs::write(data.join("berry/3.json"), record.to_string()).unwrap();
    build(&data, &out, &["--gzip"]).ok();
    let new = read_tree(&out);
    let changed: BTreeSet<&str> = new.iter().filter(|(k, v)| old.get(*k) != Some(v)).map(|(k, _)| k.as_str()).collect();
    let value_list = |file: &str| format!("api/v2/berry/_filters/size/{}/{file}", filter_folder("99.25"));
    let mut expected: BTreeSet<String> = [
        "api/v2/berry/3/index.json",
        "api/v2/berry/berry-3/index.json",
        "api/v2/meta/index.json",
        "api/v2/berry/_filters/size/index.json",
        "api/v2/bulk-data/index.json",
    ]
    .map(String::from)
    .into();
    // a list of one: its first page and `all`, the two paths of its one page file
    for page in ["", "_pages/all/"] {
        expected.insert(value_list(&format!("{page}index.json")));
    }
    let expected: BTreeSet<String> =
        expected.into_iter().flat_map(|f| [format!("{f}.gz"), f]).chain(["manifest.json".to_string()]).collect();
    let mut expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    // berry's new bulk-data file (no .gz sibling: it is gzip), tests/suite/bulk.rs
    let bulk = changed.iter().find(|f| f.starts_with("api/v2/bulk-data/berry-")).copied();
    expected.extend(bulk.filter(|f| f.ends_with(".ndjson.gz") && !old.contains_key(*f)));
    assert_eq!(changed, expected);
    assert!(!out.join(format!("api/v2/berry/_filters/size/{}", filter_folder("3.5"))).exists(), "the old value's list");
    let after = mtimes(&out);
    let before: std::collections::BTreeMap<&String, _> = before.iter().map(|(rel, t)| (rel, t)).collect();
    for (rel, b) in &after {
        let unchanged = before.get(rel) == Some(&b);
        assert_eq!(unchanged, !expected.contains(rel.as_str()), "{rel}");
    }
    // .gz siblings decompress to their documents
    let gz = std::fs::read(out.join("api/v2/berry/3/index.json.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
    assert_eq!(text.as_bytes(), std::fs::read(out.join("api/v2/berry/3/index.json")).unwrap());
}

#[test]
fn failed_build_leaves_the_previous_tree_untouched() {
    let tmp = TempDir::new("atomic");
    let data = tmp.join("data");
    sample_data(&data);
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let before = read_tree(&out);
    // a dangling reference is only found while rendering, after writing has begun
    std::fs::write(
        data.join("berry/50.json"),
        r#"{"id": 50, "name": "berry-50", "firmness": {"name": "firm-9", "url": "/api/v2/firmness/9/"}}"#,
    )
    .unwrap();
    let run = build(&data, &out, &[]).fails_with(1);
    assert!(run.stderr().contains("berry/50.json: $.firmness.url:"), "{}", run.stderr());
    assert_eq!(read_tree(&out), before);
    // beside out/: the data, and the state folder of out/ (its index, kept extracts, bulk members)
    let mut siblings: Vec<String> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    siblings.sort();
    assert_eq!(siblings, [".out.gen", "data", "out"], "stray files beside out/");
}

#[test]
fn leftovers_of_a_killed_build_are_removed() {
    let tmp = TempDir::new("leftovers");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    build(&tmp.join("data"), &out, &[]).ok();
    // what a killed build leaves: a staging folder of a process that no longer exists
    let stale = tmp.join(".out.gen-staging-4000000");
    std::fs::create_dir_all(stale.join("api/v2")).unwrap();
    std::fs::write(stale.join("api/v2/index.json"), "{}").unwrap();
    build(&tmp.join("data"), &out, &[]).ok();
    assert!(!stale.exists());
}

#[test]
fn refuses_to_replace_a_folder_gen_did_not_write() {
    let tmp = TempDir::new("refuse");
    sample_data(&tmp.join("data"));
    let precious = tmp.join("precious");
    std::fs::create_dir_all(&precious).unwrap();
    std::fs::write(precious.join("thesis.txt"), "years of work").unwrap();
    let run = build(&tmp.join("data"), &precious, &[]).fails_with(2);
    assert!(run.stderr().contains("refusing to replace"), "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(precious.join("thesis.txt")).unwrap(), "years of work");
}

/// Makes `dir` read-only for everyone, root included: the immutable attribute where the file
/// system has it (root ignores permission bits), else the permission bits. Returns false when
/// neither holds for the current user.
fn make_read_only(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let immutable = std::process::Command::new("chattr").arg("+i").arg(dir).status().is_ok_and(|s| s.success());
    if !immutable {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let probe = dir.join("probe");
    if std::fs::write(&probe, "").is_ok() {
        let _ = std::fs::remove_file(probe);
        undo_read_only(dir);
        return false;
    }
    true
}

fn undo_read_only(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::process::Command::new("chattr").arg("-i").arg(dir).status();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn read_only_output_folder_keeps_the_old_tree() {
    let tmp = TempDir::new("readonly");
    sample_data(&tmp.join("data"));
    let site = tmp.join("site");
    let out = site.join("out");
    build(&tmp.join("data"), &out, &[]).ok();
    let before = read_tree(&out);
    std::fs::write(tmp.join("data/berry/1.json"), r#"{"id": 1, "name": "berry-1"}"#).unwrap();
    if !make_read_only(&site) {
        eprintln!("skipped: cannot make a folder read-only here (no chattr, and root ignores permissions)");
        return;
    }
    let run = build(&tmp.join("data"), &out, &[]);
    undo_read_only(&site);
    let run = run.fails_with(2);
    assert!(run.stderr().contains("cannot stage the new tree beside the output folder"), "{}", run.stderr());
    assert!(run.stderr().contains(&site.display().to_string()), "{}", run.stderr());
    assert_eq!(read_tree(&out), before);
}

/// Issue 34, item 16: numbers are copied as written: serde_json wrote `1e5` as `1e+5` and
/// `1.50E-3` as `1.50e-3`.
#[test]
fn numbers_are_copied_byte_for_byte_as_written() {
    let tmp = TempDir::new("numbers-as-written");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let numbers = "[1e5,1.50E-3,2E+7,-0,-0.0,1.0,0.5e-0,12345678901234567890123,-9223372036854775809,7]";
    let record = format!(r#"{{"id": 1, "name": "one", "numbers": {numbers}, "nested": {{"at": [{{"x": 6.02E23}}]}}}}"#);
    let config = r#"{"filters": {"thing": {"x": "nested.at[].x"}}}"#.to_string();
    write_files(&data, &[("gen.json", config), ("thing/1.json", record)]);
    build(&data, &out, &[]).ok();
    let document = std::fs::read_to_string(out.join("api/v2/thing/1/index.json")).unwrap();
    assert!(document.contains(&format!(r#""numbers":{numbers}"#)), "{document}");
    assert!(document.contains(r#"{"x":6.02E23}"#), "{document}");
    // a filter's value is the number's text as written
    let values = read_json(&out.join("api/v2/thing/_filters/x/index.json"));
    assert_eq!(values["results"][0]["value"], "6.02E23", "{values}");
    // pretty, the same texts
    build(&data, &out, &["--pretty"]).ok();
    let document = std::fs::read_to_string(out.join("api/v2/thing/1/index.json")).unwrap();
    for text in ["1e5,", "1.50E-3,", "2E+7,", "0.5e-0,", "\"x\": 6.02E23"] {
        assert!(document.contains(text), "{text} in {document}");
    }
}

/// Issue 47 item 5: a sub-document written as a line of a sub-document table is read as its
/// file is, numbers as written: serde_json read the line, and wrote `1e5` as `1e+5`, `1.50E-3`
/// as `1.50e-3`, and a document that is the bare number `1e5` as `1e+5`. The same documents as
/// files and as lines build the same tree.
#[test]
fn a_sub_document_as_a_table_line_keeps_its_numbers_as_written() {
    let tmp = TempDir::new("table-numbers");
    let (files, tables) = (tmp.join("files"), tmp.join("tables"));
    let documents =
        [(1, "{\"n\": [1e5, 1.50E-3, 2E+7, -0.0, 0.5e-0], \"at\": {\"x\": 6.02E23}}"), (2, "1e5"), (3, "-1.50E-3")];
    let mut lines = String::new();
    for (id, document) in documents {
        write_files(
            &files,
            &[
                (&format!("thing/{id}.json"), format!("{{\"id\": {id}}}")),
                (&format!("thing/{id}/n.json"), document.to_string()),
            ],
        );
        lines += &format!("{{\"id\": {id}, \"document\": {document}}}\n");
    }
    write_files(
        &tables,
        &[("thing.ndjson", "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3}\n".to_string()), ("thing.n.ndjson", lines)],
    );
    let built = |data: &Path, out: &str| {
        build(data, &tmp.join(out), &[]).ok();
        let mut tree = read_tree(&tmp.join(out));
        tree.retain(|path, _| {
            !path.starts_with(".gen") && path != "manifest.json" && !path.starts_with("api/v2/meta/")
        });
        tree
    };
    let (from_files, from_tables) = (built(&files, "out-files"), built(&tables, "out-tables"));
    let document = |tree: &BTreeMap<String, Vec<u8>>, id: i64| {
        String::from_utf8(tree[&format!("api/v2/thing/{id}/n/index.json")].clone()).unwrap()
    };
    assert_eq!(document(&from_tables, 1), r#"{"at":{"x":6.02E23},"n":[1e5,1.50E-3,2E+7,-0.0,0.5e-0]}"#);
    assert_eq!(document(&from_tables, 2), "1e5");
    assert_eq!(document(&from_tables, 3), "-1.50E-3");
    assert_eq!(from_files.keys().collect::<Vec<_>>(), from_tables.keys().collect::<Vec<_>>());
    for (path, bytes) in &from_files {
        assert!(&from_tables[path] == bytes, "{path} differs");
    }
}

#[test]
fn base_url_is_checked() {
    let tmp = TempDir::new("base");
    sample_data(&tmp.join("data"));
    let run = build(&tmp.join("data"), &tmp.join("out"), &["--base-url", "https://example.org/"]).fails_with(2);
    assert!(run.stderr().contains("must not end with '/'"), "{}", run.stderr());
    assert!(!tmp.join("out").exists());
}

/// A data folder of `n` records whose `size` is `size`, big enough that a build takes a while.
fn sized_data(dir: &Path, n: usize, size: u64) {
    let files: Vec<(String, String)> = (1..=n)
        .map(|id| {
            (
                format!("berry/{id}.json"),
                format!(r#"{{"id": {id}, "name": "berry-{id}", "size": {size}, "notes": "{}"}}"#, "lorem ".repeat(60)),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(dir, &files);
}

/// Every file the manifest of `out` lists has the hash the manifest gives it.
fn consistent(out: &Path) -> bool {
    let manifest = read_json(&out.join("manifest.json"));
    manifest["files"].as_object().unwrap().iter().all(|(path, hash)| {
        std::fs::read(out.join(path)).is_ok_and(|bytes| blake3::hash(&bytes).to_hex().as_str() == hash)
    })
}

/// Issue 16, break 1: build B is paused (SIGSTOP) while it writes; build A of other data into
/// the same folder must not interleave with it. A waits, saying so, and the tree ends whole.
#[test]
fn concurrent_builds_into_one_folder_exclude_each_other() {
    let Some(()) = heavy("it runs long (four builds of 2500 records, one paused)") else { return };
    let tmp = TempDir::new("concurrent");
    let (data0, data_a, data_b) = (tmp.join("data0"), tmp.join("sA"), tmp.join("sB"));
    sized_data(&data0, 2500, 1);
    sized_data(&data_a, 2500, 999);
    sized_data(&data_b, 2500, 2002);
    let out = tmp.join("o");
    build(&data0, &out, &[]).ok();

    // B, paused once it is writing
    let mut b = gen_bin().args(["build", "--quiet", "--data"]).arg(&data_b).arg("--out").arg(&out).spawn().unwrap();
    let staging = tmp.join(&format!(".o.gen-staging-{}", b.id()));
    let started = std::time::Instant::now();
    while !staging.exists() && b.try_wait().unwrap().is_none() && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let pid = b.id().to_string();
    let stop = |signal: &str| std::process::Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(stop("-STOP").success());
    if b.try_wait().unwrap().is_some() {
        eprintln!("skipped: build B finished before it could be paused");
        return;
    }
    // A, while B is paused: it must wait for B, and say so
    let mut a = gen_bin()
        .args(["build", "--quiet", "--data"])
        .arg(&data_a)
        .arg("--out")
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(a.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.contains("waiting: another gen build or import is writing"), "{line}");
    assert!(a.try_wait().unwrap().is_none(), "A finished while B held the folder");
    assert!(stop("-CONT").success());
    assert!(b.wait().unwrap().success());
    assert!(a.wait().unwrap().success());

    // the tree is A's, whole: equal to a fresh build of A's data
    let fresh = tmp.join("fresh");
    build(&data_a, &fresh, &[]).ok();
    assert!(consistent(&out));
    assert!(read_tree(&out) == read_tree(&fresh), "the tree is not a clean build of the last data");
    assert_eq!(read_json(&out.join("api/v2/berry/1/index.json"))["size"], 999);
    assert_eq!(read_json(&out.join("api/v2/berry/2/index.json"))["size"], 999);
}

/// Issue 16, break 2: a folder with a manifest.json of another kind (a web app's) is not ours.
#[test]
fn a_web_apps_folder_is_not_replaced() {
    let tmp = TempDir::new("webapp");
    sample_data(&tmp.join("data"));
    let app = tmp.join("webapp");
    write_files(
        &app,
        &[
            ("manifest.json", r#"{"name": "My App", "start_url": "/", "display": "standalone"}"#.to_string()),
            ("src/app.js", "console.log('hi')".to_string()),
        ],
    );
    let before = read_tree(&app);
    let run = build(&tmp.join("data"), &app, &[]).fails_with(2);
    assert!(run.stderr().contains("refusing to replace"), "{}", run.stderr());
    assert!(run.stderr().contains("manifest.json was not written by gen"), "{}", run.stderr());
    assert_eq!(read_tree(&app), before);
}

/// Issue 16, break 2: files added into a built tree (what deploy targets need) stay through
/// rebuilds of every kind: in part, in full, and without the build index.
#[test]
fn files_added_into_the_tree_are_kept_through_rebuilds() {
    let tmp = TempDir::new("dotfiles");
    let data = tmp.join("data");
    sample_data(&data);
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let added = [
        (".nojekyll", String::new()),
        ("CNAME", "api.example.org\n".to_string()),
        (".git/HEAD", "ref: refs/heads/main\n".to_string()),
        ("api/v2/berry/1001/NOTES.txt", "mine".to_string()),
    ];
    write_files(&out, &added);
    let keeps = |when: &str| {
        for (path, text) in &added {
            assert_eq!(std::fs::read_to_string(out.join(path)).ok().as_deref(), Some(text.as_str()), "{path} {when}");
        }
    };
    // a change (in part), the removal of the record whose folder holds a user's file
    std::fs::write(data.join("berry/3.json"), r#"{"id": 3, "name": "berry-3", "size": 1}"#).unwrap();
    build(&data, &out, &[]).ok();
    keeps("after a change");
    std::fs::remove_file(data.join("berry/1001.json")).unwrap();
    build(&data, &out, &[]).ok();
    keeps("after a removal");
    assert!(!out.join("api/v2/berry/1001/index.json").exists());
    build(&data, &out, &["--pretty"]).ok();
    keeps("after a full rebuild");
    std::fs::remove_file(state_file(&out, "index")).unwrap();
    build(&data, &out, &[]).ok();
    keeps("after a rebuild without the index");
    // and the tree is otherwise a clean build
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    let mut tree = read_tree(&out);
    for (path, _) in &added {
        tree.remove(*path);
    }
    assert!(tree == read_tree(&fresh));
}

/// Issue 16, break 2: a symlinked --out is followed: the folder it points to is updated, and
/// the link stays a link. A link to nowhere is refused.
#[test]
fn a_symlinked_out_is_followed_not_replaced() {
    let tmp = TempDir::new("symlink");
    let data = tmp.join("data");
    sample_data(&data);
    let deployed = tmp.join("deployed");
    std::fs::create_dir_all(&deployed).unwrap();
    let link = tmp.join("out");
    std::os::unix::fs::symlink(&deployed, &link).unwrap();
    build(&data, &link, &[]).ok();
    std::fs::write(data.join("berry/3.json"), r#"{"id": 3, "name": "berry-3", "size": 1}"#).unwrap();
    build(&data, &link, &[]).ok();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&deployed) == read_tree(&fresh), "the folder the link points to is not the new tree");

    let dangling = tmp.join("dangling");
    std::os::unix::fs::symlink(tmp.join("nowhere"), &dangling).unwrap();
    let run = build(&data, &dangling, &[]).fails_with(2);
    assert!(run.stderr().contains("is a symbolic link to a folder that does not exist"), "{}", run.stderr());
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
}

/// Issue 36, item 3: the tree is trusted between builds. A tree file overwritten behind the
/// build's back (its modification time put back) and another removed are not looked at by a
/// plain build, which finds the tree up to date and leaves both as they are; `gen build
/// --verify` reads every file and repairs both, and the next plain build is up to date.
#[test]
fn a_tree_changed_behind_the_builds_back_is_trusted_by_a_plain_build_and_repaired_by_verify() {
    let tmp = TempDir::new("tampered");
    let data = tmp.join("data");
    sample_data(&data);
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let clean = read_tree(&out);
    let file = out.join("api/v2/berry/5/index.json");
    let removed = out.join("api/v2/berry/3/index.json");
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 2;
    bytes[last] = if bytes[last] == b'1' { b'2' } else { b'1' };
    std::fs::write(&file, &bytes).unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
    std::fs::remove_file(&removed).unwrap();
    let damaged = read_tree(&out);

    let plain = build(&data, &out, &[]).ok();
    assert!(plain.stdout().contains("up to date"), "{}", plain.stdout());
    assert!(read_tree(&out) == damaged, "a plain build looked at the tree and changed it");
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "the overwritten file stays overwritten");
    assert!(!removed.exists(), "the removed file stays removed");

    let verified = build(&data, &out, &["--verify"]).ok();
    assert!(!verified.stdout().contains("up to date"), "{}", verified.stdout());
    assert!(read_tree(&out) == clean, "--verify did not repair the tree");
    assert!(build(&data, &out, &[]).ok().stdout().contains("up to date"));
}

/// Issue 16, break 1, for imports: an import into a data folder that another import is
/// writing waits for it, saying so, and the folder ends whole.
#[test]
fn imports_into_one_folder_exclude_each_other() {
    let Some(fixture) = fixture() else { return };
    let tmp = TempDir::new("import-lock");
    let data = tmp.join("data");
    let mut first = gen_bin().args(["import", "api-data"]).arg(&fixture).arg("--out").arg(&data).spawn().unwrap();
    let staging = tmp.join(&format!(".data.gen-staging-{}", first.id()));
    while !staging.exists() && first.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    let pid = first.id().to_string();
    let signal = |name: &str| std::process::Command::new("kill").args([name, &pid]).status().unwrap();
    assert!(signal("-STOP").success());
    if first.try_wait().unwrap().is_some() {
        eprintln!("skipped: the first import finished before it could be paused");
        return;
    }
    let mut second = gen_bin()
        .args(["import", "api-data", "--force"])
        .arg(&fixture)
        .arg("--out")
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(second.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.contains("waiting: another gen build or import is writing"), "{line}");
    assert!(second.try_wait().unwrap().is_none(), "the second import went on while the first held the folder");
    assert!(signal("-CONT").success());
    assert!(first.wait().unwrap().success());
    std::io::Read::read_to_string(&mut stderr, &mut String::new()).unwrap();
    assert!(second.wait().unwrap().success());
    let alone = tmp.join("alone");
    run(&["import", "api-data", fixture.to_str().unwrap(), "--out", alone.to_str().unwrap()]).ok();
    assert!(read_tree(&data) == read_tree(&alone), "the data folder is not one whole import");
}

/// Data of one list, `thing`, with the ids given (each named `thing-<id>`), page sizes 20, 50, 100.
fn write_things(data: &Path, ids: impl Iterator<Item = u64>) {
    let _ = std::fs::remove_dir_all(data);
    let mut files = vec![("gen.json".to_string(), r#"{"base_url": "http://127.0.0.1:8080"}"#.to_string())];
    files.extend(ids.map(|id| (format!("thing/{id}.json"), format!(r#"{{"id": {id}, "name": "thing-{id}"}}"#))));
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(data, &files);
}

/// Every file path of a tree, relative.
fn tree_files(out: &Path) -> BTreeSet<String> {
    walkdir::WalkDir::new(out)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(out).unwrap().to_string_lossy().to_string())
        .collect()
}

/// Checks the links of every page file of `thing`: each `next` names a file of the tree, and
/// so does each `previous`, except (query links) that of the last page under a shrunken limit.
fn check_page_links(out: &Path, links: &str) -> usize {
    let mut checked = 0;
    for rel in tree_files(out)
        .iter()
        .filter(|rel| rel.starts_with("api/v2/thing/_pages/") || *rel == "api/v2/thing/index.json")
    {
        let page = read_json(&out.join(rel));
        for field in ["next", "previous"] {
            let Some(link) = page[field].as_str() else { continue };
            assert_eq!(link.contains("/_pages/"), links == "path", "{rel}: {field} {link}");
            let held = page_file(out, link).is_file();
            let shrunken = field == "previous" && !is_aligned_page_file(Path::new(rel), &[20, 50, 100]);
            assert!(held || (links == "query" && shrunken), "{links}: {rel}: {field} {link} is not a file");
            checked += 1;
        }
    }
    checked
}

#[test]
fn adding_or_removing_a_record_changes_the_files_by_at_most_its_own_and_two_pages_per_size() {
    for links in ["query", "path"] {
        let tmp = TempDir::new("page-bound");
        let (data, out) = (tmp.join("data"), tmp.join("out"));
        let mut previous: Option<BTreeSet<String>> = None;
        // 200 records (a multiple of every page size), then one removed, one added, one more
        // added: with the pages that links reached before, 199 or 201 entries made about 200
        // more page files (limits 19 and 1, or 1), against a bound of 8 (200, not 1,000 as
        // before: the count is not what is tested, and the quick tier runs it)
        for (count, ids) in [(200, 1..=200), (199, 2..=200), (200, 2..=201), (201, 2..=202)] {
            write_things(&data, ids);
            build(&data, &out, &["--links", links, "--quiet"]).ok();
            let files = tree_files(&out);
            let pages = files.iter().filter(|f| f.contains("/_pages/")).count();
            eprintln!("{links}: {count} records: {} files, {pages} page files", files.len());
            let checked = check_page_links(&out, links);
            assert!(checked > 20, "{links}, {count} records: only {checked} page links checked");
            if let Some(before) = &previous {
                let changed: Vec<&String> = before.symmetric_difference(&files).collect();
                // the record's id and name paths; per page size, two page files at most
                let bound = 2 + 2 * 3;
                assert!(
                    changed.len() <= bound,
                    "{links}, {count} records: {} files added or removed: {changed:?}",
                    changed.len()
                );
            }
            previous = Some(files);
        }
    }
}

/// Issue 21: the build index is binary, with a version and a checksum. One that is damaged
/// (here: a document's hash changed, which a build that trusted it would copy into the
/// manifest), cut short, or of an earlier version (the JSON index of format 2) is ignored with
/// one note, and the build is a full one: its tree and manifest are a fresh build's.
#[test]
fn a_damaged_cut_or_old_build_index_gives_a_full_build_with_one_note() {
    let tmp = TempDir::new("index-damaged");
    let data = tmp.join("data");
    sample_data(&data);
    let (out, index) = (tmp.join("out"), state_file(&tmp.join("out"), "index"));
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    let hash = blake3::hash(&std::fs::read(fresh.join("api/v2/berry/1/index.json")).unwrap());
    let record = std::fs::read(data.join("berry/3.json")).unwrap();
    let mut changed = read_json(&data.join("berry/3.json"));
    changed["size"] = serde_json::json!(7.25);
    type Damage = fn(&mut Vec<u8>, &[u8]);
    let damages: [(&str, Damage); 3] = [
        ("a document's hash changed", |bytes, hash| {
            let at = bytes.windows(32).position(|w| w == hash).expect("the index holds the document's hash");
            bytes[at..at + 32].fill(0);
        }),
        ("cut short", |bytes, _| bytes.truncate(bytes.len() / 2)),
        ("an index of format 2", |bytes, _| {
            *bytes = br#"{"format":2,"manifest":{},"started_ns":0,"files":{}}"#.to_vec()
        }),
    ];
    for (what, damage) in damages {
        let _ = std::fs::remove_dir_all(&out);
        build(&data, &out, &[]).ok();
        let mut bytes = std::fs::read(&index).unwrap();
        damage(&mut bytes, hash.as_bytes());
        std::fs::write(&index, &bytes).unwrap();
        // a change, so that a build that trusted the index would take the rest from it
        std::fs::write(data.join("berry/3.json"), changed.to_string()).unwrap();
        let stderr = build(&data, &out, &[]).ok().stderr();
        let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("build index")).collect();
        assert_eq!(notes.len(), 1, "{what}: {stderr}");
        assert!(notes[0].starts_with("note: ") && notes[0].contains("checks every file"), "{what}: {}", notes[0]);
        build(&data, &fresh, &[]).ok();
        assert!(read_tree(&out) == read_tree(&fresh), "{what}: the tree is a fresh build's");
        let again = build(&data, &out, &[]).ok();
        assert!(again.stdout().contains("(0 written)") && !again.stderr().contains("build index"), "{what}");
        std::fs::write(data.join("berry/3.json"), &record).unwrap();
        build(&data, &fresh, &[]).ok();
    }
}

/// Issue 47, item 3: the build index names the gen that wrote it, and one another gen wrote is
/// ignored with one note even when its checksum is right: the build after an edit is a full
/// one, and its tree is a fresh build's.
#[test]
fn a_build_index_another_gen_wrote_gives_a_full_build_with_one_note() {
    let tmp = TempDir::new("index-other-gen");
    let data = tmp.join("data");
    sample_data(&data);
    let (out, index, fresh) = (tmp.join("out"), state_file(&tmp.join("out"), "index"), tmp.join("fresh"));
    build(&data, &out, &[]).ok();
    let version = env!("CARGO_PKG_VERSION");
    let ours = format!("\"generator\":\"gen {version}\"");
    let mut bytes = std::fs::read(&index).unwrap();
    let at = bytes.windows(ours.len()).position(|w| w == ours.as_bytes()).expect("the index names its gen");
    let other = format!("\"generator\":\"gen {}\"", version.replace(|c: char| c.is_ascii_digit(), "9"));
    let other = if other == ours { ours.replace("gen ", "GEN ") } else { other };
    bytes[at..at + ours.len()].copy_from_slice(other.as_bytes());
    let body = bytes.len() - 32;
    let sum = blake3::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(sum.as_bytes());
    std::fs::write(&index, &bytes).unwrap();
    let mut changed = read_json(&data.join("berry/3.json"));
    changed["size"] = serde_json::json!(7.25);
    std::fs::write(data.join("berry/3.json"), changed.to_string()).unwrap();
    let stderr = build(&data, &out, &[]).ok().stderr();
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("build index")).collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    assert!(notes[0].starts_with("note: ") && notes[0].contains("not by this gen"), "{}", notes[0]);
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "the tree is a fresh build's");
}

/// Issue 26, item 17: the index's checksum guards against damage, not against an index
/// rewritten on purpose. Here a document of the tree is put back to its bytes before an edit of
/// its record, and the index is rewritten to agree (that file's stamp and hash, the checksum
/// recomputed): a plain build trusts it and says the stale tree is up to date, as docs/builds.md
/// says it may; `gen build --verify` reads every data file and every file of the tree, rewrites
/// that document, and leaves the tree a fresh build gives, with an index the next build trusts.
#[test]
fn build_verify_repairs_a_tree_whose_index_was_rewritten_on_purpose() {
    use std::os::unix::fs::MetadataExt;
    let tmp = TempDir::new("index-forged");
    let data = tmp.join("data");
    sample_data(&data);
    let (out, index) = (tmp.join("out"), state_file(&tmp.join("out"), "index"));
    build(&data, &out, &[]).ok();
    let doc = out.join("api/v2/berry/3/index.json");
    let before = std::fs::read(&doc).unwrap();
    let mut changed = read_json(&data.join("berry/3.json"));
    changed["size"] = serde_json::json!(7.25);
    std::fs::write(data.join("berry/3.json"), changed.to_string()).unwrap();
    build(&data, &out, &[]).ok();
    let after = std::fs::read(&doc).unwrap();
    assert_ne!(before, after, "the edit changes the document");

    // The tree's file put back in place (its name path, a link of it, with it), and the index
    // rewritten to say so: the entry holding the new bytes' hash gets the file's stamp and the
    // old bytes' hash, and the checksum at the end is recomputed.
    std::fs::write(&doc, &before).unwrap();
    let mut bytes = std::fs::read(&index).unwrap();
    let new_hash = blake3::hash(&after);
    let found: Vec<usize> = (0..bytes.len() - 32).filter(|&i| bytes[i..i + 32] == *new_hash.as_bytes()).collect();
    assert_eq!(found.len(), 1, "the index holds the document's hash once");
    let meta = std::fs::metadata(&doc).unwrap();
    let mut stamp = Vec::new();
    stamp.extend_from_slice(&meta.len().to_le_bytes());
    stamp.extend_from_slice(&(meta.mtime() * 1_000_000_000 + meta.mtime_nsec()).to_le_bytes());
    stamp.extend_from_slice(&(meta.ctime() * 1_000_000_000 + meta.ctime_nsec()).to_le_bytes());
    stamp.extend_from_slice(&meta.ino().to_le_bytes());
    let at = found[0];
    bytes[at - 32..at].copy_from_slice(&stamp);
    bytes[at..at + 32].copy_from_slice(blake3::hash(&before).as_bytes());
    let body = bytes.len() - 32;
    let sum = blake3::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(sum.as_bytes());
    std::fs::write(&index, &bytes).unwrap();

    let plain = build(&data, &out, &[]).ok();
    assert!(plain.stdout().contains("is up to date"), "the rewritten index is trusted: {}", plain.stdout());
    assert_eq!(std::fs::read(&doc).unwrap(), before, "a plain build leaves the stale document");

    let verified = build(&data, &out, &["--verify"]).ok();
    assert!(verified.stdout().contains("every file of the tree read"), "{}", verified.stdout());
    let rewritten = "3 files rewritten"; // the document at its id and name paths, and the manifest
    assert!(verified.stdout().contains(rewritten), "{}", verified.stdout());
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "after --verify the tree is a fresh build's");
    let again = build(&data, &out, &[]).ok();
    assert!(again.stdout().contains("(0 written)"), "the index --verify wrote is used: {}", again.stdout());
}

/// Issue 28: `gen build` shows progress as `gen publish` does, through the one progress display
/// (src/progress.rs, an indicatif bar), only on a terminal and never with `-q`. Run under
/// `script`, which gives it a pseudo-terminal; then with `-q`, and with stderr a pipe.
#[test]
fn build_progress_is_one_bar_on_a_terminal_only_and_never_with_quiet() {
    let Some(script) = find_tool("script").or_else(|| unavailable("script", "install util-linux")) else { return };
    let tmp = TempDir::new("progress");
    let data = tmp.join("data");
    sample_data(&data);
    let on_terminal = |out: &str, extra: &str| {
        let binary = env!("CARGO_BIN_EXE_gen");
        let command = format!("{binary} build --data {} --out {} {extra}", utf8(&data), utf8(&tmp.join(out)));
        let run = std::process::Command::new(&script)
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(run.status.success(), "{command}: {}", String::from_utf8_lossy(&run.stderr));
        String::from_utf8_lossy(&run.stdout).into_owned()
    };
    let shown = on_terminal("out", "");
    assert!(shown.contains("writing [") && shown.contains(" documents"), "a bar on a terminal: {shown:?}");
    assert!(shown.contains("\u{1b}[2K") && shown.contains("built "), "cleared before the summary: {shown:?}");
    let quiet = on_terminal("quiet", "-q");
    assert_eq!(quiet, "", "nothing with -q on a terminal");
    let piped = build(&data, &tmp.join("piped"), &[]).ok();
    assert!(!piped.stderr().contains("writing") && !piped.stderr().contains('\r'), "{:?}", piped.stderr());
    assert!(piped.stdout().starts_with("built "), "the summary alone: {:?}", piped.stdout());
}

/// `gen build` without `SOURCE_DATE_EPOCH` (the deploy date is the clock's).
fn build_on_the_clock(data: &Path, out: &Path) {
    let status = gen_bin()
        .env_remove("SOURCE_DATE_EPOCH")
        .args(["build", "--quiet", "--data"])
        .arg(data)
        .arg("--out")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs git in `dir` with a fixed identity and dates, so the test does not depend on the
/// user's git settings.
fn git(dir: &Path, args: &[&str], date: &str) {
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=gen tests", "-c", "user.email=tests@example.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?} failed");
}

#[test]
fn fresh_builds_of_committed_data_give_the_same_bytes_dated_by_the_commit() {
    if find_tool("git").is_none() {
        return unavailable("git", "install git (Debian's package git)").unwrap_or(());
    }
    let tmp = TempDir::new("commit-date");
    let repo = tmp.join("repo");
    let data = repo.join("data");
    sample_data(&data);
    std::fs::write(repo.join("notes.txt"), "not data").unwrap();
    git(&repo, &["init", "-q"], "@0");
    git(&repo, &["add", "data"], "@0");
    git(&repo, &["commit", "-q", "-m", "data"], "@1700000000 +0000");
    // a later commit outside the data folder does not date the data
    git(&repo, &["add", "notes.txt"], "@0");
    git(&repo, &["commit", "-q", "-m", "notes"], "@1800000000 +0000");

    // two fresh builds, as two CI runs from fresh clones: the commit's date, the same bytes
    build_on_the_clock(&data, &tmp.join("a"));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    build_on_the_clock(&data, &tmp.join("b"));
    let meta = read_json(&tmp.join("a/api/v2/meta/index.json"));
    assert_eq!(meta["deploy_date"], "1700000000", "the date of the last commit that touched data/");
    let (a, b) = (read_tree(&tmp.join("a")), read_tree(&tmp.join("b")));
    assert!(a == b, "two fresh builds of the same commit differ");

    // an edit not yet committed is newer than the commit: the build's clock
    std::fs::write(data.join("berry/1.json"), r#"{"id": 1, "name": "berry-1"}"#).unwrap();
    let before = unix_now();
    build_on_the_clock(&data, &tmp.join("c"));
    let date: i64 = read_json(&tmp.join("c/api/v2/meta/index.json"))["deploy_date"].as_str().unwrap().parse().unwrap();
    assert!(date >= before, "an uncommitted edit is dated by the clock: {date} < {before}");
    // committed, a fresh build takes the new commit's date
    git(&repo, &["commit", "-q", "-a", "-m", "edit"], "@1750000000 +0000");
    build_on_the_clock(&data, &tmp.join("d"));
    assert_eq!(read_json(&tmp.join("d/api/v2/meta/index.json"))["deploy_date"], "1750000000");
    // an untracked file in the data folder is an uncommitted change too
    std::fs::write(data.join("berry/500.json"), r#"{"id": 500, "name": "berry-500"}"#).unwrap();
    build_on_the_clock(&data, &tmp.join("e"));
    let date: i64 = read_json(&tmp.join("e/api/v2/meta/index.json"))["deploy_date"].as_str().unwrap().parse().unwrap();
    assert!(date >= before, "an untracked record is dated by the clock: {date} < {before}");
}

/// Issue 47, item 4: a rebuild equals a fresh build, byte for byte, from any clone. A clone
/// built, edited, committed and built again, and a fresh clone of the same commit built once,
/// give the same tree, bulk-data index included: each file's `updated_at` is the date of the
/// last commit that touched its resource's data (or gen.json), never the date of a build. It
/// kept, for an unchanged file, the date of the build that last wrote it.
#[test]
fn a_rebuilt_clone_and_a_fresh_clone_of_the_same_commit_give_the_same_tree() {
    if find_tool("git").is_none() {
        return unavailable("git", "install git (Debian's package git)").unwrap_or(());
    }
    let tmp = TempDir::new("two-clones");
    let origin = tmp.join("origin");
    sample_data(&origin.join("data"));
    git(&origin, &["init", "-q"], "@0");
    git(&origin, &["add", "data"], "@0");
    git(&origin, &["commit", "-q", "-m", "data"], "@1700000000 +0000");
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    let now = "@1800000000 +0000"; // the date git writes in a clone's reflog (not "@0")
    git(tmp.path(), &["clone", "-q", utf8(&origin), utf8(&a)], now);
    build_on_the_clock(&a.join("data"), &a.join("out"));
    // an edit of one berry, committed in clone A and pushed, then A built again
    let berry = a.join("data/berry/2.json");
    let mut record = read_json(&berry);
    record["size"] = serde_json::json!(99);
    std::fs::write(&berry, record.to_string()).unwrap();
    git(&a, &["commit", "-q", "-a", "-m", "edit"], "@1750000000 +0000");
    git(&a, &["push", "-q", "origin", "HEAD:refs/heads/edited"], now);
    build_on_the_clock(&a.join("data"), &a.join("out"));
    // a fresh clone of that commit, built once
    git(tmp.path(), &["clone", "-q", "--branch", "edited", utf8(&origin), utf8(&b)], now);
    build_on_the_clock(&b.join("data"), &b.join("out"));
    let index = read_json(&b.join("out/api/v2/bulk-data/index.json"));
    for entry in index["results"].as_array().unwrap() {
        let date = if entry["resource"] == "berry" { "1750000000" } else { "1700000000" };
        assert_eq!(entry["updated_at"], date, "{}: the last commit that touched it", entry["resource"]);
    }
    let (rebuilt, fresh) = (read_tree(&a.join("out")), read_tree(&b.join("out")));
    let differ: Vec<&String> = fresh.keys().filter(|path| rebuilt.get(*path) != fresh.get(*path)).collect();
    assert!(rebuilt == fresh, "the rebuilt clone's tree differs from the fresh clone's: {differ:?}");
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn meta_carries_the_deploy_date_and_hash_as_the_public_api_writes_them() {
    let tmp = TempDir::new("deploy-meta");
    let data = tmp.join("data");
    sample_data(&data);
    // SOURCE_DATE_EPOCH is the deploy date, a string of Unix seconds; the hash is hex
    build(&data, &tmp.join("a"), &[]).ok();
    let meta = read_json(&tmp.join("a/api/v2/meta/index.json"));
    assert_eq!(meta["deploy_date"], TEST_EPOCH);
    let hash = meta["hash"].as_str().unwrap().to_string();
    assert!(hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()), "{hash}");
    assert_ne!(hash, meta["data_hash"].as_str().unwrap(), "the hash covers the options too");
    let manifest = read_json(&tmp.join("a/manifest.json"));
    assert_eq!((&manifest["deploy_date"], &manifest["hash"]), (&meta["deploy_date"], &meta["hash"]));
    assert_eq!(manifest["deploy_headers"], serde_json::json!({"date": "X-Deploy-Date", "hash": "X-Data-Hash"}));
    // other options, another hash
    build(&data, &tmp.join("b"), &["--pretty"]).ok();
    assert_ne!(read_json(&tmp.join("b/api/v2/meta/index.json"))["hash"], hash.as_str());

    // Without it: the time of the build that wrote the tree, the same hash.
    let before = unix_now();
    build_on_the_clock(&data, &tmp.join("c"));
    let after = unix_now();
    let meta = read_json(&tmp.join("c/api/v2/meta/index.json"));
    let date: i64 = meta["deploy_date"].as_str().unwrap().parse().unwrap();
    assert!((before..=after).contains(&date), "{date} not in {before}..={after}");
    assert_eq!(meta["hash"], hash.as_str(), "the date is not part of the hash");
    // a rebuild that finds the tree up to date keeps the date (and writes nothing)
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let tree = read_tree(&tmp.join("c"));
    build_on_the_clock(&data, &tmp.join("c"));
    assert!(read_tree(&tmp.join("c")) == tree, "an up-to-date rebuild changed the tree");
    // a build that changes the tree deploys it anew: a later date, another hash
    std::fs::write(data.join("berry/1.json"), r#"{"id": 1, "name": "berry-1"}"#).unwrap();
    build_on_the_clock(&data, &tmp.join("c"));
    let edited = read_json(&tmp.join("c/api/v2/meta/index.json"));
    let new_date: i64 = edited["deploy_date"].as_str().unwrap().parse().unwrap();
    assert!(new_date > date, "{new_date} after {date}");
    assert_ne!(edited["hash"], hash.as_str());
}

#[test]
fn deploy_header_names_come_from_gen_json_and_bad_ones_are_refused() {
    let tmp = TempDir::new("deploy-names");
    let data = tmp.join("data");
    sample_data(&data);
    let settings = |names: &str| {
        let mut config: Value = serde_json::from_slice(&std::fs::read(data.join("gen.json")).unwrap()).unwrap();
        config["deploy_headers"] = serde_json::from_str(names).unwrap();
        std::fs::write(data.join("gen.json"), config.to_string()).unwrap();
    };
    settings(r#"{"date": "X-Tree-Date", "hash": "X-Tree-Hash"}"#);
    build(&data, &tmp.join("out"), &[]).ok();
    let manifest = read_json(&tmp.join("out/manifest.json"));
    assert_eq!(manifest["deploy_headers"], serde_json::json!({"date": "X-Tree-Date", "hash": "X-Tree-Hash"}));
    for (bad, says) in [
        (r#"{"date": "X-Date\r\nX-Evil: 1", "hash": "X-Tree-Hash"}"#, "deploy_headers.date"),
        (r#"{"date": "X-Same", "hash": "x-same"}"#, "twice"),
        (r#"{"date": "X-Tree-Date"}"#, "hash"),
    ] {
        settings(bad);
        let run = build(&data, &tmp.join("out"), &[]).fails_with(1);
        assert!(run.stderr().contains("gen.json") && run.stderr().contains(says), "{bad}: {}", run.stderr());
    }
}

/// Issue 26, item 14: a tree written inside its own data folder would be read as data by every
/// later build. It is refused at the first build, as `gen serve --watch` refuses it, and nothing
/// is written into the data folder; the same through a link to it.
#[test]
fn out_inside_data_is_refused_at_the_first_build() {
    let tmp = TempDir::new("out-inside-data");
    let data = tmp.join("data");
    sample_data(&data);
    let before = read_tree(&data);
    std::os::unix::fs::symlink(&data, tmp.join("link")).unwrap();
    for out in [data.join("out"), data.join("deeper/out"), data.clone(), tmp.join("link/out")] {
        let run = build(&data, &out, &[]).fails_with(2);
        assert!(run.stderr().contains("is inside --data") && run.stderr().contains("--out"), "{}", run.stderr());
        assert!(read_tree(&data) == before, "{}: a refused build wrote into the data folder", out.display());
    }
    // beside it, as the message says, it builds, and builds again
    build(&data, &tmp.join("out"), &[]).ok();
    build(&data, &tmp.join("out"), &[]).ok();
}

#[test]
fn a_record_git_ignores_is_an_uncommitted_change_that_dates_the_build_by_the_clock() {
    if find_tool("git").is_none() {
        return unavailable("git", "install git (Debian's package git)").unwrap_or(());
    }
    let tmp = TempDir::new("ignored-record");
    let repo = tmp.join("repo");
    let data = repo.join("data");
    sample_data(&data);
    // the record is built, but git ignores it: no commit dates it
    std::fs::write(repo.join(".gitignore"), "data/berry/500.json\n").unwrap();
    git(&repo, &["init", "-q"], "@0");
    git(&repo, &["add", "."], "@0");
    git(&repo, &["commit", "-q", "-m", "data"], "@1700000000 +0000");
    build_on_the_clock(&data, &tmp.join("a"));
    assert_eq!(read_json(&tmp.join("a/api/v2/meta/index.json"))["deploy_date"], "1700000000");
    // a hidden file gen skips changes nothing, ignored or not
    std::fs::write(repo.join(".gitignore"), "data/berry/500.json\n*.swp\n").unwrap();
    git(&repo, &["commit", "-q", "-a", "-m", "ignore"], "@1700000000 +0000");
    std::fs::write(data.join("berry/.1.json.swp"), "editor state").unwrap();
    build_on_the_clock(&data, &tmp.join("b"));
    assert_eq!(read_json(&tmp.join("b/api/v2/meta/index.json"))["deploy_date"], "1700000000");

    std::fs::write(data.join("berry/500.json"), r#"{"id": 500, "name": "berry-500"}"#).unwrap();
    let before = unix_now();
    build_on_the_clock(&data, &tmp.join("c"));
    assert_eq!(read_json(&tmp.join("c/api/v2/berry/500/index.json"))["id"], 500, "the ignored record is built");
    let date: i64 = read_json(&tmp.join("c/api/v2/meta/index.json"))["deploy_date"].as_str().unwrap().parse().unwrap();
    assert!(date >= before, "a record git ignores is newer than any commit: dated {date}, before {before}");
}

/// Writes synthetic data of `records` things into `dir`, held as tables as people with many
/// records keep them: `thing.ndjson` (a record a line, about 500 bytes each, named, referring
/// to a kind) and `thing.notes.ndjson` (a sub-document for every third thing), and five kinds,
/// one file each. With `edited`, the first thing's line differs by one value. With
/// `one_file_each`, the things are `thing/<id>.json` and `thing/<id>/notes.json` instead (and
/// with `edited`, only `thing/1.json` is written again).
pub(crate) fn synthetic_data(dir: &Path, records: usize, edited: bool, one_file_each: bool) {
    let mut things = String::new();
    let mut notes = String::new();
    let mut each: Vec<(String, String)> = Vec::new();
    for id in 1..=records {
        let value = if edited && id == 1 { 0 } else { id % 97 };
        let words: Vec<String> = (0..24).map(|w| format!("\"word-{}\"", (id * 31 + w) % 1009)).collect();
        things.push_str(&format!(
            r#"{{"id": {id}, "name": "thing-{id}", "kind": {{"url": "/api/v2/kind/{}/"}}, "value": {value}, "words": [{}]}}"#,
            id % 5 + 1,
            words.join(", ")
        ));
        things.push('\n');
        if id % 3 == 0 {
            notes.push_str(&format!(r#"{{"id": {id}, "document": {{"note": "about thing {id}", "n": {}}}}}"#, id * 7));
            notes.push('\n');
        }
        if one_file_each && (!edited || id == 1) {
            each.push((format!("thing/{id}.json"), things.clone()));
            if id % 3 == 0 && !edited {
                each.push((
                    format!("thing/{id}/notes.json"),
                    format!(r#"{{"note": "about thing {id}", "n": {}}}"#, id * 7),
                ));
            }
        }
        if one_file_each {
            things.clear();
        }
    }
    if one_file_each {
        let files: Vec<(&str, String)> = each.iter().map(|(rel, text)| (rel.as_str(), text.clone())).collect();
        write_files(dir, &files);
        if edited {
            return;
        }
    }
    let mut files = match one_file_each {
        true => Vec::new(),
        false => vec![("thing.ndjson", things), ("thing.notes.ndjson", notes)],
    };
    let kinds: Vec<(String, String)> =
        (1..=5).map(|id| (format!("kind/{id}.json"), format!(r#"{{"id": {id}, "name": "kind-{id}"}}"#))).collect();
    files.extend(kinds.iter().map(|(path, text)| (path.as_str(), text.clone())));
    write_files(dir, &files);
}

/// The peak resident memory of a fresh, an unchanged and a one-line-edit build of `records`
/// synthetic records ([`synthetic_data`]: tables, or one file each), in bytes.
fn build_peaks(tmp: &Path, records: usize, one_file_each: bool) -> [u64; 3] {
    let (data, out) = (tmp.join(format!("data-{records}")), tmp.join(format!("out-{records}")));
    synthetic_data(&data, records, false, one_file_each);
    let threads = [("RAYON_NUM_THREADS", "2")];
    let args = ["build", "--quiet", "--data", utf8(&data), "--out", utf8(&out)];
    let peak = || {
        let (run, peak) = peak_memory(&args, &threads);
        run.ok();
        peak
    };
    let fresh = peak();
    let unchanged = peak();
    synthetic_data(&data, records, true, one_file_each);
    let edit = peak();
    [fresh, unchanged, edit]
}

/// What each record may add to a build's peak, in bytes: fresh, unchanged, one-line edit.
/// Issue 36 item 4 asks for 512 MB for a million records (537 bytes a record) in all three, and
/// that is the bound: 414 to 442, 526 to 528 and 342 to 352 bytes a record measured in two runs
/// (docs/benchmarks/issue-36-scale-by-the-change.md, "512 MB at a million records"; the
/// "unchanged" build here follows the fresh one too closely to trust its stamps, so it reads
/// the data and holds both data tables). Before the tables were let go in turn and pages
/// rendered entry by entry, it took 618 to 675, 563 to 599 and 582 to 623; before the index
/// was written in parts, 765, 612 and 841; before the sub-documents' vectors were sized and
/// large freed blocks given back, 850, 710 and 1,270; before a list page rendered its own
/// entries and the plan stopped holding an output per document, 1,211, 714 and 1,543.
const BYTES_A_RECORD: [u64; 3] = [537, 537, 537];

/// Issue 36, item 4: what a record adds to a build's peak memory is bounded, fresh, unchanged
/// and after a one-line edit. A test cannot build a million records, so it builds the same
/// synthetic data at two sizes and bounds the growth of the peak per record by
/// [`BYTES_A_RECORD`], with 2 MB allowed for what does not grow with the data (the run's
/// noise).
#[test]
fn a_builds_peak_memory_grows_by_a_bounded_amount_a_record() {
    if heavy("it builds 45,000 records six times").is_none() {
        return;
    }
    assert_peaks_grow_at_most(false, BYTES_A_RECORD);
}

/// What a record adds to a build's peak when the records are held one file each (the data
/// folder listed in blocks, loaded a block at a time): measured 451 to 465, 586 to 590 and
/// 416 to 423 bytes, fresh, unchanged and edit, in two runs (these builds follow each other
/// too closely to trust any stamp, so each one reads every file). With every file loaded at
/// once (as before, checked by setting the load's block to every file), 579, 769 and 692: the
/// bound fails. Then each resource's records were given their room once, when its first file
/// comes, and sorted in place: the edit measured 351 (the 416 to 423 before fail its bound of
/// 400); fresh 458, unchanged 568. An edit at 200k records peaked at 184 MB before the blocks,
/// 114 MB with them, 102 MB now (docs/benchmarks/issue-36-scale-by-the-change.md, "the listing holds only what
/// changed").
const BYTES_A_RECORD_ONE_FILE_EACH: [u64; 3] = [640, 640, 400];

/// The same bound for records held one file each: [`BYTES_A_RECORD_ONE_FILE_EACH`].
#[test]
fn a_builds_peak_memory_grows_by_a_bounded_amount_a_record_held_one_file_each() {
    if heavy("it writes 45,000 records one file each and builds them six times").is_none() {
        return;
    }
    assert_peaks_grow_at_most(true, BYTES_A_RECORD_ONE_FILE_EACH);
}

/// Builds [`synthetic_data`] at 5,000 and 40,000 records (tables, or one file each) and asserts
/// that the peak of each build grew by at most `bound` bytes a record, plus 2 MB.
fn assert_peaks_grow_at_most(one_file_each: bool, bound: [u64; 3]) {
    let tmp = TempDir::new("memory-per-record");
    let (small, large) = (5_000, 40_000);
    let before = build_peaks(tmp.path(), small, one_file_each);
    let after = build_peaks(tmp.path(), large, one_file_each);
    let allowance = 2 << 20;
    let mut over = Vec::new();
    for (i, build) in ["fresh", "unchanged", "one-line edit"].iter().enumerate() {
        let growth = after[i].saturating_sub(before[i]);
        let line = format!(
            "a {build} build: {} MB at {small} records, {} MB at {large}: {} bytes a record (bound {})",
            before[i] >> 20,
            after[i] >> 20,
            growth / (large - small) as u64,
            bound[i]
        );
        eprintln!("{line}");
        if growth > bound[i] * (large - small) as u64 + allowance {
            over.push(line);
        }
    }
    assert!(over.is_empty(), "a build's peak grew by more than its bound a record:\n{}", over.join("\n"));
}

/// `gen build --data <data> --out <out>`, paused between its load and its render (the build's
/// test-only hook, see [`guarded_paused`]) while `meanwhile` changes the data, under a memory
/// limit and a time guard.
fn build_changed_between_reads(data: &Path, out: &Path, meanwhile: impl FnOnce()) -> Ended {
    let pause = out.with_file_name("pause");
    guarded_paused(&["build", "--data", utf8(data), "--out", utf8(out)], &pause, meanwhile)
}

/// Asserts that `ended` is a build that failed on `file` changing while it read it, promptly
/// and clearly, having written nothing: `out` still holds `before`.
fn assert_failed_on_a_change(ended: &Ended, file: &str, out: &Path, before: &BTreeMap<String, Vec<u8>>) {
    assert!(!ended.killed, "the build hung on {file} changed between its reads:\n{}", ended.describe());
    assert_eq!(ended.code, Some(1), "a build that read {file} changed between its reads:\n{}", ended.describe());
    let said =
        ended.stderr.lines().find(|line| line.contains(file) && line.contains("changed while the build read it"));
    assert!(said.is_some_and(|line| line.contains("run the build again")), "{file} unnamed:\n{}", ended.describe());
    assert!(read_tree(out) == *before, "a build that failed on {file} changed the tree");
}

/// Asserts that `out` holds what a fresh build of `data` gives (`label` names the case).
fn assert_fresh_build_of(data: &Path, out: &Path, label: &str) {
    let fresh = out.with_file_name(format!("fresh-{}", label.replace(['/', ' ', '.'], "-")));
    build(data, &fresh, &[]).ok();
    assert!(read_tree(out) == read_tree(&fresh), "{label}: the tree differs from a fresh build of its data");
}

/// Issue 47, item 1: a record's or sub-document's file saved while a build reads it, and the
/// save undone a moment later. The load read, hashed and recorded the first bytes; the render
/// read the file again and published the second, so the tree kept them while the data and the
/// index said otherwise, and every later build found the tree up to date. Now the render's
/// bytes must hash to what the load recorded: the build fails naming the file, writes
/// nothing, and the next build (of the data with the save undone) equals a fresh build. The
/// change lands between the two reads by the build's test-only pause, not by timing.
#[test]
fn a_file_changed_and_restored_between_the_loads_and_the_renders_read_never_stays_in_the_tree() {
    let tmp = TempDir::new("racy-file");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    let cases = [
        // a record whose filters' values the extract reads too, and a sub-document
        ("berry/7.json", r#""size": 7.5"#, r#""size": 70.5"#, r#""size": 99.5"#),
        ("creature/7/encounters.json", r#""chance": 5"#, r#""chance": 6"#, r#""chance": 7"#),
    ];
    for (rel, old, saved, meanwhile) in cases {
        let file = data.join(rel);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(old), "{rel}: {text}");
        std::fs::write(&file, text.replace(old, saved)).unwrap(); // the edit the build is for
        let before = read_tree(&out);
        let ended = build_changed_between_reads(&data, &out, || {
            std::fs::write(&file, text.replace(old, meanwhile)).unwrap();
        });
        std::fs::write(&file, text.replace(old, saved)).unwrap(); // the save undone
        assert_failed_on_a_change(&ended, rel, &out, &before);
        let run = build(&data, &out, &[]).ok();
        assert!(!run.stdout().contains("up to date"), "{rel}: {}", run.stdout());
        assert_fresh_build_of(&data, &out, rel);
    }
}

/// Issue 47, item 1: two lines of equal length of a table (and of a sub-document table)
/// swapped in place while a build reads them, and swapped back after it. The render read each
/// line again by its offset: `/thing/5/` served record 6, for good. Now the line's bytes must
/// hash to what the load recorded.
#[test]
fn table_lines_swapped_in_place_between_the_reads_never_stay_in_the_tree() {
    let tmp = TempDir::new("racy-table");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let line = |id: u32, n: u32| format!(r#"{{"id": {id}, "name": "thing-{id}", "value": {}}}"#, id * n);
    let note = |id: u32, n: u32| format!(r#"{{"id": {id}, "document": {{"note": {}}}}}"#, id * n);
    let table = |each: &dyn Fn(u32, u32) -> String, ids: &[u32], n: u32| {
        ids.iter().map(|&id| each(id, n) + "\n").collect::<String>()
    };
    let (ids, swapped) = ([1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 6, 5, 7]);
    let tables = |n| [("thing.ndjson", table(&line, &ids, n)), ("thing.notes.ndjson", table(&note, &ids, n))];
    write_files(&data, &tables(11));
    build(&data, &out, &[]).ok();
    // in place: the same inode, the same size, other bytes at the offsets of lines 5 and 6
    let write_in_place = |name: &str, text: String| {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().write(true).open(data.join(name)).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    };
    for (rel, n) in [("thing.ndjson", 13), ("thing.notes.ndjson", 17)] {
        let each: &dyn Fn(u32, u32) -> String = if rel == "thing.ndjson" { &line } else { &note };
        write_in_place(rel, table(each, &ids, n)); // the edit the build is for: every line
        let before = read_tree(&out);
        let ended = build_changed_between_reads(&data, &out, || write_in_place(rel, table(each, &swapped, n)));
        write_in_place(rel, table(each, &ids, n)); // swapped back
        assert_failed_on_a_change(&ended, &format!("{rel}:5:1"), &out, &before);
        build(&data, &out, &[]).ok();
        assert_eq!(read_json(&out.join("api/v2/thing/5/index.json"))["id"], 5, "{rel}");
        assert_fresh_build_of(&data, &out, rel);
    }
}

/// Issue 47, item 1: the render's read of a record opens it as the load's does. A record
/// replaced between the two reads by a FIFO hung the build (the read waited for a writer), and
/// by a link to `/dev/zero` read until memory ran out (here: until the test's memory limit).
/// Now either is a problem naming the file, at once, and the build writes nothing.
#[test]
fn a_record_replaced_by_a_fifo_or_a_device_link_between_the_reads_is_refused_at_once() {
    let tmp = TempDir::new("racy-hostile");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    let cases = [
        ("berry/7.json", r#""size": 7.5"#, r#""size": 8.5"#, "fifo", "named pipe"),
        ("form/2.json", r#""form-2""#, r#""form-2", "edited": true"#, "zero", "character device"),
    ];
    for (rel, old, edited, what, kind) in cases {
        let file = data.join(rel);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(old), "{rel}: {text}");
        std::fs::write(&file, text.replace(old, edited)).unwrap(); // the edit the build is for
        let before = read_tree(&out);
        let ended = build_changed_between_reads(&data, &out, || make_hostile(&file, what));
        assert_failed_on_a_change(&ended, rel, &out, &before);
        assert!(ended.stderr.contains(kind), "{rel} as a {what}:\n{}", ended.describe());
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, text).unwrap();
        build(&data, &out, &[]).ok();
        assert_fresh_build_of(&data, &out, rel);
    }
}

/// Issue 47, item 9: a record's parse holds at most 16 times its file's size, whatever its
/// shape. A record of 25 MB of one shape each (small objects, one-digit numbers, arrays nested
/// 120 deep: 43, 33 and 73 times its size as a `serde_json::Value`, 1.8 GB for the deepest) is
/// checked and built on one thread; the peak of each, less [`BASE_PEAK`], is at most 16 times
/// the file's size (measured 3.4 to 6.4 times; 31 to 71 times before:
/// docs/benchmarks/issue-47-parsing-a-record.md).
#[test]
fn a_records_parse_holds_at_most_sixteen_times_its_size_whatever_its_shape() {
    if heavy("it writes three records of 25 MB and checks and builds each for its peak memory").is_none() {
        return;
    }
    let tmp = TempDir::new("parse-memory");
    let size = 25 << 20;
    let fill = |head: &str, item: &str| {
        let mut text = head.to_string();
        while text.len() + item.len() + 3 < size {
            text.push_str(item);
            text.push(',');
        }
        text.push_str(item);
        text + "]}"
    };
    let deep = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let shapes = [
        ("small-objects", fill(r#"{"id": 1, "items": ["#, r#"{"a": 1, "b": "x"}"#)),
        ("numbers", fill(r#"{"id": 1, "n": ["#, "1")),
        ("deep", fill(r#"{"id": 1, "d": ["#, &deep)),
    ];
    let threads = [("RAYON_NUM_THREADS", "1")];
    let mut over = Vec::new();
    for (shape, text) in shapes {
        let data = tmp.join(shape);
        write_files(&data, &[("thing/1.json", text.clone())]);
        let out = tmp.join(&format!("out-{shape}"));
        let check = peak_memory(&["check", "--data", utf8(&data)], &threads);
        let build = peak_memory(&["build", "--quiet", "--data", utf8(&data), "--out", utf8(&out)], &threads);
        for (run, peak) in [(check.0, check.1), (build.0, build.1)] {
            let run = run.ok();
            let ratio = peak.saturating_sub(BASE_PEAK) as f64 / text.len() as f64;
            eprintln!("{} of {shape}: {} MB, {ratio:.1} times its size over the base", run.args[0], peak >> 20);
            if ratio > 16.0 {
                over.push(format!("{} of {shape}: {ratio:.1} times its size", run.args[0]));
            }
        }
    }
    assert!(over.is_empty(), "a record's parse held more than 16 times its size:\n{}", over.join("\n"));
}

/// What a `gen check` or `gen build` of a record of a few bytes peaks at, and more: measured 10
/// to 28 MB (a tiny run is not measured here: it can end before its first reading).
const BASE_PEAK: u64 = 48 << 20;

/// Issue 48: a record's by-name path is a hard link of its by-id file, and the build's byte
/// count counted it twice (3.0 MB for the default data's 1.8 MB). The count printed is each
/// stored file once, as a walk of the tree deduplicated by (device, inode) measures it, and the
/// summary says so.
#[test]
fn the_build_counts_each_stored_file_once_however_many_names_link_it() {
    use std::os::unix::fs::MetadataExt;
    let tmp = TempDir::new("bytes-once");
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let out = tmp.join("out");
    for extra in [&[][..], &["--gzip"][..]] {
        let run = build(&data, &out, extra).ok();
        let (mut unique, mut every_path) = (BTreeMap::new(), 0u64);
        for entry in walkdir::WalkDir::new(&out) {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_file() {
                unique.insert((meta.dev(), meta.ino()), meta.len());
                every_path += meta.len();
            }
        }
        let unique: u64 = unique.values().sum();
        let stdout = run.stdout();
        let printed = stdout
            .split_once(" MB stored (hard links counted once) in ")
            .and_then(|(before, _)| before.rsplit(' ').next())
            .unwrap_or_else(|| panic!("no byte count said to count hard links once: {stdout}"));
        let mb = |bytes: u64| format!("{:.1}", bytes as f64 / 1e6);
        // the default data's names make the difference show at this precision
        assert_ne!(mb(unique), mb(every_path), "the tree has too few name links to tell the counts apart");
        assert_eq!(printed, mb(unique), "{extra:?}: {stdout}(unique files {unique} bytes, every path {every_path})");
    }
}
