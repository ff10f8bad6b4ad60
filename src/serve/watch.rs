//! `gen serve --watch`: rebuild the tree whenever anything under the data folder changes.
//!
//! File system events come from the `notify` crate (inotify, FSEvents, ...), debounced so that a
//! burst (an editor saving by rename, a `git checkout` creating and deleting hundreds of files)
//! gives one rebuild. Each rebuild is `genapi::build`, which swaps the new tree in whole; the
//! server then loads it at once. A rebuild that finds problems prints them as `gen check` does,
//! keeps the last good tree served, and shows them on the HTML view until a rebuild succeeds.

use super::html::Preview;
use crate::problem::Problems;
use anyhow::{Context, Result, bail};
use notify_debouncer_mini::{new_debouncer, notify::RecursiveMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Events closer together than this are one change.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// The build options of a rebuild: the data's settings, with the link style, indentation and
/// gzip copies of the tree already in `out`, so that a rebuild changes only what the data does.
fn options(out: &Path) -> crate::BuildOptions {
    let mut options = crate::BuildOptions {
        source_date_epoch: std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|t| t.trim().parse().ok()),
        ..Default::default()
    };
    if let Ok((_, manifest)) = crate::manifest::Manifest::read_with_bytes(out) {
        options.links = Some(manifest.settings.links);
        options.pretty = manifest.settings.pretty;
        options.gzip = manifest.settings.gzip;
    }
    options
}

/// What one rebuild came to.
enum Outcome {
    Built,
    /// The problems, as `gen check` prints them.
    Failed(String),
}

fn rebuild(data: &Path, out: &Path, quiet: bool) -> Outcome {
    let started = Instant::now();
    match crate::build(data, out, &options(out), &Default::default()) {
        Ok(summary) => {
            if !quiet && !summary.up_to_date {
                eprintln!(
                    "gen serve: rebuilt {} ({} resources, {} records) in {:.2} s",
                    super::tree::show_dir(out),
                    summary.resources,
                    summary.records,
                    started.elapsed().as_secs_f64()
                );
            }
            Outcome::Built
        }
        Err(e) => {
            let text = match e.downcast_ref::<Problems>() {
                Some(problems) => problems.to_string(),
                None => format!("error: {e:#}"),
            };
            eprintln!("{text}");
            eprintln!("gen serve: still serving the last good build; fix the problems above and save");
            Outcome::Failed(text)
        }
    }
}

/// The first build, before serving. Problems are printed; when `out` holds no tree to fall
/// back on they end the command (exit status 1, as `gen build`), else the last good tree is
/// served and the problems are returned, to be shown until they are fixed.
pub(crate) fn build_at_start(data: &Path, out: &Path, quiet: bool) -> Result<Option<String>> {
    if let (Ok(data_abs), Ok(out_abs)) = (data.canonicalize(), std::path::absolute(out))
        && out_abs.starts_with(&data_abs)
    {
        bail!(
            "--dir {} is inside --data {}: each rebuild would change the data it watches; write the tree elsewhere",
            out.display(),
            data.display()
        );
    }
    if !data.is_dir() {
        bail!("--watch: the data folder {} does not exist: pass --data DIR", data.display());
    }
    match rebuild(data, out, quiet) {
        Outcome::Built => Ok(None),
        Outcome::Failed(problems) => {
            if crate::manifest::Manifest::read_with_bytes(out).is_err() {
                bail!("{} holds no tree to serve until the data builds: fix the problems above", out.display());
            }
            Ok(Some(problems))
        }
    }
}

/// Watches `data` from a thread of its own; after each burst of changes, rebuilds into `out`,
/// then calls `reload` (which loads the new tree) or shows the problems on `preview`.
pub fn start(
    data: PathBuf,
    out: PathBuf,
    preview: Arc<Preview>,
    quiet: bool,
    reload: impl Fn() + Send + 'static,
) -> Result<()> {
    let (events_tx, events) = mpsc::channel();
    let mut debouncer = new_debouncer(DEBOUNCE, events_tx).context("cannot watch the data folder for changes")?;
    debouncer
        .watcher()
        .watch(&data, RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch {} for changes", data.display()))?;
    let mut watched = identity(&data);
    if !quiet {
        eprintln!("gen serve: watching {} for changes", data.display());
    }
    std::thread::Builder::new().name("gen-watch".into()).spawn(move || {
        for batch in events.iter() {
            // Whatever else is queued is part of the same burst.
            while events.try_recv().is_ok() {}
            if let Err(e) = batch {
                eprintln!("gen serve: watching {}: {e}", data.display());
            }
            match rebuild(&data, &out, quiet) {
                Outcome::Built => {
                    reload();
                    preview.set_problems(None);
                }
                Outcome::Failed(problems) => preview.set_problems(Some(problems)),
            }
            // A data folder replaced whole (moved away and back, recreated) is watched anew.
            let now = identity(&data);
            if now != watched && now.is_some() {
                let watcher = debouncer.watcher();
                let _ = watcher.unwatch(&data);
                match watcher.watch(&data, RecursiveMode::Recursive) {
                    Ok(()) => watched = now,
                    Err(e) => eprintln!("gen serve: cannot watch {} again: {e}", data.display()),
                }
            }
        }
    })?;
    Ok(())
}

/// The device and inode of a folder, to notice it was replaced.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}
