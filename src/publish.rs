//! `gen publish`: puts a built tree on object storage (S3 and S3-compatible stores, GCS, Azure)
//! or into a local folder, uploading only what changed, in an order that keeps clients working.
//!
//! - The local tree is checked against its manifest before anything is sent ([`verify_tree`]).
//! - What to send is decided from the target's own `manifest.json` (hash against hash), or, with
//!   no manifest, `--verify` or an unfinished publish, from a listing of the target and each
//!   object's content ([`remote`]); [`plan`] orders it: by links (an object before what links
//!   to it), manifest last, then deletes.
//! - Only objects a published manifest listed are ever deleted, and only files of the tree
//!   ([`crate::tree::layout::is_tree_file`]).
//! - A lock object (`.gen-publish.lock`, created only if absent) keeps two publishes apart.
//! - An unfinished publish leaves a marker (`.gen-publish.json`) that the next one reads: it
//!   then compares every object and finishes the deletes the killed one had planned.
//!
//! The async runtime the store client needs lives here, started only by [`publish`].

mod archive;
mod archive_plan;
mod local;
mod lock;
mod marker;
mod object;
mod repair;
pub(crate) mod plan;
pub(crate) mod remote;
pub(crate) mod target;

use crate::build::index::Index;
use crate::paging::LinkStyle;
use crate::tree::dir::TreeDir;
use crate::tree::manifest::{MANIFEST_FILE, Manifest};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub(crate) use plan::Plan;
pub(crate) use target::Target;

/// What `gen publish` was asked to do.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// The built tree.
    pub dir: PathBuf,
    /// TARGET, as given.
    pub target: String,
    /// S3-compatible endpoint (`--endpoint`), else `AWS_ENDPOINT_URL` or AWS itself.
    pub endpoint: Option<String>,
    /// `Cache-Control: public, max-age=SECS` on every object but `manifest.json` and `meta`.
    pub max_age: u64,
    /// Requests in flight at once.
    pub jobs: usize,
    /// Retries of a request that failed with a 5xx or a timeout.
    pub retries: usize,
    /// Print the plan, change nothing.
    pub dry_run: bool,
    /// List the target and compare every object, even when it holds a manifest.
    pub verify: bool,
    /// Write the public urls that changed here, one a line.
    pub changed_urls: Option<PathBuf>,
    /// Publish a tree built with `--links query` all the same.
    pub allow_query_links: bool,
    /// Take over a lock another publish left on the target.
    pub take_over_lock: bool,
    /// Show a progress bar (on a terminal, not with `-q`).
    pub progress: bool,
    /// For an archive: how long a part no root names any more stays on the target, counted
    /// from the publish that stopped naming it (readers in flight still find theirs).
    pub grace: std::time::Duration,
}

/// What a publish did (or, with `--dry-run`, would do).
#[derive(Debug)]
pub struct PublishSummary {
    /// What was (or would be) uploaded and deleted.
    pub plan: Plan,
    /// The paths whose urls go to `--changed-urls`: what this publish uploaded and deleted, and
    /// what an unfinished one before it did.
    pub(crate) changed: std::collections::BTreeSet<String>,
    /// Bytes uploaded.
    pub bytes: u64,
    /// Why the target was listed and every object compared, when it was (for the output).
    pub listed_because: Option<&'static str>,
    /// Objects repaired by the second look (written meanwhile by the unfinished publish this
    /// one found: see `docs/deploy.md`), uploaded or deleted.
    pub repaired: usize,
    /// How long it took.
    pub seconds: f64,
    /// For an archive: parts no root names, kept on the target until their grace ends.
    pub(crate) kept: usize,
}

impl PublishSummary {
    /// For an archive: how many parts no root names stay on the target until their grace ends.
    pub fn kept(&self) -> usize {
        self.kept
    }
}

/// A duration as `--grace` takes it: a number and a unit, `s`, `m`, `h` or `d` (`90s`, `1h`).
pub fn parse_grace(text: &str) -> Result<std::time::Duration, String> {
    let usage = || format!("{text:?} is not a duration: a number and a unit, s, m, h or d (e.g. 30m, 1h, 0s)");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(usage)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| usage())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(usage()),
    };
    number.checked_mul(scale).map(std::time::Duration::from_secs).ok_or_else(usage)
}

/// Publishes the tree in `options.dir` to `options.target`. A user and password in the
/// endpoint's url never appear in its errors.
pub fn publish(options: &PublishOptions) -> Result<PublishSummary> {
    publish_unredacted(options)
        .map_err(|e| anyhow::anyhow!(target::redact_endpoints(&format!("{e:#}"), options.endpoint.as_deref())))
}

