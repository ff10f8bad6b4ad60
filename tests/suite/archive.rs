//! The archive's library (issue 49, docs/archive.md): round trip, one copy for two keys,
//! determinism, the reads a lookup takes cold and warm, an edit that writes only its change and
//! reads back as a fresh archive of the edited set (a random-edit property with a fixed seed),
//! damage refused, and a real built tree archived whole.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use genapi::archive::{self, Change, Document, Error, Folder, Options, Reader};

use crate::common::{TempDir, build, read_tree, sample_data};

/// A record's document, under its id and its name, of a size that varies with `n` and `version`.
fn record(n: u64, version: u64) -> Document {
    let body = format!(
        "{{\"id\": {n}, \"name\": \"thing-{n}\", \"version\": {version}, \"text\": \"{}\"}}",
        "lorem ipsum ".repeat((n % 17) as usize)
    );
    Document::new(
        vec![format!("api/v2/thing/{n}/index.json"), format!("api/v2/thing/thing-{n}/index.json")],
        body.into_bytes(),
    )
}

fn small() -> Options {
    Options { part_bytes: 8 << 10, block_entries: 16, merge_after: 16 }
}

fn open(dir: &Path) -> Reader<Folder> {
    Reader::open(Folder(dir.to_path_buf())).unwrap()
}

/// Every key of the archive and its document, decompressed (each checked against its hash).
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let reader = open(dir);
    let entries = reader.entries().unwrap();
    entries.into_iter().map(|e| (e.key.clone(), reader.document(e).unwrap().bytes)).collect()
}

/// A small deterministic generator (xorshift64*), so that the random edits are the same in every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn documents_read_back_and_a_document_under_two_keys_is_stored_once() {
    let dir = TempDir::new("archive-round-trip");
    let docs: Vec<Document> = (0..300).map(|n| record(n, 1)).collect();
    let written = archive::write(dir.path(), docs.clone(), &small()).unwrap();
    assert_eq!(written.files.last().map(String::as_str), Some("root"), "the root is written last");
    let reader = open(dir.path());
    assert_eq!(reader.len(), 600);
    for doc in &docs {
        for key in &doc.keys {
            let found = reader.get(key).unwrap().unwrap_or_else(|| panic!("{key} not found"));
            assert_eq!(found.bytes, doc.bytes, "{key}");
            assert_eq!(found.entry.media_type, "application/json; charset=utf-8");
            assert_eq!(found.entry.hash, *blake3::hash(&doc.bytes).as_bytes(), "the hash is the tree's ETag hash");
            let mut decoded = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&found.stored[..]), &mut decoded).unwrap();
            assert_eq!(decoded, doc.bytes, "the stored bytes are gzip a host can send as they are");
        }
    }
    assert!(reader.get("api/v2/thing/300/index.json").unwrap().is_none());
    assert!(reader.get("").unwrap().is_none());
    assert!(reader.get("zzz").unwrap().is_none());
    // stored once: the id and name entries point at the same bytes, and the data parts hold
    // each document's gzip exactly once
    let entries = reader.entries().unwrap();
    let places: BTreeSet<_> = entries.iter().map(|e| (e.part, e.offset)).collect();
    assert_eq!(places.len(), 300);
    let stored: u64 = places.iter().map(|p| entries.iter().find(|e| (e.part, e.offset) == *p).unwrap().length).sum();
    let data_parts: BTreeSet<_> = entries.iter().map(|e| archive::part_file(&e.part)).collect();
    let data_bytes: u64 = data_parts.iter().map(|f| std::fs::metadata(dir.join(f)).unwrap().len()).sum();
    assert_eq!(data_bytes, stored, "the data parts hold each document's gzip once, and nothing else");
    assert!(reader.files().len() > 4, "the small bounds cut several parts: {:?}", reader.files());
    reader.verify().unwrap();
}

#[test]
fn the_same_documents_in_any_order_give_the_same_bytes() {
    let (one, two) = (TempDir::new("archive-order-1"), TempDir::new("archive-order-2"));
    let docs: Vec<Document> = (0..200).map(|n| record(n, 1)).collect();
    let mut shuffled = docs.clone();
    let mut rng = Rng(7);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    assert_ne!(shuffled, docs);
    let first = archive::write(one.path(), docs, &small()).unwrap();
    let second = archive::write(two.path(), shuffled, &small()).unwrap();
    assert_eq!(first, second);
    assert_eq!(read_tree(one.path()), read_tree(two.path()));
}

