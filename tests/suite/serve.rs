//! `gen serve`: the real binary serving a tree built from synthetic data, spoken to in raw
//! HTTP/1.1. Expected pages are derived from the data and the paging rules (see
//! `serve_support::expected_page`), not from the server's own output.

use crate::common;
use crate::serve_support;

use serve_support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn site() -> Site {
    Site::new("serve", &[20, 50], &[])
}

/// Issue 48 item 3: a client that walks the root as pokeapi's clients do finds a list of urls
/// in every entry (the bulk-data index was one, whose entries have no `url`); it finds the
/// bulk-data index from the root's `Link` header (on 200, 304 and HEAD; on no other document),
/// from meta, and from the HTML view's root pages.
#[test]
fn a_client_walking_the_root_finds_lists_only_and_the_bulk_data_by_its_link() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    assert_eq!(crate::parity::walk_root_like_a_client(&server, BASE, true), 3);
    let link = crate::parity::ROOT_LINK;
    let root = server.get("/api/v2").expect(200);
    assert_eq!(root.header("link"), Some(link));
    let etag = root.header("etag").unwrap();
    let again = server.request("GET", "/api/v2/", &[("If-None-Match", etag)]).expect(304);
    assert_eq!(again.header("link"), Some(link));
    assert_eq!(server.request("HEAD", "/API/V2/", &[]).expect(200).header("link"), Some(link));
    for other in ["/api/v2/berry/", "/api/v2/meta/", "/api/v2/bulk-data/", "/api/v2/berry/1/"] {
        assert_eq!(server.get(other).expect(200).header("link"), None, "{other}");
    }
    assert_eq!(server.request("POST", "/api/v2/", &[]).expect(405).header("link"), None);
    let meta = server.get("/api/v2/meta/").expect(200).json();
    assert_eq!(meta["bulk_data"], format!("{BASE}/api/v2/bulk-data/"));
    for page in ["/", "/api/v2/"] {
        let html = server.get_with(page, &["Accept: text/html"]).expect(200).text();
        assert!(html.contains(r#"<a id="bulk-data" href="/api/v2/bulk-data/">"#), "{page}: {html}");
    }
}

#[test]
fn prints_its_address_first_and_serves_the_root_with_and_without_slash() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    assert!(server.addr.starts_with("127.0.0.1:"), "{}", server.addr);
    let mut expected = serde_json::Map::new();
    // the resources only: meta names the bulk-data index (tests/suite/bulk.rs)
    for segment in ["berry", "item", "note"] {
        expected.insert(segment.into(), format!("{BASE}/api/v2/{segment}/").into());
    }
    for target in ["/api/v2/", "/api/v2", "/API/V2/"] {
        let response = server.get(target).expect(200);
        assert_eq!(response.json(), serde_json::Value::Object(expected.clone()), "{target}");
        assert_eq!(response.body, site.file("api/v2/index.json"), "{target}");
    }
    server.get("/api/v2/meta/").expect(200);
    server.get("/api/v2/meta").expect(200);
}

#[test]
fn lists_follow_the_paging_rules() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    // the worked example: count 5, limit 2, offset 2
    let page = server.get("/api/v2/berry/?limit=2&offset=2").expect(200).json();
    assert_eq!(page["count"], 5);
    assert_eq!(page["next"], format!("{BASE}/api/v2/berry/?offset=4&limit=1"));
    assert_eq!(page["previous"], format!("{BASE}/api/v2/berry/?offset=0&limit=2"));
    assert_eq!(page["results"][0]["name"], "pecha");
    assert_eq!(page["results"][1]["name"], "rawst");

    // (query, offset, limit the rules give it)
    let cases: Vec<(String, u64, u64)> = vec![
        (String::new(), 0, 20),
        ("?".into(), 0, 20),
        ("?limit=".into(), 0, 20),
        ("?limit=0".into(), 0, 20),
        ("?offset=".into(), 0, 20),
        ("?limit=&offset=".into(), 0, 20),
        ("?offset=40".into(), 40, 20),
        ("?offset=40&limit=0".into(), 40, 20),
        ("?limit=50".into(), 0, 50),
        ("?offset=2&limit=2".into(), 2, 2),
        ("?limit=2&offset=2".into(), 2, 2),
        ("?format=json&offset=3&foo=bar&limit=7".into(), 3, 7),
        ("?limit=3&limit=9".into(), 0, 9),
        ("?offset=125".into(), 125, 20),
        ("?offset=129&limit=1".into(), 129, 1),
        ("?offset=130".into(), 130, 20),
        ("?offset=500&limit=10".into(), 500, 10),
        ("?offset=18446744073709551615&limit=18446744073709551615".into(), u64::MAX, u64::MAX),
        ("?limit=100000".into(), 0, 100_000),
        ("?limit=130".into(), 0, 130),
        ("?limit=129".into(), 0, 129),
        ("?offset=1&limit=100000".into(), 1, 100_000),
        ("?offset=007&limit=013".into(), 7, 13),
    ];
    for segment in ["item", "berry", "note"] {
        let list = entries(segment, 0);
        for (query, offset, limit) in &cases {
            for slash in ["/", ""] {
                let target = format!("/api/v2/{segment}{slash}{query}");
                let response = server.get(&target).expect(200);
                let expected = expected_page(segment, &list, *offset, *limit);
                // compact JSON, keys in the API's order (which is alphabetical), no trailing newline
                assert_eq!(response.text(), serde_json::to_string(&expected).unwrap(), "{target}");
            }
        }
    }
    // following next from the start walks the whole list once
    let mut url = Some("/api/v2/item/?limit=50".to_string());
    let mut names = Vec::new();
    while let Some(target) = url {
        let page = server.get(&target).expect(200).json();
        names.extend(page["results"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()));
        url = page["next"].as_str().map(|u| u.strip_prefix(BASE).unwrap().to_string());
    }
    assert_eq!(names, (1..=ITEMS).map(item_name).collect::<Vec<_>>());
}

#[test]
fn records_by_id_or_name_any_case_with_or_without_slash() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for target in [
        "/api/v2/item/5/",
        "/api/v2/item/5",
        "/api/v2/item/item-5/",
        "/api/v2/item/ITEM-5",
        "/api/v2/Item/Item-5/",
        "/api/v2/item/5/?limit=abc",
    ] {
        let response = server.get(target).expect(200);
        let record = response.json();
        assert_eq!(record["id"], 5, "{target}");
        assert_eq!(record["name"], "item-5");
        assert_eq!(record["cost"], 50);
        assert_eq!(response.body, site.file("api/v2/item/5/index.json"), "{target}");
    }
    let berry = server.get("/api/v2/berry/CHERI").expect(200).json();
    assert_eq!(berry["item"]["url"], format!("{BASE}/api/v2/item/1/"));
    for id in NOTE_ORDER {
        for target in [format!("/api/v2/note/{id}/"), format!("/api/v2/note/{id}")] {
            let note = server.get(&target).expect(200).json();
            assert_eq!(note["id"], id);
            assert_eq!(note["text"], format!("note {id}"));
        }
    }
    // sub-document, by id and by name
    for target in ["/api/v2/item/7/flavor/", "/api/v2/item/7/flavor", "/api/v2/item/item-7/FLAVOR/"] {
        let flavor = server.get(target).expect(200).json();
        assert_eq!(flavor["text"], "sweet", "{target}");
        assert_eq!(flavor["item"]["url"], format!("{BASE}/api/v2/item/7/"));
    }
}

#[test]
fn page_files_are_served_too() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    // 130 items in pages of 50: the last one is 100..130, its limit shrunk to 30
    for rel in ["item/_pages/20/40", "item/_pages/50/50", "item/_pages/30/100", "item/_pages/all", "note/_pages/all"] {
        for slash in ["/", ""] {
            let response = server.get(&format!("/api/v2/{rel}{slash}")).expect(200);
            assert_eq!(response.body, site.file(&format!("api/v2/{rel}/index.json")), "{rel}");
        }
    }
    let all = server.get("/api/v2/item/_pages/all/").json();
    assert_eq!(all, expected_page("item", &entries("item", 0), 0, ITEMS as u64));
}

#[test]
fn every_document_the_manifest_lists_is_served_as_written() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    let manifest: serde_json::Value = serde_json::from_slice(&site.file("manifest.json")).unwrap();
    let mut conn = server.connect();
    let files = manifest["files"].as_object().unwrap();
    for path in files.keys() {
        let target = match path.strip_suffix("index.json") {
            Some(dir) => format!("/{dir}"),
            None => format!("/{path}"),
        };
        let response = conn.get(&target);
        assert_eq!(response.status, 200, "{target}");
        assert_eq!(response.body, site.file(path), "{target}");
    }
    assert!(files.len() > 300, "{}", files.len());
}

