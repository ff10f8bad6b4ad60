//! The async half of `gen publish`: takes the target's lock, reads what the target holds, then
//! uploads and deletes as the plan says, `--jobs` requests at a time, wave after wave.

use super::plan::{self, Listed, Remote};
use super::target::{Stage, Target, explain};
use super::{PublishOptions, PublishSummary};
use crate::build::tree_fs::TreeDir;
use crate::layout;
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest};
use crate::serve::files::MAX_DOCUMENT_BYTES;
use anyhow::{Result, bail};
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The object an unfinished publish leaves on the target (beside `manifest.json`): written before
/// the first upload, removed after the last delete.
pub const MARKER: &str = ".gen-publish.json";

/// The object a publish holds while it runs (beside `manifest.json`), created only if absent (a
/// conditional put): a second publish to the same target finds it and stops.
pub const LOCK: &str = ".gen-publish.lock";

/// Largest lock object read: gen writes a few hundred bytes (holder and time).
const MAX_LOCK_BYTES: u64 = 64 << 10;

/// What the marker says: what the next publish may delete if this one does not finish. Every
/// path it lists is checked with [`layout::is_tree_file`] before it is acted on: a marker is
/// read from the bucket, where anyone with write access may have put it.
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
    /// Paths uploaded or deleted whose urls are not yet written to a `--changed-urls` file: the
    /// next publish adds them to its own list, so a purge list is never lost.
    #[serde(default)]
    changed: BTreeSet<String>,
}

/// What the lock says: who holds it, since when.
#[derive(Debug, Serialize, Deserialize)]
struct Lock {
    /// `user@host, pid N`.
    holder: String,
    /// When it was taken (RFC 3339, UTC).
    since: String,
    /// Tells this publish's lock from another's (the holder may publish twice).
    token: String,
}

/// The local tree being published.
pub struct Tree<'a> {
    pub dir: &'a Path,
    /// The same folder, read without following a link inside it (see [`Tree::read`]).
    pub files: &'a TreeDir,
    pub manifest: &'a Manifest,
    pub manifest_bytes: &'a [u8],
}

impl Tree<'_> {
    /// The bytes of the tree's file at `path`, read as the build and `gen serve` read the tree:
    /// a regular file of at most 1 GiB, no link followed on the way, no wait on a pipe. A link
    /// to `/dev/zero` or a FIFO put into `out/` is refused, saying which file and what to do.
    pub fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.files.read_file(path, MAX_DOCUMENT_BYTES).map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::NotFound { "no such file".to_string() } else { e.to_string() };
            anyhow::anyhow!(
                "cannot read {} ({why}; a link, a pipe or a device is never read as a file of the tree): rebuild \
                 the tree with `gen build`, then publish again",
                self.dir.join(path).display()
            )
        })
    }
}

/// Takes the target's lock (unless `--dry-run`), then reads the target, plans, and carries the
/// plan out; the lock is given back however it ends.
pub async fn publish(
    tree: &Tree<'_>,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
) -> Result<PublishSummary> {
    if options.dry_run {
        return publish_locked(tree, target, store, options, None).await;
    }
    let place = target.place(options.endpoint.as_deref());
    let lock = take_lock(&*store, target, &place, options.take_over_lock).await?;
    let result = publish_locked(tree, target, store.clone(), options, Some(&lock)).await;
    let released = store.delete(&target.key(LOCK)).await;
    match (result, released) {
        (Ok(summary), Ok(())) => Ok(summary),
        (Ok(_), Err(e)) => Err(explain(e, "removing the publish lock", target, &place, Stage::LockLeft)),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(_)) => Err(e.context(format!(
            "(the lock {LOCK} could not be removed either: the next publish must pass --take-over-lock)"
        ))),
    }
}