fn publish_unredacted(options: &PublishOptions) -> Result<PublishSummary> {
    let started = Instant::now();
    if crate::archive::is_archive(&options.dir) {
        return publish_archive(options, started);
    }
    let (manifest_bytes, manifest) = Manifest::read_with_bytes(&options.dir)?;
    if manifest.settings.links == LinkStyle::Query && !options.allow_query_links {
        bail!(
            "{} was built with --links query: a store alone ignores query strings, so a client asking \
             ?offset=&limit= (or following `next`) would get page one again, forever. Such a tree is right behind \
             an edge handler that answers the query from the store: print one with `gen config cloudflare|deno|node` \
             (docs/deploy.md), put it in front of the target and pass --allow-query-links. To serve the store \
             alone, rebuild with `gen build --links path`",
            options.dir.display()
        );
    }
    let target = Target::parse(&options.target)?;
    verify_tree(&options.dir, &manifest)?;
    // rustls over ring (see Cargo.toml); a second install in the same process is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A `file://` folder is created to open it; a dry run removes again every folder it made.
    let mut new_folders = Vec::new();
    if target.kind == target::Kind::File {
        let folder = Path::new(&target.prefix);
        refuse_links_in_folder_target(folder)?;
        let mut missing = Some(folder);
        while let Some(path) = missing.filter(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err()) {
            new_folders.push(path.to_path_buf());
            missing = path.parent();
        }
    }
    let store = target.open(options.endpoint.as_deref(), options.retries)?;
    let runtime = upload_runtime(options.jobs)?;
    let files = TreeDir::open(&options.dir)?;
    let tree =
        remote::LocalTree { dir: &options.dir, files: &files, manifest: &manifest, manifest_bytes: &manifest_bytes };
    let result = runtime.block_on(remote::publish(&tree, &target, store, options));
    if options.dry_run {
        // deepest first; only empty folders go
        for folder in &new_folders {
            let _ = std::fs::remove_dir(folder);
        }
    }
    let mut summary = result?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Publishes the archive in `options.dir` (docs/deploy.md, "Publishing an archive").
fn publish_archive(options: &PublishOptions, started: Instant) -> Result<PublishSummary> {
    let local = archive_plan::LocalArchive::open(&options.dir)?;
    let target = Target { commit_point: "root", ..Target::parse(&options.target)? };
    let _ = rustls::crypto::ring::default_provider().install_default();
    if target.kind == target::Kind::File {
        let folder = Path::new(&target.prefix);
        let own = [
            archive_plan::ROOT,
            archive_plan::PARTS,
            archive_plan::RETIRED,
            remote::MARKER,
            remote::LOCK,
            remote::STOPPED,
        ];
        if let Some(link) = own.iter().map(|name| folder.join(name)).find(|path| path.is_symlink()) {
            bail!(
                "the target folder {} holds a symbolic link where gen publishes ({}): gen never follows a link inside \
                 a target, and nothing was published; remove it, then publish again",
                options_dir(folder),
                link.display()
            );
        }
    }
    let store = target.open(options.endpoint.as_deref(), options.retries)?;
    let runtime = upload_runtime(options.jobs)?;
    let mut summary = runtime.block_on(archive::publish(&local, &target, store, options))?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// The async runtime the uploads run on: up to 4 worker threads (`--jobs` requests are in
/// flight at once whatever the threads; the work is waiting on the network).
fn upload_runtime(jobs: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(jobs.clamp(1, 4))
        .enable_all()
        .build()
        .context("cannot start the runtime of the uploads")
}

/// Refuses a `file://` target holding a symbolic link where a publish writes, reads or deletes
/// (`api/` and below, `manifest.json` and gen's marker and lock beside it): the local store
/// would follow it, out of the target. gen never makes one there, so one found stops the
/// publish before anything is written, saying which. The target folder itself may be a link.
fn refuse_links_in_folder_target(folder: &Path) -> Result<()> {
    let own = [MANIFEST_FILE, remote::MARKER, remote::LOCK, remote::STOPPED, "api"];
    let mut links: Vec<PathBuf> = own.iter().map(|name| folder.join(name)).filter(|path| path.is_symlink()).collect();
    if links.is_empty() && folder.join("api").is_dir() {
        // not following links: a link is an entry of its own, never walked through
        links.extend(
            walkdir::WalkDir::new(folder.join("api"))
                .into_iter()
                .filter_map(|entry| entry.ok())
                .filter(|entry| entry.path_is_symlink())
                .map(|entry| entry.into_path()),
        );
    }
    if links.is_empty() {
        return Ok(());
    }
    links.sort();
    let shown: Vec<String> = links.iter().take(5).map(|p| p.display().to_string()).collect();
    bail!(
        "the target folder {} holds {} symbolic link{} where gen publishes:\n  {}{}\ngen never follows a link inside a \
         target (it would write and delete outside it) and nothing was published: remove the link{} (gen writes real \
         folders and files in their place), then publish again",
        options_dir(folder),
        links.len(),
        if links.len() == 1 { "" } else { "s" },
        shown.join("\n  "),
        if links.len() > 5 { "\n  ..." } else { "" },
        if links.len() == 1 { "" } else { "s" },
    )
}

/// Checks every file `manifest` lists against its hash: a torn, missing or hand-edited file
/// stops the publish before anything is sent. Files the build index saw unchanged since the
/// build (by their stamps) are not read again.
pub(crate) fn verify_tree(dir: &Path, manifest: &Manifest) -> Result<()> {
    use rayon::prelude::*;
    let index = Index::read(dir);
    let tree = TreeDir::open(dir)?;
    let files: Vec<(&String, &String)> = manifest.files.iter().collect();
    let mut bad: Vec<String> = files
        .par_iter()
        .filter_map(|(path, hash)| {
            if !crate::tree::layout::is_tree_file(path) {
                return Some(format!(
                    "{MANIFEST_FILE} lists {path:?}, which is not a file of a gen tree (one under api/v2/)"
                ));
            }
            let known = index.as_ref().and_then(|index| Some((index, index.docs.file(path)?)));
            if let Some((index, file)) = known
                && file.hash.0.to_hex().as_str() == hash.as_str()
                && index.check_file(&tree, path, &file, index.settings.gzip).is_some()
            {
                return None;
            }
            // bounded, no link followed, no wait on a pipe (as the build and `gen serve` read)
            let file = dir.join(path);
            match tree.read_file(path, crate::tree::listing::MAX_DOCUMENT_BYTES) {
                Ok(bytes) if blake3::hash(&bytes).to_hex().as_str() == hash.as_str() => None,
                Ok(_) => Some(format!("{} does not match its hash in {MANIFEST_FILE}", file.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!("{} is missing", file.display())),
                Err(e) => Some(format!(
                    "{} cannot be read as a file of the tree ({e}; a link, a pipe or a device never is)",
                    file.display()
                )),
            }
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    bad.sort();
    let shown: Vec<&str> = bad.iter().take(5).map(String::as_str).collect();
    bail!(
        "the tree in {} is not the one its manifest describes ({} file{}), so nothing was published:\n  {}{}\na plain \
         `gen build` trusts the tree it left and does not look; repair it with `gen build --verify`, then publish again",
        options_dir(dir),
        bad.len(),
        if bad.len() == 1 { "" } else { "s" },
        shown.join("\n  "),
        if bad.len() > 5 { "\n  ..." } else { "" }
    )
}

fn options_dir(dir: &Path) -> String {
    let shown = dir.display().to_string();
    if shown.ends_with('/') { shown } else { format!("{shown}/") }
}

/// The public url of a file of the tree: a folder's url for an `index.json`, as clients and
/// links name it, else the file's own.
pub(crate) fn public_url(base_url: &str, path: &str) -> String {
    let base = base_url.trim_end_matches('/');
    match path.strip_suffix(crate::tree::layout::DOCUMENT_FILE) {
        Some(folder) => format!("{base}/{folder}"),
        None => format!("{base}/{path}"),
    }
}

/// Writes the public urls of `changed` to the `--changed-urls` file, sorted, one a line; the
/// file is created anew (a link at its path is replaced, never written through). `marker_kept`:
/// the publish marker still holds the paths, so that the next publish writes them when this
/// write fails.
fn write_changed_urls(
    options: &PublishOptions,
    base_url: &str,
    changed: &std::collections::BTreeSet<String>,
    marker_kept: bool,
) -> Result<()> {
    let Some(path) = &options.changed_urls else { return Ok(()) };
    let mut urls: Vec<String> = changed.iter().map(|p| public_url(base_url, p)).collect();
    urls.sort();
    urls.dedup();
    let mut text = urls.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    crate::fsutil::write_new(path, text.as_bytes()).map_err(|e| {
        let keep = if marker_kept {
            "; they are kept in the target's publish marker: fix that, then run the same gen publish again and it \
             writes them"
        } else {
            ""
        };
        anyhow::anyhow!(
            "the publish to {} succeeded, but the {} changed urls could not be written to --changed-urls {}: {e:#}{keep}",
            options.target,
            urls.len(),
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_name_folders_as_clients_do() {
        assert_eq!(public_url("https://a.org", "api/v2/berry/1/index.json"), "https://a.org/api/v2/berry/1/");
        assert_eq!(public_url("https://a.org/", "api/v2/openapi.json"), "https://a.org/api/v2/openapi.json");
        assert_eq!(public_url("https://a.org", "manifest.json"), "https://a.org/manifest.json");
    }
}
