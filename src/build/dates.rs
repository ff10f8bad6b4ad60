//! The dates a build gives its tree when no `SOURCE_DATE_EPOCH` gives them: `meta`'s
//! `deploy_date` and each bulk-data file's `updated_at`, from git for committed data (one
//! `git status` and one `git log` a build, [`commit_dates`](crate::data::commit_dates::commit_dates)), so that every fresh
//! clone of a commit builds the same bytes.

use super::index::Index;
use crate::data::load::Dataset;
use crate::tree::manifest::BuildSettings;
use std::collections::BTreeMap;
use std::path::Path;

/// Sets `settings.deploy_date`, when `source_date_epoch` does not give it: the same tree again
/// keeps the date of the build `previous` describes (and is found up to date); committed data
/// is dated by its last commit; else the build's clock (already in `settings`). Returns the
/// bulk-data files' dates when git was asked: by resource for committed data, none (each file
/// takes the deploy date) else; `None` when git was not asked (the write asks, if it must).
pub(super) fn from_git(
    data: &Path,
    settings: &mut BuildSettings,
    source_date_epoch: Option<i64>,
    previous: Option<&Index>,
    dataset: &Dataset,
) -> Option<BTreeMap<String, i64>> {
    if source_date_epoch.is_some() {
        return None;
    }
    if let Some(index) = previous.filter(|index| index.settings.same_but_date(settings)) {
        settings.deploy_date = index.settings.deploy_date.clone();
        return None;
    }
    let segments: Vec<&str> = dataset.resources.keys().map(String::as_str).collect();
    match crate::data::commit_dates::commit_dates(data, if settings.bulk { &segments } else { &[] }) {
        Some(dates) => {
            settings.deploy_date = dates.data.to_string();
            Some(dates.resources)
        }
        None => Some(BTreeMap::new()),
    }
}
