//! `gen serve --watch`: the real binary watching a data folder while it is edited as people
//! and tools edit: in place, by rename (as editors save), in bursts (as a checkout does), and
//! broken then fixed. Every step is checked on what the server answers, polled with a generous
//! time limit (no timing assertion).

use crate::common;
use crate::serve_support;

use common::{TempDir, build, read_tree, run, write_files};
use serve_support::*;
use std::path::Path;
use std::time::Duration;

/// Long enough for any rebuild on a loaded machine; steps end as soon as they are served.
const LIMIT: Duration = Duration::from_secs(90);

const BROWSER: &str = "Accept: text/html,application/xhtml+xml,*/*;q=0.8";

fn record(id: i64, size: i64) -> String {
    format!(r#"{{"id": {id}, "name": "berry-{id}", "size": {size}}}"#)
}

fn size_of(server: &Server, id: i64) -> Option<i64> {
    let response = server.get(&format!("/api/v2/berry/{id}/"));
    (response.status == 200).then(|| response.json()["size"].as_i64()).flatten()
}

fn count(server: &Server) -> Option<u64> {
    let response = server.get("/api/v2/berry/");
    (response.status == 200).then(|| response.json()["count"].as_u64()).flatten()
}

/// Saves `text` as an editor that writes a new file and renames it over the old one.
fn save_by_rename(tmp: &Path, file: &Path, text: &str) {
    let scratch = tmp.join("scratch.json");
    std::fs::write(&scratch, text).unwrap();
    std::fs::rename(&scratch, file).unwrap();
}

#[test]
fn watch_rebuilds_on_every_change_and_keeps_the_last_good_tree() {
    let tmp = TempDir::new("watch");
    let data = tmp.join("data");
    let out = tmp.join("out");
    write_files(
        &data,
        &[("berry/1.json", record(1, 20)), ("berry/2.json", record(2, 30)), ("berry/3.json", record(3, 40))],
    );
    let data_arg = data.to_str().unwrap();
    // No tree yet: --watch builds one before serving.
    let server = Server::start_preview(&out, &["--quiet", "--watch", "--data", data_arg]);
    assert_eq!(count(&server), Some(3));
    assert!(out.join("manifest.json").is_file());

    // Edit a record in place.
    std::fs::write(data.join("berry/1.json"), record(1, 21)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 1) == Some(21)), "edit: {}", server.stderr());

    // Add one, then delete one.
    std::fs::write(data.join("berry/4.json"), record(4, 50)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 4) == Some(50)), "add: {}", server.stderr());
    assert_eq!(count(&server), Some(4));
    std::fs::remove_file(data.join("berry/2.json")).unwrap();
    assert!(eventually(LIMIT, || server.get("/api/v2/berry/2/").status == 404), "delete: {}", server.stderr());
    assert_eq!(count(&server), Some(3));

    // Save by rename, as editors do.
    save_by_rename(tmp.path(), &data.join("berry/3.json"), &record(3, 41));
    assert!(eventually(LIMIT, || size_of(&server, 3) == Some(41)), "rename: {}", server.stderr());

    // Break a record: the problems are printed as `gen check` prints them, and shown on the
    // HTML view; the last good tree stays served.
    save_by_rename(tmp.path(), &data.join("berry/1.json"), r#"{"id": 1, "name": "berry-1", "size": 22"#);
    let check = run(&["check", "--data", data_arg]).fails_with(1);
    let problems: Vec<String> = check.stderr().lines().map(str::to_string).collect();
    assert!(problems.iter().any(|line| line.contains("berry/1.json")), "{problems:?}");
    assert!(
        eventually(LIMIT, || problems.iter().all(|line| server.stderr().contains(line.as_str()))),
        "serve prints the problems as gen check does:\n{problems:?}\n--- serve:\n{}",
        server.stderr()
    );
    assert_eq!(size_of(&server, 1), Some(21), "the last good tree is still served");
    assert_eq!(count(&server), Some(3));
    // the view is handed the problems just after they are printed: waited for, not raced
    let mut page = String::new();
    let shown = eventually(LIMIT, || {
        page = server.get_with("/", &[BROWSER]).expect(200).text();
        page.contains("id=\"problems\"")
    });
    assert!(shown, "{page}");
    assert!(page.contains("berry/1.json"), "the page names the broken file: {page}");
    let record_page = server.get_with("/api/v2/berry/3/", &[BROWSER]).expect(200).text();
    assert!(record_page.contains("id=\"problems\""));

    // Fix it: served, and the problems are gone from the page.
    std::fs::write(data.join("berry/1.json"), record(1, 22)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 1) == Some(22)), "fix: {}", server.stderr());
    assert!(eventually(LIMIT, || !server.get_with("/", &[BROWSER]).text().contains("id=\"problems\"")));

    // A burst of creates and deletes, as a checkout of another branch.
    for id in 10..60 {
        std::fs::write(data.join(format!("berry/{id}.json")), record(id, id)).unwrap();
    }
    for id in 10..40 {
        std::fs::remove_file(data.join(format!("berry/{id}.json"))).unwrap();
    }
    assert!(eventually(LIMIT, || count(&server) == Some(23)), "burst: {}", server.stderr());
    assert_eq!(size_of(&server, 59), Some(59));
    assert_eq!(server.get("/api/v2/berry/10/").status, 404);
    assert_eq!(size_of(&server, 1), Some(22));
}

