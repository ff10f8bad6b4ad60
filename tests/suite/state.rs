//! Issue 48, item 6: the build keeps its state (index, bulk-data member table, kept extracts, a
//! killed commit's journal) in one folder beside the tree, `.<out>.gen/`, and a build that
//! finds the old layout's files beside the tree (`.out.gen-index`, `.out.gen-bulk`,
//! `.out.gen-extract/`, `.out.gen-journal`) moves them in once, keeping their meaning
//! (docs/builds.md, "The build's state").

use crate::common::*;
use std::path::Path;

/// The entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    names.sort();
    names
}

/// The old layout's name of a state file of `out` (`.out.gen-<old>`, beside it).
fn old(out: &Path, what: &str) -> std::path::PathBuf {
    out.parent().unwrap().join(format!(".{}.gen-{what}", out.file_name().unwrap().to_str().unwrap()))
}

/// Turns the state of the tree in `out` into what a gen of the old layout left: each of
/// `names` (of `index`, `bulk`, `extract`) moved to its old name beside the tree, the others
/// removed with the state folder; and the old layout's temporaries of a killed build.
fn as_old_layout(out: &Path, names: &[&str]) {
    for name in names {
        std::fs::rename(state_file(out, name), old(out, name)).unwrap();
    }
    std::fs::remove_dir_all(state_file(out, "")).unwrap();
    for temporary in ["index.tmp", "bulk.tmp", "journal.tmp"] {
        std::fs::write(old(out, temporary), "left by a killed build").unwrap();
    }
}

/// A tree at `www/api` (as `/var/www/api`): after a first build, an up-to-date one, an edit
/// (a partial build), a removal (a full one), `--verify`, and a build with other options,
/// `www/` holds the tree and its state folder, nothing else; the state folder holds the
/// index, the member table and the kept extracts, and no temporary.
#[test]
fn the_builds_state_is_one_folder_beside_the_tree_whatever_the_build() {
    let tmp = TempDir::new("state-layout");
    let (data, www) = (tmp.join("data"), tmp.join("www"));
    let out = www.join("api");
    sample_data(&data);
    let beside = || {
        assert_eq!(entries(&www), [".api.gen", "api"], "only the tree and its state folder beside it");
        assert_eq!(entries(&state_file(&out, "")), ["bulk", "extract", "index"], "the state folder");
    };
    build(&data, &out, &[]).ok();
    beside();
    assert!(build(&data, &out, &[]).ok().stdout().contains("up to date"));
    beside();
    std::fs::write(data.join("berry/2.json"), r#"{"id": 2, "name": "berry-2", "size": 9}"#).unwrap();
    build(&data, &out, &[]).ok();
    beside();
    std::fs::remove_file(data.join("berry/3.json")).unwrap();
    build(&data, &out, &[]).ok();
    beside();
    build(&data, &out, &["--verify"]).ok();
    beside();
    build(&data, &out, &["--pretty"]).ok();
    beside();
    assert!(state_file(&out, "extract/berry.extract").is_file(), "{:?}", entries(&state_file(&out, "extract")));
}

/// A tree built by the old layout (its state moved to the old names, with a killed build's
/// temporaries): the next build moves the state into `.out.gen/` with one note, finds the tree
/// up to date, and leaves nothing else beside it. The build after an edit trusts the moved
/// index as before (a tree file changed by hand and not touched by the edit is left as it is,
/// which a build without the index would repair) and gives a fresh build's tree.
#[test]
fn a_tree_of_the_old_layout_is_migrated_once_and_stays_incremental() {
    let tmp = TempDir::new("state-migrate");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    let kept: Vec<Vec<u8>> =
        ["bulk", "extract/berry.extract"].iter().map(|f| std::fs::read(state_file(&out, f)).unwrap()).collect();
    as_old_layout(&out, &["index", "bulk", "extract"]);
    assert!(old(&out, "index").is_file() && old(&out, "extract").is_dir() && !state_file(&out, "").exists());

    let migrated = build(&data, &out, &[]).ok();
    assert!(migrated.stdout().contains("up to date"), "the moved index describes the tree: {}", migrated.stdout());
    let stderr = migrated.stderr();
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains(".out.gen")).collect();
    assert_eq!(notes.len(), 1, "one note: {stderr}");
    for name in [".out.gen-index", ".out.gen-bulk", ".out.gen-extract", ".out.gen/"] {
        assert!(notes[0].starts_with("note: moved") && notes[0].contains(name), "{name}: {}", notes[0]);
    }
    assert_eq!(entries(tmp.path()), [".out.gen", "data", "out"], "the old files and temporaries are gone");
    let moved: Vec<Vec<u8>> =
        ["bulk", "extract/berry.extract"].iter().map(|f| std::fs::read(state_file(&out, f)).unwrap()).collect();
    assert!(moved == kept, "the member table and kept extracts moved as they were");
    assert!(!build(&data, &out, &[]).ok().stderr().contains("moved"), "moved once");

    // an edit: the moved index is trusted for the tree, as the old layout's was
    let by_hand = out.join("api/v2/ailment/2/index.json");
    let built = std::fs::read(&by_hand).unwrap();
    std::fs::write(&by_hand, b"{\"changed\": \"by hand\"}").unwrap();
    as_old_layout(&out, &["index", "bulk", "extract"]);
    std::fs::write(data.join("berry/2.json"), r#"{"id": 2, "name": "berry-2", "size": 9}"#).unwrap();
    let edited = build(&data, &out, &[]).ok();
    assert!(edited.stderr().contains("note: moved"), "{}", edited.stderr());
    assert_eq!(std::fs::read(&by_hand).unwrap(), b"{\"changed\": \"by hand\"}", "the index was used: the tree trusted");
    std::fs::write(&by_hand, built).unwrap();
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "the tree equals a fresh build's");
    assert_eq!(entries(tmp.path()), [".fresh.gen", ".out.gen", "data", "fresh", "out"]);
}

