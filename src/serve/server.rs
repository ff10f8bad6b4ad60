//! HTTP glue over tiny_http 0.12, and what it takes to keep tiny_http serving.
//!
//! tiny_http accepts connections and reads requests, one thread per connection (spawned
//! without limit). Each request is answered on its own connection's thread (a gen patch,
//! `Server::from_listener_with_handler`): the answer is written in one piece straight to the
//! connection (`Request::into_writer`), with a head written here, and the next request of the
//! connection is read only after that. So a client that is slow to send or never reads holds
//! its own thread and nothing else, and pipelined requests wait in the socket, not in memory.
//! tiny_http is vendored with fixes for the failure modes no code outside it can reach
//! (`vendor/tiny_http/PATCHES.md`). What is left, and what is done about it here:
//! - A connection whose answer cannot be sent within the send timeout (a client that does not
//!   read) is closed, with whatever it had pipelined.
//! - A request with a body: bodies of at most [`MAX_BODY`] bytes are read and dropped, and
//!   the connection goes on; a larger or endless one (or one behind `Expect: 100-continue`) is
//!   answered with `Connection: close` and the connection is shut down without reading it, so
//!   no thread waits on a body that never comes.
//! - The accept thread still panics when it cannot duplicate a socket or spawn a thread (out of
//!   descriptors or threads). A panic hook notices and starts a new tiny_http server on a
//!   duplicate of the same listening socket, with back-off while that keeps failing. The old
//!   server's connections keep their threads and are answered to their end.
//! - A connection thread that panics (e.g. `peer_addr` of a client that already reset) loses
//!   only that connection.

use super::respond::{self, Connection, Reply, ResponsePolicy};
use super::stream::MinRate;
use super::tree::ServedTree;
use anyhow::{Result, anyhow};
use std::cell::RefCell;
use std::io::{Read, Write as _};
use std::net::TcpListener;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// What every connection shares.
pub(crate) struct Shared {
    /// The tree answered from; swapped whole when a new build is loaded.
    pub(crate) tree: RwLock<Arc<ServedTree>>,
    /// How answers are made: cache headers, the HTML view.
    pub(crate) settings: ResponsePolicy,
    /// No line per request.
    pub(crate) quiet: bool,
    /// How long a request's body may take to arrive (it is read only up to [`MAX_BODY`]).
    pub(crate) body_time: Duration,
    /// The folder of the tree.
    pub(crate) dir: std::path::PathBuf,
    /// The base URL urls are rebased on, unless the tree's own are kept.
    pub(crate) rebase: Option<String>,
    /// The signature of the manifest the tree served was loaded from.
    pub(crate) loaded: std::sync::Mutex<Option<crate::fsutil::Stamp>>,
}

impl Shared {
    /// The current tree.
    pub(crate) fn tree(&self) -> Arc<ServedTree> {
        self.tree.read().expect("tree lock").clone()
    }
}

/// Largest request body read (and dropped) to keep a connection open; larger ones close it.
pub(crate) const MAX_BODY: u64 = 64 << 10;
/// Responses up to this size are written in one piece (head and body in one buffer).
const ONE_WRITE: usize = 256 << 10;

/// What the serving loop of [`run`] waits for.
pub(crate) enum Event {
    /// A tiny_http thread that may be the accept thread panicked.
    Panicked,
}

/// Serves `listener` until the process ends (`events_tx` is the sender of `events`).
pub(crate) fn run(
    listener: TcpListener,
    shared: Arc<Shared>,
    events_tx: mpsc::Sender<Event>,
    events: mpsc::Receiver<Event>,
) -> Result<()> {
    install_panic_hook(events_tx);
    let handler: tiny_http::Handler = Arc::new(move |request| handle_guarded(request, &shared));
    let mut current = start(&listener, &handler)?;
    let mut born = Instant::now();
    let mut delay = Duration::ZERO;
    loop {
        match events.recv().map_err(|_| anyhow!("the panic hook is gone"))? {
            Event::Panicked => {}
        }
        // Accepting that fails again at once (out of descriptors) is retried with back-off.
        delay = if born.elapsed() < Duration::from_secs(1) {
            (delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1))
        } else {
            Duration::ZERO
        };
        say!("gen serve: tiny_http's accept thread may have stopped; accepting again");
        let server = loop {
            std::thread::sleep(delay);
            match start(&listener, &handler) {
                Ok(server) => break server,
                Err(e) => {
                    say!("gen serve: cannot accept connections again yet: {e:#}");
                    delay = (delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                }
            }
        };
        // The old server's connections have their own threads and go on to their end.
        drop(std::mem::replace(&mut current, server));
        born = Instant::now();
    }
}

/// A tiny_http server on a duplicate of `listener` (the accept thread owns and closes its copy).
fn start(listener: &TcpListener, handler: &tiny_http::Handler) -> Result<tiny_http::Server> {
    let socket = listener.try_clone().map_err(|e| anyhow!("cannot duplicate the listening socket: {e}"))?;
    tiny_http::Server::from_listener_with_handler(socket, handler.clone(), crate::answers::reader::http_reader())
        .map_err(|e| anyhow!("{e}"))
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
        say!("gen serve: a tiny_http thread stopped: panicked at {location}: {message}");
        if !file.ends_with("client.rs") {
            let _ = events.send(Event::Panicked);
        }
    }));
}

