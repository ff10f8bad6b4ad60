//! A build killed at any point never leaves a tree that `gen serve` would serve as a mix of two
//! builds: the previous tree whole, the new one whole, or (killed while an update is committed
//! in place) files that do not match the manifest, which serve answers 503 for (and reports). The next build repairs
//! whatever a killed one left.

use crate::common;

use common::*;
use std::time::Duration;

/// A data folder large enough that a build takes a while: `n` records with a few references.
fn large_data(dir: &std::path::Path, n: usize) {
    let mut files = vec![("gen.json".to_string(), r#"{"page_sizes": [7, 20, 50]}"#.to_string())];
    for id in 1..=20 {
        files.push((format!("kind/{id}.json"), format!(r#"{{"id": {id}, "name": "kind-{id}"}}"#)));
    }
    for id in 1..=n {
        let kind = id % 20 + 1;
        let text = format!(
            r#"{{"id": {id}, "name": "thing-{id}", "kind": {{"name": "kind-{kind}", "url": "/api/v2/kind/{kind}/"}}, "notes": "{}"}}"#,
            "lorem ipsum ".repeat(40)
        );
        files.push((format!("thing/{id}.json"), text));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(dir, &files);
}

/// Every file the manifest of `out` lists has the hash the manifest gives it (what `gen serve`
/// checks before it serves a tree).
fn consistent(out: &std::path::Path) -> bool {
    let Ok(bytes) = std::fs::read(out.join("manifest.json")) else { return false };
    let manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    manifest["files"].as_object().unwrap().iter().all(|(path, hash)| {
        std::fs::read(out.join(path)).is_ok_and(|bytes| blake3::hash(&bytes).to_hex().as_str() == hash)
    })
}

/// `gen serve` serves the tree in `out` and reports it damaged (issue 47 item 7: each file that
/// does not match its manifest is answered 503, never served, and the log names them and
/// `gen build --verify`), within a minute; the server is stopped here.
fn serve_reports_damage(out: &std::path::Path) -> bool {
    use std::io::BufRead as _;
    let mut child = gen_bin()
        .args(["serve", "--quiet", "--addr", "127.0.0.1:0", "--dir"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("do not match its manifest") && line.contains("gen build --verify") {
                let _ = tx.send(());
            }
        }
    });
    let reported = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    let _ = child.kill();
    child.wait().unwrap();
    reported
}

fn staging_dirs(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".gen-staging-"))
        .collect()
}

#[test]
fn sigkill_at_any_point_keeps_the_previous_tree() {
    let Some(()) = heavy("it runs long (3000-record builds, killed at several points)") else { return };
    let tmp = TempDir::new("killed");
    let data = tmp.join("data");
    large_data(&data, 3000);
    let out = tmp.join("out");
    // the previous tree: built from the data before a change
    build(&data, &out, &[]).ok();
    let before = read_tree(&out);
    std::fs::write(data.join("thing/1.json"), r#"{"id": 1, "name": "thing-1", "changed": true}"#).unwrap();
    // and a setting: every document is rendered again
    std::fs::write(data.join("gen.json"), r#"{"page_sizes": [7, 20, 60]}"#).unwrap();
    // the tree the changed data builds into, for comparison: a kill after the swap leaves it
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    let after = read_tree(&fresh);

    let mut killed_while_staging = 0;
    // The later delays matter on a loaded machine, where the load and the extract alone can
    // outlast the first ones (the loop ends once a build finishes or swaps before its kill).
    for delay_ms in [5, 40, 120, 250, 450, 700, 1000, 1500, 2500, 4000] {
        let mut child =
            gen_bin().args(["build", "--quiet", "--data"]).arg(&data).arg("--out").arg(&out).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if finished {
            break; // the build was faster than the delay: later delays prove nothing more
        }
        killed_while_staging += usize::from(!staging_dirs(tmp.path()).is_empty());
        // Either the previous tree, whole, or the new one, whole, or a tree whose mismatching files serve answers 503 for.
        let now = read_tree(&out);
        assert!(
            now == before || now == after || !consistent(&out),
            "out/ is a mix that matches its manifest after a kill at {delay_ms} ms"
        );
        if now == after {
            break; // the swap is done: later kills would test nothing more
        }
    }
    assert!(killed_while_staging > 0, "no kill landed while the new tree was being written");

    // the next build completes, removes what the killed ones left, and writes the new tree
    build(&data, &out, &[]).ok();
    assert_eq!(staging_dirs(tmp.path()), Vec::<String>::new());
    assert_ne!(after, before);
    assert_eq!(read_tree(&out), after, "the tree after kills differs from a clean build");
}

/// The same for an update committed in place: many files change, so kills land while they are
/// renamed into the tree, and the tree never matches its manifest unless it is one build whole.
#[test]
fn sigkill_during_an_incremental_commit_never_leaves_a_served_mix() {
    let Some(()) = heavy("it runs long (3000-record commits, killed at several points)") else { return };
    let tmp = TempDir::new("killed-commit");
    let data = tmp.join("data");
    large_data(&data, 3000);
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let before = read_tree(&out);
    // change every record, remove some, add others: a large commit of renames and removals
    large_data(&data, 2800);
    for id in 2801..=3000 {
        std::fs::remove_file(data.join(format!("thing/{id}.json"))).unwrap();
    }
    for id in 1..=2800 {
        let file = data.join(format!("thing/{id}.json"));
        let text = std::fs::read_to_string(&file).unwrap().replace("lorem", "ipsum");
        std::fs::write(file, text).unwrap();
    }
    let fresh = tmp.join("fresh");
    build(&data, &fresh, &[]).ok();
    let after = read_tree(&fresh);

    let (mut mixed, mut reported) = (0, 0);
    let journal = state_file(&out, "journal");
    let stamp = |path: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.ino(), m.mtime_nsec(), m.size()))
    };
    // Driven from outside, as a user's binary runs (no test hook in gen): the build is stopped
    // (SIGSTOP) as soon as its journal exists (its commit has begun), let run `run_ms` more,
    // and killed (SIGKILL) while stopped, so that kills land inside the commit.
    let signal = |child: &std::process::Child, signal: i32| {
        // SAFETY: kill(2) on the pid of a child this test started and has not yet reaped.
        unsafe { libc::kill(child.id() as i32, signal) };
    };
    for run_ms in [0, 1, 5, 20, 80] {
        let old_journal = stamp(&journal);
        let mut child =
            gen_bin().args(["build", "--quiet", "--data"]).arg(&data).arg("--out").arg(&out).spawn().unwrap();
        while stamp(&journal) == old_journal && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(50));
        }
        signal(&child, libc::SIGSTOP);
        if run_ms > 0 {
            signal(&child, libc::SIGCONT);
            std::thread::sleep(Duration::from_millis(run_ms));
            signal(&child, libc::SIGSTOP);
        }
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let now = read_tree(&out);
        if now != before && now != after {
            mixed += 1;
            assert!(!consistent(&out), "a mix that matches its manifest after a kill {run_ms} ms into the commit");
            if reported == 0 {
                let said = serve_reports_damage(&out);
                assert!(said, "gen serve does not report a mixed tree (kill {run_ms} ms into the commit)");
                reported += 1;
            }
        }
        if finished {
            break;
        }
    }
    assert!(mixed > 0, "no kill landed inside the commit");
    build(&data, &out, &[]).ok();
    assert_eq!(staging_dirs(tmp.path()), Vec::<String>::new());
    assert!(!state_file(&out, "journal").exists());
    assert!(read_tree(&out) == after, "the tree after kills differs from a clean build");
    assert!(consistent(&out));
}

/// Issue 26, item 16: test hooks must not change what a user's binary does. The kill tests
/// above drive gen from outside (signals, the journal's appearance), so the binary has no
/// environment variable that pauses its commit: its name is nowhere in it.
#[test]
fn the_binary_has_no_commit_pause_hook() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_gen")).unwrap();
    // no hook of any test: a user's binary does what it says whatever the environment
    for hook in [["GEN_TEST", "COMMIT_PAUSE_US"].join("_"), ["GEN_TEST", ""].join("_")] {
        assert!(!binary.windows(hook.len()).any(|w| w == hook.as_bytes()), "the gen binary reads {hook}");
    }
}
