//! HTTP glue over tiny_http 0.12, and what it takes to keep tiny_http serving.
//!
//! tiny_http reads requests (one thread per connection, which it spawns without limit) and
//! queues them; a fixed pool of workers takes them from the queue and writes each answer in
//! one piece straight to the connection (`Request::into_writer`), with a head written here.
//! tiny_http is vendored with fixes for the failure modes no code outside it can reach
//! (`vendor/tiny_http/PATCHES.md`): its pool left connections unanswered, request heads were read
//! whole, a huge claimed body aborted the process, and a failed `accept` ended the accept thread.
//! What is left, and what is done about it here:
//! - The accept thread still panics when it cannot duplicate a socket or spawn a thread (out of
//!   descriptors or threads). A panic hook notices and starts a new tiny_http server on a
//!   duplicate of the same listening socket, with back-off while that keeps failing. The old
//!   server's connections stay open and are served by a drain thread until they have been idle
//!   past the idle timeout.
//! - A connection thread that panics (e.g. `peer_addr` of a client that already reset) loses
//!   only that connection.
//! - Dropping a request whose body tiny_http has not read makes it read the rest of the body
//!   (through a bounded buffer), which blocks until the client sends it or the idle timeout
//!   ends the connection. Such requests are answered from a separate, bounded set of threads,
//!   so that workers never wait on a client; when all of those are busy, the request is
//!   abandoned unanswered (never dropped).

use super::respond::{self, Connection, Settings};
use super::tree::Tree;
use anyhow::{Result, anyhow};
use std::cell::RefCell;
use std::io::Write as _;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// What every worker shares.
pub struct Shared {
    /// The tree answered from; swapped whole when a new build is loaded.
    pub tree: RwLock<Arc<Tree>>,
    pub settings: Settings,
    /// No line per request.
    pub quiet: bool,
}

impl Shared {
    /// The current tree.
    pub fn tree(&self) -> Arc<Tree> {
        self.tree.read().expect("tree lock").clone()
    }
}

/// Bodies up to this size tiny_http reads itself; larger ones are read when the request is dropped.
const BUFFERED_BODY: u64 = 1024;
/// Most requests with bodies being answered at once.
const MAX_DRAINERS: usize = 32;
/// Responses up to this size are written in one piece (head and body in one buffer).
const ONE_WRITE: usize = 256 << 10;
/// How often an idle worker looks for a newer tiny_http server.
const POLL: Duration = Duration::from_millis(250);

/// One tiny_http server: its accept thread, its connections, its request queue.
struct Generation {
    id: u64,
    server: tiny_http::Server,
    born: Instant,
}

enum Event {
    /// A tiny_http thread that may be the accept thread panicked.
    Panicked,
}

/// Serves `listener` with `workers` threads until the process ends.
pub fn run(listener: TcpListener, shared: Arc<Shared>, workers: usize, idle_timeout: Duration) -> Result<()> {
    let (events_tx, events) = mpsc::channel();
    install_panic_hook(events_tx.clone());
    let current = Arc::new(RwLock::new(Arc::new(start(&listener, 0)?)));
    let current_id = Arc::new(AtomicU64::new(0));
    for n in 0..workers {
        let (current, current_id, shared) = (current.clone(), current_id.clone(), shared.clone());
        std::thread::Builder::new()
            .name(format!("gen-worker-{n}"))
            .spawn(move || worker(&current, &current_id, &shared))
            .map_err(|e| anyhow!("cannot start worker threads: {e}"))?;
    }

    let mut delay = Duration::ZERO;
    let mut next_id = 1;
    loop {
        let Event::Panicked = events.recv().map_err(|_| anyhow!("the panic hook is gone"))?;
        let old = current.read().expect("generation lock").clone();
        // Accepting that fails again at once (out of descriptors) is retried with back-off.
        delay = if old.born.elapsed() < Duration::from_secs(1) {
            (delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1))
        } else {
            Duration::ZERO
        };
        eprintln!("gen serve: tiny_http's accept thread may have stopped; accepting again");
        let generation = loop {
            std::thread::sleep(delay);
            match start(&listener, next_id) {
                Ok(generation) => break generation,
                Err(e) => {
                    eprintln!("gen serve: cannot accept connections again yet: {e:#}");
                    delay = (delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                }
            }
        };
        next_id += 1;
        *current.write().expect("generation lock") = Arc::new(generation);
        current_id.store(next_id - 1, Ordering::Release);
        let shared = shared.clone();
        // The old server's connections are still open: serve them until they go quiet.
        let spawned = std::thread::Builder::new()
            .name("gen-drain".into())
            .spawn(move || drain(&old, &shared, idle_timeout + Duration::from_secs(2)));
        if let Err(e) = spawned {
            eprintln!("gen serve: cannot start a thread for older connections: {e}");
        }
    }
}

