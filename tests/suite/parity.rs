//! The parity set shared by the host tests (`tests/suite/hosts.rs`: nginx, Caddy) and the edge
//! handler tests (`tests/suite/edge.rs`: workerd, Deno, Node): trees and what their data says they hold,
//! starting hosts on free ports, and every request a host must answer as `gen serve` does, compared
//! status and body.

// Shared by several test binaries: `pub` is how each reaches what it uses.
#![allow(unreachable_pub)]
#![allow(dead_code)]

use crate::common::*;
use crate::serve_support::Server;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Finding the hosts

/// The host binary `name`, or `None` under the tests' skip policy ([`tool`]).
pub fn host_binary(name: &str) -> Option<PathBuf> {
    tool(name)
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

// ---------------------------------------------------------------------------------------------
// Running servers

/// Waits until `server` answers the root with the tree's bytes. `Err(log)` when the process
/// ended first.
pub fn wait_ready(server: &mut Server, out: &Path) -> Result<(), String> {
    let root = std::fs::read(out.join("api/v2/index.json")).unwrap();
    // a minute without progress: workerd's emulated R2 is filled with a whole tree before it
    // answers, and its runner prints a line every 512 files; each line moves the deadline on,
    // so a loaded machine is waited for and a stuck fill is not
    let mut deadline = Instant::now() + Duration::from_secs(60);
    let mut said = 0;
    while Instant::now() < deadline {
        let now_said = server.log().len();
        if now_said != said {
            said = now_said;
            deadline = Instant::now() + Duration::from_secs(60);
        }
        if let Some(status) = server.wait_exit(Duration::ZERO) {
            return Err(format!("exited with {status}:\n{}", server.log()));
        }
        if let Ok(reply) = http_request(server.addr.as_str(), "GET", "/api/v2/", &[])
            && reply.status == 200
            && reply.body == root
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("did not answer, nor say anything, for 60 s:\n{}", server.log()))
}

/// Starts a host on a free port, retrying with another port when the chosen one was taken.
/// `spawn(dir, port)` writes the host's files into `dir` and starts it, its output going to the
/// returned log file.
pub fn start_host(name: &str, out: &Path, spawn: impl Fn(&Path, u16) -> (Child, PathBuf)) -> Server {
    let mut failures = Vec::new();
    for _ in 0..5 {
        let dir = TempDir::new(name);
        let port = free_port();
        let (child, log) = spawn(dir.path(), port);
        let mut server = Server::adopt(name, child, &format!("127.0.0.1:{port}"), &log, dir);
        match wait_ready(&mut server, out) {
            Ok(()) => return server,
            Err(why) if why.contains("in use") => failures.push(why),
            Err(why) => panic!("{name} did not start on port {port}: {why}"),
        }
    }
    panic!("{name}: every port tried was taken:\n{}", failures.join("\n"))
}

/// `gen serve` on the tree in `out`, on a port it picks and prints, with `extra` options.
pub fn start_serve(out: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["--quiet"];
    args.extend_from_slice(extra);
    let mut serve = Server::start_with(out, &args, None);
    wait_ready(&mut serve, out).unwrap_or_else(|why| panic!("gen serve: {why}"));
    serve
}

/// nginx with `server_block(port)` as its only server, as the current user, all its files in a
/// temporary folder.
pub fn start_nginx(name: &str, out: &Path, server_block: impl Fn(u16) -> String) -> Option<Server> {
    let nginx = host_binary("nginx")?;
    Some(start_host(name, out, |dir, port| {
        std::fs::write(dir.join("server.conf"), server_block(port)).unwrap();
        let d = dir.display();
        // Workers run as the current user: nginx started as root would switch them to nobody.
        let user = if is_root() { "user root root;\n" } else { "" };
        let conf = format!(
            "{user}worker_processes 1;\nerror_log {d}/error.log notice;\npid {d}/nginx.pid;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n    access_log off;\n    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    \
             fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n    \
             include {d}/server.conf;\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let log = dir.join("error.log");
        let child = Command::new(&nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(&log)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .expect("nginx starts");
        (child, log)
    }))
}

/// Caddy with `site_block(port)` as its only site, admin endpoint off, its state in a
/// temporary folder.
pub fn start_caddy(out: &Path, site_block: impl Fn(u16) -> String) -> Option<Server> {
    let caddy = host_binary("caddy")?;
    Some(start_host("caddy", out, |dir, port| {
        let caddyfile = dir.join("Caddyfile");
        std::fs::write(&caddyfile, format!("{{\n\tadmin off\n}}\n\n{}", site_block(port))).unwrap();
        let log = dir.join("caddy.log");
        let child = Command::new(&caddy)
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&caddyfile)
            .env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("caddy starts");
        (child, log)
    }))
}

/// `gen config <host>` for the tree in `out`, listening on `port`, with `extra` options.
pub fn gen_config(host: &str, out: &Path, port: u16, extra: &[&str]) -> String {
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["config", host, "--dir", out.to_str().unwrap(), "--listen", &listen];
    args.extend_from_slice(extra);
    run(&args).ok().stdout()
}

// ---------------------------------------------------------------------------------------------
// Trees and what the data says they hold

/// A data folder and the tree built from it.
pub struct Tree {
    pub _tmp: TempDir,
    pub data: PathBuf,
    pub out: PathBuf,
    /// The options the tree was built with.
    pub build_args: Vec<String>,
}

impl Tree {
    /// Writes into `dir` the archive of the same data and options (`gen build --archive`).
    pub fn build_archive(&self, dir: &Path) {
        let mut args: Vec<&str> = self.build_args.iter().map(String::as_str).collect();
        args.push("--archive");
        build(&self.data, dir, &args).ok();
    }
    pub fn manifest(&self) -> Value {
        read_json(&self.out.join("manifest.json"))
    }
    pub fn base_url(&self) -> String {
        self.manifest()["base_url"].as_str().unwrap().to_string()
    }
}

pub fn sample_tree(label: &str, build_args: &[&str]) -> Tree {
    let tmp = TempDir::new(label);
    let data = tmp.join("data");
    sample_data(&data);
    build_tree(tmp, data, build_args)
}

pub fn build_tree(tmp: TempDir, data: PathBuf, build_args: &[&str]) -> Tree {
    let out = tmp.join("out");
    build(&data, &out, build_args).ok();
    Tree { _tmp: tmp, data, out, build_args: build_args.iter().map(|a| a.to_string()).collect() }
}

/// A temporary folder holding `data/`, the published fixture imported, or `None` (with a
/// message) when `../shared/fixtures/api-data` is absent.
pub fn fixture_data(label: &str) -> Option<(TempDir, PathBuf)> {
    let src = fixture()?;
    let tmp = TempDir::new(label);
    let data = tmp.join("data");
    run(&["import", "api-data", src.to_str().unwrap(), "--out", data.to_str().unwrap()]).ok();
    Some((tmp, data))
}

/// Declares filters in the imported published fixture's `gen.json`: on berry, creature-form,
/// nature and language (a string, a boolean, a path through an object, one that is null in some
/// records).
pub fn declare_fixture_filters(data: &Path) {
    let path = data.join("gen.json");
    let mut config = read_json(&path);
    config["filters"] = serde_json::json!({
        "berry": {"firmness": "firmness.name", "gift-type": "natural_gift_type.name"},
        "creature-form": {"mega": "is_mega", "version-group": "version_group.name"},
        "nature": ["decreased_stat.name", "likes_flavor.name"],
        "language": {"official": "official"}
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

/// Each resource's list entries as the data folder defines them: ids in order (`order.json`,
/// else by id), with the record's name when it has one, urls absolute with `base`.
pub fn expected_lists(data: &Path, base: &str) -> BTreeMap<String, Vec<Value>> {
    let mut lists = BTreeMap::new();
    for folder in std::fs::read_dir(data).unwrap().map(|e| e.unwrap()).filter(|e| e.file_type().unwrap().is_dir()) {
        let segment = folder.file_name().to_string_lossy().to_string();
        let mut ids: Vec<i64> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter_map(|name| name.strip_suffix(".json").and_then(|id| id.parse().ok()))
            .collect();
        ids.sort_unstable();
        let order = folder.path().join("order.json");
        if order.is_file() {
            ids = serde_json::from_value(read_json(&order)).unwrap();
        }
        let entries = ids
            .iter()
            .map(|id| {
                let record = read_json(&folder.path().join(format!("{id}.json")));
                let url = Value::String(format!("{base}/api/v2/{segment}/{id}/"));
                match record.get("name") {
                    Some(name) => serde_json::json!({"name": name, "url": url}),
                    None => serde_json::json!({"url": url}),
                }
            })
            .collect();
        lists.insert(segment, entries);
    }
    lists
}

// ---------------------------------------------------------------------------------------------
// Parity: the same answers from gen serve and the hosts

/// Asks `gen serve` and every host the same requests and compares their answers.
pub struct Parity<'a> {
    pub serve: &'a Server,
    pub hosts: Vec<&'a Server>,
    pub base_url: String,
    pub asked: HashSet<(String, String)>,
    /// The hosts answer every request as `gen serve` does, any page included (edge handlers):
    /// [`Parity::serve_only`] and [`Parity::same_or_refused`] then ask for the same answer.
    pub every_page: bool,
    /// Hosts (by name) whose runtime resolves `.` and `..` segments (`%2e` too) before the
    /// handler sees the url, as the WHATWG URL parser does: each is compared with `gen serve`'s
    /// answer to the resolved target ([`resolve_dot_segments`]).
    pub resolves_dots: HashSet<String>,
    /// Hosts (by name) that read a bulk-data file from an HTTP origin that sends it with
    /// `Content-Encoding: gzip` (a bucket `gen publish` filled): the runtime's `fetch` decodes it
    /// and the handler compresses it again, so they send the same lines, not the same bytes
    /// (docs/deploy.md, "Bulk data files"): compared by their lines.
    pub recompresses_bulk: HashSet<String>,
}

impl<'a> Parity<'a> {
    pub fn new(serve: &'a Server, hosts: Vec<&'a Server>, base_url: String) -> Parity<'a> {
        Parity {
            serve,
            hosts,
            base_url,
            asked: HashSet::new(),
            every_page: false,
            resolves_dots: HashSet::new(),
            recompresses_bulk: HashSet::new(),
        }
    }

    /// A request every host supports: each answers with `gen serve`'s status and body, and the
    /// headers a host must send. Returns `gen serve`'s answer.
    pub fn same(&mut self, target: &str) -> HttpReply {
        self.same_with("GET", target)
    }

    pub fn same_with(&mut self, method: &str, target: &str) -> HttpReply {
        let expected = self.serve.request(method, target, &[]);
        if !self.asked.insert((method.to_string(), target.to_string())) {
            return expected;
        }
        for host in &self.hosts {
            let got = host.request(method, target, &[]);
            let resolved = resolve_dot_segments(target);
            let expected = if self.resolves_dots.contains(&host.name) && resolved != target {
                self.serve.request(method, &resolved, &[])
            } else {
                expected.clone()
            };
            assert!(
                (got.status, &got.body) == (expected.status, &expected.body),
                "{} and gen serve differ on {method} {target}:\n--- {}: {} {}\n--- gen serve: {} {}\n--- {} headers {:?}",
                host.name,
                host.name,
                got.status,
                short(&got.text()),
                expected.status,
                short(&expected.text()),
                host.name,
                got.headers
            );
            check_headers(host, &got, &expected, target, self.every_page);
        }
        expected
    }

    /// A bulk-data file (tree path `file` of the tree `out`): every host and `gen serve` send its
    /// bytes as they are, whether the client accepts gzip or not, with the bulk-data headers.
    pub fn bulk(&mut self, out: &Path, file: &str) {
        let bytes = std::fs::read(out.join(file)).unwrap();
        let target = format!("/{file}");
        let expected = self.serve.get(&target);
        for host in std::iter::once(self.serve).chain(self.hosts.iter().copied()) {
            for accept in [None, Some("gzip"), Some("gzip, deflate, br")] {
                let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept-Encoding", a)).into_iter().collect();
                let got = host.request("GET", &target, &headers);
                let context = format!("{} {target} (Accept-Encoding {accept:?}): {:?}", host.name, got.headers);
                assert_eq!(got.status, 200, "{context}");
                if self.recompresses_bulk.contains(&host.name) {
                    let lines = |gz: &[u8]| {
                        let mut text = Vec::new();
                        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(gz), &mut text).map(|_| text)
                    };
                    assert!(
                        lines(&got.body).ok() == lines(&bytes).ok(),
                        "{context}: not the file's lines ({} bytes, file {})",
                        got.body.len(),
                        bytes.len()
                    );
                } else {
                    assert!(
                        got.body == bytes,
                        "{context}: not the file's bytes ({} bytes, file {})",
                        got.body.len(),
                        bytes.len()
                    );
                }
                assert_eq!(got.header("content-type"), Some("application/x-ndjson"), "{context}");
                assert_eq!(got.header("content-encoding"), Some("gzip"), "{context}");
                assert_eq!(got.header("cache-control"), Some("public, max-age=31536000, immutable"), "{context}");
                assert_eq!(got.header("access-control-allow-origin"), Some("*"), "{context}");
                let exposed = expected.header("access-control-expose-headers").unwrap();
                for name in exposed.split(", ") {
                    assert_eq!(got.header(name), expected.header(name), "{name}: {context}");
                }
            }
        }
    }

    /// A request only `gen serve` answers: each host answers a JSON 404, all hosts alike.
    /// Returns `gen serve`'s answer.
    pub fn serve_only(&mut self, target: &str) -> HttpReply {
        let expected = self.serve.get(target);
        assert_eq!(expected.status, 200, "gen serve answers {target}: {}", expected.text());
        if self.every_page {
            return self.same(target);
        }
        let mut bodies = BTreeSet::new();
        for host in &self.hosts {
            let got = host.get(target);
            assert_eq!(got.status, 404, "{} on {target}: {}", host.name, got.text());
            assert!(got.json()["detail"].as_str().is_some_and(|d| d.starts_with("Not found: ")), "{}", got.text());
            check_headers(host, &got, &self.serve.get("/api/v2/no-such-resource/"), target, self.every_page);
            bodies.insert(got.body);
        }
        assert!(bodies.len() <= 1, "the hosts word {target} differently");
        expected
    }

    /// A request a static host may or may not support (other letter cases, percent-encoded
    /// values): each host answers as `gen serve` does, or with a JSON 400 or 404.
    pub fn same_or_refused(&mut self, target: &str) -> HttpReply {
        if self.every_page {
            return self.same(target);
        }
        let expected = self.serve.get(target);
        for host in &self.hosts {
            let got = host.get(target);
            if (got.status, &got.body) != (expected.status, &expected.body) {
                assert!([400, 404].contains(&got.status), "{} on {target}: {} {}", host.name, got.status, got.text());
                assert!(got.json()["detail"].is_string(), "{}", got.text());
            }
            assert_eq!(got.header("access-control-allow-origin"), Some("*"));
            assert_eq!(got.header("content-type"), Some("application/json; charset=utf-8"));
        }
        expected
    }

    /// The path and query of a url of the tree.
    pub fn target(&self, url: &str) -> String {
        url.strip_prefix(&self.base_url).unwrap_or_else(|| panic!("{url} is not under {}", self.base_url)).to_string()
    }
}

/// `target` with its path's `.` and `..` segments resolved as the WHATWG URL parser does
/// (`%2e` counts as a dot, case-insensitively; `..` never climbs above the root).
pub fn resolve_dot_segments(target: &str) -> String {
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    if !path.starts_with('/') {
        return target.to_string();
    }
    let dots = |s: &str| s.to_ascii_lowercase().replace("%2e", ".");
    let parts: Vec<&str> = path[1..].split('/').collect();
    let mut out: Vec<&str> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match dots(part).as_str() {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            _ => out.push(part),
        }
    }
    let mut resolved = format!("/{}", out.join("/"));
    if let Some(query) = query {
        resolved = format!("{resolved}?{query}");
    }
    resolved
}

/// `text`, cut for a failure message.
pub fn short(text: &str) -> String {
    if text.chars().count() <= 600 {
        text.to_string()
    } else {
        format!("{}...", text.chars().take(600).collect::<String>())
    }
}

/// The headers every answer of a host must carry, compared with `gen serve`'s where they
/// must agree. `names_ignored`: the host names the parameters a list answer ignored
/// (`Gen-Ignored`), as the edge handlers do; a static host (nginx, Caddy) cannot, and sends
/// neither that header nor its name in the expose line (docs/deploy.md).
pub fn check_headers(host: &Server, got: &HttpReply, serve: &HttpReply, target: &str, names_ignored: bool) {
    let context = format!("{} on {target}: {:?}", host.name, got.headers);
    assert!(!(300..400).contains(&got.status) || got.status == 304, "redirect: {context}");
    assert_eq!(got.header("access-control-allow-origin"), Some("*"), "{context}");
    if got.status != 204 && got.status != 304 {
        assert_eq!(got.header("content-type"), Some("application/json; charset=utf-8"), "{context}");
        assert_eq!(got.header("cache-control"), serve.header("cache-control"), "{context}");
    }
    if got.status == 200 {
        assert!(got.header("etag").is_some(), "no ETag: {context}");
    }
    if got.status == 405 || got.status == 204 {
        assert_eq!(got.header("allow"), serve.header("allow"), "{context}");
    }
    // the Link header naming the bulk-data index: with the root's answers only, as gen serve's
    assert_eq!(got.header("link"), serve.header("link"), "{context}");
    // the deploy headers, on every answer, under the names the expose line gives (gen.json's)
    let exposed = serve.header("access-control-expose-headers").unwrap_or_else(|| panic!("gen serve: {context}"));
    let names: Vec<&str> = exposed.split(", ").filter(|name| *name != "Gen-Ignored").collect();
    assert_eq!(names.len(), 2, "{exposed}");
    assert_eq!(exposed.contains("Gen-Ignored"), serve.header("gen-ignored").is_some(), "gen serve on {target}");
    if names_ignored {
        assert_eq!(got.header("access-control-expose-headers"), Some(exposed), "{context}");
        assert_eq!(got.header("gen-ignored"), serve.header("gen-ignored"), "{context}");
    } else {
        assert_eq!(got.header("access-control-expose-headers"), Some(names.join(", ").as_str()), "{context}");
        assert_eq!(got.header("gen-ignored"), None, "{context}");
    }
    for name in names {
        assert!(serve.header(name).is_some_and(|v| !v.is_empty()), "gen serve sent no {name}: {context}");
        assert_eq!(got.header(name), serve.header(name), "{name}: {context}");
    }
}

/// The `Link` header of the root answer of a tree with bulk-data files (docs/serve.md).
pub const ROOT_LINK: &str = "</api/v2/bulk-data/>; rel=\"bulk-data\"";

/// Walks the root of `server` as a client of the public API does (pokeapi's
/// `getEndpointsList`, ditto's crawl): every root entry is fetched as a list and its first
/// entry's `url` followed; each must answer 200. The bulk-data index is no root entry: the
/// root's `Link` header names it (when `bulk`), and it answers. Returns the entries walked.
pub fn walk_root_like_a_client(server: &Server, base: &str, bulk: bool) -> usize {
    let path = |url: &str| {
        url.strip_prefix(base).unwrap_or_else(|| panic!("{}: {url} is not on {base}", server.name)).to_string()
    };
    let root = server.get("/api/v2/").expect(200);
    let entries = root.json().as_object().unwrap().clone();
    assert!(!entries.is_empty(), "{}: an empty root", server.name);
    for (name, url) in &entries {
        let list = server.get(&path(url.as_str().unwrap()));
        assert_eq!(list.status, 200, "{}: root entry {name}: {}", server.name, list.text());
        let list = list.json();
        let first = list["results"][0]["url"].as_str().unwrap_or_else(|| {
            panic!("{}: root entry {name} is no list of urls: {}", server.name, short(&list.to_string()))
        });
        let record = server.get(&path(first));
        assert_eq!(record.status, 200, "{}: {name}'s first entry {first}: {}", server.name, record.text());
    }
    assert_eq!(root.header("link"), bulk.then_some(ROOT_LINK), "{}: {:?}", server.name, root.headers);
    if bulk {
        let index = server.get("/api/v2/bulk-data/").expect(200).json();
        assert_eq!(index["count"], entries.len(), "{}: one bulk-data entry per resource", server.name);
    }
    entries.len()
}

/// True for a bulk-data file's tree path (`api/v2/bulk-data/<segment>-<hash>.ndjson.gz`).
pub fn is_bulk_file(path: &str) -> bool {
    path.starts_with("api/v2/bulk-data/") && path.ends_with(".ndjson.gz")
}

/// True when the tree (whose files are `held`) holds the page that `target`, a list page's
/// link (`/api/v2/<segment>/?offset=O&limit=L` or a page file's path), names.
pub fn holds_page(held: &HashSet<String>, target: &str, count: usize) -> bool {
    let Some((list, query)) = target.split_once('?') else {
        return held.contains(&format!("{}index.json", target.trim_start_matches('/')));
    };
    let value = |key: &str| query.split('&').find_map(|pair| pair.strip_prefix(key)).unwrap().parse::<usize>().unwrap();
    let (offset, limit) = (value("offset="), value("limit="));
    let page = if offset == 0 && limit >= count { "all".to_string() } else { format!("{limit}/{offset}") };
    held.contains(&format!("{}_pages/{page}/index.json", list.trim_start_matches('/')))
}

/// The whole request set, against a running `gen serve` and hosts serving `tree`.
pub fn check_parity(tree: &Tree, p: &mut Parity) {
    let manifest = tree.manifest();
    let lists = expected_lists(&tree.data, &tree.base_url());
    let page_sizes: Vec<u64> = serde_json::from_value(manifest["page_sizes"].clone()).unwrap();
    let held: HashSet<String> = manifest["files"].as_object().unwrap().keys().cloned().collect();

    // a client walking the root finds a list in every entry, on every host
    let bulk = manifest["files"].get("api/v2/bulk-data/index.json").is_some();
    for host in std::iter::once(p.serve).chain(p.hosts.iter().copied()) {
        walk_root_like_a_client(host, &p.base_url, bulk);
    }

    // the root, both slash forms
    let root = p.same("/api/v2/").json();
    p.same("/api/v2");
    p.same_with("HEAD", "/api/v2/");
    let root = root.as_object().unwrap().clone();
    // resources only: the bulk-data index is named by meta and the Link header (check_headers)
    assert_eq!(root.keys().collect::<Vec<_>>(), lists.keys().collect::<Vec<_>>());

    for (segment, url) in &root {
        let entries = &lists[segment];
        let count = entries.len();
        let list = p.target(url.as_str().unwrap());
        p.same(list.trim_end_matches('/'));

        // the everything request, in several spellings
        for query in [
            "?limit=100000".to_string(),
            format!("?limit={count}"),
            format!("?offset=0&limit={}", count + 1),
            format!("?limit=000{count}&offset=000"),
            format!("?limit={}", u64::MAX),
        ] {
            let page = p.same(&format!("{list}{query}")).json();
            assert_eq!(page["results"].as_array().unwrap(), entries, "{segment}{query}");
            assert_eq!(page["next"], Value::Null);
        }
        p.same(&format!("{}?limit=100000", list.trim_end_matches('/')));

        // from the list root, follow next to the end for each page size; every previous too
        for &size in &page_sizes {
            let mut target = if size == 20 { list.clone() } else { format!("{list}?limit={size}") };
            let mut walked = Vec::new();
            let mut seen = HashSet::new();
            loop {
                assert!(seen.insert(target.clone()), "{target} loops");
                let page = p.same(&target).json();
                assert_eq!(page["count"], count, "{target}");
                walked.extend(page["results"].as_array().unwrap().iter().cloned());
                // every previous too; with query links, the previous of a last page whose limit
                // shrank is no file of the tree (docs/tree.md): only gen serve answers it
                if let Some(previous) = page["previous"].as_str() {
                    let previous = p.target(previous);
                    if holds_page(&held, &previous, count) {
                        p.same(&previous);
                    } else {
                        assert!(page["next"].is_null() && !previous.contains("/_pages/"), "{target} → {previous}");
                        p.serve_only(&previous);
                    }
                }
                match page["next"].as_str() {
                    Some(next) => target = p.target(next),
                    None => break,
                }
            }
            assert_eq!(&walked, entries, "{segment}: limit {size} walked");
        }

        // records by id and by name, both slash forms
        for entry in entries {
            let record = p.target(entry["url"].as_str().unwrap());
            p.same(&record);
            p.same(record.trim_end_matches('/'));
            if let Some(name) = entry["name"].as_str() {
                p.same(&format!("{list}{name}/"));
                p.same(&format!("{list}{name}"));
            }
        }
    }

    // every document of the tree (sub-documents, meta, page files by path)
    let files: Vec<String> = manifest["files"].as_object().unwrap().keys().cloned().collect();
    for file in &files {
        if is_bulk_file(file) {
            p.bulk(&tree.out, file);
            continue;
        }
        match file.strip_suffix("index.json") {
            Some(folder) => p.same(&format!("/{folder}")),
            // a document that is a file of its own (openapi.json), with or without a slash
            None => {
                p.same(&format!("/{file}/"));
                p.same(&format!("/{file}"))
            }
        };
    }

    // 404s: paths the tree does not hold, including paths of its files that are not documents
    let (first, _) = root.iter().next().unwrap();
    let count = lists[first.as_str()].len();
    for target in [
        "/".to_string(),
        "/api".to_string(),
        "/api/v2/no-such-resource/".to_string(),
        "/api/v2/no-such-resource/1/".to_string(),
        "/api/v1/".to_string(),
        "/manifest.json".to_string(),
        "/api/v2/index.json".to_string(),
        "/api/v2/index.json.gz".to_string(),
        "/api/v2/meta/x/".to_string(),
        format!("/api/v2/{first}/999999999/"),
        format!("/api/v2/{first}/no-such-name/"),
        format!("/api/v2/{first}/index.json"),
        format!("/api/v2/{first}/_pages/"),
        format!("/api/v2/{first}/_pages/20/"),
        format!("/api/v2/{first}/_pages/{}/1/", count + 7),
        format!("/api/v2/{first}/1/no-such-document/"),
        format!("/api/v2/{first}//"),
        format!("/api/v2/{first}/../../manifest.json"),
        format!("/api/v2/{first}/%2e%2e/"),
        format!("/api/v2/{first}%2F1/"),
        "/api/v2/%2e%2e/%2e%2e/etc/passwd".to_string(),
    ] {
        let reply = p.same(&target);
        assert_eq!(reply.status, 404, "gen serve on {target}: {}", reply.text());
    }

    // 400s: malformed limit and offset on every list
    for segment in root.keys() {
        for query in [
            "?limit=abc",
            "?limit=-1",
            "?limit=1.5",
            "?limit=1e3",
            "?limit=10abc&offset=0",
            "?offset=x",
            "?offset=-20",
            "?limit=y&offset=x",
            "?offset=x&limit=y",
            "?limit=18446744073709551616",
            "?offset=99999999999999999999999",
        ] {
            let reply = p.same(&format!("/api/v2/{segment}/{query}"));
            assert_eq!(reply.status, 400, "gen serve on {segment}{query}: {}", reply.text());
        }
    }

    // other methods, and a CORS preflight
    for method in ["POST", "PUT", "DELETE"] {
        assert_eq!(p.same_with(method, "/api/v2/").status, 405);
    }
    assert_eq!(p.same_with("OPTIONS", &format!("/api/v2/{first}/")).status, 204);

    // what only gen serve answers: pages the tree holds no file for, other letter cases
    let files: HashSet<&str> = files.iter().map(String::as_str).collect();
    for segment in root.keys() {
        let count = lists[segment].len() as u64;
        if count >= 2 {
            let (offset, limit) = (1, count - 1);
            assert!(!files.contains(format!("api/v2/{segment}/_pages/{limit}/{offset}/index.json").as_str()));
            let page = p.serve_only(&format!("/api/v2/{segment}/?offset={offset}&limit={limit}")).json();
            assert_eq!(page["results"].as_array().unwrap(), &lists[segment][1..]);
        }
        let upper = p.same_or_refused(&format!("/api/v2/{}/", segment.to_uppercase()));
        assert_eq!(upper.body, p.serve.get(&format!("/api/v2/{segment}/")).body);
        let record = p.target(lists[segment][0]["url"].as_str().unwrap()).to_uppercase();
        assert_eq!(p.same_or_refused(&record).status, 200);
        // percent-encoded digits: gen serve and Caddy decode them, nginx does not
        assert_eq!(p.same_or_refused(&format!("/api/v2/{segment}/?limit=%32%30")).status, 200);
    }
}
