//! `gen build --archive` (issue 49, items 1 and 3; docs/builds.md "The archive writer"): the
//! archive holds the tree's files byte for byte once decompressed (docs/archive.md, "A built
//! API as an archive"), its bytes do not depend on the threads, a rebuild writes only the
//! change (3 files for a one-record edit, nothing when nothing changed), a failed build leaves
//! it as it was, and a tree is never replaced by an archive nor an archive by a tree. A
//! rebuild renders only what changed, as the tree's does (a partial build), and still holds what
//! a fresh build holds.

use crate::common::*;
use genapi::archive::{Folder, MANIFEST_KEY, Reader};
use std::collections::BTreeMap;
use std::path::Path;

/// Every key of the archive in `dir` with its bytes decompressed, each checked by the reader
/// (and every part against its name).
pub(crate) fn archive_contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let reader = Reader::open(Folder(dir.to_path_buf())).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    reader.verify().unwrap();
    let mut contents = BTreeMap::new();
    for entry in reader.entries().unwrap() {
        let found = reader.get(&entry.key).unwrap().unwrap();
        assert_eq!(found.entry.media_type, entry.media_type);
        contents.insert(entry.key, found.bytes);
    }
    contents
}

/// What the contract says the archive of the tree in `tree` holds: every file of the tree but
/// the `.gz` siblings of `--gzip`, and `manifest.json` with its `files` emptied (the tree's
/// bytes up to the listing, which is its last member).
fn expected_contents(tree: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = read_tree(tree);
    files.retain(|path, _| !path.ends_with(".json.gz"));
    let manifest = String::from_utf8(files[MANIFEST_KEY].clone()).unwrap();
    let cut = manifest.rfind("\n  \"files\": {").expect("the listing is the manifest's last member");
    files.insert(MANIFEST_KEY.into(), format!("{}\n  \"files\": {{}}\n}}\n", &manifest[..cut]).into_bytes());
    files
}

/// Builds the tree and the archive of `data` with `extra` options, and checks the archive holds
/// the tree's files; returns the archive's folder's files.
fn same_as_tree(tmp: &TempDir, data: &Path, extra: &[&str], label: &str) -> BTreeMap<String, Vec<u8>> {
    let (tree, archive) = (tmp.join(&format!("tree-{label}")), tmp.join(&format!("archive-{label}")));
    build(data, &tree, extra).ok();
    let mut with_archive = extra.to_vec();
    with_archive.push("--archive");
    build(data, &archive, &with_archive).ok();
    let (expected, got) = (expected_contents(&tree), archive_contents(&archive));
    let keys = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&got), keys(&expected), "{label}: the archive's keys are the tree's paths");
    for (path, bytes) in &expected {
        assert!(got[path] == *bytes, "{label}: {path} differs from the tree's file");
    }
    let files = read_tree(&archive);
    assert!(files.keys().all(|f| f == "root" || f.starts_with("parts/")), "{label}: {:?}", files.keys());
    files
}

#[test]
fn an_archive_holds_the_trees_files_byte_for_byte() {
    let tmp = TempDir::new("archive-same");
    let data = tmp.join("data");
    sample_data(&data);
    same_as_tree(&tmp, &data, &[], "plain");
    same_as_tree(&tmp, &data, &["--pretty"], "pretty");
    same_as_tree(&tmp, &data, &["--gzip"], "gzip");
    let default_data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    same_as_tree(&tmp, &default_data, &[], "default");
}

#[test]
fn an_archive_of_the_published_fixture_holds_its_trees_files() {
    let Some(fixture) = fixture() else { return };
    let tmp = TempDir::new("archive-fixture");
    let data = tmp.join("data");
    run(&["import", "api-data", utf8(&fixture), "--out", utf8(&data)]).ok();
    same_as_tree(&tmp, &data, &[], "fixture");
}

/// Same data and options, the same bytes, whatever the number of threads.
#[test]
fn an_archive_is_byte_for_byte_the_same_whatever_the_threads() {
    let tmp = TempDir::new("archive-determinism");
    let data = tmp.join("data");
    sample_data(&data);
    let (one, many) = (tmp.join("one"), tmp.join("many"));
    build_with(&data, &one, &["--archive"], &[("RAYON_NUM_THREADS", "1")]).ok();
    build_with(&data, &many, &["--archive"], &[("RAYON_NUM_THREADS", "8")]).ok();
    let (a, b) = (read_tree(&one), read_tree(&many));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    assert!(a == b, "two builds of the same data wrote different bytes");
}

