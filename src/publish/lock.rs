//! The publish lock, `.gen-publish.lock`: created only if absent, so that one publish at a time
//! writes to a target; re-read by its holder between waves (its token tells it is still its
//! own); given back only by its holder.
//!
//! Giving it back: the holder re-reads it and, where the store offers compare-and-swap
//! (`PutMode::Update`, `If-Match` on the version read), first marks it released with a write
//! that fails if anyone replaced it since, then deletes it. A publish that finds a released lock
//! waits for that delete (up to [`RELEASE_WAIT_POLLS`] polls) before taking it, so a take-over
//! and a release never cross. Without compare-and-swap (a `file://` folder) the re-read alone
//! decides.

use super::object::{ReadObject, read_failed, read_object};
use super::target::{Stage, Target, explain};
use anyhow::{Result, bail};
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The object a publish holds while it runs (beside `manifest.json`), created only if absent (a
/// conditional put): a second publish to the same target finds it and stops.
pub(crate) const LOCK: &str = ".gen-publish.lock";

/// Largest lock object read: gen writes a few hundred bytes (holder and time).
pub(crate) const MAX_LOCK_BYTES: u64 = 64 << 10;

/// How often a publish polls for a released lock to be gone before taking it (200 ms apart).
const RELEASE_WAIT_POLLS: u32 = 25;

/// Attempts at taking the lock while it keeps changing under the taker.
const MAX_TAKE_ATTEMPTS: u32 = 60;

/// What the lock says: who holds it, since when.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Lock {
    /// `user@host, pid N`.
    holder: String,
    /// When it was taken (RFC 3339, UTC).
    since: String,
    /// Tells this publish's lock from another's (the holder may publish twice).
    token: String,
    /// Set by its holder just before it deletes the lock.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    released: bool,
}

/// The lock this publish holds.
#[derive(Debug)]
pub(crate) struct Held {
    /// The token it wrote into the lock.
    pub(crate) token: String,
}

/// Why a publish's lock is not its own any more.
#[derive(Debug)]
pub(crate) struct Lost(pub(crate) String);

