//! What a publish of an archive finds and decides before it writes: the local archive (its root,
//! the parts it names, its manifest's base url), what the target holds (its root, the parts
//! present, the record of retired parts, an unfinished publish's marker), the keys whose
//! answers change, and the plan (which parts to upload, whether the root, which parts to delete).

use super::marker::read_target;
use super::object::{read_failed, read_optional};
use super::plan::Plan;
use super::target::{Stage, Target, explain};
use super::{PublishOptions, PublishSummary};
use crate::archive::{BlockAt, Folder, MANIFEST_KEY, RangeSource, Reader, RootFiles, block_keys, changed_keys};
use crate::tree::layout;
use crate::tree::manifest::Manifest;
use anyhow::{Context, Result, bail};
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The archive's commit point on the target, written last.
pub(crate) const ROOT: &str = "root";
/// The folder of the parts on the target.
pub(crate) const PARTS: &str = "parts";
/// The record of the parts no root names any more, and since when (seconds since the epoch).
pub(crate) const RETIRED: &str = ".gen-publish-retired.json";

/// Largest root read, local or remote: a root of 10M records is about 3 MB.
const MAX_ROOT_BYTES: u64 = 64 << 20;

/// The local archive being published.
pub(super) struct LocalArchive {
    dir: PathBuf,
    /// The root's stored bytes, uploaded last.
    pub(super) root_bytes: Vec<u8>,
    /// What the root names.
    pub(super) root: RootFiles,
    /// The base url of its manifest, for `--changed-urls`.
    pub(super) base_url: String,
}

impl LocalArchive {
    /// Opens the archive in `dir`: its root, every part it names there with the size it names,
    /// and its manifest (`manifest.json` key) read and checked.
    pub(super) fn open(dir: &Path) -> Result<LocalArchive> {
        let rebuild = "rebuild it with `gen build --archive`, then publish again";
        let root_file = dir.join(ROOT);
        let root_bytes = read_regular(&root_file, MAX_ROOT_BYTES)?;
        let root = RootFiles::decode(&root_bytes).map_err(|e| anyhow::anyhow!("{e}: {rebuild}"))?;
        for (file, size) in &root.parts {
            let path = dir.join(file);
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_file() && meta.len() == *size => {}
                Ok(meta) if meta.is_file() => bail!(
                    "{} is {} bytes and the archive's root names it with {size}: the archive is not whole; {rebuild}",
                    path.display(),
                    meta.len()
                ),
                _ => bail!(
                    "{} is missing (or not a regular file), and the archive's root names it: the archive is not whole; \
                     {rebuild}",
                    path.display()
                ),
            }
        }
        let reader = Reader::open(Folder(dir.to_path_buf())).map_err(|e| anyhow::anyhow!("{e}: {rebuild}"))?;
        let manifest = reader
            .get(MANIFEST_KEY)
            .map_err(|e| anyhow::anyhow!("{e}: {rebuild}"))?
            .with_context(|| format!("the archive in {} holds no {MANIFEST_KEY}: {rebuild}", dir.display()))?;
        let manifest = Manifest::from_bytes(&manifest.bytes)
            .with_context(|| format!("the {MANIFEST_KEY} in the archive {} is not gen's: {rebuild}", dir.display()))?;
        Ok(LocalArchive { dir: dir.to_path_buf(), root_bytes, root, base_url: manifest.settings.base_url })
    }

    /// The bytes of a part the root names, checked against its name (a part is named by the
    /// BLAKE3 hash of its bytes).
    pub(super) fn read_part(&self, file: &str) -> Result<Vec<u8>> {
        let path = self.dir.join(file);
        let bytes = read_regular(&path, self.root.parts.get(file).copied().unwrap_or(0))?;
        if !file.ends_with(blake3::hash(&bytes).to_hex().as_str()) {
            bail!(
                "{} does not hash to its name (it changed while it was published, or is damaged): rebuild the \
                 archive with `gen build --archive`, then publish again; the published root is still the previous one",
                path.display()
            );
        }
        Ok(bytes)
    }

    /// The keys of a block read from the local folder, if its part is there and holds it.
    fn block(&self, at: &BlockAt) -> Option<Vec<(String, [u8; 32])>> {
        let source = Folder(self.dir.clone());
        let stored = source.read(&at.file, at.offset, at.length).ok()?;
        block_keys(at, &stored).ok()
    }
}

/// A regular file of at most `limit` bytes (a link is never followed).
fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() || meta.len() > limit {
        bail!("{} is not a regular file of at most {limit} bytes: it is not the archive's", path.display());
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The record of retired parts: each part no root names, with when the publish that found it
/// unnamed ran (seconds since the epoch).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Retired {
    pub(super) parts: BTreeMap<String, i64>,
}

