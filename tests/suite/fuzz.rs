//! Fuzzing on stable Rust: bounded loops of generated and mutated inputs against the request
//! router (path + query → reply), the record validator (any bytes as a record file) and the
//! importer's reader (any bytes as published documents). Properties: nothing panics, the
//! server never answers with bytes that are not a document of the tree, and bad input is
//! reported as problems that name the file.
//!
//! `make test` runs a short pass; `make fuzz` runs `FUZZ_ITERATIONS` (default there: 20000)
//! with a time-based seed (`FUZZ_SEED` to replay one). A failing input is saved under
//! `target/fuzz-crashes/` so it can become a regression test.

use crate::common;

use common::*;
use genapi::serve::respond::{Request, decide};
use genapi::serve::route::{Route, route};
use genapi::serve::tree::ServedTree;
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// The seed of `make test`'s runs, so that a failure there replays exactly.
const FIXED_SEED: u64 = 0x5_eed0_f9e4;

fn iterations(default: usize) -> usize {
    std::env::var("FUZZ_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Saves a failing input and fails the test with where it is.
fn crash(target: &str, input: &[u8], why: &str) -> ! {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-crashes");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{target}-{}", &blake3::hash(input).to_hex()[..16]));
    std::fs::write(&path, input).unwrap();
    panic!("{target}: {why}; input saved to {}", path.display());
}

/// Mutates `input`: flips, inserts, deletes, duplicates or truncates bytes.
fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] ^= 1 << rng.below(8);
            }
            1 => out.insert(at, *rng.pick(b"{}[]\",:0123456789-.eE\\ntrufals\x00\xff\xc3/")),
            2 if at < out.len() => {
                out.remove(at);
            }
            3 => {
                let end = (at + rng.below(16)).min(out.len());
                let chunk = out[at..end].to_vec();
                out.splice(at..at, chunk);
            }
            4 => out.truncate(at),
            _ => {
                let token =
                    rng.pick(&["\"/api/v2/", "/api/v2/berry/1/", "\"url\":", "\"id\":", "\"name\":", "[[[[", "1e999"]);
                out.splice(at..at, token.bytes());
            }
        }
    }
    out
}

const TOKENS: &[&str] = &[
    "/",
    "/",
    "/",
    "api",
    "v2",
    "berry",
    "BERRY",
    "firmness",
    "form",
    "creature",
    "encounters",
    "_pages",
    "all",
    "20",
    "0",
    "1",
    "-1",
    "7",
    "137",
    "berry-7",
    "squirt",
    "meta",
    "openapi.json",
    "index.json",
    "..",
    ".",
    "%2e%2e",
    "%2E",
    "%2f",
    "%2F",
    "%5c",
    "\\",
    "%00",
    "\0",
    "%",
    "%zz",
    "%c3%a9",
    "é",
    "//",
    "?",
    "&",
    "=",
    "limit=",
    "offset=",
    "limit=-1",
    "offset=1e3",
    "limit=18446744073709551616",
    "limit=100000",
    "#",
    ";",
    " ",
    "http://x",
    "~",
    "*",
];

fn random_target(rng: &mut Rng) -> String {
    let mut target = String::new();
    if rng.below(4) > 0 {
        target.push_str("/api/v2/");
    }
    for _ in 0..rng.below(12) {
        target.push_str(rng.pick::<&str>(TOKENS));
    }
    target
}

#[test]
fn router_never_panics_and_never_serves_outside_the_tree() {
    let tmp = TempDir::new("fuzz-router");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    build(&tmp.join("data"), &out, &[]).ok();
    let manifest = genapi::tree::manifest::Manifest::read(&out).unwrap();
    let hashes: HashSet<String> = manifest.files.values().cloned().collect();
    let cache = std::sync::Arc::new(genapi::serve::cache::Cache::new(64 << 20));
    let tree = ServedTree::load(&out, cache).unwrap();
    // a file beside the tree that must never be served
    std::fs::write(tmp.join("secret.json"), "{\"secret\": true}").unwrap();

    let mut rng = Rng(seed("fuzz", FIXED_SEED));
    for _ in 0..iterations(20_000) {
        let target = random_target(&mut rng);
        let method = *rng.pick(&["GET", "HEAD", "OPTIONS", "POST", "DELETE", "get", ""]);
        let result = catch_unwind(AssertUnwindSafe(|| {
            if let Route::Doc(key) = route(&target).route {
                for segment in key.split('/') {
                    assert!(!segment.is_empty() && !segment.bytes().all(|b| b == b'.'), "segment {segment:?}");
                    assert!(segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)));
                }
            }
            let request = Request { method, target: &target, accept_encoding: Some("gzip"), ..Request::default() };
            let reply = decide(&tree, &request);
            let status = reply.status();
            assert!([200, 204, 304, 400, 404, 405, 414, 431].contains(&status), "status {status}");
            if status == 200 {
                // a document of the tree, or a page computed from its lists: never anything else
                let body = match &reply {
                    genapi::serve::respond::Reply::Doc { doc, .. } => doc.body.clone(),
                    _ => unreachable!(),
                };
                let known = hashes.contains(&blake3::hash(&body).to_hex().to_string());
                let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert!(known || page.get("results").is_some(), "served bytes that are not in the tree");
                assert!(!body.windows(6).any(|w| w == b"secret"));
            }
        }));
        if let Err(panic) = result {
            let why = panic.downcast_ref::<String>().cloned().unwrap_or_else(|| format!("{panic:?}"));
            crash("router", format!("{method} {target}").as_bytes(), &why);
        }
    }
}