/// A tiny_http server on a duplicate of `listener` (the accept thread owns and closes its copy).
fn start(listener: &TcpListener, id: u64) -> Result<Generation> {
    let socket = listener.try_clone().map_err(|e| anyhow!("cannot duplicate the listening socket: {e}"))?;
    let server = tiny_http::Server::from_listener(socket, None).map_err(|e| anyhow!("{e}"))?;
    Ok(Generation { id, server, born: Instant::now() })
}

fn worker(current: &RwLock<Arc<Generation>>, current_id: &AtomicU64, shared: &Shared) {
    let mut generation = current.read().expect("generation lock").clone();
    loop {
        if generation.id != current_id.load(Ordering::Acquire) {
            generation = current.read().expect("generation lock").clone();
        }
        // Errors no longer reach `recv` (accept errors are handled inside tiny_http).
        if let Ok(Some(request)) = generation.server.recv_timeout(POLL) {
            handle_guarded(request, shared);
        }
    }
}

/// Serves what is left of a replaced server's connections until none has sent anything for `quiet`.
fn drain(generation: &Generation, shared: &Shared, quiet: Duration) {
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        if let Ok(Some(request)) = generation.server.recv_timeout(Duration::from_secs(1)) {
            handle_guarded(request, shared);
            last = Instant::now();
        }
    }
}

/// Reports panics of tiny_http's threads, and asks for a new server when one may have been
/// the accept thread. Connection threads panic in `client.rs`; those lose one connection only.
fn install_panic_hook(events: Sender<Event>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let file = info.location().map(|l| l.file()).unwrap_or("");
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let unnamed = std::thread::current().name().is_none();
        let in_tiny_http = file.contains("tiny_http") || (unnamed && message.contains("failed to spawn thread"));
        if !in_tiny_http {
            return default(info);
        }
        let location = info.location().map(|l| l.to_string()).unwrap_or_default();
        eprintln!("gen serve: a tiny_http thread stopped: panicked at {location}: {message}");
        if !file.ends_with("client.rs") {
            let _ = events.send(Event::Panicked);
        }
    }));
}

/// Answers one request; a panic while answering costs that request (tiny_http answers 500).
fn handle_guarded(request: tiny_http::Request, shared: &Shared) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(request, shared)));
    if result.is_err() {
        eprintln!("gen serve: answering a request panicked; the server goes on");
    }
}

static DRAINERS: AtomicUsize = AtomicUsize::new(0);

/// Takes one of the [`MAX_DRAINERS`] slots, if one is free.
fn take_drainer() -> bool {
    DRAINERS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_DRAINERS).then_some(n + 1)).is_ok()
}

