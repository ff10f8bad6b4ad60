//! Helpers shared by the integration tests: temporary folders, running the real binary,
//! writing data folders, reading trees, an HTTP client and its one response type, and the skip
//! policy (missing tools, the quick tier).

// Shared by several test binaries: `pub` is how each reaches what it uses.
#![allow(unreachable_pub)]
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A temporary folder, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("gen-test-{}-{label}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        make_writable(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten() {
        if entry.file_type().is_dir() {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// The deploy date every test build is given (`SOURCE_DATE_EPOCH`), so that trees built in
/// different seconds compare equal; a test of the clock's date removes it.
pub const TEST_EPOCH: &str = "1786004122";

/// The `gen` binary under test, with [`TEST_EPOCH`] as `SOURCE_DATE_EPOCH`.
pub fn gen_bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gen"));
    command.env("SOURCE_DATE_EPOCH", TEST_EPOCH);
    command
}

/// Runs `gen` with `args`; the result explains itself when a test fails.
pub fn run(args: &[&str]) -> Run {
    let output = gen_bin().args(args).output().expect("the gen binary runs");
    Run { args: args.iter().map(|s| s.to_string()).collect(), output }
}

/// The outcome of one run of `gen`.
pub struct Run {
    pub args: Vec<String>,
    pub output: Output,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).to_string()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).to_string()
    }
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }
    fn describe(&self) -> String {
        format!("gen {}\n--- stdout\n{}--- stderr\n{}", self.args.join(" "), self.stdout(), self.stderr())
    }
    /// Asserts success and returns self.
    pub fn ok(self) -> Run {
        assert!(self.output.status.success(), "expected success:\n{}", self.describe());
        self
    }
    /// Asserts the exit code and returns self.
    pub fn fails_with(self, code: i32) -> Run {
        assert_eq!(self.code(), Some(code), "expected exit code {code}:\n{}", self.describe());
        self
    }
}

/// Runs `gen build --data <data> --out <out> <extra>`. Assert with `.ok()` or `.fails_with(n)`:
/// a failure shows the command and both outputs.
pub fn build(data: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["build", "--data", utf8(data), "--out", utf8(out)];
    args.extend_from_slice(extra);
    run(&args)
}

/// Like [`build`], with `env` set for `gen`.
pub fn build_with(data: &Path, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec!["build", "--data", utf8(data), "--out", utf8(out)];
    args.extend_from_slice(extra);
    let output = gen_bin().args(&args).envs(env.iter().copied()).output().expect("the gen binary runs");
    Run { args: args.iter().map(|s| s.to_string()).collect(), output }
}

/// The state file `name` (`index`, `bulk`, `extract`, `journal`) a build keeps for the tree in
/// `out`: in its state folder beside it, `.<out>.gen/` (docs/builds.md, "The build's state").
pub fn state_file(out: &Path, name: &str) -> PathBuf {
    let folder = format!(".{}.gen", out.file_name().unwrap().to_str().unwrap());
    out.parent().unwrap().join(folder).join(name)
}

/// `path` as text, for an argument; the tests' temporary paths are UTF-8.
pub fn utf8(path: &Path) -> &str {
    path.to_str().unwrap_or_else(|| panic!("{} is not UTF-8", path.display()))
}

/// Writes `files` (relative path → text) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, String)]) {
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Every file under `dir`: relative path → bytes.
pub fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(dir).unwrap().to_string_lossy().to_string();
            files.insert(rel, std::fs::read(entry.path()).unwrap());
        }
    }
    files
}

/// The sample data built in a fresh temporary folder: `data/`, its tree `out/` (when asked
/// for) and its archive `archive/`, made by the real `gen build` and `gen build --archive`.
pub struct BuiltSample {
    pub tmp: TempDir,
    pub data: PathBuf,
    pub out: PathBuf,
    pub archive: PathBuf,
}