#[test]
fn watch_with_broken_data_serves_the_existing_tree_and_refuses_without_one() {
    let tmp = TempDir::new("watch-broken");
    let data = tmp.join("data");
    let out = tmp.join("out");
    write_files(&data, &[("berry/1.json", record(1, 20))]);
    build(&data, &out, &["--quiet"]).ok();
    std::fs::write(data.join("berry/1.json"), "{").unwrap();

    // A tree to fall back on: served, with the problems shown.
    let server = Server::start_preview(&out, &["--quiet", "--watch", "--data", data.to_str().unwrap()]);
    assert_eq!(size_of(&server, 1), Some(20));
    assert!(eventually(LIMIT, || server.stderr().contains("berry/1.json")), "{}", server.stderr());
    assert!(eventually(LIMIT, || server.get_with("/api/v2/", &[BROWSER]).text().contains("id=\"problems\"")));
    std::fs::write(data.join("berry/1.json"), record(1, 25)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 1) == Some(25)), "{}", server.stderr());
    drop(server);

    // No tree: nothing to serve, said clearly.
    std::fs::write(data.join("berry/1.json"), "{").unwrap();
    let empty = tmp.join("none");
    let refused = run(&[
        "serve",
        "--watch",
        "--data",
        data.to_str().unwrap(),
        "--dir",
        empty.to_str().unwrap(),
        "--addr",
        "127.0.0.1:0",
    ])
    .fails_with(2);
    assert!(refused.stderr().contains("berry/1.json"), "{}", refused.stderr());
    assert!(refused.stderr().contains("holds no tree to serve until the data builds"), "{}", refused.stderr());

    // --dir inside --data would rebuild forever.
    let inside = data.join("out");
    let refused = run(&[
        "serve",
        "--watch",
        "--data",
        data.to_str().unwrap(),
        "--dir",
        inside.to_str().unwrap(),
        "--addr",
        "127.0.0.1:0",
    ])
    .fails_with(2);
    assert!(refused.stderr().contains("is inside --data"), "{}", refused.stderr());
}

