//! Bulk data (issue 37): every resource's records in one gzip'd NDJSON file, listed at
//! `/api/v2/bulk-data/`. The files are checked against what they claim (size, SHA-256 computed
//! here with `ring`), against the records `gen serve` answers (in list order), across an edit,
//! and under a memory bound. The host tests (nginx, Caddy, edge, publish) are in their files.

use crate::common;
use crate::serve_support;

use common::*;
use serve_support::Server;
use std::io::Read;
use std::path::Path;

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// SHA-256 (hex) of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The lines of a gzip'd NDJSON file, each parsed.
pub(crate) fn lines(gzip: &[u8]) -> Vec<serde_json::Value> {
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(gzip).read_to_string(&mut text).expect("gzip");
    assert!(text.is_empty() || text.ends_with('\n'), "every line ends with a newline");
    text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect()
}

/// The gzip members of `gzip`, each as its bytes, split by reading one member at a time.
pub(crate) fn members(gzip: &[u8]) -> Vec<&[u8]> {
    let (mut rest, mut members) = (gzip, Vec::new());
    while !rest.is_empty() {
        let mut decoder = flate2::bufread::GzDecoder::new(rest);
        std::io::copy(&mut decoder, &mut std::io::sink()).expect("a gzip member");
        let after = decoder.into_inner();
        members.push(&rest[..rest.len() - after.len()]);
        rest = after;
    }
    members
}

/// Members of about 2 KB of records: the sample's berries take about twenty.
pub(crate) const SMALL_MEMBERS: [(&str, &str); 1] = [("GEN_BULK_MEMBER_BYTES", "2000")];

/// The entries of the bulk-data index of the tree `out`, by resource.
fn entries(out: &Path) -> Vec<serde_json::Value> {
    let index = read_json(&out.join("api/v2/bulk-data/index.json"));
    let results = index["results"].as_array().expect("results").clone();
    assert_eq!(index["count"], results.len());
    results
}

/// The tree path of an entry's file (its url below the base).
fn file_of(entry: &serde_json::Value, base: &str) -> String {
    let url = entry["download_url"].as_str().unwrap();
    url.strip_prefix(&format!("{base}/")).unwrap_or_else(|| panic!("{url} is not on {base}")).to_string()
}

/// The bytes of the bulk-data file of `resource` in the tree `out` (built with the default base
/// url), as its entry in the bulk-data index names it.
fn bulk_file(out: &Path, resource: &str) -> Vec<u8> {
    let entry = entries(out).into_iter().find(|e| e["resource"] == resource).unwrap();
    std::fs::read(out.join(file_of(&entry, "http://127.0.0.1:8080"))).unwrap()
}