fn handle(request: tiny_http::Request, shared: &Shared) {
    // tiny_http's view of the body: the first Content-Length, unless a Transfer-Encoding is set;
    // it reads the body itself when it is at most 1 KiB and no `Expect` makes it wait.
    let chunked = request.headers().iter().any(|h| h.field.equiv("Transfer-Encoding"));
    let expects = request.headers().iter().any(|h| h.field.equiv("Expect"));
    let length = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Content-Length"))
        .and_then(|h| h.value.as_str().parse::<usize>().ok())
        .map(|n| n as u64)
        .filter(|_| !chunked);
    match length {
        Some(length) if length > BUFFERED_BODY || (length > 0 && expects) => {
            if take_drainer() {
                let (tree, settings, quiet) = (shared.tree(), shared.settings.clone(), shared.quiet);
                let spawned = std::thread::Builder::new().name("gen-body".into()).spawn(move || {
                    answer(request, &tree, &settings, quiet);
                    DRAINERS.fetch_sub(1, Ordering::AcqRel);
                });
                if spawned.is_err() {
                    // The request went down with the closure: tiny_http read its (bounded) body here.
                    DRAINERS.fetch_sub(1, Ordering::AcqRel);
                }
                return;
            }
            eprintln!(
                "{} {} abandoned: a body of {length} bytes while {MAX_DRAINERS} others are being read",
                request.method(),
                printable(request.url())
            );
            // Dropping the request here would make this worker wait for the client's body.
            std::mem::forget(request);
        }
        _ => answer(request, &shared.tree(), &shared.settings, shared.quiet),
    }
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(16 << 10));
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

fn answer(request: tiny_http::Request, tree: &Tree, settings: &Settings, quiet: bool) {
    let started = Instant::now();
    let mut facts = respond::Request { method: request.method().as_str(), target: request.url(), ..Default::default() };
    let mut connection_header = None;
    for header in request.headers() {
        let value = header.value.as_str();
        facts.header_count += 1;
        facts.header_bytes += header.field.as_str().as_str().len() + value.len();
        if header.field.equiv("Accept-Encoding") {
            facts.accept_encoding = Some(value);
        } else if header.field.equiv("Accept") {
            facts.accept = Some(value);
        } else if header.field.equiv("If-None-Match") {
            facts.if_none_match = Some(value);
        } else if header.field.equiv("Access-Control-Request-Headers") {
            facts.request_headers = Some(value);
        } else if header.field.equiv("Connection") {
            connection_header = Some(value.to_ascii_lowercase());
        }
    }
    // As tiny_http decides whether to read another request from the connection.
    let version = request.http_version();
    let connection = match connection_header.as_deref() {
        Some(value) if value.contains("close") || value.contains("upgrade") => Connection::Close,
        _ if *version > (1, 0) => Connection::KeepAlive,
        Some(value) if value.contains("keep-alive") => Connection::KeepAlive10,
        _ => Connection::Close,
    };
    let reply = respond::decide_with(tree, &facts, settings);
    let head_only = facts.method == "HEAD";
    let log = (!quiet).then(|| format!("{} {}", facts.method, printable(facts.target)));

    let body = if head_only { &[][..] } else { reply.body() };
    let written = BUFFER.with_borrow_mut(|buffer| {
        buffer.clear();
        with_date(|date| reply.write_head(buffer, connection, date, settings));
        let mut writer = request.into_writer();
        let result = if body.len() <= ONE_WRITE {
            buffer.extend_from_slice(body);
            writer.write_all(buffer)
        } else {
            writer.write_all(buffer).and_then(|()| writer.write_all(body))
        };
        if buffer.capacity() > 2 * ONE_WRITE {
            *buffer = Vec::with_capacity(16 << 10);
        }
        result.and_then(|()| writer.flush())
    });
    if let Some(line) = log {
        let micros = started.elapsed().as_micros();
        let outcome = match written {
            Ok(()) => String::new(),
            Err(e) => format!(" (not sent: {e})"),
        };
        let line = format!("{line} {} {}B {micros}µs{outcome}\n", reply.status(), body.len());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// The current HTTP date, formatted once per second per thread.
fn with_date<R>(f: impl FnOnce(&str) -> R) -> R {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with_borrow_mut(|(secs, text)| {
        if *secs != now {
            *secs = now;
            *text = crate::date::http_date(now);
        }
        f(text)
    })
}

/// A request target as logged: control bytes escaped, cut at 300 characters.
fn printable(target: &str) -> String {
    let mut out = String::with_capacity(target.len().min(310));
    for (i, c) in target.chars().enumerate() {
        if i == 300 {
            out.push('…');
            break;
        }
        if c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.push_str(&format!("%{:02X}", c as u32 & 0xff));
        }
    }
    out
}
