//! What an unfinished publish leaves on the target beside the tree (its marker, and the records
//! of publishes stopped when their lock was taken), and reading it back with the manifest.

use super::object::{read_failed, read_optional};
use super::target::{Stage, Target, explain};
use crate::tree::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest};
use anyhow::Result;
use futures_util::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The object an unfinished publish leaves on the target (beside `manifest.json`): written before
/// the first upload, removed after the last delete.
pub(crate) const MARKER: &str = ".gen-publish.json";

/// What the marker says: what the next publish may delete if this one does not finish. Every
/// path it lists is checked with [`crate::tree::layout::is_tree_file`] before it is acted on: a marker is
/// read from the bucket, where anyone with write access may have put it.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Marker {
    /// BLAKE3 of the manifest being published.
    pub(super) publishing: String,
    /// Paths a published manifest listed that the publish will delete after its manifest.
    pub(super) deletes: BTreeSet<String>,
    /// Paths the publish writes that the published manifest does not list: if it is killed and
    /// the tree published next lacks them, they are its leftovers, not someone else's files.
    #[serde(default)]
    pub(super) created: BTreeSet<String>,
    /// Paths uploaded or deleted whose urls are not yet written to a `--changed-urls` file: the
    /// next publish adds them to its own list, so a purge list is never lost.
    #[serde(default)]
    pub(super) changed: BTreeSet<String>,
}

impl Marker {
    /// Both markers' paths together (`publishing` stays this one's).
    fn merge(mut self, other: Marker) -> Marker {
        self.deletes.extend(other.deletes);
        self.created.extend(other.created);
        self.changed.extend(other.changed);
        self
    }
}

/// The folder of the records stopped publishes leave, `<token>.json` each (a marker, as
/// [`MARKER`]): a publish that finds its lock is not its own any more writes nothing more to the
/// tree and leaves one, after its last write, so that the next publish compares every object
/// whatever the other publish did meanwhile. A record is deleted only by a publish that read it
/// before comparing every object, and finished.
pub(crate) const STOPPED: &str = ".gen-publish-stopped";

/// Most records of stopped publishes one publish reads (the rest are left for the next).
const MAX_STOPPED: usize = 16;

/// What the target holds besides the tree's files.
pub(super) struct Found {
    pub(super) manifest_bytes: Option<Vec<u8>>,
    pub(super) manifest: Option<Manifest>,
    /// The marker of an unfinished publish and the records of stopped ones, merged.
    pub(super) marker: Option<Marker>,
    /// The records of stopped publishes read (paths under [`STOPPED`]).
    pub(super) stopped: Vec<String>,
}

/// Reads the target's manifest, marker and records of stopped publishes, each bounded like the
/// local manifest (a marker lists at most what a manifest does).
pub(super) async fn read_target(target: &Target, store: &dyn ObjectStore, place: &str) -> Result<Found> {
    let read = |path: String, doing: &'static str| async move {
        read_optional(store, target, &path, MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| read_failed(e, &path, MAX_MANIFEST_BYTES, doing, target, place))
    };
    let manifest_bytes = read(MANIFEST_FILE.into(), "reading manifest.json").await?;
    let manifest = match &manifest_bytes {
        Some(bytes) => Some(Manifest::from_bytes(bytes).map_err(|_| {
            anyhow::anyhow!(
                "{}/{MANIFEST_FILE} is not a manifest written by gen: publish into an empty bucket or another prefix",
                target.shown.trim_end_matches('/')
            )
        })?),
        None => None,
    };
    let (stopped, records) = read_stopped(target, store, place, &[]).await?;
    let mut marker = None;
    if let Some(bytes) = read(MARKER.into(), "reading the publish marker").await? {
        marker = Some(serde_json::from_slice(&bytes).unwrap_or_default());
    }
    let marker = match (marker, records) {
        (Some(marker), Some(records)) => Some(Marker::merge(marker, records)),
        (marker, records) => marker.or(records),
    };
    Ok(Found { manifest_bytes, manifest, marker, stopped })
}

/// The records of stopped publishes on the target (at most [`MAX_STOPPED`]), but those in
/// `known` (read already): their paths, and what they say, merged.
pub(super) async fn read_stopped(
    target: &Target,
    store: &dyn ObjectStore,
    place: &str,
    known: &[String],
) -> Result<(Vec<String>, Option<Marker>)> {
    let stopped: Vec<String> = store
        .list(Some(&target.key(STOPPED)))
        .try_filter_map(|meta| async move { Ok(target.relative(&meta.location).filter(|path| !known.contains(path))) })
        .take(MAX_STOPPED)
        .try_collect()
        .await
        .map_err(|e| explain(e, "listing the records of stopped publishes", target, place, Stage::Before))?;
    let mut marker: Option<Marker> = None;
    for path in &stopped {
        let bytes = read_optional(store, target, path, MAX_MANIFEST_BYTES).await.map_err(|e| {
            read_failed(e, path, MAX_MANIFEST_BYTES, "reading the record of a stopped publish", target, place)
        })?;
        if let Some(bytes) = bytes {
            let found: Marker = serde_json::from_slice(&bytes).unwrap_or_default();
            marker = Some(match marker.take() {
                Some(marker) => marker.merge(found),
                None => found,
            });
        }
    }
    Ok((stopped, marker))
}