/// For every resource of the published fixture, the entry's size and SHA-256 are the file's,
/// its name carries the hash, `gen serve` answers it byte for byte with the bulk headers, and
/// its lines are, parsed, the records `gen serve` answers, in the order of the list.
#[test]
fn every_resource_of_the_published_fixture_has_a_true_file_of_its_records_in_list_order() {
    let Some(fixture) = fixture() else { return };
    let tmp = TempDir::new("bulk-fixture");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    run(&["import", "api-data", utf8(&fixture), "--out", utf8(&data)]).ok();
    build(&data, &out, &[]).ok();
    let base = read_json(&out.join("manifest.json"))["base_url"].as_str().unwrap().to_string();
    let root = read_json(&out.join("api/v2/index.json"));
    let resources: Vec<&String> = root.as_object().unwrap().keys().collect();
    let entries = entries(&out);
    let listed: Vec<&str> = entries.iter().map(|e| e["resource"].as_str().unwrap()).collect();
    assert_eq!(listed, resources, "one entry per resource, in the root's order");
    // the root lists resources only: meta names the index
    assert!(root.get("bulk-data").is_none());
    assert_eq!(read_json(&out.join("api/v2/meta/index.json"))["bulk_data"], format!("{base}/api/v2/bulk-data/"));

    let server = Server::start(&out, &[]);
    let mut conn = server.connect();
    let index = conn.get("/api/v2/bulk-data/").expect(200);
    assert_eq!(index.header("Cache-Control"), Some("no-cache"));
    assert_eq!(index.body, std::fs::read(out.join("api/v2/bulk-data/index.json")).unwrap());
    let mut records = 0;
    for entry in &entries {
        let segment = entry["resource"].as_str().unwrap();
        let path = file_of(entry, &base);
        let bytes = std::fs::read(out.join(&path)).unwrap();
        let hash = sha256(&bytes);
        assert_eq!(entry["size"], bytes.len(), "{segment}");
        assert_eq!(entry["sha256"], hash, "{segment}");
        assert_eq!(path, format!("api/v2/bulk-data/{segment}-{}.ndjson.gz", &hash[..16]));
        assert_eq!(entry["content_type"], "application/x-ndjson");
        assert_eq!(entry["content_encoding"], "gzip");
        assert_eq!(entry["updated_at"], TEST_EPOCH);

        let served = conn.get(&format!("/{path}")).expect(200);
        assert_eq!(served.body, bytes, "{segment}: gen serve sends the file's bytes");
        assert_eq!(served.header("Content-Type"), Some("application/x-ndjson"));
        assert_eq!(served.header("Content-Encoding"), Some("gzip"));
        assert_eq!(served.header("Cache-Control"), Some(IMMUTABLE));

        let list = conn.get(&format!("/api/v2/{segment}/?limit=100000")).expect(200).json();
        let urls: Vec<&str> = list["results"].as_array().unwrap().iter().map(|e| e["url"].as_str().unwrap()).collect();
        let lines = lines(&bytes);
        assert_eq!(entry["records"], lines.len());
        assert_eq!(lines.len(), urls.len(), "{segment}: one line per entry of the list");
        for (line, url) in lines.iter().zip(&urls) {
            let record = conn.get(url.strip_prefix(&base).unwrap()).expect(200).json();
            assert_eq!(*line, record, "{segment}: the line in the place of {url}");
        }
        records += lines.len();
    }
    assert!(entries.len() >= 17 && records > 2000, "{} resources, {records} records", entries.len());
}

/// Lines are compact even when the tree is indented (`--pretty`), and equal the records parsed.
#[test]
fn lines_are_compact_with_pretty() {
    let tmp = TempDir::new("bulk-pretty");
    sample_data(&tmp.join("data"));
    build(&tmp.join("data"), &tmp.join("out"), &["--pretty"]).ok();
    let base = "http://127.0.0.1:8080";
    for entry in entries(&tmp.join("out")) {
        let bytes = std::fs::read(tmp.join("out").join(file_of(&entry, base))).unwrap();
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        let segment = entry["resource"].as_str().unwrap();
        for line in text.lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(line, serde_json::to_string(&record).unwrap(), "{segment}: compact, keys in order");
            let file = tmp.join("out").join(format!("api/v2/{segment}/{}/index.json", record["id"]));
            assert_eq!(record, read_json(&file));
        }
    }
}

