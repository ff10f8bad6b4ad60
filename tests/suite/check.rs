//! `gen check` and the validation step of `gen build`: every kind of bad data is reported
//! with its file and JSON location, all problems at once, and a build over an existing tree
//! leaves it untouched.

use crate::common;

use common::*;

/// A broken data folder: the sample data plus `files` written over it.
fn broken(label: &str, files: &[(&str, &[u8])]) -> TempDir {
    let tmp = TempDir::new(label);
    let data = tmp.join("data");
    sample_data(&data);
    for (rel, bytes) in files {
        let path = data.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    tmp
}

/// Asserts that `gen check` and `gen build` over an existing tree both fail with exit status
/// 1, report `expected` (a `path: location: message` fragment), and leave the tree untouched.
fn assert_reported(label: &str, files: &[(&str, &[u8])], expected: &[&str]) {
    let tmp = broken(label, &[]);
    let data = tmp.join("data");
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let before = read_tree(&out);
    for (rel, bytes) in files {
        let path = data.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let check = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1);
    let build = build(&data, &out, &[]).fails_with(1);
    for run in [&check, &build] {
        let stderr = run.stderr().replace(&format!("{}/", data.display()), "data/");
        for fragment in expected {
            assert!(stderr.contains(fragment), "{label}: expected {fragment:?} in:\n{stderr}");
        }
        assert!(stderr.contains(&format!("{} problem", expected.len())), "{label}: count in:\n{stderr}");
    }
    assert_eq!(read_tree(&out), before, "{label}: out/ changed");
}

#[test]
fn invalid_json_with_line_and_column() {
    assert_reported(
        "invalid-json",
        &[("berry/1.json", b"{\"id\": 1,\n  \"name\": \"berry-1\",,\n}")],
        &["data/berry/1.json: line 2, column 21: invalid JSON"],
    );
}

/// Issue 26, item 13: `{"v":1,"v":2}` was read as `{"v":2}` without a word.
#[test]
fn a_key_twice_in_a_record_is_a_problem_with_its_place() {
    assert_reported(
        "duplicate-key",
        &[
            ("berry/1.json", b"{\"id\": 1, \"name\": \"berry-1\", \"size\": 1,\n \"size\": 2}"),
            ("berry/2.json", b"{\"id\": 2, \"name\": \"berry-2\", \"flavors\": [{\"v\": 1, \"v\": 2}]}"),
        ],
        &[
            "data/berry/1.json: $: the key \"size\" appears twice in this object (again at line 2, column 2)",
            "data/berry/2.json: $.flavors[0]: the key \"v\" appears twice",
        ],
    );
}

/// Issue 34, item 16: serde_json's own mark for a number was read as the number: an id of
/// `{"$serde_json::private::Number": "1"}` passed as the integer 1. The problem is placed at the
/// object's closing brace, where the reader finds it whole.
#[test]
fn an_object_with_serde_jsons_number_mark_is_a_problem_not_a_number() {
    assert_reported(
        "number-mark",
        &[
            ("berry/1.json", b"{\"id\": {\"$serde_json::private::Number\": \"1\"}, \"name\": \"berry-1\"}"),
            (
                "berry/2.json",
                b"{\"id\": 2, \"name\": \"berry-2\",\n \"size\": {\"$serde_json::private::Numb\\u0065r\": \"2.5\"}}",
            ),
        ],
        &[
            "data/berry/1.json: line 1, column 44: an object with the key \"$serde_json::private::Number\", the JSON \
             reader's own mark for a number, which it would read as a number: rename the key",
            "data/berry/2.json: line 2, column 53: an object with the key",
        ],
    );
}

/// A record of about `mb` MB: an array of small objects, as a data file of many entries is.
fn large_record(id: i64, mb: usize) -> String {
    let mut entries = Vec::new();
    let mut size = 0;
    while size < mb << 20 {
        let n = entries.len();
        let entry = format!(r#"{{"name":"entry-{n}","value":{n},"weight":{n}.5,"flag":true,"tags":["a","b"]}}"#);
        size += entry.len() + 1;
        entries.push(entry);
    }
    format!(r#"{{"id": {id}, "name": "large-{id}", "entries": [{}]}}"#, entries.join(","))
}

/// Issue 34, item 15: a record parsed takes many times its size, and the build parsed one on
/// every thread at once: four records of 25 MB took four records' parses at once. Under a byte
/// budget across the parallel parses, four take about what one takes, on four threads too.
#[test]
fn parsing_large_records_at_once_holds_about_one_records_memory() {
    if heavy("it writes and checks 100 MB of records").is_none() {
        return;
    }
    let tmp = TempDir::new("parse-budget");
    let (one, four) = (tmp.join("one"), tmp.join("four"));
    for id in 1..=4 {
        let record = large_record(id, 25);
        if id == 1 {
            write_files(&one, &[("large/1.json", record.clone())]);
        }
        write_files(&four, &[(&format!("large/{id}.json"), record)]);
    }
    let threads = [("RAYON_NUM_THREADS", "4")];
    let (run_one, peak_one) = peak_memory(&["check", "--data", utf8(&one)], &threads);
    let (run_four, peak_four) = peak_memory(&["check", "--data", utf8(&four)], &threads);
    run_one.ok();
    run_four.ok();
    let mb = |bytes: u64| bytes >> 20;
    eprintln!("gen check peak: one 25 MB record {} MB, four {} MB", mb(peak_one), mb(peak_four));
    assert!(
        peak_four < peak_one * 3 / 2 && peak_four < 640 << 20,
        "four records of 25 MB took {} MB at peak, one took {} MB: the parses were not bounded together",
        mb(peak_four),
        mb(peak_one)
    );
}

#[test]
fn empty_file() {
    assert_reported("empty", &[("berry/1.json", b"")], &["data/berry/1.json: $: empty file"]);
}

#[test]
fn top_level_array() {
    assert_reported(
        "array",
        &[("berry/1.json", b"[1, 2]")],
        &["data/berry/1.json: $: a record must be a JSON object, not an array"],
    );
}

#[test]
fn invalid_utf8() {
    assert_reported(
        "utf8",
        &[("berry/1.json", b"{\"id\": 1,\n \"name\": \"b\xff\"}")],
        &["data/berry/1.json: line 2, column 12: invalid UTF-8"],
    );
}

#[test]
fn deep_nesting_does_not_overflow() {
    let deep = format!("{{\"id\": 1, \"x\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    assert_reported("deep", &[("berry/1.json", deep.as_bytes())], &["data/berry/1.json: line 1, column "]);
    let tmp = broken("deep2", &[("berry/1.json", deep.as_bytes())]);
    let check = run(&["check", "--data", tmp.join("data").to_str().unwrap()]).fails_with(1);
    assert!(check.stderr().contains("nested deeper than 128 levels"), "{}", check.stderr());
}

#[test]
fn id_missing_not_an_integer_or_not_the_file_name() {
    assert_reported(
        "ids",
        &[
            ("berry/1.json", b"{\"name\": \"berry-1\"}"),
            ("berry/2.json", b"{\"id\": \"2\", \"name\": \"berry-2\"}"),
            ("berry/3.json", b"{\"id\": 4, \"name\": \"berry-3\"}"),
            ("berry/5.json", b"{\"id\": 5.0, \"name\": \"berry-5\"}"),
        ],
        &[
            "data/berry/1.json: $: \"id\" is missing: add \"id\": 1",
            "data/berry/2.json: $.id: \"id\" must be an integer, not a string",
            "data/berry/3.json: $.id: id 4 does not match the file name",
            "data/berry/5.json: $.id: \"id\" must be an integer, not a number",
        ],
    );
}

#[test]
fn duplicate_and_malformed_names() {
    assert_reported(
        "names",
        &[
            ("berry/2.json", b"{\"id\": 2, \"name\": \"berry-1\"}"),
            ("berry/3.json", b"{\"id\": 3, \"name\": \"Berry 3\"}"),
            ("berry/4.json", b"{\"id\": 4, \"name\": \"404\"}"),
            ("berry/5.json", b"{\"id\": 5, \"name\": 5}"),
        ],
        &[
            "data/berry/2.json: $.name: duplicate name \"berry-1\": ",
            "data/berry/3.json: $.name: malformed name \"Berry 3\"",
            "data/berry/4.json: $.name: malformed name \"404\": an all-digit name would collide with an id path",
            "data/berry/5.json: $.name: \"name\" must be a string, not an integer",
        ],
    );
}

#[test]
fn bad_references() {
    assert_reported(
        "references",
        &[
            // dangling
            ("berry/1.json", b"{\"id\": 1, \"firmness\": {\"name\": \"firm-9\", \"url\": \"/api/v2/firmness/9/\"}}"),
            // unknown segment
            ("berry/2.json", b"{\"id\": 2, \"x\": [{\"url\": \"/api/v2/nowhere/1/\"}]}"),
            // name is not the target's
            ("berry/3.json", b"{\"id\": 3, \"firmness\": {\"name\": \"soft\", \"url\": \"/api/v2/firmness/1/\"}}"),
            // malformed urls
            (
                "berry/4.json",
                b"{\"id\": 4, \"a\": {\"url\": \"/api/v2/firmness/firm-1/\"}, \"b\": \"/api/v2/firmness/1\"}",
            ),
            // absolute instead of root-relative
            ("berry/6.json", b"{\"id\": 6, \"a\": {\"url\": \"https://pokeapi.co/api/v2/firmness/1/\"}}"),
        ],
        &[
            "data/berry/1.json: $.firmness.url: \"/api/v2/firmness/9/\" points to firmness 9, which does not exist",
            "data/berry/2.json: $.x[0].url: \"/api/v2/nowhere/1/\" points to segment \"nowhere\", which data/ does not hold",
            "data/berry/3.json: $.firmness.url: reference names \"soft\" but /api/v2/firmness/1/ is named \"firm-1\"",
            "data/berry/4.json: $.a.url: malformed url \"/api/v2/firmness/firm-1/\": refer to a record by its integer id",
            "data/berry/4.json: $.b: malformed url \"/api/v2/firmness/1\"",
            "data/berry/6.json: $.a.url: reference url \"https://pokeapi.co/api/v2/firmness/1/\" must be root-relative",
        ],
    );
}

/// Issue 47 item 6: a resource named as a document the tree keeps itself (`meta`, `bulk-data`)
/// would have its list written over that document (the manifest listing the path twice, and
/// `gen serve` refusing the tree): a data problem at the resource's folder or table, with the
/// reason; so is such a name among the external resources, and a folder named as the layout's
/// own (`_pages`) says why.
#[test]
fn a_resource_named_as_a_document_of_the_tree_is_a_data_problem_with_the_reason() {
    let record = br#"{"id": 1, "name": "one"}"#;
    let meta = "a resource cannot be named \"meta\": /api/v2/meta/ is the tree's meta document (generator, data \
                hash, build date), which gen writes itself; rename the resource (e.g. meta-records)";
    let bulk = "a resource cannot be named \"bulk-data\": /api/v2/bulk-data/ is the bulk-data index, which lists \
                every resource's bulk-data file (docs/tree.md), which gen writes itself; rename the resource \
                (e.g. bulk-data-records)";
    for (label, rel, at, message) in [
        ("meta-folder", "meta/1.json", "data/meta", meta),
        ("meta-table", "meta.ndjson", "data/meta.ndjson", meta),
        ("bulk-folder", "bulk-data/1.json", "data/bulk-data", bulk),
        ("bulk-table", "bulk-data.ndjson", "data/bulk-data.ndjson", bulk),
    ] {
        assert_reported(label, &[(rel, record)], &[&format!("{at}: $: {message}")]);
    }
    let settings = r#"{"base_url": "http://127.0.0.1:8080", "page_sizes": [20, 50, 100], "external": ["item", "meta"],
        "filters": {"berry": {"firmness": "firmness.name", "size": "size"}, "effect": ["appeal"]}}"#;
    assert_reported(
        "meta-external",
        &[("gen.json", settings.as_bytes())],
        &[
            "data/gen.json: $.external[1]: \"meta\" cannot be an external resource: /api/v2/meta/ is the tree's meta document",
        ],
    );
    assert_reported(
        "underscore",
        &[("_pages/1.json", record)],
        &[
            "data/_pages: -: folder name is not a valid segment: use lower-case letters, digits and '-' (it is the path segment in /api/v2/<segment>/); names starting with \"_\" are the folders gen writes inside a resource",
        ],
    );
}

#[test]
fn stray_files_and_bad_folders() {
    assert_reported(
        "stray",
        &[
            ("notes.txt", b"hello"),
            ("berry/cheri.json", b"{}"),
            ("berry/1.json.bak", b"{}"),
            ("Bad_Folder/1.json", b"{\"id\": 1}"),
            ("berry/7/encounters.txt", b"[]"),
        ],
        &[
            "data/notes.txt: -: stray file",
            "data/berry/cheri.json: -: stray file",
            "data/berry/1.json.bak: -: stray file",
            "data/Bad_Folder: -: folder name is not a valid segment",
            "data/berry/7/encounters.txt: -: stray file",
        ],
    );
}

#[test]
fn bad_order_and_settings() {
    assert_reported(
        "order",
        &[
            ("form/order.json", b"[1, 10001, 2, 2, 99, \"x\"]"),
            (
                "gen.json",
                b"{\"base_url\": \"http://127.0.0.1:8080/\", \"external\": [\"item\", \"Bad\"], \"colour\": 1}",
            ),
        ],
        &[
            "data/form/order.json: $[3]: id 2 is listed twice",
            "data/form/order.json: $[4]: id 99 has no record in this folder",
            "data/form/order.json: $[5]: expected a record id, found a string",
            "data/form/order.json: $: 2 record(s) missing from the order: 3, 10002",
            "data/gen.json: $.colour: unknown setting \"colour\"",
        ],
    );
}

#[test]
fn every_wrong_setting_is_reported_with_the_key_it_likely_meant() {
    assert_reported(
        "settings",
        &[("gen.json", b"{\"base-url\": \"http://x.test\", \"pagesizes\": [10], \"colour\": 1}")],
        &[
            "data/gen.json: $[\"base-url\"]: unknown setting \"base-url\": did you mean \"base_url\"?",
            "data/gen.json: $.pagesizes: unknown setting \"pagesizes\": did you mean \"page_sizes\"?",
            "data/gen.json: $.colour: unknown setting \"colour\": the keys are base_url, page_sizes",
        ],
    );
}

#[test]
fn references_say_how_to_fix_them() {
    assert_reported(
        "hints",
        &[
            ("berry/1.json", b"{\"id\": 1, \"a\": {\"url\": \"/api/v2/frimness/1/\"}}"),
            ("berry/2.json", b"{\"id\": 2, \"a\": {\"url\": \"/api/v2/firmness/1\"}}"),
            ("berry/3.json", b"{\"id\": 3, \"a\": {\"url\": \"/api/v2/firmness/firm-2/\"}}"),
            ("berry/4.json", b"{\"id\": 4, \"a\": {\"url\": \"/api/v2/firmness/frim-2/\"}}"),
        ],
        &[
            "data/berry/1.json: $.a.url: \"/api/v2/frimness/1/\" points to segment \"frimness\", which data/ does not hold: did you mean \"firmness\"?",
            "data/berry/2.json: $.a.url: malformed url \"/api/v2/firmness/1\": add the trailing /: \"/api/v2/firmness/1/\"",
            "data/berry/3.json: $.a.url: malformed url \"/api/v2/firmness/firm-2/\": refer to a record by its integer id (expected /api/v2/<segment>/<id>/, e.g. \
             /api/v2/berry-firmness/2/): \"firm-2\" is firmness 2, so write \"/api/v2/firmness/2/\"",
            "data/berry/4.json: $.a.url: malformed url \"/api/v2/firmness/frim-2/\": refer to a record by its integer id (expected /api/v2/<segment>/<id>/, e.g. \
             /api/v2/berry-firmness/2/): did you mean \"firm-2\"? refer to it by its id",
        ],
    );
}

#[test]
fn an_id_too_large_says_so() {
    assert_reported(
        "huge-id",
        &[("berry/1.json", b"{\"id\": 99999999999999999999999}")],
        &["data/berry/1.json: $.id: id 99999999999999999999999 is out of range: ids are integers from"],
    );
}

#[test]
fn a_trailing_comma_is_reported_at_the_comma() {
    assert_reported(
        "comma",
        &[("berry/1.json", b"{\"id\": 1,\n  \"name\": \"berry-1\",\n}\n")],
        &["data/berry/1.json: line 2, column 20: invalid JSON: trailing comma: remove it"],
    );
}

#[test]
fn an_empty_data_folder_is_a_problem() {
    let tmp = TempDir::new("empty-data");
    std::fs::create_dir_all(tmp.join("data")).unwrap();
    let run = run(&["check", "--data", tmp.join("data").to_str().unwrap()]).fails_with(1);
    assert!(run.stderr().contains("data: -: no records: add one folder per resource"), "{}", run.stderr());
}

#[test]
fn every_problem_is_reported_at_once() {
    let tmp = broken(
        "many",
        &[
            ("berry/1.json", b"{"),
            ("berry/2.json", b"[]"),
            ("berry/3.json", b"{\"id\": 3, \"a\": {\"url\": \"/api/v2/firmness/77/\"}}"),
            ("berry/4.json", b"{\"id\": 4, \"a\": {\"url\": \"/api/v2/firmness/78/\"}}"),
        ],
    );
    // problems of shape are all reported first; references are checked once shapes are sound
    let run = run(&["check", "--data", tmp.join("data").to_str().unwrap()]).fails_with(1);
    assert!(run.stderr().contains("2 problems found"), "{}", run.stderr());
    assert!(run.stderr().contains("more may follow"), "{}", run.stderr());
    std::fs::write(tmp.join("data/berry/1.json"), "{\"id\": 1}").unwrap();
    std::fs::write(tmp.join("data/berry/2.json"), "{\"id\": 2}").unwrap();
    let run = common::run(&["check", "--data", tmp.join("data").to_str().unwrap()]).fails_with(1);
    assert!(run.stderr().contains("firmness/77/"), "{}", run.stderr());
    assert!(run.stderr().contains("firmness/78/"), "{}", run.stderr());
    assert!(run.stderr().contains("2 problems found"), "{}", run.stderr());
}

#[test]
fn missing_data_folder() {
    let tmp = TempDir::new("missing");
    let missing = tmp.join("nope");
    // not a problem in the data but in the command: exit 2, as for every other error
    let run = run(&["check", "--data", missing.to_str().unwrap()]).fails_with(2);
    assert!(run.stderr().contains("nope: no such folder: point --data at"), "{}", run.stderr());
    let out = tmp.join("out");
    let build = build(&missing, &out, &[]);
    let build = build.fails_with(2);
    assert!(build.stderr().contains("nope: no such folder"), "{}", build.stderr());
    assert!(!out.exists());
}

#[test]
fn clean_data_checks() {
    let tmp = TempDir::new("clean");
    sample_data(&tmp.join("data"));
    let run = run(&["check", "--data", tmp.join("data").to_str().unwrap()]).ok();
    assert!(run.stdout().contains("6 resources, 155 records, no problems"), "{}", run.stdout());
}

#[test]
fn a_100_mb_record_is_refused_without_reading_it() {
    let big = format!("{{\"id\": 1, \"blob\": \"{}\"}}", "x".repeat(100 << 20));
    assert_reported(
        "huge",
        &[("berry/1.json", big.as_bytes())],
        &["data/berry/1.json: $: 100.0 MB, larger than the 32 MB limit"],
    );
}

#[test]
fn an_unreadable_file_is_named() {
    let tmp = TempDir::new("unreadable");
    let data = tmp.join("data");
    sample_data(&data);
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let before = read_tree(&out);
    // A link to nowhere cannot be read, whoever runs the test (root reads files whatever their mode).
    std::os::unix::fs::symlink(tmp.join("nowhere.json"), data.join("berry/5000.json")).unwrap();
    for args in [vec!["check"], vec!["build", "--out", out.to_str().unwrap()]] {
        let mut args = args.clone();
        args.extend(["--data", data.to_str().unwrap()]);
        let run = run(&args).fails_with(1);
        let stderr = run.stderr();
        assert!(stderr.contains("berry/5000.json: -: cannot read"), "{stderr}");
    }
    assert_eq!(read_tree(&out), before);
}

/// Runs `gen` like [`run`], but fails the test (and kills gen) if it takes over a minute.
fn run_bounded(args: &[&str]) -> Run {
    let mut child = gen_bin()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the gen binary runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("gen {args:?} still runs after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    Run { args: args.iter().map(|s| s.to_string()).collect(), output }
}

#[test]
fn devices_and_fifos_are_refused_without_reading_them_and_links_to_files_are_read() {
    let tmp = TempDir::new("devices");
    let data = tmp.join("data");
    sample_data(&data);
    // a record that is a link to a regular file outside the folder is read like any record
    std::fs::rename(data.join("berry/1.json"), tmp.join("berry-1.json")).unwrap();
    std::os::unix::fs::symlink(tmp.join("berry-1.json"), data.join("berry/1.json")).unwrap();
    let out = tmp.join("out");
    run_bounded(&["build", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()]).ok();
    let before = read_tree(&out);
    assert!(before.contains_key("api/v2/berry/1/index.json"));
    // /dev/zero has no size and never ends; a FIFO blocks its reader until a writer comes
    std::os::unix::fs::symlink("/dev/zero", data.join("berry/5001.json")).unwrap();
    let fifo = data.join("berry/5002.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for args in [vec!["check"], vec!["build", "--out", out.to_str().unwrap()]] {
        let mut args = args.clone();
        args.extend(["--data", data.to_str().unwrap()]);
        let run = run_bounded(&args).fails_with(1);
        let stderr = run.stderr().replace(&format!("{}/", data.display()), "data/");
        assert!(
            stderr.contains("data/berry/5001.json: $: is a character device (such as /dev/zero), not a regular file"),
            "{stderr}"
        );
        assert!(stderr.contains("data/berry/5002.json: $: is a named pipe (FIFO), not a regular file"), "{stderr}");
        assert!(stderr.contains("put a file with the content in its place"), "{stderr}");
        assert!(stderr.contains("2 problems"), "{stderr}");
    }
    assert_eq!(read_tree(&out), before);
}

#[test]
fn a_reader_that_goes_away_ends_gen_quietly() {
    // `gen check 2>&1 | head -1` over thousands of problems: the pipe closes while gen writes
    // (far more than a pipe holds), and gen ends with its status, without a panic.
    let tmp = TempDir::new("broken-pipe");
    let data = tmp.join("data");
    sample_data(&data);
    for id in 1000..4000 {
        std::fs::write(data.join(format!("berry/{id}.json")), "[]").unwrap();
    }
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#""$0" check --data "$1" 2>&1 | head -1; echo "status=${PIPESTATUS[0]}""#)
        .arg(env!("CARGO_BIN_EXE_gen"))
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("berry/1000.json"), "{stdout}");
    assert!(stdout.ends_with("status=1\n"), "{stdout}");
    assert!(!stdout.contains("panicked"), "{stdout}");
}

#[test]
fn empty_or_non_object_settings_are_named_as_settings() {
    for (label, bytes, expected) in [
        ("settings-empty", &b""[..], "data/gen.json: $: empty file: gen.json holds the settings as a JSON object"),
        ("settings-array", &b"[]"[..], "data/gen.json: $: the settings are an array, not a JSON object"),
        ("settings-number", &b"7"[..], "data/gen.json: $: the settings are a number, not a JSON object"),
    ] {
        assert_reported(label, &[("gen.json", bytes)], &[expected]);
    }
}

#[test]
fn base_urls_are_checked_as_urls() {
    let tmp = TempDir::new("base-urls");
    let data = tmp.join("data");
    sample_data(&data);
    let out = tmp.join("out");
    let settings = read_json(&data.join("gen.json"));
    for (url, says) in [
        ("http://example.org'", "as host"),
        ("http://example.org/<x>", "has '<' in its path"),
        ("http://example.org/{x}", "has '{' in its path"),
        ("http://user:pw@example.org", "has a user name or password"),
        ("http://example.org:99999", "a port is a number from 1 to 65535"),
    ] {
        let built = build(&data, &out, &["--base-url", url]).fails_with(2);
        let stderr = built.stderr();
        assert!(stderr.contains(says) && stderr.contains("http(s)://host[:port][/path]"), "{url}: {stderr}");
        assert!(!out.exists());
        // the same in gen.json is a data problem
        let mut bad = settings.clone();
        bad["base_url"] = url.into();
        std::fs::write(data.join("gen.json"), bad.to_string()).unwrap();
        let checked = run(&["check", "--data", data.to_str().unwrap()]).fails_with(1);
        let stderr = checked.stderr();
        assert!(stderr.contains("gen.json: $.base_url:") && stderr.contains(says), "{stderr}");
        std::fs::write(data.join("gen.json"), settings.to_string()).unwrap();
    }
    run(&[
        "build",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--base-url",
        "https://[::1]:8443/v2",
    ])
    .ok();
}

#[test]
fn a_name_longer_than_a_file_name_can_be_is_a_data_problem() {
    // A name is a folder name in the tree (api/v2/<segment>/<name>/): at most 255 bytes.
    let long = "a".repeat(256);
    assert_reported(
        "long-name",
        &[("berry/1.json", format!(r#"{{"id": 1, "name": "{long}"}}"#).as_bytes())],
        &[
            "data/berry/1.json: $.name: the name is 256 bytes long, and a name is a folder name in the tree: at most 255 bytes",
        ],
    );
    // 255 bytes is the limit, and builds
    let tmp = broken("longest-name", &[]);
    let data = tmp.join("data");
    let longest = "b".repeat(255);
    let record = read_json(&data.join("berry/1.json"));
    let mut record = record.as_object().unwrap().clone();
    record.insert("name".into(), longest.clone().into());
    std::fs::write(data.join("berry/1.json"), serde_json::to_vec(&record).unwrap()).unwrap();
    let out = tmp.join("out");
    run(&["build", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()]).ok();
    assert_eq!(read_json(&out.join(format!("api/v2/berry/{longest}/index.json")))["id"], 1);
}

/// Issue 36 item 1: a table's problems are reported at `data/<segment>.ndjson:LINE:COLUMN`,
/// with the JSON location when there is one: a syntax error, a bad id, a repeated id, a blank
/// line, and a sub-document table's bad line.
#[test]
fn a_bad_line_of_a_table_is_reported_at_its_line_and_column() {
    let nuts =
        b"{\"id\": 1, \"name\": \"nut-1\"}\n{\"id\": 2, \"name\": \"nut-2\",,}\n{\"id\": \"3\"}\n\n{\"id\": 1}\n";
    assert_reported(
        "table-bad-line",
        &[("nut.ndjson", nuts)],
        &[
            "data/nut.ndjson:2:27: -: invalid JSON: key must be a string",
            "data/nut.ndjson:3:1: $.id: \"id\" must be an integer",
            "data/nut.ndjson:4:1: $: blank line",
            "data/nut.ndjson:5:1: $.id: id 1 is on line 1 too",
        ],
    );
    assert_reported(
        "subdoc-table-bad-line",
        &[
            ("nut.ndjson", b"{\"id\": 1, \"name\": \"nut-1\"}\n{\"id\": 2}"),
            (
                "nut.shell.ndjson",
                b"{\"id\": 1, \"document\": [1]}\n{\"id\": 2, \"document\": tru}\n{\"id\": 9, \"document\": 1}\n",
            ),
        ],
        &[
            "data/nut.shell.ndjson:2:26: -: invalid JSON: expected ident",
            "data/nut.shell.ndjson:3:1: $: sub-document of nut 9, which has no record: add it to nut.ndjson or remove the line",
        ],
    );
}

/// A table is read in blocks of 1 MB: a line longer than a block is read whole (here 1.5 MB,
/// under a `max_document_mb` of 2), a line longer than `max_document_mb` is reported at its
/// line and passed over to its newline, and the lines after both are still read and reported
/// at their own line numbers.
#[test]
fn a_table_line_over_the_size_limit_is_reported_and_the_lines_after_it_read() {
    let long = |id: u32, kb: usize| format!("{{\"id\": {id}, \"text\": \"{}\"}}", "x".repeat(kb << 10));
    let nuts = format!(
        "{{\"id\": 1}}\n{}\r\n{{\"id\": 2}}\n{}\n{{\"id\": 2}}\n{{\"id\": \"3\"}}",
        long(8, 1536),
        long(9, 9 << 10)
    );
    let settings = r#"{"base_url": "http://127.0.0.1:8080", "page_sizes": [20, 50, 100], "external": ["item"],
        "filters": {"berry": {"firmness": "firmness.name", "size": "size"}, "effect": ["appeal"]}, "max_document_mb": 2}"#;
    assert_reported(
        "table-long-line",
        &[("gen.json", settings.as_bytes()), ("nut.ndjson", nuts.as_bytes())],
        &[
            "data/nut.ndjson:4:1: $: a line longer than the 2 MB limit",
            "data/nut.ndjson:5:1: $.id: id 2 is on line 3 too",
            "data/nut.ndjson:6:1: $.id: \"id\" must be an integer",
        ],
    );
}

/// Issue 36 item 1: a resource held both as a folder and as a table is a problem naming both;
/// a sub-document table of a folder resource says where its sub-documents go.
#[test]
fn a_resource_held_as_a_folder_and_as_a_table_names_both() {
    assert_reported(
        "held-twice",
        &[("berry.ndjson", b"{\"id\": 1}\n"), ("firmness.flavor.ndjson", b"{\"id\": 1, \"document\": 1}\n")],
        &[
            "data/berry.ndjson: $: berry is held twice, as data/berry and as data/berry.ndjson: keep one",
            "data/firmness.flavor.ndjson: $: sub-documents of firmness, which is not held as a table",
        ],
    );
}

/// `data/<segment>.ndjson:LINE:COLUMN` of `needle` (the column of its first byte) in `line`, line
/// `number` of the table `table`.
fn at_text(table: &str, number: u32, line: &str, needle: &str) -> String {
    let column = line.find(needle).unwrap_or_else(|| panic!("{needle:?} in {line:?}")) + 1;
    format!("data/{table}:{number}:{column}")
}

/// Issue 47 item 5: a table's line is read by the reader a file is read by. Before, a byte
/// order mark was "invalid JSON", and a sub-document table's line was read by serde_json's own:
/// `"id"` or `"document"` written twice kept the last, and serde_json's number mark was read as
/// the number, as the `id` too; a record's `id` written twice was the last. Each is now a problem
/// at the line and column, in a table's terms, and the same in a file.
#[test]
fn a_table_line_is_read_by_the_reader_a_file_is_read_by() {
    let nuts =
        "\u{feff}{\"id\": 1, \"name\": \"nut-1\"}\n{\"id\": 2}\n{\"id\": 3}\n{\"id\": 4}\n{\"id\": 5, \"id\": 6}\n";
    // `id` written twice: was the last in a table (6) and in a file (here "does not match")
    let berry = b"{\"id\": 1, \"id\": 2, \"name\": \"berry-1\"}";
    let lines = [
        r#"{"id": 2, "id": 2, "document": 1}"#,
        r#"{"id": 3, "document": 1, "document": 2}"#,
        r#"{"id": {"$serde_json::private::Number": "4"}, "document": 1}"#,
    ];
    let shells = lines.join("\n");
    let twice = |key: &str| format!(": $: the key \"{key}\" appears twice in this object: a JSON reader keeps one");
    assert_reported(
        "table-reader",
        &[("nut.ndjson", nuts.as_bytes()), ("nut.shell.ndjson", shells.as_bytes()), ("berry/1.json", berry)],
        &[
            "data/nut.ndjson:1:1: -: a byte order mark (U+FEFF) starts the JSON text, and JSON has none",
            &format!("data/nut.ndjson:5:11{}", twice("id")),
            "data/berry/1.json: $: the key \"id\" appears twice in this object (again at line 1, column 11)",
            &(at_text("nut.shell.ndjson", 1, lines[0], "\"id\": 2, \"doc") + &twice("id")),
            &(at_text("nut.shell.ndjson", 2, lines[1], "\"document\": 2") + &twice("document")),
            &(at_text("nut.shell.ndjson", 3, lines[2], "}, \"document\"")
                + ": -: an object with the key \"$serde_json::private::Number\""),
        ],
    );
}

/// Issue 47 item 5: a table's documents are held to every check a file's are when they are
/// rendered, reported at the table's line and column: a key written twice (before: placed at
/// "line 1" of the record's text, or kept silently in a sub-document), serde_json's number mark
/// in a sub-document (before: the line was dropped without a word, and the build succeeded
/// without the sub-document); and a missing record or sub-document of a table says to add a
/// line, not a file (adding the file would hold the resource twice).
#[test]
fn a_table_line_is_held_to_the_checks_of_a_file_when_rendered() {
    let nuts = [
        r#"{"id": 1, "name": "nut-1", "size": 1, "size": 2}"#,
        r#"{"id": 2, "name": "nut-2", "friend": {"name": "nut-9", "url": "/api/v2/nut/999/"}}"#,
        r#"{"id": 3, "husk": "/api/v2/nut/3/husk/"}"#,
        r#"{"id": 4}"#,
    ];
    let shells = [
        r#"{"id": 1, "document": {"a": [{"v": 1, "v": 2}]}}"#,
        r#"{"id": 4, "document": {"$serde_json::private::Number": "x"}}"#,
    ];
    let (nut_table, shell_table) = (nuts.join("\n"), shells.join("\r\n"));
    let twice = |key: &str| format!("the key \"{key}\" appears twice in this object: a JSON reader keeps one");
    assert_reported(
        "table-render",
        &[("nut.ndjson", nut_table.as_bytes()), ("nut.shell.ndjson", shell_table.as_bytes())],
        &[
            &format!("{}: $: {}", at_text("nut.ndjson", 1, nuts[0], "\"size\": 2"), twice("size")),
            "data/nut.ndjson:2:1: $.friend.url: \"/api/v2/nut/999/\" points to nut 999, which does not exist: add a \
             line with \"id\": 999 to data/nut.ndjson",
            "data/nut.ndjson:3:1: $.husk: \"/api/v2/nut/3/husk/\" points to a sub-document that does not exist: add \
             a line {\"id\": 3, \"document\": ...} to data/nut.husk.ndjson",
            &format!("{}: $.a[0]: {}", at_text("nut.shell.ndjson", 1, shells[0], "\"v\": 2"), twice("v")),
            &format!(
                "{}: -: an object with the key \"$serde_json::private::Number\"",
                at_text("nut.shell.ndjson", 2, shells[1], "}}")
            ),
        ],
    );
}

/// Issue 47: a table is opened as a record file is: a FIFO (which hung `gen check` and `gen
/// build`, the build holding out/'s lock), a link to `/dev/zero` (read for ever) or to
/// `/dev/urandom` (read until memory ran out) is refused without being read, with its path;
/// a link to a regular file is read. Nothing waits: a build after them runs.
#[test]
fn tables_that_are_not_regular_files_are_refused_without_reading_them() {
    let tmp = TempDir::new("table-devices");
    let data = tmp.join("data");
    sample_data(&data);
    std::fs::write(tmp.join("nut.ndjson"), "{\"id\": 1, \"name\": \"nut-1\"}\n").unwrap();
    std::os::unix::fs::symlink(tmp.join("nut.ndjson"), data.join("nut.ndjson")).unwrap();
    let out = tmp.join("out");
    let (data_arg, out_arg) = (utf8(&data).to_string(), utf8(&out).to_string());
    assert_eq!(guarded(&["build", "--data", &data_arg, "--out", &out_arg]).code, Some(0));
    let before = read_tree(&out);
    assert!(before.contains_key("api/v2/nut/1/index.json"), "a link to a table is read");
    make_hostile(&data.join("zero.ndjson"), "zero");
    make_hostile(&data.join("pipe.ndjson"), "fifo");
    make_hostile(&data.join("nut.shell.ndjson"), "fifo");
    std::os::unix::fs::symlink("/dev/urandom", data.join("random.ndjson")).unwrap();
    for args in [vec!["check", "--data", &data_arg], vec!["build", "--data", &data_arg, "--out", &out_arg]] {
        let ended = guarded(&args);
        assert!(!ended.killed && ended.code == Some(1), "{args:?}: {}", ended.describe());
        let stderr = ended.stderr.replace(&format!("{data_arg}/"), "data/");
        for (table, kind) in [
            ("zero", "a character device"),
            ("random", "a character device"),
            ("pipe", "a named pipe (FIFO)"),
            ("nut.shell", "a named pipe (FIFO)"),
        ] {
            let expected = format!("data/{table}.ndjson: $: is {kind}");
            assert!(stderr.contains(&expected), "{args:?}: {expected:?} in\n{stderr}");
        }
        assert!(stderr.contains("4 problems"), "{stderr}");
    }
    assert_eq!(read_tree(&out), before);
    for table in ["zero", "pipe", "nut.shell", "random"] {
        std::fs::remove_file(data.join(format!("{table}.ndjson"))).unwrap();
    }
    assert_eq!(guarded(&["build", "--data", &data_arg, "--out", &out_arg]).code, Some(0), "out/ is not held");
}

/// Issue 48: the messages that name the data folder (a stray file at its top, what to add for a
/// reference that resolves nowhere, `external` and `shared_names` against what it holds) said
/// `data/` whatever the folder is called. They name the folder given, here `mydata/`.
#[test]
fn messages_name_the_data_folder_by_the_name_it_has() {
    let tmp = TempDir::new("mydata");
    let data = tmp.join("mydata");
    let in_tmp = |args: &[&str]| {
        let output = gen_bin().current_dir(tmp.path()).args(args).output().expect("the gen binary runs");
        assert_eq!(output.status.code(), Some(1), "gen {args:?}:\n{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stderr).to_string()
    };
    let berry =
        |id: i64, reference: &str| format!(r#"{{"id": {id}, "name": "b-{id}", "to": {{"url": "{reference}"}}}}"#);
    // a stray file at the top
    write_files(&data, &[("berry/1.json", berry(1, "/api/v2/berry/1/")), ("notes.txt", "hello".to_string())]);
    for command in ["check", "build"] {
        let stderr = in_tmp(&[command, "--data", "mydata"]);
        assert!(
            stderr.contains(
                "mydata/notes.txt: -: stray file: the data folder mydata/ holds gen.json, one folder per resource"
            ),
            "gen {command}:\n{stderr}"
        );
        assert!(!stderr.contains(" data/"), "gen {command}:\n{stderr}");
    }
    // `external` and `shared_names` (these stop the run before references are checked)
    std::fs::remove_file(data.join("notes.txt")).unwrap();
    write_files(&data, &[("gen.json", r#"{"external": ["berry"], "shared_names": {"nut": ["x"]}}"#.to_string())]);
    // references to what is not there, in both layouts
    let references = [
        ("berry/1.json", berry(1, "/api/v2/berry/99/")),
        ("berry/2.json", berry(2, "/api/v2/nowhere/1/")),
        ("berry/3.json", berry(3, "/api/v2/berry/1/gone/")),
        ("pit.ndjson", format!("{}\n", berry(1, "/api/v2/pit/7/").replace("b-1", "p-1"))),
    ];
    let settings = ["\"berry\" is declared external but mydata/ holds it", "mydata/ holds no resource \"nut\""];
    let missing = [
        "add mydata/berry/99.json",
        "which mydata/ does not hold: add mydata/nowhere/ or declare it",
        "add mydata/berry/1/gone.json",
        "add a line with \"id\": 7 to mydata/pit.ndjson",
    ];
    for expected in [&settings[..], &missing[..]] {
        if expected == missing {
            std::fs::remove_file(data.join("gen.json")).unwrap();
            write_files(&data, &references);
        }
        for command in ["check", "build"] {
            let stderr = in_tmp(&[command, "--data", "mydata"]);
            for expected in expected {
                assert!(stderr.contains(expected), "gen {command}: no {expected:?} in:\n{stderr}");
            }
            assert!(!stderr.contains(" data/"), "gen {command}:\n{stderr}");
        }
    }
}
