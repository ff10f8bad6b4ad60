//! Support for the tests that talk HTTP: the one server harness ([`Server`]: the real `gen
//! serve` in a child process, or a host a test started; stopped on drop), the raw HTTP/1.1
//! client of `tests/suite/common.rs` ([`Conn`], [`Response`]), a synthetic data folder, and the paging
//! rules written out again independently of `src/paging.rs`, to derive expected pages from the
//! data.

// Shared by several test binaries: `pub` is how each reaches what it uses.
#![allow(unreachable_pub)]
#![allow(dead_code)]

pub use crate::common::{Conn, Response, http_request};
use crate::common::{TempDir, build, gen_bin, write_files};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Base URL of the synthetic trees.
pub const BASE: &str = "https://api.example.test";

/// Number of items in the synthetic data (several pages of 20 and 50).
pub const ITEMS: i64 = 130;

/// Berry names by id 1..=5 (a list of 5, for the worked example).
pub const BERRIES: [&str; 5] = ["cheri", "chesto", "pecha", "rawst", "aspear"];

/// The nameless resource's ids, in the order its order.json states.
pub const NOTE_ORDER: [i64; 4] = [2, 0, -1, 1];

/// Size of item 2's description: above tiny_http's 32 KiB chunked threshold.
pub const ITEM_2_TEXT: usize = 40 * 1024;
/// Size of item 3's description: above the server's one-write limit (256 KiB).
pub const ITEM_3_TEXT: usize = 300 * 1024;