#[test]
fn watch_refuses_a_bad_source_date_epoch_at_start_as_build_does() {
    let tmp = TempDir::new("watch-epoch");
    let data = tmp.join("data");
    let out = tmp.join("out");
    write_files(&data, &[("berry/1.json", record(1, 20))]);
    run(&["build", "--quiet", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()]).ok();
    let built = common::gen_bin()
        .env("SOURCE_DATE_EPOCH", "yesterday")
        .args(["build", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(built.status.code(), Some(2));
    let said = String::from_utf8_lossy(&built.stderr).to_string();
    assert!(said.contains("SOURCE_DATE_EPOCH=\"yesterday\" is not a number of seconds"), "{said}");

    let mut serve = common::gen_bin()
        .env("SOURCE_DATE_EPOCH", "yesterday")
        .args(["serve", "--quiet", "--watch", "--data", data.to_str().unwrap(), "--dir", out.to_str().unwrap()])
        .args(["--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ended = eventually(LIMIT, || serve.try_wait().unwrap().is_some());
    if !ended {
        let _ = serve.kill();
    }
    let output = serve.wait_with_output().unwrap();
    assert!(ended, "gen serve --watch kept serving with a bad SOURCE_DATE_EPOCH");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(stderr.contains(said.trim()), "{stderr}\n--- gen build said\n{said}");
}

/// `gen serve --watch` over a tree damaged by hand before it starts (issue 47 item 7: a file
/// edited, removed, replaced by a link, replaced by a folder) starts and serves: each damaged
/// document 503, the others 200. A plain rebuild trusts the tree (docs/builds.md), so the
/// first rebuild after the damage was found is a `--verify` one: after an edit of another record,
/// every damaged document is served again, and the tree is the one a fresh build gives.
/// (Until issue 47 the server ended with status 2 and `--watch` could not start.)
#[test]
fn watch_over_a_damaged_tree_serves_it_and_the_first_rebuild_repairs_it() {
    let tmp = TempDir::new("watch-damaged");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let files: Vec<(String, String)> = (1..=5).map(|id| (format!("berry/{id}.json"), record(id, id * 10))).collect();
    write_files(&data, &files.iter().map(|(rel, text)| (rel.as_str(), text.clone())).collect::<Vec<_>>());
    build(&data, &out, &["--quiet"]).ok();
    let damaged: Vec<(String, String)> = DAMAGES
        .iter()
        .zip(2..)
        .map(|(damage, id)| {
            let rel = format!("api/v2/berry/{id}/index.json");
            damage.apply(&out, &rel, &tmp.join("elsewhere"));
            (format!("/api/v2/berry/{id}/"), rel)
        })
        .collect();
    let server = Server::start(&out, &["--watch", "--data", data.to_str().unwrap()]);
    let checked = || server.stderr().contains("do not match its manifest");
    assert!(eventually(LIMIT, checked), "{}", server.stderr());
    for (target, rel) in &damaged {
        assert_damaged(&server, target, rel);
    }
    assert_eq!(size_of(&server, 1), Some(10));
    server.get("/api/v2/berry/").expect(200);

    std::fs::write(data.join("berry/1.json"), record(1, 11)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 1) == Some(11)), "{}", server.stderr());
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &["--quiet"]).ok();
    for (target, rel) in &damaged {
        assert_eq!(server.get(target).expect(200).body, std::fs::read(fresh.join(rel)).unwrap(), "{target}");
    }
    assert!(read_tree(&out) == read_tree(&fresh), "the repaired tree differs from a fresh build");
}

/// The CPU time `pid` has used so far, in clock ticks (user + system, from `/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// How many rebuilds `gen serve --watch` has announced on stderr (with or without a change to
/// the tree, with or without problems).
fn rebuilds(server: &Server) -> usize {
    let stderr = server.stderr();
    stderr.matches("gen serve: rebuilt ").count()
        + stderr.matches("the tree is already up to date").count()
        + stderr.matches("still serving the last good build").count()
}

/// How long [`idle`] watches: over ten times the watch's debounce (150 ms), so that a watch that
/// rebuilt on its own reads would be seen doing it several times.
const IDLE: Duration = Duration::from_secs(2);

/// Stays idle for [`IDLE`]: returns the rebuilds announced and the CPU ticks used meanwhile.
fn idle(server: &Server) -> (usize, u64) {
    let (rebuilt, ticks) = (rebuilds(server), cpu_ticks(server.pid()));
    std::thread::sleep(IDLE);
    (rebuilds(server) - rebuilt, cpu_ticks(server.pid()) - ticks)
}

/// Time for the events of a rebuild to settle before watching for more: over three debounces.
const SETTLE: Duration = Duration::from_millis(500);

#[test]
fn watch_rests_while_nothing_changes() {
    let tmp = TempDir::new("watch-idle");
    let data = tmp.join("data");
    let out = tmp.join("out");
    let records: Vec<(String, String)> = (1..=300).map(|id| (format!("berry/{id}.json"), record(id, id))).collect();
    let records: Vec<(&str, String)> = records.iter().map(|(path, text)| (path.as_str(), text.clone())).collect();
    write_files(&data, &records);
    // Not quiet: each rebuild says so on stderr.
    let server = Server::start_preview(&out, &["--watch", "--data", data.to_str().unwrap()]);
    let server_log = |server: &Server| server.stderr();
    assert_eq!(count(&server), Some(300));

    // An edit is rebuilt once; then, with nothing changing, no rebuild follows (the build's
    // own reads of the data are not changes) and the process uses next to no CPU.
    std::fs::write(data.join("berry/1.json"), record(1, 21)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 1) == Some(21)), "edit: {}", server_log(&server));
    std::thread::sleep(SETTLE);
    let (rebuilt, ticks) = idle(&server);
    assert_eq!(rebuilt, 0, "rebuilds while idle:\n{}", server_log(&server));
    assert!(ticks < 25, "{ticks} clock ticks of CPU in {IDLE:?} of idling (an eighth of a core at most)");

    // Broken data: the problems are printed once, not again and again.
    std::fs::write(data.join("berry/2.json"), "{").unwrap();
    assert!(eventually(LIMIT, || rebuilds(&server) > 0), "{}", server_log(&server));
    std::thread::sleep(SETTLE);
    let printed = server.stderr().matches("berry/2.json").count();
    let (rebuilt, _) = idle(&server);
    assert_eq!(rebuilt, 0, "rebuilds of broken data while idle:\n{}", server_log(&server));
    assert_eq!(server.stderr().matches("berry/2.json").count(), printed, "{}", server_log(&server));

    // And the watch still reacts to the fix.
    std::fs::write(data.join("berry/2.json"), record(2, 33)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 2) == Some(33)), "fix: {}", server_log(&server));
}

