//! The core test of incremental builds: one tree is rebuilt in place through a random sequence
//! of edits (records changed, added, deleted and renamed, sub-documents added and removed, list
//! order and settings changed, files touched or rewritten with their old modification time,
//! broken edits that must fail; the things held as tables, `thing.ndjson`, their lines edited,
//! added, deleted and moved, and the layout switched back and forth; the things' declared
//! filters' values and localized names changing with those edits), and after every step it must
//! equal, file by file and in its manifest, a fresh build of the same data into an empty folder.
//!
//! Its edit generator ([`Model`]) drives the archive's too (`archive_build.rs`).
//!
//! `cargo test` runs `INCREMENTAL_STEPS` steps (default 40); `make fuzz` runs 400 with a fresh
//! seed (`FUZZ_SEED` replays one).

use crate::common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

fn steps() -> usize {
    if let Some(n) = std::env::var("INCREMENTAL_STEPS").ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if std::env::var("FUZZ_ITERATIONS").is_ok() { 400 } else { 40 }
}

/// The data folder, as the test models it.
pub(crate) struct Model {
    /// Kinds: id → name.
    kinds: BTreeMap<i64, String>,
    /// List order of kinds, when an order file states one.
    kind_order: Option<Vec<i64>>,
    /// Things: id → (name, kind, friend, value).
    pub(crate) things: BTreeMap<i64, Thing>,
    /// Sub-documents: thing id → body.
    notes: BTreeMap<i64, String>,
    page_sizes: Vec<u64>,
    next_id: i64,
    /// Things (and their notes) held as tables, `thing.ndjson` and `thing.notes.ndjson`, one a
    /// line in `lines` order, instead of one file each.
    pub(crate) tables: bool,
    /// The order of the tables' lines: every thing's id.
    lines: Vec<i64>,
}

#[derive(Clone)]
pub(crate) struct Thing {
    name: Option<String>,
    kind: i64,
    friend: Option<i64>,
    value: String,
}

const VALUES: [&str; 8] = ["1", "22", "-3", "4.5", "\"text\"", "null", "[1, 2]", "{\"deep\": true}"];

impl Model {
    pub(crate) fn new(rng: &mut Rng) -> Model {
        let kinds = (1..=6).map(|id| (id, format!("kind-{id}"))).collect();
        let mut things = BTreeMap::new();
        for id in 1..=70 {
            let name = (id % 7 != 0).then(|| format!("thing-{id}"));
            let friend = (id > 1 && id % 3 == 0).then(|| id - 1);
            things.insert(id, Thing { name, kind: id % 6 + 1, friend, value: VALUES[rng.below(4)].to_string() });
        }
        let notes = [(3, "[1]".to_string()), (9, "{\"a\": 1}".to_string())].into();
        let lines = things.keys().copied().collect();
        Model { kinds, kind_order: None, things, notes, page_sizes: vec![7, 20], next_id: 71, tables: false, lines }
    }

