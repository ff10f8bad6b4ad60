//! The async half of `gen publish`: reads what the target holds, then uploads and deletes as the
//! plan says, `--jobs` requests at a time, phase after phase.

use super::plan::{self, Listed, Phase, Remote};
use super::target::{Target, explain};
use super::{PublishOptions, PublishSummary};
use crate::manifest::{MANIFEST_FILE, Manifest};
use anyhow::{Result, bail};
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The object an unfinished publish leaves on the target (beside `manifest.json`): written before
/// the first upload, removed after the last delete.
pub const MARKER: &str = ".gen-publish.json";

/// Test hook: `gen publish` kills itself (SIGKILL) once this many objects were written or
/// deleted, so that the tests can stop it at a chosen point.
const KILL_AFTER: &str = "GEN_PUBLISH_TEST_KILL_AFTER";

/// What the marker says: what the next publish may delete if this one does not finish.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Marker {
    /// BLAKE3 of the manifest being published.
    publishing: String,
    /// Paths a published manifest listed that the publish will delete after its manifest.
    deletes: BTreeSet<String>,
    /// Paths the publish writes that the published manifest does not list: if it is killed and
    /// the tree published next lacks them, they are its leftovers, not someone else's files.
    #[serde(default)]
    created: BTreeSet<String>,
}

/// The local tree being published.
pub struct Tree<'a> {
    pub dir: &'a Path,
    pub manifest: &'a Manifest,
    pub manifest_bytes: &'a [u8],
}

/// Reads the target, plans, and (unless `--dry-run`) carries the plan out.
pub async fn publish(
    tree: &Tree<'_>,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
) -> Result<PublishSummary> {
    let place = target.place(options.endpoint.as_deref());
    let place = place.as_str();
    let fail = |doing: &'static str| move |e| explain(e, doing, target, place);
    let old_manifest = read_optional(&*store, target, MANIFEST_FILE).await.map_err(fail("reading manifest.json"))?;
    let marker = read_optional(&*store, target, MARKER).await.map_err(fail("reading the publish marker"))?;
    let marker: Option<Marker> = marker.map(|bytes| serde_json::from_slice(&bytes).unwrap_or_default());
    let old = match &old_manifest {
        Some(bytes) => Some(Manifest::from_bytes(bytes).map_err(|_| {
            anyhow::anyhow!(
                "{}/{MANIFEST_FILE} is not a manifest written by gen: publish into an empty bucket or another prefix",
                target.shown.trim_end_matches('/')
            )
        })?),
        None => None,
    };
    let listed_because = if options.verify {
        Some("--verify")
    } else if marker.is_some() {
        Some("a previous publish did not finish")
    } else if old.is_none() {
        Some("the target holds no manifest")
    } else {
        None
    };
    let files = &tree.manifest.files;
    let listed = match listed_because {
        Some(_) => Some(list_and_compare(tree, target, &*store, options.jobs).await.map_err(fail("listing"))?),
        None => None,
    };
    let mut remote = Remote {
        manifest_current: old_manifest.as_deref() == Some(tree.manifest_bytes),
        manifest_files: old.map(|m| m.files),
        pending_deletes: marker.as_ref().map(|m| m.deletes.union(&m.created).cloned().collect()).unwrap_or_default(),
        listed,
    };
    let plan = plan::plan(files, &remote);
    let remote_files = remote.manifest_files.take();
    drop(remote);
    let mut summary = PublishSummary { plan, bytes: 0, listed: listed_because.is_some(), listed_because, seconds: 0.0 };
    if options.dry_run {
        return Ok(summary);
    }
    if summary.plan.is_empty() && marker.is_none() {
        return Ok(summary);
    }
    let writer =
        Writer::new(tree, target, store.clone(), options, summary.plan.uploads.len() + summary.plan.deletes.len());
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
            .filter(|p| !listed_before(p) && *p != MANIFEST_FILE)
            .cloned()
            .collect(),
    };
    let marker_bytes = serde_json::to_vec(&new_marker).expect("a marker always serialises");
    writer.put(MARKER, marker_bytes).await.map_err(fail("writing the publish marker"))?;
    for phase in [Phase::Leaves, Phase::Roots, Phase::Manifest] {
        let paths: Vec<&String> = summary.plan.uploads_in(phase).collect();
        writer.run(paths, |path| writer.upload(path)).await?;
    }
    writer.run(summary.plan.deletes.iter().collect(), |path| writer.delete(path)).await?;
    store.delete(&target.key(MARKER)).await.map_err(fail("removing the publish marker"))?;
    writer.bar.finish();
    summary.bytes = writer.bytes.load(Ordering::Relaxed);
    Ok(summary)
}