#[test]
fn watch_follows_a_data_folder_deleted_and_recreated() {
    let tmp = TempDir::new("watch-recreated");
    let data = tmp.join("data");
    let backup = tmp.join("backup");
    let out = tmp.join("out");
    write_files(&data, &[("berry/1.json", record(1, 20)), ("berry/2.json", record(2, 30))]);
    write_files(&backup, &[("berry/1.json", record(1, 20)), ("berry/2.json", record(2, 30))]);
    let server = Server::start_preview(&out, &["--quiet", "--watch", "--data", data.to_str().unwrap()]);
    assert_eq!(size_of(&server, 1), Some(20));

    // `rm -rf data`: the rebuild fails, the last good tree stays served.
    std::fs::remove_dir_all(&data).unwrap();
    assert!(eventually(LIMIT, || server.stderr().contains("still serving the last good build")), "{}", server.stderr());
    assert_eq!(size_of(&server, 1), Some(20));

    // `cp -r backup data`, then an edit: watched anew and rebuilt.
    let copied = std::process::Command::new("cp").arg("-r").arg(&backup).arg(&data).status().unwrap();
    assert!(copied.success());
    std::fs::write(data.join("berry/1.json"), record(1, 21)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 1) == Some(21)), "edit after recreating: {}", server.stderr());
    assert!(eventually(LIMIT, || !server.get_with("/", &[BROWSER]).text().contains("id=\"problems\"")));

    // Moved away and another folder moved in its place: the same.
    std::fs::rename(&data, tmp.join("data.old")).unwrap();
    std::fs::rename(&backup, &data).unwrap();
    std::fs::write(data.join("berry/2.json"), record(2, 31)).unwrap();
    assert!(eventually(LIMIT, || size_of(&server, 2) == Some(31)), "edit after moving: {}", server.stderr());
    assert_eq!(size_of(&server, 1), Some(20), "the moved-in folder's records are served");
}

/// The bulk-data file of `segment` as `server` lists it: its url path and the index entry.
fn bulk_entry(server: &Server, segment: &str) -> Option<(String, serde_json::Value)> {
    let index = server.get("/api/v2/bulk-data/");
    let index = (index.status == 200).then(|| index.json())?;
    let entry = index["results"].as_array()?.iter().find(|e| e["resource"] == segment)?.clone();
    let url = entry["download_url"].as_str()?;
    let path = &url[url.find("/api/v2/")?..];
    Some((path.to_string(), entry))
}

/// `gen serve --watch` serves the bulk-data files as they are (gzip, immutable), and after an
/// edit the new file, the old one gone (issue 37).
#[test]
fn watch_serves_the_bulk_data_file_of_each_rebuild() {
    let tmp = TempDir::new("watch-bulk");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_files(&data, &[("berry/1.json", record(1, 20)), ("berry/2.json", record(2, 30))]);
    let server = Server::start_preview(&out, &["--quiet", "--watch", "--data", data.to_str().unwrap()]);
    assert_eq!(count(&server), Some(2));
    let (old, entry) = bulk_entry(&server, "berry").expect("a bulk-data entry for berry");
    let served = server.get_with(&old, &["Accept-Encoding: identity"]).expect(200);
    assert_eq!(served.body, std::fs::read(out.join(old.trim_start_matches('/'))).unwrap());
    assert_eq!(served.body.len() as u64, entry["size"].as_u64().unwrap());
    assert_eq!(served.header("Content-Type"), Some("application/x-ndjson"));
    assert_eq!(served.header("Content-Encoding"), Some("gzip"));
    assert_eq!(served.header("Cache-Control"), Some("public, max-age=31536000, immutable"));

    std::fs::write(data.join("berry/2.json"), record(2, 31)).unwrap();
    let changed = || bulk_entry(&server, "berry").is_some_and(|(path, _)| path != old);
    assert!(eventually(LIMIT, changed), "the edit gives a new file: {}", server.stderr());
    let (new, _) = bulk_entry(&server, "berry").unwrap();
    let body = server.get(&new).expect(200).body;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(&body[..]), &mut text).unwrap();
    let sizes: Vec<i64> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["size"].as_i64().unwrap())
        .collect();
    assert_eq!(sizes, [20, 31]);
    server.get(&old).expect(404);
}

/// Waits for the rebuilds a change sets off to be done: one more announced than `before`, then
/// none for [`SETTLE`].
fn rebuilt_since(server: &Server, before: usize) -> bool {
    if !eventually(LIMIT, || rebuilds(server) > before) {
        return false;
    }
    loop {
        let now = rebuilds(server);
        std::thread::sleep(SETTLE);
        if rebuilds(server) == now {
            return true;
        }
    }
}

