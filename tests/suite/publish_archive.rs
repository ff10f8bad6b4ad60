//! `gen publish --dir <archive>` against a real SeaweedFS (`weed mini`, as tests/suite/publish.rs):
//! the parts the target lacks, then the root last; a one-record edit publishes its three files;
//! `--changed-urls` lists exactly the urls whose answers changed; parts no root names stay for
//! the grace period, counted from the publish that unnamed them, and go after it; a publish
//! killed before its root leaves the old root serving, whole, and the next one completes it;
//! a tree over an archive, and an archive over a tree, are refused.

use crate::common::{self, Run, TempDir, read_tree};
use crate::publish::{Site, Weed, block_on, path_str, publish_with, spawn_publish};
use genapi::archive::{self, Change, Document, Folder, MANIFEST_KEY, Options, RangeSource, Reader};
use object_store::ObjectStoreExt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const RETIRED: &str = ".gen-publish-retired.json";

/// The test bucket read by range, as an edge handler reads it.
struct Bucket<'a>(&'a Weed);

impl RangeSource for Bucket<'_> {
    fn read(&self, file: &str, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        let client = self.0.client();
        match block_on(client.get_range(&file.into(), offset..offset + len)) {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Err(std::io::ErrorKind::NotFound.into()),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    fn read_all(&self, file: &str) -> std::io::Result<Vec<u8>> {
        let client = self.0.client();
        match block_on(async { client.get(&file.into()).await?.bytes().await }) {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Err(std::io::ErrorKind::NotFound.into()),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }
}

/// The archive `archive` as the bucket serves it is the local one, whole: the same root bytes,
/// every part it names there with the bytes its name says, and the same entries.
fn assert_bucket_serves(weed: &Weed, archive: &Path) {
    assert_eq!(weed.get("root").0, std::fs::read(archive.join("root")).unwrap(), "the bucket's root");
    let remote = Reader::open(Bucket(weed)).unwrap();
    remote.verify().unwrap_or_else(|e| panic!("the bucket's archive: {e}"));
    let local = Reader::open(Folder(archive.to_path_buf())).unwrap();
    assert_eq!(remote.entries().unwrap(), local.entries().unwrap());
    let manifest = remote.get(MANIFEST_KEY).unwrap().expect("the manifest key");
    assert_eq!(manifest.bytes, local.get(MANIFEST_KEY).unwrap().unwrap().bytes);
}

/// The files of the archive in `dir` its root names, root last.
fn files_of(dir: &Path) -> Vec<String> {
    Reader::open(Folder(dir.to_path_buf())).unwrap().files()
}

/// The documents an archive of the tree in `tree` stores (docs/archive.md: no `.gz` siblings,
/// the manifest with `"files": {}`): key → bytes.
fn documents(tree: &Path) -> BTreeMap<String, Vec<u8>> {
    read_tree(tree)
        .into_iter()
        .filter(|(path, _)| !path.ends_with(".json.gz"))
        .map(|(path, bytes)| match path == MANIFEST_KEY {
            true => {
                let mut manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                manifest["files"] = serde_json::json!({});
                (path, serde_json::to_vec_pretty(&manifest).unwrap())
            }
            false => (path, bytes),
        })
        .collect()
}

/// The site's data built by `gen build --archive` into `archive`, with the options of its tree
/// (`--links path`); a new folder is a fresh archive.
fn build_archive(site: &Site, archive: &Path) {
    build_archive_of(&site.data(), archive);
}

/// `data` built by `gen build --archive --links path` into `archive`.
fn build_archive_of(data: &Path, archive: &Path) {
    common::run(&["build", "-q", "--data", path_str(data), "--out", path_str(archive), "--links", "path", "--archive"])
        .ok();
}

/// The keys whose documents differ between two trees, or that only one has.
fn differing(old: &BTreeMap<String, Vec<u8>>, new: &BTreeMap<String, Vec<u8>>) -> BTreeSet<String> {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter().filter(|key| old.get(*key) != new.get(*key)).cloned().collect()
}

/// `old_archive` (the archive of `old_tree`) copied to `new_archive` and edited into the archive
/// of `new_tree` with `archive::edit`: how an edit looks (a part of the documents it put, a part
/// of the blocks it changed, a new root; the old parts kept). Returns the keys it changed.
fn edited_archive(old_archive: &Path, old_tree: &Path, new_tree: &Path, new_archive: &Path) -> BTreeSet<String> {
    std::fs::create_dir_all(new_archive.join("parts")).unwrap();
    for (file, bytes) in read_tree(old_archive) {
        std::fs::write(new_archive.join(file), bytes).unwrap();
    }
    let (old, new) = (documents(old_tree), documents(new_tree));
    let changed = differing(&old, &new);
    let changes = changed.iter().map(|key| match new.get(key) {
        Some(bytes) => Change::Put(Document::new(vec![key.clone()], bytes.clone())),
        None => Change::Remove(key.clone()),
    });
    let written = archive::edit(new_archive, changes.collect::<Vec<_>>(), &Options::default()).unwrap();
    assert!(!written.merged, "a small edit is not a merge");
    changed
}

/// The public urls of `keys` as the tree's publish names them: a folder's url for an
/// `index.json`.
fn urls(base: &str, keys: &BTreeSet<String>) -> Vec<String> {
    let mut urls: Vec<String> = keys
        .iter()
        .map(|key| match key.strip_suffix("index.json") {
            Some(folder) => format!("{base}/{folder}"),
            None => format!("{base}/{key}"),
        })
        .collect();
    urls.sort();
    urls.dedup();
    urls
}

fn base_url(tree: &Path) -> String {
    common::read_json(&tree.join("manifest.json"))["base_url"].as_str().unwrap().trim_end_matches('/').to_string()
}

/// Publishes `dir` to `target` with the server's keys, through `endpoint`.
fn publish_to(weed: &Weed, endpoint: Option<&str>, dir: &Path, target: &str, extra: &[&str]) -> Run {
    let server = weed.endpoint();
    let mut args = vec!["publish", "--dir", path_str(dir), "--endpoint", endpoint.unwrap_or(&server)];
    args.extend_from_slice(extra);
    args.push(target);
    publish_with(&args, &[("AWS_ACCESS_KEY_ID", "genkey"), ("AWS_SECRET_ACCESS_KEY", "gensecret")])
}

/// The archive objects (parts and root) written through a proxy, in order.
fn archive_puts(puts: &[String]) -> Vec<String> {
    puts.iter().filter(|key| *key == "root" || key.starts_with("parts/")).cloned().collect()
}

/// A site, its tree's archive, and a second tree with one record edited.
struct Edit {
    site: Site,
    tmp: TempDir,
}

impl Edit {
    fn new() -> Edit {
        let site = Site::new(&[]);
        let tmp = TempDir::new("publish-archive");
        build_archive(&site, &tmp.join("a"));
        copy_tree(&site.out(), &tmp.join("tree-a"));
        site.edit_record();
        site.build(&[]);
        Edit { site, tmp }
    }

    fn a(&self) -> PathBuf {
        self.tmp.join("a")
    }

    fn tree_a(&self) -> PathBuf {
        self.tmp.join("tree-a")
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for (file, bytes) in read_tree(from) {
        let path = to.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

#[test]
fn an_archive_goes_parts_first_root_last_reads_back_whole_and_is_then_up_to_date() {
    let Some(weed) = Weed::start() else { return };
    let edit = Edit::new();
    let proxy = weed.proxy();
    let run = publish_to(&weed, Some(&proxy.endpoint()), &edit.a(), "s3://gen", &[]).ok();
    let files = files_of(&edit.a());
    let puts = archive_puts(&proxy.puts());
    assert_eq!(puts.len(), files.len(), "each part and the root once: {puts:?}");
    assert_eq!(puts.iter().collect::<BTreeSet<_>>(), files.iter().collect::<BTreeSet<_>>());
    assert_eq!(puts.last().map(String::as_str), Some("root"), "the root last: {puts:?}");
    assert!(run.stdout().contains(&format!("{} uploaded", files.len())), "{}", run.stdout());
    assert_bucket_serves(&weed, &edit.a());
    let (_, media, cache) = weed.get("root");
    assert_eq!((media.as_str(), cache.as_str()), ("application/octet-stream", "no-cache"));
    let (_, media, cache) = weed.get(&files[0]);
    assert_eq!((media.as_str(), cache.as_str()), ("application/octet-stream", "public, max-age=31536000, immutable"));
    // nothing of gen's bookkeeping is left behind but nothing else either
    let keys: BTreeSet<String> = weed.list().into_keys().collect();
    assert_eq!(keys, files.iter().cloned().collect::<BTreeSet<_>>());
    proxy.clear();
    let run = publish_to(&weed, Some(&proxy.endpoint()), &edit.a(), "s3://gen", &[]).ok();
    assert!(run.stdout().contains("is up to date"), "{}", run.stdout());
    assert_eq!(archive_puts(&proxy.puts()), Vec::<String>::new(), "an unchanged archive writes nothing");
    // a part damaged on the bucket, its size kept: found and replaced by --verify alone
    let (mut damaged, _, _) = weed.get(&files[0]);
    damaged[7] ^= 1;
    weed.put(&files[0], &damaged);
    let run = publish_to(&weed, None, &edit.a(), "s3://gen", &[]).ok();
    assert!(run.stdout().contains("is up to date"), "{}", run.stdout());
    let run = publish_to(&weed, None, &edit.a(), "s3://gen", &["--verify"]).ok();
    assert!(run.stdout().contains("1 uploaded"), "{}", run.stdout());
    assert_bucket_serves(&weed, &edit.a());
}

#[test]
fn a_one_record_edit_publishes_its_three_files_and_exactly_its_urls() {
    let Some(weed) = Weed::start() else { return };
    let edit = Edit::new();
    publish_to(&weed, None, &edit.a(), "s3://gen", &[]).ok();
    let b = edit.tmp.join("b");
    let changed = edited_archive(&edit.a(), &edit.tree_a(), &edit.site.out(), &b);
    assert!(changed.iter().any(|key| key.starts_with("api/v2/berry/")), "the edit changed a berry: {changed:?}");
    let proxy = weed.proxy();
    let list = edit.tmp.join("changed.txt");
    publish_to(&weed, Some(&proxy.endpoint()), &b, "s3://gen", &["--changed-urls", path_str(&list)]).ok();
    let puts = archive_puts(&proxy.puts());
    assert!(puts.len() <= 4, "a one-record edit publishes at most 4 objects: {puts:?}");
    assert_eq!(puts.len(), 3, "a part of documents, a part of blocks, the root: {puts:?}");
    assert_eq!(puts.last().map(String::as_str), Some("root"));
    assert_bucket_serves(&weed, &b);
    let listed: Vec<String> = std::fs::read_to_string(&list).unwrap().lines().map(String::from).collect();
    assert_eq!(listed, urls(&base_url(&edit.site.out()), &changed));
    // a removed record: its urls (gone), and those of the lists that named it
    let tree_b = edit.tmp.join("tree-b");
    copy_tree(&edit.site.out(), &tree_b);
    edit.site.remove_record();
    edit.site.build(&[]);
    let c = edit.tmp.join("c");
    let removed = edited_archive(&b, &tree_b, &edit.site.out(), &c);
    assert!(removed.contains("api/v2/berry/1017/index.json"), "{removed:?}");
    publish_to(&weed, None, &c, "s3://gen", &["--changed-urls", path_str(&list)]).ok();
    let listed: Vec<String> = std::fs::read_to_string(&list).unwrap().lines().map(String::from).collect();
    assert_eq!(listed, urls(&base_url(&edit.site.out()), &removed));
    assert!(Reader::open(Bucket(&weed)).unwrap().get("api/v2/berry/1017/index.json").unwrap().is_none());
}

/// `gen build --archive`, then `gen publish`, as a user runs them: a one-record edit rebuilt
/// publishes at most 4 objects, the root last, and lists the edited record's urls.
#[test]
fn an_archive_built_then_rebuilt_after_a_one_record_edit_publishes_its_change() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    let tmp = TempDir::new("publish-archive-built");
    let archive = tmp.join("archive");
    let build = || build_archive(&site, &archive);
    build();
    publish_to(&weed, None, &archive, "s3://gen", &[]).ok();
    assert_bucket_serves(&weed, &archive);
    site.edit_record();
    build();
    let proxy = weed.proxy();
    let list = tmp.join("changed.txt");
    publish_to(&weed, Some(&proxy.endpoint()), &archive, "s3://gen", &["--changed-urls", path_str(&list)]).ok();
    let puts = archive_puts(&proxy.puts());
    assert!((1..=4).contains(&puts.len()), "a one-record edit publishes at most 4 objects: {puts:?}");
    assert_eq!(puts.last().map(String::as_str), Some("root"), "{puts:?}");
    assert_bucket_serves(&weed, &archive);
    let listed = std::fs::read_to_string(&list).unwrap();
    let base = base_url(&site.out());
    for url in [format!("{base}/api/v2/berry/5/"), format!("{base}/api/v2/berry/berry-5/")] {
        assert!(listed.lines().any(|line| line == url), "{url} not in:\n{listed}");
    }
}

/// A failed upload names the archive's commit point, its root, in what it says is left as it
/// was (a tree's publish names its manifest).
#[test]
fn a_failed_upload_of_an_archive_says_its_root_is_still_the_previous_one() {
    let Some(weed) = Weed::start() else { return };
    let edit = Edit::new();
    let proxy = weed.proxy();
    proxy.fault(Some("PUT"), "root", crate::fault_proxy::Fault::Status500);
    let run = publish_to(&weed, Some(&proxy.endpoint()), &edit.a(), "s3://gen", &["--retries", "0"]).fails_with(2);
    let said = run.stderr();
    assert!(said.contains("the published root is still the previous one") && !said.contains("manifest"), "{said}");
}

/// The record of retired parts on the bucket: part → since when.
fn retired(weed: &Weed) -> BTreeMap<String, i64> {
    let record: serde_json::Value = serde_json::from_slice(&weed.get(RETIRED).0).unwrap();
    serde_json::from_value(record["parts"].clone()).unwrap()
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn parts_no_root_names_stay_for_the_grace_counted_from_their_retirement_then_go() {
    let Some(weed) = Weed::start() else { return };
    let edit = Edit::new();
    publish_to(&weed, None, &edit.a(), "s3://gen", &[]).ok();
    let old_root = weed.get("root").0;
    // a fresh archive of the edited tree: every part new, every part of `a` unnamed
    let b = edit.tmp.join("b");
    build_archive(&edit.site, &b);
    let (a_files, b_files) = (files_of(&edit.a()), files_of(&b));
    let unnamed: BTreeSet<String> =
        a_files.iter().filter(|f| f.starts_with("parts/") && !b_files.contains(f)).cloned().collect();
    assert!(!unnamed.is_empty());
    let before = now_secs();
    let run = publish_to(&weed, None, &b, "s3://gen", &[]).ok();
    assert!(run.stdout().contains("kept until its grace ends"), "{}", run.stdout());
    assert_bucket_serves(&weed, &b);
    // what is not a part of gen's under parts/ is never listed as one, nor deleted
    weed.put("parts/notes.txt", b"not a part");
    weed.put(&format!("parts/{}", "A".repeat(64)), b"not a part either");
    // within the grace: a reader that opened the old root still finds every part it names
    let record = retired(&weed);
    assert_eq!(record.keys().cloned().collect::<BTreeSet<_>>(), unnamed);
    assert!(record.values().all(|&since| since >= before), "counted from the publish that unnamed them: {record:?}");
    let keys: BTreeSet<String> = weed.list().into_keys().collect();
    assert!(unnamed.is_subset(&keys));
    let old_reader = Reader::open(OldRoot(&weed, old_root.clone())).unwrap();
    old_reader.verify().unwrap();
    // still within the grace a publish later: nothing written, nothing deleted
    let run = publish_to(&weed, None, &b, "s3://gen", &["--grace", "1h"]).ok();
    assert!(run.stdout().contains("is up to date"), "{}", run.stdout());
    assert_eq!(retired(&weed), record);
    // 59 minutes after their retirement, with a grace of an hour: kept
    let shifted = |by: i64| -> Vec<u8> {
        let parts: BTreeMap<&String, i64> = record.iter().map(|(part, since)| (part, since - by)).collect();
        serde_json::to_vec(&serde_json::json!({ "parts": parts })).unwrap()
    };
    weed.put(RETIRED, &shifted(59 * 60));
    publish_to(&weed, None, &b, "s3://gen", &["--grace", "1h"]).ok();
    assert!(unnamed.is_subset(&weed.list().into_keys().collect()));
    // an hour and a second after: deleted, and the record empty
    weed.put(RETIRED, &shifted(3601));
    let run = publish_to(&weed, None, &b, "s3://gen", &["--grace", "1h"]).ok();
    assert!(run.stdout().contains(&format!("{} deleted", unnamed.len())), "{}", run.stdout());
    let keys: BTreeSet<String> = weed.list().into_keys().collect();
    assert!(unnamed.is_disjoint(&keys), "{keys:?}");
    assert!(keys.contains("parts/notes.txt") && keys.contains(&format!("parts/{}", "A".repeat(64))), "{keys:?}");
    assert_eq!(retired(&weed), BTreeMap::new());
    assert_bucket_serves(&weed, &b);
    // --grace 0s: what this publish unnames goes at once
    publish_to(&weed, None, &edit.a(), "s3://gen", &["--grace", "0s"]).ok();
    let keys: BTreeSet<String> = weed.list().into_keys().filter(|k| k.starts_with("parts/") || k == "root").collect();
    let mut expected: BTreeSet<String> = a_files.into_iter().collect();
    expected.extend(["parts/notes.txt".to_string(), format!("parts/{}", "A".repeat(64))]);
    assert_eq!(keys, expected);
    let bad = publish_to(&weed, None, &edit.a(), "s3://gen", &["--grace", "1x"]).fails_with(2);
    assert!(bad.stderr().contains("is not a duration"), "{}", bad.stderr());
}

/// The bucket's parts read under a root of the past (a reader that opened it before a publish).
struct OldRoot<'a>(&'a Weed, Vec<u8>);

impl RangeSource for OldRoot<'_> {
    fn read(&self, file: &str, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        Bucket(self.0).read(file, offset, len)
    }

    fn read_all(&self, _file: &str) -> std::io::Result<Vec<u8>> {
        Ok(self.1.clone())
    }
}

#[test]
fn a_publish_killed_before_its_root_leaves_the_old_root_whole_and_the_next_completes_it() {
    let Some(weed) = Weed::start() else { return };
    let edit = Edit::new();
    publish_to(&weed, None, &edit.a(), "s3://gen", &[]).ok();
    let b = edit.tmp.join("b");
    build_archive(&edit.site, &b);
    let new_parts = files_of(&b).len() - 1;
    assert!(new_parts >= 2);
    // killed after one part, then after every part left (its root held on the way)
    for root_held in [false, true] {
        let present: BTreeSet<String> = weed.list().into_keys().collect();
        let missing = files_of(&b).iter().filter(|f| f.starts_with("parts/") && !present.contains(*f)).count();
        assert!(missing >= 1);
        let after = if root_held { missing } else { 1 };
        let proxy = weed.proxy();
        proxy.hold_write_after(after);
        let mut child = spawn_publish(&proxy.endpoint(), &b, &["-q", "--jobs", "1", "--take-over-lock"], &[]);
        if !proxy.wait_for_hold(|| child.try_wait().unwrap().is_some()) {
            let output = child.wait_with_output().unwrap();
            panic!("the publish ended before the hold: {}", String::from_utf8_lossy(&output.stderr));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let held: Vec<String> = archive_puts(&proxy.puts());
        if root_held {
            assert_eq!(held.last().map(String::as_str), Some("root"), "held at its root: {held:?}");
        }
        proxy.clear();
        drop(proxy);
        assert_bucket_serves(&weed, &edit.a());
    }
    // the next publish completes it: the parts are there, so only the root is written
    let proxy = weed.proxy();
    publish_to(&weed, Some(&proxy.endpoint()), &b, "s3://gen", &["--take-over-lock"]).ok();
    assert_eq!(archive_puts(&proxy.puts()), ["root"]);
    assert_bucket_serves(&weed, &b);
    let keys: BTreeSet<String> = weed.list().into_keys().collect();
    assert!(!keys.iter().any(|k| k.starts_with(".gen-publish.")), "marker and lock gone: {keys:?}");
}

#[test]
fn a_tree_over_an_archive_and_an_archive_over_a_tree_are_refused_naming_what_to_do() {
    let Some(weed) = Weed::start() else { return };
    let edit = Edit::new();
    publish_to(&weed, None, &edit.site.out(), "s3://gen/tree", &[]).ok();
    publish_to(&weed, None, &edit.a(), "s3://gen/archive", &[]).ok();
    let before = weed.list();
    let run = publish_to(&weed, None, &edit.a(), "s3://gen/tree", &[]).fails_with(2);
    assert!(
        run.stderr().contains("holds a published tree") && run.stderr().contains("another prefix"),
        "{}",
        run.stderr()
    );
    let run = publish_to(&weed, None, &edit.site.out(), "s3://gen/archive", &[]).fails_with(2);
    assert!(
        run.stderr().contains("holds a published archive") && run.stderr().contains("another prefix"),
        "{}",
        run.stderr()
    );
    let after = weed.list();
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "nothing written or deleted");
}

/// The figures of docs/deploy.md's "Publishing an archive": objects and bytes of a first
/// publish and of a one-record edit, tree against archive, on the published fixture (imported,
/// built with `--links path`).
#[test]
#[ignore = "a measure: cargo test --release --test suite publish_archive::measure -- --ignored --nocapture"]
fn measure_tree_and_archive_publishes_on_the_fixture() {
    let Some(fixture) = common::fixture() else { return };
    let Some(weed) = Weed::start() else { return };
    let tmp = TempDir::new("publish-measure");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    common::run(&["import", "api-data", path_str(&fixture), "--out", path_str(&data)]).ok();
    let build = || {
        common::run(&["build", "-q", "--data", path_str(&data), "--out", path_str(&out), "--links", "path"]).ok();
    };
    build();
    let (tree_a, archive_a, archive_b) = (tmp.join("tree-a"), tmp.join("archive-a"), tmp.join("archive-b"));
    copy_tree(&out, &tree_a);
    build_archive_of(&data, &archive_a);
    let record = data.join("berry/1.json");
    let text = std::fs::read_to_string(&record).unwrap().replacen("\"potency\": 10", "\"potency\": 11", 1);
    std::fs::write(&record, text).unwrap();
    build();
    let changed = edited_archive(&archive_a, &tree_a, &out, &archive_b);
    eprintln!("the edit changed {} documents: {changed:?}", changed.len());
    for (what, first, second, target) in
        [("tree", &tree_a, &out, "s3://gen/tree"), ("archive", &archive_a, &archive_b, "s3://gen/archive")]
    {
        for (step, dir) in [("first publish", first), ("one-record edit", second)] {
            let proxy = weed.proxy();
            let started = std::time::Instant::now();
            let run = publish_to(&weed, Some(&proxy.endpoint()), dir, target, &[]).ok();
            let seconds = started.elapsed().as_secs_f64();
            let objects = proxy.puts().iter().filter(|key| !key.contains(".gen-publish")).count();
            eprintln!(
                "{what}, {step}: {objects} objects written; gen says: {}; {seconds:.2} s in all",
                run.stdout().trim()
            );
        }
    }
}

#[test]
fn an_archive_published_into_a_folder_reads_back_whole_and_a_dry_run_changes_nothing() {
    let edit = Edit::new();
    let site = edit.tmp.join("site");
    let target = format!("file://{}", site.display());
    let run = common::run(&["publish", "--dir", path_str(&edit.a()), &target]).ok();
    assert!(run.stdout().contains(&format!("{} uploaded", files_of(&edit.a()).len())), "{}", run.stdout());
    let published = Reader::open(Folder(site.clone())).unwrap();
    published.verify().unwrap();
    let local = Reader::open(Folder(edit.a())).unwrap();
    assert_eq!(published.entries().unwrap(), local.entries().unwrap());
    let b = edit.tmp.join("b");
    edited_archive(&edit.a(), &edit.tree_a(), &edit.site.out(), &b);
    let before = read_tree(&site);
    let run = common::run(&["publish", "--dir", path_str(&b), "--dry-run", &target]).ok();
    assert!(run.stdout().contains("would upload 3"), "{}", run.stdout());
    assert_eq!(read_tree(&site), before, "a dry run changes nothing");
    common::run(&["publish", "--dir", path_str(&b), &target]).ok();
    assert_eq!(std::fs::read(site.join("root")).unwrap(), std::fs::read(b.join("root")).unwrap());
    Reader::open(Folder(site.clone())).unwrap().verify().unwrap();
    let run = common::run(&["publish", "--dir", path_str(&edit.site.out()), &target]).fails_with(2);
    assert!(run.stderr().contains("holds a published archive"), "{}", run.stderr());
}