#[test]
fn any_bytes_as_a_record_are_reported_not_panicked_on() {
    let tmp = TempDir::new("fuzz-records");
    let data = tmp.join("data");
    sample_data(&data);
    let seeds: Vec<Vec<u8>> = ["berry/7.json", "firmness/1.json", "creature/7.json", "creature/7/encounters.json"]
        .iter()
        .map(|p| std::fs::read(data.join(p)).unwrap())
        .chain([format!("{{\"id\": 7, \"x\": {}1{}}}", "[".repeat(200), "]".repeat(200)).into_bytes()])
        .collect();
    let target = data.join("berry/7.json");
    // a mutation of one file can only break that file, or a reference to berry 7 (its name
    // changed or it is gone)
    let about = |problem: &genapi::problem::Problem| problem.path == target || problem.message.contains("berry");
    check_mutations("record", (&data, &target), &seeds, 1, about);
}

/// Writes mutations of `seeds` at `target` in `data`, `gen check`s each, and crashes (saving
/// the input as `kind`) when it panics, fails with anything but data problems, or reports a
/// problem that `about` says is not about the mutated file.
fn check_mutations(
    kind: &str,
    (data, target): (&Path, &Path),
    seeds: &[Vec<u8>],
    stream: u64,
    about: impl Fn(&genapi::problem::Problem) -> bool,
) {
    let mut rng = Rng(seed("fuzz", FIXED_SEED) ^ stream);
    for _ in 0..iterations(300) {
        let seed_input = rng.pick(seeds).clone();
        let input = mutate(&mut rng, &seed_input);
        std::fs::write(target, &input).unwrap();
        match catch_unwind(|| genapi::check(data)) {
            Err(_) => crash(kind, &input, "gen check panicked"),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                let problems = e
                    .downcast::<genapi::problem::Problems>()
                    .unwrap_or_else(|e| crash(kind, &input, &format!("an error that is not a data problem: {e:#}")));
                if let Some(problem) = problems.list.iter().find(|problem| !about(problem)) {
                    crash(kind, &input, &format!("problem not about the mutated file: {problem}"));
                }
            }
        }
    }
}

/// A table is read in blocks, its lines cut at `\n` or `\r\n`: any bytes as a table are
/// reported at the table (at a line of it, or the whole file), never panicked on.
#[test]
fn any_bytes_as_a_table_are_reported_not_panicked_on() {
    let tmp = TempDir::new("fuzz-tables");
    let data = tmp.join("data");
    let lines = ["{\"id\": 1, \"name\": \"one\", \"n\": [1, 2]}", "{\"id\": 2, \"name\": \"two\"}", "{\"id\": 3}"];
    let seeds: Vec<Vec<u8>> = vec![
        (lines.join("\n") + "\n").into_bytes(),
        lines.join("\r\n").into_bytes(),
        format!("{}\r\n\n{}\r{}", lines[0], lines[1], lines[2]).into_bytes(),
    ];
    let target = data.join("thing.ndjson");
    std::fs::create_dir_all(&data).unwrap();
    let about =
        |problem: &genapi::problem::Problem| problem.path.to_string_lossy().starts_with(&*target.to_string_lossy());
    check_mutations("table", (&data, &target), &seeds, 3, about);
}

#[test]
fn any_bytes_as_published_documents_are_reported_not_panicked_on() {
    let tmp = TempDir::new("fuzz-import");
    let src = tmp.join("src");
    let list = r#"{"count": 2, "next": null, "previous": null, "results": [{"name": "a", "url": "/api/v2/pokemon/1/"}, {"name": "b", "url": "/api/v2/pokemon/2/"}]}"#;
    let record = r#"{"id": 1, "name": "a", "form": {"name": "f", "url": "/api/v2/pokemon-form/1/"}, "enc": "/api/v2/pokemon/1/encounters"}"#;
    let sub = r#"[{"chance": 5, "area": {"name": "x", "url": "/api/v2/location-area/3/"}}]"#;
    let mut rng = Rng(seed("fuzz", FIXED_SEED) ^ 2);
    for i in 0..iterations(150) {
        let (list_bytes, record_bytes, sub_bytes) = match rng.below(3) {
            0 => (mutate(&mut rng, list.as_bytes()), record.as_bytes().to_vec(), sub.as_bytes().to_vec()),
            1 => (list.as_bytes().to_vec(), mutate(&mut rng, record.as_bytes()), sub.as_bytes().to_vec()),
            _ => (list.as_bytes().to_vec(), record.as_bytes().to_vec(), mutate(&mut rng, sub.as_bytes())),
        };
        let _ = std::fs::remove_dir_all(&src);
        for (path, bytes) in [
            ("api/v2/pokemon/index.json", &list_bytes),
            ("api/v2/pokemon/1/index.json", &record_bytes),
            ("api/v2/pokemon/1/encounters/index.json", &sub_bytes),
            (
                "api/v2/pokemon/2/index.json",
                &record.replace("\"id\": 1, \"name\": \"a\"", "\"id\": 2, \"name\": \"b\"").into_bytes(),
            ),
        ] {
            let file = src.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        }
        let out = tmp.join(&format!("data-{i}"));
        let options = genapi::import::ImportOptions::default();
        let input = [list_bytes, record_bytes, sub_bytes].join(&b"\n---\n"[..]);
        match catch_unwind(|| genapi::import::import_api_data(&src, &out, &options)) {
            Err(_) => crash("import", &input, "gen import panicked"),
            Ok(Ok(_)) => {
                let _ = std::fs::remove_dir_all(&out);
            }
            Ok(Err(e)) => {
                if e.downcast_ref::<genapi::problem::Problems>().is_none() {
                    crash("import", &input, &format!("an error that is not a data problem: {e:#}"));
                }
                assert!(!out.exists(), "a failed import left {}", out.display());
            }
        }
    }
}