/// A rebuild under the watcher lists only the paths it saw change and trusts the rest to be as
/// the previous build's index says: after every kind of change, the tree it leaves is the tree
/// a fresh build of the same data gives. A data folder that comes to hold a link is listed
/// whole from then on.
#[test]
fn watch_rebuilds_told_what_changed_leave_the_tree_a_fresh_build_gives() {
    let tmp = TempDir::new("watch-told");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    let thing = |id: i64, size: i64| format!("{{\"id\": {id}, \"name\": \"thing-{id}\", \"size\": {size}}}");
    let mut files: Vec<(String, String)> = (1..=6).map(|id| (format!("thing/{id}.json"), thing(id, id))).collect();
    files.push(("thing/2/note.json".to_string(), "{\"a\": 1}".to_string()));
    files.push(("other/1.json".to_string(), "{\"id\": 1, \"name\": \"first\"}".to_string()));
    let files: Vec<(&str, String)> = files.iter().map(|(rel, text)| (rel.as_str(), text.clone())).collect();
    write_files(&data, &files);
    std::fs::create_dir(data.join("thing/3")).unwrap(); // a record's folder holding nothing yet
    let server = Server::start_preview(&out, &["--watch", "--data", data.to_str().unwrap()]);
    assert!(eventually(LIMIT, || server.get("/api/v2/thing/1/").status == 200), "{}", server.stderr());

    let steps = std::cell::Cell::new(0);
    let same_as_fresh = |step: &str, change: &dyn Fn()| {
        let before = rebuilds(&server);
        change();
        assert!(rebuilt_since(&server, before), "{step}: no rebuild\n{}", server.stderr());
        steps.set(steps.get() + 1);
        let fresh = tmp.join(&format!("fresh-{}", steps.get()));
        build(&data, &fresh, &[]).ok();
        assert!(read_tree(&out) == read_tree(&fresh), "{step}: the rebuilt tree differs from a fresh build");
    };
    let write = |rel: &str, text: &str| std::fs::write(data.join(rel), text).unwrap();
    // The watch began before the build at start: the first rebuild is told what changed too.
    same_as_fresh("a record edited in place", &|| write("thing/1.json", &thing(1, 10)));
    same_as_fresh("a record edited in place again", &|| write("thing/1.json", &thing(1, 11)));
    assert!(server.stderr().contains("seen changed, the rest trusted"), "{}", server.stderr());
    same_as_fresh("a record saved by rename", &|| {
        save_by_rename(tmp.path(), &data.join("thing/4.json"), &thing(4, 40))
    });
    same_as_fresh("a sub-document in the record folder that held none", &|| write("thing/3/note.json", "{\"b\": 2}"));
    same_as_fresh("a second sub-document beside a recorded one", &|| write("thing/2/more.json", "{\"c\": 3}"));
    same_as_fresh("a new record folder with a sub-document", &|| {
        std::fs::create_dir(data.join("thing/5")).unwrap();
        write("thing/5/late.json", "{\"d\": 4}");
    });
    same_as_fresh("a sub-document removed", &|| std::fs::remove_file(data.join("thing/2/note.json")).unwrap());
    same_as_fresh("a record and its folder removed", &|| {
        std::fs::remove_file(data.join("thing/5.json")).unwrap();
        std::fs::remove_dir_all(data.join("thing/5")).unwrap();
    });
    same_as_fresh("a record folder moved in whole", &|| {
        write_files(&tmp.join("elsewhere"), &[("6/far.json", "{\"e\": 5}".to_string())]);
        std::fs::rename(tmp.join("elsewhere/6"), data.join("thing/6")).unwrap();
    });
    same_as_fresh("a resource folder renamed", &|| std::fs::rename(data.join("other"), data.join("another")).unwrap());
    same_as_fresh("settings added", &|| write("gen.json", "{\"page_sizes\": [2]}"));
    let told = server.stderr().matches("the rest trusted").count();
    assert!(told >= 10, "rebuilds told what changed: {told}\n{}", server.stderr());

    // A link in the data folder: its target may change unwatched, so every later rebuild
    // lists everything.
    same_as_fresh("a link to a record", &|| {
        write_files(&tmp.join("outside"), &[("7.json", thing(7, 70))]);
        std::os::unix::fs::symlink(tmp.join("outside/7.json"), data.join("thing/7.json")).unwrap();
    });
    same_as_fresh("an edit beside the link", &|| write("thing/1.json", &thing(1, 12)));
    assert_eq!(server.stderr().matches("the rest trusted").count(), told, "{}", server.stderr());
}

/// A file that can change with no event naming a path in the data folder (another name of it,
/// a hard link, outside or inside the data folder; a symbolic link inside a folder moved in
/// whole) makes every later rebuild list everything: edited through its other name, it is
/// still found changed, as a fresh build finds it.
#[test]
fn watch_rebuilds_list_everything_once_a_file_can_change_unseen() {
    type Step = dyn Fn(&Path, &Path) + Sync;
    let hard_link: &Step =
        &|data, outside| std::fs::hard_link(outside.join("4.json"), data.join("thing/4.json")).unwrap();
    let moved_in: &Step = &|data, outside| {
        std::fs::create_dir(outside.join("4")).unwrap();
        std::os::unix::fs::symlink(outside.join("note.json"), outside.join("4/note.json")).unwrap();
        std::fs::write(data.join("thing/4.json"), "{\"id\": 4, \"name\": \"thing-4\"}").unwrap();
        std::fs::rename(outside.join("4"), data.join("thing/4")).unwrap();
    };
    // the two cases at once, each with its own folders and server: they spend their time
    // waiting on the watch's rebuilds and on a file stamp's age
    let cases = [
        ("a hard link to a file outside", hard_link, "4.json"),
        ("a folder moved in holding a symbolic link", moved_in, "note.json"),
    ];
    std::thread::scope(|scope| {
        for (label, link, edit_unseen) in cases {
            scope.spawn(move || watch_unseen_case(label, link, edit_unseen));
        }
    });
}