/// Writes the synthetic data folder: `item` (130 records, named, one with a sub-document, two
/// large ones), `berry` (5 records), `note` (nameless, ids -1 to 2, custom order).
pub fn write_data(dir: &Path, page_sizes: &[u64], extra_items: i64) {
    let sizes: Vec<String> = page_sizes.iter().map(u64::to_string).collect();
    let mut files: Vec<(String, String)> =
        vec![("gen.json".into(), format!(r#"{{"base_url": "{BASE}", "page_sizes": [{}]}}"#, sizes.join(", ")))];
    for id in 1..=ITEMS + extra_items {
        let description = match id {
            2 => "a".repeat(ITEM_2_TEXT),
            3 => "b".repeat(ITEM_3_TEXT),
            _ => format!("item number {id}"),
        };
        files.push((
            format!("item/{id}.json"),
            format!(
                r#"{{"id": {id}, "name": "{}", "cost": {}, "description": "{description}"}}"#,
                item_name(id),
                id * 10
            ),
        ));
    }
    files.push((
        "item/7/flavor.json".into(),
        r#"{"text": "sweet", "item": {"name": "item-7", "url": "/api/v2/item/7/"}}"#.into(),
    ));
    for (i, name) in BERRIES.iter().enumerate() {
        let id = i as i64 + 1;
        files.push((
            format!("berry/{id}.json"),
            format!(
                r#"{{"id": {id}, "name": "{name}", "item": {{"name": "{}", "url": "/api/v2/item/{id}/"}}}}"#,
                item_name(id)
            ),
        ));
    }
    for id in NOTE_ORDER {
        files.push((format!("note/{id}.json"), format!(r#"{{"id": {id}, "text": "note {id}"}}"#)));
    }
    files.push(("note/order.json".into(), format!("{NOTE_ORDER:?}")));
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(dir, &files);
}

pub fn item_name(id: i64) -> String {
    format!("item-{id}")
}

/// The list entries of `segment` in the synthetic data: (name, id) in list order.
pub fn entries(segment: &str, extra_items: i64) -> Vec<(Option<String>, i64)> {
    match segment {
        "item" => (1..=ITEMS + extra_items).map(|id| (Some(item_name(id)), id)).collect(),
        "berry" => BERRIES.iter().enumerate().map(|(i, n)| (Some(n.to_string()), i as i64 + 1)).collect(),
        "note" => NOTE_ORDER.iter().map(|&id| (None, id)).collect(),
        other => panic!("no segment {other} in the synthetic data"),
    }
}

/// The page the public API answers for `?offset=&limit=` (already defaulted), derived from the
/// rules as documented: entries [offset, offset+limit); next when entries remain, with the last
/// page's limit shrunk; previous unless offset is 0, never before 0 nor longer than offset.
pub fn expected_page(segment: &str, list: &[(Option<String>, i64)], offset: u64, limit: u64) -> serde_json::Value {
    let count = list.len() as u64;
    let url = |o: u64, l: u64| format!("{BASE}/api/v2/{segment}/?offset={o}&limit={l}");
    let end = offset.saturating_add(limit);
    let next = (end < count).then(|| url(end, limit.min(count - end)));
    let previous = (offset > 0).then(|| url(offset.saturating_sub(limit), limit.min(offset)));
    let results: Vec<serde_json::Value> = list
        .iter()
        .skip(offset.min(count) as usize)
        .take(limit.min(count) as usize)
        .map(|(name, id)| {
            let url = format!("{BASE}/api/v2/{segment}/{id}/");
            match name {
                Some(name) => serde_json::json!({ "name": name, "url": url }),
                None => serde_json::json!({ "url": url }),
            }
        })
        .collect();
    serde_json::json!({ "count": count, "next": next, "previous": previous, "results": results })
}

/// A data folder and the tree built from it, in one temporary folder.
pub struct Site {
    pub tmp: TempDir,
}

impl Site {
    /// Writes the synthetic data with `page_sizes` and builds it with `build_args`.
    pub fn new(label: &str, page_sizes: &[u64], build_args: &[&str]) -> Site {
        let site = Site { tmp: TempDir::new(label) };
        write_data(&site.data(), page_sizes, 0);
        site.build(build_args);
        site
    }

    pub fn data(&self) -> PathBuf {
        self.tmp.join("data")
    }

    pub fn out(&self) -> PathBuf {
        self.tmp.join("out")
    }

    /// Builds data/ into out/.
    pub fn build(&self, build_args: &[&str]) {
        let mut args = vec!["--quiet"];
        args.extend_from_slice(build_args);
        build(&self.data(), &self.out(), &args).ok();
    }

    /// A file of the built tree.
    pub fn file(&self, rel: &str) -> Vec<u8> {
        let path = self.out().join(rel);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// A running server under test, stopped on drop: `gen serve` (started here), or a host such as
/// nginx or Caddy that a test started ([`Server::adopt`]). The one server harness of the tests.
pub struct Server {
    /// What it is, for messages: `gen serve`, `nginx`, `caddy`.
    pub name: String,
    child: Child,
    /// `127.0.0.1:PORT`
    pub addr: String,
    log: Log,
    /// SIGTERM first on drop (a host's master process stops its workers), then SIGKILL.
    terminate_first: bool,
    _stdout: Option<BufReader<std::process::ChildStdout>>,
    _dir: Option<TempDir>,
}

/// Where a server's messages go.
enum Log {
    /// Its stderr, collected as it comes.
    Collected(Arc<Mutex<String>>),
    /// A file it writes.
    File(PathBuf),
}

impl Server {
    /// Starts `gen serve --dir <dir> --addr 127.0.0.1:0 --quiet <args>`.
    pub fn start(dir: &Path, args: &[&str]) -> Server {
        let mut all = vec!["--quiet"];
        all.extend_from_slice(args);
        Server::start_with(dir, &all, None)
    }

    /// Starts `gen serve --dir <dir> --addr 127.0.0.1:0 --keep-urls <args>` (answers are the
    /// tree's bytes), under `ulimit -n` when given.
    pub fn start_with(dir: &Path, args: &[&str], open_files: Option<u32>) -> Server {
        let mut all = vec!["--keep-urls"];
        all.extend_from_slice(args);
        Server::spawn(dir, &all, open_files, None)
    }

    /// Starts `gen serve --dir <dir> --addr 127.0.0.1:0 <args>` as a user would: urls rebased
    /// onto the served address, messages on stderr.
    pub fn start_preview(dir: &Path, args: &[&str]) -> Server {
        Server::spawn(dir, args, None, None)
    }

    /// [`Server::start_preview`] run from the folder `cwd` (`dir` and the paths of `args` may
    /// be relative to it), as a user standing there.
    pub fn start_preview_in(cwd: &Path, dir: &Path, args: &[&str]) -> Server {
        Server::spawn(dir, args, None, Some(cwd))
    }

    /// A host the caller started, listening on `addr` and writing its messages to `log`; `dir`
    /// (its files) is removed after it stops.
    pub fn adopt(name: &str, child: Child, addr: &str, log: &Path, dir: TempDir) -> Server {
        Server {
            name: name.to_string(),
            child,
            addr: addr.to_string(),
            log: Log::File(log.to_path_buf()),
            terminate_first: true,
            _stdout: None,
            _dir: Some(dir),
        }
    }

    fn spawn(dir: &Path, args: &[&str], open_files: Option<u32>, cwd: Option<&Path>) -> Server {
        let mut serve_args = vec!["serve", "--dir", dir.to_str().unwrap(), "--addr", "127.0.0.1:0"];
        serve_args.extend_from_slice(args);
        let mut command = match open_files {
            None => gen_bin(),
            Some(n) => {
                let mut command = std::process::Command::new("sh");
                command.arg("-c").arg(format!("ulimit -n {n} && exec \"$0\" \"$@\"")).arg(env!("CARGO_BIN_EXE_gen"));
                command
            }
        };
        command.args(&serve_args);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        // SIGINT as a terminal gives it: a test run started in the background by a shell (as a
        // CI script may be) inherits SIGINT ignored, and `gen serve` would inherit that too.
        // SAFETY: signal() is async-signal-safe, called in the child between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("gen serve starts");
        let stderr = collect(child.stderr.take().unwrap());
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let mut server = Server {
            name: "gen serve".into(),
            child,
            addr: String::new(),
            log: Log::Collected(stderr),
            terminate_first: false,
            _stdout: None,
            _dir: None,
        };
        let Some(addr) = line.trim().strip_prefix("http://") else {
            std::thread::sleep(Duration::from_millis(200));
            panic!("gen serve printed {line:?} first, not its address; stderr:\n{}", server.log())
        };
        server.addr = addr.to_string();
        server._stdout = Some(stdout);
        server
    }

    /// What the server has said so far: its stderr, or its log file.
    pub fn log(&self) -> String {
        match &self.log {
            Log::Collected(text) => text.lock().unwrap().clone(),
            Log::File(path) => std::fs::read_to_string(path).unwrap_or_default(),
        }
    }

    /// The same as [`Server::log`], the older name.
    pub fn stderr(&self) -> String {
        self.log()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to end (after a signal), at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new connection to the server.
    pub fn connect(&self) -> Conn {
        Conn::new(TcpStream::connect(&self.addr).expect("connects to the server"))
    }

    /// `GET target` on a new connection ([`Server::request`]).
    pub fn get(&self, target: &str) -> Response {
        self.request("GET", target, &[])
    }

    /// `GET target` with extra header lines (each `Name: value`).
    pub fn get_with(&self, target: &str, headers: &[&str]) -> Response {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|line| line.split_once(':').map(|(n, v)| (n.trim(), v.trim())).expect("a header line `Name: value`"))
            .collect();
        self.request("GET", target, &headers)
    }

    /// `method target` with `headers` and `Connection: close` on a new connection
    /// ([`http_request`]); the server's log is shown when it fails.
    pub fn request(&self, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
        http_request(self.addr.as_str(), method, target, headers)
            .unwrap_or_else(|e| panic!("{} {method} {target}: {e}\n--- log\n{}", self.name, self.log()))
    }

    /// Sends a raw request on a new connection and reads one response (`head_only` for HEAD).
    pub fn send(&self, raw: &str, head_only: bool) -> Response {
        let mut conn = self.connect();
        conn.send(raw.as_bytes());
        conn.read_response(head_only).unwrap_or_else(|e| panic!("no response to {raw:?}: {e}\n{}", self.log()))
    }
}

/// Collects everything read from `pipe` on a thread of its own.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.terminate_first {
            let _ = std::process::Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
            if self.wait_exit(Duration::from_secs(5)).is_some() {
                return;
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Retries `check` every 50 ms until it holds or `limit` passes.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The ways a file of a tree is damaged by hand (issue 47 item 7), each of which `gen serve`
/// answers 503 for: its bytes edited in place, the file removed, replaced by a link to the same
/// bytes elsewhere, replaced by a folder.
pub const DAMAGES: [Damage; 4] = [Damage::Edited, Damage::Removed, Damage::Linked, Damage::Folder];

/// One way a file of a tree is damaged by hand (see [`DAMAGES`]).
#[derive(Debug, Clone, Copy)]
pub enum Damage {
    Edited,
    Removed,
    Linked,
    Folder,
}

impl Damage {
    /// Damages the file `rel` of the tree `out`; a link's target is written under `scratch`.
    pub fn apply(self, out: &Path, rel: &str, scratch: &Path) {
        let file = out.join(rel);
        let bytes = std::fs::read(&file).unwrap();
        match self {
            Damage::Edited => std::fs::write(&file, br#"{"id": 0, "edited": true}"#).unwrap(),
            Damage::Removed => std::fs::remove_file(&file).unwrap(),
            Damage::Linked => {
                let target = scratch.join(rel.replace('/', "-"));
                std::fs::create_dir_all(scratch).unwrap();
                std::fs::write(&target, &bytes).unwrap();
                std::fs::remove_file(&file).unwrap();
                std::os::unix::fs::symlink(&target, &file).unwrap();
            }
            Damage::Folder => {
                std::fs::remove_file(&file).unwrap();
                std::fs::create_dir(&file).unwrap();
            }
        }
    }
}

/// Asserts that `server` answers `target` as it answers a damaged file of its tree: 503, with a
/// JSON detail naming the file and `gen build --verify`, not to be stored.
pub fn assert_damaged(server: &Server, target: &str, rel: &str) {
    let response = server.get(target);
    assert_eq!(response.status, 503, "{target}: {}", response.text());
    assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"), "{target}");
    assert_eq!(response.header("Cache-Control"), Some("no-store"), "{target}");
    let detail = response.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains(rel) && detail.contains("gen build --verify"), "{target}: {detail}");
}