/// An edit of one record rewrites its resource's file only: exactly one entry's file changes,
/// the old file is removed and the manifest lists the new one; the other files are not written
/// again. Every entry is dated by the build's `SOURCE_DATE_EPOCH` (data not committed in git):
/// never by the build that last wrote its file, so that a fresh build gives the same index.
#[test]
fn an_edit_changes_exactly_one_entry_and_removes_the_old_file() {
    let tmp = TempDir::new("bulk-edit");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    let before = entries(&out);
    let base = "http://127.0.0.1:8080";
    let inode = |path: &str| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(out.join(path)).unwrap());
    let inodes: Vec<u64> = before.iter().map(|e| inode(&file_of(e, base))).collect();
    std::fs::write(data.join("berry/3.json"), r#"{"id": 3, "name": "berry-3", "size": 99}"#).unwrap();
    let later = "1786100000";
    let rebuilt = gen_bin()
        .env("SOURCE_DATE_EPOCH", later)
        .args(["build", "--data", utf8(&data), "--out", utf8(&out)])
        .output()
        .unwrap();
    assert!(rebuilt.status.success(), "{}", String::from_utf8_lossy(&rebuilt.stderr));
    let after = entries(&out);
    assert_eq!(before.len(), after.len());
    let undated = |entry: &serde_json::Value| {
        let mut entry = entry.clone();
        entry.as_object_mut().unwrap().remove("updated_at");
        entry
    };
    let changed: Vec<usize> = (0..before.len()).filter(|&i| undated(&before[i]) != undated(&after[i])).collect();
    assert_eq!(changed.len(), 1, "exactly one entry changes: {changed:?}");
    let (old, new) = (&before[changed[0]], &after[changed[0]]);
    assert_eq!(new["resource"], "berry");
    assert_eq!(new["updated_at"], later);
    assert_ne!(old["sha256"], new["sha256"]);
    assert!(!out.join(file_of(old, base)).exists(), "the old file is removed");
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(!manifest.contains(&file_of(old, base)) && manifest.contains(&file_of(new, base)));
    let lines = lines(&std::fs::read(out.join(file_of(new, base))).unwrap());
    assert!(lines.iter().any(|record| record["id"] == 3 && record["size"] == 99));
    for (i, entry) in after.iter().enumerate().filter(|(i, _)| *i != changed[0]) {
        assert_eq!(inode(&file_of(entry, base)), inodes[i], "{}: not written again", entry["resource"]);
        assert_eq!(entry["updated_at"], later, "{}: dated by this build", entry["resource"]);
    }
}

/// A file of many gzip members is read whole by readers other than ours: Python's gzip, the
/// gzip command (`gzip -dc`, as zcat) and Node's zlib each give every record, one a line, equal
/// to the record's document in the tree.
#[test]
fn other_gzip_readers_read_every_member() {
    let (Some(python), Some(gzip), Some(node)) = (tool("python3"), tool("gzip"), tool("node")) else { return };
    let tmp = TempDir::new("bulk-readers");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    let entry = entries(&out).into_iter().find(|e| e["resource"] == "berry").unwrap();
    let path = out.join(file_of(&entry, "http://127.0.0.1:8080"));
    let bytes = std::fs::read(&path).unwrap();
    assert!(members(&bytes).len() >= 3, "{} members", members(&bytes).len());
    let python_code = "import gzip, sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1], 'rb').read()))";
    let node_code = "process.stdout.write(require('zlib').gunzipSync(require('fs').readFileSync(process.argv[1])))";
    let readers = [
        ("python", std::process::Command::new(&python).args(["-c", python_code]).arg(&path).output()),
        ("gzip -dc", std::process::Command::new(&gzip).arg("-dc").arg(&path).output()),
        ("node", std::process::Command::new(&node).args(["-e", node_code]).arg(&path).output()),
    ];
    for (reader, output) in readers {
        let output = output.unwrap();
        assert!(output.status.success(), "{reader}: {}", String::from_utf8_lossy(&output.stderr));
        let text = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len() as u64, entry["records"].as_u64().unwrap(), "{reader}: every record");
        for line in lines {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(record, read_json(&out.join(format!("api/v2/berry/{}/index.json", record["id"]))), "{reader}");
        }
    }
}

/// An edit of one record recompresses its member only: the file's other members keep their
/// compressed bytes, and the file equals a fresh build's.
#[test]
fn an_edit_keeps_the_other_members_bytes() {
    let tmp = TempDir::new("bulk-members");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    let berry_file = |out: &Path| bulk_file(out, "berry");
    let before = berry_file(&out);
    let old = members(&before);
    assert!(old.len() >= 3, "{} members", old.len());
    // a record of the second member
    let id = lines(old[1])[0]["id"].as_u64().unwrap();
    let record = std::fs::read_to_string(data.join(format!("berry/{id}.json"))).unwrap();
    std::fs::write(data.join(format!("berry/{id}.json")), record.replacen(".5,", ".25,", 1)).unwrap();
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    let after = berry_file(&out);
    let new = members(&after);
    assert_eq!(new.len(), old.len());
    assert_ne!(new[1], old[1], "the edited member is new");
    for i in (0..old.len()).filter(|&i| i != 1) {
        assert_eq!(new[i], old[i], "member {i} keeps its bytes");
    }
    build_with(&data, &tmp.join("fresh"), &[], &SMALL_MEMBERS).ok();
    assert!(berry_file(&tmp.join("fresh")) == after, "the rebuilt file equals a fresh build's");
}

