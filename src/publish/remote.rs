//! The async half of `gen publish`: takes the target's lock, reads what the target holds, then
//! uploads and deletes as the plan says, `--jobs` requests at a time, wave after wave.

pub(crate) use super::local::LocalTree;
pub(crate) use super::lock::LOCK;
use super::lock::{self, Held};
pub(crate) use super::marker::{MARKER, STOPPED};
use super::marker::{Marker, read_stopped, read_target};
use super::plan::{self, Remote};
use super::repair::{Look, MAX_LOOKS, list_and_compare};
use super::target::{Stage, Target, explain};
use super::{PublishOptions, PublishSummary};
use crate::tree::layout;
use crate::tree::listing::MAX_DOCUMENT_BYTES;
use crate::tree::manifest::MANIFEST_FILE;
use anyhow::{Result, bail};
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Takes the target's lock (unless `--dry-run`), then reads the target, plans, and carries the
/// plan out; the lock is given back however it ends, if it is still this publish's.
pub(crate) async fn publish(
    tree: &LocalTree<'_>,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
) -> Result<PublishSummary> {
    if options.dry_run {
        return publish_locked(tree, target, store, options, None).await;
    }
    let place = target.place(options.endpoint.as_deref());
    lock::run_locked(&*store, target, &place, options.take_over_lock, async |held| {
        publish_locked(tree, target, store.clone(), options, Some(held)).await
    })
    .await
}

/// Reads the target, plans, and (unless `--dry-run`) carries the plan out, holding `lock`.
async fn publish_locked(
    tree: &LocalTree<'_>,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
    lock: Option<&Held>,
) -> Result<PublishSummary> {
    let place = target.place(options.endpoint.as_deref());
    let found = read_target(target, &*store, &place).await?;
    if found.manifest.is_none() {
        refuse_archive_target(target, &*store, &place).await?;
    }
    let marker = &found.marker;
    let listed_because = if options.verify {
        Some("--verify")
    } else if !found.stopped.is_empty() {
        Some("a publish stopped when its lock was taken")
    } else if marker.is_some() {
        Some("a previous publish did not finish")
    } else if found.manifest.is_none() {
        Some("the target holds no manifest")
    } else {
        None
    };
    let files = &tree.manifest.files;
    let listed = match listed_because {
        Some(_) => Some(
            list_and_compare(tree, target, &*store, options.jobs, None)
                .await
                .map_err(|e| explain(e, "listing", target, &place, Stage::Before))?,
        ),
        None => None,
    };
    let remote = Remote {
        manifest_current: found.manifest_bytes.as_deref() == Some(tree.manifest_bytes),
        manifest_files: found.manifest.map(|m| m.files),
        pending_deletes: marker.as_ref().map(|m| m.deletes.union(&m.created).cloned().collect()).unwrap_or_default(),
        listed,
    };
    let plan = plan::plan(files, &remote, |path| {
        tree.files.read(path, MAX_DOCUMENT_BYTES).map(|bytes| layout::linked_files(&bytes)).unwrap_or_default()
    });
    let remote_files = remote.manifest_files;
    // what this publish changes, with what an unfinished one changed and did not report
    let mut changed: BTreeSet<String> = plan.uploads.iter().chain(&plan.deletes).cloned().collect();
    changed.extend(marker.iter().flat_map(|m| &m.changed).filter(|p| is_object_of_tree(p)).cloned());
    let mut summary = PublishSummary { plan, changed, bytes: 0, listed_because, repaired: 0, seconds: 0.0, kept: 0 };
    if options.dry_run {
        return Ok(summary);
    }
    if summary.plan.is_empty() && marker.is_none() {
        super::write_changed_urls(options, &tree.manifest.settings.base_url, &summary.changed, false)?;
        return Ok(summary);
    }
    let held = lock.expect("a publish that writes holds the lock");
    let listed_before = |path: &String| remote_files.as_ref().is_some_and(|old| old.contains_key(path));
    let new_marker = Marker {
        publishing: blake3::hash(tree.manifest_bytes).to_hex().to_string(),
        deletes: summary.plan.deletes.iter().cloned().collect(),
        // with what an earlier unfinished publish created, in case this one is stopped too
        created: summary
            .plan
            .uploads
            .iter()
            .chain(marker.iter().flat_map(|m| &m.created))
            .filter(|p| !listed_before(p) && layout::is_tree_file(p))
            .cloned()
            .collect(),
        changed: summary.changed.clone(),
    };
    // An unfinished publish found: what it may still write is looked at again at the end.
    let look = marker.as_ref().map(|marker| Look::after(marker, remote_files.as_ref(), files));
    let writer = Writer::new(tree, target, store, options, summary.plan.uploads.len() + summary.plan.deletes.len());
    writer.carry_out(&mut summary, held, &new_marker, found.stopped, look).await?;
    Ok(summary)
}