/// `--archive` over a tree, and a tree build over an archive, are refused with what to do, and
/// touch nothing.
#[test]
fn an_archive_never_replaces_a_tree_nor_a_tree_an_archive() {
    let BuiltSample { tmp, data, out: tree, archive } = built_sample("archive-refusal", true);
    let (tree_before, archive_before) = (read_tree(&tree), read_tree(&archive));
    let refused = build(&data, &tree, &["--archive"]).fails_with(2).stderr();
    assert!(refused.contains("holds a tree") && refused.contains("choose another --out"), "{refused}");
    let refused = build(&data, &archive, &[]).fails_with(2).stderr();
    assert!(refused.contains("holds an archive") && refused.contains("--archive"), "{refused}");
    let other = tmp.join("other");
    write_files(&other, &[("notes.txt", "mine".into())]);
    let refused = build(&data, &other, &["--archive"]).fails_with(2).stderr();
    assert!(refused.contains("not empty") && refused.contains("notes.txt"), "{refused}");
    assert!(read_tree(&tree) == tree_before && read_tree(&archive) == archive_before);
    assert_eq!(read_tree(&other).len(), 1);
}

/// The edits the archive in `dir` has had since its last full write: the root's varint after
/// its magic and version (docs/archive.md, "The root"); 0 after a fresh write or a merge.
fn edits_since_full_write(dir: &Path) -> u8 {
    use std::io::Read;
    let mut root = Vec::new();
    flate2::read::GzDecoder::new(std::fs::read(dir.join("root")).unwrap().as_slice()).read_to_end(&mut root).unwrap();
    assert_eq!(&root[..8], b"GENAPIAR");
    assert!(root[10] < 0x80, "fewer than 128 edits");
    root[10]
}

/// The files of `after` that are not in `before` with the same bytes.
fn new_files(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    after.iter().filter(|(path, bytes)| before.get(*path) != Some(*bytes)).map(|(path, _)| path.clone()).collect()
}

/// The number of documents an archive build says it rendered (`GEN_TIMINGS`).
fn rendered(run: &Run) -> usize {
    let stderr = run.stderr();
    let at = stderr.find("(archive: ").unwrap_or_else(|| panic!("no count of documents rendered: {stderr}"));
    let count = stderr[at + "(archive: ".len()..].split(' ').next().unwrap();
    count.parse().unwrap_or_else(|_| panic!("{stderr}"))
}

/// `gen build --archive` of `data` into `archive` with `GEN_TIMINGS` (and `extra` options).
fn timed_archive_build(data: &Path, archive: &Path, extra: &[&str]) -> Run {
    let mut options = vec!["--archive"];
    options.extend_from_slice(extra);
    build_with(data, archive, &options, &[("GEN_TIMINGS", "1")]).ok()
}