/// [`sample_data`] in a new folder named after `name`, built as an archive and, with `tree`,
/// as a tree too (the setup the archive's build and serve tests share).
pub fn built_sample(name: &str, tree: bool) -> BuiltSample {
    let tmp = TempDir::new(name);
    let (data, out, archive) = (tmp.join("data"), tmp.join("out"), tmp.join("archive"));
    sample_data(&data);
    if tree {
        build(&data, &out, &[]).ok();
    }
    build(&data, &archive, &["--archive"]).ok();
    BuiltSample { tmp, data, out, archive }
}

/// Parses a JSON file of a tree.
pub fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A small synthetic data folder with the shapes real data has: a list longer than several
/// pages, a nameless resource, ids 0 and -1, sparse ids, a custom order, a sub-document,
/// references between resources.
pub fn sample_data(dir: &Path) {
    let mut files: Vec<(String, String)> = vec![(
        "gen.json".into(),
        r#"{"base_url": "http://127.0.0.1:8080", "page_sizes": [20, 50, 100], "external": ["item"],
            "filters": {"berry": {"firmness": "firmness.name", "size": "size"}, "effect": ["appeal"]}}"#
            .into(),
    )];
    for id in 1..=5 {
        files.push((
            format!("firmness/{id}.json"),
            format!(r#"{{"id": {id}, "name": "firm-{id}", "names": [{{"name": "Fest {id} ü", "language": "de"}}]}}"#),
        ));
    }
    // 137 berries: ids 1..=120 and 1001..=1017 (sparse), referencing a firmness and an item.
    for id in (1..=120).chain(1001..=1017) {
        let firmness = id % 5 + 1;
        files.push((
            format!("berry/{id}.json"),
            format!(
                r#"{{"id": {id}, "name": "berry-{id}", "size": {id}.5, "firmness": {{"name": "firm-{firmness}", "url": "/api/v2/firmness/{firmness}/"}}, "item": {{"name": "item-{id}", "url": "/api/v2/item/{id}/"}}, "effect": {{"url": "/api/v2/effect/{}/"}}}}"#,
                id % 3 + 1
            ),
        ));
    }
    for id in 1..=3 {
        files.push((format!("effect/{id}.json"), format!(r#"{{"id": {id}, "appeal": {id}}}"#)));
    }
    for id in [-1, 0, 1, 2] {
        files.push((format!("ailment/{id}.json"), format!(r#"{{"id": {id}, "name": "ailment{}"}}"#, id + 1)));
    }
    // forms listed in an order that is not id order
    for id in [1, 2, 3, 10001, 10002] {
        files.push((format!("form/{id}.json"), format!(r#"{{"id": {id}, "name": "form-{id}"}}"#)));
    }
    files.push(("form/order.json".into(), "[1, 10001, 2, 10002, 3]".into()));
    files.push((
        "creature/7.json".into(),
        r#"{"id": 7, "name": "squirt", "encounters": "/api/v2/creature/7/encounters"}"#.into(),
    ));
    files.push((
        "creature/7/encounters.json".into(),
        r#"[{"area": {"name": "ailment1", "url": "/api/v2/ailment/0/"}, "chance": 5}]"#.into(),
    ));
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(dir, &files);
}

/// One HTTP/1.1 response as read off the socket: the one response type of the tests.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub status_line: String,
    /// Header names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked but not decompressed.
    pub body: Vec<u8>,
}

/// The old name of [`Response`], kept for compatibility.
pub type HttpReply = Response;

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text, for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: not JSON: {}", self.text()))
    }

    /// Asserts the status, showing the response otherwise.
    pub fn expect(self, status: u16) -> Response {
        assert_eq!(self.status, status, "{}\n{:?}\n{}", self.status_line, self.headers, self.text());
        self
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

    /// Reads one response: the head, then a body by Content-Length, chunks, or up to EOF
    /// (none for `head_only`, the answer to HEAD, nor for 204 and 304).
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
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let mut response = Response { status, status_line, headers, body: Vec::new() };
        if head_only || status == 204 || status == 304 {
            return Ok(response);
        }
        if let Some(length) = response.header("Content-Length") {
            let length = length.parse().map_err(|_| invalid_data(&format!("Content-Length {length:?}")))?;
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body)?;
            response.body = body;
        } else if response.header("Transfer-Encoding").is_some_and(|t| t.contains("chunked")) {
            response.body = self.read_chunks()?;
        } else {
            self.reader.read_to_end(&mut response.body)?;
        }
        Ok(response)
    }

    /// A chunked body, de-chunked (chunk extensions ignored).
    fn read_chunks(&mut self) -> std::io::Result<Vec<u8>> {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| invalid_data(&format!("chunk size {line:?}")))?;
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk)?;
            if size == 0 {
                return Ok(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }

    /// True when the server has closed the connection (reads EOF) within `limit`.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        self.stream().set_read_timeout(Some(limit)).unwrap();
        let mut byte = [0u8; 1];
        matches!(self.reader.read(&mut byte), Ok(0))
    }
}

fn invalid_data(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// Sends one request exactly as given (the target is not normalised or encoded) with
/// `Connection: close` on a new connection to `addr`, and reads the whole response.
pub fn http_request(
    addr: impl ToSocketAddrs,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let addr = addr.to_socket_addrs()?.next().ok_or_else(|| invalid_data("no address"))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    let mut conn = Conn::new(stream);
    conn.stream().set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut request = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    conn.reader.get_mut().write_all(request.as_bytes())?;
    conn.read_response(method == "HEAD")
}

/// A loopback port that was free a moment ago (bound to port 0, read, released). Whoever
/// starts a server on it must retry with another when it is taken meanwhile.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().unwrap().port()
}

/// The one skip policy of the tests: a missing tool or fixture fails the test when `CI` is set
/// (CI always has them), and otherwise skips it with a message that says what to install.
/// Returns `None` to the caller, which then returns.
pub fn unavailable<T>(what: &str, how_to_get_it: &str) -> Option<T> {
    if under_ci() {
        panic!("{what} is missing, and CI must run this test: {how_to_get_it}");
    }
    eprintln!("skipped: {what} is missing; {how_to_get_it} (under CI=true this fails)");
    None
}

fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Runs `gen args` with `env` set and returns how it ended and its peak resident memory in
/// bytes (its `VmHWM`, read from `/proc` every millisecond until it ends), output read from files
/// so that no pipe fills.
///
/// Not `wait4`'s `ru_maxrss`: Linux records there, at `exec`, the high-water mark of the memory
/// the child replaced, which for a child spawned by this test binary is the test binary's own
/// (every test runs in one process, some holding hundreds of MB). `VmHWM` is the mark of the
/// memory the child's `exec` made, so it counts gen alone; it only grows, so the last reading
/// before gen ends misses at most what it grew in its last millisecond.
pub fn peak_memory(args: &[&str], env: &[(&str, &str)]) -> (Run, u64) {
    let dir = TempDir::new("peak-memory");
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = gen_bin()
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("the gen binary runs");
    let status_file = format!("/proc/{}/status", child.id());
    let high_water = || -> Option<u64> {
        let status = std::fs::read_to_string(&status_file).ok()?;
        let kb = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim();
        kb.parse::<u64>().ok().map(|kb| kb * 1024)
    };
    let mut peak = 0;
    let status = loop {
        // read before asking whether it ended: the last reading is of the live process
        peak = peak.max(high_water().unwrap_or(0));
        if let Some(status) = child.try_wait().expect("waiting for gen") {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert!(peak > 0, "no VmHWM was read from {status_file}: is /proc mounted?");
    let output = Output { status, stdout: std::fs::read(&out).unwrap(), stderr: std::fs::read(&err).unwrap() };
    (Run { args: args.iter().map(|s| s.to_string()).collect(), output }, peak)
}

/// The quick tier (`make test-quick` sets `GEN_QUICK=1`) leaves out the tests that need a
/// heavy outside tool (the host servers, Chromium, the Python tools) or run long (the published
/// fixture, kill and concurrency runs). Their gates call this first, `why` saying which it is:
/// `None`, after saying the test is skipped, in the quick tier; `Some(())` otherwise. Under `CI`
/// nothing is left out.
pub fn heavy(why: &str) -> Option<()> {
    let quick = std::env::var_os("GEN_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    if quick && !under_ci() {
        eprintln!("skipped by the quick tier (GEN_QUICK): {why}; `make test` runs it");
        return None;
    }
    Some(())
}

/// The published fixture `../shared/fixtures/api-data`, or `None` under [`heavy`]'s and
/// [`unavailable`]'s policy.
pub fn fixture() -> Option<PathBuf> {
    heavy("it reads the published fixture")?;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/api-data");
    if path.join("api/v2").is_dir() {
        Some(path)
    } else {
        unavailable(
            &format!("the published fixture {}", path.display()),
            "check out the shared folder beside the project (../shared)",
        )
    }
}

/// The program `name` on PATH or in the usual system folders, or `None` under [`heavy`]'s and
/// [`unavailable`]'s policy. Tests never install anything: `make test` does.
pub fn tool(name: &str) -> Option<PathBuf> {
    heavy(&format!("it needs {name}"))?;
    find_tool(name).or_else(|| {
        unavailable(name, "run `make test`, which installs it from Debian's packages (tests/tools/install-hosts.sh)")
    })
}

/// The program `name` on PATH or in the usual system folders, if there; no skip policy.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A small deterministic generator (xorshift64*) for the randomised tests, so they need no
/// dependency and a seed replays a run exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The seed of a randomised test named `label`: `FUZZ_SEED` when set (to replay a run), a fresh
/// one under `make fuzz` (`FUZZ_ITERATIONS` set), else `fixed`, so that a failure in `make test`
/// replays exactly. Printed, with how to replay it.
pub fn seed(label: &str, fixed: u64) -> u64 {
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        if std::env::var("FUZZ_ITERATIONS").is_ok() {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        } else {
            fixed
        }
    });
    eprintln!("{label} seed {seed} (replay with FUZZ_SEED={seed})");
    seed
}

// ---------------------------------------------------------------------------------------------
// Commands that may hang or eat memory on hostile files

/// Longest any one command may take here: a command that reads `/dev/zero` for ever or waits
/// on a FIFO is killed at this point, and the test fails instead of hanging the suite.
pub const GUARD: Duration = Duration::from_secs(60);

/// Address space a command may use (`ulimit -v`, KiB): reading `/dev/zero` unboundedly fails
/// against it at once instead of eating the machine's memory.
pub const MEMORY_KB: u64 = 4 << 20;

/// How a guarded command ended.
pub struct Ended {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// True when it had to be killed at [`GUARD`].
    pub killed: bool,
}

impl Ended {
    pub fn describe(&self) -> String {
        format!("exit {:?}, killed {}\n--- stdout\n{}--- stderr\n{}", self.code, self.killed, self.stdout, self.stderr)
    }
}

/// Runs `gen args` under a memory limit, killing it after [`GUARD`].
pub fn guarded(args: &[&str]) -> Ended {
    finish_guarded(spawn_guarded(args, &[]))
}

/// Runs `gen args` (a build) as [`guarded`] does, paused between its load and its render from
/// outside, with no hook in the binary: without `SOURCE_DATE_EPOCH`, a build whose data changed
/// asks git for the data's last commit (its deploy date) once its load is done and before it
/// renders (src/build.rs, `deploy_date`). The build runs with a `git` of the test's first on its
/// `PATH`, which at its first call creates `<pause>.reached` and waits while `pause` exists,
/// then answers as git does outside a repository. The test runs `meanwhile` in the pause (to
/// change the data between the build's two reads of it), then lets the build go on. No timing is
/// relied on: the build is held in that call when `meanwhile` runs.
pub fn guarded_paused(args: &[&str], pause: &Path, meanwhile: impl FnOnce()) -> Ended {
    std::fs::write(pause, b"").unwrap();
    let reached = PathBuf::from(format!("{}.reached", pause.display()));
    let _ = std::fs::remove_file(&reached);
    let bin = PathBuf::from(format!("{}.bin", pause.display()));
    std::fs::create_dir_all(&bin).unwrap();
    let git = bin.join("git");
    let script = format!(
        "#!/bin/sh\n[ -e '{reached}' ] && exit 128\n: > '{reached}'\nwhile [ -e '{pause}' ]; do sleep 0.01; done\nexit 128\n",
        reached = reached.display(),
        pause = pause.display()
    );
    std::fs::write(&git, script).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut spawned = spawn_guarded(args, &[("PATH", &path), ("SOURCE_DATE_EPOCH", "")]);
    let started = std::time::Instant::now();
    while !reached.exists() {
        let ended = spawned.0.try_wait().unwrap().is_some();
        assert!(!ended && started.elapsed() < GUARD, "the build never asked git for its date before the render");
        std::thread::sleep(Duration::from_millis(5));
    }
    meanwhile();
    std::fs::remove_file(pause).unwrap();
    finish_guarded(spawned)
}

/// A child run under a memory limit, and the threads reading its stdout and stderr.
type Spawned = (std::process::Child, [std::thread::JoinHandle<String>; 2]);

/// `env`: variables set for the run; an empty value removes the variable.
fn spawn_guarded(args: &[&str], env: &[(&str, &str)]) -> Spawned {
    let mut command = std::process::Command::new("sh");
    command.env("SOURCE_DATE_EPOCH", TEST_EPOCH);
    for (name, value) in env {
        match value.is_empty() {
            true => command.env_remove(name),
            false => command.env(name, value),
        };
    }
    let mut child = command
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_KB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_gen"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = |mut p: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = p.read_to_string(&mut text);
            text
        })
    };
    let stdout = pipe(Box::new(child.stdout.take().unwrap()));
    let stderr = pipe(Box::new(child.stderr.take().unwrap()));
    (child, [stdout, stderr])
}

/// Waits for a guarded child, killing it after [`GUARD`].
fn finish_guarded((mut child, [stdout, stderr]): Spawned) -> Ended {
    let started = std::time::Instant::now();
    let mut killed = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > GUARD {
            killed = true;
            child.kill().unwrap();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ended { code: status.code(), stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap(), killed }
}

/// Replaces `path` with `what`: a symbolic link to `/dev/zero`, or a FIFO.
pub fn make_hostile(path: &Path, what: &str) {
    let _ = std::fs::remove_file(path);
    match what {
        "zero" => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        _ => assert!(
            std::process::Command::new("mkfifo").arg(path).status().unwrap().success(),
            "mkfifo {}",
            path.display()
        ),
    }
}

/// A query value percent-encoded: every byte but `A-Za-z0-9-._~` as `%XX`.
pub fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The folder docs/tree.md names for a declared filter's name or value: `a-z0-9-` kept, any
/// other byte as `_` and two lower-case hex digits, the empty text as `_`.
pub fn filter_folder(text: &str) -> String {
    if text.is_empty() {
        return "_".into();
    }
    let kept = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    text.bytes().map(|b| if kept(b) { char::from(b).to_string() } else { format!("_{b:02x}") }).collect()
}

/// The 17 resources the API must serve, by path segment (the project guide's list).
pub const RESOURCES: [&str; 17] = [
    "ability",
    "berry",
    "berry-firmness",
    "berry-flavor",
    "creature-color",
    "creature-form",
    "encounter-method",
    "evolution-trigger",
    "item-attribute",
    "language",
    "move-ailment",
    "move-category",
    "nature",
    "pal-park-area",
    "region",
    "stat",
    "super-contest-effect",
];

/// The neighbours the served resources refer to, each present with the records referred to.
pub const NEIGHBOURS: [&str; 11] = [
    "move-battle-style",
    "move",
    "item-pocket",
    "item-category",
    "creature-species",
    "creature-habitat",
    "evolution-chain",
    "gender",
    "move-target",
    "athlon-stat",
    "encounter-condition-value",
];