/// A partial old layout, only the index: moved, the tree found up to date; the build after an
/// edit (no member table, no kept extract: both written anew) gives a fresh build's tree.
#[test]
fn a_partial_old_layout_is_migrated_too() {
    let tmp = TempDir::new("state-partial");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    as_old_layout(&out, &["index"]);
    let migrated = build(&data, &out, &[]).ok();
    assert!(migrated.stdout().contains("up to date"), "{}", migrated.stdout());
    assert!(
        migrated.stderr().contains("note: moved") && !migrated.stderr().contains("gen-bulk"),
        "{}",
        migrated.stderr()
    );
    assert_eq!(entries(tmp.path()), [".out.gen", "data", "out"]);
    assert_eq!(entries(&state_file(&out, "")), ["index"]);
    std::fs::write(data.join("berry/2.json"), r#"{"id": 2, "name": "berry-2", "size": 9}"#).unwrap();
    build(&data, &out, &[]).ok();
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "the tree equals a fresh build's");
    assert_eq!(entries(&state_file(&out, "")), ["bulk", "extract", "index"]);
}

/// A killed commit's journal of the old layout keeps its meaning once moved: the paths it lists
/// are checked and repaired. Found with a journal of the new layout (an older gen killed after
/// a newer one was), the two are joined: the paths of both are repaired.
#[test]
fn a_journal_of_the_old_layout_is_honoured_and_joined_with_the_new_one() {
    let tmp = TempDir::new("state-journal");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    build(&data, &fresh, &[]).ok();
    let (a, b) = ("api/v2/ailment/2/index.json", "api/v2/form/3/index.json");
    for path in [a, b] {
        std::fs::write(out.join(path), b"{\"torn\": true}").unwrap();
    }
    // only the old layout's journal, listing a: a is repaired
    std::fs::write(old(&out, "journal"), format!("{a}\n")).unwrap();
    let repaired = build(&data, &out, &[]).ok();
    assert!(!repaired.stdout().contains("up to date"), "a journal makes the build check: {}", repaired.stdout());
    assert_eq!(std::fs::read(out.join(a)).unwrap(), std::fs::read(fresh.join(a)).unwrap(), "listed: repaired");
    assert_eq!(std::fs::read(out.join(b)).unwrap(), b"{\"torn\": true}", "not listed: trusted");
    assert!(!old(&out, "journal").exists() && !state_file(&out, "journal").exists(), "the build completed");
    // both layouts' journals, listing b and a: both repaired
    std::fs::write(out.join(a), b"{\"torn\": true}").unwrap();
    std::fs::write(old(&out, "journal"), format!("{b}\n")).unwrap();
    std::fs::write(state_file(&out, "journal"), a).unwrap();
    build(&data, &out, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "the tree equals a fresh build's");
    assert_eq!(entries(tmp.path()), [".fresh.gen", ".out.gen", "data", "fresh", "out"]);
}

/// A link at the state folder's name (to a folder elsewhere) is never written through: the
/// build replaces it by a folder of its own, and its tree is a fresh build's.
#[test]
fn the_state_folder_is_never_written_through_a_link() {
    let tmp = TempDir::new("state-link");
    let (data, out, fresh, elsewhere) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"), tmp.join("elsewhere"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    let state = tmp.join(".out.gen");
    std::fs::rename(&state, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &state).unwrap();
    let before = read_tree(&elsewhere);
    std::fs::write(data.join("berry/2.json"), r#"{"id": 2, "name": "berry-2", "size": 9}"#).unwrap();
    build(&data, &out, &[]).ok();
    assert!(read_tree(&elsewhere) == before, "nothing written in the linked folder");
    assert!(std::fs::symlink_metadata(&state).unwrap().is_dir(), "a folder of its own");
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "the tree equals a fresh build's");
    assert_eq!(entries(&state_file(&out, "")), ["bulk", "extract", "index"]);
}
