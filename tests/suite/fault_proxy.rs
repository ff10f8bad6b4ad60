//! A fault-injecting HTTP proxy of the tests' own (std only), put between `gen publish` and a
//! real SeaweedFS: it forwards every request as it is (the signature covers the Host header,
//! which is left alone), and for the keys a test names it answers 500, stalls, resets the
//! connection, or slows the answer down. It records every request it sees, and can hold the
//! Nth write of tree objects and tell the test, which then kills gen at that exact point.
//!
//! One request per connection: the proxy answers with `Connection: close`, so a client opens a
//! new connection for the next request and no framing has to be understood beyond one request's.

// Shared by several test binaries: `pub` is how each reaches what it uses.
#![allow(unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the proxy does with a request a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answers `500 Internal Server Error` with an S3 error body, never forwarding it.
    Status500,
    /// Reads the request and never answers (until the proxy is cleared or dropped).
    Stall,
    /// Reads the request and resets the connection (RST), never answering.
    Reset,
    /// Forwards the request after this long.
    Slow(Duration),
}

/// A rule: requests with this method (any, when `None`) whose key ends with `key_suffix`.
#[derive(Debug, Clone)]
struct Rule {
    method: Option<String>,
    key_suffix: String,
    fault: Fault,
}

/// A request the proxy saw: its method and the object key (the path without the bucket); seen
/// twice when forwarded: as it arrives, and `answered` once the server's answer is sent back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub key: String,
    pub answered: bool,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    seen: Vec<Seen>,
    /// Hold the write of a tree object that comes after this many.
    hold_after: Option<usize>,
    /// Writes of tree objects seen since `hold_after` was set.
    writes: usize,
    /// True once a write is held.
    holding: bool,
    /// The key of the write held.
    held_key: Option<String>,
    /// Bumped to let stalled and held connections go.
    release: u64,
    /// Set by [`FaultProxy::land_held`]: the held write goes on to the server when let go.
    land_held: bool,
}

/// The proxy: listens on a free loopback port, forwards to `upstream`; stops on drop.
pub struct FaultProxy {
    address: String,
    state: Arc<(Mutex<State>, Condvar)>,
    stop: Arc<AtomicBool>,
}

/// Keys that are not tree objects: gen's lock, marker, records of stopped publishes and (for
/// an archive) the record of retired parts.
fn is_bookkeeping(key: &str) -> bool {
    key.ends_with(".gen-publish.lock")
        || key.ends_with(".gen-publish.json")
        || key.contains(".gen-publish-stopped/")
        || key.ends_with(".gen-publish-retired.json")
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream` (`127.0.0.1:PORT`).
    pub fn start(upstream: &str) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the proxy binds a loopback port");
        let address = listener.local_addr().unwrap().to_string();
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (upstream, accept_state, accept_stop) = (upstream.to_string(), state.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accept_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (upstream, state) = (upstream.clone(), accept_state.clone());
                std::thread::spawn(move || {
                    let _ = serve(client, &upstream, &state);
                });
            }
        });
        FaultProxy { address, state, stop }
    }

    /// The url to give gen as `--endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// From now on, requests with `method` (any when `None`) whose key ends with `key_suffix`
    /// (`""`: every request) get `fault`.
    pub fn fault(&self, method: Option<&str>, key_suffix: &str, fault: Fault) {
        let mut state = self.state.0.lock().unwrap();
        state.rules.push(Rule { method: method.map(String::from), key_suffix: key_suffix.into(), fault });
    }

    /// Holds the write (PUT or DELETE) of a tree object that comes after `n` of them (gen's lock
    /// and marker not counted), so that exactly `n` were done when it arrives.
    pub fn hold_write_after(&self, n: usize) {
        let mut state = self.state.0.lock().unwrap();
        (state.hold_after, state.writes, state.holding) = (Some(n), 0, false);
    }

    /// Waits until a write is held, or `done` says to stop waiting; true when one is held.
    pub fn wait_for_hold(&self, mut done: impl FnMut() -> bool) -> bool {
        let (lock, changed) = &*self.state;
        let mut state = lock.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !state.holding {
            if done() || Instant::now() > deadline {
                return false;
            }
            state = changed.wait_timeout(state, Duration::from_millis(50)).unwrap().0;
        }
        true
    }

    /// Drops every rule, hold and request seen, and lets stalled and held connections go
    /// (closed unanswered).
    pub fn clear(&self) {
        let (lock, changed) = &*self.state;
        let mut state = lock.lock().unwrap();
        state.rules.clear();
        state.seen.clear();
        (state.hold_after, state.holding) = (None, false);
        state.release += 1;
        changed.notify_all();
    }

    /// Sends the held write on to the server (as a request already on its way when its sender
    /// died would arrive), whether or not its sender is still there to read the answer, and
    /// returns its key once the server has answered it.
    pub fn land_held(&self) -> String {
        let (lock, changed) = &*self.state;
        let mut state = lock.lock().unwrap();
        assert!(state.holding, "no write is held");
        state.land_held = true;
        state.release += 1;
        changed.notify_all();
        let key = state.held_key.clone().expect("the held write's key");
        let deadline = Instant::now() + Duration::from_secs(120);
        while !state.seen.iter().any(|s| s.answered && s.key == key) {
            assert!(Instant::now() < deadline, "the server did not answer the held write of {key}");
            state = changed.wait_timeout(state, Duration::from_millis(50)).unwrap().0;
        }
        (state.hold_after, state.holding, state.land_held) = (None, false, false);
        key
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.0.lock().unwrap().seen.clone()
    }

    /// The keys written (PUT) so far, in the order the requests arrived.
    pub fn puts(&self) -> Vec<String> {
        self.seen().into_iter().filter(|s| s.method == "PUT" && !s.answered).map(|s| s.key).collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.clear();
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.address);
    }
}