/// A one-record edit renders only that record's documents and the few every build renders (the
/// root, meta): a partial build, as the tree's, not every document as a fresh build does; the
/// record's resource's bulk-data file is made again from the archive's other records, the other
/// resources' are kept. The archive then holds what a fresh build holds, and so after an added
/// record (its list's pages rendered too), an edit that moves a berry to another filter value
/// (its resource's filter pages rendered, one of them gone), and one that leaves its name and
/// filter values as they were (none of them rendered).
#[test]
fn a_one_record_edit_renders_only_what_changed() {
    let tmp = TempDir::new("archive-partial");
    let data = tmp.join("data");
    sample_data(&data);
    let archive = tmp.join("archive");
    let whole = rendered(&timed_archive_build(&data, &archive, &[]));
    // (the file, its edit, the most documents of a fresh build's the rebuild may render: a
    // tenth; all but one for a berry, whose filter pages all depend on its resource's values)
    type Edit<'e> = (&'e str, &'e dyn Fn(&str) -> String, fn(usize) -> usize);
    // A berry edit that leaves its name and filter values as they were renders none of its
    // resource's filter pages (its kept extract shows them unchanged).
    let edits: [Edit<'_>; 4] = [
        ("firmness/2.json", &|text| text.replace("Fest 2", "Fest zwei"), |all| all / 10),
        ("firmness/6.json", &|_| r#"{"id": 6, "name": "firm-6"}"#.to_string(), |all| all / 10),
        ("berry/8.json", &|text| text.replace("\"size\": 8.5", "\"size\": 1.5"), |all| all - 1),
        ("berry/9.json", &|text| text.replace("\"size\": 9.5", "\"size\": 9.5, \"taste\": 3"), |all| all / 10),
    ];
    for (step, (file, edit, most)) in edits.iter().enumerate() {
        let file = data.join(file);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        std::fs::write(&file, edit(&text)).unwrap();
        let run = timed_archive_build(&data, &archive, &[]);
        let fresh = tmp.join(&format!("fresh-{step}"));
        let all = rendered(&timed_archive_build(&data, &fresh, &[]));
        let partial = rendered(&run);
        assert!(partial <= most(all), "step {step}: {partial} of {all} documents rendered: {}", run.stderr());
        let (ours, theirs) = (archive_contents(&archive), archive_contents(&fresh));
        let differ: Vec<&String> =
            ours.keys().chain(theirs.keys()).filter(|k| ours.get(*k) != theirs.get(*k)).collect();
        assert!(differ.is_empty(), "step {step}: the rebuilt archive differs from a fresh one at {differ:?}");
        assert!(all >= whole, "a fresh build renders every document");
    }
    let contents = archive_contents(&archive);
    assert!(contents["api/v2/firmness/2/index.json"].windows(9).any(|w| w == b"Fest zwei"), "the edit is there");
}

/// A one-line edit of 100,000 records held in a table (`build.rs`'s synthetic data) renders only
/// that record's documents, and takes far less than a fresh archive build: the times are printed
/// (not asserted: the machine's load decides them), the rendered counts asserted.
#[test]
fn a_one_line_edit_of_a_large_table_renders_only_its_record() {
    let Some(()) = heavy("100,000 records built three times") else { return };
    let tmp = TempDir::new("archive-partial-large");
    let (data, archive) = (tmp.join("data"), tmp.join("archive"));
    crate::build::synthetic_data(&data, 100_000, false, false);
    let started = std::time::Instant::now();
    let whole = rendered(&timed_archive_build(&data, &archive, &[]));
    let fresh_took = started.elapsed();
    crate::build::synthetic_data(&data, 100_000, true, false);
    let started = std::time::Instant::now();
    let run = timed_archive_build(&data, &archive, &[]);
    let edit_took = started.elapsed();
    let partial = rendered(&run);
    eprintln!(
        "100,000 records: fresh archive build {fresh_took:?} ({whole} rendered), one-line edit {edit_took:?} ({partial} rendered)"
    );
    eprintln!("{}", run.stderr());
    assert!(partial < 10, "{partial} of {whole} documents rendered for a one-line edit");
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &["--archive"]).ok();
    assert!(archive_contents(&archive) == archive_contents(&fresh), "the edited archive differs from a fresh one");
}