#[test]
fn malformed_paging_parameters_get_400_naming_them() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    let values = ["abc", "-1", "1e3", "10abc", "+5", "%2B5", "18446744073709551616", "1.5", "%20", "0x10", "-0"];
    for name in ["limit", "offset"] {
        for value in values {
            let target = format!("/api/v2/item/?{name}={value}");
            let response = server.get(&target).expect(400);
            assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"));
            assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"));
            let body = response.json();
            let sent = value.replace("%2B", "+").replace("%20", " ");
            assert_eq!(body["parameter"], name, "{target}");
            assert_eq!(body["value"], sent.as_str(), "{target}");
            let detail = body["detail"].as_str().unwrap();
            assert!(detail.contains(name) && detail.contains("digits"), "{detail}");
            assert!(body["expected"].as_str().unwrap().contains("digits"), "{body}");
        }
    }
    let body = server.get("/api/v2/item/?limit=-1").json();
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("public API answers limit=-1 with every entry but the last"), "{detail}");
    assert!(detail.contains("limit=100000"), "{detail}");
    // the other parameter is named when only it is wrong
    assert_eq!(server.get("/api/v2/item/?limit=5&offset=x").json()["parameter"], "offset");
}

#[test]
fn unknown_paths_get_404_json() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for target in [
        "/",
        "/api/",
        "/api/v1/item/",
        "/api/v2/nothing/",
        "/api/v2/nothing/?limit=abc",
        "/api/v2/item/9999/",
        "/api/v2/item/0/",
        "/api/v2/item/nope/",
        "/api/v2/item/5/nope/",
        "/api/v2/note/3/",
        "/api/v2/item/_pages/20/41/",
        "/api/v2/item/5/index.json",
        "/favicon.ico",
    ] {
        let response = server.get(target).expect(404);
        assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"), "{target}");
        assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"));
        assert!(response.json()["detail"].as_str().unwrap().starts_with("Not found"), "{target}");
    }
    let detail = server.get("/api/v2/nothing/").json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("berry, item, note"), "{detail}");
}

#[test]
fn methods_head_and_options() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for method in ["POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT", "FOO"] {
        let response = server.send(&format!("{method} /api/v2/item/ HTTP/1.1\r\nHost: x\r\n\r\n"), false).expect(405);
        assert_eq!(response.header("Allow"), Some("GET, HEAD, OPTIONS"), "{method}");
        assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"));
        assert!(response.json()["detail"].as_str().unwrap().contains(method));
    }
    // OPTIONS: 204, CORS for GET and HEAD, the requested headers echoed
    let request = "OPTIONS /api/v2/item/ HTTP/1.1\r\nHost: x\r\nOrigin: https://example.org\r\n\
                   Access-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: X-Custom, Content-Type\r\n\r\n";
    let response = server.send(request, false).expect(204);
    assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"));
    let methods = response.header("Access-Control-Allow-Methods").unwrap();
    assert!(methods.contains("GET") && methods.contains("HEAD"), "{methods}");
    assert_eq!(response.header("Access-Control-Allow-Headers"), Some("X-Custom, Content-Type"));
    assert!(response.header("Content-Length").is_none());
    assert!(response.body.is_empty());

    // HEAD: the GET's headers, no body; the connection goes on with the next response
    let mut conn = server.connect();
    for target in ["/api/v2/item/2/", "/api/v2/item/?offset=3&limit=9", "/api/v2/nothing/"] {
        let get = conn.get(target);
        conn.send(format!("HEAD {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        let head = conn.read_response(true).unwrap();
        assert_eq!(head.status, get.status);
        assert_eq!(head.header("Content-Length").unwrap(), get.body.len().to_string(), "{target}");
        assert_eq!(head.header("ETag"), get.header("ETag"));
        assert_eq!(head.header("Content-Type"), get.header("Content-Type"));
        assert_eq!(conn.get("/api/v2/berry/1/").json()["name"], "cheri", "the HEAD sent no body");
    }
}

#[test]
fn nothing_outside_the_tree_is_reachable() {
    let site = site();
    let secret = site.tmp.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("index.json"), "SECRET").unwrap();
    std::fs::write(site.tmp.join("secret.json"), "SECRET").unwrap();
    // a link inside the tree pointing out of it, not listed in the manifest
    std::os::unix::fs::symlink(&secret, site.out().join("api/v2/leak")).unwrap();
    std::os::unix::fs::symlink(&secret, site.out().join("api/v2/item/leak")).unwrap();
    let server = Server::start(&site.out(), &[]);
    for target in [
        "/api/v2/leak/",
        "/api/v2/item/leak/",
        "/api/v2/../secret.json",
        "/api/v2/../../secret/",
        "/api/v2/item/../../../secret/",
        "/api/v2/%2e%2e/%2e%2e/secret/",
        "/api/v2/%2E%2E/%2E%2E/secret.json",
        "/api/v2/item%2f..%2f..%2f..%2fsecret",
        "/api/v2/item/..%2f..%2f..%2fsecret/",
        "/api/v2/..\\..\\secret.json",
        "/api/v2/item/%5c..%5c..%5csecret",
        "/api/v2/item/1%00/",
        "//secret.json",
        "/manifest.json",
        "/api/v2/index.json",
        "/etc/passwd",
        "/api/v2/item/%252e%252e/",
        "http://x/../secret.json",
    ] {
        let response = server.get(target);
        assert!(response.status == 404 || response.status == 400, "{target}: {}", response.status);
        assert!(!response.text().contains("SECRET"), "{target}");
    }
    // a NUL in the target: refused before it reaches the router
    let response = server.send("GET /api/v2/item/\0/ HTTP/1.1\r\nHost: x\r\n\r\n", false);
    assert_eq!(response.status, 400);
    assert!(!response.text().contains("SECRET"));
}

/// A listed file replaced by a link is never read: its document is answered 503 (the tree is
/// served; until issue 47 the server refused to start), the others 200.
#[test]
fn a_listed_file_replaced_by_a_link_is_refused() {
    let site = site();
    Damage::Linked.apply(&site.out(), "api/v2/berry/1/index.json", &site.tmp.join("elsewhere"));
    let server = Server::start(&site.out(), &[]);
    assert_damaged(&server, "/api/v2/berry/1/", "api/v2/berry/1/index.json");
    server.get("/api/v2/berry/2/").expect(200);
    assert!(
        eventually(Duration::from_secs(30), || server.stderr().contains("do not match its manifest")),
        "{}",
        server.stderr()
    );
    // reported once the check at start is done, and still serving
    assert!(server.stderr().contains("not a regular file"), "{}", server.stderr());
    server.get("/api/v2/berry/2/").expect(200);
}

#[test]
fn etags_and_conditional_requests() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for target in ["/api/v2/item/5/", "/api/v2/item/?offset=3&limit=9", "/api/v2/item/"] {
        let response = server.get(target).expect(200);
        let etag = response.header("ETag").unwrap().to_string();
        assert_eq!(etag, format!("\"{}\"", blake3::hash(&response.body).to_hex()), "{target}");
        for if_none_match in [etag.clone(), format!("W/{etag}"), format!("\"nope\", {etag}"), "*".to_string()] {
            let cached = server.get_with(target, &[&format!("If-None-Match: {if_none_match}")]).expect(304);
            assert!(cached.body.is_empty());
            assert_eq!(cached.header("ETag"), Some(etag.as_str()));
            assert_eq!(cached.header("Access-Control-Allow-Origin"), Some("*"));
            assert_eq!(cached.header("Cache-Control"), Some("public, max-age=86400"));
        }
        server.get_with(target, &["If-None-Match: \"other\""]).expect(200);
    }
    // the ETag names the body: two paths with the same bytes share it, other bytes differ
    let by_id = server.get("/api/v2/item/5/");
    assert_eq!(by_id.header("ETag"), server.get("/api/v2/item/item-5/").header("ETag"));
    assert_ne!(by_id.header("ETag"), server.get("/api/v2/item/6/").header("ETag"));
}

#[test]
fn gzip_when_the_client_accepts_it() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for target in ["/api/v2/item/2/", "/api/v2/item/?limit=100", "/api/v2/item/?offset=1&limit=77"] {
        let plain = server.get(target).expect(200);
        assert_eq!(plain.header("Vary"), Some("Accept-Encoding, Accept"));
        assert!(plain.header("Content-Encoding").is_none());
        for accept in ["gzip", "gzip, deflate, br", "br;q=1, gzip;q=0.5", "*"] {
            let zipped = server.get_with(target, &[&format!("Accept-Encoding: {accept}")]).expect(200);
            assert_eq!(zipped.header("Content-Encoding"), Some("gzip"), "{target} {accept}");
            assert_eq!(zipped.header("Vary"), Some("Accept-Encoding, Accept"));
            assert_eq!(zipped.header("Content-Length").unwrap(), zipped.body.len().to_string());
            assert!(zipped.body.len() < plain.body.len());
            let mut unzipped = Vec::new();
            flate2::read::GzDecoder::new(&zipped.body[..]).read_to_end(&mut unzipped).unwrap();
            assert_eq!(unzipped, plain.body, "{target}");
            assert_ne!(zipped.header("ETag"), plain.header("ETag"), "each encoding has its own strong ETag");
            // its ETag revalidates too
            let etag = zipped.header("ETag").unwrap();
            server.get_with(target, &["Accept-Encoding: gzip", &format!("If-None-Match: {etag}")]).expect(304);
        }
        for accept in ["identity", "gzip;q=0", "deflate", "*;q=0"] {
            let response = server.get_with(target, &[&format!("Accept-Encoding: {accept}")]).expect(200);
            assert!(response.header("Content-Encoding").is_none(), "{accept}");
            assert_eq!(response.body, plain.body);
        }
        // HEAD announces the length of the gzip body
        let head = server.send(&format!("HEAD {target} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"), true);
        let zipped = server.get_with(target, &["Accept-Encoding: gzip"]);
        assert_eq!(head.header("Content-Length").unwrap(), zipped.body.len().to_string());
    }
}

