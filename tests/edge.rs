//! `gen config cloudflare|deno|node`, the edge handler, in the real runtimes: workerd (through
//! miniflare) reading the tree from an R2 bucket and from an HTTP origin, Deno and Node reading
//! it from an HTTP origin. Each answers the parity set of `tests/hosts.rs` (`tests/parity`) and
//! at least 200 random `(limit, offset)` pairs the tree holds no file for with the same status
//! and body as `gen serve --keep-urls`, on the sample data and on the published fixture.
//!
//! The origin is a bare static store (`tests/tools/static-origin.mjs`: files at their paths,
//! query strings ignored). Each runtime is one process per tree, on a free loopback port, stopped
//! (with its process group: miniflare runs workerd as a child) when the test ends. `make test`
//! installs miniflare and Deno under target/edge-runtimes (`tests/tools/edge-runtimes.sh`);
//! without them the tests fail under CI, else skip saying so. workerd and Deno skip under
//! GEN_QUICK; Node runs in the quick tier.

mod common;
mod parity;
mod serve_support;

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
    use std::os::unix::process::CommandExt;
    let server = start_host(name, out, |dir, port| {
        let log = dir.join("log");
        let file = std::fs::File::create(&log).unwrap();
        let child: Child = Command::new(program)
            .args(args_for(port))
            .envs(env_for(port))
            .env("NO_COLOR", "1")
            .env("DENO_DIR", dir.join("deno"))
            .current_dir(dir)
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
    let script = project().join("tests/tools/static-origin.mjs");
    let out_arg = out.to_str().unwrap().to_string();
    start_runtime(
        "origin",
        out,
        node,
        |port| vec![script.to_str().unwrap().to_string(), out_arg.clone(), port.to_string()],
        |_| vec![],
    )
}

/// Every runtime that is installed, serving `tree` with the handler `gen config` prints with
/// `options`; the HTTP ones read `origin`.
fn start_runtimes(tree: &Tree, origin: &Runtime, files: &TempDir, options: &[&str]) -> Vec<Runtime> {
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

    let handler = handler_file("node", out, options, files.path(), "handler.mjs");
    runtimes.push(start_runtime("node", out, &node, |_| vec![handler.to_str().unwrap().to_string()], env));

    if let Some(deno) = deno() {
        let handler = handler_file("deno", out, options, files.path(), "deno.js");
        let args = |_| {
            ["run", "--allow-net", "--allow-env", "--no-prompt", handler.to_str().unwrap()].map(String::from).to_vec()
        };
        runtimes.push(start_runtime("deno", out, &deno, args, env));
    }

    if miniflare().is_some() {
        let worker = handler_file("cloudflare", out, options, files.path(), "worker.js");
        let runner = project().join("tests/tools/miniflare-run.mjs");
        for (name, mode, place) in
            [("workerd-origin", "origin", origin_url.clone()), ("workerd-r2", "r2", out.to_str().unwrap().to_string())]
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

/// The parity set and the random pages against every installed runtime, for `tree`, with
/// `options` given to `gen serve` and `gen config` alike.
fn edge_parity(tree: &Tree, options: &[&str]) {
    let Some(node) = node() else { return };
    let files = TempDir::new("edge-handlers");
    let origin = start_origin(&node, &tree.out);
    let runtimes = start_runtimes(tree, &origin, &files, options);
    let serve = start_serve(&tree.out, options);
    let mut p = Parity::new(&serve, runtimes.iter().map(|r| &r.server).collect(), tree.base_url());
    p.every_page = true;
    // these see the url as their URL parser resolved it (`/a/../b` is `/b`), as a CDN does
    p.resolves_dots = ["deno", "workerd-origin", "workerd-r2"].map(String::from).into();
    let started = Instant::now();
    check_parity(tree, &mut p);
    check_random_pages(tree, &mut p, 200);
    let names: Vec<&str> = runtimes.iter().map(|r| r.server.name.as_str()).collect();
    eprintln!(
        "{} requests answered alike by gen serve and {} in {:.1?}",
        p.asked.len(),
        names.join(", "),
        started.elapsed()
    );
}

#[test]
fn edge_handlers_answer_as_gen_serve_does() {
    // a Cache-Control other than the default, set alike on both
    edge_parity(&sample_tree("edge-parity", &[]), &["--max-age", "120"]);
}

#[test]
fn edge_handlers_answer_as_gen_serve_does_with_path_links_pretty() {
    edge_parity(&sample_tree("edge-parity-path", &["--links", "path", "--pretty", "--gzip"]), &[]);
}

#[test]
fn edge_handlers_answer_as_gen_serve_does_on_the_published_data() {
    let Some((tmp, data)) = fixture_data("edge-parity-fixture") else { return };
    edge_parity(&build_tree(tmp, data, &[]), &[]);
}
