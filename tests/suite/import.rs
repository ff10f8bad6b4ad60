//! `gen import api-data`: the round trip over the real published subset in
//! `../shared/fixtures/api-data`, synthetic trees with sub-documents, and bad sources.

use crate::common;
use crate::serve_support;

use common::*;
use serde_json::Value;
use std::path::Path;

const BASE: &str = "http://127.0.0.1:8080";

/// The neutral name of a published segment, as the import issue specifies it.
fn neutral(segment: &str) -> String {
    match segment {
        "pokeathlon-stat" => "athlon-stat".to_string(),
        s if s == "pokemon" || s.starts_with("pokemon-") => s.replacen("pokemon", "creature", 1),
        s => s.to_string(),
    }
}

/// A published document as our tree must serve it: every `/api/v2/` string made absolute with
/// the segment renamed (unless kept); nothing else changed.
fn expected(value: &Value, keep: bool) -> Value {
    match value {
        Value::String(s) => match s.strip_prefix("/api/v2/") {
            Some(rest) => {
                let (segment, tail) = rest.split_once('/').unwrap_or((rest, ""));
                let segment = if keep { segment.to_string() } else { neutral(segment) };
                Value::String(format!("{BASE}/api/v2/{segment}/{tail}"))
            }
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| expected(v, keep)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), expected(v, keep))).collect()),
        other => other.clone(),
    }
}

fn import(src: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["import", "api-data", src.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args)
}

fn round_trip(keep: bool) {
    let Some(src) = fixture() else { return };
    let tmp = TempDir::new("roundtrip");
    let data = tmp.join("data");
    let out = tmp.join("out");
    let flags: &[&str] = if keep { &["--keep-segment-names"] } else { &[] };
    import(&src, &data, flags).ok();
    build(&data, &out, &[]).ok();
    // the deploy headers: the public API's names when its segment names are kept, recorded in
    // gen.json and carried into the tree
    let public = serde_json::json!({"date": "X-PokeAPI-Deploy-Date", "hash": "X-PokeAPI-Hash"});
    let neutral_names = serde_json::json!({"date": "X-Deploy-Date", "hash": "X-Data-Hash"});
    let settings = read_json(&data.join("gen.json"));
    assert_eq!(settings.get("deploy_headers"), keep.then_some(&public), "{settings}");
    let names = &read_json(&out.join("manifest.json"))["deploy_headers"];
    assert_eq!(names, if keep { &public } else { &neutral_names });
    let published = src.join("api/v2");
    let mut records = 0;
    let mut segments = 0;
    for entry in std::fs::read_dir(&published).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        segments += 1;
        let segment = entry.file_name().to_string_lossy().to_string();
        let ours = if keep { segment.clone() } else { neutral(&segment) };
        assert!(keep || !ours.starts_with("pokemon"), "{ours}");
        // the list, in the published order, with urls made absolute
        let list = read_json(&published.join(&segment).join("index.json"));
        let all = read_json(&out.join(format!("api/v2/{ours}/_pages/all/index.json")));
        assert_eq!(all["results"], expected(&list["results"], keep), "{segment} list");
        assert_eq!(all["count"], list["count"]);
        // every record, by id and by name
        for item in list["results"].as_array().unwrap() {
            let url = item["url"].as_str().unwrap();
            let id = url.trim_end_matches('/').rsplit('/').next().unwrap();
            let record = read_json(&published.join(&segment).join(id).join("index.json"));
            let want = expected(&record, keep);
            assert_eq!(read_json(&out.join(format!("api/v2/{ours}/{id}/index.json"))), want, "{segment}/{id}");
            if let Some(name) = record["name"].as_str() {
                assert_eq!(
                    std::fs::read(out.join(format!("api/v2/{ours}/{name}/index.json"))).unwrap(),
                    std::fs::read(out.join(format!("api/v2/{ours}/{id}/index.json"))).unwrap(),
                );
            }
            records += 1;
        }
        // list pages: every page file equals the published list sliced by the paging rules
        let results = list["results"].as_array().unwrap();
        let count = results.len() as u64;
        let pages = out.join(format!("api/v2/{ours}/_pages"));
        for page in walkdir::WalkDir::new(&pages).into_iter().map(Result::unwrap) {
            let rel = page.path().strip_prefix(&pages).unwrap().to_string_lossy().to_string();
            let parts: Vec<&str> = rel.split('/').collect();
            let [limit, offset, "index.json"] = parts[..] else { continue };
            let (limit, offset): (u64, u64) = (limit.parse().unwrap(), offset.parse().unwrap());
            let body = read_json(page.path());
            let slice = &results[offset.min(count) as usize..(offset + limit).min(count) as usize];
            assert_eq!(body["results"], expected(&Value::Array(slice.to_vec()), keep), "{segment} {rel}");
        }
    }
    assert_eq!(segments, 17);
    assert_eq!(records, 2252);
}

