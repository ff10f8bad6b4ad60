//! `gen serve`: answers API requests from an in-memory index of a built tree, as the public
//! API answers them.
//!
//! - [`tree`]: the tree in memory, every body prepared at load (bytes, gzip, ETag), each
//!   file checked against the manifest's hash; pages not precomputed are rendered from the
//!   list's entries, byte for byte as `gen build` writes them.
//! - [`route`]: request target → what it asks for (pure, table-tested).
//! - [`respond`]: request facts + tree → status, headers, body (pure).
//! - [`server`]: tiny_http glue, and recovery from tiny_http's failure modes.
//! - [`listen`]: the listening socket and the options connections inherit from it.
//! - [`html`]: the HTML view for browsers.
//! - [`watch`]: `--watch`, rebuilding the tree when the data changes.
//!
//! By default every url of the tree is rebased at load from the tree's base URL onto the
//! address the server listens on, so that links work wherever the preview runs
//! (`--keep-urls` serves the tree's own bytes).
//!
//! Defences, by construction: a request path is looked up in a map of the tree's documents,
//! never joined onto the file system, and only paths made of `[A-Za-z0-9_-]` segments are
//! looked up at all; loading reads only the paths the manifest lists, with the shape of tree
//! paths, without following links, and only bytes whose hash the manifest records are served;
//! a new build is swapped in whole or not at all.

pub mod html;
pub mod listen;
pub mod respond;
pub mod route;
pub mod server;
pub mod tree;
pub mod watch;

use anyhow::Result;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tree::Tree;

/// Settings of the server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub dir: PathBuf,
    pub addr: String,
    pub quiet: bool,
    /// `Cache-Control: public, max-age=<max_age>` on documents.
    pub max_age: u64,
    /// Connections that send nothing for this long are closed.
    pub idle_timeout: Duration,
    /// Serve the tree's own bytes instead of rebasing its urls onto the served address.
    pub keep_urls: bool,
    /// Rebuild the tree from this data folder whenever it changes.
    pub watch: Option<PathBuf>,
}

/// How often the manifest is checked for a new build.
const POLL: Duration = Duration::from_millis(250);
/// How often a tree that failed to load is tried again while its manifest stays the same.
const RETRY: Duration = Duration::from_secs(1);

/// Loads the tree, listens, prints the bound address as the first line of stdout, and serves
/// until the process is interrupted (Ctrl-C ends it: nothing is buffered that would need
/// flushing, and the kernel closes the sockets).
pub fn run(options: ServeOptions) -> Result<()> {
    let problems = match &options.watch {
        Some(data) => watch::build_at_start(data, &options.dir, options.quiet)?,
        None => None,
    };
    let listener = listen::bind(&options.addr, options.idle_timeout)?;
    listen::raise_open_files_limit();
    let addr = listener.local_addr()?;
    let origin = origin_of(addr);
    let rebase = (!options.keep_urls).then_some(origin.as_str());
    let signature = manifest_signature(&options.dir);
    let tree = load_at_start(&options.dir, rebase)?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "http://{addr}")?;
        stdout.flush()?;
    }
    if !options.quiet {
        eprintln!(
            "serving {} ({} resources, {} documents) at {}",
            crate::fsutil::show_dir(&options.dir),
            tree.resources(),
            tree.documents(),
            crate::layout::root_url(&origin)
        );
        let how = if options.keep_urls { "the tree's own (--keep-urls)" } else { "rebased onto this address" };
        eprintln!("urls in the answers start with {} ({how}); browsers get an HTML view at {origin}/", tree.base_url);
    }
    let tree = Arc::new(tree);
    if tree.compress_now() {
        tree.compress_all();
    } else {
        let tree = tree.clone();
        std::thread::Builder::new().name("gen-compress".into()).spawn(move || tree.compress_all())?;
    }
    let preview = Arc::new(html::Preview::new());
    preview.set_problems(problems);
    let shared = Arc::new(server::Shared {
        tree: RwLock::new(tree),
        settings: respond::ResponsePolicy {
            cache_control: format!("public, max-age={}", options.max_age),
            preview: preview.clone(),
        },
        quiet: options.quiet,
        body_time: options.idle_timeout,
    });
    let rebase = rebase.map(str::to_string);
    {
        let (dir, shared, quiet, rebase) = (options.dir.clone(), shared.clone(), options.quiet, rebase.clone());
        std::thread::Builder::new()
            .name("gen-reload".into())
            .spawn(move || poll(&dir, &shared, signature, quiet, rebase.as_deref()))?;
    }
    if let Some(data) = options.watch.clone() {
        let (dir, shared, quiet) = (options.dir.clone(), shared.clone(), options.quiet);
        let reload = move || {
            if let Err(e) = reload(&dir, &shared, quiet, rebase.as_deref()) {
                eprintln!("gen serve: cannot load the new build yet (retried): {e:#}");
            }
        };
        watch::start(data, options.dir.clone(), preview, quiet, reload)?;
    }
    server::run(listener, shared)
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

