//! `gen serve`: answers API requests from a built tree, as the public API answers them.
//!
//! - [`tree`]: the tree served: its manifest, held compactly, and each document read on first
//!   use, checked against the manifest's hash, prepared once (bytes, gzip, ETag) and cached;
//!   pages not precomputed are rendered from the list's entries, byte for byte as `gen build`
//!   writes them.
//! - [`list`]: the list answers (plain, paged, narrowed by `?q=` and the declared filters), from
//!   the query the router read and the files the build writes for them.
//! - [`files`]: the compact listing of the manifest, and reading a listed file without
//!   following links.
//! - [`cache`]: the documents and lists read so far, bounded by bytes (`--cache-mb`).
//! - [`origin`] and [`source`]: where the documents come from, a tree's files or an archive's
//!   parts (docs/serve.md, "Serving an archive"), and the questions the answers ask of it.
//! - [`route`]: request target → where it goes and its whole query, read once (pure, tested on
//!   the rule vectors `tests/vectors/`).
//! - [`respond`]: request facts + tree → status, headers, body.
//! - [`server`]: tiny_http glue, and recovery from tiny_http's failure modes.
//! - [`stream`]: documents too large for the cache, sent from their file a piece at a time, and
//!   the least a client must read.
//! - [`view`]: the HTML view's pages within `--cache-mb`, one render shared by the requests for
//!   a page.
//! - [`listen`]: the listening socket and the options connections inherit from it.
//! - [`html`]: the HTML view for browsers.
//! - [`watch`]: `--watch`, rebuilding the tree when the data changes.
//!
//! By default every url of the tree is rebased as each document is read, from the tree's base
//! URL onto the address the server listens on, so that links work wherever the preview runs
//! (`--keep-urls` serves the tree's own bytes).
//!
//! Defences, by construction: a request path is looked up in the manifest's listing, never
//! joined onto the file system, and only paths made of `[A-Za-z0-9_-]` segments are looked up
//! at all; only the paths the manifest lists, with the shape of tree paths, are read, without
//! following links, and only bytes whose hash the manifest in use records are served; a new
//! build is swapped in whole or not at all.

pub(crate) mod budget;
pub mod cache;
pub(crate) mod html;
mod html_escape;
mod html_list;
mod html_match;
pub(crate) mod item;
pub(crate) mod list;
pub(crate) mod listen;
pub(crate) mod origin;
pub mod respond;
pub mod route;
pub(crate) mod server;
pub(crate) mod source;
pub(crate) mod stream;
pub mod tree;
#[cfg(test)]
mod vectors;
pub(crate) mod view;
pub(crate) mod watch;

use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tree::ServedTree;

/// Settings of the server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The tree to serve.
    pub dir: PathBuf,
    /// Address to listen on, `HOST:PORT` (port 0: any free port).
    pub addr: String,
    /// No line per request, nor the start lines.
    pub quiet: bool,
    /// `Cache-Control: public, max-age=<max_age>` on documents.
    pub max_age: u64,
    /// Connections that send nothing for this long are closed.
    pub idle_timeout: Duration,
    /// Serve the tree's own bytes instead of rebasing its urls onto the served address.
    pub keep_urls: bool,
    /// Rebuild the tree from this data folder whenever it changes.
    pub watch: Option<PathBuf>,
    /// Most bytes of documents and lists held in memory (see [`cache`]).
    pub cache_bytes: usize,
}

/// The default of `--cache-mb`.
pub const DEFAULT_CACHE_MB: u64 = 128;

/// How often the manifest is checked for a new build.
const POLL: Duration = Duration::from_millis(250);
/// How often a tree that failed to load is tried again while its manifest stays the same.
const RETRY: Duration = Duration::from_secs(1);