#[test]
fn round_trip_over_the_published_fixture() {
    round_trip(false);
}

#[test]
fn round_trip_keeping_the_published_segment_names() {
    round_trip(true);
}

#[test]
fn served_pages_for_random_limits_and_offsets_are_the_published_list_sliced() {
    let Some(src) = fixture() else { return };
    let tmp = TempDir::new("served");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    import(&src, &data, &[]).ok();
    build(&data, &out, &[]).ok();
    let server = serve_support::Server::start(&out, &[]);
    let published = src.join("api/v2");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut random = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(&published).unwrap().map(Result::unwrap) {
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let segment = entry.file_name().to_string_lossy().to_string();
        let list = read_json(&entry.path().join("index.json"));
        let results = list["results"].as_array().unwrap();
        let count = results.len() as u64;
        for _ in 0..12 {
            // limits from 1 to past the end (0 means 20), offsets up to past the end
            let limit = random(count + 30);
            let offset = random(count + 10);
            let response = server.get(&format!("/api/v2/{}/?limit={limit}&offset={offset}", neutral(&segment)));
            let page = response.expect(200).json();
            let limit = if limit == 0 { 20 } else { limit };
            let slice = &results[offset.min(count) as usize..(offset + limit).min(count) as usize];
            assert_eq!(page["results"], expected(&Value::Array(slice.to_vec()), false), "{segment} {limit} {offset}");
            assert_eq!(page["count"], count);
            let next = (count > offset + limit).then(|| {
                let list_url = format!("{BASE}/api/v2/{}/", neutral(&segment));
                format!("{list_url}?offset={}&limit={}", offset + limit, limit.min(count - offset - limit))
            });
            assert_eq!(page["next"].as_str().map(str::to_string), next, "{segment} {limit} {offset}");
            checked += 1;
        }
    }
    assert_eq!(checked, 17 * 12);
}