/// One case of [`watch_rebuilds_list_everything_once_a_file_can_change_unseen`]: `link` makes
/// the data folder hold a file that `edit_unseen` (its name outside) changes without an event.
fn watch_unseen_case(label: &str, link: &(dyn Fn(&Path, &Path) + Sync), edit_unseen: &str) {
    let tmp = TempDir::new("watch-unseen");
    let (data, out, outside) = (tmp.join("data"), tmp.join("out"), tmp.join("outside"));
    let thing = |id: i64, size: i64| format!("{{\"id\": {id}, \"name\": \"thing-{id}\", \"size\": {size}}}");
    write_files(&data, &[("thing/1.json", thing(1, 1)), ("thing/2.json", thing(2, 2))]);
    write_files(&outside, &[("4.json", thing(4, 4)), ("note.json", "{\"a\": 1}".to_string())]);
    let server = Server::start_preview(&out, &["--watch", "--data", data.to_str().unwrap()]);
    assert!(eventually(LIMIT, || server.get("/api/v2/thing/1/").status == 200), "{}", server.stderr());
    let rebuild = |change: &dyn Fn()| {
        let before = rebuilds(&server);
        change();
        assert!(rebuilt_since(&server, before), "{label}: no rebuild\n{}", server.stderr());
    };
    let write = |size: i64| std::fs::write(data.join("thing/1.json"), thing(1, size)).unwrap();
    rebuild(&|| write(10)); // lists everything: the first after the start
    rebuild(&|| write(11));
    let told = server.stderr().matches("the rest trusted").count();
    assert!(told >= 1, "{label}: {}", server.stderr());
    rebuild(&|| link(&data, &outside));
    std::thread::sleep(Duration::from_millis(2100)); // the linked file's stamp is trusted
    rebuild(&|| write(12));
    std::fs::write(outside.join(edit_unseen), "{\"id\": 4, \"name\": \"changed-4\", \"b\": 2}").unwrap();
    rebuild(&|| write(13));
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    assert!(read_tree(&out) == read_tree(&fresh), "{label}: the rebuilt tree differs from a fresh build");
    assert_eq!(server.stderr().matches("the rest trusted").count(), told, "{label}: {}", server.stderr());
}

/// A record of the resource `thing`.
fn thing(id: i64, size: i64) -> String {
    format!("{{\"id\": {id}, \"name\": \"thing-{id}\", \"size\": {size}}}")
}

/// Checks that the tree in `out` is the tree a fresh build of `data` gives.
fn assert_same_as_fresh((data, out): (&Path, &Path), step: &str) {
    let fresh = TempDir::new("watch-fresh");
    build(data, &fresh.join("out"), &[]).ok();
    assert!(read_tree(out) == read_tree(&fresh.join("out")), "{step}: the rebuilt tree differs from a fresh build");
}

/// Makes `change`, waits for the rebuilds it sets off, and checks the tree they leave.
fn rebuilt_as_fresh(server: &Server, (data, out): (&Path, &Path), step: &str, change: impl FnOnce()) {
    let before = rebuilds(server);
    change();
    assert!(rebuilt_since(server, before), "{step}: no rebuild\n{}", server.stderr());
    assert_same_as_fresh((data, out), step);
}

/// A pipe whose buffer is already full, and how many bytes fill it: a process given its write
/// end for stdout stops at its first line until the read end is drained.
fn full_pipe() -> (std::fs::File, std::os::fd::OwnedFd, usize) {
    use std::io::Write as _;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors, each then owned by one OwnedFd.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl(2) on a descriptor owned above.
    let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
    assert!(size > 0);
    let mut writer = std::fs::File::from(write);
    writer.write_all(&vec![b'.'; size as usize]).unwrap(); // exactly its capacity: it does not block
    (std::fs::File::from(read), OwnedFd::from(writer), size as usize)
}