#[test]
fn headers_on_every_response_and_max_age() {
    let site = site();
    let server = Server::start(&site.out(), &["--max-age", "60"]);
    let requests = [
        ("GET /api/v2/item/1/ HTTP/1.1\r\n", 200),
        ("GET /api/v2/item/?limit=x HTTP/1.1\r\n", 400),
        ("GET /api/v2/nothing/ HTTP/1.1\r\n", 404),
        ("DELETE /api/v2/item/1/ HTTP/1.1\r\n", 405),
        ("OPTIONS /api/v2/item/1/ HTTP/1.1\r\n", 204),
    ];
    for (line, status) in requests {
        let response = server.send(&format!("{line}Host: x\r\n\r\n"), false).expect(status);
        assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"), "{line}");
        assert!(response.header("Date").is_some_and(|d| d.ends_with(" GMT")), "{line}");
        if status != 204 {
            assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"), "{line}");
        }
    }
    let response = server.get("/api/v2/item/1/");
    assert_eq!(response.header("Cache-Control"), Some("public, max-age=60"));
    assert!(server.get("/api/v2/nothing/").header("Cache-Control").is_some_and(|c| !c.contains("max-age")));
}

/// Builds the same data with many page sizes precomputed, and serves a build with only the
/// default one: every page the server computes must be byte for byte the precomputed file.
fn computed_pages_match_precomputed(build_args: &[&str]) {
    let sizes = [1, 2, 3, 7, 11, 20, 33, 50, 64, 100, 129, 130, 131];
    let precomputed = Site::new("serve-pages-all", &sizes, build_args);
    let served = Site::new("serve-pages-few", &[20], build_args);
    let server = Server::start(&served.out(), &[]);
    let mut compared = 0;
    for segment in ["item", "berry", "note"] {
        let pages_dir = precomputed.out().join(format!("api/v2/{segment}/_pages"));
        for limit_dir in std::fs::read_dir(&pages_dir).unwrap() {
            let limit_dir = limit_dir.unwrap();
            let limit = limit_dir.file_name().to_string_lossy().to_string();
            if limit == "all" {
                continue;
            }
            let mut conn = server.connect();
            for offset_dir in std::fs::read_dir(limit_dir.path()).unwrap() {
                let offset = offset_dir.unwrap().file_name().to_string_lossy().to_string();
                let file = precomputed.file(&format!("api/v2/{segment}/_pages/{limit}/{offset}/index.json"));
                let response = conn.get(&format!("/api/v2/{segment}/?offset={offset}&limit={limit}"));
                assert_eq!(
                    response.text(),
                    String::from_utf8(file).unwrap(),
                    "{segment} {offset} {limit} {build_args:?}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 300, "{compared}");
}

#[test]
fn computed_pages_are_byte_identical_to_precomputed_ones() {
    computed_pages_match_precomputed(&[]);
}

#[test]
fn computed_pages_are_byte_identical_pretty_and_with_path_links() {
    computed_pages_match_precomputed(&["--pretty"]);
    computed_pages_match_precomputed(&["--links", "path"]);
}

#[test]
fn a_rebuild_is_picked_up_without_restart_and_never_half_served() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    server.get("/api/v2/item/131/").expect(404);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (addr, stop) = (server.addr.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut conn = serve_support::Conn::new(TcpStream::connect(&addr).unwrap());
            let mut seen = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let response = conn.get("/api/v2/item/?limit=1000");
                // a request that reads a file the commit already replaced while the manifest is
                // still the old one is told to retry (503, never cached): never a mix of both
                if response.status == 503 {
                    assert!(String::from_utf8_lossy(&response.body).contains("the tree on disk changed"));
                    assert_eq!(response.header("Cache-Control"), Some("no-store"));
                    continue;
                }
                let page = response.expect(200).json();
                let count = page["count"].as_u64().unwrap();
                assert_eq!(page["results"].as_array().unwrap().len() as u64, count);
                assert!(count == 130 || count == 131, "{count}");
                seen.insert(count);
            }
            seen
        })
    };
    write_data(&site.data(), &[20, 50], 1);
    site.build(&[]);
    assert!(eventually(Duration::from_secs(5), || server.get("/api/v2/item/131/").status == 200));
    assert_eq!(server.get("/api/v2/item/item-131").json()["cost"], 1310);
    assert_eq!(server.get("/api/v2/item/").json()["count"], 131);
    assert_eq!(server.get("/api/v2/item/?offset=130").json()["results"][0]["name"], "item-131");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert!(seen.contains(&131), "{seen:?}");
}

#[test]
fn a_tree_that_does_not_match_its_manifest_is_not_served_until_it_does() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    // a new build elsewhere; its manifest arrives first, its files later
    let next = Site { tmp: common::TempDir::new("serve-next") };
    write_data(&next.data(), &[20, 50], 1);
    next.build(&[]);
    std::fs::copy(next.out().join("manifest.json"), site.out().join("manifest.json.tmp")).unwrap();
    std::fs::rename(site.out().join("manifest.json.tmp"), site.out().join("manifest.json")).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(server.get("/api/v2/item/").json()["count"], 130, "the old tree is still served");
    server.get("/api/v2/item/131/").expect(404);
    assert!(server.stderr().contains("does not match its hash") || server.stderr().contains("is missing"));
    // the files arrive
    for (rel, bytes) in common::read_tree(&next.out()) {
        let path = site.out().join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    assert!(eventually(Duration::from_secs(5), || server.get("/api/v2/item/131/").status == 200));
    assert_eq!(server.get("/api/v2/item/").json()["count"], 131);
}

#[test]
fn startup_errors_say_what_to_do() {
    let tmp = common::TempDir::new("serve-errors");
    let missing = tmp.join("missing");
    let run = common::run(&["serve", "--dir", missing.to_str().unwrap(), "--addr", "127.0.0.1:0"]).fails_with(2);
    assert!(run.stderr().contains("no tree in") && run.stderr().contains("run `gen build` first"), "{}", run.stderr());
    let empty = tmp.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let run = common::run(&["serve", "--dir", empty.to_str().unwrap(), "--addr", "127.0.0.1:0"]).fails_with(2);
    assert!(run.stderr().contains("no tree in") && run.stderr().contains("run `gen build` first"), "{}", run.stderr());

    let site = site();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let run = common::run(&["serve", "--dir", site.out().to_str().unwrap(), "--addr", &addr]).fails_with(2);
    assert!(run.stderr().contains("in use") && run.stderr().contains("--addr"), "{}", run.stderr());
    let run = common::run(&["serve", "--dir", site.out().to_str().unwrap(), "--addr", "nonsense"]).fails_with(2);
    assert!(run.stderr().contains("HOST:PORT"), "{}", run.stderr());
}

#[test]
fn one_log_line_per_request_unless_quiet() {
    let site = site();
    let server = Server::start_with(&site.out(), &[], None);
    server.get("/api/v2/item/?limit=3").expect(200);
    server.get("/api/v2/nothing/").expect(404);
    let logged = |needle: &str| {
        eventually(Duration::from_secs(2), || {
            server.stderr().lines().any(|l| {
                let parts: Vec<&str> = l.split(' ').collect();
                l.starts_with(needle)
                    && parts.len() == 5
                    && parts[3].trim_end_matches('B').parse::<u64>().is_ok()
                    && parts[4].trim_end_matches("µs").parse::<u64>().is_ok()
            })
        })
    };
    assert!(logged("GET /api/v2/item/?limit=3 200 "), "{}", server.stderr());
    assert!(logged("GET /api/v2/nothing/ 404 "), "{}", server.stderr());

    let quiet = Server::start(&site.out(), &[]);
    quiet.get("/api/v2/item/").expect(200);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!quiet.stderr().contains("GET"), "{}", quiet.stderr());
}

/// How long a test waits for a close that comes at once (after an answer that says
/// `Connection: close`) on a server of the default idle timeout, 60 s: half of it tells a close
/// at once from one at the idle timeout whatever the load (2 s was the bound before).
const CLOSED_AT_ONCE: Duration = Duration::from_secs(30);

#[test]
fn oversized_targets_and_headers_are_refused() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    let long = format!("/api/v2/item/?x={}", "a".repeat(9000));
    let response = server.get(&long).expect(414);
    assert!(response.json()["detail"].as_str().unwrap().contains("request line is too long"));
    assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"));
    // a target just over 8 KiB that fits the request line limit is refused by the router
    let response = server.get(&format!("/api/v2/item/?x={}", "a".repeat(8190))).expect(414);
    assert!(response.json()["detail"].as_str().unwrap().contains("8192"));
    let many: Vec<String> = (0..120).map(|i| format!("X-H{i}: v")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    server.get_with("/api/v2/", &many).expect(431);
    let big = format!("X-Big: {}", "b".repeat(20_000));
    server.get_with("/api/v2/", &[&big]).expect(431);
    server.get("/api/v2/").expect(200);
}