/// A one-record edit writes 3 files (a data part, an index part, the root); the archive then
/// holds what a fresh build of the same data holds. Rebuilt with nothing changed, with its
/// index or without, it writes nothing; `--verify` writes the fresh archive's root.
#[test]
fn a_one_record_edit_writes_three_files_and_an_unchanged_rebuild_none() {
    let BuiltSample { tmp, data, archive, .. } = built_sample("archive-edit", false);
    let before = read_tree(&archive);
    let file = data.join("berry/7.json");
    let text = std::fs::read_to_string(&file).unwrap().replace("\"size\": 7.5", "\"size\": 70.5");
    std::fs::write(&file, text).unwrap();
    let said = build(&data, &archive, &["--archive"]).ok().stdout();
    let after = read_tree(&archive);
    let mut written = new_files(&before, &after);
    // root.previous, the root replaced, kept locally for the prune (docs/archive.md, "Pruning")
    written.retain(|f| f != "root.previous");
    assert_eq!(after["root.previous"], before["root"]);
    assert_eq!(written.len(), 3, "{written:?}");
    assert!(written.contains(&"root".to_string()) && written.iter().filter(|f| f.starts_with("parts/")).count() == 2);
    assert!(said.contains("3 written"), "{said}");
    // a delta: its data part holds the documents changed, not the archive's
    assert_eq!(edits_since_full_write(&archive), 1);
    let data_part = written.iter().map(|f| after[f].len()).filter(|&len| len > 0).min().unwrap();
    assert!(data_part * 4 < before.values().map(Vec::len).sum::<usize>(), "a data part of {data_part} bytes");
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &["--archive"]).ok();
    assert!(archive_contents(&archive) == archive_contents(&fresh), "the edited archive differs from a fresh one");
    assert!(
        archive_contents(&archive)["api/v2/berry/7/index.json"].windows(4).any(|w| w == b"70.5"),
        "the edit is in the archive"
    );

    // nothing changed: the index says so, nothing is read or written
    let said = build(&data, &archive, &["--archive"]).ok().stdout();
    assert!(said.contains("up to date"), "{said}");
    assert!(read_tree(&archive) == after);
    // without the index: every document rendered, compared with the archive, none written
    std::fs::remove_file(state_file(&archive, "index")).unwrap();
    let root_time = std::fs::metadata(archive.join("root")).unwrap().modified().unwrap();
    let said = build(&data, &archive, &["--archive"]).ok().stdout();
    assert!(said.contains("0 written"), "{said}");
    assert!(read_tree(&archive) == after);
    assert_eq!(std::fs::metadata(archive.join("root")).unwrap().modified().unwrap(), root_time);
    // --verify writes the archive afresh: its root is the fresh archive's
    build(&data, &archive, &["--archive", "--verify"]).ok();
    assert_eq!(std::fs::read(archive.join("root")).unwrap(), std::fs::read(fresh.join("root")).unwrap());
    assert_eq!(edits_since_full_write(&archive), 0);
}

/// The part a killed write was filling (`parts/.filling`, docs/archive.md "Writing": a write
/// killed midway leaves exactly that file) is removed by the next build's prune, even one that
/// writes no part; a link in its place is removed, its target left as it was.
#[test]
fn a_build_removes_the_part_a_killed_write_left_half_filled() {
    let BuiltSample { tmp, data, archive, .. } = built_sample("archive-filling", false);
    let before = read_tree(&archive);
    let filling = archive.join("parts/.filling");
    let outside = tmp.join("outside");
    std::fs::write(&outside, b"not the archive's").unwrap();
    let leftovers: [(&str, &dyn Fn()); 2] = [
        ("a half-filled part", &|| std::fs::write(&filling, vec![0x1f; 5000]).unwrap()),
        ("a link", &|| std::os::unix::fs::symlink(&outside, &filling).unwrap()),
    ];
    for (what, leave) in leftovers {
        leave();
        // without the index: every document rendered and compared, none written, then the prune
        std::fs::remove_file(state_file(&archive, "index")).unwrap();
        let said = build(&data, &archive, &["--archive"]).ok().stdout();
        assert!(said.contains("0 written"), "{what}: {said}");
        assert!(std::fs::symlink_metadata(&filling).is_err(), "{what}: parts/.filling left");
        assert!(read_tree(&archive) == before, "{what}: the archive changed");
    }
    assert_eq!(std::fs::read(&outside).unwrap(), b"not the archive's");
}

/// A build that fails on bad data, whether it is found loading (bytes that are not JSON) or
/// rendering (a reference to a record that does not exist), leaves the archive byte for byte,
/// and no spool behind.
#[test]
fn a_failed_build_leaves_the_archive_as_it_was() {
    let BuiltSample { tmp: _tmp, data, archive, .. } = built_sample("archive-failed", false);
    let before = read_tree(&archive);
    let file = data.join("berry/7.json");
    let good = std::fs::read(&file).unwrap();
    for bad in ["{\"id\": 7, ", r#"{"id": 7, "name": "berry-7", "item": {"url": "/api/v2/berry/999999/"}}"#] {
        std::fs::write(&file, bad).unwrap();
        let failed = build(&data, &archive, &["--archive"]).fails_with(1).stderr();
        assert!(failed.contains("berry/7.json"), "{failed}");
        assert!(read_tree(&archive) == before, "a failed build changed the archive");
        assert!(!state_file(&archive, "archive.spool").exists());
    }
    std::fs::write(&file, good).unwrap();
    assert!(build(&data, &archive, &["--archive"]).ok().stdout().contains("up to date"));
}

