//! `gen serve --dir <archive>` (issue 49): the answers of an archive are the answers of the tree
//! it holds (status, headers but the date, body, ETag), for every path the tree's manifest lists,
//! computed pages, `?q=`, filters, HEAD, 304s, gzip and identity, errors; a damaged, truncated or
//! missing part is answered 503 `no-store` and nothing wrong is served; a small `--cache-mb`
//! answers everything right.

use crate::common::{
    BuiltSample, Conn, Response, TempDir, build, built_sample, fixture, read_json, run, sample_data, utf8,
};
use crate::serve_support::{Server, eventually};
use std::path::Path;

/// One request on a kept-alive connection: `method target` with `headers` (`Name: value`).
fn ask(conn: &mut Conn, method: &str, target: &str, headers: &[&str]) -> Response {
    let mut request = format!("{method} {target} HTTP/1.1\r\nHost: test\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    conn.send(request.as_bytes());
    conn.read_response(method == "HEAD").unwrap_or_else(|e| panic!("{method} {target}: {e}"))
}

/// The answer as compared: status line, headers but the date, body.
fn seen(response: &Response) -> (String, Vec<(String, String)>, Vec<u8>) {
    let headers = response.headers.iter().filter(|(name, _)| name != "date").cloned().collect();
    (response.status_line.clone(), headers, response.body.clone())
}

/// Two servers (a tree's and its archive's) asked the same things.
struct Pair {
    _tree: Server,
    archive: Server,
    conns: (Conn, Conn),
    compared: usize,
}

impl Pair {
    fn start(tree: &Path, archive: &Path, args: &[&str]) -> Pair {
        let (tree, archive) = (Server::start(tree, args), Server::start(archive, args));
        let conns = (tree.connect(), archive.connect());
        Pair { _tree: tree, archive, conns, compared: 0 }
    }

    /// Asks both, asserts the same answer, and returns it.
    fn same(&mut self, method: &str, target: &str, headers: &[&str]) -> Response {
        let from_tree = ask(&mut self.conns.0, method, target, headers);
        let from_archive = ask(&mut self.conns.1, method, target, headers);
        assert!(
            seen(&from_tree) == seen(&from_archive),
            "{method} {target} {headers:?}:\n tree    {} {:?} ({} bytes)\n archive {} {:?} ({} bytes)\n{}",
            from_tree.status_line,
            from_tree.headers,
            from_tree.body.len(),
            from_archive.status_line,
            from_archive.headers,
            from_archive.body.len(),
            self.archive.log()
        );
        self.compared += 1;
        from_tree
    }

    /// Every way of asking for `target`: identity and gzip, HEAD, and the 304 of each ETag.
    fn every_way(&mut self, target: &str) {
        let plain = self.same("GET", target, &[]);
        let gzip = self.same("GET", target, &["Accept-Encoding: gzip"]);
        self.same("HEAD", target, &["Accept-Encoding: gzip"]);
        for etag in [plain.header("etag"), gzip.header("etag")].into_iter().flatten() {
            let answer = self.same("GET", target, &["Accept-Encoding: gzip", &format!("If-None-Match: {etag}")]);
            assert_eq!(answer.status, 304, "{target} with {etag}");
        }
    }
}

/// The url of a file of the tree.
fn url_of(path: &str) -> String {
    match path.strip_suffix("index.json") {
        Some(folder) => format!("/{folder}"),
        None => format!("/{path}"),
    }
}

/// Asks both servers for every file the tree's manifest lists, and for `computed`.
fn compare_all(pair: &mut Pair, tree: &Path, computed: &[String]) {
    let manifest = read_json(&tree.join("manifest.json"));
    let files = manifest["files"].as_object().unwrap();
    assert!(!files.is_empty());
    for path in files.keys() {
        pair.every_way(&url_of(path));
    }
    for target in computed {
        pair.every_way(target);
    }
}

/// Targets that are no file of a tree: pages computed, `?q=`, filters, and errors.
fn computed_targets(segment: &str, record: &str, filters: &[(&str, &str)]) -> Vec<String> {
    let list = format!("/api/v2/{segment}/");
    let mut targets: Vec<String> = [
        "?limit=7&offset=3",
        "?offset=5",
        "?limit=3",
        "?limit=100000",
        "?limit=2&offset=100000",
        "?q=1",
        "?q=e&limit=2&offset=1",
        "?q=zzzz-none",
        "?limit=-1",
        "?offset=x",
        "?nofilter=3",
        "?unknown=1&limit=5",
    ]
    .iter()
    .map(|query| format!("{list}{query}"))
    .collect();
    for (field, value) in filters {
        targets.push(format!("{list}?{field}={value}"));
        targets.push(format!("{list}?{field}={value}&limit=2&offset=1"));
        targets.push(format!("{list}?{field}={value}&q=1"));
        targets.push(format!("{list}?{field}=no-such-value"));
    }
    if let [(a, x), (b, y), ..] = filters {
        targets.push(format!("{list}?{a}={x}&{b}={y}"));
    }
    targets.extend([
        format!("/api/v2/{segment}/{record}"),
        format!("/api/v2/{segment}/{record}/"),
        format!("/api/v2/{segment}/999999999/"),
        format!("/api/v2/{segment}/no-such-name/"),
        "/api/v2/no-such-resource/".into(),
        "/api/v2/no-such-resource/1/".into(),
        "/api/v2".into(),
        "/api/v2/".into(),
        "/".into(),
        "/manifest.json".into(),
        "/root".into(),
        "/api/v2/../manifest.json".into(),
        "/api/v2/openapi.json".into(),
        "/api/v2/openapi.yaml".into(),
        format!("{list}index.json.gz"),
    ]);
    targets
}

#[test]
fn an_archive_answers_as_its_tree_does() {
    let BuiltSample { tmp: _tmp, out, archive, .. } = built_sample("serve-archive", true);
    let mut pair = Pair::start(&out, &archive, &[]);
    let computed = computed_targets("berry", "7", &[("firmness", "firm-2"), ("size", "7.5")]);
    compare_all(&mut pair, &out, &computed);
    for method in ["POST", "OPTIONS", "DELETE"] {
        pair.same(method, "/api/v2/berry/", &[]);
    }
    // a browser's HTML view, and a bad request
    pair.same("GET", "/api/v2/berry/3/", &["Accept: text/html"]);
    pair.same("GET", "/api/v2/berry/?limit=abc", &["Accept: text/html"]);
    assert!(pair.compared > 1000, "{} answers compared", pair.compared);
    let log = pair.archive.log();
    assert!(!log.contains("gen serve:"), "the archive's server said:\n{log}");
}

#[test]
fn an_archive_served_rebased_answers_as_its_tree_does() {
    let BuiltSample { tmp: _tmp, out, archive, .. } = built_sample("serve-archive-rebased", true);
    let (tree, served) = (Server::start_preview(&out, &["--quiet"]), Server::start_preview(&archive, &["--quiet"]));
    for target in
        ["/api/v2/", "/api/v2/berry/", "/api/v2/berry/?limit=3&offset=4", "/api/v2/berry/?q=1", "/api/v2/berry/7/"]
    {
        for gzip in [&[][..], &["Accept-Encoding: gzip"][..]] {
            let (a, b) = (tree.get_with(target, gzip), served.get_with(target, gzip));
            assert_eq!(a.status, b.status, "{target}");
            assert_eq!(a.header("content-encoding"), b.header("content-encoding"), "{target}");
            let body = |r: &Response, addr: &str| {
                let text = match r.header("content-encoding") {
                    Some(_) => gunzip(&r.body),
                    None => r.body.clone(),
                };
                String::from_utf8(text).unwrap().replace(addr, "ADDR")
            };
            assert_eq!(body(&a, &tree.addr), body(&b, &served.addr), "{target}");
            assert!(body(&b, &served.addr).contains("http://ADDR/api/v2/"), "rebased: {target}");
        }
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn an_archive_of_the_published_fixture_answers_as_its_tree_does() {
    let Some(fixture) = fixture() else { return };
    let tmp = TempDir::new("serve-archive-fixture");
    let (data, out, archive) = (tmp.join("data"), tmp.join("out"), tmp.join("archive"));
    run(&["import", "api-data", utf8(&fixture), "--out", utf8(&data)]).ok();
    build(&data, &out, &[]).ok();
    build(&data, &archive, &["--archive"]).ok();
    let mut pair = Pair::start(&out, &archive, &[]);
    let mut computed = computed_targets("pokemon", "25", &[]);
    computed.extend(computed_targets("berry", "cheri", &[]));
    compare_all(&mut pair, &out, &computed);
}

#[test]
fn a_small_cache_answers_everything_right() {
    // book 1 is 600 KiB: larger than half of 1 MiB, so it is sent a piece at a time from the
    // archive's part, as from the tree's file
    let tmp = TempDir::new("serve-archive-small-cache");
    let (data, out, archive) = (tmp.join("data"), tmp.join("out"), tmp.join("archive"));
    sample_data(&data);
    let text = "a long text ".repeat(50_000);
    std::fs::create_dir_all(data.join("book")).unwrap();
    std::fs::write(data.join("book/1.json"), format!(r#"{{"id": 1, "name": "big", "text": "{text}"}}"#)).unwrap();
    std::fs::write(data.join("book/2.json"), r#"{"id": 2, "name": "small"}"#).unwrap();
    build(&data, &out, &[]).ok();
    build(&data, &archive, &["--archive"]).ok();
    let mut pair = Pair::start(&out, &archive, &["--cache-mb", "1"]);
    let computed = computed_targets("berry", "3", &[("firmness", "firm-2")]);
    // twice: what was dropped from the cache is read again
    for _ in 0..2 {
        compare_all(&mut pair, &out, &computed);
    }
    let big = pair.same("GET", "/api/v2/book/1/", &["Accept-Encoding: gzip"]);
    assert!(big.body.len() > 512 << 10 && big.header("content-encoding").is_none(), "sent from its part");
}

/// The entry (part file, offset, length) of `key` in the archive in `dir`.
fn place_of(dir: &Path, key: &str) -> (std::path::PathBuf, u64, u64) {
    use genapi::archive::{Folder, Reader, part_file};
    let reader = Reader::open(Folder(dir.to_path_buf())).unwrap();
    let entry = reader.entry(key).unwrap().unwrap_or_else(|| panic!("{key} in the archive"));
    (dir.join(part_file(&entry.part)), entry.offset, entry.length)
}

/// Asserts the answer is the 503 of a damaged file: JSON, `no-store`.
fn refused(response: &Response, what: &str) {
    assert_eq!(response.status, 503, "{what}: {}", response.text());
    assert_eq!(response.header("cache-control"), Some("no-store"), "{what}");
    assert!(response.json()["detail"].is_string(), "{what}");
}

#[test]
fn a_damaged_part_is_answered_503_and_nothing_wrong_is_served() {
    let tmp = TempDir::new("serve-archive-damage");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    sample_data(&data);
    build(&data, &out, &[]).ok();
    let key = "api/v2/berry/7/index.json";
    let good = std::fs::read(out.join(key)).unwrap();
    for damage in ["flip", "truncate", "delete"] {
        let archive = tmp.join(&format!("archive-{damage}"));
        build(&data, &archive, &["--archive"]).ok();
        let (part, offset, length) = place_of(&archive, key);
        let server = Server::start(&archive, &[]);
        assert_eq!(server.get("/api/v2/berry/8/").status, 200, "served before the damage");
        match damage {
            "flip" => {
                let mut bytes = std::fs::read(&part).unwrap();
                bytes[(offset + length / 2) as usize] ^= 0x20;
                std::fs::write(&part, bytes).unwrap();
            }
            "truncate" => {
                let file = std::fs::OpenOptions::new().write(true).open(&part).unwrap();
                file.set_len(offset + length - 3).unwrap();
            }
            _ => std::fs::remove_file(&part).unwrap(),
        }
        for gzip in [&[][..], &["Accept-Encoding: gzip"][..]] {
            let answer = server.get_with("/api/v2/berry/7/", gzip);
            refused(&answer, damage);
            assert!(answer.body != good);
        }
        // by name too (the same stored document), and again: nothing was cached
        refused(&server.get("/api/v2/berry/berry-7/"), damage);
        refused(&server.get("/api/v2/berry/7/"), damage);
        // the log line was written before the answer; its reader may lag behind
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !(server.log().contains(key) && server.log().contains("parts/")) {
            assert!(
                std::time::Instant::now() < deadline,
                "{damage}: the log names the key and the part:\n{}",
                server.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn a_root_that_cannot_be_read_is_a_startup_error() {
    let BuiltSample { tmp: _tmp, archive, .. } = built_sample("serve-archive-root", false);
    let root = archive.join("root");
    let bytes = std::fs::read(&root).unwrap();
    std::fs::write(&root, &bytes[..bytes.len() - 4]).unwrap();
    let ran = run(&["serve", "--dir", utf8(&archive), "--addr", "127.0.0.1:0"]);
    assert!(ran.code().is_some_and(|code| code != 0), "{}", ran.stderr());
    assert!(ran.stderr().contains("cannot serve the archive") && ran.stderr().contains("root"), "{}", ran.stderr());
    assert!(ran.stdout().is_empty(), "no address printed: {}", ran.stdout());
}

#[test]
fn a_new_root_is_served_once_written() {
    let BuiltSample { tmp: _tmp, data, out, archive } = built_sample("serve-archive-reload", true);
    let server = Server::start(&archive, &[]);
    assert_eq!(server.get("/api/v2/berry/7/").json()["name"], "berry-7");
    let record = data.join("berry/7.json");
    let text = std::fs::read_to_string(&record).unwrap().replace("\"berry-7\"", "\"berry-seven\"");
    std::fs::write(&record, text).unwrap();
    build(&data, &out, &[]).ok();
    build(&data, &archive, &["--archive"]).ok(); // an edit: a new data part and blocks, then the root last
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let answer = server.get("/api/v2/berry/7/").expect(200).json();
        if answer["name"] == "berry-seven" {
            break;
        }
        assert_eq!(answer["name"], "berry-7", "the old root or the new one, nothing else");
        assert!(std::time::Instant::now() < deadline, "the new root was not loaded:\n{}", server.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(server.get("/api/v2/berry/berry-seven/").status, 200);
}

/// Not a test: writes the archive of the built tree `ARCHIVE_TREE` into `ARCHIVE_OUT`, to measure
/// `gen serve` on each (docs/serve.md, "Serving an archive"): `ARCHIVE_TREE=… ARCHIVE_OUT=…
/// cargo test --release --test suite serve_archive::write_an_archive -- --ignored`. With
/// `ARCHIVE_EXTRA_KEYS=N`, N more keys (`api/v2/zz/<i>/index.json`, a small document each),
/// to measure the start of an archive of millions of keys.
#[test]
#[ignore]
fn write_an_archive_to_measure() {
    use genapi::archive::{Document, Options};
    let tree = std::env::var("ARCHIVE_TREE").expect("ARCHIVE_TREE: a built tree");
    let out = std::env::var("ARCHIVE_OUT").expect("ARCHIVE_OUT: where the archive goes");
    let extra: usize = std::env::var("ARCHIVE_EXTRA_KEYS").map_or(0, |n| n.parse().unwrap());
    // the tree's documents (no `.gz` siblings, the manifest with `"files": {}`, as
    // docs/archive.md's contract says), then the extra keys: `gen build --archive` cannot add those
    let mut documents = Vec::new();
    for (path, bytes) in crate::common::read_tree(Path::new(&tree)) {
        let bytes = match path.as_str() {
            _ if path.ends_with(".json.gz") => continue,
            "manifest.json" => {
                let mut manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                manifest["files"] = serde_json::json!({});
                serde_json::to_vec_pretty(&manifest).unwrap()
            }
            _ => bytes,
        };
        documents.push(Document::new(vec![path], bytes));
    }
    let key = |i: usize| format!("api/v2/zz/{i}/index.json");
    documents.extend((0..extra).map(|i| Document::new(vec![key(i)], format!("{{\"id\": {i}}}").into_bytes())));
    genapi::archive::write(Path::new(&out), documents, &Options::default()).unwrap();
}

#[test]
fn under_watch_an_archive_is_rebuilt_as_an_archive() {
    let BuiltSample { tmp: _tmp, data, archive, .. } = built_sample("serve-archive-watch", false);
    let server = Server::start(&archive, &["--watch", "--data", utf8(&data)]);
    assert_eq!(server.get("/api/v2/berry/7/").expect(200).json()["name"], "berry-7");
    let record = data.join("berry/7.json");
    let text = std::fs::read_to_string(&record).unwrap().replace("\"berry-7\"", "\"berry-seven\"");
    std::fs::write(&record, text).unwrap();
    let renamed = || {
        server.get("/api/v2/berry/7/").status == 200 && server.get("/api/v2/berry/7/").json()["name"] == "berry-seven"
    };
    assert!(eventually(std::time::Duration::from_secs(90), renamed), "{}", server.log());
    assert!(genapi::archive::is_archive(&archive), "still an archive");
    assert!(!archive.join("manifest.json").exists(), "no tree written over the archive");
}
