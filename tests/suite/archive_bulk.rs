//! The bulk-data files of an edited archive (issue 49; docs/builds.md, "The archive writer"):
//! written member by member as the tree's are (`bulk.rs`), each unchanged member copied from
//! the previous file as the archive holds it, by the member table an archive build keeps in its
//! state folder; the file then equals a fresh archive build's, and a tampered table is not
//! trusted (the archive is still a fresh build's).

use crate::archive_build::archive_contents;
use crate::bulk::{
    SMALL_MEMBERS, TINY_MEMBERS, edit_a_berry, exchange_two_member_keys, lines, members, tamper_member_table,
};
use crate::common::*;
use genapi::archive::{Folder, Reader};
use std::path::Path;

/// The bytes of the bulk-data file of `resource` in the archive in `archive` (built with the
/// default base url), as its bulk-data index names it.
fn bulk_file(archive: &Path, resource: &str) -> Vec<u8> {
    let reader = Reader::open(Folder(archive.to_path_buf())).unwrap();
    let index = reader.get("api/v2/bulk-data/index.json").unwrap().expect("a bulk-data index");
    let index: serde_json::Value = serde_json::from_slice(&index.bytes).unwrap();
    let results = index["results"].as_array().unwrap();
    let entry = results.iter().find(|entry| entry["resource"] == resource).expect("an entry of the resource");
    let url = entry["download_url"].as_str().unwrap();
    let key = url.strip_prefix("http://127.0.0.1:8080/").unwrap_or_else(|| panic!("{url}"));
    reader.get(key).unwrap().unwrap_or_else(|| panic!("the archive lacks {key}")).bytes
}

/// Flips a byte of the document under `key` in the archive's part that holds it: the archive
/// can no longer give that document (its reader checks it).
fn damage(archive: &Path, key: &str) {
    let entry = Reader::open(Folder(archive.to_path_buf())).unwrap().entry(key).unwrap().expect("the key");
    let part = archive.join(genapi::archive::part_file(&entry.part));
    let mut bytes = std::fs::read(&part).unwrap();
    bytes[(entry.offset + entry.length / 2) as usize] ^= 0x55;
    let mut permissions = std::fs::metadata(&part).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&part, permissions).unwrap();
    std::fs::write(&part, bytes).unwrap();
    assert!(Reader::open(Folder(archive.to_path_buf())).unwrap().get(key).is_err(), "{key} is damaged");
}

/// The ids of the records a member holds, in order.
fn ids(member: &[u8]) -> Vec<u64> {
    lines(member).iter().map(|line| line["id"].as_u64().unwrap()).collect()
}

/// A one-record edit of an archive writes its resource's bulk-data file at the cost of the
/// change: the members not holding the record are copied from the previous file (their bytes
/// the same), the member holding it is compressed again with its other records' lines taken
/// from the previous file's member. Neither reads the other records' documents from the
/// archive: shown by two of them damaged in the archive's part (a neighbour of the edited record
/// in its member, and a record of another member), which a build reading them fails on. The
/// file equals a fresh archive build's byte for byte.
#[test]
fn an_archive_edit_copies_the_unchanged_members_and_reads_none_of_their_records() {
    let tmp = TempDir::new("archive-bulk-members");
    let (data, archive, fresh) = (tmp.join("data"), tmp.join("archive"), tmp.join("fresh"));
    sample_data(&data);
    build_with(&data, &archive, &["--archive"], &SMALL_MEMBERS).ok();
    assert!(state_file(&archive, "bulk").is_file(), "an archive build keeps the member table");
    let before = bulk_file(&archive, "berry");
    let old = members(&before);
    assert!(old.len() >= 4, "{} members", old.len());
    let m = (0..old.len()).find(|&m| ids(old[m]).len() >= 2).expect("a member of two records or more");
    let (edited, neighbour, far) = (ids(old[m])[0], ids(old[m])[1], ids(old[(m + 2) % old.len()])[0]);
    for id in [neighbour, far] {
        damage(&archive, &format!("api/v2/berry/{id}/index.json"));
    }
    let file = data.join(format!("berry/{edited}.json"));
    let record = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, record.replacen(".5,", ".25,", 1)).unwrap();
    build_with(&data, &archive, &["--archive"], &SMALL_MEMBERS).ok();
    let after = bulk_file(&archive, "berry");
    let new = members(&after);
    assert!(!new.contains(&old[m]), "the edited member is new");
    for (i, member) in old.iter().enumerate().filter(|(i, _)| *i != m) {
        assert!(new.contains(member), "member {i} of {} keeps its bytes", old.len());
    }
    build_with(&data, &fresh, &["--archive"], &SMALL_MEMBERS).ok();
    assert!(bulk_file(&fresh, "berry") == after, "the edited archive's file equals a fresh build's");
    let edited_line = lines(&after).into_iter().find(|line| line["id"] == edited).unwrap();
    assert!(edited_line.to_string().contains(".25"), "the edit is in the file: {edited_line}");
}

