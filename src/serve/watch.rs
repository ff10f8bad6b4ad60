//! `gen serve --watch`: rebuild the tree whenever anything under the data folder changes.
//!
//! File system events come from the `notify` crate (inotify, FSEvents, ...): changes only, not
//! accesses (the build's own reads of the data would queue the next build for ever), debounced
//! so that a burst (an editor saving by rename, a `git checkout` creating and deleting hundreds
//! of files) gives one rebuild. Each rebuild is `genapi::build`, which swaps the new tree in whole; the
//! server then loads it at once. A rebuild that finds problems prints them as `gen check` does,
//! keeps the last good tree served, and shows them on the HTML view until a rebuild succeeds.
//!
//! The data folder is watched before the first build reads it ([`events`]), so that a change
//! made while `gen serve` starts is a change seen. The paths the events name are handed to the
//! next rebuild ([`WatchedChanges`]): it lists those, and takes every other file and folder
//! from the previous build's index without a `stat`. Only for a rebuild that follows one this
//! watcher saw start, and never for a data folder holding a link (a link's target may change
//! outside it, unwatched); lost events, an error from the watcher, a failed rebuild or a data
//! folder replaced whole make the next rebuild list everything. Nothing a rebuild meets ends
//! the watch: a rebuild that fails, even on a bug, is a failed rebuild.

mod events;

use super::html::Preview;
use crate::data::watched::WatchedChanges;
use crate::problem::Problems;
use anyhow::{Result, bail};
use events::Watching;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

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
    let manifest = Stamp::of_path(&super::origin::commit_file(out));
    if let Some(kept) = kept.as_ref().filter(|kept| manifest.is_some() && kept.manifest == manifest) {
        return Ok(kept.options.clone());
    }
    // The settings only: the manifest's list of files is passed over, not built.
    let settings = match crate::archive::is_archive(out) {
        // an archive's manifest document: one block and one document read
        true => super::source::open_archive(out, 1 << 20).map(|(_, manifest)| manifest),
        false => crate::tree::manifest::Manifest::read_each_file(out, |_, _| Ok(())).map(|(manifest, _)| manifest),
    };
    let mut options = match settings {
        Ok(manifest) => crate::build::BuildOptions::of_tree(&manifest.settings),
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
    let build_options = match as_archive(build_options, out) {
        Ok(build_options) => build_options,
        Err(e) => return failed(e),
    };
    // A bug met by one rebuild (a panic) fails that rebuild, and the watch goes on.
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::build::build(data, out, &build_options, &Default::default())
    }))
    .unwrap_or_else(|panic| Err(internal_error(panic.as_ref())));
    if verify && built.is_err() {
        super::note_damage(out); // still damaged: the next rebuild verifies
    }
    match built {
        Ok(summary) => {
            let manifest = crate::fsutil::Stamp::of_path(&super::origin::commit_file(out));
            *kept = Some(KeptOptions { options, manifest });
            if !quiet && summary.up_to_date {
                say!("gen serve: the tree is already up to date with {}", crate::fsutil::show_dir(data));
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

/// The options of a rebuild into `out`: when `out` holds an archive, the rebuild writes an
/// archive too (issue 49), so a tree is never written over an archive, nor an archive over a
/// tree.
fn as_archive(options: crate::build::BuildOptions, out: &Path) -> Result<crate::build::BuildOptions> {
    Ok(crate::build::BuildOptions { archive: options.archive || crate::archive::is_archive(out), ..options })
}

/// The error of a rebuild that panicked with `panic`: a bug in gen, said as one.
fn internal_error(panic: &(dyn std::any::Any + Send)) -> anyhow::Error {
    let what = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    anyhow::anyhow!(
        "the rebuild stopped on an internal error ({}): this is a bug in gen, please report it; \
         the next change tries again",
        what.unwrap_or("no message")
    )
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

/// The first build, before serving, with the data folder already watched: a change made
/// while it runs, or before the watch loop starts, is in the watch's queue and rebuilt after
/// it. Problems are printed; when `out` holds no tree to fall back on they end the command
/// (exit status 1, as `gen build`), else the last good tree is served and the problems are
/// returned, to be shown until they are fixed. The watch is handed to [`start`].
pub(crate) fn build_at_start(data: &Path, out: &Path, quiet: bool) -> Result<(Option<String>, Watch)> {
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
    let mut watch = Watch { watching: Watching::new(data)?, kept: None, data: data.to_path_buf() };
    if !quiet {
        say!("gen serve: watching {} for changes", crate::fsutil::show_dir(data));
    }
    match rebuild((data, out), quiet, None, &mut watch.kept) {
        Outcome::Built(base) => {
            watch.watching.counted_from(base);
            Ok((None, watch))
        }
        Outcome::Failed(problems) => {
            let archive = crate::archive::is_archive(out);
            if !archive && crate::tree::manifest::Manifest::read_with_bytes(out).is_err() {
                bail!("{} holds no tree to serve until the data builds: fix the problems above", out.display());
            }
            Ok((Some(problems), watch))
        }
    }
}

/// The watch on the data folder, set up by [`build_at_start`] before the first build, with the
/// options that build was made with.
pub(crate) struct Watch {
    watching: Watching,
    kept: Option<KeptOptions>,
    /// The data folder as the user named it (the watch's own is absolute): each rebuild reads
    /// it by this path, so that its messages name paths as the user does.
    data: PathBuf,
}

/// Goes on watching the data folder from a thread of its own; after each burst of changes,
/// rebuilds into `out`, then calls `reload` (which loads the new tree) or shows the problems on
/// `preview`. Nothing a rebuild meets ends the thread.
pub(crate) fn start(
    mut watch: Watch,
    out: PathBuf,
    preview: Arc<Preview>,
    quiet: bool,
    reload: impl Fn() + Send + 'static,
) -> Result<()> {
    std::thread::Builder::new().name("gen-watch".into()).spawn(move || {
        while watch.watching.next_burst() {
            // Changes seen from here on are the next rebuild's: it starts from this one's index.
            let told = watch.watching.take_changes().map(Arc::new);
            match rebuild((&watch.data, &out), quiet, told, &mut watch.kept) {
                Outcome::Built(base) => {
                    watch.watching.counted_from(base);
                    reload();
                    preview.set_problems(None);
                }
                Outcome::Failed(problems) => preview.set_problems(Some(problems)),
            }
        }
    })?;
    Ok(())
}