/// What the target holds.
pub(super) struct RemoteArchive {
    root_bytes: Option<Vec<u8>>,
    /// Parts present: file → size.
    present: BTreeMap<String, u64>,
    /// Parts present whose bytes are not their name's (read back with `--verify`).
    damaged: BTreeSet<String>,
    retired: Retired,
    /// The keys whose answers the new root changes, with those an unfinished publish changed.
    changed: BTreeSet<String>,
    unfinished: bool,
    stopped: Vec<String>,
}

/// Reads what the target holds: refuses a target holding a tree, or a root gen did not write.
pub(super) async fn read_remote(
    local: &LocalArchive,
    target: &Target,
    store: &dyn ObjectStore,
    place: &str,
    verify: bool,
) -> Result<RemoteArchive> {
    let shown = target.shown.trim_end_matches('/');
    let found = read_target(target, store, place).await?;
    if found.manifest_bytes.is_some() {
        bail!(
            "{shown} holds a published tree (its manifest.json), and this is an archive: nothing was published. \
             Publish the archive to an empty target or another prefix (e.g. {shown}/archive) and point the edge \
             handler there (`gen config cloudflare|deno|node --dir <archive>`), then delete the tree's objects; or \
             publish a tree (`gen build` without --archive) here"
        );
    }
    let root_bytes = read_optional(store, target, ROOT, MAX_ROOT_BYTES)
        .await
        .map_err(|e| read_failed(e, ROOT, MAX_ROOT_BYTES, "reading the published root", target, place))?;
    let old = match &root_bytes {
        Some(bytes) => Some(RootFiles::decode(bytes).map_err(|e| {
            anyhow::anyhow!(
                "{shown}/{ROOT} is not an archive root gen wrote ({e}): publish into an empty target or another prefix"
            )
        })?),
        None => None,
    };
    let listed = |e| explain(e, "listing the parts", target, place, Stage::Before);
    let present: BTreeMap<String, u64> = store
        .list(Some(&target.key(PARTS)))
        .try_filter_map(|meta| async move {
            Ok(target.relative(&meta.location).filter(|path| is_part_file(path)).map(|path| (path, meta.size)))
        })
        .try_collect()
        .await
        .map_err(listed)?;
    let retired = match read_optional(store, target, RETIRED, MAX_ROOT_BYTES).await {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_default(),
        Ok(None) => Retired::default(),
        Err(e) => {
            return Err(read_failed(e, RETIRED, MAX_ROOT_BYTES, "reading the record of retired parts", target, place));
        }
    };
    let mut changed = BTreeSet::new();
    if root_bytes.as_deref() != Some(local.root_bytes.as_slice()) {
        changed = changed_in(local, old.as_ref(), target, store).await.map_err(listed)?;
    }
    let marker = found.marker;
    let is_key = |key: &&String| key.as_str() == MANIFEST_KEY || layout::is_tree_file(key);
    changed.extend(marker.iter().flat_map(|m| &m.changed).filter(is_key).cloned());
    let mut remote = RemoteArchive {
        root_bytes,
        present,
        damaged: BTreeSet::new(),
        retired,
        changed,
        unfinished: marker.is_some(),
        stopped: found.stopped,
    };
    if verify {
        verify_parts(local, &mut remote, target, store, place).await?;
    }
    Ok(remote)
}