/// A change made while `gen serve --watch` starts, after its first build read the data, is
/// rebuilt: the data folder is watched before the first build. Driven from outside, with no
/// hook in gen (issue 26): its stdout is a pipe already full, so it stops at its first line,
/// the address it serves at, which it prints after the first build and before serving; the
/// data is changed then, and the pipe drained. Before the fix, the watch began after that line,
/// and the change was never rebuilt.
#[test]
fn watch_rebuilds_a_change_made_while_it_starts() {
    let tmp = TempDir::new("watch-start");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_files(&data, &[("thing/1.json", thing(1, 1)), ("thing/2.json", thing(2, 2))]);
    let logs = TempDir::new("watch-start-log");
    let log = logs.join("serve.log");
    let (read_end, write_end, filled) = full_pipe();
    let child = common::gen_bin()
        .args(["serve", "--watch", "--addr", "127.0.0.1:0", "--data", common::utf8(&data), "--dir"])
        .arg(&out)
        .stdout(std::process::Stdio::from(write_end))
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(eventually(LIMIT, || said().contains("gen serve: rebuilt ")), "no first build: {}", said());
    // The first build is done; gen serve waits to print its address.
    std::fs::write(data.join("thing/1.json"), thing(1, 10)).unwrap();
    std::fs::remove_file(data.join("thing/2.json")).unwrap();
    let mut stdout = std::io::BufReader::new(read_end);
    std::io::Read::read_exact(&mut stdout, &mut vec![0; filled]).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let addr = line.trim().strip_prefix("http://").unwrap_or_else(|| panic!("{line:?}: {}", said()));
    let server = Server::adopt("gen serve --watch", child, addr, &log, logs);
    assert!(rebuilt_since(&server, 1), "the change made while it started is not rebuilt:\n{}", server.stderr());
    assert_same_as_fresh((&data, &out), "a change made while it started");
    assert_eq!(size_of_thing(&server, 1), Some(10));
    drop(stdout);
}

fn size_of_thing(server: &Server, id: i64) -> Option<i64> {
    let response = server.get(&format!("/api/v2/thing/{id}/"));
    (response.status == 200).then(|| response.json()["size"].as_i64()).flatten()
}

/// A data folder replaced by one the watch cannot tell from it by its inode: moved away and
/// back (the same inode), and deleted and copied back (`rm -rf data; cp -r backup data`: a
/// file system may give the new folder the old one's inode). Each is watched anew, and every
/// later edit is rebuilt as a fresh build gives it.
#[test]
fn watch_follows_a_data_folder_replaced_by_one_of_the_same_inode() {
    let tmp = TempDir::new("watch-same-inode");
    let (data, out, backup) = (tmp.join("data"), tmp.join("out"), tmp.join("backup"));
    let files: Vec<(String, String)> = (1..=3).map(|id| (format!("thing/{id}.json"), thing(id, id))).collect();
    let files: Vec<(&str, String)> = files.iter().map(|(rel, text)| (rel.as_str(), text.clone())).collect();
    write_files(&data, &files);
    write_files(&backup, &files);
    let server = Server::start_preview(&out, &["--watch", "--data", data.to_str().unwrap()]);
    let both = (data.as_path(), out.as_path());
    let edit = |id: i64, size: i64| std::fs::write(data.join(format!("thing/{id}.json")), thing(id, size)).unwrap();
    rebuilt_as_fresh(&server, both, "an edit", || edit(1, 10));

    let away = tmp.join("away");
    rebuilt_as_fresh(&server, both, "moved away and back", || {
        std::fs::rename(&data, &away).unwrap();
        std::fs::rename(&away, &data).unwrap();
    });
    rebuilt_as_fresh(&server, both, "an edit after moving away and back", || edit(2, 20));
    rebuilt_as_fresh(&server, both, "a second edit after moving away and back", || edit(3, 30));

    rebuilt_as_fresh(&server, both, "deleted and copied back", || {
        std::fs::remove_dir_all(&data).unwrap();
        let copied = std::process::Command::new("cp").arg("-r").arg(&backup).arg(&data).status().unwrap();
        assert!(copied.success());
    });
    rebuilt_as_fresh(&server, both, "an edit after copying back", || edit(1, 11));
    rebuilt_as_fresh(&server, both, "a second edit after copying back", || edit(2, 21));
    assert!(server.stderr().contains("the rest trusted"), "later rebuilds are told again: {}", server.stderr());
}

/// A second name given to the data's files after the start, from outside the data folder
/// (`cp -al data backup`, as a snapshot tool makes), then a write through it: rebuilt, as a
/// fresh build gives it, and every rebuild from then on lists everything. No event reaches
/// a watch on a folder when a file gets a new name elsewhere: each file is watched on its own.
#[test]
fn watch_sees_a_write_through_a_second_name_made_after_the_start() {
    let tmp = TempDir::new("watch-second-name");
    let (data, out, backup) = (tmp.join("data"), tmp.join("out"), tmp.join("backup"));
    write_files(&data, &[("thing/1.json", thing(1, 1)), ("thing/2.json", thing(2, 2))]);
    let server = Server::start_preview(&out, &["--watch", "--data", data.to_str().unwrap()]);
    let both = (data.as_path(), out.as_path());
    rebuilt_as_fresh(&server, both, "an edit", || std::fs::write(data.join("thing/1.json"), thing(1, 10)).unwrap());
    rebuilt_as_fresh(&server, both, "an edit, told", || {
        std::fs::write(data.join("thing/1.json"), thing(1, 11)).unwrap()
    });
    let told = server.stderr().matches("the rest trusted").count();
    assert!(told >= 1, "{}", server.stderr());
    rebuilt_as_fresh(&server, both, "cp -al data backup", || {
        let linked = std::process::Command::new("cp").arg("-al").arg(&data).arg(&backup).status().unwrap();
        assert!(linked.success());
    });
    rebuilt_as_fresh(&server, both, "a write through the second name", || {
        std::fs::write(backup.join("thing/2.json"), thing(2, 20)).unwrap()
    });
    assert_eq!(size_of_thing(&server, 2), Some(20));
    rebuilt_as_fresh(&server, both, "an edit after", || {
        std::fs::write(data.join("thing/1.json"), thing(1, 12)).unwrap()
    });
    assert_eq!(server.stderr().matches("the rest trusted").count(), told, "{}", server.stderr());
}