/// Answers one request; a panic while answering costs that request (tiny_http answers 500).
fn handle_guarded(request: tiny_http::Request, shared: &Shared) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(request, shared)));
    if result.is_err() {
        say!("gen serve: answering a request panicked; the server goes on");
    }
}

fn handle(mut request: tiny_http::Request, shared: &Shared) {
    // tiny_http's view of the body: the Content-Length (conflicting ones are refused before
    // this), unless a Transfer-Encoding is set; it has read bodies of at most 1 KiB already,
    // unless an `Expect` makes it wait.
    let chunked = request.headers().iter().any(|h| h.field.equiv("Transfer-Encoding"));
    let expects = request.headers().iter().any(|h| h.field.equiv("Expect"));
    let length = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Content-Length"))
        .and_then(|h| h.value.as_str().trim().parse::<u64>().ok());
    let body_read = match (length, chunked) {
        (Some(0) | None, false) => true,
        // The client waits for a go-ahead that will not come, or claims more than is read.
        _ if expects => false,
        (Some(length), false) if length > MAX_BODY => false,
        _ => read_body(request.as_reader(), Instant::now() + shared.body_time),
    };
    if !body_read && !shared.quiet {
        let length = length.map_or("a chunked body".to_string(), |n| format!("a body of {n} bytes"));
        say!(
            "{} {}: {length} not read (more than {MAX_BODY} bytes, or not sent in time); the connection is closed",
            request.method(),
            printable(request.url())
        );
    }
    answer(request, shared, !body_read);
}

/// Reads a request body to its end and drops it; false when it is longer than [`MAX_BODY`],
/// does not arrive by `deadline`, or the connection fails.
fn read_body(body: &mut dyn Read, deadline: Instant) -> bool {
    let mut buffer = [0u8; 8 << 10];
    let mut total = 0u64;
    loop {
        match body.read(&mut buffer) {
            Ok(0) => return true,
            Ok(n) => total += n as u64,
            Err(_) => return false,
        }
        if total > MAX_BODY || Instant::now() > deadline {
            return false;
        }
    }
}

thread_local! {
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Answers `request`; with `close`, or when the answer cannot be sent, the connection ends.
fn answer(request: tiny_http::Request, shared: &Shared, close: bool) {
    let (settings, quiet) = (&shared.settings, shared.quiet);
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
        _ if close => Connection::Close,
        Some(value) if value.contains("close") || value.contains("upgrade") => Connection::Close,
        _ if *version > (1, 0) => Connection::KeepAlive,
        Some(value) if value.contains("keep-alive") => Connection::KeepAlive10,
        _ => Connection::Close,
    };
    let (reply, tree) = decide(shared, &facts, settings);
    let head_only = facts.method == "HEAD";
    let log = (!quiet).then(|| format!("{} {}", facts.method, printable(facts.target)));

    let body = if head_only { &[][..] } else { reply.body() };
    let closer = request.connection_closer();
    if close {
        closer.close();
    }
    let mut buffer = Vec::with_capacity(512 + if body.len() <= ONE_WRITE { body.len() } else { 0 });
    with_date(|date| reply.write_head(&mut buffer, connection, date, settings, &tree.deploy_head));
    let mut writer = request.into_writer();
    let written = match &reply {
        Reply::Stream { stream, not_modified: false, .. } if !head_only => {
            writer.write_all(&buffer).and_then(|()| stream.send(&mut MinRate::new(&mut writer)))
        }
        _ if body.len() <= ONE_WRITE => {
            buffer.extend_from_slice(body);
            writer.write_all(&buffer)
        }
        // a client must keep reading (see `stream`) while a large body is sent
        _ => writer.write_all(&buffer).and_then(|()| MinRate::new(&mut writer).write_all(body)),
    };
    let written = written.and_then(|()| writer.flush());
    if written.is_err() {
        // Timed out (a client that does not read) or reset: drop what it pipelined too.
        closer.close();
    }
    if let Some(line) = log {
        let micros = started.elapsed().as_micros();
        let outcome = match written {
            Ok(()) => String::new(),
            Err(e) => format!(" (not sent: {e})"),
        };
        let sent = if head_only { 0 } else { reply.body_len() };
        say!("{line} {} {sent}B {micros}µs{outcome}", reply.status());
    }
}

/// The answer to `facts` from the current tree. When a file of the tree no longer matches its
/// manifest, a new build may have been swapped in: if the manifest changed, the new tree is
/// loaded and the request answered from it, once; otherwise the answer says the tree changed.
/// The tree that answered comes with the reply: its deploy headers go with the answer.
fn decide(
    shared: &Shared,
    facts: &respond::Request<'_>,
    settings: &ResponsePolicy,
) -> (respond::Reply, Arc<ServedTree>) {
    let tree = shared.tree();
    let reply = respond::decide_browsable(&tree, facts, settings);
    if reply.is_tree_changed() && super::refresh(shared, &tree) {
        let tree = shared.tree();
        return (respond::decide_browsable(&tree, facts, settings), tree);
    }
    (reply, tree)
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
