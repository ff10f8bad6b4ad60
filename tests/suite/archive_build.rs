//! `gen build --archive` (issue 49, items 1 and 3; docs/builds.md "The archive writer"): the
//! archive holds the tree's files byte for byte once decompressed (docs/archive.md, "A built
//! API as an archive"), its bytes do not depend on the threads, a rebuild writes only the
//! change (3 files for a one-record edit, nothing when nothing changed), a failed build leaves
//! it as it was, and a tree is never replaced by an archive nor an archive by a tree.

use crate::common::*;
use genapi::archive::{Folder, MANIFEST_KEY, Reader};
use std::collections::BTreeMap;
use std::path::Path;

/// Every key of the archive in `dir` with its bytes decompressed, each checked by the reader
/// (and every part against its name).
fn archive_contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
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
    let tmp = TempDir::new("archive-refusal");
    let data = tmp.join("data");
    sample_data(&data);
    let (tree, archive) = (tmp.join("tree"), tmp.join("archive"));
    build(&data, &tree, &[]).ok();
    build(&data, &archive, &["--archive"]).ok();
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
