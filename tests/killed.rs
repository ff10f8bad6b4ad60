//! A build killed at any point leaves the previous tree as it was, and the next build cleans
//! up after it.

mod common;

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

fn staging_dirs(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".gen-staging-"))
        .collect()
}

#[test]
fn sigkill_at_any_point_keeps_the_previous_tree() {
    let tmp = TempDir::new("killed");
    let data = tmp.join("data");
    large_data(&data, 3000);
    let out = tmp.join("out");
    // the previous tree: built from the data before a change
    run(&["build", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()]).ok();
    let before = read_tree(&out);
    std::fs::write(data.join("thing/1.json"), r#"{"id": 1, "name": "thing-1", "changed": true}"#).unwrap();
    // the tree the changed data builds into, for comparison: a kill after the swap leaves it
    let fresh = tmp.join("fresh");
    run(&["build", "--data", data.to_str().unwrap(), "--out", fresh.to_str().unwrap()]).ok();
    let after = read_tree(&fresh);

    let mut killed_while_staging = 0;
    for delay_ms in [5, 40, 120, 250, 450, 700] {
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
        // Either the previous tree, whole, or (killed after the swap, while the old folder was
        // being removed) the new one, whole: never a mix.
        let now = read_tree(&out);
        assert!(now == before || now == after, "out/ is neither tree after a kill at {delay_ms} ms");
        if now == after {
            break; // the swap is done: later kills would test nothing more
        }
    }
    assert!(killed_while_staging > 0, "no kill landed while the new tree was being written");

    // the next build completes, removes what the killed ones left, and writes the new tree
    run(&["build", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()]).ok();
    assert_eq!(staging_dirs(tmp.path()), Vec::<String>::new());
    assert_ne!(after, before);
    assert_eq!(read_tree(&out), after, "the tree after kills differs from a clean build");
}
