//! The quick answer to an unchanged build: when every file of the data folder has the stamp the
//! previous build recorded (and last changed well before it), and the settings are the same,
//! the tree is up to date. Telling so walks and stats the data folder, reads `gen.json`, and
//! nothing else: no record, no table, and no dataset is built.

use super::index::{self, Index, Place};
use super::walk::{Entry, Tables, walk};
use crate::config::{CONFIG_FILE, DataSettings};
use crate::fsutil::{self, Stamp};
use crate::manifest::TreeSettings;
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
    settings_of: impl FnOnce(&DataSettings) -> Option<TreeSettings>,
) -> Option<Unchanged> {
    let mut problems = Vec::new();
    let mut tables = Tables::default();
    let entries = walk(data, &mut problems, &mut tables);
    if !problems.is_empty() {
        return None;
    }
    let config_path = data.join(CONFIG_FILE);
    let has_config = config_path.exists();
    let others = tables.records.iter().map(|(_, file)| file).chain(tables.subdocs.iter().map(|(_, _, file)| file));
    let others: Vec<&Path> =
        others.map(|file| file.as_path()).chain(has_config.then_some(config_path.as_path())).collect();
    if entries.len() + others.len() != index.data.file_count() {
        return None;
    }
    let same = |file: &Path, place: Option<Place<'_>>| {
        let Ok(meta) = std::fs::metadata(file) else { return false };
        let stamp = Stamp::of(&meta);
        let old = match place {
            Some(place) => index.data.get_place(&place),
            None => index.data.get(&fsutil::relative(data, file)),
        };
        old.is_some_and(|old| old.line.is_none() && old.stamp == stamp && index.trusted(&stamp))
    };
    let entry_same = |entry: &Entry| match entry {
        Entry::Record { segment, id, file } => same(file, Some(Place { segment, kind: None, id: *id })),
        Entry::SubDoc { segment, id, name, file } => same(file, Some(Place { segment, kind: Some(name), id: *id })),
        Entry::Order { file, .. } => same(file, None),
    };
    let all_same = others.iter().all(|file| same(file, None)) && entries.par_iter().with_min_len(256).all(entry_same);
    if !all_same {
        return None;
    }
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
) -> Option<TreeSettings> {
    let mut settings = options.settings(config, index.settings.data_hash.clone()).ok()?;
    if options.source_date_epoch.is_none() && index.settings.same_but_date(&settings) {
        settings.deploy_date = index.settings.deploy_date.clone();
    }
    Some(settings)
}
