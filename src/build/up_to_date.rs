//! The quick answer to an unchanged build: when every file of the data folder has the stamp the
//! previous build recorded (and last changed well before it), and the settings are the same,
//! the tree is up to date. Telling so walks and stats the data folder, reads `gen.json`, and
//! nothing else: no record, no table, and no dataset is built.

use super::data_path::DataPath;
use super::index::{self, Index};
use super::walk::is_ignored;
use crate::config::{CONFIG_FILE, DataSettings};
use crate::fsutil::Stamp;
use crate::tree::manifest::BuildSettings;
use rayon::prelude::*;
use std::path::Path;

/// What an unchanged build found: the tree's settings and size, for its summary.
pub(crate) struct Unchanged {
    pub resources: usize,
    pub records: usize,
}

/// The data in `data` as the build `index` recorded it, when no file of it changed since and
/// `settings_of` gives the settings `index` holds: the build has nothing to do. `None` when a
/// file was added, removed or may have changed, when a setting changed, or when the walk found a
/// problem: the build then loads the data and decides as usual.
pub(crate) fn unchanged(
    data: &Path,
    index: &Index,
    settings_of: impl FnOnce(&DataSettings) -> Option<BuildSettings>,
) -> Option<Unchanged> {
    // Each file is checked as soon as it is stat'ed: an edit stops the walk where it is found.
    let same = |rel: &str, stamp: &Stamp| {
        let old = index.data.get(rel);
        old.is_some_and(|old| old.line.is_none() && old.stamp == *stamp && index.trusted(stamp))
    };
    let files = stamped_files(data, &same)?;
    if files.len() != index.data.file_count() {
        return None;
    }
    let config_path = data.join(CONFIG_FILE);
    let has_config = files.iter().any(|(rel, _)| rel == CONFIG_FILE);
    let config = match has_config {
        true => super::load::read_settings(&config_path).ok()?.0,
        false => DataSettings::default(),
    };
    let settings = settings_of(&config)?;
    (settings == index.settings).then(|| Unchanged { resources: index.lists.len(), records: index.data.record_count() })
}

/// The settings a build with `options` of data with `config` would have, were its data the
/// data `index` was built from: what [`unchanged`] compares with the index's.
pub(crate) fn settings_of(
    options: &super::BuildOptions,
    index: &index::Index,
    config: &DataSettings,
) -> Option<BuildSettings> {
    let mut settings = options.settings(config, index.settings.data_hash.clone()).ok()?;
    if options.source_date_epoch.is_none() && index.settings.same_but_date(&settings) {
        settings.deploy_date = index.settings.deploy_date.clone();
    }
    Some(settings)
}

/// Whether the file at a path relative to the data folder has the stamp the index recorded,
/// old enough to trust.
type Same<'a> = dyn Fn(&str, &Stamp) -> bool + Sync + 'a;

/// Every file of the data folder `data` that a build's walk would load, relative to it, with
/// its stamp, each `same` as the index recorded it (else `None`, right away): one `stat` a file or folder (links followed, as the walk follows them), the
/// files of a folder stat'ed in parallel. `None` when the walk would report a problem (a stray
/// file or folder, one that cannot be read, a resource held both as a folder and as a table):
/// the build then loads the data, and reports it.
fn stamped_files(data: &Path, same: &Same<'_>) -> Option<Vec<(String, Stamp)>> {
    let mut files = Vec::new();
    let (mut folders, mut tables) = (Vec::new(), Vec::new());
    for (rel, is_dir, stamp) in folder_entries(data, "", same)? {
        match DataPath::parse(&rel, is_dir) {
            Ok(DataPath::ResourceFolder { segment }) => folders.push(segment.to_string()),
            Ok(DataPath::Table { segment }) => {
                tables.push(segment.to_string());
                files.push((rel, stamp));
            }
            Ok(DataPath::Settings | DataPath::SubDocTable { .. }) => files.push((rel, stamp)),
            _ => return None,
        }
    }
    if folders.iter().any(|segment| tables.contains(segment)) {
        return None;
    }
    let in_folders: Option<Vec<Vec<(String, Stamp)>>> =
        folders.par_iter().map(|segment| resource_files(data, segment, same)).collect();
    files.extend(in_folders?.into_iter().flatten());
    Some(files)
}

/// The files of the resource folder `segment` and of its records' folders, with their stamps.
fn resource_files(data: &Path, segment: &str, same: &Same<'_>) -> Option<Vec<(String, Stamp)>> {
    let (mut files, mut record_folders) = (Vec::new(), Vec::new());
    for (rel, is_dir, stamp) in folder_entries(&data.join(segment), &format!("{segment}/"), same)? {
        match DataPath::parse(&rel, is_dir) {
            Ok(DataPath::Record { .. } | DataPath::Order { .. }) => files.push((rel, stamp)),
            Ok(DataPath::RecordFolder { .. }) => record_folders.push(rel),
            _ => return None,
        }
    }
    // A record's folder holds a sub-document or two: the folders are read in parallel, not
    // their few files.
    let subdocs = |rel: &String| -> Option<Vec<(String, Stamp)>> {
        let entries = folder_entries(&data.join(rel), &format!("{rel}/"), same)?;
        let subdoc = |(rel, is_dir, stamp): (String, bool, Stamp)| match DataPath::parse(&rel, is_dir) {
            Ok(DataPath::SubDoc { .. }) => Some((rel, stamp)),
            _ => None,
        };
        entries.into_iter().map(subdoc).collect()
    };
    // gathered into a vector a part of the work, not one a folder
    let in_folders = record_folders.par_iter().with_min_len(64).map(subdocs).try_fold(Vec::new, |mut all, found| {
        all.extend(found?);
        Some(all)
    });
    let in_folders = in_folders.try_reduce(Vec::new, |mut all, more| {
        all.extend(more);
        Some(all)
    })?;
    files.extend(in_folders);
    Some(files)
}

/// The entries of the folder `dir` (its path relative to the data folder is `prefix`) that the
/// walk does not skip: (path relative to the data folder, whether it is a folder, stamp), links
/// followed, stat'ed in parallel. `None` as soon as a file is not `same` as recorded.
fn folder_entries(dir: &Path, prefix: &str, same: &Same<'_>) -> Option<Vec<(String, bool, Stamp)>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name().into_string().ok()?;
        if !is_ignored(&name) {
            names.push((name, entry.file_type().ok()?.is_dir()));
        }
    }
    // A folder's type is known from its entry; a file (or a link) is stat'ed for its stamp.
    let stat = |(name, is_dir): &(String, bool)| {
        let rel = format!("{prefix}{name}");
        if *is_dir {
            return Some((rel, true, Stamp::default()));
        }
        let meta = std::fs::metadata(dir.join(name)).ok()?;
        let stamp = Stamp::of(&meta);
        (meta.is_dir() || same(&rel, &stamp)).then_some((rel, meta.is_dir(), stamp))
    };
    names.par_iter().with_min_len(256).map(stat).collect()
}