/// Loads the tree at start. A build swapping the tree in while it is read makes a load fail
/// its hash checks; that is retried for a few seconds before giving up.
fn load_at_start(dir: &Path, rebase: Option<&str>) -> Result<Tree> {
    let mut attempts = 0;
    loop {
        let (bytes, manifest) = crate::manifest::Manifest::read_with_bytes(dir)?;
        match Tree::load_rebased(dir, bytes, manifest, None, rebase) {
            Ok(tree) => return Ok(tree),
            Err(e) if attempts >= 8 => return Err(e),
            Err(_) => attempts += 1,
        }
        std::thread::sleep(POLL);
    }
}

/// What identifies one manifest file: a build that changes anything writes a new one and
/// swaps the whole folder, so its inode changes; size and times are checked too.
type Signature = Option<crate::fsutil::Stamp>;

fn manifest_signature(dir: &Path) -> Signature {
    crate::fsutil::Stamp::of_path(&dir.join(crate::manifest::MANIFEST_FILE))
}

/// Loads the tree in `dir` and swaps it in, unless it is the tree already served.
/// `Ok(false)`: nothing new. One load at a time (the poll and `--watch` both call this).
fn reload(dir: &Path, shared: &server::Shared, quiet: bool, rebase: Option<&str>) -> Result<bool> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let current = shared.tree();
    let (bytes, manifest) = crate::manifest::Manifest::read_with_bytes(dir)?;
    if bytes == current.manifest_bytes {
        return Ok(false);
    }
    let tree = Tree::load_rebased(dir, bytes, manifest, Some(&current), rebase)?;
    drop(current);
    if !quiet {
        eprintln!(
            "gen serve: loaded the new build of {} ({} resources, {} documents)",
            crate::fsutil::show_dir(dir),
            tree.resources(),
            tree.documents()
        );
    }
    let tree = Arc::new(tree);
    if tree.compress_now() {
        tree.compress_all();
    }
    *shared.tree.write().expect("tree lock") = tree.clone();
    tree.compress_all(); // what is left: only documents new in this build
    Ok(true)
}

/// Polls the manifest and swaps in each new tree once it has loaded whole. A failed load (a
/// build swapping the tree mid-read, a broken tree) is retried on the next poll; the previous
/// tree is served meanwhile, and each failure is reported once.
fn poll(dir: &Path, shared: &server::Shared, mut loaded: Signature, quiet: bool, rebase: Option<&str>) {
    let mut reported: Option<Signature> = None;
    let mut failed_at = std::time::Instant::now();
    loop {
        std::thread::sleep(POLL);
        let signature = manifest_signature(dir);
        // A failed load is retried at once when the manifest changes, else once a second.
        let retrying = reported == Some(signature) && failed_at.elapsed() < RETRY;
        if signature == loaded || retrying {
            continue;
        }
        match reload(dir, shared, quiet, rebase) {
            Ok(_) => {
                loaded = signature;
                reported = None;
            }
            Err(e) => {
                failed_at = std::time::Instant::now();
                if reported != Some(signature) {
                    eprintln!("gen serve: still serving the previous tree; cannot load the new one yet: {e:#}");
                    reported = Some(signature);
                }
            }
        }
    }
}