/// Refuses a target holding a published archive (its `root`, no `manifest.json`): a tree
/// published beside it would leave both there.
async fn refuse_archive_target(target: &Target, store: &dyn ObjectStore, place: &str) -> Result<()> {
    match store.head(&target.key(super::archive_plan::ROOT)).await {
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(explain(e, "looking for a published archive", target, place, Stage::Before)),
        Ok(_) => {
            let shown = target.shown.trim_end_matches('/');
            bail!(
                "{shown} holds a published archive (its root), and this is a tree: nothing was published. Publish \
                 the tree to an empty target or another prefix (e.g. {shown}/tree), then delete the archive's objects \
                 (root, parts/ and .gen-publish-retired.json); or publish an archive (`gen build --archive`) here"
            )
        }
    }
}

/// True for a path a publish writes: `manifest.json` or a file of the tree.
fn is_object_of_tree(path: &str) -> bool {
    path == MANIFEST_FILE || layout::is_tree_file(path)
}

/// Carries out uploads and deletes, counting them, with the progress bar.
pub(super) struct Writer<'a> {
    pub(super) tree: &'a LocalTree<'a>,
    pub(super) target: &'a Target,
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) options: &'a PublishOptions,
    pub(super) place: String,
    bar: crate::progress::Progress,
    bytes: AtomicU64,
}

