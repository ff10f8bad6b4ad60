//! The quick answer to an unchanged build: when the data folder's listing found every file
//! with the stamp the previous build recorded (and last changed well before it), no folder that
//! changed, and the settings are the same, the tree is up to date. Telling so takes the listing
//! (`listing`: a `stat` a file and a folder, the changed folders read) and `gen.json`, and
//! nothing else: no record, no table, and no dataset is built.

use super::index::{self, Index};
use crate::config::{CONFIG_FILE, DataSettings};
use crate::data::listing::Listing;
use crate::tree::manifest::BuildSettings;
use std::path::Path;

/// What an unchanged build found: the tree's settings and size, for its summary.
pub(crate) struct Unchanged {
    pub(crate) resources: usize,
    pub(crate) records: usize,
    /// The start of the build the index records.
    pub(crate) started_ns: i64,
}

/// The data in `data`, listed as `listing`, as the build `index` recorded it, when no file of
/// it changed since and `settings_of` gives the settings `index` holds: the build has nothing
/// to do. `None` when a file was added, removed or may have changed, when a folder needed
/// reading, or when a setting changed: the build then loads the data and decides as usual.
pub(crate) fn unchanged(
    data: &Path,
    listing: &Listing,
    index: &Index,
    settings_of: impl FnOnce(&DataSettings) -> Option<BuildSettings>,
) -> Option<Unchanged> {
    if !listing.unchanged_since(index.data_recorded()) {
        return None;
    }
    let config = match listing.others().any(|file| file.rel == CONFIG_FILE) {
        true => crate::data::settings::read_settings(&data.join(CONFIG_FILE)).ok()?.0,
        false => DataSettings::default(),
    };
    let settings = settings_of(&config)?;
    (settings == index.settings).then(|| Unchanged {
        resources: index.lists.len(),
        records: index.data.record_count(),
        started_ns: index.started_ns,
    })
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
