//! `gen serve --watch`: rebuild the tree whenever anything under the data folder changes.
//!
//! File system events come from the `notify` crate (inotify, FSEvents, ...): changes only, not
//! accesses (the build's own reads of the data would queue the next build for ever), debounced
//! so that a burst (an editor saving by rename, a `git checkout` creating and deleting hundreds
//! of files) gives one rebuild. Each rebuild is `genapi::build`, which swaps the new tree in whole; the
//! server then loads it at once. A rebuild that finds problems prints them as `gen check` does,
//! keeps the last good tree served, and shows them on the HTML view until a rebuild succeeds.
//!
//! The paths the events name are handed to the next rebuild ([`WatchedChanges`]): it lists
//! those, and takes every other file and folder from the previous build's index without a
//! `stat`. Only for a rebuild that follows one this watcher saw start, and never for a data
//! folder holding a link (a link's target may change outside it, unwatched); lost events, a
//! failed rebuild or a data folder replaced whole make the next rebuild list everything.

use super::html::Preview;
use crate::build::watched::WatchedChanges;
use crate::problem::Problems;
use anyhow::{Context, Result, bail};
use notify::{RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Events closer together than this are one change.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// The build options of a rebuild: the data's settings, with the link style, indentation and
/// gzip copies of the tree already in `out` (see [`crate::build::BuildOptions::of_tree`]), so that a
/// rebuild changes only what the data does; the build date from `SOURCE_DATE_EPOCH`.
///
/// They are kept with the stamp of the manifest the last rebuild left, and taken again while
/// the manifest is that one: reading a large tree's manifest to learn them would cost more
/// than the rebuild (77 MB at 200k records). A build made by hand into `out` changes the
/// manifest, and they are read again.
fn options(out: &Path, kept: &mut Option<KeptOptions>) -> Result<crate::build::BuildOptions> {
    use crate::fsutil::Stamp;
    let manifest = Stamp::of_path(&out.join(crate::tree::manifest::MANIFEST_FILE));
    if let Some(kept) = kept.as_ref().filter(|kept| manifest.is_some() && kept.manifest == manifest) {
        return Ok(kept.options.clone());
    }
    // The settings only: the manifest's list of files is passed over, not built.
    let mut options = match crate::tree::manifest::Manifest::read_each_file(out, |_, _| Ok(())) {
        Ok((manifest, _)) => crate::build::BuildOptions::of_tree(&manifest.settings),
        Err(_) => crate::build::BuildOptions::default(),
    };
    options.source_date_epoch = crate::date::source_date_epoch()?;
    Ok(options)
}

/// The options of the last rebuild, and the stamp of the manifest it left.
struct KeptOptions {
    options: crate::build::BuildOptions,
    manifest: Option<crate::fsutil::Stamp>,
}

/// What one rebuild came to.
enum Outcome {
    /// Built, with the start the tree's index records ([`crate::build::BuildSummary::base`]).
    Built(i64),
    /// The problems, as `gen check` prints them.
    Failed(String),
}

/// Rebuilds `out` from `data`, listing only what `watched` names when it is given.
fn rebuild(
    (data, out): (&Path, &Path),
    quiet: bool,
    watched: Option<Arc<WatchedChanges>>,
    kept: &mut Option<KeptOptions>,
) -> Outcome {
    let started = Instant::now();
    let changed = watched.as_ref().map_or(0, |watched| watched.len());
    let options = match options(out, kept) {
        Ok(options) => options,
        Err(e) => return failed(e),
    };
    // A tree found damaged by hand (see `super::note_damage`): a plain build trusts the tree
    // and would leave it so, a `--verify` build repairs it.
    let verify = super::damage_to_repair(out);
    let watched = watched.filter(|_| !verify);
    let build_options = crate::build::BuildOptions { watched, verify, ..options.clone() };
    let built = crate::build::build(data, out, &build_options, &Default::default());
    if verify && built.is_err() {
        super::note_damage(out); // still damaged: the next rebuild verifies
    }
    match built {
        Ok(summary) => {
            let manifest = crate::fsutil::Stamp::of_path(&out.join(crate::tree::manifest::MANIFEST_FILE));
            *kept = Some(KeptOptions { options, manifest });
            if !quiet && summary.up_to_date {
                say!("gen serve: the tree is already up to date with {}", data.display());
            } else if !quiet {
                let plural = |n: usize| if n == 1 { "path" } else { "paths" };
                let changed = match (summary.told, verify) {
                    (_, true) => "; the tree verified and repaired (it was found damaged)".to_string(),
                    (true, _) => format!("; {changed} {} seen changed, the rest trusted", plural(changed)),
                    (false, _) => String::new(),
                };
                say!(
                    "gen serve: rebuilt {} ({} resources, {} records) in {:.2} s{changed}",
                    crate::fsutil::show_dir(out),
                    summary.resources,
                    summary.records,
                    started.elapsed().as_secs_f64()
                );
            }
            Outcome::Built(summary.base)
        }
        Err(e) => failed(e),
    }
}

/// A rebuild that failed with `e`: the problems printed, as `gen check` prints them.
fn failed(e: anyhow::Error) -> Outcome {
    let text = match e.downcast_ref::<Problems>() {
        Some(problems) => problems.to_string(),
        None => format!("error: {e:#}"),
    };
    say!("{text}");
    say!("gen serve: still serving the last good build; fix the problems above and save");
    Outcome::Failed(text)
}

/// The first build, before serving. Problems are printed; when `out` holds no tree to fall
/// back on they end the command (exit status 1, as `gen build`), else the last good tree is
/// served and the problems are returned, to be shown until they are fixed.
pub(crate) fn build_at_start(data: &Path, out: &Path, quiet: bool) -> Result<Option<String>> {
    if crate::fsutil::is_inside(out, data) {
        bail!(
            "--dir {} is inside --data {}: each rebuild would change the data it watches; write the tree elsewhere",
            out.display(),
            data.display()
        );
    }
    if !data.is_dir() {
        bail!("--watch: the data folder {} does not exist: pass --data DIR", data.display());
    }
    crate::date::source_date_epoch()?;
    match rebuild((data, out), quiet, None, &mut None) {
        Outcome::Built(_) => Ok(None),
        Outcome::Failed(problems) => {
            if crate::tree::manifest::Manifest::read_with_bytes(out).is_err() {
                bail!("{} holds no tree to serve until the data builds: fix the problems above", out.display());
            }
            Ok(Some(problems))
        }
    }
}

/// Watches `data` from a thread of its own; after each burst of changes, rebuilds into `out`,
/// then calls `reload` (which loads the new tree) or shows the problems on `preview`.
///
/// Only changes count (create, modify, remove, rename): a build opens and reads every data
/// file, and those accesses must not queue the next build. The data folder's parent is watched
/// too (its direct entries only), so that a data folder deleted and recreated, or replaced by
/// another moved in, is noticed and watched anew.
pub fn start(
    data: PathBuf,
    out: PathBuf,
    preview: Arc<Preview>,
    quiet: bool,
    reload: impl Fn() + Send + 'static,
) -> Result<()> {
    let data = std::path::absolute(&data).with_context(|| format!("cannot watch {}", data.display()))?;
    let (events_tx, events) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(events_tx).context("cannot watch the data folder for changes")?;
    if let Err(e) = watcher.watch(&data, RecursiveMode::Recursive) {
        let hint = match e.kind {
            notify::ErrorKind::MaxFilesWatch => {
                " (a watch a folder: raise the limit, e.g. `sudo sysctl fs.inotify.max_user_watches=524288`)"
            }
            _ => "",
        };
        bail!("cannot watch {} for changes: {e}{hint}", data.display());
    }
    if let Some(parent) = data.parent()
        && let Err(e) = watcher.watch(parent, RecursiveMode::NonRecursive)
    {
        say!(
            "gen serve: cannot watch {} ({e}): if the data folder is deleted and recreated, restart gen serve",
            parent.display()
        );
    }
    let mut watched = identity(&data);
    if !quiet {
        say!("gen serve: watching {} for changes", data.display());
    }
    std::thread::Builder::new().name("gen-watch".into()).spawn(move || {
        let mut seen = Seen { changes: None, links: holds_a_link(&data) };
        let mut kept = None;
        while let Ok(event) = events.recv() {
            if !is_change(&event, &data) {
                continue;
            }
            seen.note(&event, &data);
            if !quiet_for(&events, DEBOUNCE, &data, &mut seen) {
                return;
            }
            // A data folder replaced whole (recreated, or another moved in) is watched anew,
            // before the rebuild reads it, so that no change made after this is missed.
            let now = identity(&data);
            if now != watched && now.is_some() {
                seen.changes = None;
                let _ = watcher.unwatch(&data);
                match watcher.watch(&data, RecursiveMode::Recursive) {
                    Ok(()) => watched = now,
                    Err(e) => say!("gen serve: cannot watch {} again: {e}", data.display()),
                }
            }
            // Changes seen from here on are the next rebuild's: it starts from this one's index.
            match rebuild((&data, &out), quiet, seen.changes.take().map(Arc::new), &mut kept) {
                Outcome::Built(base) => {
                    seen.changes = Some(WatchedChanges::since(base));
                    reload();
                    preview.set_problems(None);
                }
                Outcome::Failed(problems) => preview.set_problems(Some(problems)),
            }
        }
    })?;
    Ok(())
}

/// What the watcher saw change since the last rebuild, for the next one: `None` when that one
/// must list everything (no rebuild yet since watching began, the last one failed, events were
/// lost, or the data folder holds a link).
struct Seen {
    changes: Option<WatchedChanges>,
    /// True once a link was found in the data folder: no rebuild is then told what changed.
    links: bool,
}

impl Seen {
    /// Notes the paths `event` (a change) names, or that everything may have changed.
    fn note(&mut self, event: &notify::Result<notify::Event>, data: &Path) {
        use notify::event::{EventKind, ModifyKind};
        let Ok(event) = event else { return self.changes = None };
        let contents_only = matches!(event.kind, EventKind::Modify(ModifyKind::Data(_)));
        // A path created, renamed or changed in its metadata (a link count too) is looked at,
        // and so is all that a folder brought in holds.
        // (once one is found, none is looked for again)
        self.links = self.links
            || !contents_only
                && event.paths.iter().filter(|path| path.starts_with(data)).any(|path| holds_a_link(path));
        let Some(changes) = self.changes.as_mut().filter(|_| !self.links && !event.need_rescan()) else {
            return self.changes = None;
        };
        // A path outside the data folder (moved in from, or out to) is not the data's.
        let inside: Vec<&Path> = event.paths.iter().filter_map(|path| path.strip_prefix(data).ok()).collect();
        if inside.is_empty() || !inside.into_iter().all(|rel| changes.note(rel, contents_only)) {
            self.changes = None;
        }
    }
}

/// True when `path` (the data folder, or a path in it) is or holds a link, or cannot be walked.
/// A link is a symbolic link, to a file or a folder, or a file with more than one name (a hard
/// link): either can change with no event naming a path in the data folder (a symbolic link's
/// target, another name of the same file). Nothing at `path` holds no link.
fn holds_a_link(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if !path.exists() && !path.is_symlink() {
        return false; // removed: nothing there
    }
    let linked = |entry: walkdir::DirEntry| {
        entry.path_is_symlink() || entry.file_type().is_file() && entry.metadata().map_or(true, |meta| meta.nlink() > 1)
    };
    walkdir::WalkDir::new(path).into_iter().any(|entry| entry.map_or(true, linked))
}

/// True when `event` may change what a build of `data` reads: a change (not an access) of
/// `data` or of something in it. A failure to watch counts (something may have been missed).
fn is_change(event: &notify::Result<notify::Event>, data: &Path) -> bool {
    use notify::event::{EventKind, MetadataKind, ModifyKind};
    let event = match event {
        Ok(event) => event,
        Err(e) => {
            say!("gen serve: watching {}: {e}", data.display());
            return true;
        }
    };
    let kind_counts =
        !matches!(event.kind, EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)));
    // A rescan request (events were lost) names no path.
    kind_counts && (event.paths.is_empty() || event.paths.iter().any(|path| path.starts_with(data)))
}

/// Waits until no change has come for `quiet`: a burst of changes is one rebuild, its paths
/// noted in `seen`. False when the watcher is gone.
fn quiet_for(
    events: &mpsc::Receiver<notify::Result<notify::Event>>,
    quiet: Duration,
    data: &Path,
    seen: &mut Seen,
) -> bool {
    let mut until = Instant::now() + quiet;
    loop {
        match events.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(event) if is_change(&event, data) => {
                seen.note(&event, data);
                until = Instant::now() + quiet;
            }
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => return true,
            Err(mpsc::RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// The inode of a folder, to notice it was replaced (its stamp's times change with every
/// entry added or removed; its inode does not).
fn identity(path: &Path) -> Option<u64> {
    crate::fsutil::Stamp::of_path(path).map(|stamp| stamp.ino)
}