/// Loads the tree, listens, prints the bound address as the first line of stdout, and serves
/// until the process is interrupted (Ctrl-C ends it: nothing is buffered that would need
/// flushing, and the kernel closes the sockets).
pub fn run(options: ServeOptions) -> Result<()> {
    let (problems, watching) = match &options.watch {
        Some(data) => watch::build_at_start(data, &options.dir, options.quiet).map(|(p, w)| (p, Some(w)))?,
        None => (None, None),
    };
    let listener = listen::bind(&options.addr, options.idle_timeout)?;
    listen::raise_open_files_limit();
    let addr = listener.local_addr()?;
    let origin = origin_of(addr);
    let rebase = (!options.keep_urls).then_some(origin.as_str());
    let signature = manifest_signature(&options.dir);
    let cache = Arc::new(cache::Cache::new(options.cache_bytes));
    let (tree, to_check) = load_at_start(&options.dir, &cache, rebase)?;
    // the first line a script reads: the address bound (port 0 picks one)
    crate::message::output(&format!("http://{addr}"))?;
    if !options.quiet {
        say!(
            "serving {} ({} resources, {} documents) at {}",
            crate::fsutil::show_dir(&options.dir),
            tree.resources(),
            tree.documents(),
            crate::tree::layout::root_url(&origin)
        );
        let how = if options.keep_urls { "the tree's own (--keep-urls)" } else { "rebased onto this address" };
        say!("urls in the answers start with {} ({how}); browsers get an HTML view at {origin}/", tree.base_url);
    }
    let preview = Arc::new(html::Preview::new());
    preview.set_problems(problems);
    let shared = Arc::new(server::Shared {
        tree: RwLock::new(Arc::new(tree)),
        settings: respond::ResponsePolicy {
            cache_control: format!("public, max-age={}", options.max_age),
            preview: preview.clone(),
        },
        quiet: options.quiet,
        body_time: options.idle_timeout,
        dir: options.dir.clone(),
        rebase: rebase.map(str::to_string),
        loaded: Mutex::new(signature),
    });
    let (events_tx, events) = std::sync::mpsc::channel();
    if let Some(paths) = to_check {
        let shared = shared.clone();
        std::thread::Builder::new().name("gen-check".into()).spawn(move || check_at_start(&shared, &paths))?;
    }
    {
        let shared = shared.clone();
        std::thread::Builder::new().name("gen-reload".into()).spawn(move || poll(&shared))?;
    }
    if let Some(watching) = watching {
        let shared_for_watch = shared.clone();
        let reload = move || {
            if let Err(e) = reload(&shared_for_watch) {
                // the rebuild trusted a tree damaged by hand: the next one verifies it
                note_damage(&shared_for_watch.dir);
                say!("gen serve: cannot load the new build yet (retried; the next rebuild verifies the tree): {e:#}");
            }
        };
        watch::start(watching, options.dir.clone(), preview, options.quiet, reload)?;
    }
    server::run(listener, shared, events_tx, events)
}

/// The origin links lead to: the bound address, with a loopback address in place of an
/// unspecified one (`0.0.0.0`, `[::]`), which browsers cannot always reach.
fn origin_of(addr: std::net::SocketAddr) -> String {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, addr.port()))
}

/// Loads the tree at start (its manifest only: see [`check_at_start`]). A build swapping the
/// tree in while it is read can make a load fail; that is retried for a few seconds before
/// giving up.
fn load_at_start(dir: &Path, cache: &Arc<cache::Cache>, rebase: Option<&str>) -> Result<(ServedTree, tree::ToCheck)> {
    let mut attempts = 0;
    loop {
        match source::load_unchecked(dir, cache.clone(), rebase) {
            Ok(tree) => return Ok(tree),
            Err(e) if attempts >= 8 => return Err(e),
            Err(_) => attempts += 1,
        }
        std::thread::sleep(POLL);
    }
}

/// Checks the tree served from start whole (every file against its hash), while it is served
/// (each document is checked as it is read anyway), so that the first answer does not wait for
/// it. The files that do not match (missing, a link, not a regular file, edited) are logged with
/// what repairs them, and answered 503 as any file found so when read; under `--watch` the next
/// rebuild verifies the tree ([`note_damage`]). A file still damaged two seconds on is damaged:
/// until then a build may be swapping a tree in (once one is loaded, the check ends: it was
/// checked whole when loaded, see [`poll`]).
fn check_at_start(shared: &server::Shared, paths: &[(String, blake3::Hash)]) {
    let first = shared.tree().digest;
    let mut damaged = crate::tree::listing::damaged(&shared.dir, paths);
    for _ in 0..8 {
        if damaged.is_empty() || shared.tree().digest != first {
            break;
        }
        std::thread::sleep(POLL); // meanwhile the poll loads a new manifest, if one comes
        let again: Vec<_> =
            paths.iter().filter(|(path, _)| damaged.iter().any(|(bad, _)| bad == path)).cloned().collect();
        damaged = crate::tree::listing::damaged(&shared.dir, &again);
    }
    let shown = crate::fsutil::show_dir(&shared.dir);
    if shared.tree().digest != first {
        return; // a new build was loaded, checked whole
    }
    if damaged.is_empty() {
        if !shared.quiet {
            say!("gen serve: every file of {shown} matches its manifest ({} files checked)", paths.len());
        }
        return;
    }
    note_damage(&shared.dir);
    say!("{}", damage_report(&shown, paths.len(), &damaged));
}

/// Most damaged files named one by one in the log.
const DAMAGE_SHOWN: usize = 10;