/// The random-edit fuzz of the tree's incremental builds (`incremental.rs`'s edit generator),
/// for the archive: after every edit, the archive rebuilt in place holds what a fresh archive
/// of the same data holds; after a merge (its root counts no edits), it is that archive byte
/// for byte; a broken edit leaves it as it was. Most steps are partial builds (fewer documents
/// rendered than a fresh build renders).
#[test]
fn an_edited_archive_equals_a_fresh_one_through_random_edits() {
    let steps = std::env::var("INCREMENTAL_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let tmp = TempDir::new("archive-fuzz");
    let (data, archive) = (tmp.join("data"), tmp.join("archive"));
    let mut rng = Rng(seed("archive-fuzz", 0x9e37_79b9_7f4a_7c15));
    let mut model = crate::incremental::Model::new(&mut rng);
    model.sync(&data);
    let option_sets: [&[&str]; 3] = [&["--archive"], &["--archive", "--pretty"], &["--archive", "--links", "path"]];
    let mut options = option_sets[0];
    let env = crate::incremental::SMALL_MEMBERS;
    build_with(&data, &archive, options, &env).ok();
    let (mut merges, mut deltas, mut partial) = (0, 0, 0);
    for step in 0..steps {
        let what = match rng.below(10) {
            0 => {
                options = option_sets[rng.below(option_sets.len())];
                format!("options {options:?}")
            }
            1 if !model.tables => {
                let before = read_tree(&archive);
                let id = model.random_thing(&mut rng);
                let file = data.join(format!("thing/{id}.json"));
                let good = std::fs::read(&file).unwrap();
                std::fs::write(&file, format!(r#"{{"id": {id}, "friend": {{"url": "/api/v2/thing/999999/"}}}}"#))
                    .unwrap();
                build_with(&data, &archive, options, &env).fails_with(1);
                assert!(read_tree(&archive) == before, "step {step}: a failed build changed the archive");
                std::fs::write(&file, good).unwrap();
                format!("broken edit of thing {id}, then undone")
            }
            _ => {
                let what = model.edit(&mut rng, step);
                model.sync(&data);
                what
            }
        };
        let timed = [env[0], ("GEN_TIMINGS", "1")];
        let run = build_with(&data, &archive, options, &timed).ok();
        let fresh = tmp.join(&format!("fresh-{step}"));
        let all = rendered(&build_with(&data, &fresh, options, &timed).ok());
        partial += usize::from(run.stderr().contains("(archive: ") && rendered(&run) < all);
        let (ours, theirs) = (archive_contents(&archive), archive_contents(&fresh));
        if ours != theirs {
            let differ: Vec<&String> =
                ours.keys().chain(theirs.keys()).filter(|k| ours.get(*k) != theirs.get(*k)).take(10).collect();
            panic!(
                "step {step} ({what}, options {options:?}): the edited archive differs from a fresh one at {differ:?}"
            );
        }
        if edits_since_full_write(&archive) == 0 {
            merges += 1;
            let root = std::fs::read(archive.join("root")).unwrap();
            assert!(root == std::fs::read(fresh.join("root")).unwrap(), "step {step} ({what}): a merge is not fresh");
            let named = Reader::open(Folder(archive.clone())).unwrap().files();
            for file in named {
                assert!(std::fs::read(archive.join(&file)).unwrap() == std::fs::read(fresh.join(&file)).unwrap());
            }
        } else {
            deltas += 1;
        }
        std::fs::remove_dir_all(&fresh).unwrap();
    }
    eprintln!("{steps} steps: {deltas} left deltas, {merges} ended merged or fresh, {partial} partial builds");
    assert!(deltas > 0 && merges > 0, "the fuzz saw both deltas and merges");
    assert!(steps < 10 || partial > 0, "no step was a partial build: the partial archive write went untested");
}