/// The member table an archive build keeps is trusted as the tree's is, when the build index
/// recorded it: one damaged, rewritten to agree with itself but wrong (two keys exchanged), or
/// of another gen is ignored, with one note, and the archive after an edit holds what a fresh build holds;
/// `--verify` takes nothing from it (no note, a fresh archive).
#[test]
fn a_tampered_member_table_is_not_trusted_by_an_archive_build() {
    let tmp = TempDir::new("archive-bulk-tampered");
    let (data, archive, fresh) = (tmp.join("data"), tmp.join("archive"), tmp.join("fresh"));
    let table_path = state_file(&archive, "bulk");
    let other_gen =
        |json: &mut serde_json::Value| json["generator"] = format!("gen {}-other", env!("CARGO_PKG_VERSION")).into();
    type Tamper = fn(&mut serde_json::Value);
    type Case<'c> = (&'c str, Tamper, bool, &'c [&'c str], Option<&'c str>);
    // (what, tamper, the checksum made again, the options of the build after, what the note says)
    let cases: [Case<'_>; 4] = [
        ("two keys exchanged, nothing else", exchange_two_member_keys, false, &[], Some("ignoring the member table")),
        (
            "two keys exchanged, the checksum made again",
            exchange_two_member_keys,
            true,
            &[],
            Some("not the one the build index recorded"),
        ),
        ("written by another gen", other_gen, true, &[], Some("ignoring the member table")),
        ("two keys exchanged, then --verify", exchange_two_member_keys, true, &["--verify"], None),
    ];
    for (n, (what, tamper, resum, extra, said)) in cases.into_iter().enumerate() {
        let _ = std::fs::remove_dir_all(&archive);
        sample_data(&data);
        build_with(&data, &archive, &["--archive"], &TINY_MEMBERS).ok();
        tamper_member_table(&table_path, tamper, resum);
        edit_a_berry(&data, &format!("tampered {n}"));
        let mut options = vec!["--archive"];
        options.extend_from_slice(extra);
        let stderr = build_with(&data, &archive, &options, &TINY_MEMBERS).ok().stderr();
        let _ = std::fs::remove_dir_all(&fresh);
        build_with(&data, &fresh, &["--archive"], &TINY_MEMBERS).ok();
        assert!(archive_contents(&archive) == archive_contents(&fresh), "{what}: the archive differs from a fresh one");
        let notes: Vec<&str> = stderr.lines().filter(|line| line.contains("member table")).collect();
        match said {
            Some(said) => {
                assert_eq!(notes.len(), 1, "{what}: one note:\n{stderr}");
                assert!(notes[0].starts_with("note: ") && notes[0].contains(said), "{what}: {}", notes[0]);
            }
            None => assert!(notes.is_empty(), "{what}: --verify reads no member table:\n{stderr}"),
        }
    }
}
