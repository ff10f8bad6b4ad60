//! Support for the `gen serve` tests: the real server in a child process (killed on drop), a
//! raw HTTP/1.1 client over `TcpStream`, a synthetic data folder, and the paging rules written
//! out again independently of `src/paging.rs`, to derive expected pages from the data.
#![allow(dead_code)]

use crate::common::{TempDir, gen_bin, run, write_files};
use std::io::{BufRead, BufReader, Read, Write};
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
        let (data, out) = (self.data(), self.out());
        let mut args = vec!["build", "--quiet", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend_from_slice(build_args);
        run(&args).ok();
    }

    /// A file of the built tree.
    pub fn file(&self, rel: &str) -> Vec<u8> {
        let path = self.out().join(rel);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// A running `gen serve`, killed on drop. Its stderr is collected as it comes.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`
    pub addr: String,
    stderr: Arc<Mutex<String>>,
    _stdout: BufReader<std::process::ChildStdout>,
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
        Server::spawn(dir, &all, open_files)
    }

    /// Starts `gen serve --dir <dir> --addr 127.0.0.1:0 <args>` as a user would: urls rebased
    /// onto the served address, messages on stderr.
    pub fn start_preview(dir: &Path, args: &[&str]) -> Server {
        Server::spawn(dir, args, None)
    }

    fn spawn(dir: &Path, args: &[&str], open_files: Option<u32>) -> Server {
        let mut serve_args = vec!["serve", "--dir", dir.to_str().unwrap(), "--addr", "127.0.0.1:0"];
        serve_args.extend_from_slice(args);
        let mut command = match open_files {
            None => {
                let mut command = gen_bin();
                command.args(&serve_args);
                command
            }
            Some(n) => {
                let mut command = std::process::Command::new("sh");
                command.arg("-c").arg(format!("ulimit -n {n} && exec \"$0\" \"$@\"")).arg(env!("CARGO_BIN_EXE_gen"));
                command.args(&serve_args);
                command
            }
        };
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("gen serve starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let stderr = stderr.clone();
            let mut pipe = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    stderr.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("http://").unwrap_or_else(|| {
            std::thread::sleep(Duration::from_millis(200));
            panic!("gen serve printed {line:?} first, not its address; stderr:\n{}", stderr.lock().unwrap())
        });
        Server { addr: addr.to_string(), child, stderr, _stdout: stdout }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to end (after a signal), at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// A new connection to the server.
    pub fn connect(&self) -> Conn {
        Conn::new(TcpStream::connect(&self.addr).expect("connects to gen serve"))
    }

    /// `GET target` on a new connection.
    pub fn get(&self, target: &str) -> Response {
        self.send(&format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n"), false)
    }

    /// `GET target` with extra header lines (each `Name: value`).
    pub fn get_with(&self, target: &str, headers: &[&str]) -> Response {
        let mut request = format!("GET {target} HTTP/1.1\r\nHost: x\r\n");
        for header in headers {
            request.push_str(header);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        self.send(&request, false)
    }

    /// Sends a raw request on a new connection and reads one response (`head_only` for HEAD).
    pub fn send(&self, raw: &str, head_only: bool) -> Response {
        let mut conn = self.connect();
        conn.send(raw.as_bytes());
        conn.read_response(head_only).unwrap_or_else(|e| panic!("no response to {raw:?}: {e}\n{}", self.stderr()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One client connection, reading responses as they come (keep-alive, pipelining).
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn { reader: BufReader::new(stream) }
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    /// `GET target` on this connection.
    pub fn get(&mut self, target: &str) -> Response {
        self.send(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        self.read_response(false).expect("a response")
    }

    /// Sends a GET for `target` and reads its response, or the error that stopped it.
    pub fn read_response_to(&mut self, target: &str) -> std::io::Result<Response> {
        let request = format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n");
        self.stream().try_clone()?.write_all(request.as_bytes())?;
        self.read_response(false)
    }

    /// Reads one response: the head, then a body by Content-Length, chunks, or up to EOF.
    pub fn read_response(&mut self, head_only: bool) -> std::io::Result<Response> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        let status_line = line.trim_end().to_string();
        let status: u16 = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            panic!("not a status line: {status_line:?}");
        });
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let trimmed = line.trim_end_matches(['\r', '\n']);
            if trimmed.is_empty() {
                break;
            }
            let (name, value) = trimmed.split_once(':').expect("a header line");
            headers.push((name.to_string(), value.trim().to_string()));
        }
        let mut response = Response { status, status_line, headers, body: Vec::new() };
        if head_only || status == 204 || status == 304 {
            return Ok(response);
        }
        if let Some(length) = response.header("Content-Length") {
            let mut body = vec![0; length.parse().unwrap()];
            self.reader.read_exact(&mut body)?;
            response.body = body;
        } else if response.header("Transfer-Encoding").is_some_and(|t| t.contains("chunked")) {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                response.body.extend_from_slice(&chunk[..size]);
            }
        } else {
            self.reader.read_to_end(&mut response.body)?;
        }
        Ok(response)
    }

    /// True when the server has closed the connection (reads EOF) within `limit`.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        self.stream().set_read_timeout(Some(limit)).unwrap();
        let mut byte = [0u8; 1];
        matches!(self.reader.read(&mut byte), Ok(0))
    }
}

/// A response as read off the wire.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }

    /// Asserts the status, showing the response otherwise.
    pub fn expect(self, status: u16) -> Response {
        assert_eq!(self.status, status, "{}\n{:?}\n{}", self.status_line, self.headers, self.text());
        self
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