/// One request head: the request line and the headers, as read.
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

fn read_head(reader: &mut impl BufRead) -> std::io::Result<Option<Head>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or_default().to_string(), parts.next().unwrap_or_default().to_string());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    Ok(Some(Head { method, target, headers }))
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The object key: the path without the bucket and the query.
    fn key(&self) -> String {
        let path = self.target.split('?').next().unwrap_or_default().trim_start_matches('/');
        path.split_once('/').map_or("", |(_, key)| key).to_string()
    }

    /// True for S3's DeleteObjects (`POST /bucket?delete`), which deletes the keys its body lists.
    fn is_bulk_delete(&self) -> bool {
        self.method == "POST"
            && self.target.split_once('?').is_some_and(|(_, q)| q.split('&').any(|p| p == "delete" || p == "delete="))
    }
}

/// The keys of a DeleteObjects request body (`<Key>...</Key>`).
fn deleted_keys(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</Key>"))
        .map(|(key, _)| key.replace("&amp;", "&"))
        .collect()
}

/// Reads a request body: by Content-Length, or chunked (kept as sent).
fn read_body(reader: &mut impl BufRead, head: &Head) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    if head.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            body.extend_from_slice(size_line.as_bytes());
            let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            if size == 0 {
                return Ok(body);
            }
        }
    }
    let length: usize = head.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    body.resize(length, 0);
    reader.read_exact(&mut body)?;
    Ok(body)
}

/// Serves one connection: one request, forwarded or faulted.
fn serve(client: TcpStream, upstream: &str, state: &(Mutex<State>, Condvar)) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let Some(head) = read_head(&mut reader)? else { return Ok(()) };
    let body = read_body(&mut reader, &head)?;
    // a DeleteObjects request counts as a DELETE of each key it lists
    let (method, keys) = if head.is_bulk_delete() {
        ("DELETE".to_string(), deleted_keys(&body))
    } else {
        (head.method.clone(), vec![head.key()])
    };
    let mut held = false;
    let fault = {
        let (lock, changed) = state;
        let mut state = lock.lock().unwrap();
        state.seen.extend(keys.iter().map(|key| Seen { method: method.clone(), key: key.clone(), answered: false }));
        let write = matches!(method.as_str(), "PUT" | "DELETE")
            && keys.iter().any(|key| !is_bookkeeping(key) && !key.is_empty());
        let mut fault = state
            .rules
            .iter()
            .find(|r| {
                r.method.as_deref().is_none_or(|m| m == method) && keys.iter().any(|key| key.ends_with(&r.key_suffix))
            })
            .map(|r| r.fault);
        if write && let Some(after) = state.hold_after {
            state.writes += 1;
            if state.writes == after + 1 {
                state.holding = true;
                state.held_key = keys.first().cloned();
                changed.notify_all();
                held = true;
                fault = Some(Fault::Stall);
            }
        }
        fault
    };
    match fault {
        Some(Fault::Status500) => {
            let text = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InternalError</Code><Message>fault \
                        injected by the test proxy</Message></Error>";
            let answer = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{text}",
                text.len()
            );
            (&client).write_all(answer.as_bytes())?;
            return Ok(());
        }
        Some(Fault::Stall) => {
            let (lock, changed) = state;
            let mut guard = lock.lock().unwrap();
            let release = guard.release;
            while guard.release == release {
                guard = changed.wait(guard).unwrap();
            }
            if !(held && guard.land_held) {
                let _ = client.shutdown(Shutdown::Both);
                return Ok(());
            }
            drop(guard);
        }
        Some(Fault::Reset) => {
            reset(&client);
            return Ok(());
        }
        Some(Fault::Slow(delay)) => std::thread::sleep(delay),
        None => {}
    }
    forward(&client, upstream, &head, &body, || {
        let mut state = state.0.lock().unwrap();
        state.seen.extend(keys.iter().map(|key| Seen { method: method.clone(), key: key.clone(), answered: true }));
    })
}

/// Closes the connection with a reset (SO_LINGER 0) rather than an orderly close.
fn reset(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: the socket is open for the call; the option value is a valid `linger` of its size.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Sends the request to the server (`Connection: close`) and its whole answer back, calling
/// `answered` just before the answer goes.
fn forward(
    mut client: &TcpStream,
    upstream: &str,
    head: &Head,
    body: &[u8],
    answered: impl FnOnce(),
) -> std::io::Result<()> {
    let mut server = TcpStream::connect(upstream)?;
    let mut request = format!("{} {} HTTP/1.1\r\n", head.method, head.target);
    for (name, value) in &head.headers {
        if !name.eq_ignore_ascii_case("connection") && !name.eq_ignore_ascii_case("keep-alive") {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    request.push_str("Connection: close\r\n\r\n");
    server.write_all(request.as_bytes())?;
    server.write_all(body)?;
    let mut answer = Vec::new();
    server.read_to_end(&mut answer)?;
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |at| at + 4);
    let (answer_head, answer_body) = answer.split_at(split);
    let mut head_text = String::new();
    for line in String::from_utf8_lossy(answer_head).split("\r\n").filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default();
        if !name.eq_ignore_ascii_case("connection") && !name.eq_ignore_ascii_case("keep-alive") {
            head_text.push_str(line);
            head_text.push_str("\r\n");
        }
    }
    head_text.push_str("Connection: close\r\n\r\n");
    answered();
    client.write_all(head_text.as_bytes())?;
    client.write_all(answer_body)?;
    client.flush()
}