#[test]
fn a_record_takes_two_reads_cold_and_one_warm() {
    let dir = TempDir::new("archive-reads");
    archive::write(dir.path(), (0..500).map(|n| record(n, 1)), &small()).unwrap();
    let reader = open(dir.path());
    assert_eq!(reader.reads(), 1, "opening reads the root");
    for n in [0, 1, 250, 499] {
        let key = format!("api/v2/thing/{n}/index.json");
        reader.forget_blocks();
        let before = reader.reads();
        reader.get(&key).unwrap().unwrap();
        assert_eq!(reader.reads() - before, 2, "{key} cold: its block, then the document");
        let before = reader.reads();
        reader.get(&key).unwrap().unwrap();
        assert_eq!(reader.reads() - before, 1, "{key} warm: the document");
        let before = reader.reads();
        assert!(reader.get(&format!("{key}x")).unwrap().is_none());
        assert!(reader.reads() - before <= 1, "an absent key: at most its block");
    }
}

#[test]
fn a_one_record_edit_writes_a_small_part_the_blocks_it_changed_and_a_root() {
    let (dir, fresh) = (TempDir::new("archive-edit"), TempDir::new("archive-edit-fresh"));
    let options = Options { block_entries: 64, ..Options::default() };
    let mut docs: Vec<Document> = (0..2000).map(|n| record(n, 1)).collect();
    archive::write(dir.path(), docs.clone(), &options).unwrap();
    let before = read_tree(dir.path());
    docs[1234] = record(1234, 2);
    let written = archive::edit(dir.path(), [Change::Put(docs[1234].clone())], &options).unwrap();
    assert!(!written.merged);
    assert_eq!(written.files.len(), 3, "a data part, an index part, the root: {:?}", written.files);
    assert_eq!(written.files[2], "root");
    let stored = open(dir.path()).get("api/v2/thing/1234/index.json").unwrap().unwrap().stored;
    let data_part = std::fs::metadata(dir.join(&written.files[0])).unwrap().len();
    assert_eq!(data_part, stored.len() as u64, "the data part holds the one document, once for its two keys");
    let index_part = std::fs::metadata(dir.join(&written.files[1])).unwrap().len();
    let blocks = open(dir.path()).len().div_ceil(64);
    assert!(index_part * blocks / 3 < before.values().map(|b| b.len() as u64).sum(), "{index_part} bytes of blocks");
    let after = read_tree(dir.path());
    for (file, bytes) in &before {
        if file != "root" {
            assert_eq!(after.get(file), Some(bytes), "{file}: parts are immutable");
        }
    }
    archive::write(fresh.path(), docs, &options).unwrap();
    assert_eq!(contents(dir.path()), contents(fresh.path()), "the edited archive reads as a fresh one");
}

#[test]
fn random_edits_read_back_as_a_fresh_archive_and_a_merge_is_one() {
    let (dir, fresh) = (TempDir::new("archive-fuzz"), TempDir::new("archive-fuzz-fresh"));
    let options = Options { part_bytes: 64 << 10, block_entries: 8, merge_after: 6 };
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let initial: Vec<Document> = (0..120).map(|n| record(n * 3, 1)).collect();
    for doc in &initial {
        doc.keys.iter().for_each(|k| drop(model.insert(k.clone(), doc.bytes.clone())));
    }
    archive::write(dir.path(), initial, &options).unwrap();
    let (mut rng, mut merges, mut deltas) = (Rng(0x5eed), 0, 0);
    for round in 0..60 {
        let mut changes = Vec::new();
        let mut changed = BTreeSet::new();
        for _ in 0..1 + rng.below(5) {
            let n = rng.below(400);
            if rng.below(3) == 0 {
                let key = format!("api/v2/thing/{n}/index.json");
                if changed.insert(key.clone()) {
                    model.remove(&key);
                    changes.push(Change::Remove(key));
                }
            } else {
                let doc = record(n, round);
                if doc.keys.iter().all(|k| changed.insert(k.clone())) {
                    doc.keys.iter().for_each(|k| drop(model.insert(k.clone(), doc.bytes.clone())));
                    changes.push(Change::Put(doc));
                }
            }
        }
        let written = archive::edit(dir.path(), changes, &options).unwrap();
        assert_eq!(contents(dir.path()), model, "round {round}");
        if written.merged {
            merges += 1;
            let docs = model.iter().map(|(k, b)| Document::new(vec![k.clone()], b.clone()));
            let _ = std::fs::remove_dir_all(fresh.path());
            archive::write(fresh.path(), docs, &options).unwrap();
            let root = |d: &TempDir| std::fs::read(d.join("root")).unwrap();
            assert_eq!(root(&dir), root(&fresh), "round {round}: a merge writes the fresh archive's root");
        } else {
            deltas += 1;
            assert!(written.files.len() <= 3, "round {round}: {:?}", written.files);
        }
    }
    assert!(merges >= 5 && deltas >= 30, "{merges} merges and {deltas} deltas in 60 edits with merge_after 6");
    open(dir.path()).verify().unwrap();
}