/// Creates the lock object if there is none (`If-None-Match: *`); with `take_over`, replaces the
/// one there. Returns this publish's token.
async fn take_lock(store: &dyn ObjectStore, target: &Target, place: &str, take_over: bool) -> Result<String> {
    // A read first: a missing bucket or a denied key is reported as such (some stores create a
    // bucket on the first write).
    store
        .list_with_delimiter(target.list_prefix().as_ref())
        .await
        .map_err(|e| explain(e, "listing", target, place, Stage::Before))?;
    let token = lock_token();
    let lock = Lock { holder: holder(), since: crate::date::rfc3339(now_secs()), token: token.clone() };
    let bytes = serde_json::to_vec_pretty(&lock).expect("a lock always serialises");
    let mode = if take_over { PutMode::Overwrite } else { PutMode::Create };
    let options = PutOptions { mode, ..PutOptions::default() };
    match store.put_opts(&target.key(LOCK), PutPayload::from(bytes), options).await {
        Ok(_) => {}
        Err(object_store::Error::AlreadyExists { .. }) | Err(object_store::Error::Precondition { .. }) => {
            bail!(
                "another publish to {} is under way ({}): wait for it to end and publish again. If it is over \
                 (killed, or its machine gone), run again with --take-over-lock; nothing was changed",
                target.shown,
                read_lock(store, target).await.map_or("its lock cannot be read".into(), |l| held_by(&l))
            );
        }
        Err(e @ object_store::Error::NotImplemented { .. }) => {
            return Err(explain(e, "taking the publish lock", target, place, Stage::Before).context(format!(
                "{place} does not offer conditional writes (If-None-Match: *), which the publish lock needs"
            )));
        }
        Err(e) => return Err(explain(e, "taking the publish lock", target, place, Stage::Before)),
    }
    check_lock(store, target, &token).await?;
    Ok(token)
}

/// Fails unless the lock on the target is still this publish's: another publish took it over
/// (or, on a store that ignores conditional writes, took it at the same time).
async fn check_lock(store: &dyn ObjectStore, target: &Target, token: &str) -> Result<()> {
    match read_lock(store, target).await {
        Some(lock) if lock.token == token => Ok(()),
        other => bail!(
            "the lock of {} is not this publish's any more ({}): this publish stopped; the published manifest is \
             what the other publish leaves. Publish again once it is done",
            target.shown,
            other.map_or("it is gone".into(), |l| held_by(&l))
        ),
    }
}

async fn read_lock(store: &dyn ObjectStore, target: &Target) -> Option<Lock> {
    let bytes = read_optional(store, target, LOCK, MAX_LOCK_BYTES).await.ok()??;
    serde_json::from_slice(&bytes).ok()
}

fn held_by(lock: &Lock) -> String {
    format!("{LOCK} taken by {} at {}", lock.holder, lock.since)
}

/// `user@host, pid N`, for the lock.
fn holder() -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "?".into());
    let mut name = [0u8; 256];
    // SAFETY: the buffer is writable for its length; gethostname writes at most that many bytes.
    let host = if unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0 {
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    } else {
        "?".into()
    };
    format!("{user}@{host}, pid {}", std::process::id())
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A value no other publish's lock holds: the holder, the time to the nanosecond, a counter.
fn lock_token() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{} {nanos} {}", holder(), COUNT.fetch_add(1, Ordering::Relaxed));
    blake3::hash(seed.as_bytes()).to_hex()[..32].to_string()
}

/// Reads the target, plans, and (unless `--dry-run`) carries the plan out, holding `lock`.
async fn publish_locked(
    tree: &Tree<'_>,
    target: &Target,
    store: Arc<dyn ObjectStore>,
    options: &PublishOptions,
    lock: Option<&str>,
) -> Result<PublishSummary> {
    let place = target.place(options.endpoint.as_deref());
    let place = place.as_str();
    let fail = |doing: &'static str| move |e| explain(e, doing, target, place, Stage::Before);
    // both bounded like the local manifest: a marker lists at most what a manifest does
    let old_manifest = read_optional(&*store, target, MANIFEST_FILE, MAX_MANIFEST_BYTES)
        .await
        .map_err(|e| read_failed(e, MANIFEST_FILE, "reading manifest.json", target, place))?;
    let marker = read_optional(&*store, target, MARKER, MAX_MANIFEST_BYTES)
        .await
        .map_err(|e| read_failed(e, MARKER, "reading the publish marker", target, place))?;
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
    let plan = plan::plan(files, &remote, |path| {
        tree.files.read(path, MAX_DOCUMENT_BYTES).map(|bytes| layout::linked_files(&bytes)).unwrap_or_default()
    });
    let remote_files = remote.manifest_files.take();
    drop(remote);
    // what this publish changes, with what an unfinished one changed and did not report
    let mut changed: BTreeSet<String> = plan.uploads.iter().chain(&plan.deletes).cloned().collect();
    changed.extend(marker.iter().flat_map(|m| &m.changed).filter(|p| is_object_of_tree(p)).cloned());
    let mut summary =
        PublishSummary { plan, changed, bytes: 0, listed: listed_because.is_some(), listed_because, seconds: 0.0 };
    if options.dry_run {
        return Ok(summary);
    }
    if summary.plan.is_empty() && marker.is_none() {
        super::write_changed_urls(options, &tree.manifest.settings.base_url, &summary.changed, false)?;
        return Ok(summary);
    }
    let lock = lock.expect("a publish that writes holds the lock");
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
            .filter(|p| !listed_before(p) && layout::is_tree_file(p))
            .cloned()
            .collect(),
        changed: summary.changed.clone(),
    };
    let marker_bytes = serde_json::to_vec(&new_marker).expect("a marker always serialises");
    writer.put(MARKER, marker_bytes).await.map_err(fail("writing the publish marker"))?;
    for wave in summary.plan.upload_waves() {
        if wave.iter().any(|path| path == MANIFEST_FILE) {
            // the commit point: only while this publish still holds the lock
            check_lock(&*store, target, lock).await?;
        }
        writer.run(wave.iter().collect(), |path| writer.upload(path)).await?;
    }
    writer.run(summary.plan.deletes.iter().collect(), |path| writer.delete(path)).await?;
    writer.bar.finish();
    summary.bytes = writer.bytes.load(Ordering::Relaxed);
    // The list of changed urls is written before the marker goes: if it cannot be, the marker
    // keeps the paths for the next publish.
    super::write_changed_urls(options, &tree.manifest.settings.base_url, &summary.changed, true)?;
    store
        .delete(&target.key(MARKER))
        .await
        .map_err(|e| explain(e, "removing the publish marker", target, place, Stage::MarkerLeft))?;
    Ok(summary)
}