#[test]
fn endless_heads_are_refused_before_they_end() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for (opening, status) in [("GET /api/v2/", 414), ("GET /api/v2/ HTTP/1.1\r\nX-Endless: ", 431)] {
        let mut conn = server.connect();
        conn.send(opening.as_bytes());
        // a megabyte of a line that never ends: the answer comes long before it would
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = 0;
        for _ in 0..16 {
            if conn.stream().try_clone().unwrap().write_all(&chunk).is_err() {
                break; // the server answered and closed while we were still sending
            }
            sent += chunk.len();
        }
        let response = conn.read_response(false).expect("an answer before the head ends");
        assert_eq!(response.status, status, "{opening:?} after {sent} bytes");
        assert!(conn.closed_within(CLOSED_AT_ONCE));
    }
    server.get("/api/v2/").expect(200);
}

#[test]
fn keep_alive_pipelining_and_http_1_0() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    // pipelined: three requests in one write, three responses in order
    let mut conn = server.connect();
    conn.send(b"GET /api/v2/berry/1/ HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v2/berry/2/ HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v2/berry/3/ HTTP/1.1\r\nHost: x\r\n\r\n");
    for name in ["cheri", "chesto", "pecha"] {
        assert_eq!(conn.read_response(false).unwrap().json()["name"], name);
    }
    // Connection: close is honoured
    let mut conn = server.connect();
    conn.send(b"GET /api/v2/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(conn.read_response(false).unwrap().header("Connection"), Some("close"));
    assert!(conn.closed_within(CLOSED_AT_ONCE));
    // HTTP/1.0: closed unless keep-alive is asked for
    let mut conn = server.connect();
    conn.send(b"GET /api/v2/ HTTP/1.0\r\n\r\n");
    conn.read_response(false).unwrap().expect(200);
    assert!(conn.closed_within(CLOSED_AT_ONCE));
    let mut conn = server.connect();
    conn.send(b"GET /api/v2/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(conn.read_response(false).unwrap().header("Connection"), Some("keep-alive"));
    conn.send(b"GET /api/v2/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    conn.read_response(false).unwrap().expect(200);
}

// ---- tiny_http's pitfalls -------------------------------------------------------------------

#[test]
fn keep_alive_requests_do_not_stall() {
    // tiny_http writes head and body apart: without TCP_NODELAY, each keep-alive answer larger
    // than its 1 KiB buffer would wait ~40 ms for the client's delayed ACK. What is checked is
    // the cause, with no clock: the listening socket has TCP_NODELAY, which the sockets it
    // accepts inherit (Linux), as strace sees the server set it before its first accept.
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for (target, min_size) in
        [("/api/v2/item/?limit=50", 2_000), ("/api/v2/item/2/", ITEM_2_TEXT), ("/api/v2/item/3/", ITEM_3_TEXT)]
    {
        let mut conn = server.connect();
        for _ in 0..100 {
            assert!(conn.get(target).expect(200).body.len() >= min_size, "{target}");
        }
    }
    let Some(strace) = common::tool("strace") else { return };
    let probe = std::process::Command::new(&strace).args(["-f", "-o", "/dev/null", "true"]).output();
    if !probe.is_ok_and(|probe| probe.status.success()) {
        eprintln!("skipped: strace cannot trace a process here (ptrace is not permitted)");
        return;
    }
    let trace = site.tmp.join("serve.strace");
    let traced = std::process::Command::new(strace)
        .arg("-f")
        .arg("-o")
        .arg(&trace)
        .args(["-e", "trace=setsockopt,accept4,accept", "-e", "inject=accept4,accept:signal=KILL"])
        .arg(env!("CARGO_BIN_EXE_gen"))
        .args(["serve", "--quiet", "--dir", site.out().to_str().unwrap(), "--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!traced.status.success(), "the server was not stopped at its first accept");
    let trace = std::fs::read_to_string(trace).unwrap();
    let (before, _) = trace.split_once("accept").expect("the server accepts connections");
    assert!(
        before.lines().any(|line| line.contains("SOL_TCP, TCP_NODELAY, [1], 4) = 0")),
        "no TCP_NODELAY set before the first accept:\n{trace}"
    );
}

#[test]
fn large_responses_have_a_content_length_not_chunks() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for target in
        ["/api/v2/item/2/", "/api/v2/item/3/", "/api/v2/item/?limit=100000", "/api/v2/item/?offset=1&limit=500"]
    {
        let response = server.get(target).expect(200);
        assert!(response.header("Transfer-Encoding").is_none(), "{target}");
        assert_eq!(response.header("Content-Length").unwrap(), response.body.len().to_string());
    }
    assert!(server.get("/api/v2/item/2/").body.len() > 32 * 1024);
    assert!(server.get("/api/v2/item/3/").body.len() > 300 * 1024);
}

#[test]
fn clients_that_reset_or_vanish_do_no_harm() {
    let site = site();
    // the harm looked for: a connection gone unnoticed holds what it took until the idle timeout
    let server = Server::start(&site.out(), &["--idle-timeout", "60"]);
    for i in 0..60 {
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        match i % 4 {
            // connect and vanish
            0 => {}
            // half a request, then gone
            1 => stream.write_all(b"GET /api/v2/ite").unwrap(),
            // a request, then close before reading: unread data makes the kernel send a reset
            2 => {
                stream.write_all(b"GET /api/v2/item/3/ HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            // a request, then reset while it is answered
            _ => {
                stream.write_all(b"GET /api/v2/item/?limit=100000 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut some = [0u8; 10];
                let _ = stream.read(&mut some);
            }
        }
        drop(stream);
    }
    let started = Instant::now();
    for _ in 0..20 {
        server.get("/api/v2/item/1/").expect(200);
    }
    // answered before any of them could have been let go by the idle timeout (60 s): a bound
    // by what is checked, not by the machine's speed (2 s was the bound before)
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
}

#[test]
fn hundreds_of_idle_connections_do_not_delay_others() {
    let site = site();
    // the delay looked for: a request waiting until idle connections are let go, at 60 s
    let server = Server::start(&site.out(), &["--idle-timeout", "60"]);
    let mut idle = Vec::new();
    for i in 0..400 {
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        if i % 2 == 1 {
            // a request that never ends
            stream.write_all(b"GET /api/v2/item/ HTTP/1.1\r\nHost: x\r\n").unwrap();
        }
        idle.push(stream);
    }
    // each answered well before the idle timeout lets one of them go (the slowest under 30 s),
    // and the half that tells a server that serves them one after another from one that does
    // not (the median under 1 s: a loaded machine slows some answers, not half of them)
    let mut times = Vec::new();
    for i in 0..100 {
        let started = Instant::now();
        server.get(&format!("/api/v2/item/{}/", i % 100 + 1)).expect(200);
        times.push(started.elapsed());
    }
    times.sort();
    let (median, slowest) = (times[times.len() / 2], times[times.len() - 1]);
    assert!(slowest < Duration::from_secs(30), "slowest answer {slowest:?} beside 400 idle connections");
    assert!(median < Duration::from_secs(1), "median answer {median:?} beside 400 idle connections");
    // and the idle ones still work
    let mut conn = serve_support::Conn::new(idle.pop().unwrap());
    conn.send(b"\r\n");
    conn.read_response(false).unwrap().expect(200);
}

#[test]
fn a_burst_of_256_simultaneous_connections_is_answered() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(256));
    let threads: Vec<_> = (0..256)
        .map(|i| {
            let (addr, barrier) = (server.addr.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut conn = serve_support::Conn::new(TcpStream::connect(&addr).unwrap());
                let response = conn.get(&format!("/api/v2/item/?offset={i}&limit=3"));
                response.status
            })
        })
        .collect();
    let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
}

#[test]
fn a_burst_of_keep_alive_connections_is_answered_while_all_stay_open() {
    // tiny_http 0.12's pool queued a burst of connections behind a few idle threads, each of
    // which then took a connection that never closes: the queued ones were never answered
    // (vendor/tiny_http/PATCHES.md). Every connection here stays open until all have answers.
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for round in 0..3 {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(64));
        let threads: Vec<_> = (0..64)
            .map(|i| {
                let (addr, barrier) = (server.addr.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut conn = serve_support::Conn::new(TcpStream::connect(&addr).unwrap());
                    conn.stream().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    barrier.wait();
                    let status = conn.read_response_to(&format!("/api/v2/item/{}/", i % 100 + 1)).map(|r| r.status);
                    barrier.wait(); // keep every connection open until all are answered
                    status
                })
            })
            .collect();
        let statuses: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let unanswered = statuses.iter().filter(|s| !matches!(s, Ok(200))).count();
        assert_eq!(unanswered, 0, "round {round}: {unanswered} of 64 connections unanswered: {statuses:?}");
    }
}

#[test]
fn idle_connections_are_closed_and_accepting_goes_on() {
    let site = site();
    let server = Server::start(&site.out(), &["--idle-timeout", "1"]);
    let mut conn = server.connect();
    conn.get("/api/v2/").expect(200);
    // closed by the 1 s timeout asked for, not the default 60 s: a bound by what is checked,
    // not by the machine's speed (5 s, and the close within 3 s, were the bounds before)
    assert!(conn.closed_within(Duration::from_secs(30)), "an idle connection stays open");
    // no new connection for longer than the idle timeout: tiny_http's accept thread ends
    // (EAGAIN); the server must accept again
    std::thread::sleep(Duration::from_millis(2500));
    for _ in 0..3 {
        server.get("/api/v2/").expect(200);
    }
    // a connection kept busy past the timeout stays open: a request every 50 ms for 2.5 idle
    // timeouts (gaps of 400 ms once failed on a loaded machine, a stall of 600 ms being enough)
    let mut conn = server.connect();
    let busy = Instant::now();
    while busy.elapsed() < Duration::from_millis(2500) {
        conn.get("/api/v2/berry/").expect(200);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!server.stderr().contains("stopped accepting"), "{}", server.stderr());
}

#[test]
fn running_out_of_file_descriptors_is_survived() {
    let site = site();
    let server = Server::start_with(&site.out(), &["--quiet"], Some(64));
    server.get("/api/v2/").expect(200);
    // each connection costs tiny_http two descriptors: these exhaust them
    let mut hogs = Vec::new();
    for _ in 0..80 {
        hogs.push(TcpStream::connect(&server.addr).unwrap());
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(hogs);
    assert!(
        eventually(Duration::from_secs(10), || {
            let Ok(stream) = TcpStream::connect(&server.addr) else { return false };
            let mut conn = serve_support::Conn::new(stream);
            conn.stream().set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            conn.send(b"GET /api/v2/ HTTP/1.1\r\nHost: x\r\n\r\n");
            conn.read_response(false).is_ok_and(|r| r.status == 200)
        }),
        "no answer after descriptors were freed:\n{}",
        server.stderr()
    );
}

#[test]
fn bodies_with_absurd_lengths_do_not_abort_the_server() {
    // tiny_http allocates a dropped request's unread body whole: 10 TB aborts the process.
    let site = site();
    let server = Server::start(&site.out(), &[]);
    for length in ["10000000000000", "18446744073709551615", "20000000"] {
        let mut conn = server.connect();
        conn.send(format!("POST /api/v2/ HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n").as_bytes());
        std::thread::sleep(Duration::from_millis(100));
        server.get("/api/v2/").expect(200);
    }
    // a body of modest size is read and the request answered
    let mut conn = server.connect();
    conn.send(
        format!("POST /api/v2/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{}", "x".repeat(5000)).as_bytes(),
    );
    conn.read_response(false).unwrap().expect(405);
    conn.get("/api/v2/berry/").expect(200);
    // chunked bodies too
    let mut conn = server.connect();
    conn.send(b"POST /api/v2/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    conn.read_response(false).unwrap().expect(405);
    server.get("/api/v2/").expect(200);
}

#[test]
fn ctrl_c_stops_the_server() {
    let site = site();
    let mut server = Server::start(&site.out(), &[]);
    server.get("/api/v2/").expect(200);
    let status = std::process::Command::new("kill").args(["-INT", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = server.wait_exit(Duration::from_secs(10)).expect("gen serve stops on SIGINT");
    assert!(!exit.success());
    assert!(TcpStream::connect(&server.addr).is_err(), "the port is released");
}

/// The base URL a tree built for production carries, in the link tests.
const PRODUCTION: &str = "https://api.example.org";

/// `body` with every url of the tree moved from `PRODUCTION` to `origin`: what the preview
/// answers (the synthetic data holds that text nowhere else).
fn moved(body: &[u8], origin: &str) -> Vec<u8> {
    String::from_utf8(body.to_vec()).unwrap().replace(PRODUCTION, origin).into_bytes()
}

#[test]
fn links_lead_to_the_address_served_on() {
    let site = Site::new("links", &[20, 50], &["--base-url", PRODUCTION, "--gzip"]);
    let server = Server::start_preview(&site.out(), &[]);
    let origin = format!("http://{}", server.addr);
    assert!(
        eventually(Duration::from_secs(10), || server
            .stderr()
            .contains(&format!("urls in the answers start with {origin} (rebased onto this address)"))),
        "serve says which base URL the answers carry:\n{}",
        server.stderr()
    );
    let index = server.get("/api/v2/").expect(200);
    for (segment, url) in index.json().as_object().unwrap() {
        assert_eq!(url.as_str().unwrap(), format!("{origin}/api/v2/{segment}/"));
    }
    // Stored documents, a precomputed page, a computed page and the OpenAPI servers entry.
    for (target, file) in [
        ("/api/v2/", Some("api/v2/index.json")),
        ("/api/v2/berry/1/", Some("api/v2/berry/1/index.json")),
        ("/api/v2/item/7/flavor/", Some("api/v2/item/7/flavor/index.json")),
        ("/api/v2/item/?offset=20&limit=20", Some("api/v2/item/_pages/20/20/index.json")),
        ("/api/v2/openapi.json", Some("api/v2/openapi.json")),
        ("/api/v2/item/?offset=3&limit=7", None),
    ] {
        let plain = server.get(target).expect(200);
        let text = plain.text();
        assert!(!text.contains(PRODUCTION), "{target} still links to {PRODUCTION}: {text:.300}");
        if let Some(file) = file {
            assert_eq!(plain.body, moved(&site.file(file), &origin), "{target}");
        }
        // Strong ETags name the bytes sent, in each encoding.
        let etag = format!("\"{}\"", blake3::hash(&plain.body).to_hex());
        assert_eq!(plain.header("ETag"), Some(etag.as_str()), "{target}");
        let zipped = server.get_with(target, &["Accept-Encoding: gzip"]).expect(200);
        if zipped.header("Content-Encoding") == Some("gzip") {
            let mut unzipped = Vec::new();
            flate2::read::GzDecoder::new(&zipped.body[..]).read_to_end(&mut unzipped).unwrap();
            assert_eq!(unzipped, plain.body, "{target}: the gzip copy is of the rebased bytes");
            assert_ne!(zipped.header("ETag"), plain.header("ETag"));
        }
        let revalidated = server.get_with(target, &[&format!("If-None-Match: {etag}")]);
        assert_eq!(revalidated.status, 304, "{target}");
    }
    let openapi = server.get("/api/v2/openapi.json").expect(200).json();
    assert_eq!(openapi["servers"][0]["url"], origin.as_str());
    let page = server.get("/api/v2/item/?offset=3&limit=7").expect(200).json();
    assert_eq!(page["next"], format!("{origin}/api/v2/item/?offset=10&limit=7"));
    assert_eq!(page["results"][0]["url"], format!("{origin}/api/v2/item/4/"));
    // Following a link reaches the record it names.
    let berry = server.get("/api/v2/berry/2/").expect(200).json();
    let item_url = berry["item"]["url"].as_str().unwrap();
    let path = item_url.strip_prefix(&origin).expect("a link to this server");
    assert_eq!(server.get(path).expect(200).json()["id"], 2);
}

#[test]
fn keep_urls_answers_the_trees_own_bytes() {
    let site = Site::new("keep-urls", &[20], &["--base-url", PRODUCTION]);
    let server = Server::start_preview(&site.out(), &["--keep-urls"]);
    assert!(
        eventually(Duration::from_secs(10), || server
            .stderr()
            .contains(&format!("urls in the answers start with {PRODUCTION} (the tree's own (--keep-urls))"))),
        "{}",
        server.stderr()
    );
    for (target, file) in [
        ("/api/v2/", "api/v2/index.json"),
        ("/api/v2/berry/1/", "api/v2/berry/1/index.json"),
        ("/api/v2/item/?offset=20&limit=20", "api/v2/item/_pages/20/20/index.json"),
        ("/api/v2/openapi.json", "api/v2/openapi.json"),
    ] {
        let response = server.get(target).expect(200);
        assert_eq!(response.body, site.file(file), "{target}");
        let etag = format!("\"{}\"", blake3::hash(&response.body).to_hex());
        assert_eq!(response.header("ETag"), Some(etag.as_str()));
    }
}

#[test]
fn serve_addr_and_config_listen_take_the_same_forms() {
    let site = site();
    for (form, reached) in
        [(":0", "0.0.0.0:"), ("0", "0.0.0.0:"), ("127.0.0.1:0", "127.0.0.1:"), ("localhost:0", "127.0.0.1:")]
    {
        let mut child = common::gen_bin()
            .args(["serve", "--quiet", "--dir", site.out().to_str().unwrap(), "--addr", form])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let addr = line.trim().trim_start_matches("http://").to_string();
        let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap_or(0);
        let answered = port > 0
            && TcpStream::connect(("127.0.0.1", port))
                .map(|stream| serve_support::Conn::new(stream).get("/api/v2/").status == 200)
                .unwrap_or(false);
        let _ = child.kill();
        let _ = child.wait();
        assert!(addr.starts_with(reached) && answered, "--addr {form}: {line:?}");
    }
    for form in [":8080", "8080", "127.0.0.1:8080", "[::1]:8080", "localhost:8080"] {
        common::run(&["config", "nginx", "--dir", site.out().to_str().unwrap(), "--listen", form]).ok();
    }
    for form in ["nonsense", "127.0.0.1", "127.0.0.1:99999", "::1:80", "a b:80"] {
        let run = common::run(&["serve", "--dir", site.out().to_str().unwrap(), "--addr", form]).fails_with(2);
        assert!(
            run.stderr().contains("is not HOST:PORT") && run.stderr().contains(":8080 for every interface"),
            "{form}: {}",
            run.stderr()
        );
        let run =
            common::run(&["config", "nginx", "--dir", site.out().to_str().unwrap(), "--listen", form]).fails_with(2);
        assert!(run.stderr().contains("is not HOST:PORT"), "{form}: {}", run.stderr());
    }
}

/// Every link and form target of an HTML page: the values of its `href` and `action` attributes.
fn link_targets(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "action=\""] {
        for (start, _) in page.match_indices(attr) {
            let rest = &page[start + attr.len()..];
            out.push(rest[..rest.find('"').unwrap_or(rest.len())].replace("&amp;", "&"));
        }
    }
    out
}

#[test]
fn the_html_view_links_work_whatever_the_host_and_json_ignores_host() {
    let site = Site::new("serve-host", &[20], &["--base-url", "https://api.example.org"]);
    let server = Server::start_preview(&site.out(), &["--quiet"]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let hosts = [format!("localhost:{port}"), server.addr.clone(), "gen.example:8080".to_string(), "[::1]".to_string()];
    let browser = "Accept: text/html,application/xhtml+xml,*/*;q=0.8";
    let targets = ["/", "/api/v2/", "/api/v2/item/?offset=20&limit=20", "/api/v2/item/1/", "/api/v2/item/99999/"];
    for target in targets {
        let mut pages = Vec::new();
        for host in &hosts {
            let page = server.send(&format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{browser}\r\n\r\n"), false);
            assert_eq!(page.header("Content-Type"), Some("text/html; charset=utf-8"), "{target}");
            let text = page.text();
            let links = link_targets(&text);
            assert!(!links.is_empty(), "{target} has links");
            for link in &links {
                // Root-relative: the browser keeps the scheme, host and port it used.
                assert!(link.starts_with('/') && !link.starts_with("//"), "{target} via {host}: {link}");
            }
            assert!(!text.contains("gen.example"), "{target}: the Host header made it into the page");
            pages.push(text);
        }
        assert!(pages.iter().all(|page| *page == pages[0]), "{target}: the page depends on Host");
    }
    let list = server.get_with("/api/v2/item/?offset=20&limit=20", &[browser]).expect(200).text();
    assert!(list.contains("<form class=\"page\" method=\"get\" action=\"/api/v2/item/\">"), "{list}");
    assert!(link_targets(&list).contains(&"/api/v2/item/?offset=40&limit=20".to_string()), "next: {list}");

    // JSON answers do not depend on Host: urls on the served address, as printed at start.
    for target in ["/api/v2/", "/api/v2/item/?offset=20&limit=20", "/api/v2/berry/2/"] {
        let bodies: Vec<Vec<u8>> = hosts
            .iter()
            .map(|host| server.send(&format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"), false).expect(200).body)
            .collect();
        assert!(bodies.iter().all(|body| *body == bodies[0]), "{target}: the JSON depends on Host");
        let text = String::from_utf8(bodies[0].clone()).unwrap();
        assert!(text.contains(&format!("\"http://{}/api/v2/", server.addr)), "{target}: {text}");
        assert!(!text.contains("localhost") && !text.contains("api.example.org"), "{target}: {text}");
    }
}

/// The url of a file of the tree, as `every_document_the_manifest_lists_is_served_as_written`
/// asks for it.
fn target_of(path: &str) -> String {
    match path.strip_suffix("index.json") {
        Some(dir) => format!("/{dir}"),
        None => format!("/{path}"),
    }
}

/// The files the manifest of `out` lists, with their hashes.
fn listed(out: &std::path::Path) -> Vec<(String, String)> {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_object().unwrap();
    files.iter().map(|(path, hash)| (path.clone(), hash.as_str().unwrap().to_string())).collect()
}

/// A tree damaged by hand before the server starts (issue 47 item 7: a file edited, removed,
/// replaced by a link, replaced by a folder) is served: each damaged document is answered 503
/// (JSON, no-store, naming `gen build --verify`) as a file edited after start is, every other
/// document 200; the check of every file at start names each damaged file and what repairs it,
/// and `gen build --verify` does: each is served again with the bytes a fresh build writes.
/// (Until issue 47 the check ended the server with status 2, naming one file and no repair.)
#[test]
fn a_tree_damaged_before_start_is_served_with_503_for_each_damaged_document() {
    let site = site();
    let damaged: Vec<(String, String)> = DAMAGES
        .iter()
        .zip(6..)
        .map(|(damage, id)| {
            let rel = format!("api/v2/item/{id}/index.json");
            damage.apply(&site.out(), &rel, &site.tmp.join("elsewhere"));
            (format!("/api/v2/item/{id}/"), rel)
        })
        .collect();
    let server = Server::start(&site.out(), &[]);
    let checked = || server.stderr().contains("do not match its manifest");
    assert!(eventually(Duration::from_secs(30), checked), "{}", server.stderr());
    let log = server.stderr();
    assert!(log.contains("gen build --verify"), "{log}");
    for (_, rel) in &damaged {
        assert!(log.contains(rel.as_str()), "{rel} not named:\n{log}");
    }
    // still serving once the check is done: the damaged documents 503, the others 200
    for (target, rel) in &damaged {
        assert_damaged(&server, target, rel);
    }
    for target in ["/api/v2/", "/api/v2/item/", "/api/v2/item/10/", "/api/v2/item/item-7/", "/api/v2/item/?offset=100"]
    {
        server.get(target).expect(200);
    }
    // repaired by `gen build --verify`: as a fresh build of the same data writes them
    let fresh = site.tmp.join("fresh");
    common::build(&site.data(), &fresh, &["--quiet"]).ok();
    site.build(&["--verify"]);
    for (target, rel) in &damaged {
        let expected = std::fs::read(fresh.join(rel)).unwrap();
        assert!(eventually(Duration::from_secs(10), || server.get(target).status == 200), "{target}");
        assert_eq!(server.get(target).expect(200).body, expected, "{target}");
    }
}

/// A manifest that lists a path twice (issue 47 item 6: as a build of data holding a resource
/// named `meta` wrote it, its list over the meta document) is refused, naming the path and
/// what repairs it: the resource to rename when the manifest lists one of a reserved name, and
/// `gen build --verify` in any case, which does repair it.
#[test]
fn a_manifest_listing_a_path_twice_is_refused_naming_the_path_and_the_repair() {
    let site = site();
    let manifest = site.out().join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let line = text.lines().find(|line| line.contains("\"api/v2/meta/index.json\"")).unwrap();
    let twice = text.replacen(line, &format!("{line}\n{line}"), 1);
    let with_meta = twice.replacen("\"resources\": {", "\"resources\": {\n    \"meta\": {\"count\": 1},", 1);
    let out = site.out();
    let serve = ["serve", "--dir", out.to_str().unwrap(), "--addr", "127.0.0.1:0"];
    for (label, bytes, named) in [("a resource named meta", &with_meta, true), ("a line written twice", &twice, false)]
    {
        std::fs::write(&manifest, bytes).unwrap();
        let refused = common::run(&serve).fails_with(2);
        let said = refused.stderr();
        assert!(said.contains("lists api/v2/meta/index.json twice"), "{label}: {said}");
        assert!(said.contains("gen build --verify"), "{label}: {said}");
        assert!(!said.contains("rebuild with `gen build`"), "{label}: {said}");
        let resource = "a resource named \"meta\", whose list took the path of the tree's meta document";
        assert_eq!(said.contains(resource), named, "{label}: {said}");
        assert_eq!(said.contains("rename the resource (e.g. meta-records)"), named, "{label}: {said}");
    }
    site.build(&["--verify"]);
    let server = Server::start(&site.out(), &[]);
    server.get("/api/v2/meta/").expect(200);
}

#[test]
fn a_file_changed_after_start_is_never_served_with_its_new_bytes() {
    let site = site();
    let server = Server::start_with(&site.out(), &[], None);
    // the check of every file at start is done: edits from here on are edits after start
    assert!(eventually(Duration::from_secs(10), || server.stderr().contains("files checked")), "{}", server.stderr());
    let original = site.file("api/v2/item/6/index.json");
    let read_before = server.get("/api/v2/item/5/").expect(200).body;
    // Edited on disk after start, before and after it was first read.
    for (id, path) in [(6, "api/v2/item/6/index.json"), (5, "api/v2/item/5/index.json")] {
        std::fs::write(site.out().join(path), br#"{"id": 0, "edited": true}"#).unwrap();
        let response = server.get(&format!("/api/v2/item/{id}/"));
        assert!(!response.text().contains("\"edited\": true"), "{id}: the edited bytes were served");
        match id {
            // never read before: the server cannot serve what the manifest says, and says so
            6 => {
                assert_eq!(response.status, 503, "{}", response.text());
                assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"));
                assert_eq!(response.header("Cache-Control"), Some("no-store"));
                let detail = response.json()["detail"].as_str().unwrap().to_string();
                assert!(detail.contains("the tree on disk changed") && detail.contains(path), "{detail}");
                assert!(detail.contains("gen build --verify"), "{detail}");
            }
            // read before: the bytes the manifest names, from memory
            _ => assert_eq!(response.expect(200).body, read_before),
        }
    }
    assert!(eventually(Duration::from_secs(5), || server.stderr().contains("does not match its hash")));
    // A file replaced by a link to the same bytes is not read either.
    let elsewhere = site.tmp.join("elsewhere.json");
    std::fs::write(&elsewhere, &original).unwrap();
    std::fs::remove_file(site.out().join("api/v2/item/6/index.json")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, site.out().join("api/v2/item/6/index.json")).unwrap();
    server.get("/api/v2/item/6/").expect(503);
    // The bytes the manifest names, back in place: served again.
    std::fs::remove_file(site.out().join("api/v2/item/6/index.json")).unwrap();
    std::fs::write(site.out().join("api/v2/item/6/index.json"), &original).unwrap();
    assert_eq!(server.get("/api/v2/item/6/").expect(200).body, original);
}

#[test]
fn a_tiny_cache_still_answers_every_document_with_the_manifests_etag() {
    let site = site();
    let server = Server::start(&site.out(), &["--cache-mb", "1"]);
    let files = listed(&site.out());
    assert!(files.len() > 300, "{}", files.len());
    let mut conn = server.connect();
    // Twice over: the second round finds most documents evicted and reads them again.
    for round in 0..2 {
        for (path, hash) in &files {
            let target = target_of(path);
            let response = conn.get(&target);
            assert_eq!(response.status, 200, "{round} {target}");
            assert_eq!(response.body, site.file(path), "{round} {target}");
            assert_eq!(response.header("ETag"), Some(format!("\"{hash}\"").as_str()), "{round} {target}");
        }
        // computed pages, their lists read again when evicted
        for offset in [3, 17, 101] {
            let page = conn.get(&format!("/api/v2/item/?offset={offset}&limit=9")).expect(200).json();
            assert_eq!(page, expected_page("item", &entries("item", 0), offset, 9), "{round} {offset}");
        }
    }
    // gzip copies are of the same bytes
    let zipped = server.get_with("/api/v2/item/3/", &["Accept-Encoding: gzip"]).expect(200);
    assert_eq!(zipped.header("Content-Encoding"), Some("gzip"));
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&zipped.body[..]).read_to_end(&mut unzipped).unwrap();
    assert_eq!(unzipped, site.file("api/v2/item/3/index.json"));
}

/// The server's peak resident memory (VmHWM), in bytes, and the same now (VmRSS).
fn peak_and_now(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = |field: &str| -> u64 {
        let line = status.lines().find_map(|l| l.strip_prefix(field)).unwrap();
        line.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap() * 1024
    };
    (kb("VmHWM:"), kb("VmRSS:"))
}

/// The sample site with item `id`, a record of 24 MB, built and served with `--cache-mb 1`
/// (the document is far too large to be kept); its document's bytes.
fn large_item_under_a_tiny_cache(id: i64) -> (Site, Vec<u8>, Server) {
    let site = site();
    let big = format!(r#"{{"id": {id}, "name": "big-item", "text": "{}"}}"#, "x".repeat(24 << 20));
    std::fs::write(site.data().join(format!("item/{id}.json")), big).unwrap();
    site.build(&[]);
    let document = site.file(&format!("api/v2/item/{id}/index.json"));
    let server = Server::start(&site.out(), &["--cache-mb", "1"]);
    (site, document, server)
}

/// Issue 26, item 8: 60 requests at once for one large document under `--cache-mb 1` held it
/// 60 times (1.77 GB for 30 MB) and kept most of it. Read once for all who wait on it, it is
/// held about once: the server's peak grows by a few times the document, not sixty.
#[test]
fn many_requests_at_once_for_one_large_document_hold_it_about_once() {
    let (_site, document, server) = large_item_under_a_tiny_cache(9000);
    let size = document.len() as u64;
    server.get("/api/v2/").expect(200);
    let (before, _) = peak_and_now(server.pid());
    let answers: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..60)
            .map(|_| scope.spawn(|| common::http_request(&server.addr, "GET", "/api/v2/item/9000/", &[]).unwrap()))
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).map(|r| r.expect(200).body).collect()
    });
    assert!(answers.iter().all(|body| *body == document), "every answer whole and right");
    let (peak, _) = peak_and_now(server.pid());
    let grown = peak.saturating_sub(before);
    eprintln!("60 answers of a {} MB document: the server's peak grew by {} MB", size >> 20, grown >> 20);
    assert!(grown < 6 * size, "the peak grew by {} MB for 60 answers of a {} MB document", grown >> 20, size >> 20);
    // and the same again, one after the other: nothing held between the rounds
    for _ in 0..3 {
        assert!(server.get("/api/v2/item/9000/").expect(200).body == document);
    }
    let (peak, _) = peak_and_now(server.pid());
    assert!(peak.saturating_sub(before) < 6 * size, "the peak grew by {} MB", (peak - before) >> 20);
}

/// A large document that a slow client is still being sent is shared with the next request,
/// not read again: the budget of bodies in flight (`--cache-mb`) holds it once, so the next
/// request is not kept waiting for room (or answered 503) by the same document.
#[test]
fn a_large_document_still_being_sent_is_shared_with_the_next_request() {
    let (_site, document, server) = large_item_under_a_tiny_cache(9001);
    // a client that asks and reads one byte, then stops reading: its answer stays in flight
    let mut slow = TcpStream::connect(&server.addr).unwrap();
    slow.write_all(b"GET /api/v2/item/9001/ HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut first = [0u8; 1];
    slow.read_exact(&mut first).unwrap();
    let answer = common::http_request(&server.addr, "GET", "/api/v2/item/9001/", &[]).unwrap();
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)]));
    assert!(answer.body == document, "the shared answer is whole and right");
    drop(slow);
}

/// Issue 34, item 10: one client reading a large document at 32 KB/s held the budget of bodies
/// in flight, and every other request for a large document waited 10 s and got 503 (8 of 8).
/// A document too large for the cache is now sent from its file, a piece at a time: a slow
/// reader holds a piece of it and no one waits on it; and a client that reads too slowly is cut
/// off.
#[test]
fn a_slow_reader_of_a_large_document_keeps_no_one_waiting_and_is_cut_off() {
    let site = site();
    let big = format!(r#"{{"id": 9100, "name": "big-item", "text": "{}"}}"#, "x".repeat(24 << 20));
    std::fs::write(site.data().join("item/9100.json"), big).unwrap();
    // eight more, each over half of --cache-mb 1: none is kept by the cache
    for id in 9101..9109 {
        let text = format!("{id} ").repeat(200_000);
        let record =
            format!(r#"{{"id": {id}, "name": "large-{id}", "text": "{text}", "see": "{PRODUCTION}/api/v2/item/1/"}}"#);
        std::fs::write(site.data().join(format!("item/{id}.json")), record).unwrap();
    }
    site.build(&["--base-url", PRODUCTION]);
    // as a user runs it: urls rebased onto the served address, one log line per request
    let server = Server::start_preview(&site.out(), &["--cache-mb", "1"]);
    let origin = format!("http://{}", server.addr);
    let expected = |id: i64| moved(&site.file(&format!("api/v2/item/{id}/index.json")), &origin);

    // a client that reads its answer at 24 KiB/s
    let mut slow = TcpStream::connect(&server.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    slow.write_all(b"GET /api/v2/item/9100/ HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    slow.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut buffer, mut total) = ([0u8; 12 << 10], 0usize);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match slow.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            total
        })
    };
    std::thread::sleep(Duration::from_secs(1));

    // meanwhile, eight requests for the other large documents, at once
    let answers: Vec<(i64, common::Response, Duration)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (9101..9109)
            .map(|id| {
                let addr = server.addr.clone();
                scope.spawn(move || {
                    let started = Instant::now();
                    let response = common::http_request(&addr, "GET", &format!("/api/v2/item/{id}/"), &[]).unwrap();
                    (id, response, started.elapsed())
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let waits: Vec<String> = answers.iter().map(|(_, r, wait)| format!("{} in {wait:.2?}", r.status)).collect();
    eprintln!("beside a slow reader of a 24 MB document, 8 others: {}", waits.join(", "));
    for (id, response, _) in &answers {
        assert_eq!(response.status, 200, "item {id}: {}", String::from_utf8_lossy(&response.body));
        assert!(response.body == expected(*id), "item {id}: whole and rebased");
        // the ETag is the hash of the bytes sent, as for every document
        let etag = format!("\"{}\"", blake3::hash(&response.body).to_hex());
        assert_eq!(response.header("ETag"), Some(etag.as_str()), "item {id}");
        let again = server.get_with(&format!("/api/v2/item/{id}/"), &[&format!("If-None-Match: {etag}")]);
        assert_eq!(again.status, 304, "item {id}");
    }
    // sent as it is whatever the client accepts, and HEAD says its length
    let zipped = server.get_with("/api/v2/item/9101/", &["Accept-Encoding: gzip"]).expect(200);
    assert_eq!(zipped.header("Content-Encoding"), None);
    assert!(zipped.body == expected(9101));
    let head = server.request("HEAD", "/api/v2/item/9101/", &[]).expect(200);
    assert_eq!(head.header("Content-Length"), Some(expected(9101).len().to_string().as_str()));
    assert!(head.body.is_empty());
    // its HTML view is not rendered: a page says how large it is and links the JSON
    let view = server.get_with("/api/v2/item/9100/", &["Accept: text/html"]).expect(200);
    let page = String::from_utf8(view.body).unwrap();
    assert!(page.contains(&format!("{} bytes of JSON", expected(9100).len())), "{page}");
    assert!(page.contains("href=\"/api/v2/item/9100/?format=json\""), "{page}");

    // the slow reader is cut off: by the send timeout when its reads free too little room for
    // 10 s, else by the minimum rate
    let cut = eventually(Duration::from_secs(90), || {
        server.log().lines().any(|line| line.starts_with("GET /api/v2/item/9100/ 200") && line.contains("not sent"))
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let read = trickle.join().unwrap();
    let log = server.log();
    let line = log.lines().find(|line| line.starts_with("GET /api/v2/item/9100/ 200") && line.contains("not sent"));
    let line = line.unwrap_or("");
    eprintln!("the slow reader read {read} bytes; the server: {line}");
    assert!(cut, "the slow reader was not cut off:\n{log}");
}

/// Issue 34, item 11: the HTML view rendered a page for each request, outside the budgets: 24
/// slow readers of a 12 MB record's view took 865 MB (77 MB for its JSON). The render is
/// counted in the budget of answers in flight and its page shared by the requests for it, so
/// the server's peak stays within what `--cache-mb` allows.
#[test]
fn slow_readers_of_a_large_html_view_stay_within_the_memory_budget() {
    const CACHE_MB: u64 = 32;
    let site = site();
    let words: Vec<String> = (0..1_100_000).map(|i| format!("w{i:08}")).collect();
    let record = serde_json::json!({"id": 9200, "name": "big-view", "words": words});
    std::fs::write(site.data().join("item/9200.json"), serde_json::to_vec(&record).unwrap()).unwrap();
    site.build(&[]);
    let json = site.file("api/v2/item/9200/index.json");
    assert!(json.len() > 12 << 20 && json.len() as u64 <= (CACHE_MB << 20) / 2, "kept by the cache: {}", json.len());
    let server = Server::start(&site.out(), &["--cache-mb", &CACHE_MB.to_string()]);
    server.get("/api/v2/").expect(200);
    let (before, _) = peak_and_now(server.pid());
    // 24 clients ask for the view at once, read the start of their answer, and read no more
    let readers: Vec<TcpStream> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..24)
            .map(|_| {
                scope.spawn(|| {
                    let mut reader = TcpStream::connect(&server.addr).unwrap();
                    reader.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
                    let request = "GET /api/v2/item/9200/ HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n\r\n";
                    reader.write_all(request.as_bytes()).unwrap();
                    let mut head = [0u8; 12];
                    reader.read_exact(&mut head).unwrap();
                    assert_eq!(&head, b"HTTP/1.1 200");
                    reader
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    // while they hold it, the same view and another page are answered
    let view = server.get_with("/api/v2/item/9200/", &["Accept: text/html"]).expect(200);
    assert!(String::from_utf8_lossy(&view.body).contains("w01099999"), "the whole page");
    server.get_with("/api/v2/item/1/", &["Accept: text/html"]).expect(200);
    let (peak, _) = peak_and_now(server.pid());
    let grown = peak.saturating_sub(before);
    // the cache and the budget of answers in flight (--cache-mb each), or one render alone when
    // it counts more (docs/serve.md: 6 bytes a byte of JSON and 112 a value), and 32 MB for
    // the threads and buffers of the connections
    let values = json.iter().filter(|b| matches!(b, b',' | b':' | b'[' | b'{')).count() as u64 + 1;
    let render = 6 * json.len() as u64 + 112 * values;
    let bound = (CACHE_MB << 20) + (CACHE_MB << 20).max(render) + (32 << 20);
    eprintln!(
        "24 slow readers of the HTML view of a {} MB record: the server's peak grew by {} MB (bound {} MB)",
        json.len() >> 20,
        grown >> 20,
        bound >> 20
    );
    assert!(grown < bound, "the peak grew by {} MB, over {} MB", grown >> 20, bound >> 20);
    drop(readers);
}

#[test]
fn a_rebuild_under_a_crawl_answers_each_document_from_one_build_whole() {
    let site = site();
    let before = common::read_tree(&site.out());
    let server = Server::start(&site.out(), &["--cache-mb", "1"]);
    let files = listed(&site.out());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let crawler = {
        let (addr, stop, files) = (server.addr.clone(), stop.clone(), files.clone());
        std::thread::spawn(move || {
            let mut conn = serve_support::Conn::new(TcpStream::connect(&addr).unwrap());
            let mut answers = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (path, _) in &files {
                    let response = conn.get(&target_of(path));
                    answers.push((path.clone(), response.status, response.body));
                }
            }
            answers
        })
    };
    // every document changes: its urls carry the new base URL
    site.build(&["--base-url", "https://next.example.test"]);
    let after = common::read_tree(&site.out());
    assert_ne!(before["api/v2/berry/1/index.json"], after["api/v2/berry/1/index.json"]);
    assert!(eventually(Duration::from_secs(10), || {
        server.get("/api/v2/berry/1/").body == after["api/v2/berry/1/index.json"]
    }));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answers = crawler.join().unwrap();
    let mut changed = 0;
    for (path, status, body) in &answers {
        match status {
            200 => assert!(body == &before[path] || body == &after[path], "{path}: a body of neither build"),
            // a file renamed into place before the new manifest: never its bytes with the old one
            503 => changed += 1,
            // a bulk-data file of the old build: its name is its bytes' hash, so the new build
            // removed it (the new index names the new file)
            404 if path.ends_with(".ndjson.gz") && !after.contains_key(path) => {}
            other => panic!("{path}: {other}"),
        }
    }
    eprintln!("{} answers, {changed} said the tree changed", answers.len());
    for (path, _) in listed(&site.out()) {
        assert_eq!(server.get(&target_of(&path)).expect(200).body, after[&path], "{path}");
    }
}

/// The deploy headers of `response` under `names` (date, hash), and the line exposing them.
fn deploy_headers_of<'r>(response: &'r common::Response, names: (&str, &str)) -> (&'r str, &'r str, &'r str) {
    let get = |name: &str| {
        response.header(name).unwrap_or_else(|| panic!("no {name} in {} {:?}", response.status, response.headers))
    };
    (get(names.0), get(names.1), get("Access-Control-Expose-Headers"))
}

#[test]
fn every_answer_carries_the_deploy_headers_of_the_tree_it_came_from() {
    let site = site();
    let server = Server::start(&site.out(), &[]);
    let meta: serde_json::Value = serde_json::from_slice(&site.file("api/v2/meta/index.json")).unwrap();
    assert_eq!(meta["deploy_date"], common::TEST_EPOCH);
    let hash = meta["hash"].as_str().unwrap().to_string();
    let etag = server.get("/api/v2/item/1/").header("ETag").unwrap().to_string();
    let preflight = "OPTIONS /api/v2/item/ HTTP/1.1\r\nHost: x\r\nOrigin: https://example.org\r\n\
                     Access-Control-Request-Method: GET\r\n\r\n";
    let answers = |server: &Server| {
        vec![
            server.get("/api/v2/").expect(200),
            server.get("/api/v2/item/?limit=7&offset=3").expect(200),
            server.get("/api/v2/meta/").expect(200),
            server.get_with("/api/v2/item/1/", &[&format!("If-None-Match: {etag}")]),
            server.get("/api/v2/item/9999/").expect(404),
            server.get("/api/v2/item/?limit=abc").expect(400),
            server.send("DELETE /api/v2/item/ HTTP/1.1\r\nHost: x\r\n\r\n", false).expect(405),
            server.send(preflight, false).expect(204),
            server.send("HEAD /api/v2/berry/ HTTP/1.1\r\nHost: x\r\n\r\n", true).expect(200),
        ]
    };
    let neutral = ("X-Deploy-Date", "X-Data-Hash");
    let sent = answers(&server);
    assert_eq!(sent[3].status, 304, "{:?}", sent[3].headers);
    // meta is revalidated on every use, so that a client checking for a new deploy sees it
    assert_eq!(sent[2].header("Cache-Control"), Some("no-cache"));
    assert_eq!(server.get("/api/v2/meta").header("Cache-Control"), Some("no-cache"));
    assert_eq!(sent[1].header("Cache-Control"), Some("public, max-age=86400"));
    for response in &sent {
        let expected = (common::TEST_EPOCH, hash.as_str(), "X-Deploy-Date, X-Data-Hash");
        assert_eq!(deploy_headers_of(response, neutral), expected, "{}", response.status_line);
    }

    // Other names in gen.json and another build: the new tree's names and values, without restart.
    let config_path = site.data().join("gen.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    config["deploy_headers"] = serde_json::json!({"date": "X-Tree-Date", "hash": "X-Tree-Hash"});
    write_data(&site.data(), &[20, 50], 1);
    std::fs::write(&config_path, config.to_string()).unwrap();
    let status = common::gen_bin()
        .env("SOURCE_DATE_EPOCH", "1786009999")
        .args(["build", "--quiet", "--data", site.data().to_str().unwrap(), "--out", site.out().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(eventually(Duration::from_secs(5), || server.get("/api/v2/item/131/").status == 200));
    let meta = server.get("/api/v2/meta/").expect(200).json();
    let new_hash = meta["hash"].as_str().unwrap().to_string();
    assert_ne!(new_hash, hash);
    assert_eq!(meta["deploy_date"], "1786009999");
    for response in answers(&server) {
        let expected = ("1786009999", new_hash.as_str(), "X-Tree-Date, X-Tree-Hash");
        assert_eq!(deploy_headers_of(&response, ("X-Tree-Date", "X-Tree-Hash")), expected, "{}", response.status_line);
        assert!(response.header("X-Deploy-Date").is_none(), "{:?}", response.headers);
    }
}