/// The archive's file holding `key`'s document, and where.
fn place_of(dir: &Path, key: &str) -> (String, u64, u64) {
    let entry = open(dir).entry(key).unwrap().unwrap();
    (archive::part_file(&entry.part), entry.offset, entry.length)
}

#[test]
fn damage_truncation_and_a_missing_part_are_refused_never_served() {
    let dir = TempDir::new("archive-damage");
    archive::write(dir.path(), (0..100).map(|n| record(n, 1)), &small()).unwrap();
    let key = "api/v2/thing/42/index.json";
    let (file, offset, length) = place_of(dir.path(), key);
    let pristine = std::fs::read(dir.join(&file)).unwrap();

    let mut damaged = pristine.clone();
    damaged[(offset + length / 2) as usize] ^= 0x20;
    std::fs::write(dir.join(&file), &damaged).unwrap();
    let error = open(dir.path()).get(key).unwrap_err();
    assert!(matches!(error, Error::Damaged { .. }), "{error}");
    assert!(error.to_string().contains(&file) && error.to_string().contains(key), "{error}");
    assert!(matches!(open(dir.path()).verify().unwrap_err(), Error::Damaged { .. }));

    std::fs::write(dir.join(&file), &pristine[..(offset + length - 1) as usize]).unwrap();
    let error = open(dir.path()).get(key).unwrap_err();
    assert!(matches!(error, Error::Truncated { .. }), "{error}");
    assert!(error.to_string().contains("truncated"), "{error}");

    std::fs::remove_file(dir.join(&file)).unwrap();
    let error = open(dir.path()).get(key).unwrap_err();
    assert!(matches!(error, Error::Missing { .. }), "{error}");
    assert!(error.to_string().contains(&format!("archive part {file} is missing")), "{error}");
    std::fs::write(dir.join(&file), &pristine).unwrap();
    assert_eq!(open(dir.path()).get(key).unwrap().unwrap().bytes, record(42, 1).bytes);

    // a directory block damaged: its key is refused, with the block named
    let reader = open(dir.path());
    let index = reader.files().into_iter().find(|f| {
        f != &file && f != "root" && {
            let bytes = std::fs::read(dir.join(f)).unwrap();
            bytes.len() > 4 && reader.entries().unwrap().iter().all(|e| archive::part_file(&e.part) != *f)
        }
    });
    let index = index.expect("an index part");
    let mut bytes = std::fs::read(dir.join(&index)).unwrap();
    bytes[20] ^= 1;
    std::fs::write(dir.join(&index), &bytes).unwrap();
    let error = open(dir.path()).entries().unwrap_err();
    assert!(error.to_string().contains("directory block"), "{error}");

    // the root damaged or truncated: the archive does not open
    let root = std::fs::read(dir.join("root")).unwrap();
    std::fs::write(dir.join("root"), &root[..root.len() - 3]).unwrap();
    let error = Reader::open(Folder(dir.path().to_path_buf())).err().unwrap();
    assert!(error.to_string().contains("archive file root is damaged"), "{error}");
}

#[test]
fn a_key_given_to_two_different_documents_is_refused() {
    let dir = TempDir::new("archive-conflict");
    let docs =
        [Document::new(vec!["a".into()], b"1".to_vec()), Document::new(vec!["b".into(), "a".into()], b"2".to_vec())];
    let error = archive::write(dir.path(), docs, &small()).unwrap_err();
    assert!(error.to_string().contains("the key a is given to two different documents"), "{error}");
    assert!(!dir.join("root").exists());
}

/// Every file of a built tree, as documents: a tree's by-name copies are found by their bytes.
fn tree_documents(tree: &Path) -> Vec<Document> {
    read_tree(tree).into_iter().map(|(path, bytes)| Document::new(vec![path], bytes)).collect()
}

#[test]
fn a_built_tree_archived_reads_back_file_for_file() {
    let (data, out, dir) =
        (TempDir::new("archive-data"), TempDir::new("archive-tree"), TempDir::new("archive-of-tree"));
    sample_data(data.path());
    // the tree in a folder of its own: its build state goes beside it, inside `out`
    let tree_dir = out.join("tree");
    build(data.path(), &tree_dir, &[]).ok();
    let tree = read_tree(&tree_dir);
    archive::write(dir.path(), tree_documents(&tree_dir), &Options::default()).unwrap();
    assert_eq!(contents(dir.path()), tree);
    let reader = open(dir.path());
    let places: BTreeSet<_> = reader.entries().unwrap().iter().map(|e| (e.part, e.offset)).collect();
    let distinct: BTreeSet<_> = tree.values().collect();
    assert_eq!(places.len(), distinct.len(), "each distinct file stored once");
    assert!(places.len() < tree.len(), "by-name copies share their by-id bytes");
}