/// Creates the lock object if there is none (`If-None-Match: *`); with `take_over`, replaces the
/// one there (conditional on the version read, where the store can). A released lock is waited
/// for, then taken. Returns the lock held.
pub(crate) async fn take(store: &dyn ObjectStore, target: &Target, place: &str, take_over: bool) -> Result<Held> {
    // A read first: a missing bucket or a denied key is reported as such (some stores create a
    // bucket on the first write).
    store
        .list_with_delimiter(target.list_prefix().as_ref())
        .await
        .map_err(|e| explain(e, "listing", target, place, Stage::Before))?;
    let token = lock_token();
    let lock =
        Lock { holder: holder(), since: crate::date::rfc3339(now_secs()), token: token.clone(), released: false };
    let bytes = serde_json::to_vec_pretty(&lock).expect("a lock always serialises");
    let failed = |e| explain(e, "taking the publish lock", target, place, Stage::Before);
    let mut polls = 0;
    for _ in 0..MAX_TAKE_ATTEMPTS {
        match put(store, target, &bytes, PutMode::Create).await {
            Ok(()) => return checked(store, target, token).await,
            Err(object_store::Error::AlreadyExists { .. }) | Err(object_store::Error::Precondition { .. }) => {}
            Err(e @ object_store::Error::NotImplemented { .. }) => {
                return Err(failed(e).context(format!(
                    "{place} does not offer conditional writes (If-None-Match: *), which the publish lock needs"
                )));
            }
            Err(e) => return Err(failed(e)),
        }
        let Some((found, version)) = read(store, target, place).await? else { continue };
        if found.released && polls < RELEASE_WAIT_POLLS {
            // its holder deletes it next
            polls += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        if !found.released && !take_over {
            bail!(
                "another publish to {} is under way ({}): wait for it to end and publish again. If it is over \
                 (killed, or its machine gone), run again with --take-over-lock; nothing was changed",
                target.shown,
                held_by(&found)
            );
        }
        // asked to take it over, or released by a holder that did not get to delete it
        match swap(store, target, &bytes, version).await.map_err(failed)? {
            Swap::Done => return checked(store, target, token).await,
            Swap::Changed => continue,
            Swap::Unsupported => {
                put(store, target, &bytes, PutMode::Overwrite).await.map_err(failed)?;
                return checked(store, target, token).await;
            }
        }
    }
    bail!(
        "the lock {LOCK} of {} kept changing while this publish tried to take it (other publishes starting and \
         ending): nothing was changed; publish again in a moment",
        target.shown
    )
}

/// Runs `publish` holding the target's lock: takes it (replacing another's with `take_over`),
/// runs, then gives it back however the publish ended, if it is still this publish's (a lock
/// taken over by another publish is left alone). The two outcomes make one error: the
/// publish's, or the release's when only that failed.
pub(crate) async fn run_locked<T>(
    store: &dyn ObjectStore,
    target: &Target,
    place: &str,
    take_over: bool,
    publish: impl AsyncFnOnce(&Held) -> Result<T>,
) -> Result<T> {
    let held = take(store, target, place, take_over).await?;
    let result = publish(&held).await;
    let released = release(store, target, &held).await;
    match (result, released) {
        (Ok(done), Ok(_)) => Ok(done),
        (Ok(_), Err(e)) => Err(explain(e, "removing the publish lock", target, place, Stage::LockLeft)),
        (Err(e), Ok(_)) => Err(e),
        (Err(e), Err(_)) => Err(e.context(format!(
            "(the lock {LOCK} could not be removed either: the next publish must pass --take-over-lock)"
        ))),
    }
}

/// The lock held, once a read shows it is this publish's (on a store that ignores conditional
/// writes, another publish may have written it at the same time).
async fn checked(store: &dyn ObjectStore, target: &Target, token: String) -> Result<Held> {
    match check(store, target, &Held { token: token.clone() }).await {
        Ok(()) => Ok(Held { token }),
        Err(Lost(why)) => bail!(
            "the lock of {} is not this publish's ({why}): another publish took it at the same time; nothing was \
             changed. Publish again once it is done",
            target.shown
        ),
    }
}

/// Re-reads the lock: `Err` tells why it is not `held` any more (gone, another's, unreadable).
pub(crate) async fn check(store: &dyn ObjectStore, target: &Target, held: &Held) -> std::result::Result<(), Lost> {
    match read_object(store, target, LOCK, MAX_LOCK_BYTES).await {
        Ok(Some((bytes, _))) => match serde_json::from_slice::<Lock>(&bytes) {
            Ok(lock) if lock.token == held.token && !lock.released => Ok(()),
            Ok(lock) => Err(Lost(held_by(&lock))),
            Err(_) => Err(Lost(format!("{LOCK} holds something gen did not write"))),
        },
        Ok(None) => Err(Lost(format!("{LOCK} is gone: someone removed it while this publish ran"))),
        Err(ReadObject::TooLarge(size)) => Err(Lost(format!("{LOCK} is {size} bytes, not gen's"))),
        Err(ReadObject::Store(e)) => Err(Lost(format!("{LOCK} cannot be read: {e}"))),
    }
}

/// Gives the lock back if it is still `held`: re-read, marked released with a compare-and-swap
/// where the store has one (a take-over since the read makes it fail), then deleted. A lock
/// that is not this publish's any more is left as it is (the answer is then `false`).
pub(crate) async fn release(store: &dyn ObjectStore, target: &Target, held: &Held) -> object_store::Result<bool> {
    let (mut lock, version) = match read_object(store, target, LOCK, MAX_LOCK_BYTES).await {
        Ok(Some((bytes, version))) => match serde_json::from_slice::<Lock>(&bytes) {
            Ok(lock) if lock.token == held.token => (lock, version),
            _ => return Ok(false),
        },
        Ok(None) | Err(ReadObject::TooLarge(_)) => return Ok(false),
        Err(ReadObject::Store(e)) => return Err(e),
    };
    lock.released = true;
    let bytes = serde_json::to_vec_pretty(&lock).expect("a lock always serialises");
    match swap(store, target, &bytes, version).await? {
        Swap::Changed => return Ok(false),
        Swap::Done | Swap::Unsupported => {}
    }
    match store.delete(&target.key(LOCK)).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}

/// What a compare-and-swap of the lock did.
enum Swap {
    Done,
    /// The lock is not the version read any more.
    Changed,
    /// The store offers no compare-and-swap (a `file://` folder), or gave no version.
    Unsupported,
}

/// Replaces the lock with `bytes` only if it is still `version` (`If-Match` on its ETag, its
/// generation on GCS).
async fn swap(
    store: &dyn ObjectStore,
    target: &Target,
    bytes: &[u8],
    version: UpdateVersion,
) -> object_store::Result<Swap> {
    if version.e_tag.is_none() && version.version.is_none() {
        return Ok(Swap::Unsupported);
    }
    match put(store, target, bytes, PutMode::Update(version)).await {
        Ok(()) => Ok(Swap::Done),
        Err(object_store::Error::Precondition { .. }) | Err(object_store::Error::NotFound { .. }) => Ok(Swap::Changed),
        Err(object_store::Error::NotImplemented { .. }) => Ok(Swap::Unsupported),
        Err(e) => Err(e),
    }
}

async fn put(store: &dyn ObjectStore, target: &Target, bytes: &[u8], mode: PutMode) -> object_store::Result<()> {
    let mut attributes = object_store::Attributes::new();
    if target.has_headers() {
        attributes.insert(object_store::Attribute::ContentType, crate::tree::media_type(LOCK).into());
        attributes.insert(object_store::Attribute::CacheControl, "no-cache".into());
    }
    let options = PutOptions { mode, attributes, ..PutOptions::default() };
    store.put_opts(&target.key(LOCK), PutPayload::from(bytes.to_vec()), options).await.map(|_| ())
}

/// The lock on the target and its version, `None` when there is none. An object larger than
/// gen writes, or one that is not a lock, is refused: it is not gen's.
async fn read(store: &dyn ObjectStore, target: &Target, place: &str) -> Result<Option<(Lock, UpdateVersion)>> {
    let Some((bytes, version)) = read_object(store, target, LOCK, MAX_LOCK_BYTES)
        .await
        .map_err(|e| read_failed(e, LOCK, MAX_LOCK_BYTES, "reading the publish lock", target, place))?
    else {
        return Ok(None);
    };
    match serde_json::from_slice(&bytes) {
        Ok(lock) => Ok(Some((lock, version))),
        Err(_) => bail!(
            "{}/{LOCK} is not a lock written by gen: it is not gen's. Nothing was published; remove that object \
             from the target, then publish again",
            target.shown.trim_end_matches('/')
        ),
    }
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
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{} {nanos} {}", holder(), COUNT.fetch_add(1, Ordering::Relaxed));
    blake3::hash(seed.as_bytes()).to_hex()[..32].to_string()
}
