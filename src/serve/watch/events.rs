//! The watch on the data folder of `gen serve --watch`, and what its events say changed.
//!
//! It is set up before the first build reads anything, so that no change that build could have
//! missed goes unseen (docs/builds.md, "A rebuild under a watcher"). Whatever casts doubt on
//! the watch itself makes the data folder be watched anew, whole, and the next rebuild list
//! everything: an event on the data folder itself (deleted, recreated, moved away or back, its
//! own attributes), events the system dropped (an inotify queue that overflowed asks for a
//! rescan), an error from the watcher, or a data folder that is not the one watched (by device
//! and inode). A file that can change with no event in the data folder (one with a second
//! name, a hard link, or a symbolic link) is watched on its own, by its inode, so that a write
//! through its other name still starts a rebuild, and every rebuild from then on lists
//! everything.

use crate::data::watched::WatchedChanges;
use anyhow::{Context, Result, bail};
use notify::{RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Events closer together than this are one change.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// The watch on a data folder, and what it saw since the last rebuild.
pub(crate) struct Watching {
    /// The data folder (absolute).
    pub(super) data: PathBuf,
    watcher: notify::RecommendedWatcher,
    events: mpsc::Receiver<notify::Result<notify::Event>>,
    /// The identity (device, inode) of the data folder as it was when watched: `None` when it
    /// could not be watched (it was missing).
    watched: Option<(u64, u64)>,
    seen: Seen,
}

/// What the watcher saw since the last rebuild.
#[derive(Default)]
struct Seen {
    /// What changed, for the next rebuild: `None` when that one must list everything (no
    /// rebuild yet, the last one failed, events were lost, the watch was renewed, or the data
    /// folder holds a link).
    changes: Option<WatchedChanges>,
    /// True once a link was found in the data folder: no rebuild is then told what changed.
    links: bool,
    /// True when the data folder must be watched anew, whole, before the next rebuild.
    renew: bool,
    /// Files (and links to folders) found that can change with no event in the data folder:
    /// each is watched on its own before the next rebuild.
    linked: Vec<(PathBuf, RecursiveMode)>,
    /// Every other file found since the last look (created, moved in): watched on its own
    /// too while [`Seen::each_file`] holds.
    plain: Vec<PathBuf>,
    /// True when every file of the data folder is watched on its own (it held at most
    /// [`each_file_budget`] files when last looked through whole): a second name given to one
    /// of them later, from outside the data folder, is then seen (a new name changes the
    /// file's link count, which only a watch on the file itself is told).
    each_file: bool,
}

impl Watching {
    /// Watches `data` (its whole tree), its parent (direct entries only: a data folder deleted
    /// and recreated, or another moved in, is noticed), and each file in it that can change
    /// unseen. Errors when `data` cannot be watched.
    pub(crate) fn new(data: &Path) -> Result<Watching> {
        let data = std::path::absolute(data).with_context(|| format!("cannot watch {}", data.display()))?;
        let (events_tx, events) = mpsc::channel();
        let mut watcher = notify::recommended_watcher(events_tx).context("cannot watch the data folder for changes")?;
        let watched = identity(&data);
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
        let mut watching = Watching { data, watcher, events, watched, seen: Seen::default() };
        watching.seen.look_through_whole(&watching.data);
        watching.watch_linked();
        Ok(watching)
    }

    /// The changes are counted from the build that recorded `base` as its start: the next
    /// rebuild may be told them (unless something since makes it list everything).
    pub(super) fn counted_from(&mut self, base: i64) {
        self.seen.changes = (!self.seen.links).then(|| WatchedChanges::since(base));
    }

    /// What the next rebuild is told changed (`None`: it lists everything); from here on,
    /// nothing is counted until [`Watching::counted_from`].
    pub(super) fn take_changes(&mut self) -> Option<WatchedChanges> {
        self.seen.changes.take()
    }

    /// Waits for the next burst of changes, and renews the watch if it is in doubt. False when
    /// the watcher is gone.
    pub(super) fn next_burst(&mut self) -> bool {
        loop {
            let Ok(event) = self.events.recv() else { return false };
            if is_change(&event, &self.data) {
                self.note(&event);
                break;
            }
        }
        if !self.quiet_for(DEBOUNCE) {
            return false;
        }
        self.renew();
        self.watch_linked();
        true
    }

    /// Waits until no change has come for `quiet`: a burst of changes is one rebuild, its paths
    /// noted. False when the watcher is gone.
    fn quiet_for(&mut self, quiet: Duration) -> bool {
        let mut until = Instant::now() + quiet;
        loop {
            match self.events.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(event) if is_change(&event, &self.data) => {
                    self.note(&event);
                    until = Instant::now() + quiet;
                }
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => return true,
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Notes the paths `event` (a change) names, or that everything may have changed, and
    /// whether the watch itself is in doubt.
    fn note(&mut self, event: &notify::Result<notify::Event>) {
        use notify::event::{EventKind, ModifyKind};
        let Ok(event) = event else {
            self.seen.renew = true;
            return self.seen.changes = None;
        };
        // The data folder itself (removed, created, moved, or its attributes), or events lost.
        if event.need_rescan() || event.paths.is_empty() || event.paths.contains(&self.data) {
            self.seen.renew = true;
            self.seen.changes = None;
        }
        let contents_only = matches!(event.kind, EventKind::Modify(ModifyKind::Data(_)));
        // A path created, renamed or changed in its metadata (a link count too) is looked
        // through for links, all that a folder brought in holds too.
        if !contents_only {
            for path in event.paths.iter().filter(|path| path.starts_with(&self.data) && **path != self.data) {
                self.seen.look_through(path);
            }
        }
        let Some(changes) = self.seen.changes.as_mut().filter(|_| !self.seen.links) else {
            return self.seen.changes = None;
        };
        // A path outside the data folder (moved in from, or out to) is not the data's.
        let inside: Vec<&Path> = event.paths.iter().filter_map(|path| path.strip_prefix(&self.data).ok()).collect();
        if inside.is_empty() || !inside.into_iter().all(|rel| changes.note(rel, contents_only)) {
            self.seen.changes = None;
        }
    }

    /// Before a rebuild: a watch in doubt, or a data folder that is not the one watched, is
    /// renewed, whole; the rebuild then lists everything.
    fn renew(&mut self) {
        let now = identity(&self.data);
        if !self.seen.renew && now == self.watched && now.is_some() {
            return;
        }
        self.seen.changes = None;
        // Every watch under the data folder goes (the old folder's, moved away, too), the
        // files watched on their own with them; all are looked for again.
        let _ = self.watcher.unwatch(&self.data);
        (self.seen.linked, self.seen.plain) = (Vec::new(), Vec::new());
        match self.watcher.watch(&self.data, RecursiveMode::Recursive) {
            Ok(()) => {
                (self.watched, self.seen.renew) = (now, false);
                self.seen.look_through_whole(&self.data);
            }
            // Missing: the rebuild says so; its reappearance names it, and it is watched then.
            Err(_) if now.is_none() => self.watched = None,
            Err(e) => {
                self.watched = None;
                say!("gen serve: cannot watch {} again: {e}; tried again at the next change", self.data.display());
            }
        }
    }

    /// Watches on its own each file noted as linked, and each other file noted while every
    /// file is: a write through another name (or to a symbolic link's target) then starts a
    /// rebuild too.
    fn watch_linked(&mut self) {
        let plain = std::mem::take(&mut self.seen.plain).into_iter().map(|path| (path, RecursiveMode::NonRecursive));
        for (path, mode) in std::mem::take(&mut self.seen.linked).into_iter().chain(plain) {
            if let Err(e) = self.watcher.watch(&path, mode)
                && path.exists()
            {
                say!(
                    "gen serve: cannot watch {} ({e}): a change made through another name of a file of the data \
                     folder (a hard or symbolic link) is seen only with the next change in the data folder{}",
                    path.display(),
                    match e.kind {
                        notify::ErrorKind::MaxFilesWatch => "; raise fs.inotify.max_user_watches",
                        _ => "",
                    }
                );
                return; // one message a burst: the others would fail alike
            }
        }
    }
}

impl Seen {
    /// Looks through the whole data folder `data` (just watched): every file is noted to be
    /// watched on its own while there are at most [`each_file_budget`] of them (more files at
    /// once, here or in a folder moved in, and no more is).
    fn look_through_whole(&mut self, data: &Path) {
        self.each_file = true;
        self.look_through(data);
    }

    /// Looks through `path` (the data folder, or a path in it) for links, noting each to be
    /// watched on its own, and every other file too while [`Seen::each_file`] holds. A link is
    /// a symbolic link, to a file or a folder, or a file with more than one name (a hard
    /// link): either can change with no event naming a path in the data folder (a symbolic
    /// link's target, another name of the same file). Nothing at `path` holds no link; a path
    /// that cannot be walked counts as holding one.
    fn look_through(&mut self, path: &Path) {
        use std::os::unix::fs::MetadataExt;
        if !path.exists() && !path.is_symlink() {
            return; // removed: nothing there
        }
        let budget = each_file_budget();
        for entry in walkdir::WalkDir::new(path) {
            let Ok(entry) = entry else {
                self.links = true;
                continue;
            };
            let is_file = entry.file_type().is_file();
            let linked = entry.path_is_symlink() || is_file && entry.metadata().map_or(true, |meta| meta.nlink() > 1);
            if linked {
                self.links = true;
                let mode = match entry.path().is_dir() {
                    true => RecursiveMode::Recursive,
                    false => RecursiveMode::NonRecursive,
                };
                self.linked.push((entry.into_path(), mode));
            } else if is_file && self.each_file {
                self.plain.push(entry.into_path());
                if self.plain.len() > budget {
                    (self.each_file, self.plain) = (false, Vec::new());
                    say!(
                        "gen serve: more than {budget} files in the data folder, too many to watch each on its \
                         own: a second name (hard link) given to one of them from outside it is not seen until \
                         gen serve is restarted"
                    );
                }
            }
        }
    }
}

/// The most files of a data folder watched each on its own (a watch a file, beside the watch a
/// folder): a quarter of the system's limit of inotify watches a user
/// (`fs.inotify.max_user_watches`), and at most 20,000 (each pins its file's inode in the
/// kernel's memory, up to 1 KB).
fn each_file_budget() -> usize {
    let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches").ok();
    let limit = limit.and_then(|text| text.trim().parse::<usize>().ok()).unwrap_or(8192);
    (limit / 4).min(20_000)
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

/// The identity of a folder, device and inode, to notice it was replaced (its times change
/// with every entry added or removed; its identity does not). An inode number can be used again
/// for the folder that replaces a deleted one: events on the folder itself are what tell.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|meta| (meta.dev(), meta.ino()))
}