/// The measurement of docs/archive.md: a real built tree (`ARCHIVE_TREE`, default `/tmp/a-tree`,
/// built by `gen build --data data --out /tmp/a-tree`) archived, with bytes, files and time.
#[test]
#[ignore]
fn measure_a_built_tree() {
    let tree = std::env::var("ARCHIVE_TREE").unwrap_or_else(|_| "/tmp/a-tree".into());
    let dir = TempDir::new("archive-measure");
    let files = read_tree(Path::new(&tree));
    let tree_bytes: u64 = files.values().map(|b| b.len() as u64).sum();
    let start = std::time::Instant::now();
    let written = archive::write(dir.path(), tree_documents(Path::new(&tree)), &Options::default()).unwrap();
    let elapsed = start.elapsed();
    let reader = open(dir.path());
    eprintln!(
        "tree: {} files, {tree_bytes} bytes (every path a copy); archive: {} files, {} bytes, {} keys, written in {elapsed:?}",
        files.len(),
        written.files.len(),
        written.bytes,
        reader.len()
    );
    assert_eq!(contents(dir.path()), files);
    let root = std::fs::metadata(dir.join("root")).unwrap().len();
    let (key, bytes) = files.iter().find(|(k, _)| k.ends_with("/1/index.json")).expect("a record 1");
    let edited = Document::new(vec![key.clone()], [bytes.as_slice(), b" "].concat());
    let start = std::time::Instant::now();
    let edit = archive::edit(dir.path(), [Change::Put(edited)], &Options::default()).unwrap();
    eprintln!(
        "root: {root} bytes; a one-document edit ({key}): {} files, {} bytes, in {:?}",
        edit.files.len(),
        edit.bytes,
        start.elapsed()
    );
    assert!(!edit.merged);
}

/// The part files in the archive's `parts/` folder.
fn part_files(dir: &Path) -> BTreeSet<String> {
    let listing = std::fs::read_dir(dir.join("parts")).unwrap();
    listing.map(|e| format!("parts/{}", e.unwrap().file_name().to_string_lossy())).collect()
}

#[test]
fn prune_keeps_the_parts_of_the_current_and_the_previous_root_only() {
    let (dir, previous) = (TempDir::new("archive-prune"), TempDir::new("archive-prune-previous"));
    let options = Options { merge_after: 20, ..small() };
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let initial: Vec<Document> = (0..600).map(|n| record(n, 0)).collect();
    initial.iter().for_each(|d| d.keys.iter().for_each(|k| drop(model.insert(k.clone(), d.bytes.clone()))));
    archive::write(dir.path(), initial, &options).unwrap();
    let edit = |round: u64, model: &mut BTreeMap<String, Vec<u8>>| {
        let doc = record(round * 29 % 600, round);
        doc.keys.iter().for_each(|k| drop(model.insert(k.clone(), doc.bytes.clone())));
        let written = archive::edit(dir.path(), [Change::Put(doc)], &options).unwrap();
        archive::prune(dir.path()).unwrap();
        written.merged
    };
    for round in 1..=20 {
        assert!(!edit(round, &mut model), "round {round}: a delta");
    }
    // a reader in flight on the root the merge replaces, and what it holds
    let (in_flight, old_model) = (open(dir.path()), model.clone());
    let old_root = std::fs::read(dir.join("root")).unwrap();
    assert!(edit(21, &mut model), "the 21st edit is a merge");
    assert_eq!(std::fs::read(dir.join("root.previous")).unwrap(), old_root, "root.previous is the root replaced");
    let (now, before) = (open(dir.path()).files(), in_flight.files());
    let named: BTreeSet<String> = now.into_iter().chain(before).filter(|f| f != "root").collect();
    assert_eq!(part_files(dir.path()), named, "parts/ holds the current and the previous root's parts, no others");
    // the reader opened before the merge still reads every key, checked, from the pruned folder
    let entries = in_flight.entries().unwrap();
    let read: BTreeMap<String, Vec<u8>> =
        entries.into_iter().map(|e| (e.key.clone(), in_flight.document(e).unwrap().bytes)).collect();
    assert_eq!(read, old_model);
    // and so does one opened later on root.previous
    std::fs::create_dir_all(previous.path()).unwrap();
    std::fs::copy(dir.join("root.previous"), previous.join("root")).unwrap();
    std::os::unix::fs::symlink(dir.join("parts"), previous.join("parts")).unwrap();
    assert_eq!(contents(previous.path()), old_model);
    assert_eq!(contents(dir.path()), model);
    // a prune with nothing to delete deletes nothing
    assert_eq!(archive::prune(dir.path()).unwrap(), archive::Pruned::default());
}
