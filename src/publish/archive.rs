//! `gen publish` of an archive (docs/deploy.md, "Publishing an archive"): the parts the target
//! does not hold yet, then the root, last, under the lock and the marker of a tree's publish.
//! Parts no root names any longer are deleted only once they have been unnamed for the grace
//! period, which a small record on the target (`.gen-publish-retired.json`) measures from the
//! publish that stopped naming them.

use super::archive_plan::{ArchivePlan, LocalArchive, RETIRED, ROOT, Retired, read_remote};
use super::lock::{self, Held};
use super::marker::{MARKER, Marker, STOPPED};
use super::target::{Stage, Target, explain};
use super::{PublishOptions, PublishSummary};
use anyhow::{Result, bail};
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A part is named by its content and never changes: cached for a year, never revalidated.
pub(crate) const PART_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";
/// The root changes with every publish: revalidated on every use (its ETag makes that cheap).
pub(crate) const ROOT_CACHE_CONTROL: &str = "no-cache";
/// The media type of the parts and the root: bytes read by range, not a document.
const OCTETS: &str = "application/octet-stream";
/// Most part uploads in flight at once whatever `--jobs` says: a part is up to 64 MiB, held
/// whole while it is sent.
const MAX_PART_JOBS: usize = 4;

/// Takes the target's lock (unless `--dry-run`), reads what the target holds, plans, and
/// carries the plan out; the lock is given back however it ends, if it is still this publish's.
pub(super) async fn publish(
    local: &LocalArchive,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
) -> Result<PublishSummary> {
    let place = target.place(options.endpoint.as_deref());
    if options.dry_run {
        let remote = read_remote(local, target, &*store, &place, options.verify).await?;
        return Ok(ArchivePlan::new(local, remote, options, now_secs()).summary());
    }
    lock::run_locked(&*store, target, &place, options.take_over_lock, async |held| {
        publish_locked(local, target, store.clone(), options, held).await
    })
    .await
}

/// Reads the target, plans and carries the plan out, holding the lock.
async fn publish_locked(
    local: &LocalArchive,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
    held: &Held,
) -> Result<PublishSummary> {
    let place = target.place(options.endpoint.as_deref());
    let remote = read_remote(local, target, &*store, &place, options.verify).await?;
    let plan = ArchivePlan::new(local, remote, options, now_secs());
    let mut summary = plan.summary();
    if plan.is_empty() {
        super::write_changed_urls(options, &local.base_url, &summary.changed, false)?;
        return Ok(summary);
    }
    let writer = Writer { local, target, store, options, place, bytes: AtomicU64::new(0) };
    writer.carry_out(&plan, held).await?;
    summary.bytes = writer.bytes.load(Ordering::Relaxed);
    Ok(summary)
}

/// Carries out an archive's plan.
struct Writer<'a> {
    local: &'a LocalArchive,
    target: &'a Target,
    store: Arc<dyn ObjectStore>,
    options: &'a PublishOptions,
    place: String,
    bytes: AtomicU64,
}

