//! `gen config nginx|caddy` against the real hosts, Debian's nginx and Caddy:
//! - parity: every request a static host supports gets the same status and the same body from
//!   it as from `gen serve` (the root, every list followed by `next` to its end for each page
//!   size, the whole-list request, every document of the tree by both slash forms, 404s, 400s,
//!   405s), with the headers a host must send; the few requests only `gen serve` answers get a
//!   JSON 404 from the hosts, as `docs/deploy.md` says;
//! - object storage: a tree built with `--links path`, on a plain nginx (root and `index
//!   index.json`, nothing else), is walked to the end of every list for every page size.
//!
//! Expectations come from `gen serve`'s answers and from the data folder, never from the
//! output under test. The hosts run as the current user with their files in a temporary folder,
//! on ports found free, and are stopped in `Drop`. `make test` installs nginx and caddy
//! (`tests/tools/install-hosts.sh`); without them the tests fail under `CI`, else skip saying so.

use crate::common;
use crate::parity;

use common::*;
use parity::*;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

// ---------------------------------------------------------------------------------------------
// The command

#[test]
fn config_is_written_for_the_address_and_tree_given() {
    let tree = sample_tree("config", &[]);
    let dir = tree.out.to_str().unwrap();
    let config = |host: &str, listen: &str| run(&["config", host, "--dir", dir, "--listen", listen]).ok().stdout();
    let nginx = config("nginx", "[::1]:8443");
    assert!(nginx.contains("    listen [::1]:8443;\n"), "{nginx}");
    assert!(nginx.contains(&format!("    root \"{dir}\";\n")), "{nginx}");
    assert!(config("nginx", ":9000").contains("    listen 9000;\n"));
    let caddy = config("caddy", "[::1]:8443");
    assert!(caddy.contains("http://:8443 {\n\tbind ::1\n"), "{caddy}");
    assert!(caddy.contains(&format!("\troot * \"{dir}\"\n")), "{caddy}");
    assert!(!config("caddy", "0.0.0.0:80").contains("bind"));
    // one list rule per resource of the tree, counted from the data
    let lists = expected_lists(&tree.data, &tree.base_url());
    for (segment, entries) in &lists {
        assert!(nginx.contains(&format!("    location ~ \"^/api/v2/{segment}/?$\" {{\n")), "{segment}");
        assert!(nginx.contains(&format!("        set $gen_count {};\n", entries.len())), "{segment}");
        assert!(caddy.contains(&format!("\t@list_{segment} path /api/v2/{segment} /api/v2/{segment}/\n")));
    }
    // a relative --dir is made absolute
    let relative = run_in(tree.out.parent().unwrap(), &["config", "nginx", "--dir", "out"]);
    assert!(relative.contains(&format!("root \"{dir}\";")), "{relative}");
}