/// The bytes of the object at `path` of the tree, or `None` when there is none.
async fn read_optional(store: &dyn ObjectStore, target: &Target, path: &str) -> object_store::Result<Option<Vec<u8>>> {
    match store.get(&target.key(path)).await {
        Ok(result) => Ok(Some(result.bytes().await?.to_vec())),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Lists the target and tells which files of the tree it already holds with the same bytes:
/// by the object's MD5 (its ETag on S3) when the store gives one, else by reading it back.
async fn list_and_compare(
    tree: &Tree<'_>,
    target: &Target,
    store: &dyn ObjectStore,
    jobs: usize,
) -> object_store::Result<Listed> {
    /// How an object present on the target is compared with the local file.
    enum Check {
        /// By the MD5 its ETag states (S3, for objects not uploaded in parts).
        Md5(String),
        /// By reading it back (a local folder, or an ETag that is no MD5).
        Read,
    }
    let mut present = BTreeSet::new();
    let mut checks: Vec<(String, Check)> = Vec::new();
    let mut listing = store.list(target.list_prefix().as_ref());
    while let Some(meta) = listing.try_next().await? {
        let Some(path) = target.relative(&meta.location) else { continue };
        if tree.manifest.files.contains_key(&path) {
            let md5 = meta.e_tag.as_deref().map(|t| t.trim_matches('"').to_ascii_lowercase());
            match md5.filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
                Some(md5) => {
                    let local_size = std::fs::metadata(tree.dir.join(&path)).map(|m| m.len()).ok();
                    if local_size == Some(meta.size) {
                        checks.push((path.clone(), Check::Md5(md5)));
                    }
                }
                None => checks.push((path.clone(), Check::Read)),
            }
        }
        present.insert(path);
    }
    let same: BTreeSet<String> = stream::iter(checks)
        .map(|(path, check)| async move {
            let equal = match check {
                Check::Md5(md5) => std::fs::read(tree.dir.join(&path)).is_ok_and(|local| md5_hex(&local) == md5),
                Check::Read => {
                    let bytes = store.get(&target.key(&path)).await?.bytes().await?;
                    Some(&blake3::hash(&bytes).to_hex().to_string()) == tree.manifest.files.get(&path)
                }
            };
            Ok::<_, object_store::Error>(equal.then_some(path))
        })
        .buffer_unordered(jobs.max(1))
        .try_filter_map(|path| async move { Ok(path) })
        .try_collect()
        .await?;
    Ok(Listed { present, same })
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest as _;
    let digest = md5::Md5::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Carries out uploads and deletes, counting them, with the progress bar.
struct Writer<'a> {
    tree: &'a Tree<'a>,
    target: &'a Target,
    store: Arc<dyn ObjectStore>,
    options: &'a PublishOptions,
    place: String,
    bar: crate::progress::Progress,
    bytes: AtomicU64,
    done: AtomicUsize,
    kill_after: Option<usize>,
}

impl<'a> Writer<'a> {
    fn new(
        tree: &'a Tree<'a>,
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
            done: AtomicUsize::new(0),
            kill_after: std::env::var(KILL_AFTER).ok().and_then(|v| v.parse().ok()),
        }
    }

    /// Runs `each` over `paths`, `--jobs` at a time; the first error stops the rest.
    async fn run<'p, F, Fut>(&self, paths: Vec<&'p String>, each: F) -> Result<()>
    where
        F: Fn(&'p String) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        stream::iter(paths.into_iter().map(each)).buffer_unordered(self.options.jobs.max(1)).try_collect::<()>().await
    }

    /// Uploads one file of the tree (its bytes checked against the manifest once more).
    async fn upload(&self, path: &String) -> Result<()> {
        let bytes = if path == MANIFEST_FILE {
            self.tree.manifest_bytes.to_vec()
        } else {
            let file = self.tree.dir.join(path);
            let bytes = std::fs::read(&file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
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
        self.put(path, bytes).await.map_err(|e| explain(e, "uploading", self.target, &self.place))?;
        self.bytes.fetch_add(size, Ordering::Relaxed);
        self.bar.set_message(format!(", {:.1} MB", self.bytes.load(Ordering::Relaxed) as f64 / 1e6));
        self.count();
        Ok(())
    }

    /// Deletes the object of a file a published manifest listed.
    async fn delete(&self, path: &str) -> Result<()> {
        match self.store.delete(&self.target.key(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(explain(e, "deleting", self.target, &self.place)),
        }
        self.count();
        Ok(())
    }

    /// Writes one object with the tree's headers.
    async fn put(&self, path: &str, bytes: Vec<u8>) -> object_store::Result<()> {
        let mut attributes = Attributes::new();
        if self.target.has_headers() {
            attributes.insert(Attribute::ContentType, "application/json; charset=utf-8".into());
            let cache = if plan::no_cache(path) || path == MARKER {
                "no-cache".to_string()
            } else {
                format!("public, max-age={}", self.options.max_age)
            };
            attributes.insert(Attribute::CacheControl, cache.into());
        }
        let options = PutOptions { attributes, ..PutOptions::default() };
        self.store.put_opts(&self.target.key(path), PutPayload::from(bytes), options).await.map(|_| ())
    }

    /// Counts one write done; the test hook may end the process here.
    fn count(&self) {
        self.bar.inc(1);
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.kill_after == Some(done) {
            // SAFETY: kill and getpid have no preconditions.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}