impl Writer<'_> {
    /// The marker, the new parts, the root (the commit point), the deletes of parts unnamed
    /// for longer than the grace, the record of retired parts, the `--changed-urls` file, then
    /// the marker goes. The lock is re-read before the root and before the deletes.
    async fn carry_out(&self, plan: &ArchivePlan, held: &Held) -> Result<()> {
        let (target, place) = (self.target, self.place.as_str());
        let marker = Marker {
            publishing: blake3::hash(&self.local.root_bytes).to_hex().to_string(),
            changed: plan.changed.clone(),
            ..Marker::default()
        };
        let marker = serde_json::to_vec(&marker).expect("a marker always serialises");
        self.put(MARKER, marker.clone(), None)
            .await
            .map_err(|e| explain(e, "writing the publish marker", target, place, Stage::Before))?;
        let jobs = self.options.jobs.clamp(1, MAX_PART_JOBS);
        stream::iter(plan.part_uploads.iter().map(|file| self.upload_part(file)))
            .buffer_unordered(jobs)
            .try_collect::<()>()
            .await?;
        if plan.root_upload {
            self.keep_lock(held, &marker, "before writing its root (the published root is still the previous one)")
                .await?;
            self.put_root().await?;
            if plan.found_unfinished {
                // a write of the publish it replaced may land late: the root is looked at again
                self.root_again().await?;
            }
        }
        self.keep_lock(held, &marker, "after its root went live, before deleting parts no root names").await?;
        for file in &plan.deletes {
            match self.store.delete(&target.key(file)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(explain(e, "deleting a part no root names", target, place, Stage::Deleting)),
            }
        }
        if plan.retired_changed {
            self.put_retired(&plan.retired_after(now_secs())).await?;
        }
        super::write_changed_urls(self.options, &self.local.base_url, &plan.changed, true)?;
        for path in std::iter::once(MARKER).chain(plan.stopped.iter().map(String::as_str)) {
            match self.store.delete(&target.key(path)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(explain(e, "removing the publish marker", target, place, Stage::MarkerLeft)),
            }
        }
        Ok(())
    }

    /// Uploads one part, its bytes checked against its name first.
    async fn upload_part(&self, file: &str) -> Result<()> {
        let bytes = self.local.read_part(file)?;
        let size = bytes.len() as u64;
        self.put(file, bytes, Some(PART_CACHE_CONTROL))
            .await
            .map_err(|e| explain(e, "uploading a part", self.target, &self.place, Stage::Before))?;
        self.bytes.fetch_add(size, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the root: the commit point.
    async fn put_root(&self) -> Result<()> {
        let bytes = self.local.root_bytes.clone();
        let size = bytes.len() as u64;
        self.put(ROOT, bytes, Some(ROOT_CACHE_CONTROL))
            .await
            .map_err(|e| explain(e, "writing the root", self.target, &self.place, Stage::Before))?;
        self.bytes.fetch_add(size, Ordering::Relaxed);
        Ok(())
    }

    /// Reads the root back and writes it again when it is not this publish's (a late write of
    /// the killed publish this one replaced); at most three times.
    async fn root_again(&self) -> Result<()> {
        for _ in 0..3 {
            let found = self.store.get(&self.target.key(ROOT)).await;
            let same = match found {
                Ok(result) => result.bytes().await.is_ok_and(|b| b.as_ref() == self.local.root_bytes.as_slice()),
                Err(_) => false,
            };
            if same {
                return Ok(());
            }
            self.put_root().await?;
        }
        Ok(())
    }

    /// Writes the record of the parts no root names.
    async fn put_retired(&self, retired: &Retired) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(retired).expect("a record always serialises");
        self.put(RETIRED, bytes, None)
            .await
            .map_err(|e| explain(e, "writing the record of retired parts", self.target, &self.place, Stage::MarkerLeft))
    }

    /// Re-reads the lock: if it is not `held` any more, this publish writes nothing more, leaves
    /// its marker as a record of a stopped publish and fails, saying it stopped `when`.
    async fn keep_lock(&self, held: &Held, marker: &[u8], when: &str) -> Result<()> {
        let Err(lock::Lost(why)) = lock::check(&*self.store, self.target, held).await else { return Ok(()) };
        let record = format!("{STOPPED}/{}.json", held.token);
        let _ = self.put(&record, marker.to_vec(), None).await;
        bail!(
            "the lock of {} is not this publish's any more ({why}), so another publish may be writing there: this \
             publish stopped {when} and wrote nothing more; publish again once the other publish is done",
            self.target.shown
        )
    }

    /// Writes one object: a part or the root with their headers, gen's own records `no-cache`.
    async fn put(&self, path: &str, bytes: Vec<u8>, cache: Option<&str>) -> object_store::Result<()> {
        let mut attributes = Attributes::new();
        if self.target.has_headers() {
            let media = if cache.is_some() { OCTETS } else { "application/json" };
            attributes.insert(Attribute::ContentType, media.to_string().into());
            attributes.insert(Attribute::CacheControl, cache.unwrap_or("no-cache").to_string().into());
        }
        let options = PutOptions { attributes, ..PutOptions::default() };
        self.store.put_opts(&self.target.key(path), PutPayload::from(bytes), options).await.map(|_| ())
    }
}

/// Seconds since the epoch.
pub(super) fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