/// Runs `gen` in `cwd`, expecting success; its stdout.
fn run_in(cwd: &Path, args: &[&str]) -> String {
    let output = gen_bin().current_dir(cwd).args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn config_errors_say_what_to_do() {
    let tmp = TempDir::new("config-errors");
    let missing = tmp.join("nothing-here");
    let run1 = run(&["config", "nginx", "--dir", missing.to_str().unwrap()]).fails_with(2);
    assert!(run1.stderr().contains("run `gen build` first"), "{}", run1.stderr());
    assert!(run1.stderr().contains(missing.to_str().unwrap()), "{}", run1.stderr());

    let tree = sample_tree("config-errors-tree", &[]);
    for listen in ["127.0.0.1", "127.0.0.1:0", "host:port", "::1:80"] {
        let r = run(&["config", "caddy", "--dir", tree.out.to_str().unwrap(), "--listen", listen]).fails_with(2);
        assert!(r.stderr().contains("--listen") && r.stderr().contains("HOST:PORT"), "{listen}: {}", r.stderr());
    }

    // a folder name a configuration cannot quote
    let odd = tmp.join("say \"hi\"");
    std::fs::create_dir_all(&odd).unwrap();
    let copy = odd.join("out");
    let status = Command::new("cp").arg("-a").arg(&tree.out).arg(&copy).status().unwrap();
    assert!(status.success());
    let r = run(&["config", "nginx", "--dir", copy.to_str().unwrap()]).fails_with(2);
    assert!(r.stderr().contains("move the tree to a plainer path"), "{}", r.stderr());
}

/// Compression and revalidation on each host, for the root, a list page, the whole list and a record.
fn check_encodings(p: &Parity, targets: &[String]) {
    for host in &p.hosts {
        for target in targets {
            let plain = host.get(target);
            assert_eq!(plain.status, 200, "{} {target}", host.name);
            assert_eq!(plain.header("content-encoding"), None);
            let gz = host.request("GET", target, &[("Accept-Encoding", "gzip")]);
            assert_eq!(gz.status, 200);
            if gz.header("content-encoding") == Some("gzip") {
                use std::io::Read;
                let mut body = Vec::new();
                flate2::read::GzDecoder::new(&gz.body[..]).read_to_end(&mut body).unwrap();
                assert_eq!(body, plain.body, "{} {target}: the gzip body is another document", host.name);
                assert!(gz.header("vary").is_some_and(|v| v.contains("Accept-Encoding")), "{:?}", gz.headers);
            } else {
                assert!(plain.body.len() < 600, "{} did not compress {target} ({} bytes)", host.name, plain.body.len());
            }
            let etag = plain.header("etag").unwrap();
            let again = host.request("GET", target, &[("If-None-Match", etag)]);
            assert_eq!(again.status, 304, "{} {target} If-None-Match {etag}", host.name);
            assert!(again.body.is_empty());
        }
    }
}

/// Runs the parity checks for `tree` against gen serve, nginx and Caddy with the generated
/// configs; `options` are given to `gen serve` and `gen config` alike.
fn parity(tree: &Tree, options: &[&str]) {
    let config = |host: &str, port| gen_config(host, &tree.out, port, options);
    let Some(nginx) = start_nginx("nginx", &tree.out, |port| config("nginx", port)) else { return };
    let Some(caddy) = start_caddy(&tree.out, |port| config("caddy", port)) else { return };
    let serve = start_serve(&tree.out, options);
    let mut p = Parity::new(&serve, vec![&nginx, &caddy], tree.base_url());
    let started = Instant::now();
    check_parity(tree, &mut p);
    let root = serve.get("/api/v2/").json();
    let (first, url) = root.as_object().unwrap().iter().next().unwrap();
    let list = p.target(url.as_str().unwrap());
    let record = p.target(expected_lists(&tree.data, &tree.base_url())[first][0]["url"].as_str().unwrap());
    check_encodings(&p, &["/api/v2/".to_string(), list.clone(), format!("{list}?limit=100000"), record]);
    eprintln!("{} requests answered alike by gen serve, nginx and caddy in {:.1?}", p.asked.len(), started.elapsed());
}

#[test]
fn hosts_answer_as_gen_serve_does() {
    // a Cache-Control other than the default, set alike on both
    parity(&sample_tree("parity", &[]), &["--max-age", "120"]);
}

#[test]
fn hosts_answer_as_gen_serve_does_with_path_links_pretty_gzip() {
    parity(&sample_tree("parity-path", &["--links", "path", "--pretty", "--gzip"]), &[]);
}

#[test]
fn hosts_answer_as_gen_serve_does_on_the_published_data() {
    let Some((tmp, data)) = fixture_data("parity-fixture") else { return };
    parity(&build_tree(tmp, data, &["--gzip"]), &[]);
}

/// The sample data with `edit` applied (to the folder and its parsed `gen.json`, written back),
/// built and checked for parity on gen serve, nginx and Caddy; `then` goes on with the same hosts.
fn sample_parity(label: &str, edit: impl FnOnce(&Path, &mut Value), then: impl FnOnce(&Tree, &mut Parity<'_>)) {
    let tmp = TempDir::new(label);
    let data = tmp.join("data");
    sample_data(&data);
    let mut config = read_json(&data.join("gen.json"));
    edit(&data, &mut config);
    std::fs::write(data.join("gen.json"), config.to_string()).unwrap();
    let tree = build_tree(tmp, data, &[]);
    let config = |host: &str, port| gen_config(host, &tree.out, port, &[]);
    let Some(nginx) = start_nginx("nginx", &tree.out, |port| config("nginx", port)) else { return };
    let Some(caddy) = start_caddy(&tree.out, |port| config("caddy", port)) else { return };
    let serve = start_serve(&tree.out, &[]);
    let mut p = Parity::new(&serve, vec![&nginx, &caddy], tree.base_url());
    check_parity(&tree, &mut p);
    then(&tree, &mut p);
}

#[test]
fn hosts_answer_a_shared_name_from_the_lowest_id_as_gen_serve_does() {
    // berry 2000 carries berry 7's name, declared shared: the name path is berry 7's
    let edit = |data: &Path, config: &mut Value| {
        config["shared_names"] = serde_json::json!({"berry": ["berry-7"]});
        std::fs::write(data.join("berry/2000.json"), r#"{"id": 2000, "name": "berry-7"}"#).unwrap();
    };
    sample_parity("parity-shared", edit, |_, p| {
        for target in ["/api/v2/berry/berry-7/", "/api/v2/berry/berry-7"] {
            assert_eq!(p.same(target).json()["id"], 7, "{target}");
        }
        assert_eq!(p.same("/api/v2/berry/2000/").json()["name"], "berry-7");
    });
}

#[test]
fn hosts_send_the_deploy_headers_under_the_names_the_tree_gives() {
    // the public API's names, as an import with --keep-segment-names sets them; every answer
    // of the parity set carries them (check_headers), on each host alike
    let public = serde_json::json!({"date": "X-PokeAPI-Deploy-Date", "hash": "X-PokeAPI-Hash"});
    sample_parity(
        "deploy-names",
        |_, config| config["deploy_headers"] = public,
        |tree, p| {
            let meta = read_json(&tree.out.join("api/v2/meta/index.json"));
            assert_eq!(meta["deploy_date"], TEST_EPOCH);
            // meta is revalidated on every use (check_headers: on each host as on gen serve)
            assert_eq!(p.same("/api/v2/meta/").header("cache-control"), Some("no-cache"));
            assert_eq!(p.same("/api/v2/meta").header("cache-control"), Some("no-cache"));
            // the values are the meta document's
            for target in ["/api/v2/meta/", "/api/v2/berry/?limit=20&offset=20", "/api/v2/nothing/"] {
                let reply = p.same(target);
                assert_eq!(reply.header("x-pokeapi-deploy-date"), meta["deploy_date"].as_str(), "{target}");
                assert_eq!(reply.header("x-pokeapi-hash"), meta["hash"].as_str(), "{target}");
                assert_eq!(
                    reply.header("access-control-expose-headers"),
                    Some("X-PokeAPI-Deploy-Date, X-PokeAPI-Hash")
                );
                assert!(reply.header("x-deploy-date").is_none(), "{target}");
            }
            // the configuration says its values are this build's
            let printed = gen_config("nginx", &tree.out, 8080, &[]);
            assert!(
                printed.contains("print the\n# configuration again and reload after every build"),
                "{printed:.1500}"
            );
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Object storage: a plain host, `--links path`

/// Builds `data` with `--links path` and the host's own address as base URL, serves it with a
/// plain nginx (a root and `index index.json`: no rewrites, query strings ignored, as object
/// storage website hosting behaves), and follows `next` from every list root for every page
/// size: each walk covers the whole list as the data defines it.
fn walk_on_plain_host(tmp: TempDir, data: PathBuf) {
    let out = tmp.join("out");
    let server = start_nginx("plain-nginx", &out, |port| {
        let base = format!("http://127.0.0.1:{port}");
        build(&data, &out, &["-q", "--links", "path", "--base-url", &base]).ok();
        format!("server {{\n    listen 127.0.0.1:{port};\n    root \"{}\";\n    index index.json;\n}}\n", utf8(&out))
    });
    let Some(server) = server else { return };
    let tree = Tree { _tmp: tmp, data, out, build_args: Vec::new() };
    let base = tree.base_url();
    assert_eq!(base, format!("http://{}", server.addr));
    let lists = expected_lists(&tree.data, &base);
    let page_sizes: Vec<u64> = serde_json::from_value(tree.manifest()["page_sizes"].clone()).unwrap();
    let get = |url: &str| {
        assert!(!url.contains('?'), "{url}: a link with a query string does not work on object storage");
        let path = url.strip_prefix(&base).unwrap_or_else(|| panic!("{url} is not on {base}"));
        let reply = server.get(path);
        assert_eq!(reply.status, 200, "{url}: {}", reply.text());
        reply.json()
    };
    let root = get(&format!("{base}/api/v2/")).as_object().unwrap().clone();
    // the root lists resources only (the bulk-data index is named by meta and a Link header)
    assert!(root.get("bulk-data").is_none());
    assert_eq!(root.keys().collect::<Vec<_>>(), lists.keys().collect::<Vec<_>>());
    let mut pages = 0;
    for (segment, list) in &root {
        let list = list.as_str().unwrap();
        let entries = &lists[segment];
        for &size in &page_sizes {
            // the list root is the first page of limit 20; other limits start at their page file
            let mut url = if size == 20 { list.to_string() } else { format!("{list}_pages/{size}/0/") };
            let mut walked = Vec::new();
            let mut seen = HashSet::new();
            loop {
                assert!(seen.insert(url.clone()), "{url} loops");
                let page = get(&url);
                pages += 1;
                assert_eq!(page["count"], entries.len(), "{url}");
                walked.extend(page["results"].as_array().unwrap().iter().cloned());
                if let Some(previous) = page["previous"].as_str() {
                    get(previous);
                }
                match page["next"].as_str() {
                    Some(next) => url = next.to_string(),
                    None => break,
                }
            }
            assert_eq!(&walked, entries, "{segment}: limit {size} walked");
        }
        let all = get(&format!("{list}_pages/all/"));
        assert_eq!(all["results"].as_array().unwrap(), entries, "{segment}: the whole list");
        // the host really ignores query strings: why the tree links by path
        let path = list.strip_prefix(&base).unwrap();
        assert_eq!(server.get(&format!("{path}?offset=20&limit=20")).body, server.get(path).body);
    }
    eprintln!("walked {pages} pages of {} lists on a plain nginx", root.len());
}

#[test]
fn path_links_walk_every_list_on_a_plain_host() {
    let tmp = TempDir::new("walk");
    let data = tmp.join("data");
    sample_data(&data);
    walk_on_plain_host(tmp, data);
}

#[test]
fn path_links_walk_every_published_list_on_a_plain_host() {
    let Some((tmp, data)) = fixture_data("walk-fixture") else { return };
    walk_on_plain_host(tmp, data);
}