/// True for a path a publish writes: `manifest.json` or a file of the tree.
fn is_object_of_tree(path: &str) -> bool {
    path == MANIFEST_FILE || layout::is_tree_file(path)
}

/// What reading one of gen's own objects of the target (manifest, marker, lock) can end in.
enum ReadObject {
    Store(object_store::Error),
    /// More bytes than gen ever writes there: at least this many.
    TooLarge(u64),
}

/// The bytes of the object at `path` of the tree, or `None` when there is none: at most `limit`
/// bytes, read as a stream. A larger object is refused by the size the store states, or once
/// the stream passes the limit: it is never held whole.
async fn read_optional(
    store: &dyn ObjectStore,
    target: &Target,
    path: &str,
    limit: u64,
) -> std::result::Result<Option<Vec<u8>>, ReadObject> {
    let result = match store.get(&target.key(path)).await {
        Ok(result) => result,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(ReadObject::Store(e)),
    };
    let size = result.meta.size;
    if size > limit {
        return Err(ReadObject::TooLarge(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    let mut stream = result.into_stream();
    while let Some(chunk) = stream.try_next().await.map_err(ReadObject::Store)? {
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(ReadObject::TooLarge((bytes.len() + chunk.len()) as u64));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

/// The error for [`read_optional`]'s failure on `path`, `doing` it.
fn read_failed(e: ReadObject, path: &str, doing: &str, target: &Target, place: &str) -> anyhow::Error {
    match e {
        ReadObject::Store(e) => explain(e, doing, target, place, Stage::Before),
        ReadObject::TooLarge(size) => anyhow::anyhow!(
            "{}/{path} is {size} bytes, more than gen ever writes there ({} MB at most): it is not gen's, and it \
             was not read. Nothing was published; remove that object from the target, then publish again",
            target.shown.trim_end_matches('/'),
            MAX_MANIFEST_BYTES >> 20
        ),
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
                    let local_size = tree.files.stamp(&path).map(|stamp| stamp.size);
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
                Check::Md5(md5) => tree.read(&path).is_ok_and(|local| md5_hex(&local) == md5),
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
        self.put(path, bytes).await.map_err(|e| explain(e, "uploading", self.target, &self.place, Stage::Before))?;
        self.bytes.fetch_add(size, Ordering::Relaxed);
        self.bar.set_message(format!(", {:.1} MB", self.bytes.load(Ordering::Relaxed) as f64 / 1e6));
        self.count();
        Ok(())
    }

    /// Deletes the object of a file a published manifest listed.
    async fn delete(&self, path: &str) -> Result<()> {
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
        if self.target.has_headers() {
            attributes.insert(Attribute::ContentType, "application/json; charset=utf-8".into());
            let cache = if plan::no_cache(path) || path == MARKER || path == LOCK {
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