/// The member an edit recompresses takes its other records' lines from the previous file's
/// member, not from their documents in the tree (a member holds a few thousand records: their
/// files are not opened). Shown by a neighbour's document changed in the tree behind the build's
/// back, which a plain build trusts: its line stays the one the previous build wrote.
#[test]
fn an_edit_takes_its_members_other_lines_from_the_previous_file() {
    let tmp = TempDir::new("bulk-old-lines");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    let berry_file = |out: &Path| bulk_file(out, "berry");
    let old = members(&berry_file(&out)).iter().map(|member| lines(member)).collect::<Vec<_>>();
    let member = old.iter().find(|lines| lines.len() >= 2).expect("a member of two records or more");
    let (edited, neighbour) = (member[0]["id"].as_u64().unwrap(), member[1]["id"].as_u64().unwrap());
    let document = out.join(format!("api/v2/berry/{neighbour}/index.json"));
    let text = std::fs::read_to_string(&document).unwrap();
    let changed = text.replacen('{', r#"{"behind_the_builds_back": true, "#, 1);
    std::fs::write(&document, changed).unwrap();
    let record = std::fs::read_to_string(data.join(format!("berry/{edited}.json"))).unwrap();
    std::fs::write(data.join(format!("berry/{edited}.json")), record.replacen(".5,", ".25,", 1)).unwrap();
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    let after = lines(&berry_file(&out));
    let line = after.iter().find(|line| line["id"] == neighbour).unwrap();
    assert_eq!(line, &member[1], "the neighbour's line is the previous file's, not read from the tree");
    assert_ne!(after.iter().find(|line| line["id"] == edited).unwrap(), &member[0], "the edit is in the file");
}

/// `"bulk": false` in gen.json: no bulk-data files, index or root entry; turned on again, a
/// build writes them.
#[test]
fn bulk_false_in_gen_json_turns_the_files_off() {
    let tmp = TempDir::new("bulk-off");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    let config = std::fs::read_to_string(data.join("gen.json")).unwrap();
    std::fs::write(data.join("gen.json"), config.replacen('{', r#"{"bulk": false, "#, 1)).unwrap();
    build(&data, &out, &[]).ok();
    assert!(!out.join("api/v2/bulk-data").exists());
    assert!(read_json(&out.join("api/v2/index.json")).get("bulk-data").is_none());
    assert_eq!(read_json(&out.join("api/v2/meta/index.json"))["bulk_data"], serde_json::Value::Null);
    std::fs::write(data.join("gen.json"), config).unwrap();
    build(&data, &out, &[]).ok();
    let resources = read_json(&out.join("manifest.json"))["resources"].as_object().unwrap().len();
    assert_eq!(entries(&out).len(), resources);
    assert!(read_json(&out.join("api/v2/index.json")).get("bulk-data").is_none(), "resources only");
    assert!(read_json(&out.join("api/v2/meta/index.json"))["bulk_data"].is_string());
}

/// A resource named `bulk-data` would take the index's url: a data problem that says why.
#[test]
fn a_resource_named_bulk_data_is_a_data_problem() {
    let tmp = TempDir::new("bulk-reserved");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    write_files(&data, &[("bulk-data/1.json", r#"{"id": 1, "name": "one"}"#.into())]);
    for command in ["build", "check"] {
        let mut args = vec![command, "--data", utf8(&data)];
        if command == "build" {
            args.extend(["--out", utf8(&out)]);
        }
        let run = run(&args);
        assert_ne!(run.code(), Some(0));
        let shown = format!("{}/bulk-data: $: a resource cannot be named \"bulk-data\"", data.display());
        assert!(run.stderr().contains(&shown), "{}", run.stderr());
        assert!(run.stderr().contains("rename the resource"), "{}", run.stderr());
    }
}

/// A resource whose records add up to more than the memory the build may take: the file is
/// written a record at a time, so the build's peak stays below the records' total.
#[test]
fn a_resource_larger_than_the_memory_bound_is_written_streamed() {
    if heavy("it writes and builds 160 MB of records").is_none() {
        return;
    }
    let tmp = TempDir::new("bulk-memory");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    // 160 records of about 1 MB, each different (a counter in every entry), 160 MB in all
    std::fs::create_dir_all(data.join("large")).unwrap();
    for id in 1..=160u64 {
        let entries: Vec<String> =
            (0..36_000u64).map(|n| format!(r#"{{"n":{},"v":"{:x}"}}"#, id * 100_000 + n, n * 7919)).collect();
        let record = format!(r#"{{"id": {id}, "name": "large-{id}", "entries": [{}]}}"#, entries.join(","));
        std::fs::write(data.join(format!("large/{id}.json")), record).unwrap();
    }
    let total: u64 = (1..=160).map(|id| std::fs::metadata(data.join(format!("large/{id}.json"))).unwrap().len()).sum();
    let limit: u64 = 96 << 20;
    assert!(total > limit, "the records ({total} bytes) add up to more than the bound");
    let (run, peak) = peak_memory(&["build", "--data", utf8(&data), "--out", utf8(&out)], &[]);
    run.ok();
    eprintln!("records {} MB, peak {} MB", total >> 20, peak >> 20);
    assert!(peak < limit, "the build peaked at {} MB, above {} MB", peak >> 20, limit >> 20);
    let entry = &entries(&out)[0];
    let lines = lines(&std::fs::read(out.join(file_of(entry, "http://127.0.0.1:8080"))).unwrap());
    assert_eq!(lines.len(), 160);
    assert!(lines.iter().enumerate().all(|(i, record)| record["id"] == i as u64 + 1));
}

/// Gives berry 2's record in `data` the note `with` (otherwise the record `sample_data` writes).
pub(crate) fn edit_a_berry(data: &Path, with: &str) {
    let record = format!(
        r#"{{"id": 2, "name": "berry-2", "size": 2.5, "note": "{with}", "firmness": {{"name": "firm-3", "url": "/api/v2/firmness/3/"}}, "item": {{"name": "item-2", "url": "/api/v2/item/2/"}}, "effect": {{"url": "/api/v2/effect/3/"}}}}"#
    );
    std::fs::write(data.join("berry/2.json"), record).unwrap();
}

/// Members of a few records each.
pub(crate) const TINY_MEMBERS: [(&str, &str); 1] = [("GEN_BULK_MEMBER_BYTES", "300")];

fn read_json_text(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

/// `gen build --verify` trusts nothing of the previous build, the member table included: a
/// table whose members' keys were swapped (the file's own hash still right) made a verify build
/// copy two members into the wrong places, and the next verify build kept them.
#[test]
fn verify_writes_bulk_files_whole_whatever_the_member_table_says() {
    let tmp = TempDir::new("bulk-verify");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    // the berries as a table: its members' records' sizes come from the index's line spans
    let mut berries: Vec<(u64, String)> = std::fs::read_dir(data.join("berry"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .map(|record| (read_json_text(&record)["id"].as_u64().unwrap(), record.trim().to_string()))
        .collect();
    berries.sort();
    let lines: Vec<String> = berries.into_iter().map(|(_, record)| record).collect();
    std::fs::write(data.join("berry.ndjson"), lines.join("\n") + "\n").unwrap();
    std::fs::remove_dir_all(data.join("berry")).unwrap();
    build_with(&data, &out, &[], &TINY_MEMBERS).ok();
    let table_path = state_file(&out, "bulk");
    let (mut table, _) = split_member_table(&std::fs::read(&table_path).unwrap());
    let berry = table["files"].as_object_mut().unwrap().iter_mut().find(|(path, _)| path.contains("/berry-"));
    let members = berry.expect("a berry file in the member table").1["members"].as_array_mut().unwrap();
    assert!(members.len() >= 5, "{} members", members.len());
    let (third, fourth) = (members[3]["key"].clone(), members[4]["key"].clone());
    members[3]["key"] = fourth;
    members[4]["key"] = third;
    // its checksum made again: the table agrees with itself
    let mut bytes = serde_json::to_vec(&table).unwrap();
    let sum = format!("\nblake3:{}\n", blake3::hash(&bytes).to_hex());
    bytes.extend_from_slice(sum.as_bytes());
    std::fs::write(&table_path, bytes).unwrap();
    build_with(&data, &out, &["--verify"], &TINY_MEMBERS).ok();
    build_with(&data, &tmp.join("fresh"), &[], &TINY_MEMBERS).ok();
    assert!(read_tree(&out) == read_tree(&tmp.join("fresh")), "a verify build equals a fresh build");
}

/// The build's own files beside the tree are created anew, never written through a link left
/// at their names (docs/builds.md, "The tree's own files"), and a FIFO at the member table's
/// name is not waited on.
#[test]
fn the_member_table_and_kept_extracts_are_never_written_through_links() {
    let tmp = TempDir::new("bulk-links");
    let (data, out, elsewhere) = (tmp.join("data"), tmp.join("out"), tmp.join("elsewhere"));
    sample_data(&data);
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    let victim = tmp.join("victim.txt");
    std::fs::write(&victim, "victim").unwrap();
    std::os::unix::fs::symlink(&victim, state_file(&out, "bulk.tmp")).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::remove_dir_all(state_file(&out, "extract")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, state_file(&out, "extract")).unwrap();
    edit_a_berry(&data, "linked");
    build_with(&data, &out, &[], &SMALL_MEMBERS).ok();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim", "the link's target is untouched");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written in the linked folder");
    assert!(!state_file(&out, "bulk").is_symlink() && state_file(&out, "extract").is_dir());
    // a FIFO at the member table's name: the build goes on (the files written whole)
    make_hostile(&state_file(&out, "bulk"), "fifo");
    edit_a_berry(&data, "fifo");
    let ended = guarded(&["build", "--quiet", "--data", utf8(&data), "--out", utf8(&out)]);
    assert!(ended.code == Some(0) && !ended.killed, "{}", ended.describe());
    build_with(&data, &tmp.join("fresh"), &[], &[]).ok();
    assert!(read_tree(&out) == read_tree(&tmp.join("fresh")), "the tree equals a fresh build's");
}

/// Review of issue 36 (fe48162): a commit killed once `bulk-data/index.json` is in place (its
/// new bulk file too; the old file, the manifest and the index not yet), then the data put back
/// as the build before had it: the list is the index's again, so the next build took the
/// previous file's lines by list position, from the killed build's file (another list). The
/// file held a removed record, one record twice, and lacked two; the build after kept them so.
/// The kill lands exactly there through strace (SIGKILL on the commit's first unlink: the old
/// bulk file's).
#[test]
fn a_build_after_a_killed_commit_takes_no_line_from_the_killed_builds_bulk_file() {
    let Some(strace) = tool("strace") else { return };
    // strace present but not allowed to trace (a container without ptrace): nothing to kill with
    let probe = std::process::Command::new(&strace).args(["-f", "-o", "/dev/null", "true"]).output();
    if !probe.is_ok_and(|probe| probe.status.success()) {
        eprintln!("skipped: strace cannot trace a process here (ptrace is not permitted)");
        return;
    }
    let tmp = TempDir::new("bulk-killed-commit");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    let record = |id: i64, v: i64| (format!("item/{id}.json"), format!(r#"{{"id": {id}, "name": "n{id}", "v": {v}}}"#));
    let mut first: Vec<(String, String)> = (1..=6).map(|id| record(id, id)).collect();
    first.push(("gen.json".to_string(), "{}".to_string()));
    write_files(&data, &as_files(&first));
    build(&data, &out, &[]).ok();
    // a record added at the top of the list, another edited; the build killed in its commit
    write_files(&data, &as_files(&[record(0, 0), record(3, 33)]));
    let killed = std::process::Command::new(strace)
        .args(["-f", "-o", "/dev/null", "-e", "trace=unlinkat", "-e", "inject=unlinkat:signal=KILL:when=1"])
        .arg(env!("CARGO_BIN_EXE_gen"))
        .args(["build", "-q", "--data", utf8(&data), "--out", utf8(&out)])
        .env("SOURCE_DATE_EPOCH", TEST_EPOCH)
        .output()
        .unwrap();
    assert!(!killed.status.success(), "the build was not killed");
    assert!(state_file(&out, "journal").exists(), "the build was not killed inside its commit");
    let bulk_files = std::fs::read_dir(out.join("api/v2/bulk-data")).unwrap().count();
    assert_eq!(bulk_files, 3, "the kill did not land after the new bulk file and index were in place");
    // the data back as the first build had it
    std::fs::remove_file(data.join("item/0.json")).unwrap();
    write_files(&data, &as_files(&first));
    build(&data, &out, &[]).ok();
    build(&data, &fresh, &[]).ok();
    let bulk = |out: &Path| lines(&bulk_file(out, "item"));
    assert_eq!(bulk(&out), bulk(&fresh), "the bulk file after the killed commit is not the data's");
    assert!(read_tree(&out) == read_tree(&fresh), "the tree after the killed commit differs from a fresh build");
}

/// `files` as [`write_files`] takes them.
fn as_files(files: &[(String, String)]) -> Vec<(&str, String)> {
    files.iter().map(|(path, text)| (path.as_str(), text.clone())).collect()
}

/// The member table's JSON and its checksum line (`blake3:<hex>`), when it has one (a table of
/// an older gen is bare JSON).
pub(crate) fn split_member_table(bytes: &[u8]) -> (serde_json::Value, Option<Vec<u8>>) {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    match text.trim_end().rsplit_once('\n') {
        Some((json, sum)) if sum.starts_with("blake3:") => (read_json_text(json), Some(sum.as_bytes().to_vec())),
        _ => (read_json_text(&text), None),
    }
}

/// Rewrites the member table at `path` with `tamper` applied to its JSON, and its checksum line
/// made again for the new JSON when `resum`, else the old one kept (a bare table stays bare).
pub(crate) fn tamper_member_table(path: &Path, tamper: fn(&mut serde_json::Value), resum: bool) {
    let (mut table, sum) = split_member_table(&std::fs::read(path).unwrap());
    tamper(&mut table);
    let mut bytes = serde_json::to_vec(&table).unwrap();
    let sum = if resum { Some(format!("blake3:{}", blake3::hash(&bytes).to_hex()).into_bytes()) } else { sum };
    if let Some(sum) = sum {
        bytes.push(b'\n');
        bytes.extend_from_slice(&sum);
        bytes.push(b'\n');
    }
    std::fs::write(path, &bytes).unwrap();
}

/// Exchanges the keys of two members of the berries' file that hold as many records (beyond
/// the first members, which an edit of berry 2 rewrites) in the member table `table`.
pub(crate) fn exchange_two_member_keys(table: &mut serde_json::Value) {
    let berry = table["files"].as_object_mut().unwrap().iter_mut().find(|(path, _)| path.contains("/berry-"));
    let members = berry.expect("a berry file in the member table").1["members"].as_array_mut().unwrap();
    let pair = (3..members.len() - 1).find(|&i| members[i]["records"] == members[i + 1]["records"]);
    let i = pair.expect("two neighbouring members of as many records");
    let (first, second) = (members[i]["key"].clone(), members[i + 1]["key"].clone());
    members[i]["key"] = second;
    members[i + 1]["key"] = first;
}

/// Issue 47, item 3: the member table carries a checksum and the gen that wrote it, and what
/// it says of a member is checked against what the member holds. A table whose two member keys
/// were exchanged made a plain build copy the wrong members (4 files differed from a fresh
/// build, for good); so did one rewritten to agree with itself. The build index now records the
/// table's checksum, and a table it did not record is not trusted. Each tampered table here is
/// ignored with a note, and the build after an edit gives exactly the tree a fresh build gives.
#[test]
fn a_tampered_member_table_is_ignored_and_the_tree_is_a_fresh_builds() {
    let tmp = TempDir::new("bulk-tampered-table");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    sample_data(&data);
    let table_path = state_file(&out, "bulk");
    let other_gen =
        |json: &mut serde_json::Value| json["generator"] = format!("gen {}-other", env!("CARGO_PKG_VERSION")).into();
    type Tamper = fn(&mut serde_json::Value);
    // (what, tamper, the checksum made again, what the note says)
    let cases: [(&str, Tamper, bool, &str); 3] = [
        ("two keys exchanged, nothing else", exchange_two_member_keys, false, "ignoring the member table"),
        ("two keys exchanged, the checksum made again", exchange_two_member_keys, true, "not the one the build index"),
        ("written by another gen", other_gen, true, "ignoring the member table"),
    ];
    for (n, (what, tamper, resum, said)) in cases.into_iter().enumerate() {
        let _ = std::fs::remove_dir_all(&out);
        sample_data(&data);
        build_with(&data, &out, &[], &TINY_MEMBERS).ok();
        tamper_member_table(&table_path, tamper, resum);
        edit_a_berry(&data, &format!("tampered {n}"));
        let stderr = build_with(&data, &out, &[], &TINY_MEMBERS).ok().stderr();
        let _ = std::fs::remove_dir_all(&fresh);
        build_with(&data, &fresh, &[], &TINY_MEMBERS).ok();
        assert!(read_tree(&out) == read_tree(&fresh), "{what}: the tree differs from a fresh build's");
        let notes: Vec<&str> =
            stderr.lines().filter(|line| line.starts_with("note: ") && line.contains(said)).collect();
        assert_eq!(notes.len(), 1, "{what}: one note, saying {said:?}:\n{stderr}");
    }
}

/// Issue 47, item 3: a kept extract (`.out.gen/extract/<segment>.extract`) that is damaged, or
/// that says another gen wrote it, is not used, and a note says so: the build after an edit
/// reads every record of the resource, and its tree is a fresh build's.
#[test]
fn a_damaged_or_foreign_kept_extract_is_ignored_with_a_note() {
    let tmp = TempDir::new("bulk-tampered-extract");
    let (data, out, fresh) = (tmp.join("data"), tmp.join("out"), tmp.join("fresh"));
    let extract = state_file(&out, "extract/berry.extract");
    let version = env!("CARGO_PKG_VERSION");
    type Tamper = fn(&mut Vec<u8>, &str);
    let cases: [(&str, Tamper); 2] = [
        ("a byte flipped", |bytes, _| {
            let at = bytes.len() / 2;
            bytes[at] ^= 0x10;
        }),
        ("written by another gen (its checksum made again)", |bytes, version| {
            let ours = format!("\"gen {version}\"");
            let at = bytes.windows(ours.len()).position(|w| w == ours.as_bytes()).expect("the head names the gen");
            let other = format!("\"gen {}\"", version.replace(|c: char| c.is_ascii_digit(), "9"));
            let other = if other == ours { format!("\"gen {}\"", "8".repeat(version.len())) } else { other };
            bytes[at..at + ours.len()].copy_from_slice(other.as_bytes());
            let body = bytes.len() - 32;
            let sum = blake3::hash(&bytes[..body]);
            bytes[body..].copy_from_slice(sum.as_bytes());
        }),
    ];
    for (n, (what, tamper)) in cases.into_iter().enumerate() {
        let _ = std::fs::remove_dir_all(&out);
        sample_data(&data);
        build(&data, &out, &[]).ok();
        let mut bytes = std::fs::read(&extract).unwrap();
        tamper(&mut bytes, version);
        std::fs::write(&extract, &bytes).unwrap();
        edit_a_berry(&data, &format!("extract {n}"));
        let stderr = build(&data, &out, &[]).ok().stderr();
        let _ = std::fs::remove_dir_all(&fresh);
        build(&data, &fresh, &[]).ok();
        assert!(read_tree(&out) == read_tree(&fresh), "{what}: the tree differs from a fresh build's");
        let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("ignoring the kept extract")).collect();
        assert_eq!(notes.len(), 1, "{what}: one note:\n{stderr}");
        assert!(notes[0].starts_with("note: ") && notes[0].contains("berry.extract"), "{what}: {}", notes[0]);
    }
}