#[test]
fn order_nameless_and_special_ids_are_kept() {
    let Some(src) = fixture() else { return };
    let tmp = TempDir::new("kept");
    let data = tmp.join("data");
    import(&src, &data, &[]).ok();
    assert!(data.join("move-ailment/-1.json").is_file());
    assert!(data.join("move-category/0.json").is_file());
    assert!(data.join("creature-form/order.json").is_file(), "the form list is not in id order");
    assert!(!data.join("berry/order.json").exists(), "lists in id order need no order file");
    let effect = read_json(&data.join("super-contest-effect/1.json"));
    assert!(effect.get("name").is_none());
    let config = read_json(&data.join("gen.json"));
    let external: Vec<&str> = config["external"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(external.contains(&"creature") && external.contains(&"move"), "{external:?}");
    assert!(!external.iter().any(|s| s.starts_with("pokemon") || *s == "pokeathlon-stat"), "{external:?}");
    // a dangling reference into an imported segment still fails the build
    let mut berry = read_json(&data.join("berry/1.json"));
    berry["firmness"]["url"] = Value::String("/api/v2/berry-firmness/99/".into());
    std::fs::write(data.join("berry/1.json"), berry.to_string()).unwrap();
    let run = build(&data, &tmp.join("out"), &[]).fails_with(1);
    assert!(run.stderr().contains("berry/1.json: $.firmness.url:"), "{}", run.stderr());
}

/// A consistent synthetic tree with the shapes of the full published data: a record linking
/// to its sub-document by a url without trailing slash, the sub-document a top-level array,
/// the singleton `meta` document, and a root index.
fn synthetic_tree(dir: &Path) {
    let files = [
        ("api/v2/index.json", r#"{"pokemon": "/api/v2/pokemon/", "location-area": "/api/v2/location-area/"}"#.to_string()),
        ("api/v2/meta/index.json", r#"{"deploy_date": "1", "hash": "abc", "tag": null}"#.to_string()),
        (
            "api/v2/pokemon/index.json",
            r#"{"count": 2, "next": null, "previous": null, "results": [{"name": "ditto", "url": "/api/v2/pokemon/132/"}, {"name": "bulb", "url": "/api/v2/pokemon/1/"}]}"#.to_string(),
        ),
        (
            "api/v2/pokemon/132/index.json",
            r#"{"id": 132, "name": "ditto", "location_area_encounters": "/api/v2/pokemon/132/encounters", "species": {"name": "ditto", "url": "/api/v2/pokemon-species/132/"}, "weight": 40, "note": "Métamorph"}"#.to_string(),
        ),
        (
            "api/v2/pokemon/132/encounters/index.json",
            r#"[{"location_area": {"name": "area-1", "url": "/api/v2/location-area/1/"}, "chance": 5}]"#.to_string(),
        ),
        (
            "api/v2/pokemon/1/index.json",
            r#"{"id": 1, "name": "bulb", "location_area_encounters": "/api/v2/pokemon/1/encounters", "weight": 69}"#.to_string(),
        ),
        ("api/v2/pokemon/1/encounters/index.json", "[]".to_string()),
        (
            "api/v2/location-area/index.json",
            r#"{"count": 1, "next": null, "previous": null, "results": [{"name": "area-1", "url": "/api/v2/location-area/1/"}]}"#.to_string(),
        ),
        ("api/v2/location-area/1/index.json", r#"{"id": 1, "name": "area-1"}"#.to_string()),
    ];
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (*p, t.clone())).collect();
    write_files(dir, &files);
}

/// A published list grows with its resource: a list over the 32 MB a record may have (here
/// made so with spaces, as a list of a few hundred thousand records is) is read.
#[test]
fn a_list_larger_than_a_record_may_be_is_imported() {
    let tmp = TempDir::new("long-list");
    let src = tmp.join("src");
    synthetic_tree(&src);
    let list = src.join("api/v2/location-area/index.json");
    let mut text = std::fs::read_to_string(&list).unwrap();
    text.insert_str(1, &" ".repeat(33 << 20));
    std::fs::write(&list, text).unwrap();
    let run = import(&src, &tmp.join("data"), &[]).ok();
    assert!(run.stdout().contains("imported 2 resources, 3 records"), "{}", run.stdout());
}

#[test]
fn sub_documents_and_meta() {
    let tmp = TempDir::new("subdocs");
    let src = tmp.join("src");
    synthetic_tree(&src);
    let data = tmp.join("data");
    let run = import(&src, &data, &[]).ok();
    assert!(run.stdout().contains("imported 2 resources, 3 records, 2 sub-documents"), "{}", run.stdout());
    assert!(!data.join("meta").exists(), "meta is deploy information, not a resource");
    assert_eq!(read_json(&data.join("creature/order.json")), serde_json::json!([132, 1]));
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let record = read_json(&out.join("api/v2/creature/132/index.json"));
    let published = read_json(&src.join("api/v2/pokemon/132/index.json"));
    assert_eq!(record, expected(&published, false));
    let sub = expected(&read_json(&src.join("api/v2/pokemon/132/encounters/index.json")), false);
    for key in ["132", "ditto"] {
        assert_eq!(read_json(&out.join(format!("api/v2/creature/{key}/encounters/index.json"))), sub);
    }
    assert_eq!(read_json(&out.join("api/v2/creature/bulb/encounters/index.json")), serde_json::json!([]));
    let config = read_json(&data.join("gen.json"));
    assert_eq!(config["external"], serde_json::json!(["creature-species"]));
}

#[test]
fn refuses_a_non_empty_folder_unless_forced() {
    let tmp = TempDir::new("force");
    let src = tmp.join("src");
    synthetic_tree(&src);
    let data = tmp.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("mine.txt"), "keep me").unwrap();
    let run = import(&src, &data, &[]).fails_with(2);
    assert!(run.stderr().contains("is not empty") && run.stderr().contains("--force"), "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(data.join("mine.txt")).unwrap(), "keep me");
    let run = import(&src, &data, &["--force"]).ok();
    // --force keeps what the import does not write, and says so
    assert_eq!(std::fs::read_to_string(data.join("mine.txt")).unwrap(), "keep me");
    assert!(run.stdout().contains("--force kept (not from the source): mine.txt"), "{}", run.stdout());
    assert!(data.join("creature/132.json").is_file());
}

#[test]
fn force_replaces_the_imported_segments_and_keeps_the_rest() {
    let tmp = TempDir::new("force-keeps");
    let src = tmp.join("src");
    synthetic_tree(&src);
    let data = tmp.join("data");
    write_files(
        &data,
        &[
            ("creature/999.json", r#"{"id": 999, "name": "stale"}"#.to_string()),
            ("berry/1.json", r#"{"id": 1, "name": "cheri"}"#.to_string()),
            ("NOTES.md", "my notes".to_string()),
            (
                "gen.json",
                r#"{"base_url": "https://api.example.org", "page_sizes": [20, 7], "external": ["old"]}"#.to_string(),
            ),
        ],
    );
    let run = import(&src, &data, &["--force"]).ok();
    let stdout = run.stdout();
    assert!(stdout.contains("--force replaced (from the source): creature/\n"), "{stdout}");
    assert!(stdout.contains("--force kept (not from the source): NOTES.md, berry/"), "{stdout}");
    assert!(stdout.contains("--force kept the settings in gen.json"), "{stdout}");
    assert!(!data.join("creature/999.json").exists(), "the imported segment is replaced whole");
    assert!(data.join("creature/132.json").is_file());
    assert_eq!(std::fs::read_to_string(data.join("NOTES.md")).unwrap(), "my notes");
    assert_eq!(read_json(&data.join("berry/1.json"))["name"], "cheri");
    let settings = read_json(&data.join("gen.json"));
    assert_eq!(settings["base_url"], "https://api.example.org");
    assert_eq!(settings["page_sizes"], serde_json::json!([20, 7]));
    assert_eq!(settings["external"], serde_json::json!(["creature-species"]));

    // Issue 26, item 15: a file of the user's inside an imported segment's folder is never
    // deleted unsaid: refused, naming it, nothing changed; once moved out, the import runs.
    std::fs::write(data.join("creature/notes.md"), "mine").unwrap();
    std::fs::create_dir_all(data.join("creature/132")).unwrap();
    std::fs::write(data.join("creature/132/sketch.png"), "mine too").unwrap();
    let before = read_tree(&data);
    let run = import(&src, &data, &["--force"]).fails_with(2);
    let said = run.stderr();
    for file in ["creature/132/sketch.png", "creature/notes.md"] {
        assert!(said.contains(&data.join(file).display().to_string()), "{file}: {said}");
    }
    assert!(said.contains("nothing was changed") && said.contains("move them out"), "{said}");
    assert!(read_tree(&data) == before, "a refused import changed the data folder");
    std::fs::rename(data.join("creature/notes.md"), data.join("notes.md")).unwrap();
    std::fs::remove_file(data.join("creature/132/sketch.png")).unwrap();
    let run = import(&src, &data, &["--force"]).ok();
    assert!(
        run.stdout().contains("--force kept (not from the source): NOTES.md, berry/, notes.md"),
        "{}",
        run.stdout()
    );

    // settings that are not an object are not silently dropped: refused, nothing changed
    std::fs::write(data.join("gen.json"), "[]").unwrap();
    let before = read_tree(&data);
    let run = import(&src, &data, &["--force"]).fails_with(2);
    assert!(run.stderr().contains("gen.json, but they are not a JSON object"), "{}", run.stderr());
    assert_eq!(read_tree(&data), before);
}

#[test]
fn an_output_folder_that_holds_the_source_is_refused() {
    let tmp = TempDir::new("force-source");
    let work = tmp.join("work");
    let src = work.join("api-data");
    synthetic_tree(&src);
    std::fs::write(work.join("other.txt"), "mine").unwrap();
    let before = read_tree(&work);
    for out in [work.clone(), src.clone(), tmp.path().to_path_buf(), work.join("api-data/..")] {
        let run = import(&src, &out, &["--force"]).fails_with(2);
        assert!(run.stderr().contains("holds the source"), "{}: {}", out.display(), run.stderr());
        assert_eq!(read_tree(&work), before, "{}", out.display());
    }
    // the same folder named from inside it (`--out "$PWD" --force`)
    let run = gen_bin()
        .current_dir(&work)
        .args(["import", "api-data", "api-data", "--out", work.to_str().unwrap(), "--force"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("holds the source"));
    assert_eq!(read_tree(&work), before);
}

#[test]
fn a_write_that_fails_is_one_error_not_a_data_problem_per_document() {
    // A full disk, as a write limit: with SIGXFSZ ignored (inherited through exec), every
    // write past `ulimit -f 0` fails with EFBIG, as writes fail with ENOSPC on a full disk.
    let tmp = TempDir::new("import-full");
    let src = tmp.join("src");
    synthetic_tree(&src);
    let data = tmp.join("data");
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 0 && exec "$0" import api-data "$1" --out "$2""#)
        .arg(env!("CARGO_BIN_EXE_gen"))
        .arg(&src)
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot write the data folder; nothing was changed"), "{stderr}");
    assert!(!stderr.contains("problem"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!data.exists(), "a failed import leaves nothing");
    let siblings: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(siblings.len(), 1, "{siblings:?}");
}

#[test]
fn bad_sources_report_every_problem_and_write_nothing() {
    let tmp = TempDir::new("badsrc");
    let src = tmp.join("src");
    synthetic_tree(&src);
    // a list naming a record that is missing, invalid JSON in a record, an id that disagrees
    std::fs::remove_dir_all(src.join("api/v2/pokemon/1")).unwrap();
    write_files(
        &src,
        &[
            ("api/v2/location-area/1/index.json", "{\"id\": 1,".to_string()),
            (
                "api/v2/location-area/index.json",
                r#"{"results": [{"url": "/api/v2/location-area/1/"}, {"url": "/api/v2/location-area/2/"}]}"#
                    .to_string(),
            ),
            ("api/v2/location-area/2/index.json", r#"{"id": 3}"#.to_string()),
        ],
    );
    let data = tmp.join("data");
    let run = import(&src, &data, &[]).fails_with(1);
    let stderr = run.stderr();
    assert!(stderr.contains("pokemon/index.json: $.results: the list names record 1"), "{stderr}");
    assert!(!data.exists(), "a failed import leaves nothing");
    // once the list is sound, every document problem is reported together
    write_files(
        &src,
        &[(
            "api/v2/pokemon/index.json",
            r#"{"results": [{"name": "ditto", "url": "/api/v2/pokemon/132/"}]}"#.to_string(),
        )],
    );
    let run = import(&src, &data, &[]).fails_with(1);
    let stderr = run.stderr();
    assert!(stderr.contains("location-area/1/index.json: line 1, column 9: invalid JSON"), "{stderr}");
    assert!(stderr.contains("location-area/2/index.json: $.id: the record's id is Some(3)"), "{stderr}");
    assert!(stderr.contains("2 problems"), "{stderr}");
    assert!(!data.exists(), "a failed import leaves nothing");
    let siblings: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(siblings.len(), 1, "{siblings:?}");

    // a list naming a record twice
    write_files(
        &src,
        &[(
            "api/v2/pokemon/index.json",
            r#"{"results": [{"name": "ditto", "url": "/api/v2/pokemon/132/"}, {"name": "ditto", "url": "/api/v2/pokemon/132/"}]}"#.to_string(),
        )],
    );
    let run = import(&src, &data, &[]).fails_with(1);
    assert!(
        run.stderr().contains("pokemon/index.json: $.results[1].url: record 132 is listed twice"),
        "{}",
        run.stderr()
    );

    let run = import(&tmp.join("nowhere"), &data, &[]).fails_with(2);
    assert!(run.stderr().contains("is not an api-data checkout"), "{}", run.stderr());
}

#[test]
fn device_files_and_fifos_in_the_source_are_refused_without_reading_them() {
    let tmp = TempDir::new("srcdevices");
    let src = tmp.join("src");
    synthetic_tree(&src);
    let record = src.join("api/v2/pokemon/1/index.json");
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &record).unwrap();
    let fifo = src.join("api/v2/location-area/1/index.json");
    std::fs::remove_file(&fifo).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let data = tmp.join("data");
    let mut child = gen_bin()
        .args(["import", "api-data", src.to_str().unwrap(), "--out", data.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("gen import still runs after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // a link to a device outside the source is refused as a link, before anything reads it
    assert!(stderr.contains("pokemon/1/index.json: $: links outside the source, to /dev/zero"), "{stderr}");
    assert!(stderr.contains("location-area/1/index.json: $: is a named pipe (FIFO)"), "{stderr}");
    assert!(!data.exists(), "a failed import leaves nothing");
}

/// A published source where two items share a name (as `item/723` and `item/2279` share
/// `roseli-berry` in the real data), listed highest id first, and other records refer to each
/// copy by that name.
fn shared_name_source(dir: &Path) {
    let item = |id: i64, extra: &str| format!(r#"{{"id": {id}, "name": "twin-berry"{extra}}}"#);
    let files = [
        (
            "api/v2/item/index.json",
            r#"{"count": 3, "next": null, "previous": null, "results": [{"name": "twin-berry", "url": "/api/v2/item/9/"}, {"name": "solo", "url": "/api/v2/item/1/"}, {"name": "twin-berry", "url": "/api/v2/item/4/"}]}"#.to_string(),
        ),
        ("api/v2/item/9/index.json", item(9, r#", "game_indices": []"#)),
        ("api/v2/item/4/index.json", item(4, r#", "game_indices": [{"game_index": 7}]"#)),
        ("api/v2/item/1/index.json", r#"{"id": 1, "name": "solo"}"#.to_string()),
        (
            "api/v2/berry/index.json",
            r#"{"count": 1, "next": null, "previous": null, "results": [{"name": "twin", "url": "/api/v2/berry/1/"}]}"#.to_string(),
        ),
        (
            "api/v2/berry/1/index.json",
            r#"{"id": 1, "name": "twin", "item": {"name": "twin-berry", "url": "/api/v2/item/9/"}, "also": [{"name": "twin-berry", "url": "/api/v2/item/4/"}]}"#.to_string(),
        ),
    ];
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (*p, t.clone())).collect();
    write_files(dir, &files);
}

#[test]
fn shared_names_are_declared_warned_about_and_served_from_the_lowest_id() {
    let tmp = TempDir::new("shared");
    let src = tmp.join("src");
    shared_name_source(&src);
    let data = tmp.join("data");
    let run = import(&src, &data, &[]).ok();
    let warning = run.stderr();
    assert!(
        warning.contains("warning: item: records 4, 9 share the name \"twin-berry\"")
            && warning.contains("/api/v2/item/twin-berry/ serves the lowest id, 4"),
        "{warning}"
    );
    assert_eq!(read_json(&data.join("gen.json"))["shared_names"], serde_json::json!({"item": ["twin-berry"]}));

    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    // every record by id equals the published one, and references to both copies by name hold
    for (segment, id) in [("item", 9), ("item", 4), ("item", 1), ("berry", 1)] {
        let published = read_json(&src.join(format!("api/v2/{segment}/{id}/index.json")));
        assert_eq!(read_json(&out.join(format!("api/v2/{segment}/{id}/index.json"))), expected(&published, false));
    }
    let lowest = expected(&read_json(&src.join("api/v2/item/4/index.json")), false);
    assert_eq!(read_json(&out.join("api/v2/item/twin-berry/index.json")), lowest);
    let server = serve_support::Server::start(&out, &[]);
    assert_eq!(server.get("/api/v2/item/twin-berry/").expect(200).json(), lowest);
    assert_eq!(server.get("/api/v2/item/TWIN-BERRY").expect(200).json(), lowest);
    assert_eq!(server.get("/api/v2/item/9/").expect(200).json()["game_indices"], serde_json::json!([]));
    // the list keeps both entries, in the published order
    let list = server.get("/api/v2/item/").expect(200).json();
    let urls: Vec<&str> = list["results"].as_array().unwrap().iter().map(|e| e["url"].as_str().unwrap()).collect();
    assert_eq!(
        urls,
        [format!("{BASE}/api/v2/item/9/"), format!("{BASE}/api/v2/item/1/"), format!("{BASE}/api/v2/item/4/")]
    );

    // the same data without the declaration fails, and the message says how to declare it
    let mut config = read_json(&data.join("gen.json"));
    config.as_object_mut().unwrap().remove("shared_names");
    std::fs::write(data.join("gen.json"), config.to_string()).unwrap();
    let run = build(&data, &tmp.join("out2"), &[]).fails_with(1);
    let stderr = run.stderr();
    assert!(
        stderr.contains("item/9.json: $.name: duplicate name \"twin-berry\"")
            && stderr.contains(r#""shared_names": {"item": ["twin-berry"]}"#)
            && stderr.contains("serves the lowest id, 4"),
        "{stderr}"
    );
}

#[test]
fn a_declared_shared_name_must_be_shared() {
    let tmp = TempDir::new("shared-bad");
    let data = tmp.join("data");
    write_files(
        &data,
        &[
            ("gen.json", r#"{"shared_names": {"berry": ["cheri", "pecha"], "nowhere": ["x"]}}"#.to_string()),
            ("berry/1.json", r#"{"id": 1, "name": "cheri"}"#.to_string()),
            ("berry/2.json", r#"{"id": 2, "name": "cheri"}"#.to_string()),
            ("berry/3.json", r#"{"id": 3, "name": "pecha"}"#.to_string()),
        ],
    );
    let run = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1);
    let stderr = run.stderr();
    assert!(
        stderr.contains(
            "gen.json: $.shared_names.berry[1]: \"pecha\" is declared shared but 1 record(s) of berry carry it"
        ) && stderr
            .contains(&format!("gen.json: $.shared_names.nowhere: {}/ holds no resource \"nowhere\"", data.display()))
            && stderr.contains("2 problems found"),
        "{stderr}"
    );
}

#[test]
fn an_output_folder_inside_the_source_is_refused() {
    let tmp = TempDir::new("out-inside-source");
    let src = tmp.join("api-data");
    synthetic_tree(&src);
    std::os::unix::fs::symlink(src.join("api/v2"), tmp.join("link-to-v2")).unwrap();
    let before = read_tree(&src);
    let outs = [
        src.join("api/v2"),
        src.join("api"),
        src.join("api/v2/pokemon"),
        src.join("api/v2/new-folder"),
        tmp.join("link-to-v2"),
        tmp.join("link-to-v2/pokemon"),
    ];
    for out in outs {
        for extra in [&["--force"][..], &[]] {
            let run = import(&src, &out, extra).fails_with(2);
            assert!(run.stderr().contains("inside the source"), "{}: {}", out.display(), run.stderr());
            assert_eq!(read_tree(&src), before, "--out {} {extra:?} changed the source", out.display());
        }
    }
}

#[test]
fn links_that_lead_outside_the_source_are_refused_with_their_path() {
    let tmp = TempDir::new("src-links-out");
    let src = tmp.join("src");
    synthetic_tree(&src);
    // a record linked to a JSON file elsewhere, and a segment folder linked to a folder elsewhere
    let secret = tmp.join("secret.json");
    std::fs::write(&secret, r#"{"id": 1, "name": "bulb", "token": "do-not-publish"}"#).unwrap();
    let record = src.join("api/v2/pokemon/1/index.json");
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(&secret, &record).unwrap();
    let elsewhere = tmp.join("elsewhere");
    std::fs::rename(src.join("api/v2/location-area"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, src.join("api/v2/location-area")).unwrap();
    // a link that stays inside the source is fine
    std::fs::rename(src.join("api/v2/meta"), src.join("meta-real")).unwrap();
    std::os::unix::fs::symlink(src.join("meta-real"), src.join("api/v2/meta")).unwrap();

    let data = tmp.join("data");
    let run = import(&src, &data, &[]).fails_with(1);
    let stderr = run.stderr();
    assert!(stderr.contains(&format!("{}: $: links outside the source", record.display())), "{stderr}");
    assert!(stderr.contains(&secret.display().to_string()), "the message names where the link leads: {stderr}");
    let area = src.join("api/v2/location-area/index.json");
    assert!(stderr.contains(&format!("{}: $: links outside the source", area.display())), "{stderr}");
    assert!(!stderr.contains("meta"), "a link inside the source is followed: {stderr}");
    assert!(!data.exists(), "a refused import writes nothing");

    // once the outside links are gone, the same source imports
    std::fs::remove_file(&record).unwrap();
    std::fs::copy(&secret, &record).unwrap();
    std::fs::remove_file(src.join("api/v2/location-area")).unwrap();
    std::fs::rename(&elsewhere, src.join("api/v2/location-area")).unwrap();
    import(&src, &data, &[]).ok();
    assert!(data.join("creature/1.json").is_file());
}

/// The tree of `data` built into `out`, `meta` aside: its document and the manifest (which
/// holds the data's hash and the meta document's) are the only files that depend on the
/// data folder's layout.
fn tree_without_meta(data: &Path, out: &Path, extra: &[&str]) -> std::collections::BTreeMap<String, Vec<u8>> {
    build(data, out, extra).ok();
    let mut tree = read_tree(out);
    tree.retain(|path, _| !path.starts_with(".gen") && path != "manifest.json" && !path.starts_with("api/v2/meta/"));
    tree
}

/// Issue 36 item 1: the sample data written as tables (each record file's bytes a line, in
/// list order, the sub-documents as `{"id", "document"}` lines) builds the same tree as the
/// folders, file for file, `meta` aside; with the default options and with
/// `--links path --gzip --pretty`.
#[test]
fn a_resource_as_a_table_builds_the_same_tree_as_its_folder() {
    let tmp = TempDir::new("tables-sample");
    let (files, tables) = (tmp.join("files"), tmp.join("tables"));
    sample_data(&files);
    std::fs::create_dir_all(&tables).unwrap();
    std::fs::copy(files.join("gen.json"), tables.join("gen.json")).unwrap();
    for entry in std::fs::read_dir(&files).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let segment = entry.file_name().to_string_lossy().to_string();
        let order = entry.path().join("order.json");
        let ids: Vec<i64> = match order.exists() {
            true => serde_json::from_slice(&std::fs::read(&order).unwrap()).unwrap(),
            false => {
                let mut ids: Vec<i64> = std::fs::read_dir(entry.path())
                    .unwrap()
                    .filter_map(|e| e.unwrap().file_name().to_string_lossy().strip_suffix(".json")?.parse().ok())
                    .collect();
                ids.sort();
                ids
            }
        };
        let mut lines = String::new();
        let mut subdocs = std::collections::BTreeMap::<String, String>::new();
        for id in ids {
            lines += &format!("{}\n", std::fs::read_to_string(entry.path().join(format!("{id}.json"))).unwrap());
            let Ok(subs) = std::fs::read_dir(entry.path().join(id.to_string())) else { continue };
            for sub in subs {
                let sub = sub.unwrap();
                let name = sub.file_name().to_string_lossy().strip_suffix(".json").unwrap().to_string();
                let document = std::fs::read_to_string(sub.path()).unwrap();
                *subdocs.entry(name).or_default() += &format!("{{\"id\": {id}, \"document\": {document}}}\n");
            }
        }
        // no newline after the last line: the file may end with one or not
        std::fs::write(tables.join(format!("{segment}.ndjson")), lines.trim_end()).unwrap();
        for (name, lines) in subdocs {
            std::fs::write(tables.join(format!("{segment}.{name}.ndjson")), lines).unwrap();
        }
    }
    assert!(tables.join("creature.encounters.ndjson").exists() && tables.join("form.ndjson").exists());
    for extra in [&[][..], &["--links", "path", "--gzip", "--pretty"][..]] {
        let from_files = tree_without_meta(&files, &tmp.join("out-files"), extra);
        let from_tables = tree_without_meta(&tables, &tmp.join("out-tables"), extra);
        assert!(from_files.len() > 100, "{}", from_files.len());
        assert_eq!(from_files.keys().collect::<Vec<_>>(), from_tables.keys().collect::<Vec<_>>(), "{extra:?}");
        for (path, bytes) in &from_files {
            assert!(&from_tables[path] == bytes, "{extra:?}: {path} differs");
        }
    }
}

/// Issue 36 item 1: `gen import api-data --layout ndjson` writes one table a resource (and its
/// sub-documents' tables), and the published data builds the same tree from it as from the
/// files layout, `meta` aside.
#[test]
fn the_published_data_imported_as_tables_builds_the_same_tree() {
    let Some(src) = fixture() else { return };
    let tmp = TempDir::new("tables-fixture");
    let (files, tables) = (tmp.join("files"), tmp.join("tables"));
    import(&src, &files, &[]).ok();
    import(&src, &tables, &["--layout", "ndjson"]).ok();
    let top: Vec<String> =
        std::fs::read_dir(&tables).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    assert!(top.iter().all(|name| name == "gen.json" || name.ends_with(".ndjson")), "{top:?}");
    assert!(top.contains(&"berry.ndjson".to_string()), "{top:?}");
    assert_eq!(std::fs::read(files.join("gen.json")).unwrap(), std::fs::read(tables.join("gen.json")).unwrap());
    for extra in [&[][..], &["--links", "path", "--gzip", "--pretty"][..]] {
        let from_files = tree_without_meta(&files, &tmp.join("out-files"), extra);
        let from_tables = tree_without_meta(&tables, &tmp.join("out-tables"), extra);
        assert_eq!(from_files.keys().collect::<Vec<_>>(), from_tables.keys().collect::<Vec<_>>(), "{extra:?}");
        for (path, bytes) in &from_files {
            assert!(&from_tables[path] == bytes, "{extra:?}: {path} differs");
        }
    }
}