/// A FIFO dropped in as a table (`data/<segment>.ndjson`) is a data problem on every rebuild,
/// and never stops the watch: an edit made while it is there is rebuilt (and it reported
/// again), and once it is gone the tree is a fresh build's.
#[test]
fn watch_reports_a_fifo_table_on_every_rebuild_and_goes_on() {
    let tmp = TempDir::new("watch-fifo");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_files(&data, &[("thing/1.json", thing(1, 1)), ("thing/2.json", thing(2, 2))]);
    let server = Server::start_preview(&out, &["--watch", "--data", data.to_str().unwrap()]);
    let fifo = data.join("other.ndjson");
    let reported = || {
        let said = server.stderr();
        said.lines().filter(|line| line.contains("other.ndjson") && line.contains("named pipe (FIFO)")).count()
    };
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    assert!(eventually(LIMIT, || reported() == 1), "the FIFO is not reported:\n{}", server.stderr());
    std::fs::write(data.join("thing/1.json"), thing(1, 10)).unwrap();
    assert!(eventually(LIMIT, || reported() == 2), "not reported again:\n{}", server.stderr());
    assert_eq!(server.stderr().matches("still serving the last good build").count(), 2, "{}", server.stderr());
    assert_eq!(size_of_thing(&server, 1), Some(1), "the last good tree is served");
    rebuilt_as_fresh(&server, (&data, &out), "the FIFO removed", || std::fs::remove_file(&fifo).unwrap());
    assert_eq!(size_of_thing(&server, 1), Some(10));
}

/// Issue 48: under `--watch`, problems named absolute paths (the watch's own data folder is
/// absolute). Every command names them from where the user stands: relative to the current
/// directory when the data folder is under it, `--data` given relative or absolute, in the
/// serve's messages and its HTML view, and in `gen build` and `gen check`.
#[test]
fn problems_name_paths_from_where_the_user_stands_in_watch_build_and_check() {
    let tmp = TempDir::new("watch-relative");
    let data = tmp.join("mydata");
    write_files(&data, &[("berry/1.json", record(1, 20)), ("berry/2.json", record(2, 30))]);
    let absolute = tmp.path().to_str().unwrap();
    for data_arg in ["mydata", data.to_str().unwrap()] {
        std::fs::write(data.join("berry/1.json"), record(1, 20)).unwrap();
        let server =
            Server::start_preview_in(tmp.path(), Path::new("out"), &["--quiet", "--watch", "--data", data_arg]);
        assert_eq!(count(&server), Some(2), "{}", server.stderr());
        save_by_rename(tmp.path(), &data.join("berry/1.json"), r#"{"id": 1, "name": "berry-1", "size": 22"#);
        assert!(eventually(LIMIT, || server.stderr().contains("problem found")), "{}", server.stderr());
        let stderr = server.stderr();
        let problem = stderr.lines().find(|line| line.contains("berry/1.json")).unwrap_or_default();
        assert!(problem.starts_with("mydata/berry/1.json: "), "--data {data_arg}: {problem:?} in:\n{stderr}");
        assert!(!stderr.contains(absolute), "--data {data_arg}: an absolute path in:\n{stderr}");
        // the view shows the problems once the watch has handed them over, which may come just
        // after they are printed: wait for them there too (a read right after the print once
        // found a page without them, under load)
        let mut page = String::new();
        let shown = eventually(LIMIT, || {
            page = server.get_with("/", &[BROWSER]).expect(200).text();
            page.contains("mydata/berry/1.json: ")
        });
        assert!(shown && !page.contains(absolute), "--data {data_arg}: {page}");
        drop(server);
        for command in ["build", "check"] {
            let output = common::gen_bin()
                .current_dir(tmp.path())
                .args([command, "--data", data_arg])
                .output()
                .expect("the gen binary runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "gen {command} --data {data_arg}:\n{stderr}");
            assert!(stderr.starts_with("mydata/berry/1.json: "), "gen {command} --data {data_arg}:\n{stderr}");
            assert!(!stderr.contains(absolute), "gen {command} --data {data_arg}:\n{stderr}");
        }
    }
}