/// What the log says of the files of `shown` (`checked` files) that do not match its manifest.
fn damage_report(shown: &str, checked: usize, damaged: &[(String, crate::tree::listing::Unservable)]) -> String {
    use crate::tree::listing::Unservable;
    let mut report = format!(
        "gen serve: {} of the {checked} files of {shown} do not match its manifest; they are answered 503 and \
         the others served. A plain `gen build` trusts the tree and would leave them so: repair the tree with \
         `gen build --verify` (under --watch, the next rebuild verifies it)",
        damaged.len()
    );
    for (path, why) in damaged.iter().take(DAMAGE_SHOWN) {
        let why = match why {
            Unservable::NotRead(e) => format!("missing, a link or not a regular file ({e})"),
            Unservable::Changed => "edited: its bytes do not hash to what the manifest says".to_string(),
        };
        report.push_str(&format!("\n  {shown}{path}: {why}"));
    }
    if damaged.len() > DAMAGE_SHOWN {
        report.push_str(&format!("\n  and {} more", damaged.len() - DAMAGE_SHOWN));
    }
    report
}

/// The manifest (its [`Signature`]) of the last tree found damaged in the served folder, taken
/// by `--watch`'s next rebuild ([`damage_to_repair`]). One server a process.
static DAMAGED: Mutex<Option<Signature>> = Mutex::new(None);

/// Notes that the tree in `dir` was found damaged by hand (a listed file missing, a link, not a
/// regular file, edited), as described by the manifest now in `dir`: a plain rebuild trusts
/// the tree and would leave it so (docs/builds.md), so `--watch`'s next rebuild verifies it.
pub(crate) fn note_damage(dir: &Path) {
    *DAMAGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(manifest_signature(dir));
}

/// True, once, when a tree found damaged ([`note_damage`]) is still the one in `dir`: no build
/// has replaced its manifest since (a file found not matching while a build was committing is
/// not damage; that build's manifest is new).
pub(crate) fn damage_to_repair(dir: &Path) -> bool {
    let noted = DAMAGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    noted.is_some_and(|noted| noted == manifest_signature(dir))
}

/// What identifies one manifest file: a build that changes anything writes a new one and
/// swaps the whole folder, so its inode changes; size and times are checked too.
type Signature = Option<crate::fsutil::Stamp>;

/// The signature of the file that commits a build in `dir`: a tree's manifest, an archive's
/// root ([`origin::commit_file`]).
fn manifest_signature(dir: &Path) -> Signature {
    crate::fsutil::Stamp::of_path(&origin::commit_file(dir))
}

/// One load at a time (the poll, `--watch` and requests that found a file changed all load).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Loads the tree in the served folder and swaps it in, unless it is the tree already served
/// (the same manifest bytes). `Ok(false)`: nothing new.
fn reload(shared: &server::Shared) -> Result<bool> {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    load_new(shared)
}

/// [`reload`], with the lock held.
fn load_new(shared: &server::Shared) -> Result<bool> {
    let signature = manifest_signature(&shared.dir);
    let current = shared.tree();
    let tree = source::load(&shared.dir, current.cache.clone(), shared.rebase.as_deref())?;
    *shared.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = signature;
    if tree.digest == current.digest {
        return Ok(false);
    }
    if tree.built_base_url != current.built_base_url {
        tree.cache.clear(); // its documents were rebased from another base URL
    }
    if !shared.quiet {
        say!(
            "gen serve: loaded the new build of {} ({} resources, {} documents)",
            crate::fsutil::show_dir(&shared.dir),
            tree.resources(),
            tree.documents()
        );
    }
    *shared.tree.write().expect("tree lock") = Arc::new(tree);
    Ok(true)
}

/// Called when a request found a file of `seen` that does not match its manifest: true when a
/// newer tree than `seen` is now served (another build was swapped in; the request is answered
/// again from it), false when the manifest on disk is still the one `seen` was loaded from.
pub(crate) fn refresh(shared: &server::Shared, seen: &ServedTree) -> bool {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if shared.tree().digest != seen.digest {
        return true;
    }
    let unchanged =
        manifest_signature(&shared.dir) == *shared.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if unchanged {
        note_damage(&shared.dir);
        return false;
    }
    match load_new(shared) {
        Ok(swapped) => swapped,
        Err(e) => {
            say!("gen serve: cannot load the new build yet: {e:#}");
            false
        }
    }
}

/// Polls the manifest and swaps in each new tree once it has loaded whole. A failed load (a
/// build swapping the tree mid-read, a broken tree) is retried on the next poll; the previous
/// tree is served meanwhile, and each failure is reported once.
fn poll(shared: &server::Shared) {
    let mut reported: Option<Signature> = None;
    let mut failed_at = std::time::Instant::now();
    loop {
        std::thread::sleep(POLL);
        let signature = manifest_signature(&shared.dir);
        let loaded = *shared.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A failed load is retried at once when the manifest changes, else once a second.
        let retrying = reported == Some(signature) && failed_at.elapsed() < RETRY;
        if signature == loaded || retrying {
            continue;
        }
        match reload(shared) {
            Ok(_) => reported = None,
            Err(e) => {
                failed_at = std::time::Instant::now();
                if reported != Some(signature) {
                    say!("gen serve: still serving the previous tree; cannot load the new one yet: {e:#}");
                    reported = Some(signature);
                }
            }
        }
    }
}