/// True for a part's file as gen names it, `parts/` and 64 lowercase hex digits: nothing else
/// under `parts/` is ever uploaded over, listed as a part or deleted.
fn is_part_file(path: &str) -> bool {
    path.strip_prefix("parts/")
        .is_some_and(|name| name.len() == 64 && name.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// With `--verify`: reads back every part the new root names that the target holds, and marks
/// those whose bytes are not their name's, for upload.
async fn verify_parts(
    local: &LocalArchive,
    remote: &mut RemoteArchive,
    target: &Target,
    store: &dyn ObjectStore,
    place: &str,
) -> Result<()> {
    let present: Vec<&String> = local.root.parts.keys().filter(|file| remote.present.contains_key(*file)).collect();
    let damaged: Vec<Option<String>> = stream::iter(present)
        .map(|file| async move {
            let bytes = store.get(&target.key(file)).await?.bytes().await?;
            Ok::<_, object_store::Error>(
                (!file.ends_with(blake3::hash(&bytes).to_hex().as_str())).then(|| file.clone()),
            )
        })
        .buffer_unordered(4)
        .try_collect()
        .await
        .map_err(|e| explain(e, "reading back a part (--verify)", target, place, Stage::Before))?;
    remote.damaged = damaged.into_iter().flatten().collect();
    Ok(())
}

/// The keys whose answers differ between the published root `old` (none: every key is new)
/// and the local one, from the blocks only one of them indexes: the local archive's read from
/// its folder, the published one's from the folder when its part is still there, else from
/// the target by range.
async fn changed_in(
    local: &LocalArchive,
    old: Option<&RootFiles>,
    target: &Target,
    store: &dyn ObjectStore,
) -> object_store::Result<BTreeSet<String>> {
    let empty = RootFiles { parts: BTreeMap::new(), blocks: Vec::new() };
    let old = old.unwrap_or(&empty);
    let mut new_keys = Vec::new();
    for at in local.root.blocks_not_in(old) {
        let keys = local.block(&at).ok_or_else(|| object_store::Error::Generic {
            store: "local archive",
            source: format!("{}: a directory block of the local archive cannot be read", at.file).into(),
        })?;
        new_keys.extend(keys);
    }
    let old_blocks: Vec<Vec<(String, [u8; 32])>> = stream::iter(old.blocks_not_in(&local.root))
        .map(|at| async move {
            if let Some(keys) = local.block(&at) {
                return Ok(keys);
            }
            let stored = store.get_range(&target.key(&at.file), at.offset..at.offset + at.length).await?;
            block_keys(&at, &stored).map_err(|e| object_store::Error::Generic { store: "target", source: e.into() })
        })
        .buffer_unordered(8)
        .try_collect()
        .await?;
    Ok(changed_keys(old_blocks.into_iter().flatten(), new_keys))
}

/// What a publish of an archive does.
pub(super) struct ArchivePlan {
    /// Parts to upload (absent from the target, of another size, or damaged).
    pub(super) part_uploads: Vec<String>,
    /// True when the root is not the published one: written last.
    pub(super) root_upload: bool,
    /// Parts present, named by no root, and unnamed for the grace period or longer.
    pub(super) deletes: Vec<String>,
    /// Parts kept, named by no root, and since when (the record's times).
    kept: BTreeMap<String, i64>,
    /// Parts found unnamed by this publish, not in the record yet.
    newly: Vec<String>,
    /// True when the record of retired parts is to be written again.
    pub(super) retired_changed: bool,
    /// The keys whose answers change.
    pub(super) changed: BTreeSet<String>,
    /// The parts named, already in place.
    unchanged: usize,
    /// True when an unfinished publish's marker (or a stopped one's record) was found.
    pub(super) found_unfinished: bool,
    /// Records of stopped publishes read, removed at the end.
    pub(super) stopped: Vec<String>,
    verify: bool,
}

impl ArchivePlan {
    /// Decides, at `now` (seconds since the epoch), what to upload and delete.
    pub(super) fn new(local: &LocalArchive, remote: RemoteArchive, options: &PublishOptions, now: i64) -> ArchivePlan {
        let named = &local.root.parts;
        let in_place =
            |file: &String, size: &u64| remote.present.get(file) == Some(size) && !remote.damaged.contains(file);
        let part_uploads: Vec<String> = named.iter().filter(|(f, s)| !in_place(f, s)).map(|(f, _)| f.clone()).collect();
        let root_upload = remote.root_bytes.as_deref() != Some(local.root_bytes.as_slice());
        let grace = i64::try_from(options.grace.as_secs()).unwrap_or(i64::MAX);
        let (mut kept, mut deletes, mut newly) = (BTreeMap::new(), Vec::new(), Vec::new());
        for file in remote.present.keys().filter(|file| !named.contains_key(*file)) {
            let since = remote.retired.parts.get(file).copied();
            if since.unwrap_or(now).saturating_add(grace) <= now {
                deletes.push(file.clone());
            } else if let Some(since) = since {
                kept.insert(file.clone(), since);
            } else {
                newly.push(file.clone());
            }
        }
        let retired_changed = !newly.is_empty() || kept != remote.retired.parts;
        let unchanged = named.len() - part_uploads.len() + usize::from(!root_upload);
        ArchivePlan {
            part_uploads,
            root_upload,
            deletes,
            kept,
            newly,
            retired_changed,
            changed: remote.changed,
            unchanged,
            found_unfinished: remote.unfinished,
            stopped: remote.stopped,
            verify: options.verify,
        }
    }

    /// True when the publish writes nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.part_uploads.is_empty()
            && !self.root_upload
            && self.deletes.is_empty()
            && !self.retired_changed
            && !self.found_unfinished
    }

    /// The record of retired parts once this publish is done: those kept, and those it found
    /// unnamed, since `now`.
    pub(super) fn retired_after(&self, now: i64) -> Retired {
        let mut parts = self.kept.clone();
        parts.extend(self.newly.iter().map(|file| (file.clone(), now)));
        Retired { parts }
    }

    /// The summary of this plan (bytes and time filled in later).
    pub(super) fn summary(&self) -> PublishSummary {
        let mut uploads = self.part_uploads.clone();
        let mut waves = vec![uploads.len()];
        if self.root_upload {
            uploads.push(ROOT.to_string());
            waves.push(1);
        }
        waves.retain(|&n| n > 0);
        let plan = Plan { uploads, waves, unchanged: self.unchanged, deletes: self.deletes.clone() };
        PublishSummary {
            plan,
            changed: self.changed.clone(),
            bytes: 0,
            listed_because: self.verify.then_some("--verify"),
            repaired: 0,
            seconds: 0.0,
            kept: self.kept.len() + self.newly.len(),
        }
    }
}