impl<'a> Writer<'a> {
    fn new(
        tree: &'a LocalTree<'a>,
        target: &'a Target,
        store: Arc<dyn ObjectStore>,
        options: &'a PublishOptions,
        total: usize,
    ) -> Writer<'a> {
        let bar = crate::progress::Progress::new(options.progress, "publishing", "objects");
        bar.set_total(total as u64);
        Writer {
            tree,
            target,
            store,
            options,
            place: target.place(options.endpoint.as_deref()),
            bar,
            bytes: AtomicU64::new(0),
        }
    }

    /// Carries the plan out: the marker, the uploads wave by wave, the deletes, the second
    /// `look` when an unfinished publish was found ([`Writer::second_look`]), the
    /// `--changed-urls` file, then the marker and the `stopped` records read go. The lock is
    /// re-read before each wave, before the deletes and before the marker goes (see
    /// [`Writer::keep_lock`]).
    async fn carry_out(
        &self,
        summary: &mut PublishSummary,
        held: &Held,
        marker: &Marker,
        mut stopped: Vec<String>,
        look: Option<Look>,
    ) -> Result<()> {
        let (target, place) = (self.target, self.place.as_str());
        let marker = serde_json::to_vec(marker).expect("a marker always serialises");
        self.put(MARKER, marker.clone())
            .await
            .map_err(|e| explain(e, "writing the publish marker", target, place, Stage::Before))?;
        for wave in summary.plan.upload_waves() {
            self.keep_lock(held, &marker, "before writing its manifest (the published manifest is not this one's)")
                .await?;
            self.run(wave.iter().collect(), |path| self.upload(path)).await?;
        }
        let manifest_live = "after its manifest went live";
        self.keep_lock(held, &marker, &format!("{manifest_live}, before deleting removed objects")).await?;
        self.run(summary.plan.deletes.iter().collect(), |path| self.delete(path)).await?;
        if let Some(mut look) = look {
            self.second_look(summary, held, &marker, &mut look, &mut stopped).await?;
        }
        self.bar.finish();
        summary.bytes = self.bytes.load(Ordering::Relaxed);
        // The list of changed urls is written before the marker goes: if it cannot be, the marker
        // keeps the paths for the next publish.
        super::write_changed_urls(self.options, &self.tree.manifest.settings.base_url, &summary.changed, true)?;
        self.keep_lock(held, &marker, &format!("{manifest_live}, its deletes done")).await?;
        for path in std::iter::once(MARKER).chain(stopped.iter().map(String::as_str)) {
            match self.store.delete(&target.key(path)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(explain(e, "removing the publish marker", target, place, Stage::MarkerLeft)),
            }
        }
        Ok(())
    }

    /// The second look (see the module's documentation): lists the target, compares the paths
    /// the unfinished publishes named (those of records that appeared since this publish read
    /// the target too, which are then removed with the marker), and uploads or deletes what
    /// differs; again, at most [`MAX_LOOKS`] times, while a look repaired something. The lock is
    /// re-read before each repair.
    pub(super) async fn second_look(
        &self,
        summary: &mut PublishSummary,
        held: &Held,
        marker: &[u8],
        look: &mut Look,
        stopped: &mut Vec<String>,
    ) -> Result<()> {
        let (tree, target, place) = (self.tree, self.target, self.place.as_str());
        let in_tree = |path: &str| tree.manifest.files.contains_key(path);
        for _ in 0..MAX_LOOKS {
            let (records, found) = read_stopped(target, &*self.store, place, stopped).await?;
            if let Some(found) = &found {
                look.add(found, in_tree);
            }
            stopped.extend(records);
            let listed = list_and_compare(tree, target, &*self.store, self.options.jobs, Some(&look.suspects))
                .await
                .map_err(|e| explain(e, "listing", target, place, Stage::Repairing))?;
            let differ = |path: &&String| !listed.same.contains(*path);
            let (manifest, uploads): (Vec<&String>, Vec<&String>) = look
                .suspects
                .iter()
                .filter(|path| in_tree(path) || *path == MANIFEST_FILE)
                .filter(differ)
                .partition(|path| *path == MANIFEST_FILE);
            let deletes: Vec<&String> =
                look.suspects.intersection(&look.deletable).filter(|path| listed.present.contains(*path)).collect();
            if manifest.is_empty() && uploads.is_empty() && deletes.is_empty() {
                break;
            }
            let when = "after its manifest went live, before repairing what an unfinished publish wrote meanwhile";
            self.keep_lock(held, marker, when).await?;
            // the manifest last, as in a publish: what it lists is in place first
            for wave in [uploads.clone(), manifest.clone()] {
                self.run(wave, |path| self.upload_at(path, Stage::Repairing)).await?;
            }
            self.run(deletes.clone(), |path| self.delete(path)).await?;
            summary.repaired += manifest.len() + uploads.len() + deletes.len();
            summary.changed.extend(manifest.into_iter().chain(uploads).chain(deletes).cloned());
        }
        Ok(())
    }

    /// Re-reads the lock. If it is not `held` any more (gone, or another publish's), another
    /// publish may be writing beside this one: this one writes nothing more to the tree, leaves
    /// its `marker` as a record under [`STOPPED`] (after its last write) and fails, saying it
    /// stopped `when`.
    pub(super) async fn keep_lock(&self, held: &Held, marker: &[u8], when: &str) -> Result<()> {
        let Err(lock::Lost(why)) = lock::check(&*self.store, self.target, held).await else { return Ok(()) };
        let record = format!("{STOPPED}/{}.json", held.token);
        let left = match self.put(&record, marker.to_vec()).await {
            Ok(()) => format!(
                "it left {record} so that the next gen publish compares every object and repairs what the two \
                 publishes wrote over each other"
            ),
            Err(e) => format!(
                "its record {record} could not be written ({e}): once the other publish is done, run gen publish \
                 --verify, which compares every object"
            ),
        };
        bail!(
            "the lock of {} is not this publish's any more ({why}), so another publish may be writing there: this \
             publish stopped {when} and wrote nothing more to the tree; {left}. Publish again once the other \
             publish is done",
            self.target.shown
        )
    }

    /// Runs `each` over `paths`, `--jobs` at a time; the first error stops the rest.
    pub(super) async fn run<'p, F, Fut>(&self, paths: Vec<&'p String>, each: F) -> Result<()>
    where
        F: Fn(&'p String) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        stream::iter(paths.into_iter().map(each)).buffer_unordered(self.options.jobs.max(1)).try_collect::<()>().await
    }

    /// Uploads one file of the tree (its bytes checked against the manifest once more).
    async fn upload(&self, path: &String) -> Result<()> {
        self.upload_at(path, Stage::Before).await
    }

    /// [`Writer::upload`], its failure told as happening at `stage`.
    pub(super) async fn upload_at(&self, path: &String, stage: Stage) -> Result<()> {
        let bytes = if path == MANIFEST_FILE {
            self.tree.manifest_bytes.to_vec()
        } else {
            let file = self.tree.dir.join(path);
            let bytes = self.tree.read(path)?;
            if Some(&blake3::hash(&bytes).to_hex().to_string()) != self.tree.manifest.files.get(path) {
                bail!(
                    "{} changed while it was published (a build into the same folder?): publish again once it is done; \
                     the published manifest is still the previous one",
                    file.display()
                );
            }
            bytes
        };
        let size = bytes.len() as u64;
        self.put(path, bytes).await.map_err(|e| explain(e, "uploading", self.target, &self.place, stage))?;
        self.bytes.fetch_add(size, Ordering::Relaxed);
        self.bar.set_message(format!(", {:.1} MB", self.bytes.load(Ordering::Relaxed) as f64 / 1e6));
        self.count();
        Ok(())
    }

    /// Deletes the object of a file a published manifest listed.
    pub(super) async fn delete(&self, path: &str) -> Result<()> {
        match self.store.delete(&self.target.key(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(explain(e, "deleting", self.target, &self.place, Stage::Deleting)),
        }
        self.count();
        Ok(())
    }

    /// Writes one object with the tree's headers.
    async fn put(&self, path: &str, bytes: Vec<u8>) -> object_store::Result<()> {
        let mut attributes = Attributes::new();
        if self.target.has_headers() && crate::tree::layout::is_bulk_file(path) {
            // gzip already, named by its hash: sent as it is and cached forever
            use crate::bulk::{CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE};
            attributes.insert(Attribute::ContentType, CONTENT_TYPE.into());
            attributes.insert(Attribute::ContentEncoding, CONTENT_ENCODING.into());
            attributes.insert(Attribute::CacheControl, CACHE_CONTROL.into());
        } else if self.target.has_headers() {
            attributes.insert(Attribute::ContentType, crate::tree::media_type(path).into());
            let cache = if plan::no_cache(path) || path == MARKER || path == LOCK || path.starts_with(STOPPED) {
                "no-cache".to_string()
            } else {
                format!("public, max-age={}", self.options.max_age)
            };
            attributes.insert(Attribute::CacheControl, cache.into());
        }
        let options = PutOptions { attributes, ..PutOptions::default() };
        self.store.put_opts(&self.target.key(path), PutPayload::from(bytes), options).await.map(|_| ())
    }

    /// Counts one write done.
    fn count(&self) {
        self.bar.inc(1);
    }
}