    fn thing_text(id: i64, t: &Thing) -> String {
        let mut text = format!(r#"{{"id": {id}, "kind": {{"url": "/api/v2/kind/{}/"}}, "value": {}"#, t.kind, t.value);
        if let Some(name) = &t.name {
            text.push_str(&format!(r#", "name": "{name}""#));
            if id % 5 == 0 {
                text.push_str(&format!(r#", "names": [{{"name": "{name}-fr", "language": {{"name": "fr"}}}}]"#));
            }
        }
        if let Some(friend) = t.friend {
            text.push_str(&format!(r#", "friend": {{"url": "/api/v2/thing/{friend}/"}}"#));
        }
        text.push('}');
        text
    }

    /// Every file of the data folder: path → text.
    fn files(&self) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        let sizes: Vec<String> = self.page_sizes.iter().map(u64::to_string).collect();
        files.insert(
            "gen.json".to_string(),
            format!(
                r#"{{"base_url": "http://127.0.0.1:8080", "page_sizes": [{}],
                "filters": {{"thing": {{"value": "value", "kind": "kind.url"}}}}}}"#,
                sizes.join(", ")
            ),
        );
        for (id, name) in &self.kinds {
            files.insert(format!("kind/{id}.json"), format!(r#"{{"id": {id}, "name": "{name}"}}"#));
        }
        if let Some(order) = &self.kind_order {
            let ids: Vec<String> = order.iter().map(i64::to_string).collect();
            files.insert("kind/order.json".to_string(), format!("[{}]", ids.join(", ")));
        }
        if self.tables {
            let things: Vec<String> = self.lines.iter().map(|id| Model::thing_text(*id, &self.things[id])).collect();
            files.insert("thing.ndjson".to_string(), things.join("\n") + "\n");
            let notes: Vec<String> = (self.lines.iter())
                .filter_map(|id| Some(format!(r#"{{"id": {id}, "document": {}}}"#, self.notes.get(id)?)))
                .collect();
            if !notes.is_empty() {
                files.insert("thing.notes.ndjson".to_string(), notes.join("\n"));
            }
            return files;
        }
        for (id, thing) in &self.things {
            files.insert(format!("thing/{id}.json"), Model::thing_text(*id, thing));
        }
        for (id, body) in &self.notes {
            files.insert(format!("thing/{id}/notes.json"), body.clone());
        }
        files
    }

    /// Makes `dir` hold exactly the model's files, writing only those that differ.
    pub(crate) fn sync(&self, dir: &Path) {
        let wanted = self.files();
        let present = if dir.exists() { read_tree(dir) } else { BTreeMap::new() };
        for (path, text) in &wanted {
            if present.get(path).map(Vec::as_slice) != Some(text.as_bytes()) {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(file, text).unwrap();
            }
        }
        for path in present.keys().filter(|p| !wanted.contains_key(*p)) {
            std::fs::remove_file(dir.join(path)).unwrap();
            let _ = std::fs::remove_dir(dir.join(path).parent().unwrap()); // an emptied notes folder
        }
        let _ = std::fs::remove_dir(dir.join("thing")); // emptied: the things are tables now
    }

    pub(crate) fn random_thing(&self, rng: &mut Rng) -> i64 {
        let ids: Vec<i64> = self.things.keys().copied().collect();
        ids[rng.below(ids.len())]
    }

    /// Applies one random edit; returns what it did.
    pub(crate) fn edit(&mut self, rng: &mut Rng, step: usize) -> String {
        match rng.below(13) {
            0 | 1 => {
                let id = self.random_thing(rng);
                let value = VALUES[rng.below(VALUES.len())].to_string();
                self.things.get_mut(&id).unwrap().value = value.clone();
                format!("thing {id} value = {value}")
            }
            2 => {
                let id = self.next_id;
                self.next_id += 1 + rng.below(3) as i64;
                let name = (rng.below(3) > 0).then(|| format!("thing-{id}"));
                let friend = (rng.below(2) == 0).then(|| self.random_thing(rng));
                let kind = 1 + rng.below(6) as i64;
                self.things.insert(id, Thing { name, kind, friend, value: "7".into() });
                self.lines.insert(rng.below(self.lines.len() + 1), id);
                format!("add thing {id}")
            }
            3 if self.things.len() > 5 => {
                let id = self.random_thing(rng);
                self.things.remove(&id);
                self.notes.remove(&id);
                self.lines.retain(|line| *line != id);
                for thing in self.things.values_mut() {
                    if thing.friend == Some(id) {
                        thing.friend = None;
                    }
                }
                format!("delete thing {id}")
            }
            4 => {
                let id = self.random_thing(rng);
                let name = match rng.below(3) {
                    0 => None,
                    _ => Some(format!("t{id}-s{step}")),
                };
                self.things.get_mut(&id).unwrap().name = name.clone();
                format!("rename thing {id} to {name:?}")
            }
            5 => {
                let id = 1 + rng.below(6) as i64;
                let name = format!("kind-{id}-s{step}");
                self.kinds.insert(id, name.clone());
                format!("rename kind {id} to {name}")
            }
            6 => {
                if rng.below(3) == 0 {
                    self.kind_order = None;
                    "kind order removed".into()
                } else {
                    let mut ids: Vec<i64> = self.kinds.keys().copied().collect();
                    for i in (1..ids.len()).rev() {
                        ids.swap(i, rng.below(i + 1));
                    }
                    self.kind_order = Some(ids.clone());
                    format!("kind order {ids:?}")
                }
            }
            7 => {
                let sets: [&[u64]; 4] = [&[7, 20], &[20], &[3, 50], &[5, 20, 100]];
                self.page_sizes = sets[rng.below(sets.len())].to_vec();
                format!("page sizes {:?}", self.page_sizes)
            }
            8 => {
                let id = self.random_thing(rng);
                if self.notes.remove(&id).is_some() {
                    format!("notes of {id} removed")
                } else {
                    let body = ["[]", "[1, 2]", "{\"a\": \"b\"}", "\"x\""][rng.below(4)].to_string();
                    self.notes.insert(id, body);
                    format!("notes of {id} added")
                }
            }
            11 => {
                self.tables = !self.tables;
                format!("things held as {}", if self.tables { "tables" } else { "files" })
            }
            12 if self.tables => {
                let id = self.lines.remove(rng.below(self.lines.len()));
                let at = rng.below(self.lines.len() + 1);
                self.lines.insert(at, id);
                format!("line of thing {id} moved to line {}", at + 1)
            }
            _ => {
                let id = self.random_thing(rng);
                let kind = 1 + rng.below(6) as i64;
                self.things.get_mut(&id).unwrap().kind = kind;
                format!("thing {id} kind = {kind}")
            }
        }
    }
}

/// Rewrites a data file with other bytes of the same size and puts its old modification time
/// back: only its change time and contents tell.
fn rewrite_keeping_mtime(file: &Path) -> bool {
    let text = std::fs::read_to_string(file).unwrap();
    let Some(pos) = text.find("\"value\": ") else { return false };
    let at = pos + "\"value\": ".len();
    let old = text.as_bytes()[at];
    if !old.is_ascii_digit() {
        return false;
    }
    let new = if old == b'9' { '8' } else { (old + 1) as char };
    let mut changed = text.clone();
    changed.replace_range(at..at + 1, &new.to_string());
    let mtime = std::fs::metadata(file).unwrap().modified().unwrap();
    std::fs::write(file, changed).unwrap();
    std::fs::File::options().write(true).open(file).unwrap().set_modified(mtime).unwrap();
    true
}

/// Bulk-data members of about 400 bytes of records: every file of a few records has several,
/// so that edits, inserts, deletes and moves of lines exercise the members copied from the
/// previous file.
pub(crate) const SMALL_MEMBERS: [(&str, &str); 1] = [("GEN_BULK_MEMBER_BYTES", "400")];

#[test]
fn incremental_builds_equal_fresh_builds_through_random_edits() {
    let Some(()) = heavy("it runs long (40 random edits, each rebuilt and built afresh)") else { return };
    let tmp = TempDir::new("incremental");
    let data = tmp.join("data");
    let out = tmp.join("out");
    let mut rng = Rng(seed("incremental", 0x2545_f491_4f6c_dd1d));
    let mut model = Model::new(&mut rng);
    model.sync(&data);
    // Files older than the build's trust window are taken from the index without being read:
    // let the first files age, so that later steps exercise that path too.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let option_sets: [&[&str]; 3] = [&[], &["--pretty"], &["--gzip", "--links", "path"]];
    let mut options = option_sets[0];
    build_with(&data, &out, options, &SMALL_MEMBERS).ok();
    let (mut failed, mut patched) = (0, 0);
    for step in 0..steps() {
        let what = match rng.below(12) {
            0 => {
                options = option_sets[rng.below(option_sets.len())];
                format!("options {options:?}")
            }
            1 if !model.tables => {
                // a broken edit: a reference to a record that does not exist
                let before = read_tree(&out);
                let id = model.random_thing(&mut rng);
                let file = data.join(format!("thing/{id}.json"));
                let good = std::fs::read(&file).unwrap();
                std::fs::write(&file, format!(r#"{{"id": {id}, "friend": {{"url": "/api/v2/thing/999999/"}}}}"#))
                    .unwrap();
                let run = build_with(&data, &out, options, &SMALL_MEMBERS).fails_with(1);
                assert!(run.stderr().contains(&format!("thing/{id}.json")), "{}", run.stderr());
                assert!(read_tree(&out) == before, "step {step}: a failed build changed the tree");
                std::fs::write(&file, good).unwrap();
                failed += 1;
                format!("broken edit of thing {id}, then undone")
            }
            2 if !model.tables => {
                let id = model.random_thing(&mut rng);
                let file = data.join(format!("thing/{id}.json"));
                if rewrite_keeping_mtime(&file) {
                    // the model follows the file
                    let text = std::fs::read_to_string(&file).unwrap();
                    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
                    model.things.get_mut(&id).unwrap().value = value["value"].to_string();
                    format!("thing {id} rewritten with its old mtime")
                } else {
                    std::fs::write(&file, std::fs::read(&file).unwrap()).unwrap();
                    format!("thing {id} touched")
                }
            }
            _ => {
                let what = model.edit(&mut rng, step);
                model.sync(&data);
                what
            }
        };
        let run = build_with(&data, &out, options, &[SMALL_MEMBERS[0], ("GEN_TIMINGS", "1")]).ok();
        patched += usize::from(run.stderr().contains("manifest patched"));
        let fresh = tmp.join(&format!("fresh-{step}"));
        build_with(&data, &fresh, options, &SMALL_MEMBERS).ok();
        let (ours, theirs) = (read_tree(&out), read_tree(&fresh));
        if ours != theirs {
            let differ: Vec<&String> =
                ours.keys().chain(theirs.keys()).filter(|k| ours.get(*k) != theirs.get(*k)).take(10).collect();
            panic!(
                "step {step} ({what}, options {options:?}): the rebuilt tree differs from a fresh build at {differ:?}"
            );
        }
        std::fs::remove_dir_all(&fresh).unwrap();
        let _ = std::fs::remove_dir_all(tmp.join(&format!(".fresh-{step}.gen")));
    }
    eprintln!("{} steps, {failed} broken edits refused, {patched} manifests patched", steps());
    assert!(steps() < 20 || patched > 0, "no step patched the previous manifest: the patch went untested");
}

/// `gen build` with `GEN_TIMINGS=1`: its steps' timings on stderr.
fn timed_build(data: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["build", "--data", utf8(data), "--out", utf8(out)];
    args.extend_from_slice(extra);
    let output = gen_bin().args(&args).env("GEN_TIMINGS", "1").output().expect("the gen binary runs");
    Run { args: args.iter().map(|s| s.to_string()).collect(), output }.ok()
}

/// The number of manifest entries a build says it patched (`GEN_TIMINGS`), when it did.
fn manifest_patched(run: &Run) -> Option<usize> {
    let stderr = run.stderr();
    let at = stderr.find("manifest patched: ")? + "manifest patched: ".len();
    stderr[at..].split(' ').next()?.parse().ok()
}

/// A named change of the model.
type ModelEdit = dyn Fn(&mut Model);

/// A build that changes a few documents writes its manifest by patching the previous one: it
/// says how many entries it changed (a handful of a tree's), and the manifest and tree are a
/// fresh build's, byte for byte: after an edit, after records added whose paths sort between
/// existing ones (by id `71/` between `70/` and `8/`, by name `thing-15a` after `thing-15`),
/// and after an added sub-document; indented or not, with `.gz` siblings or not.
#[test]
fn an_edit_patches_the_manifest_entries_it_changes() {
    let tmp = TempDir::new("incremental-patch");
    for (n, options) in [&[][..], &["--pretty"], &["--gzip", "--links", "path"]].into_iter().enumerate() {
        let (data, out) = (tmp.join(&format!("data-{n}")), tmp.join(&format!("out-{n}")));
        let mut model = Model::new(&mut Rng(7));
        model.sync(&data);
        build(&data, &out, options).ok();
        let entries = read_json(&out.join("manifest.json"))["files"].as_object().unwrap().len();
        let edits: [(&str, &ModelEdit); 3] = [
            ("thing 5 edited", &|m| m.things.get_mut(&5).unwrap().value = "\"edited\"".to_string()),
            ("things added", &|m| {
                for (id, name) in [(71, "thing-15a"), (72, "thing-1"), (73, "aardvark")] {
                    let name = Some(name.to_string()).filter(|_| id != 72);
                    m.things.insert(id, Thing { name, kind: 2, friend: Some(5), value: "1".to_string() });
                }
            }),
            ("a note added", &|m| {
                m.notes.insert(71, "[71]".to_string());
            }),
        ];
        for (what, edit) in edits {
            edit(&mut model);
            model.sync(&data);
            let run = timed_build(&data, &out, options);
            let patched = manifest_patched(&run);
            let fresh = tmp.join(&format!("fresh-{n}"));
            build(&data, &fresh, options).ok();
            let (ours, theirs) = (read_tree(&out), read_tree(&fresh));
            assert!(ours == theirs, "{what} {options:?}: the rebuilt tree differs from a fresh build");
            // sorted by path, `thing/aardvark/` before the list's `thing/index.json`
            let manifest = String::from_utf8(ours["manifest.json"].clone()).unwrap();
            let files = manifest.split("\"files\": {\n").nth(1).unwrap();
            let paths: Vec<&str> = files.lines().filter_map(|line| line.trim_start().split('"').nth(1)).collect();
            assert!(paths.windows(2).all(|w| w[0] < w[1]), "{what} {options:?}: the manifest is not sorted by path");
            let changed =
                patched.unwrap_or_else(|| panic!("{what} {options:?}: no manifest patched:\n{}", run.stderr()));
            // an edit changes its record's entries and meta's; an addition also every list page
            let most = if what.contains("edited") { entries / 10 } else { entries / 2 };
            assert!(changed > 0 && changed < most, "{what} {options:?}: {changed} of {entries} entries changed");
            std::fs::remove_dir_all(&fresh).unwrap();
        }
    }
}

/// A table whose stamp is the one the build index recorded (and old enough to trust) is not read
/// again: its lines' places, ids, names and hashes are the index's. Shown by a line changed in
/// place while the index is told the table's new stamp: a rebuild (made to load the data by an
/// edit of another resource) keeps the line's old document; once the table's stamp differs
/// from the index's, the table is read and the new line rendered.
#[test]
fn a_table_with_its_recorded_stamp_is_not_read_again() {
    use genapi::build::index::{Index, now_ns};
    let tmp = TempDir::new("table-not-read");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let thing =
        |value: u32| format!("{{\"id\": 1, \"name\": \"one\", \"value\": {value}}}\n{{\"id\": 2, \"value\": 2}}\n");
    write_files(&data, &[("thing.ndjson", thing(1)), ("kind/1.json", r#"{"id": 1, "size": 1}"#.into())]);
    build(&data, &out, &[]).ok();
    let table = data.join("thing.ndjson");
    std::fs::write(&table, thing(7)).unwrap(); // the same size: only the bytes and the change time tell
    std::fs::write(data.join("kind/1.json"), r#"{"id": 1, "size": 2}"#).unwrap();
    let mut index = Index::read(&out).expect("the build wrote its index");
    let mut recorded = index.data.get("thing.ndjson").expect("the table is in the index");
    recorded.stamp = genapi::fsutil::Stamp::of_file(&table).unwrap();
    index.data.insert("thing.ndjson", recorded);
    index.started_ns = now_ns() + 10_000_000_000; // the table's change is then old enough to trust
    index.write(&out).unwrap();

    build(&data, &out, &[]).ok();
    let value = |name: &str| read_json(&out.join(format!("api/v2/{name}/index.json")));
    assert_eq!(value("kind/1")["size"], 2, "the build loaded the data");
    assert_eq!(value("thing/1")["value"], 1, "the table was read although its stamp is the recorded one");

    std::fs::write(&table, thing(8)).unwrap();
    build(&data, &out, &[]).ok();
    assert_eq!(value("thing/1")["value"], 8, "a table whose stamp changed is read");
    assert_eq!(value("thing/one")["value"], 8);
}

/// A table changed only by its line ends (`\n` to `\r\n`, the final newline removed, `\r\n`
/// back to `\n`, a final newline added) or by two lines swapped is a changed table: the data
/// hash meta shows changes at each step, and the rebuilt tree equals a fresh build (the
/// swapped lines' list is rendered again). The table's hash is made of its lines' hashes and
/// line ends: one of the lines' hashes alone would miss all but the swap.
#[test]
fn a_table_changed_only_by_its_line_ends_or_order_is_a_changed_table() {
    let tmp = TempDir::new("table-line-ends");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let lines =
        ["{\"id\": 1, \"name\": \"one\"}", "{\"id\": 2, \"name\": \"two\"}", "{\"id\": 3, \"name\": \"three\"}"];
    let swapped = [lines[1], lines[0], lines[2]];
    let versions = [
        ("the table", lines.join("\n") + "\n"),
        ("\\n made \\r\\n", lines.join("\r\n") + "\r\n"),
        ("the final newline removed", lines.join("\r\n")),
        ("\\r\\n made \\n", lines.join("\n")),
        ("a final newline added", lines.join("\n") + "\n"),
        ("two lines swapped", swapped.join("\n") + "\n"),
    ];
    let mut previous = String::new();
    for (n, (what, table)) in versions.iter().enumerate() {
        write_files(&data, &[("thing.ndjson", table.clone())]);
        build(&data, &out, &[]).ok();
        let fresh = tmp.join(&format!("fresh-{n}"));
        build(&data, &fresh, &[]).ok();
        assert!(read_tree(&out) == read_tree(&fresh), "{what}: the rebuilt tree differs from a fresh build");
        let meta = read_json(&out.join("api/v2/meta/index.json"));
        let hash = meta["data_hash"].as_str().expect("meta has a data hash").to_string();
        assert_ne!(hash, previous, "{what}: the data hash did not change");
        previous = hash;
    }
    let list = read_json(&out.join("api/v2/thing/index.json"));
    let names: Vec<&str> = list["results"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["two", "one", "three"], "the list is in the table's new line order");
}

/// A record whose data is as the previous build recorded it is not read again for the names
/// document and the filters' values: its extract is the one that build kept. Shown by a record
/// changed in place while the index is told its file's new stamp: a rebuild (made to extract the
/// resource by an edit of another of its records) keeps the record's old value in the values
/// document; once the file's stamp differs from the index's, it is read and its new value counted.
#[test]
fn an_unchanged_record_is_not_read_again_for_names_and_filters() {
    use genapi::build::index::{Index, now_ns};
    let tmp = TempDir::new("extract-not-read");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let thing = |id: u32, name: &str, color: &str| format!(r#"{{"id": {id}, "name": "{name}", "color": "{color}"}}"#);
    write_files(
        &data,
        &[
            ("gen.json", r#"{"filters": {"thing": {"color": "color"}}}"#.into()),
            ("thing/1.json", thing(1, "one", "red")),
            ("thing/2.json", thing(2, "two", "blue")),
        ],
    );
    build(&data, &out, &[]).ok();
    let second = data.join("thing/2.json");
    std::fs::write(&second, thing(2, "two", "cyan")).unwrap(); // the same size: only the bytes and the change time tell
    std::fs::write(data.join("thing/1.json"), thing(1, "one", "green")).unwrap();
    let mut index = Index::read(&out).expect("the build wrote its index");
    let mut files = genapi::data::recorded::DataFiles::default();
    for (rel, mut file) in index.data.iter() {
        if rel == "thing/2.json" {
            file.stamp = genapi::fsutil::Stamp::of_file(&second).unwrap();
        }
        files.insert(&rel, file);
    }
    files.finish();
    index.data = files;
    index.started_ns = now_ns() + 10_000_000_000; // the record's change is then old enough to trust
    index.write(&out).unwrap();

    build(&data, &out, &[]).ok();
    let values = || {
        let document = read_json(&out.join("api/v2/thing/_filters/color/index.json"));
        let results = document["results"].as_array().unwrap().iter();
        results.map(|r| r["value"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(values(), ["blue", "green"], "the edited record was read; the unchanged one was taken as kept");

    std::fs::write(&second, thing(2, "two", "cyan")).unwrap();
    build(&data, &out, &[]).ok();
    assert_eq!(values(), ["cyan", "green"], "a record whose stamp changed is read");
}

/// The quick check of an unchanged build (every data file's stamp as the index recorded it)
/// still finds what a load would report: an empty folder made beside a table holds the
/// resource twice, and the build fails saying so, though no file's stamp changed.
#[test]
fn an_unchanged_build_still_reports_a_resource_held_twice() {
    let tmp = TempDir::new("unchanged-twice");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_files(&data, &[("thing.ndjson", "{\"id\": 1, \"name\": \"one\"}\n".to_string())]);
    build(&data, &out, &[]).ok();
    std::thread::sleep(std::time::Duration::from_millis(2100)); // the files' stamps are trusted
    build(&data, &out, &[]).ok();
    let again = build(&data, &out, &[]).ok();
    let said = again.stdout() + &again.stderr();
    assert!(said.contains("up to date"), "{said}");
    std::fs::create_dir(data.join("thing")).unwrap();
    let run = build(&data, &out, &[]).fails_with(1);
    assert!(run.stderr().contains("thing is held twice"), "{}", run.stderr());
}

/// A record added with a lower id than another carrying the same shared name takes the name's
/// paths from it (the lowest id owns them): the partial build that follows visits the other
/// record too, so the tree and the index are as a fresh build's, and stay so after a further
/// edit of that record.
#[test]
fn an_added_record_taking_a_shared_names_paths_is_built_as_afresh() {
    let tmp = TempDir::new("shared-name-added");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let thing = |id: u32, name: &str, value: u32| format!(r#"{{"id": {id}, "name": "{name}", "value": {value}}}"#);
    write_files(
        &data,
        &[
            ("gen.json", r#"{"shared_names": {"thing": ["same"]}}"#.into()),
            ("thing/2.json", thing(2, "other", 1)),
            ("thing/5.json", thing(5, "same", 1)),
            ("thing/5/extra.json", r#"{"note": 5}"#.into()),
            ("thing/7.json", thing(7, "same", 1)),
        ],
    );
    // more records, so that the change is a small part of the tree (else the manifest is written whole)
    let more: Vec<(String, String)> =
        (10..60).map(|id| (format!("thing/{id}.json"), thing(id, &format!("t{id}"), 1))).collect();
    let more: Vec<(&str, String)> = more.iter().map(|(path, text)| (path.as_str(), text.clone())).collect();
    write_files(&data, &more);
    build(&data, &out, &[]).ok();
    let fresh_equals = |step: &str| {
        let fresh = tmp.join(&format!("fresh-{step}"));
        build(&data, &fresh, &[]).ok();
        let (ours, theirs) = (read_tree(&out), read_tree(&fresh));
        let differ: Vec<&String> =
            ours.keys().chain(theirs.keys()).filter(|k| ours.get(*k) != theirs.get(*k)).collect();
        assert!(differ.is_empty(), "{step}: the rebuilt tree differs from a fresh build at {differ:?}");
    };
    write_files(&data, &[("thing/3.json", thing(3, "same", 1))]);
    let run = build_with(&data, &out, &[], &[("GEN_TIMINGS", "1")]).ok();
    assert!(run.stderr().contains("manifest patched"), "an addition is a partial build: {}", run.stderr());
    let by_name = read_json(&out.join("api/v2/thing/same/index.json"));
    assert_eq!(by_name["id"], 3, "the lowest id owns the shared name's path");
    fresh_equals("added");
    write_files(&data, &[("thing/5.json", thing(5, "same", 2)), ("thing/5/extra.json", r#"{"note": 6}"#.into())]);
    build(&data, &out, &[]).ok();
    fresh_equals("edited");
}

/// An edit whose record's previous document cannot be read back from the tree (changed by
/// hand: the schemas cannot take back what it showed them) renders every document after all.
/// The build learns it only once the documents' table is read, after the extract of the
/// edited resource alone: the other resource's names and filter values are there all the same,
/// and the tree equals a fresh build's.
#[test]
fn an_edit_over_a_hand_changed_document_renders_every_document_as_a_fresh_build() {
    let tmp = TempDir::new("edit-over-hand-changed");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let record = |id: u32, color: &str| format!(r#"{{"id": {id}, "name": "n{id}", "color": "{color}"}}"#);
    let mut files = vec![(
        "gen.json".to_string(),
        r#"{"filters": {"thing": {"color": "color"}, "tag": {"color": "color"}}}"#.to_string(),
    )];
    for id in 1..40 {
        files.push((format!("thing/{id}.json"), record(id, ["red", "blue"][id as usize % 2])));
        files.push((format!("tag/{id}.json"), record(id, ["green", "gray"][id as usize % 2])));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(path, text)| (path.as_str(), text.clone())).collect();
    write_files(&data, &files);
    build(&data, &out, &[]).ok();
    std::fs::write(out.join("api/v2/thing/1/index.json"), r#"{"id": 1, "changed": "by hand"}"#).unwrap();
    write_files(&data, &[("thing/1.json", record(1, "cyan"))]);
    build(&data, &out, &[]).ok();
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    let (ours, theirs) = (read_tree(&out), read_tree(&fresh));
    let differ: Vec<&String> = ours.keys().chain(theirs.keys()).filter(|k| ours.get(*k) != theirs.get(*k)).collect();
    assert!(differ.is_empty(), "the rebuilt tree differs from a fresh build at {differ:?}");
    let tags = read_json(&out.join("api/v2/tag/_filters/color/index.json"));
    assert_eq!(tags["count"], 2, "the other resource's filter values are there: {tags}");
}

/// The listing of the data folder trusts a folder whose times are older than the previous
/// build's start to hold what that build found there (docs/builds.md, "What a build trusts"):
/// files it recorded, and folders it noted as holding none. Each change below lands in such a
/// folder's subfolder or file, or adds a folder beside them, and each rebuild equals a fresh
/// build.
#[test]
fn changes_inside_folders_the_previous_build_listed_are_all_found() {
    let tmp = TempDir::new("listing");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let thing = |id: i64| (format!("thing/{id}.json"), format!("{{\"id\": {id}, \"name\": \"thing-{id}\"}}"));
    let mut files: Vec<(String, String)> = (1..=4).map(thing).collect();
    files.push(("thing/2/note.json".to_string(), "{\"a\": 1}".to_string()));
    let files: Vec<(&str, String)> = files.iter().map(|(rel, text)| (rel.as_str(), text.clone())).collect();
    write_files(&data, &files);
    std::fs::create_dir(data.join("thing/3")).unwrap(); // a record's folder holding nothing yet
    std::fs::create_dir(data.join("other")).unwrap(); // a resource's folder holding nothing yet
    std::thread::sleep(std::time::Duration::from_millis(2100)); // every folder's times are trusted
    build(&data, &out, &[]).ok();
    let again = build(&data, &out, &[]).ok();
    assert!(again.stdout().contains("up to date"), "{}", again.stdout());
    let steps = std::cell::Cell::new(0);
    let same_as_fresh = |step: &str| {
        build(&data, &out, &[]).ok();
        steps.set(steps.get() + 1);
        let fresh = tmp.join(&format!("fresh-{}", steps.get()));
        build(&data, &fresh, &[]).ok();
        assert!(read_tree(&out) == read_tree(&fresh), "{step}: the rebuilt tree differs from a fresh build");
    };
    std::fs::write(data.join("thing/3/note.json"), "{\"b\": 2}").unwrap();
    same_as_fresh("a sub-document in the record folder that held none");
    std::fs::write(data.join("thing/2/more.json"), "{\"c\": 3}").unwrap();
    same_as_fresh("a second sub-document beside a recorded one");
    std::fs::write(data.join("other/1.json"), "{\"id\": 1, \"name\": \"first\"}").unwrap();
    same_as_fresh("a record in the resource folder that held none");
    std::fs::remove_file(data.join("thing/2/note.json")).unwrap();
    same_as_fresh("a sub-document removed");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    build(&data, &out, &[]).ok(); // records the folders' new times
    let again = build(&data, &out, &[]).ok();
    assert!(again.stdout().contains("up to date"), "{}", again.stdout());
    std::fs::create_dir(data.join("thing/4")).unwrap();
    std::fs::write(data.join("thing/4/late.json"), "{\"d\": 4}").unwrap();
    same_as_fresh("a new record folder with a sub-document");
}

/// A folder is trusted to hold what the previous build found only when it is the same folder:
/// a build from another data folder of the same shape (another checkout, a staging copy), whose
/// folders are older than the previous build, finds its own files, not the previous ones.
#[test]
fn a_build_from_another_data_folder_lists_its_own_files() {
    let tmp = TempDir::new("listing-other-data");
    let out = tmp.join("out");
    let thing = |id: i64| (format!("thing/{id}.json"), format!("{{\"id\": {id}, \"name\": \"thing-{id}\"}}"));
    let first: Vec<(String, String)> = (1..=3).map(thing).collect();
    let mut second = first.clone();
    second.push(thing(4));
    second.push(("thing/2/note.json".to_string(), "{\"a\": 1}".to_string()));
    for (name, files) in [("one", &first), ("two", &second)] {
        let files: Vec<(&str, String)> = files.iter().map(|(rel, text)| (rel.as_str(), text.clone())).collect();
        write_files(&tmp.join(name), &files);
    }
    std::fs::create_dir(tmp.join("one/thing/2")).unwrap(); // the same folders in both
    std::thread::sleep(std::time::Duration::from_millis(2100)); // every folder's times are trusted
    build(&tmp.join("one"), &out, &[]).ok();
    build(&tmp.join("two"), &out, &[]).ok();
    build(&tmp.join("two"), &tmp.join("fresh"), &[]).ok();
    assert!(
        read_tree(&out) == read_tree(&tmp.join("fresh")),
        "the tree built from two differs from a fresh build of it"
    );
}

/// An edit that leaves a record's name and filter values as they were keeps its resource's
/// filter files (docs/builds.md, step 4), but only by the extract of the data the previous
/// *tree* was built from: a build that failed after extracting keeps rows of data the tree never
/// had. Here a record's filter value changes in a build that fails (a reference elsewhere is
/// broken); the next build, after a further edit of the record that keeps the new value, must
/// not take the failed build's row as the tree's: its filter files equal a fresh build's.
#[test]
fn a_failed_builds_kept_extract_never_passes_for_the_trees() {
    let tmp = TempDir::new("extract-after-failed");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    let thing = |id: u32, color: &str, extra: &str| {
        format!(r#"{{"id": {id}, "name": "thing-{id}", "color": "{color}"{extra}}}"#)
    };
    let other = |target: &str| format!(r#"{{"id": 1, "name": "other-1", "thing": {{"url": "/api/v2/{target}/1/"}}}}"#);
    write_files(
        &data,
        &[
            ("gen.json", r#"{"filters": {"thing": {"color": "color"}}}"#.into()),
            ("thing/1.json", thing(1, "red", "")),
            ("thing/2.json", thing(2, "blue", "")),
            ("other/1.json", other("thing")),
        ],
    );
    build(&data, &out, &[]).ok();
    // the value changes, and the build fails at rendering, after its extract was kept
    std::fs::write(data.join("thing/2.json"), thing(2, "cyan", "")).unwrap();
    std::fs::write(data.join("other/1.json"), other("nowhere")).unwrap();
    build(&data, &out, &[]).fails_with(1);
    // mended; the record edited again, its value as the failed build saw it
    std::fs::write(data.join("other/1.json"), other("thing")).unwrap();
    std::fs::write(data.join("thing/2.json"), thing(2, "cyan", r#", "size": 3"#)).unwrap();
    build(&data, &out, &[]).ok();
    build(&data, &fresh, &[]).ok();
    let (ours, theirs) = (read_tree(&out), read_tree(&fresh));
    let differ: Vec<&String> = ours.keys().chain(theirs.keys()).filter(|k| ours.get(*k) != theirs.get(*k)).collect();
    assert!(differ.is_empty(), "the rebuilt tree differs from a fresh build at {differ:?}");
    let values = read_json(&out.join("api/v2/thing/_filters/color/index.json"));
    let values: Vec<&str> =
        values["results"].as_array().unwrap().iter().map(|r| r["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["cyan", "red"]);
}

/// An edit that leaves a resource's names and filter values as they were reads, of the rows kept
/// of its extract, only those of its changed records (docs/builds.md, "An edit that leaves names
/// and values as they were"): a damaged byte among the other records' rows goes unread, and
/// unsaid. An edit that changes a value reads every row, finds the damage, says so and reads
/// every record again. Either way the tree is a fresh build's.
#[test]
fn an_edit_that_keeps_names_and_values_reads_only_its_records_kept_rows() {
    let tmp = TempDir::new("extract-held");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    // 10000 records, a few blocks of kept rows; the first record's color and size are edited
    let table = |first: &str, size: u32| {
        let line = |id: usize| {
            let (color, size) = if id == 1 { (first, size) } else { (["red", "blue"][id % 2], 1) };
            format!("{{\"id\": {id}, \"name\": \"thing-{id}\", \"color\": \"{color}\", \"size\": {size}}}\n")
        };
        (1..=10_000).map(line).collect::<String>()
    };
    let gen_json = r#"{"filters": {"thing": {"color": "color"}}}"#;
    write_files(&data, &[("gen.json", gen_json.into()), ("thing.ndjson", table("green", 1))]);
    build(&data, &out, &[]).ok();
    // a byte damaged among the last records' rows: the blocks of rows end where the table of
    // blocks starts, which the file's last 8 bytes count back to from its end
    let kept = state_file(&out, "extract/thing.extract");
    let mut bytes = std::fs::read(&kept).unwrap();
    let back = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    let at = bytes.len() - back - 100;
    bytes[at] ^= 1;
    std::fs::write(&kept, &bytes).unwrap();
    let fresh = |name: &str| {
        let fresh = tmp.join(name);
        build(&data, &fresh, &[]).ok();
        read_tree(&fresh)
    };

    write_files(&data, &[("thing.ndjson", table("green", 2))]);
    let run = build(&data, &out, &[]).ok();
    let said = run.stdout() + &run.stderr();
    assert!(!said.contains("kept extract"), "only the edited record's row was read: {said}");
    assert!(read_tree(&out) == fresh("fresh-size"), "the edit's tree is a fresh build's");

    write_files(&data, &[("thing.ndjson", table("cyan", 2))]);
    let run = build(&data, &out, &[]).ok();
    let said = run.stdout() + &run.stderr();
    assert!(said.contains("is damaged") && said.contains("ignoring the kept extract"), "{said}");
    assert!(read_tree(&out) == fresh("fresh-color"), "the edit's tree is a fresh build's");
}
